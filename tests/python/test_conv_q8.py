"""quantize="int8", quantize_convs=True for convolutions at a streaming step's shapes (python/tandem/quantize_conv.py,
src/kernels/conv_q8.c): a conv with few output positions, or a transposed conv with few input
positions, and a big kernel becomes conv_q8 / conv_transpose_q8 with int8 weights per output
column, each row of activations quantized to int16 per block of 32 (matmul_q8's rows are int8: at
Mimi's shapes int8 rows changed 8% of the codes, int16 ones cost the same time and none of that)
and multiplied by matmul_q8's integer-dot GEMV. Checked against an independent
float64 reference of exactly that quantization (torch's conv on the dequantized weights and the
quantized patches / input columns), within float32 rounding."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tandem
from tandem.quantize_conv import CONV_Q8_MIN_WEIGHTS
from test_ops import _record, ref_dequantize


def ref_quantize_rows(x: torch.Tensor, levels: int = 32767) -> torch.Tensor:
    """What conv_q8 does to each row of activations (docs/ops.md, `conv_q8`): x [..., K] in blocks of
    32 along K, scale = max|x| / levels in float32, q = round-half-even(x / scale) in [-levels,
    levels] (0 where the scale is 0) -> q · scale in float64. levels = 127 is matmul_q8's int8 row."""
    x = x.detach().float()
    K, NB = x.shape[-1], -(-x.shape[-1] // 32)
    xb = torch.cat([x, x.new_zeros(*x.shape[:-1], NB * 32 - K)], -1).reshape(*x.shape[:-1], NB, 32)
    s = xb.abs().amax(-1, keepdim=True) / levels
    q = torch.where(s > 0, xb / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(xb)).round().clamp(-levels, levels)
    return (q.double() * s.double()).reshape(*x.shape[:-1], NB * 32)[..., :K]


def g(seed=0):
    return torch.Generator().manual_seed(seed)


def ref_conv_q8(conv: nn.Conv1d | nn.Conv2d, x: torch.Tensor, act=None, levels: int = 32767) -> torch.Tensor:
    """conv_q8's result in float64: the weights int8 per output channel (ref_dequantize over
    [O, C·kernel]), each output position's patch quantized as one activation row."""
    w = conv.weight.detach()
    O, K = w.shape[0], w[0].numel()
    wq = ref_dequantize(w.reshape(O, K), "int8")
    if w.dim() == 3:
        xp = F.pad(x, (conv.padding[0],) * 2).unfold(2, conv.dilation[0] * (w.shape[2] - 1) + 1, conv.stride[0])
        xp = xp[..., :: conv.dilation[0]]  # [N, C, P, k]
        rows = xp.permute(0, 2, 1, 3).reshape(x.shape[0], -1, K)
    else:
        cols = F.unfold(x, w.shape[2:], conv.dilation, conv.padding, conv.stride)  # [N, K, P]
        rows = cols.transpose(1, 2)
    y = ref_quantize_rows(rows, levels) @ wq.t()  # [N, P, O]
    if conv.bias is not None:
        y = y + conv.bias.detach().double()
    y = y.transpose(1, 2).reshape(x.shape[0], O, *conv(x).shape[2:])
    return (act(y) if act else y).float()


def ref_conv_transpose_q8(ct: nn.ConvTranspose1d, x: torch.Tensor, levels: int = 32767) -> torch.Tensor:
    """conv_transpose_q8's result in float64: the weights int8 per output channel and tap (a column
    of the [C, O·k] GEMV), each input position's C values quantized as one activation row."""
    w = ct.weight.detach()
    C, M = w.shape[0], w[0].numel()
    wq = ref_dequantize(w.reshape(C, M).t(), "int8").t().reshape(w.shape)
    xq = ref_quantize_rows(x.transpose(1, 2), levels).transpose(1, 2)
    b = None if ct.bias is None else ct.bias.detach().double()
    return F.conv_transpose1d(xq, wq, b, ct.stride, ct.padding, ct.output_padding, 1, ct.dilation).float()


class ConvAct(nn.Module):
    def __init__(self, conv, act=None):
        super().__init__()
        self.conv, self.act = conv, act

    def forward(self, x):
        y = self.conv(x)
        return self.act(y) if self.act else y


CONVS = [  # (module, input, activation): each at most 16 output positions, >= 65536 weights
    (nn.Conv1d(64, 128, 8, stride=4), (1, 64, 12), None),  # Mimi's encoder downsampling at 2 positions
    (nn.Conv1d(64, 128, 8, stride=4), (1, 64, 12), nn.ELU()),  # the ELU fused into the conv
    (nn.Conv1d(33, 400, 5, padding=3, dilation=2, bias=False), (2, 33, 3), None),  # K odd, no bias, 2 images
    (nn.Conv1d(512, 160, 1), (1, 512, 1), None),  # a GEMV with 160 columns (not a multiple of 32)
    (nn.Conv2d(64, 128, 3), (1, 64, 4, 4), None),  # 2-d: 4 positions
    (nn.Conv1d(256, 512, 12, stride=6), (1, 256, 102), None),  # Mimi's at 16 positions
]


CONV_IDS = [f"conv_q8_{n}" for n in ("mimi_down", "elu", "dilated", "gemv", "conv2d", "sixteen")]


@pytest.mark.parametrize("module,shape,act", CONVS, ids=CONV_IDS)
def test_conv_q8_matches_reference_quantization(request, module, shape, act):
    torch.manual_seed(1)
    model = ConvAct(module, act).eval()
    x = torch.randn(*shape, generator=g(2))
    program = tandem.export(model, {"forward": (x,)}, quantize="int8", quantize_convs=True)
    names = [op.name for op in program.method("forward").ops]
    assert "conv_q8" in names and "conv" not in names, names
    got = tandem.load(program.to_bytes()).forward(x)
    with torch.no_grad():
        want = ref_conv_q8(module, x, act)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        _record(request, program.to_bytes(), (x,), want, 1e-5, 1e-5)  # tests/js/ops.test.js replays it in wasm
        assert (model(x) - want).abs().max() > 1e-4  # the reference differs from float32's
        # int16 rows, not int8 ones (matmul_q8's, which conv_q8 used before): 100x further off
        assert (got - ref_conv_q8(module, x, act, levels=127)).abs().max() > 100 * (got - want).abs().max()
        float32 = tandem.load(tandem.export(model, {"forward": (x,)}).to_bytes()).forward(x)
        torch.testing.assert_close(float32, model(x), rtol=1e-5, atol=1e-5)  # the default stays exact


TRANSPOSED = [  # Mimi's decoder upsampling: stride s, kernel 2s, 1-3 input positions
    (nn.ConvTranspose1d(256, 128, 8, stride=4), (1, 256, 1)),
    (nn.ConvTranspose1d(256, 128, 8, stride=4), (1, 256, 3)),
    (nn.ConvTranspose1d(130, 100, 6, stride=3, padding=2, output_padding=1, bias=False), (2, 130, 2)),
    (nn.ConvTranspose1d(512, 256, 12, stride=6), (1, 512, 16)),  # Mimi's at 16 input positions
]


@pytest.mark.parametrize("module,shape", TRANSPOSED, ids=[f"conv_transpose_q8_{n}" for n in ("one", "three", "padded", "sixteen")])
def test_conv_transpose_q8_matches_reference_quantization(request, module, shape):
    torch.manual_seed(3)
    x = torch.randn(*shape, generator=g(4))
    program = tandem.export(module, {"forward": (x,)}, quantize="int8", quantize_convs=True)
    names = [op.name for op in program.method("forward").ops]
    assert "conv_transpose_q8" in names and "conv_transpose" not in names, names
    got = tandem.load(program.to_bytes()).forward(x)
    with torch.no_grad():
        want = ref_conv_transpose_q8(module, x)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        _record(request, program.to_bytes(), (x,), want, 1e-5, 1e-5)
        assert (module(x) - want).abs().max() > 1e-4
        assert (got - ref_conv_transpose_q8(module, x, levels=127)).abs().max() > 100 * (got - want).abs().max()


def test_what_stays_float32():
    """More than 16 output positions (bound by arithmetic), small weights, groups, a computed weight and
    `quantize_skip` keep the float32 conv."""
    cases = [
        (nn.Conv1d(64, 128, 8, stride=4), (1, 64, 72)),  # 17 positions
        (nn.Conv1d(16, 32, 4, stride=2), (1, 16, 4)),  # 2048 weights
        (nn.Conv1d(128, 256, 8, stride=4, groups=2), (1, 128, 8)),
        (nn.ConvTranspose1d(256, 128, 8, stride=4), (1, 256, 17)),
    ]
    for module, shape in cases:
        x = torch.randn(*shape, generator=g(5))
        names = {op.name for op in tandem.export(module, {"forward": (x,)}, quantize="int8", quantize_convs=True).method("forward").ops}
        assert not names & {"conv_q8", "conv_transpose_q8"}, (module, names)
    assert 64 * 128 * 8 >= CONV_Q8_MIN_WEIGHTS
    m, x = nn.Conv1d(64, 128, 8, stride=4), torch.randn(1, 64, 12, generator=g(6))
    names = {
        op.name
        for op in tandem.export(m, {"forward": (x,)}, quantize="int8", quantize_convs=True, quantize_skip=["weight"]).method("forward").ops
    }
    assert "conv" in names and "conv_q8" not in names, names

    class Scaled(nn.Module):  # the weight is computed in the method: not a parameter as stored
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(64, 128, 8, stride=4)

        def forward(self, x):
            return F.conv1d(x, self.conv.weight * 2, None, 4)

    names = {op.name for op in tandem.export(Scaled(), {"forward": (x,)}, quantize="int8", quantize_convs=True).method("forward").ops}
    assert "conv_q8" not in names, names


@pytest.mark.parametrize("transposed", [False, True], ids=["conv_q8_nonfinite", "conv_transpose_q8_nonfinite"])
def test_nonfinite_row_takes_the_float_path(request, transposed):
    """A patch (transposed: an input position) with an inf cannot be quantized: its row runs the
    float-lane GEMV, the others stay exact to the reference (no crash, no NaN leaking into other
    positions). Recorded with the runtime's own infinities for the wasm and WebGPU replays."""
    if transposed:
        m = nn.ConvTranspose1d(64, 32, 8, stride=4).eval()
        x = torch.randn(1, 64, 3, generator=g(7))
    else:
        m = nn.Conv1d(64, 256, 4, stride=4).eval()
        x = torch.randn(1, 64, 8, generator=g(7))
    program = tandem.export(m, {"forward": (x,)}, quantize="int8", quantize_convs=True)
    x[0, 3, 1] = float("inf")  # conv: only position 0's patch; transposed: input position 1, output positions 4..11
    got = tandem.load(program.to_bytes()).forward(x)
    bad = slice(4, 12) if transposed else 0
    assert not torch.isfinite(got[0, :, bad]).all()
    with torch.no_grad():
        if transposed:  # the outputs input position 1 does not reach: as with a finite value there
            x0 = x.clone()
            x0[0, 3, 1] = 0.0
            want, good = tandem.load(program.to_bytes()).forward(x0), [0, 1, 2, 3, 12, 13, 14, 15]
        else:
            want, good = ref_conv_q8(m, x), [1]
        torch.testing.assert_close(got[0, :, good], want[0, :, good], rtol=1e-5, atol=1e-5)
    _record(request, program.to_bytes(), (x,), got, 1e-5, 1e-5)


def test_convs_stay_float32_unless_asked():
    """quantize="int8" alone quantizes the linear layers only (int8 convs cost more accuracy: opt-in
    with quantize_convs=True); quantize_convs with another mode, or not a bool, is an ExportError."""
    m, x = nn.Conv1d(64, 128, 8, stride=4), torch.randn(1, 64, 12)
    names = {op.name for op in tandem.export(m, {"forward": (x,)}, quantize="int8").method("forward").ops}
    assert "conv" in names and "conv_q8" not in names, names
    for kw, says in (
        ({"quantize": "int4"}, "needs quantize='int8'"),
        ({"quantize": None}, "needs quantize='int8'"),
        ({"quantize": "int8", "quantize_convs": "yes"}, "use False, True"),
        ({"quantize": "int8", "quantize_convs": "fp16"}, "'bf16' or 'int16'"),
    ):
        with pytest.raises(tandem.ExportError, match=says):
            tandem.export(m, {"forward": (x,)}, **{"quantize_convs": True, **kw})


# ---- quantize_convs="bf16": the same convs with bfloat16 weights (conv_bf16, conv_transpose_bf16) ----


def bf16(w: torch.Tensor) -> torch.Tensor:
    """The weights as conv_bf16 stores them (torch's float32 -> bfloat16 rounding, to nearest even), in float64."""
    return w.detach().to(torch.bfloat16).double()


BF16_CONVS = [  # at most 2 output positions, >= 65536 weights
    (nn.Conv1d(64, 128, 8, stride=4), (1, 64, 8), None),  # Mimi's encoder downsampling at 2 positions
    (nn.Conv1d(64, 128, 8, stride=4), (1, 64, 8), nn.ELU()),  # the ELU fused into the conv
    (nn.Conv1d(33, 401, 5, padding=3, dilation=2, bias=False), (2, 33, 3), None),  # K % 8 = 5, odd O, 2 images
    (nn.Conv1d(512, 160, 1), (1, 512, 1), None),  # one position
    (nn.Conv2d(64, 128, 3), (1, 64, 3, 4), None),  # 2-d: 2 positions
]


@pytest.mark.parametrize("module,shape,act", BF16_CONVS, ids=[f"conv_bf16_{n}" for n in ("mimi_down", "elu", "dilated", "one", "conv2d")])
def test_conv_bf16_matches_rounded_weights(request, module, shape, act):
    """Each output is the float64 conv of x with the weights rounded to bfloat16 (nothing else is
    rounded: the activations stay float32), within float32 rounding; natively here, in wasm by
    tests/js/ops.test.js (the recorded case)."""
    torch.manual_seed(5)
    model = ConvAct(module, act).eval()
    x = torch.randn(*shape, generator=g(8))
    program = tandem.export(model, {"forward": (x,)}, quantize_convs="bf16")
    names = [op.name for op in program.method("forward").ops]
    assert "conv_bf16" in names and "conv" not in names, names
    got = tandem.load(program.to_bytes()).forward(x)
    with torch.no_grad():
        conv = F.conv1d if x.dim() == 3 else F.conv2d
        b = None if module.bias is None else module.bias.detach().double()
        want = conv(x.double(), bf16(module.weight), b, module.stride, module.padding, module.dilation)
        want = (act(want) if act else want).float()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        _record(request, program.to_bytes(), (x,), want, 1e-5, 1e-5)
        assert (model(x) - want).abs().max() > 1e-4  # the rounded weights' reference differs from float32's
        assert (got - model(x)).abs().max() > 10 * (got - want).abs().max()


BF16_TRANSPOSED = [  # Mimi's decoder upsampling: stride s, kernel 2s, 1-2 input positions
    (nn.ConvTranspose1d(256, 128, 8, stride=4), (1, 256, 1)),
    (nn.ConvTranspose1d(256, 128, 8, stride=4), (1, 256, 2)),
    (nn.ConvTranspose1d(130, 101, 6, stride=3, padding=2, output_padding=1, bias=False), (2, 130, 2)),  # C % 8 = 2, odd O·k
]


@pytest.mark.parametrize("module,shape", BF16_TRANSPOSED, ids=[f"conv_transpose_bf16_{n}" for n in ("one", "two", "padded")])
def test_conv_transpose_bf16_matches_rounded_weights(request, module, shape):
    torch.manual_seed(6)
    x = torch.randn(*shape, generator=g(9))
    program = tandem.export(module, {"forward": (x,)}, quantize="int8", quantize_convs="bf16")
    names = [op.name for op in program.method("forward").ops]
    assert "conv_transpose_bf16" in names and "conv_transpose" not in names, names
    got = tandem.load(program.to_bytes()).forward(x)
    with torch.no_grad():
        b = None if module.bias is None else module.bias.detach().double()
        want = F.conv_transpose1d(
            x.double(), bf16(module.weight), b, module.stride, module.padding, module.output_padding, 1, module.dilation
        ).float()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        _record(request, program.to_bytes(), (x,), want, 1e-5, 1e-5)
        assert (module(x) - want).abs().max() > 1e-4


def test_bf16_convs_which_and_how_stored():
    """bfloat16 takes the convs with at most 2 positions (more read the weights again per pair of
    rows) of a parameter's weight, with any quantize mode; the file holds them at 2 bytes a weight
    (half the float32 program's bytes for them), in 2-row panels."""
    for module, shape in (
        (nn.Conv1d(64, 128, 8, stride=4), (1, 64, 16)),  # 3 positions
        (nn.Conv1d(16, 32, 4, stride=2), (1, 16, 4)),  # 2048 weights
        (nn.Conv1d(128, 256, 8, stride=4, groups=2), (1, 128, 8)),
        (nn.ConvTranspose1d(256, 128, 8, stride=4), (1, 256, 3)),
    ):
        x = torch.randn(*shape, generator=g(10))
        names = {op.name for op in tandem.export(module, {"forward": (x,)}, quantize_convs="bf16").method("forward").ops}
        assert not names & {"conv_bf16", "conv_transpose_bf16"}, (module, names)
    m, x = nn.Conv1d(512, 1024, 16, stride=8), torch.randn(1, 512, 24, generator=g(11))  # Mimi's k16 s8 at 2 positions
    f32 = tandem.export(m, {"forward": (x,)}).to_bytes()
    for mode in (None, "int8", "int4"):
        p = tandem.export(m, {"forward": (x,)}, quantize=mode, quantize_convs="bf16")
        op = next(o for o in p.method("forward").ops if o.name == "conv_bf16")
        assert op.ins[1].dtype == tandem.ir.BF16 and op.ins[1].shape == (512, 8192 // 8, 2, 8), op.ins[1]
        assert len(p.to_bytes()) < 0.52 * len(f32)
    names = {op.name for op in tandem.export(m, {"forward": (x,)}, quantize_convs="bf16", quantize_skip=["weight"]).method("forward").ops}
    assert "conv" in names and "conv_bf16" not in names, names


def test_bf16_nonfinite_stays_where_it_is():
    """No row is quantized: an inf in x reaches only the outputs whose patch reads it, the others stay
    equal to the reference."""
    m = nn.Conv1d(64, 256, 4, stride=4).eval()
    x = torch.randn(1, 64, 8, generator=g(12))
    program = tandem.export(m, {"forward": (x,)}, quantize_convs="bf16")
    x[0, 3, 1] = float("inf")  # only position 0's patch
    got = tandem.load(program.to_bytes()).forward(x)
    assert not torch.isfinite(got[0, :, 0]).all()
    with torch.no_grad():
        want = F.conv1d(x.double(), bf16(m.weight), m.bias.detach().double(), 4).float()
        torch.testing.assert_close(got[0, :, 1], want[0, :, 1], rtol=1e-5, atol=1e-5)
