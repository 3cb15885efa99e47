"""quantize_convs="int16" (python/tandem/quantize_conv.py, src/kernels/conv_i16.c): the convolutions over
three or more positions become conv_i16 / conv_transpose_i16, a GEMM on 16-bit integers: the weights
rounded to 13 bits per output row (pack_i16), each output position's patch (a transposed conv: each
input position's C values) quantized to 13 bits per block of 32 at run time; those over 1-2 positions
take bfloat16 weights as with quantize_convs="bf16". Checked against an independent float64 reference
of exactly that quantization (torch's conv on the dequantized weights and quantized patches), within
float32 rounding, natively here and in wasm by tests/js/ops.test.js (the recorded cases)."""

import pytest
import torch
import torch.nn.functional as F
from test_conv_q8 import ConvAct, g, ref_quantize_rows
from torch import nn

import tandem
from test_ops import _record

LEVELS = 4095  # 13-bit codes (quantize_conv.py I16_LEVELS)


def ref_weights(w2: torch.Tensor) -> torch.Tensor:
    """w2 [M, K] as pack_i16 stores it, in float64: per row s = max |w| / 4095 (float32), q = round(w / s)."""
    w2 = w2.detach().float()
    s = w2.abs().amax(1, keepdim=True) / LEVELS
    q = torch.where(s > 0, torch.round(w2 / torch.where(s > 0, s, 1)), 0)
    return q.double() * s.double()


def ref_conv_i16(conv, x: torch.Tensor, act=None) -> torch.Tensor:
    w = conv.weight.detach()
    O, K = w.shape[0], w[0].numel()
    wq = ref_weights(w.reshape(O, K))
    if w.dim() == 3:
        xp = F.pad(x, (conv.padding[0],) * 2).unfold(2, conv.dilation[0] * (w.shape[2] - 1) + 1, conv.stride[0])
        rows = xp[..., :: conv.dilation[0]].permute(0, 2, 1, 3).reshape(x.shape[0], -1, K)
    else:
        rows = F.unfold(x, w.shape[2:], conv.dilation, conv.padding, conv.stride).transpose(1, 2)
    y = ref_quantize_rows(rows, LEVELS) @ wq.t()  # [N, P, O]
    if conv.bias is not None:
        y = y + conv.bias.detach().double()
    y = y.transpose(1, 2).reshape(x.shape[0], O, *conv(x).shape[2:])
    return (act(y) if act else y).float()


def ref_conv_transpose_i16(ct, x: torch.Tensor) -> torch.Tensor:
    w = ct.weight.detach()
    C, M = w.shape[0], w[0].numel()
    wq = ref_weights(w.reshape(C, M).t()).t().reshape(w.shape)
    xq = ref_quantize_rows(x.transpose(1, 2), LEVELS).transpose(1, 2)
    b = None if ct.bias is None else ct.bias.detach().double()
    return F.conv_transpose1d(xq, wq, b, ct.stride, ct.padding, ct.output_padding, 1, ct.dilation).float()


CONVS = [  # (module, input, activation): 3 to 128 positions, K >= 32, >= 256 output channels
    (nn.Conv1d(256, 512, 12, stride=6), (1, 256, 102), None),  # Mimi's k12 s6 at 16 positions
    (nn.Conv1d(64, 256, 3), (1, 64, 130), nn.ELU()),  # a k3 at 128 positions (the most), ELU fused
    (nn.Conv1d(33, 261, 5, padding=3, dilation=2, bias=False), (2, 33, 9), None),  # K % 32 = 5, O % 4 = 1, 2 images
    (nn.Conv1d(32, 256, 1), (1, 32, 45), None),  # 1x1, one block of k, a partial panel
    (nn.Conv2d(16, 256, 3, padding=1), (1, 16, 5, 6), nn.ReLU()),  # 2-d
]


@pytest.mark.parametrize("module,shape,act", CONVS, ids=[f"conv_i16_{n}" for n in ("sixteen", "elu", "dilated", "pointwise", "conv2d")])
def test_conv_i16_matches_reference_quantization(request, module, shape, act):
    torch.manual_seed(7)
    model = ConvAct(module, act).eval()
    x = torch.randn(*shape, generator=g(13))
    program = tandem.export(model, {"forward": (x,)}, quantize_convs="int16")
    names = [op.name for op in program.method("forward").ops]
    assert "conv_i16" in names and "conv" not in names, names
    got = tandem.load(program.to_bytes()).forward(x)
    with torch.no_grad():
        want = ref_conv_i16(module, x, act)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        _record(request, program.to_bytes(), (x,), want, 1e-5, 1e-5)  # tests/js/ops.test.js replays it in wasm
        assert (model(x) - want).abs().max() > 1e-5  # the quantization's reference differs from float32's
        assert (got - model(x)).abs().max() > 3 * (got - want).abs().max()


TRANSPOSED = [
    (nn.ConvTranspose1d(512, 256, 12, stride=6), (1, 512, 16)),  # Mimi's at 16 input positions
    (nn.ConvTranspose1d(130, 50, 6, stride=3, padding=2, output_padding=1, bias=False), (2, 130, 11)),  # C % 32 = 2, M = 300
]


@pytest.mark.parametrize("module,shape", TRANSPOSED, ids=["conv_transpose_i16_sixteen", "conv_transpose_i16_padded"])
def test_conv_transpose_i16_matches_reference_quantization(request, module, shape):
    torch.manual_seed(8)
    x = torch.randn(*shape, generator=g(14))
    program = tandem.export(module, {"forward": (x,)}, quantize="int8", quantize_convs="int16")
    names = [op.name for op in program.method("forward").ops]
    assert "conv_transpose_i16" in names and "conv_transpose" not in names, names
    got = tandem.load(program.to_bytes()).forward(x)
    with torch.no_grad():
        want = ref_conv_transpose_i16(module, x)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        _record(request, program.to_bytes(), (x,), want, 1e-5, 1e-5)
        assert (module(x) - want).abs().max() > 1e-5


def test_which_convs_and_how_stored():
    """int16 takes the convs over 3-128 positions with K >= 32 and >= 256 outputs per position of a
    parameter, with any quantize mode; those over 1-2 positions take bfloat16; the file holds 2 bytes
    a weight."""
    for module, shape in (
        (nn.Conv1d(1, 256, 7), (1, 1, 100)),  # K = 7
        (nn.Conv1d(64, 128, 3), (1, 64, 50)),  # 128 output channels
        (nn.Conv1d(64, 256, 3), (1, 64, 131)),  # 129 positions
        (nn.ConvTranspose1d(64, 16, 8, stride=4), (1, 64, 50)),  # M = 128
        (nn.Conv1d(64, 512, 4, groups=2), (1, 64, 50)),
    ):
        x = torch.randn(*shape, generator=g(15))
        names = {op.name for op in tandem.export(module, {"forward": (x,)}, quantize_convs="int16").method("forward").ops}
        assert names & {"conv", "conv_transpose"} and not names & {"conv_i16", "conv_transpose_i16", "conv_bf16"}, (module, names)
    seq = nn.Sequential(nn.Conv1d(256, 512, 12, stride=6), nn.Conv1d(512, 1024, 8, stride=8))  # 16 positions, then 2
    x = torch.randn(1, 256, 102, generator=g(16))
    f32 = tandem.export(seq, {"forward": (x,)}).to_bytes()
    for mode in (None, "int8"):
        p = tandem.export(seq, {"forward": (x,)}, quantize=mode, quantize_convs="int16")
        ops = {o.name: o for o in p.method("forward").ops}
        assert "conv_i16" in ops and "conv_bf16" in ops and "conv" not in ops, ops.keys()
        assert ops["conv_i16"].ins[1].dtype == tandem.ir.I16 and ops["conv_i16"].ins[1].shape == (512, 3072), ops["conv_i16"].ins[1]
        assert len(p.to_bytes()) < 0.52 * len(f32)
    names = {o.name for o in tandem.export(seq, {"forward": (x,)}, quantize_convs="int16", quantize_skip=["0."]).method("forward").ops}
    assert "conv" in names and "conv_i16" not in names and "conv_bf16" in names, names
    with pytest.raises(tandem.ExportError, match="'int16'"):
        tandem.export(seq, {"forward": (x,)}, quantize_convs="int12")


def test_nonfinite_panel_takes_the_float_path():
    """A NaN or inf in x reaches the outputs whose patch reads it (computed in float32 on the dequantized
    weights), the other panels keep the integer GEMM's values."""
    m = nn.Conv1d(64, 256, 4, stride=4).eval()
    x = torch.randn(1, 64, 80, generator=g(17))  # 20 positions: panels 0-7, 8-15, 16-19
    program = tandem.export(m, {"forward": (x,)}, quantize_convs="int16")
    x[0, 3, 1] = float("inf")  # only position 0's patch
    got = tandem.load(program.to_bytes()).forward(x)
    assert not torch.isfinite(got[0, :, 0]).all() and torch.isfinite(got[0, :, 1:]).all()
    with torch.no_grad():
        y = x.clone()
        y[0, 3, 1] = 0.0
        want = ref_conv_i16(m, y)
        torch.testing.assert_close(got[0, :, 8:], want[0, :, 8:], rtol=1e-5, atol=1e-5)  # panels without the inf
        wq = ref_weights(m.weight.reshape(256, -1)).reshape(m.weight.shape)
        float_path = F.conv1d(y.double(), wq, m.bias.detach().double(), 4).float()  # panel 0 in float32 (its finite columns)
        torch.testing.assert_close(got[0, :, 1:8], float_path[0, :, 1:8], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["int16", "bf16"])
def test_dynamic_length_conv_stays_float32(kind):
    """A conv over a dynamic number of positions keeps the float32 conv (the quantized ones' workspaces are
    sized for static shapes) and runs at any length in its bounds, equal to torch's."""
    from torch.export import Dim

    conv = nn.Conv1d(64, 256, 3).eval()
    x = torch.randn(1, 64, 50, generator=g(20))
    method = tandem.Method(conv.forward, (x,), dynamic_shapes=({2: Dim("n", min=5, max=100)},))
    program = tandem.export(conv, {"forward": method}, quantize_convs=kind)
    assert [o.name for o in program.method("forward").ops] == ["conv"]
    x90 = torch.randn(1, 64, 90, generator=g(21))
    with torch.no_grad():
        torch.testing.assert_close(tandem.load(program.to_bytes()).forward(x90), conv(x90), rtol=1e-5, atol=1e-5)
