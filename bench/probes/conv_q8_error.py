"""Where conv_q8's error in Mimi comes from (issue #23, branch dotconv): moshi's full-size Mimi (seeded
as bench/models/mimi.py) run in moshi's own eager streaming, with the convolutions that
`quantize_convs=True` makes conv_q8 / conv_transpose_q8 (groups 1, at most 16 rows per call, at least
65536 weights: python/tandem/quantize_conv.py) computed on quantized operands instead, one variant at a
time: the weights int8 per output column (as the export stores them) or per column and block of 32,
the activation rows int8 or int16 per block of 32 (or of 8), on all of them or on the encoder's /
the decoder's only. The products are summed in float64 (conv_q8 sums each block exactly in int32), so
the differences are the quantization's alone. Prints per variant the codes differing from the float32
run (encoder) and the SNR of the decoder's pcm, the decoder fed the float32 run's codes (so that a
changed code does not count twice), in the same pass. Also (branch bf16probe) the weights in 16-bit floats:
"bf16" (float32's top 16 bits, rounded to nearest even as torch's cast does) or "fp16" (IEEE half),
and the rows in bfloat16 too, for comparison. And (issue #23, i16_gemm.c) every GEMM-shaped conv (any
rows, any size) on 16-bit integers: weights per output column and activation rows per block of 32 at
13 bits each (`w13col+a13/32`) or 15 and 11 (`w15col+a11/32`: a block's 32 products still sum exactly in int32).
Usage: python bench/probes/conv_q8_error.py [frames = 40] [variants = all: comma-separated names]."""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from packaged_models import FRAME, mimi  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 40
MAX_ROWS, MIN_WEIGHTS = 16, 65536  # quantize_conv.py's rule


def q_blocks(a: torch.Tensor, block: int, levels: int) -> torch.Tensor:
    """a [..., K] quantized symmetric per block of `block` along K to integers in [-levels, levels],
    returned dequantized (float64), as tdm_q8_quantize_row does with levels = 127."""
    K = a.shape[-1]
    pad = (-K) % block
    b = F.pad(a.double(), (0, pad)).reshape(*a.shape[:-1], -1, block)
    d = (b.abs().amax(-1, keepdim=True).float() / levels).double()  # the scale is float32 in the runtime
    q = torch.where(d > 0, (b / torch.where(d > 0, d, 1)).round().clamp(-levels, levels), 0)
    return (q * d).reshape(*a.shape[:-1], -1)[..., :K]


def q_weights(w2: torch.Tensor, block, levels: int = 127) -> torch.Tensor:
    """w2 [M, K] (a GEMV column per row) int8 per column (block None), per column and block, or
    (block "col2") per column in two levels: int8, then the residual int8 (simulated only), or
    (block "bf16" / "fp16") each weight rounded to bfloat16 / float16 (round to nearest even)."""
    if block in ("bf16", "fp16"):
        return w2.float().to(torch.bfloat16 if block == "bf16" else torch.float16).double()
    if block == "col2":
        w0 = q_blocks(w2.float(), w2.shape[-1], 127)
        return w0 + q_blocks(w2.float() - w0.float(), w2.shape[-1], 127)
    if block is None:
        return q_blocks(w2, w2.shape[-1], levels)
    return q_blocks(w2, block, levels)


def q_rows(a: torch.Tensor, aq) -> torch.Tensor:
    """The activation rows a [..., K] quantized per block ((block, levels)) or rounded to bfloat16."""
    return a.float().to(torch.bfloat16).double() if aq == "bf16" else q_blocks(a, *aq)


# name -> (weights: None (float) | "col" | "col2" | "bf16" | "fp16" | block,
#          activations: None | (block, levels) | "bf16", where: "all" | "enc" | "dec")
VARIANTS = {
    "float32": (None, None, "all"),
    "w8col+a8/32 (conv_q8 today)": ("col", (32, 127), "all"),
    "w8col only": ("col", None, "all"),
    "a8/32 only": (None, (32, 127), "all"),
    "w8/32 only": (32, None, "all"),
    "a8/8 only": (None, (8, 127), "all"),
    "w8col+a16/32": ("col", (32, 32767), "all"),
    "w8x2col only": ("col2", None, "all"),
    "w8x2col+a16/32": ("col2", (32, 32767), "all"),
    "w8col+a8/32 enc only": ("col", (32, 127), "enc"),
    "w8col+a8/32 dec only": ("col", (32, 127), "dec"),
    "w8col+a16/32 enc only": ("col", (32, 32767), "enc"),
    "w8col+a16/32 dec only": ("col", (32, 32767), "dec"),
    "bf16 weights / float rows": ("bf16", None, "all"),
    "bf16 weights / float rows enc only": ("bf16", None, "enc"),
    "bf16 weights / float rows dec only": ("bf16", None, "dec"),
    "fp16 weights / float rows": ("fp16", None, "all"),
    "bf16 weights / bf16 rows": ("bf16", "bf16", "all"),
    "w13col+a13/32 every conv": (("col", 4095), (32, 4095), "all", "every"),
    "w15col+a11/32 every conv": (("col", 32767), (32, 1023), "all", "every"),
    "w13col+a13/32 every conv, enc only": (("col", 4095), (32, 4095), "enc", "every"),
}
PICK = sys.argv[2].split(",") if len(sys.argv) > 2 else list(VARIANTS)

conv1d, conv_t1d = F.conv1d, F.conv_transpose1d
state = {"variant": None, "part": None, "hits": set()}


def _on(w: torch.Tensor, rows: int) -> bool:
    v = state["variant"]
    every = len(v or ()) > 3  # the 16-bit integer variants: every GEMM-shaped conv
    return v is not None and (v[2] == "all" or v[2] == state["part"]) and (every or (rows <= MAX_ROWS and w.numel() >= MIN_WEIGHTS))


def q_conv1d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    y = conv1d(x, w, bias, stride, padding, dilation, groups)
    if groups != 1 or not _on(w, y.shape[-1]) or padding not in (0, (0,)):
        return y
    s, d = (stride[0] if isinstance(stride, tuple) else stride), (dilation[0] if isinstance(dilation, tuple) else dilation)
    O, C, KW = w.shape
    state["hits"].add(("conv", state["part"], C, O, KW, y.shape[-1]))
    wq, aq = state["variant"][:2]
    patches = x.double().unfold(2, (KW - 1) * d + 1, s)[..., ::d]  # [N, C, P, KW]
    patches = patches.permute(0, 2, 1, 3).reshape(x.shape[0], -1, C * KW)  # k = c·KW + kw
    w2 = w.double().reshape(O, C * KW)
    if isinstance(wq, tuple):
        w2 = q_weights(w2, None, wq[1])
    elif wq is not None:
        w2 = q_weights(w2, None if wq == "col" else wq)
    if aq is not None:
        patches = q_rows(patches, aq)
    out = (patches @ w2.t()).transpose(1, 2)
    if bias is not None:
        out = out + bias.double()[:, None]
    return out.float()


def q_conv_t1d(x, w, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    y = conv_t1d(x, w, bias, stride, padding, output_padding, groups, dilation)
    if groups != 1 or not _on(w, x.shape[-1]):
        return y
    C, O, KW = w.shape
    state["hits"].add(("conv_t", state["part"], C, O, KW, x.shape[-1]))
    wq, aq = state["variant"][:2]
    w2 = w.double().reshape(C, O * KW).t()  # [M = O·KW, C]: a column per output channel and tap
    if isinstance(wq, tuple):
        w2 = q_weights(w2, None, wq[1])
    elif wq is not None:
        w2 = q_weights(w2, None if wq == "col" else wq)
    xx = x.double().transpose(1, 2)  # [N, T, C]: a row per input position
    if aq is not None:
        xx = q_rows(xx, aq)
    return conv_t1d(
        xx.transpose(1, 2),
        w2.t().reshape(C, O, KW),
        None if bias is None else bias.double(),
        stride,
        padding,
        output_padding,
        groups,
        dilation,
    ).float()


F.conv1d, F.conv_transpose1d = q_conv1d, q_conv_t1d
torch.set_num_threads(1)
model = mimi(small=False)
g = torch.Generator().manual_seed(1)
chunks = [torch.randn(1, 1, FRAME, generator=g) * 0.3 for _ in range(N)]


def run(variant, codes_in=None):
    """(codes, pcm) over the frames, the decoder fed codes_in's frame i when given (else the codes)."""
    state["variant"] = variant
    codes, pcm = [], []
    with torch.no_grad(), model.streaming(1):
        for i, x in enumerate(chunks):
            state["part"] = "enc"
            c = model.encode(x)
            state["part"] = "dec"
            pcm.append(model.decode(c if codes_in is None else codes_in[..., i : i + 1]))
            codes.append(c)
    return torch.cat(codes, -1), torch.cat(pcm, -1)


ref_codes, ref_pcm = run(None)
print(f"Mimi full size, {N} frames ({ref_codes.numel()} codes), moshi eager streaming, quantized convs simulated", file=sys.stderr)
print("| variant | codes differing | pcm SNR (dB) | pcm max abs diff |")
print("|---|---|---|---|")
for name in PICK:
    codes, pcm = run(VARIANTS[name], ref_codes)
    err = (pcm - ref_pcm).double()
    snr = 10 * torch.log10(ref_pcm.double().pow(2).sum() / err.pow(2).sum().clamp_min(1e-30))
    print(f"| {name} | {int((codes != ref_codes).sum())} / {codes.numel()} | {snr:.1f} | {err.abs().max():.1e} |", flush=True)
print("convs quantized:", sorted(state["hits"]), file=sys.stderr)
