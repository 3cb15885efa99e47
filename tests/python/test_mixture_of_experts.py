"""Mixture-of-experts layers as transformers 5 writes them (its default experts implementation:
sort the (token, expert) pairs by expert, count them with histc, the expert GEMMs as a grouped matmul
over the sorted rows, then the routing weights and the inverse permutation) export to matmul_grouped
and match eager, natively and in wasm; a call reads only the experts its tokens are routed to."""

import pytest
import torch

import tandem

transformers = pytest.importorskip("transformers")
from transformers.models.mixtral.configuration_mixtral import MixtralConfig  # noqa: E402
from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock  # noqa: E402

E, H, FFN = 6, 16, 24


def _block(seed: int = 0) -> MixtralSparseMoeBlock:
    config = MixtralConfig(hidden_size=H, intermediate_size=FFN, num_local_experts=E, num_experts_per_tok=2)
    config._experts_implementation = "grouped_mm"  # what from_pretrained sets by default
    torch.manual_seed(seed)
    block = MixtralSparseMoeBlock(config).eval()
    with torch.no_grad():
        for p in block.parameters():
            p.normal_(0, 0.3)
    return block


@pytest.fixture
def runtimes(wasm_lib):
    """loads(program bytes) -> the program loaded natively and in wasm."""
    import tandem.runtime as runtime

    def loads(blob: bytes):
        out = [tandem.load(blob)]
        saved = runtime._lib, runtime.BACKEND
        runtime._lib, runtime.BACKEND = wasm_lib, "wasm"
        try:
            out.append(tandem.load(blob))
        finally:
            runtime._lib, runtime.BACKEND = saved
        return out

    return loads


def _export(block, x):
    return tandem.export(block, {"forward": (x,), "step": tandem.Method(block, (x[:, :1],))})


def test_a_mixtral_block_is_grouped_matmuls_over_the_experts_and_matches_eager(runtimes):
    block = _block()
    x = torch.randn(1, 7, H, generator=torch.Generator().manual_seed(1))
    program = _export(block, x)
    ops = [op.name for op in program.method("forward").ops]
    assert ops.count("matmul_grouped") == 2  # gate-up and down projections
    weights = [op.ins[1].shape for op in program.method("forward").ops if op.name == "matmul_grouped"]
    assert [w[0] for w in weights] == [E, E] and not any(op == "matmul" for op in ops)
    for m in runtimes(program.to_bytes()):
        with torch.no_grad():
            torch.testing.assert_close(m.forward(x), block(x), rtol=1e-5, atol=1e-5)
            for t in range(3):
                one = torch.randn(1, 1, H, generator=torch.Generator().manual_seed(10 + t))
                torch.testing.assert_close(m.step(one), block(one), rtol=1e-5, atol=1e-5)


def test_an_expert_no_token_is_routed_to_is_never_read(runtimes):
    """The last expert's weights are NaN and its router row makes it lose every top-k: eager gives
    finite values (its grouped matmul skips the expert); so must the runtime, where computing every
    expert and weighting the unrouted ones by zero would give NaN."""
    block = _block(seed=2)
    with torch.no_grad():
        block.gate.weight[E - 1] = -10.0
        block.experts.gate_up_proj[E - 1] = float("nan")
        block.experts.down_proj[E - 1] = float("nan")
    x = torch.rand(1, 5, H, generator=torch.Generator().manual_seed(3)) + 0.1  # positive: the last logit is lowest
    with torch.no_grad():
        want = block(x)
        assert torch.isfinite(want).all()
        for m in runtimes(_export(block, x).to_bytes()):
            torch.testing.assert_close(m.forward(x), want, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(m.step(x[:, 2:3]), block(x[:, 2:3]), rtol=1e-5, atol=1e-5)


def test_int8_experts_are_one_grouped_int8_matmul_per_projection_and_match_their_dequantized_weights(runtimes):
    """quantize="int8": each expert quantized as a linear layer's weight (one scale per output column),
    run by matmul_grouped_q8; against eager with the dequantized weights (the runtime also quantizes
    each activation row per block of 32, docs/ops.md), and against the float32 export."""
    from tandem.quantize import quantize_weight

    block = _block(seed=4)
    x = torch.randn(1, 6, H, generator=torch.Generator().manual_seed(5))
    program = tandem.export(block, {"forward": (x,), "step": tandem.Method(block, (x[:, :1],))}, quantize="int8")
    grouped = [op for op in program.method("forward").ops if op.name.startswith("matmul_grouped")]
    assert [op.name for op in grouped] == ["matmul_grouped_q8"] * 2
    assert all(op.iattr[1:] == [1] for op in grouped)  # K even: the codes in the paired layout
    deq = _block(seed=4)
    with torch.no_grad():
        for name in ("gate_up_proj", "down_proj"):
            w = getattr(block.experts, name)
            for e in range(E):
                q, scale = quantize_weight(w[e].t(), "int8")
                getattr(deq.experts, name)[e] = (q.float() * scale).t()
        want = deq(x)
        native, wasm = runtimes(program.to_bytes())
        for m in (native, wasm):
            torch.testing.assert_close(m.forward(x), want, rtol=0.02, atol=0.02 * float(want.abs().max()))
            torch.testing.assert_close(m.step(x[:, 3:4]), deq(x[:, 3:4]), rtol=0.02, atol=0.02 * float(want.abs().max()))
            assert (m.forward(x) - block(x)).abs().max() < 0.05 * float(want.abs().max())
        torch.testing.assert_close(wasm.forward(x), native.forward(x), rtol=1e-5, atol=1e-6)


class _Grouped(torch.nn.Module):
    def __init__(self, e, k, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(e, k, n, generator=torch.Generator().manual_seed(6)))

    def forward(self, x, offs):
        return torch._grouped_mm(x, self.w, offs=offs)


def _clamped_reference(x, w, offs):
    """matmul_grouped's rule (docs/ops.md): each offset clamped between the previous one and S, rows
    past the last offset zero."""
    y, lo = torch.zeros(x.shape[0], w.shape[2]), 0
    for e, o in enumerate(offs.tolist()):
        hi = min(max(o, lo), x.shape[0])
        y[lo:hi] = x[lo:hi] @ w[e]
        lo = hi
    return y


@pytest.mark.parametrize("offs", [[2, 2, 5, 7], [9, 3, 100, 7], [-4, 1, 0, 3], [0, 0, 0, 0], [7, 7, 7, 7], [-(2**31), 2**31 - 1, 3, 5]])
def test_offsets_out_of_order_or_range_are_clamped_never_read_outside(runtimes, offs):
    """Offsets are values computed per call: out of order, negative or past S they are clamped (never
    a read or write outside a, the weights or y), on both backends."""
    module, x = _Grouped(4, 8, 12), torch.randn(7, 8, generator=torch.Generator().manual_seed(7))
    program = tandem.export(module, {"forward": (x, torch.tensor([2, 2, 5, 7], dtype=torch.int32))})
    o = torch.tensor(offs, dtype=torch.int32)
    for m in runtimes(program.to_bytes()):
        torch.testing.assert_close(m.forward(x, o), _clamped_reference(x, module.w.detach(), o), rtol=1e-5, atol=1e-5)


def _int4_reference(block, monkeypatch, group: int = 32):
    """block with every weight as quantize="int4" stores it (the router's [E, H] and each expert's
    [N, K], per output column and group of `group` k, dequantized: test_ops.ref_dequantize) and the
    rows into each product rounded to int8 per group as matmul_q4 and matmul_grouped_q4 round them
    (test_ops.ref_quantize_activations): the grouped products' inputs through transformers'
    _grouped_mm, the router's through a pre-hook."""
    import copy

    from transformers.integrations import moe

    from test_ops import ref_dequantize, ref_quantize_activations

    ref = copy.deepcopy(block)
    with torch.no_grad():
        ref.gate.weight.copy_(ref_dequantize(ref.gate.weight, "int4", group).float())
        for name in ("gate_up_proj", "down_proj"):
            w = getattr(ref.experts, name)
            for e in range(E):
                w[e] = ref_dequantize(w[e], "int4", group).float()

    def rounded(x):
        return ref_quantize_activations(x, group).to(x.dtype)

    grouped_mm = moe._grouped_mm
    monkeypatch.setattr(moe, "_grouped_mm", lambda x, w, offs: grouped_mm(rounded(x), w, offs=offs))
    ref.gate.register_forward_pre_hook(lambda mod, args: (rounded(args[0]),))
    return ref


def test_int4_experts_are_one_grouped_int4_matmul_per_projection_and_match_their_dequantized_weights(runtimes, monkeypatch):
    """quantize="int4": each expert quantized as a linear layer's weight for matmul_q4 (per output
    column and group of 32 k), run by matmul_grouped_q4; against eager with the dequantized weights
    and each product's input rows rounded as matmul_q4 rounds them, and against the float32 export."""
    block = _block(seed=4)
    x = torch.randn(1, 6, H, generator=torch.Generator().manual_seed(5))
    program = tandem.export(block, {"forward": (x,), "step": tandem.Method(block, (x[:, :1],))}, quantize="int4")
    ops = program.method("forward").ops
    grouped = [op for op in ops if op.name.startswith("matmul_grouped")]
    assert [op.name for op in grouped] == ["matmul_grouped_q4"] * 2
    assert [op.iattr for op in grouped] == [[2 * FFN, 32], [H, 32]]
    assert [tuple(op.ins[1].shape) for op in grouped] == [(E, 2 * FFN // 8, H // 2, 8), (E, H // 8, FFN // 2, 8)]
    assert [tuple(op.ins[2].shape) for op in grouped] == [(E, 2 * FFN // 8, 1, 8), (E, H // 8, 1, 8)]
    assert [op.name for op in ops].count("matmul_q4") == 1  # the router
    with torch.no_grad():
        ref = _int4_reference(block, monkeypatch)
        want, eager = ref(x), block(x)
        scale = float(want.abs().max())
        native, wasm = runtimes(program.to_bytes())
        for m in (native, wasm):
            torch.testing.assert_close(m.forward(x), want, rtol=1e-4, atol=1e-4 * scale)
            for t in range(3):
                one = torch.randn(1, 1, H, generator=torch.Generator().manual_seed(10 + t))
                torch.testing.assert_close(m.step(one), ref(one), rtol=1e-4, atol=1e-4 * float(ref(one).abs().max()))
            got = m.forward(x)
            assert float((got - eager).abs().max()) > 1e-3 * scale  # quantized for real
            # and near float32 (4-bit weights over K = 16 and 24: about 20% mean error here)
            assert torch.nn.functional.cosine_similarity(got.flatten(), eager.flatten(), 0) > 0.97
        torch.testing.assert_close(wasm.forward(x), native.forward(x), rtol=1e-5, atol=1e-6)


def test_an_int4_expert_no_token_is_routed_to_is_never_read(runtimes, monkeypatch):
    """The NaN-weight expert the router never picks (as above) quantized to int4: codes 0 and NaN
    scales, so reading it would give NaN; the output stays finite and matches the reference."""
    block = _block(seed=2)
    with torch.no_grad():
        block.gate.weight[E - 1] = -10.0
        block.experts.gate_up_proj[E - 1] = float("nan")
        block.experts.down_proj[E - 1] = float("nan")
    x = torch.rand(1, 5, H, generator=torch.Generator().manual_seed(3)) + 0.1
    program = tandem.export(block, {"forward": (x,), "step": tandem.Method(block, (x[:, :1],))}, quantize="int4")
    assert [op.name for op in program.method("forward").ops].count("matmul_grouped_q4") == 2
    with torch.no_grad():
        ref = _int4_reference(block, monkeypatch)
        want = ref(x)
        assert torch.isfinite(want).all()
        for m in runtimes(program.to_bytes()):
            got = m.forward(x)
            assert torch.isfinite(got).all()
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * float(want.abs().max()))
            torch.testing.assert_close(m.step(x[:, 2:3]), ref(x[:, 2:3]), rtol=1e-4, atol=1e-4 * float(want.abs().max()))


@pytest.mark.parametrize("group", [32, 8])
@pytest.mark.parametrize("offs", [[2, 2, 5, 7], [0, 1, 1, 1], [9, 3, 100, 7], [0, 0, 0, 0]])
def test_int4_grouped_matmul_matches_the_reference_per_expert_with_clamped_offsets(runtimes, offs, group):
    """torch._grouped_mm against a [4, 40, 12] parameter with quantize="int4" (K = 40: a partial
    group; N = 12: a partial panel): each group of rows times its expert's dequantized weight, the
    rows rounded to int8 per group where matmul_q4 rounds them (G = 32: its integer rows; G = 8 runs
    the float path on the rows as they are), offsets clamped as matmul_grouped's (one row: the GEMV)."""
    from test_ops import ref_dequantize, ref_quantize_activations

    module, x = _Grouped(4, 40, 12), torch.randn(7, 40, generator=torch.Generator().manual_seed(8))
    o0 = torch.tensor([2, 2, 5, 7], dtype=torch.int32)
    methods = {"forward": (x, o0), "step": tandem.Method(module, (x[:1], o0))}
    program = tandem.export(module, methods, quantize="int4", quantize_group=group)
    (op,) = [op for op in program.method("forward").ops if op.name.startswith("matmul_grouped")]
    assert op.name == "matmul_grouped_q4" and op.iattr == [12, group]
    w = torch.stack([ref_dequantize(e.t(), "int4", group).t() for e in module.w.detach()])  # [E, K, N] float64
    rows = ref_quantize_activations(x, group) if group == 32 else x.double()
    o = torch.tensor(offs, dtype=torch.int32)
    want = _clamped_reference(rows, w, o).float()
    assert (want - _clamped_reference(x, module.w.detach(), o)).abs().max() > 1e-3 or not want.any()  # quantized
    for m in runtimes(program.to_bytes()):
        torch.testing.assert_close(m.forward(x, o), want, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(m.step(x[:1], o.clamp(max=1)), want[:1], rtol=1e-5, atol=1e-4)  # row 0's expert as above
