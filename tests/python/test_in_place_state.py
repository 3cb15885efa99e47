"""State written in place (python/tandem/plan.py): a decode step writes no cache-sized tensor, only
its row updates, whatever the number of layers, with the index checks before the first state write;
a copy at the end only where the old value is read later; elementwise updates of integer and bool
state in place; and the norms as one fused op each (python/tandem/fuse.py)."""

import pytest
import torch
from torch import nn

import tandem
from cases import as_tuple, run_eager
from models.families import MODELS, CausalConvBlock, make_transformer
from tandem.ir import STATE


def _cache_numel(module):
    return module.blocks[0].attn.k_cache.numel()


@pytest.mark.parametrize("layers,own_length", [(1, False), (2, False), (8, False), (1, True), (2, True), (8, True)])
def test_decode_writes_no_cache_sized_tensor(layers, own_length):
    """Every layer's KV cache is updated in place, whatever the number of layers, also when each
    layer keeps its own position counter (state read and written in every layer, so its index
    checks would otherwise run after the earlier layers' writes)."""
    module, spec, eager, calls = make_transformer(capacity=256, layers=layers, own_length=own_length)
    program = tandem.export(module, spec)
    decode = program.method("decode")
    cache = _cache_numel(module)
    updated = set()
    for op in decode.ops:
        for v in op.outs:
            if v.storage.kind == STATE and v.numel >= cache:
                # only an in-place row update may target a cache slot
                assert op.name == "index_put" and op.ins[0].storage.kind == STATE and op.ins[0].storage.state is v.storage.state
                assert op.ins[2].numel * 256 == v.numel  # it writes one row of 256
                updated.add(v.storage.state.name)
            else:
                assert v.numel < cache, f"{op.name} writes {v.numel} elements"
    assert len(updated) == 2 * layers  # every K and V cache, each by its row update
    names = [op.name for op in decode.ops]
    # checks on runtime indices come before the first state write
    first_write = min(i for i, op in enumerate(decode.ops) if any(v.storage.kind == STATE for v in op.outs))
    assert max(i for i, n in enumerate(names) if n == "check_index") < first_write
    if layers == 2:  # and the program still computes what eager does
        model, want = tandem.load(program.to_bytes()), run_eager(eager, calls)
        for (name, inputs), w in zip(calls, want):
            for a, b in zip(as_tuple(getattr(model, name)(*inputs)), w):
                torch.testing.assert_close(a, b)


def test_norms_run_as_fused_ops():
    """RMSNorm decomposes into mul, mean, add, rsqrt, mul, mul; a channel LayerNorm into a permute
    on each side: both export as one op (python/tandem/fuse.py)."""
    module, spec, _, _ = make_transformer(capacity=32)
    names = [op.name for op in tandem.export(module, spec).method("decode").ops]
    assert "rsqrt" not in names and "mean" not in names
    assert names.count("rms_norm") == 2 * len(module.blocks) + 1
    conv = tandem.export(CausalConvBlock(), {"forward": (torch.randn(1, 8, 16),)}).method("forward")
    assert "permute" not in [op.name for op in conv.ops]
    assert [op.iattr for op in conv.ops if op.name == "layer_norm"] == [[1, 1, 1, 1]]  # axis 1: channels


class OldValueReadLater(nn.Module):
    """The new state is computed first, but the old value is still read afterwards: the write must
    be a copy at the end of the method."""

    def __init__(self):
        super().__init__()
        self.register_buffer("s", torch.arange(4.0))

    def forward(self, x):
        old = self.s.clone()
        self.s.copy_(x * 2)
        return old + self.s


def test_copy_at_end_only_where_old_value_is_read_later():
    m = OldValueReadLater()
    program = tandem.export(m, {"forward": (torch.ones(4),)})
    ops = program.method("forward").ops
    assert ops[-1].name == "copy" and ops[-1].outs[0].storage.kind == STATE
    model = tandem.load(program.to_bytes())
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    torch.testing.assert_close(model.forward(x), m.forward(x))
    torch.testing.assert_close(model.forward(x), m.forward(x))
    # and where no later op reads it, the producer writes the state slot directly
    module, spec, _, _ = MODELS["lstm"]()
    fwd = tandem.export(module, spec).method("forward")
    assert not [op for op in fwd.ops if op.name == "copy"]


class IntegerAndBoolStateInPlace(nn.Module):
    """State updated by elementwise ops that plan.py once did not know could run in place
    (floor_divide, logical_not, comparisons: schema.py declares every elementwise op in place)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("n", torch.tensor([1000, -999, 7, 0]))
        self.register_buffer("flag", torch.tensor([True, False, True, False]))
        self.register_buffer("seen", torch.zeros(4, dtype=torch.bool))

    def forward(self, x):
        self.n.floor_divide_(x)
        self.flag.logical_not_()
        self.seen.copy_(self.seen.logical_or(self.flag))
        return self.n + 0, self.flag.clone(), self.seen.clone()


def test_elementwise_state_updates_run_in_place():
    m = IntegerAndBoolStateInPlace()
    x = torch.tensor([3, 2, -2, 5])
    program = tandem.export(m, {"forward": (x,)})
    ops = program.method("forward").ops
    assert not [op for op in ops if op.name == "copy"], [op.name for op in ops]
    writes = [op.name for op in ops if any(v.storage.kind == STATE for v in op.outs)]
    assert sorted(writes) == ["floor_divide", "logical_not", "logical_or"]
    model = tandem.load(program.to_bytes())
    for _ in range(3):
        for got, want in zip(model.forward(x), m.forward(x)):
            assert torch.equal(got, want)


class _SliceThenSelect(nn.Module):
    def forward(self, cache):
        valid = cache[:, :, :5]  # pocket-tts' complete_kv: the cache prefix, then its K and V halves
        return valid[0] + 2 * valid[1]


def test_a_select_of_a_slice_along_another_dim_is_a_view():
    """cache[:, :, :n][0] is cache[0][:, :n], a view of cache's bytes: no slice op copies the
    prefix of both halves (8.4 ms of pocket-tts' full-size step before)."""
    cache = torch.randn(2, 1, 8, 3, 4)
    program = tandem.export(_SliceThenSelect(), {"forward": (cache,)})
    assert "slice" not in [op.name for op in program.method("forward").ops]
    torch.testing.assert_close(tandem.load(program.to_bytes()).forward(cache), cache[0, :, :5] + 2 * cache[1, :, :5])
