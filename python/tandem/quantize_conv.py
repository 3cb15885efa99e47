"""`quantize="int8"` for convolutions (called by quantize.quantize_methods): a `conv` or
`conv_transpose` whose call reads many weight bytes per output, i.e. one with at most
CONV_Q8_MAX_ROWS (16) rows of activations per image (output positions of a conv, input positions of
a transposed conv: a streaming step of a big strided kernel) and at least CONV_Q8_MIN_WEIGHTS
weights, becomes `conv_q8` / `conv_transpose_q8` (src/kernels/conv_q8.c) with its weights int8 per
output column of the GEMV it runs (a conv's output channel; a transposed conv's output channel and
tap), in matmul_q8's layout (layout.py). Such a call is bound by reading the weights, not by its
multiply-adds (Mimi's encoder's 512→1024 k16 s8 reads 32 MB of float32 for two outputs), and int8
reads a quarter of the bytes; each row of activations is quantized to int16 per block of 32 (matmul_q8's
rows are int8) and the runtime sums int16 × int8 exactly. Convolutions over many positions stay float32 (their GEMM is bound by
arithmetic, where int8 would only add the conversion), as do grouped ones, weights that are not a
parameter of the module (a batch norm folded in, a computed weight) and those `skip` names.

`quantize_convs="bf16"` (with any `quantize`) makes the same convs `conv_bf16` / `conv_transpose_bf16`
instead, where they have at most CONV_BF16_MAX_ROWS rows: the weights rounded to bfloat16 (float32's
top half, to nearest even) in 2-row panels (layout.py), read at half float32's bytes and multiplied in
float32 (nothing else rounded: on the full-size Mimi 3 of 128 codes moved, against 8 for int8 convs).

`quantize_convs="int16"` does that and makes the convs with CONV_I16_MIN_ROWS to CONV_I16_MAX_ROWS rows
(and CONV_I16_MIN_K k per output, CONV_I16_MIN_M outputs per row) `conv_i16` / `conv_transpose_i16`: their
GEMM bound by multiply-adds, run on 16-bit integers (src/kernels/conv_i16.c): the weights rounded to
13 bits per output row (quantize_i16), the activations to 13 bits per block of 32 k at run time.
"""

from __future__ import annotations

import math

import torch

from .ir import CONST, F32, SCRATCH, Op, Storage, Value, op_lists

# At Mimi's full-size shapes int8 saves time over float32 up to 16 positions, where reading the weights
# bounds the conv; at 96 and more positions the float GEMM is bound by arithmetic and stays.
CONV_Q8_MAX_ROWS = 16
CONV_Q8_MIN_WEIGHTS = 65536  # 256 KB of float32: below it the weights stay in cache between steps
# conv_bf16's GEMV runs two rows of activations a pass over the weights: more would read them again
# (Mimi's bandwidth-bound convs have 1-2 positions; its 16-position ones are bound by arithmetic).
CONV_BF16_MAX_ROWS = 2
ABLOCK = 32  # src/kernels/variants.h TDM_Q8_ABLOCK
# conv_i16: from 3 rows (1-2 rows are the dot convs above, bound by weight bytes) to 128 (past that the
# float32 path's Winograd transforms save as many multiplies: at Mimi's k8 s4 at 480 positions int16
# is no faster), at least one block of 32 k (fewer would pad each weight row with zeros), and at
# least 256 rows of the GEMM (a conv's output channels, a transposed conv's O·kernel): the panels'
# quantization is a pass over the activations, paid back only by many GEMM rows (with 32-128 rows
# the int16 conv is slower than the float32 one, with 256 and more faster).
CONV_I16_MIN_ROWS, CONV_I16_MAX_ROWS, CONV_I16_MIN_K, CONV_I16_MIN_M = 3, 128, 32, 256
I16_LEVELS = 4095  # 13-bit codes: 32 products of two of them sum exactly in int32


def q8_workspace(rows: int, K: int, M: int) -> int:
    """Floats of conv_q8's workspace (src/kernels/conv_q8.c tdm__conv_q8_workspace): the rows, the
    result, the rows as int16 pairs, their block scales and a flag per row."""
    return rows * K + rows * M + rows * ((K + 3) // 2) + rows * (-(-K // ABLOCK) + 1)


def bf16_workspace(rows: int, K: int, M: int) -> int:
    """Floats of conv_bf16's workspace (src/kernels/conv_q8.c tdm__conv_bf16_workspace): the rows, the
    result and the rows split into even and odd k per block of 8."""
    return rows * K + rows * M + rows * 8 * -(-K // 8)


def to_bf16(B: torch.Tensor) -> torch.Tensor:
    """B [K, M] float32 rounded to bfloat16 (torch's rounding: to nearest even), as the int16 of its bits
    (layout.py puts its columns in conv_bf16's 2-row panels)."""
    return B.detach().to(torch.bfloat16).contiguous().view(torch.int16)


def i16_workspace(cols: int, K: int, M: int) -> int:
    """Floats of conv_i16's GEMM workspace (src/kernels/conv_i16.c i16_parts): per 8 columns a float
    panel [K, 8], its codes [K32/2, 8, 2] int16, block scales [K32/32, 8] and a flag."""
    K32 = -(-K // 32) * 32
    return -(-cols // 8) * (8 * K + 4 * K32 + K32 // 4 + 1)


def quantize_i16(B: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """B [K, M] float32 -> (codes int16 [K, M]: each column of B, i.e. each output row of the GEMM, as
    round(w / s) (to nearest even) with s = max |w| / 4095; scale float32 [M]). layout.py writes the
    columns as conv_i16's rows."""
    w = B.detach().float()
    scale = w.abs().amax(0) / I16_LEVELS
    q = torch.where(scale[None, :] > 0, torch.round(w / torch.where(scale > 0, scale, 1)[None, :]), 0).clamp(-I16_LEVELS, I16_LEVELS)
    return q.to(torch.int16), scale.contiguous()


# kind -> (rows at least, rows at most, workspace past the rows: (rows, K, M) -> floats)
_KINDS = {
    "q8": (1, CONV_Q8_MAX_ROWS, q8_workspace),
    "bf16": (1, CONV_BF16_MAX_ROWS, bf16_workspace),
    "i16": (CONV_I16_MIN_ROWS, CONV_I16_MAX_ROWS, i16_workspace),
}


class _ConvParams:
    """Finds the module parameter a conv's constant weight was made from, by shape and value."""

    def __init__(self, params):
        self.by_numel: dict = {}
        for name, p in params:
            if p.dim() >= 3 and p.is_floating_point():
                self.by_numel.setdefault(p.numel(), []).append((name, p.detach()))

    def find(self, flat: torch.Tensor, as_flat) -> tuple:
        """(names, shape) of the parameters p with as_flat(p) equal to flat, or ([], None)."""
        found, shape = [], None
        for name, p in self.by_numel.get(flat.numel(), ()):
            v = as_flat(p)
            if v is not None and v.shape == flat.shape and v.dtype == flat.dtype and torch.equal(v, flat):
                found.append(name)
                shape = shape or tuple(p.shape)
        return found, shape


def _static(shape) -> bool:
    return all(type(d) is int for d in shape)  # a SymDim (a dynamic size) is an int too


def _const_tensor(v: Value):
    if v.storage.kind != CONST or v.dtype != F32 or v.offset or v.nbytes != v.storage.nbytes or v.storage.tensor is None:
        return None
    return v.storage.tensor.reshape(v.shape)


def quantize_convs(methods: list, params, skipped, convert, kind: str = "q8") -> None:
    """Rewrites the methods' qualifying conv / conv_transpose ops in place (see the module).
    skipped(names, shape) -> bool; convert(B [K, M]) -> the weight Values for B's columns in B's layout,
    which layout.py lays out: (q, scale) for kind "q8" and "i16", (w,) for "bf16"."""
    index = _ConvParams(params)
    done: dict = {}  # float32 weight Storage -> convert's Values, or None

    def weights(v: Value, B: torch.Tensor, as_flat):
        if v.storage not in done:
            names, shape = index.find(B.t().contiguous(), as_flat)
            done[v.storage] = None if not names or skipped(names, shape) else convert(B)
        return done[v.storage]

    for ops in (lst for m in methods for lst in op_lists(m.ops)):
        for i, op in enumerate(ops):
            if op.name == "conv" and len(op.outs) <= 2:
                new = _conv(op, weights, kind)
            elif op.name == "conv_transpose":
                new = _conv_transpose(op, weights, kind)
            else:
                continue
            if new is not None:
                ops[i] = new


def _fits(kind: str, rows: int, K: int, M: int) -> bool:
    """Whether a conv with `rows` rows of activations against K·M weights (K per output, M outputs per
    row: a conv's output channels, a transposed conv's output channels and taps) is one `kind` takes."""
    lo, hi, _ = _KINDS[kind]
    if kind == "i16":
        return lo <= rows <= hi and K >= CONV_I16_MIN_K and M >= CONV_I16_MIN_M
    return lo <= rows <= hi and K * M >= CONV_Q8_MIN_WEIGHTS


def _conv(op: Op, weights, kind):
    workspace = _KINDS[kind][2]
    x, w, y = op.ins[0], op.ins[1], op.outs[0]
    r, hb, groups = op.iattr[:3]
    if groups != 1 or not (_static(x.shape) and _static(y.shape)):
        return None
    wt = _const_tensor(w)
    rows, O = math.prod(y.shape[2:]), w.shape[0]
    if wt is None or not _fits(kind, rows, wt.numel() // O, O):
        return None
    K = wt.numel() // O
    r_ = weights(w, wt.reshape(O, K).t(), lambda p: p.reshape(O, K) if p.shape == wt.shape else None)
    if r_ is None:
        return None
    ws = _scratch(workspace(rows, K, O))
    kernel = [int(k) for k in w.shape[2:]]
    iattr = [r, hb, 1] + kernel + list(op.iattr[3:])  # stride, padding, dilation[, activation]
    return Op(f"conv_{kind}", [x, *r_, *op.ins[2:]], [y, ws], iattr, [], op.where)


def _conv_transpose(op: Op, weights, kind):
    workspace = _KINDS[kind][2]
    x, w, y = op.ins[0], op.ins[1], op.outs[0]
    r, hb, groups = op.iattr[:3]
    if groups != 1 or not (_static(x.shape) and _static(y.shape)):
        return None
    wt = _const_tensor(w)  # [1, M, C]: torch's [C, O, *kernel] as the GEMM's rows
    rows, C, M = math.prod(x.shape[2:]), x.shape[1], w.shape[1]
    if wt is None or not _fits(kind, rows, C, M):
        return None
    r_ = weights(w, wt[0].t(), lambda p: p.reshape(C, M).t() if p.shape[0] == C and p.numel() == C * M else None)
    if r_ is None:
        return None
    # conv_i16: z [M, rows] and the panels' part; the others: x transposed, z, then the rows' part
    ws = _scratch(M * rows + i16_workspace(rows, C, M) if kind == "i16" else workspace(rows, C, M) + rows * (C + M))
    return Op(f"conv_transpose_{kind}", [x, *r_, *op.ins[2:]], [y, ws], list(op.iattr), [], op.where)


def _scratch(floats: int) -> Value:
    return Value(F32, (floats,), Storage(SCRATCH, 4 * floats))
