"""A state update in place before an op that can fail (src/session.c's undo journal): a streaming
attention step shaped like Mimi's transformer writes its new KV rows into the cache slots, though an
index check computed from the attention's output (as Kyutai STT's language model embeds the codes Mimi
computes) runs after those writes; the step equals eager over many calls and a reset, and a call that
fails at that check leaves the state byte for byte as it was."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tandem
from tandem.ir import STATE


class StreamingAttention(nn.Module):
    """One streaming attention layer over a ring KV cache [2, 1, heads, context, head_dim] written
    with index_copy_ at the stream's position (`rows` new rows a step), then an embedding whose index
    is the input token moved by one where the attention's output sums above zero: its check runs after
    the cache writes."""

    def __init__(self, dim=512, heads=8, context=250, vocab=16):
        super().__init__()
        self.heads, self.context = heads, context
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.emb = nn.Embedding(vocab, dim)
        self.register_buffer("cache", torch.zeros(2, 1, heads, context, dim // heads))
        self.register_buffer("pos", torch.zeros((), dtype=torch.long))

    def forward(self, x, tok):
        b, t, d = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        rows = (self.pos + torch.arange(t)) % self.context
        self.cache[0].index_copy_(2, rows, k)
        self.cache[1].index_copy_(2, rows, v)
        seen = (torch.arange(self.context) < self.pos + t)[None]  # the rows written so far
        y = F.scaled_dot_product_attention(q, self.cache[0], self.cache[1], attn_mask=seen)
        self.pos += t
        y = y.transpose(1, 2).reshape(b, t, d)
        return y + self.emb(tok + (y.sum() > 0).long())

    def reset(self):
        self.cache.zero_()
        self.pos.zero_()


def _export(rows, **kw):
    torch.manual_seed(0)
    module = StreamingAttention(**kw).eval()
    x, tok = torch.randn(1, rows, module.qkv.in_features), torch.tensor([3])
    program = tandem.export(module, {"forward": (x, tok), "reset": tandem.Method(module.reset, ())})
    return module, program


@pytest.mark.parametrize("rows", [1, 2])
def test_kv_rows_are_written_in_place_before_a_later_check(rows):
    """At Mimi's transformer shape (8 heads, d512, context 250): no op writes a cache-sized tensor,
    each cache slot is written only by its row update (rows x heads x head_dim floats), and a
    check_index runs after those writes, so the plan relies on the runtime's journal."""
    module, program = _export(rows)
    fwd = program.method("forward")
    half = module.cache[0].numel()
    writes = [op for op in fwd.ops if any(v.storage.kind == STATE for v in op.outs)]
    updates = [op for op in writes if op.name == "index_put"]
    assert len(updates) == 2 and all(op.ins[0].storage.kind == STATE and op.ins[0].storage is op.outs[0].storage for op in updates)
    assert all(op.ins[2].numel == rows * 8 * 64 for op in updates)
    for op in fwd.ops:
        if not any(op is u for u in updates):  # no other op writes a tensor the size of a cache half
            assert all(v.numel < half for v in op.outs), f"{op.name} writes {[v.numel for v in op.outs]} elements"
    first_write = fwd.ops.index(updates[0])
    assert any(op.name == "check_index" for op in fwd.ops[first_write:])
    model = tandem.load(program.to_bytes())
    x, tok = torch.randn(1, rows, 512), torch.tensor([3])
    _, ops = model.profile("forward", x, tok)
    written = sum(p.state_bytes_written for p in ops)  # the rows, and the 8-byte position
    assert written == 2 * rows * 8 * 64 * 4 + 8, written


def test_values_equal_eager_over_calls_and_a_reset_and_a_failed_call_changes_no_state():
    """Many calls (past the ring's wrap), a reset, more calls: equal to eager. A call whose
    embedding index is out of range fails after the cache writes ran, with TDM_ERR_INDEX and the
    state exactly as before it; the stream then goes on as eager's without that call."""
    module, program = _export(2, dim=32, heads=2, context=8, vocab=5)
    model = tandem.load(program.to_bytes())
    g = torch.Generator().manual_seed(1)
    calls = [(torch.randn(1, 2, 32, generator=g), torch.tensor([int(torch.randint(0, 4, (), generator=g))])) for _ in range(14)]
    with torch.no_grad():
        module.reset()
        for i, (x, tok) in enumerate(calls):
            if i == 9:
                module.reset()
                model.reset()
            torch.testing.assert_close(model.forward(x, tok), module(x, tok), rtol=1e-5, atol=1e-5)
            if i in (3, 6):
                before = model.save_state()
                with pytest.raises(tandem.TandemError) as e:
                    model.forward(x, torch.tensor([5]))  # 5 or 6: past the table of 5, known after the cache writes
                assert e.value.code == "TDM_ERR_INDEX"
                assert model.save_state() == before
