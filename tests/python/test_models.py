"""Model families through the native runtime against PyTorch eager over call sequences, and the
properties of their exports: state updated in place, checks before state writes, clear errors."""

import pytest
import torch
from torch import nn

import tandem
from cases import as_tuple, run_eager
from models.families import MODELS, CausalConvBlock, make_transformer, small_codec
from tandem.ir import STATE


@pytest.mark.parametrize("family", sorted(MODELS))
def test_family_matches_eager(family):
    module, spec, eager, calls = MODELS[family]()
    model = tandem.load(tandem.export(module, spec).to_bytes())
    want = run_eager(eager, calls)
    for i, ((name, inputs), w) in enumerate(zip(calls, want)):
        got = as_tuple(getattr(model, name)(*inputs))
        assert len(got) == len(w)
        for a, b in zip(got, w):
            torch.testing.assert_close(a, b, msg=lambda m: f"call {i} {name}: {m}")


def test_streaming_equals_whole_signal():
    torch.manual_seed(0)
    block = CausalConvBlock()
    signal = torch.randn(1, 8, block.chunk * 5)
    model = tandem.load(tandem.export(block, {"forward": (signal[:, :, : block.chunk],)}).to_bytes())
    streamed = torch.cat([model.forward(signal[:, :, i : i + block.chunk]) for i in range(0, signal.shape[2], block.chunk)], dim=2)
    with torch.no_grad():
        whole = block.full(signal)
    torch.testing.assert_close(streamed, whole)


def test_codec_streaming_equals_whole_signal():
    """The codec exported with encode_step / decode_step / reset: chunk by chunk, through the
    runtime, equals the eager model run over the whole signal at once (its convs' contexts, the
    transposed convs' overlaps and the attention's ring buffer carried in state across calls, the
    ring wrapping several times), and again after reset."""
    codec = small_codec()
    frames = codec.chunk // codec.hop
    g = torch.Generator().manual_seed(11)
    signal = torch.randn(1, 1, codec.chunk * 9, generator=g)
    latents = torch.randn(1, 32, frames * 9, generator=g)
    spec = {"encode_step": (signal[:, :, : codec.chunk],), "decode_step": (latents[:, :, :frames],), "reset": ()}
    model = tandem.load(tandem.export(codec, spec).to_bytes())
    with torch.no_grad():
        whole_enc, whole_dec = codec.encode(signal), codec.decode(latents)
    for _ in range(2):
        enc = torch.cat([model.encode_step(signal[:, :, i : i + codec.chunk]) for i in range(0, signal.shape[2], codec.chunk)], dim=2)
        dec = torch.cat([model.decode_step(latents[:, :, i : i + frames]) for i in range(0, latents.shape[2], frames)], dim=2)
        torch.testing.assert_close(enc, whole_enc)
        torch.testing.assert_close(dec, whole_dec)
        model.reset()


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


def test_out_of_range_index_fails_the_call_and_leaves_state():
    module, spec, _, _ = make_transformer(capacity=16)
    model = tandem.load(tandem.export(module, spec).to_bytes())
    model.prefill(torch.zeros(1, 8, dtype=torch.long))
    before = model.read_state("blocks.0.attn.k_cache").clone()
    with pytest.raises(tandem.TandemError) as e:
        model.decode(torch.tensor([[1000]]))  # token id past the vocabulary
    assert e.value.code == "TDM_ERR_INDEX" and "1000" in str(e.value)
    torch.testing.assert_close(model.read_state("blocks.0.attn.k_cache"), before)
    torch.testing.assert_close(model.read_state("pos"), torch.tensor(8))


class Unsupported(nn.Module):
    def forward(self, x):
        a = torch.cumprod(x, 0)
        b = torch.kthvalue(x, 2).values
        return a + b


def test_unsupported_ops_are_all_listed_with_source_lines():
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(Unsupported(), {"forward": (torch.randn(5),)})
    msg = str(e.value)
    assert "cumprod" in msg and "kthvalue" in msg and "test_models.py" in msg and "docs/ops.md" in msg


class DataDependent(nn.Module):
    def forward(self, x):
        return x[x > 0]


def test_dynamic_shapes_are_explained():
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(DataDependent(), {"forward": (torch.randn(5),)})
    assert "depends on values" in str(e.value) and "torch.where" in str(e.value) and "test_models.py" in str(e.value)


def test_profile_times_every_op_and_returns_the_same_outputs():
    module, spec, eager, calls = make_transformer(capacity=16)
    program = tandem.export(module, spec)
    a, b = tandem.load(program.to_bytes()), tandem.load(program.to_bytes())
    tokens = calls[0][1][0]
    torch.testing.assert_close(a.prefill(tokens), b.prefill(tokens))
    token = torch.tensor([[3]])
    out, ops = b.profile("decode", token)
    torch.testing.assert_close(out, a.decode(token))
    assert [o.name for o in ops] == [op.name for op in program.method("decode").ops]
    assert [o.index for o in ops] == list(range(len(ops)))
    assert all(o.ms >= 0 for o in ops) and sum(o.ms for o in ops) > 0


def test_profile_counts_the_bytes_each_op_writes():
    """A decode step of the transformer (2 layers, 4 heads of 16, cache 64): each index_put writes one
    row of K or V in place, the state gets those rows and the position, every other op writes its
    outputs' bytes, and nothing is flagged; an op rewriting the whole state is."""
    module, spec, _, calls = make_transformer()
    program = tandem.export(module, spec)
    m = tandem.load(program.to_bytes())
    m.prefill(calls[0][1][0])
    _, ops = m.profile("decode", torch.tensor([[3]]))
    row = 4 * 16 * 4  # one position of K or V: heads x head dim x float32
    puts = [o for o in ops if o.name == "index_put"]
    assert len(puts) == 4 and all(o.bytes_written == row == o.state_bytes_written for o in puts)
    assert sum(o.state_bytes_written for o in ops) == 4 * row + 8  # the new rows and the int64 position
    for o, op in zip(ops, program.method("decode").ops):
        if o.name != "index_put":
            assert o.bytes_written == sum(v.nbytes for v in op.outs), o
    assert not any(o.flagged for o in ops)
    _, ops = m.profile("decode", torch.tensor([[4]]), flag_fraction=0)
    assert [o.flagged for o in ops] == [o.bytes_written > 0 for o in ops] and any(o.flagged for o in ops)

    class Decay(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(64, 16))
            self.register_buffer("pos", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            self.cache.mul_(0.5)  # writes the whole cache: what the flag is for
            self.pos.add_(1)
            return x + 1

    m = tandem.load(tandem.export(Decay(), {"forward": (torch.zeros(2),)}).to_bytes())
    _, ops = m.profile("forward", torch.zeros(2))
    flagged = [o for o in ops if o.flagged]
    assert len(flagged) == 1 and flagged[0].state_bytes_written == 64 * 16 * 4


def test_tied_embedding_is_stored_once():
    """The embedding table is also the output head's weight: the file stores it once (packed for
    the head), the lookup reads rows from the packed panels, and outputs still match eager."""
    module, spec, eager, calls = make_transformer(capacity=64)
    program = tandem.export(module, spec)
    table = module.emb.weight.detach()
    consts = {id(v.storage): v.storage.tensor for m in program.methods for op in m.ops for v in op.ins if v.storage.kind == 1}
    same_size = [t for t in consts.values() if t.numel() == table.numel()]
    assert not any(t.shape == table.shape and torch.equal(t, table) for t in same_size)
    assert {tuple(t.shape) for t in same_size} == {(table.shape[0] // 8, table.shape[1], 8)}
    assert "embedding_packed" in [op.name for op in program.method("decode").ops]
    model, want = tandem.load(program.to_bytes()), run_eager(eager, calls)
    for (name, inputs), w in zip(calls, want):
        for a, b in zip(as_tuple(getattr(model, name)(*inputs)), w):
            torch.testing.assert_close(a, b)
