"""Weight quantization at export (`tandem.export(..., quantize="int8" | "int4")`), a pass over the
lowered methods after `tie_embeddings` and before `layout.py`: the weights of linear layers
(`matmul_packed`; also a mixture-of-experts layer's experts, `matmul_grouped`, each expert as a
linear layer, read by `matmul_grouped_q8` / `matmul_grouped_q4`) and embedding tables
(`embedding_packed`, and `index_select` of rows of a parameter), each in its natural layout B [K, N],
become int8 or int4 codes [K, N] with float32 scales, read by `matmul_q8`/`matmul_q4`/`embedding_q8`/
`embedding_q4`; layout.py then lays them out as those ops read them (docs/ops.md). Activations stay
float32.

- int8: symmetric, per output channel (a column of B [K, N], i.e. a row of a Linear's weight or of
  an embedding table): scale = max|w| / 127, q = round(w / scale) in [-127, 127].
- int4: symmetric, per output channel and group of `group` consecutive k (default 32): scale =
  max|w| / d over the group, with d in 7, 7.1, ..., 8.5 the one whose q = clamp(round(w / scale),
  -8, 7) has the least squared error over the group. No zero point.

Only weights that are parameters of the exported module(s) are quantized (a constant computed in the
method, or a buffer, stays float32), and `skip` keeps chosen ones in float32: a list of substrings
of the parameter's name ("lm_head", "layers.0.") or a predicate `(name, shape) -> bool` over the
parameter's name and shape as the module holds it. A tied table is quantized once: the embedding
reads its rows from the quantized weight of the output layer.

With int8 and `convs=True` or "int8" (`tandem.export(..., quantize_convs=True)`), also the
convolutions whose streaming step reads many weight bytes per output (a few output positions of a big
kernel: conv_q8 / conv_transpose_q8, see quantize_conv.py); with `convs="bf16"` (and any mode, None
too) those with at most two positions get bfloat16 weights instead (conv_bf16 / conv_transpose_bf16);
with `convs="int16"` (any mode) those too, and the convolutions over 3-128 positions with 256+ outputs run on
16-bit integers (conv_i16 / conv_transpose_i16: int16 weights, activations quantized to 13 bits per
block of 32; bound by multiply-adds, which `i32x4.dot_i16x8_s` does twice as many of per instruction);
otherwise, and for the other convs, they stay float32. It is opt-in because it costs more accuracy
than int8 linear layers do: on the full-size Mimi, 8% of the codes differ from eager with int8 convs,
2-3% with bfloat16 or int16 ones, against none with the linear layers alone.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Union

import torch

from .ir import BF16, CONST, F32, I8, I16, I64, ExportError, Op, Storage, Value, flat_ops, op_lists
from .quantize_conv import quantize_convs, quantize_i16, to_bf16
from .schema import QUANT_GROUP

Skip = Union[None, Sequence[str], Callable[[str, tuple], bool]]
# int4 scale candidates, amax / d (quantize_weight): d = 7 first (ties keep it), then 7.1 ... 8.5
INT4_DIVISORS = [7.0] + [7.0 + 0.1 * i for i in range(1, 16)]


def quantize_weight(w: torch.Tensor, mode: str, group: int = QUANT_GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """w [K, N] -> (q [K, N] int8 codes, scales [K or ceil(K/group) rows, N] float32): w ≈ q · scale
    (int8: one scale row for every k; int4: row g covers k in [g·group, (g+1)·group))."""
    w = w.detach().to(torch.float32)
    K, N = w.shape
    if mode == "int8":
        amax = w.abs().amax(dim=0, keepdim=True) if K else torch.zeros(1, N)
        scale = (amax / 127).to(torch.float32)
        q = torch.where(scale > 0, w / torch.where(scale > 0, scale, 1), 0).round().clamp(-127, 127)
        return q.to(torch.int8), scale
    G = group
    NG = -(-K // G)
    padded = torch.zeros(NG * G, N)
    padded[:K] = w
    g = padded.reshape(NG, G, N)
    amax = g.abs().amax(dim=1)  # [NG, N]
    # The scale of each group is the one of INT4_STEPS candidates, amax / d for d from 7 (amax
    # itself a code) to 8.5 (codes over the whole [-8, 7], the largest values clipped), with the
    # least squared error sum (w - scale·q)² over the group: rounding to a finer grid wins where
    # the group's values are not dominated by one extreme.
    best_q = best_s = best_err = None
    for d in INT4_DIVISORS:
        scale = (amax / d).to(torch.float32)
        s = scale[:, None, :]
        q = torch.where(s > 0, g / torch.where(s > 0, s, 1), 0).round().clamp(-8, 7)
        err = ((q * s - g) ** 2).sum(dim=1)
        if best_err is None:
            best_q, best_s, best_err = q, scale, err
            continue
        better = err < best_err
        best_q = torch.where(better[:, None, :], q, best_q)
        best_s = torch.where(better, scale, best_s)
        best_err = torch.where(better, err, best_err)
    return best_q.reshape(NG * G, N)[:K].to(torch.int8), best_s


class _Names:
    """Names a weight B [K, N] by the module parameter it was made from (W = B.T as nn.Linear holds
    it, or B itself), or None when it is not a parameter."""

    def __init__(self, params: Sequence[tuple[str, torch.Tensor]]):
        self.by_shape: dict = {}
        for name, p in params:
            if p.dim() in (2, 3) and p.is_floating_point():
                p = p.detach()
                self.by_shape.setdefault(tuple(p.shape), []).append((name, p, bool(p.isnan().any())))

    def __call__(self, b: torch.Tensor) -> Optional[tuple[list, tuple]]:
        """b [K, N], or [E, K, N] (a mixture-of-experts layer's expert weights)."""
        K, N = b.shape[-2:]
        found, shape = [], None
        for cand, view in ((b.shape[:-2] + (N, K), b.transpose(-2, -1)), (tuple(b.shape), b)):
            for name, p, nan in self.by_shape.get(cand, ()):
                if p.dtype == view.dtype and (torch.equal(p, view) or nan and _equal_nan(p, view)):
                    found.append(name)
                    shape = shape or cand
        return (found, shape) if found else None


def _equal_nan(a: torch.Tensor, b: torch.Tensor) -> bool:
    """torch.equal with NaN equal to NaN (a parameter holding NaN is still found as that parameter);
    only for a parameter that holds NaN: torch.equal alone stops at the first difference, this reads
    both tensors whole (every candidate of a weight's shape is compared)."""
    nan = a.isnan()
    return torch.equal(nan, b.isnan()) and torch.equal(a.masked_fill(nan, 0), b.masked_fill(nan, 0))


def _skipped(skip: Skip, names: list, shape: tuple) -> bool:
    if skip is None:
        return False
    if callable(skip):
        return any(bool(skip(n, shape)) for n in names)
    if isinstance(skip, str):
        skip = [skip]
    return any(s in n for s in skip for n in names)


def quantize_methods(
    methods: list,
    mode: Optional[str],
    params: Sequence[tuple[str, torch.Tensor]],
    group: int = QUANT_GROUP,
    skip: Skip = None,
    convs: Union[bool, str] = False,
) -> None:
    """Rewrites the methods' float32 weight ops into quantized ones, in place (see the module)."""
    if convs is not True and convs is not False and convs not in ("int8", "bf16", "int16"):
        raise ExportError(f"quantize_convs={convs!r}: use False, True (the same as 'int8'), 'bf16' or 'int16'")
    convs = "int8" if convs is True else convs or None
    if convs == "int8" and mode != "int8":
        raise ExportError(
            f"quantize_convs='int8' needs quantize='int8' (int8 convolutions), not quantize={mode!r}; "
            "quantize_convs='bf16' and 'int16' go with any quantize"
        )
    if mode not in (None, "int8", "int4"):
        raise ExportError(f"quantize={mode!r}: use 'int8', 'int4' or None")
    if mode == "int4" and (not isinstance(group, int) or group < 2 or group % 2):
        raise ExportError(f"quantize_group={group!r}: the int4 group size must be an even integer >= 2")
    if not (
        skip is None
        or callable(skip)
        or isinstance(skip, str)
        or (isinstance(skip, (list, tuple, set)) and all(isinstance(s, str) for s in skip))
    ):
        raise ExportError("quantize_skip must be a list of name substrings or a function (name, shape) -> bool")
    if convs in ("bf16", "int16"):  # the convolutions a streaming step reads many weight bytes for (quantize_conv.py)
        quantize_convs(methods, params, lambda n, s: _skipped(skip, n, s), lambda b: (_const(to_bf16(b), BF16),), "bf16")
    if convs == "int16":  # and those over many positions, bound by their multiply-adds

        def i16(b):
            w, scale = quantize_i16(b)
            return _const(w, I16), _const(scale, F32)

        quantize_convs(methods, params, lambda n, s: _skipped(skip, n, s), i16, "i16")
    if mode is None:
        return
    names = _Names(params)
    done: dict = {}  # float32 weight Storage -> (codes Value, scales Value) or None (stays float32)

    def quantized(v: Value, b: torch.Tensor):
        """(codes, scales) Values for the weight B [K, N] b held by v's storage, or None to keep it."""
        if v.storage not in done:
            named = names(b)
            if named is None or _skipped(skip, *named):
                done[v.storage] = None
            else:
                if b.dim() == 3:  # [E, K, N]: codes [E, K, N], scales [E, 1 or ceil(K/group), N]
                    qs = [quantize_weight(e, mode, group) for e in b]
                    q, scale = torch.stack([q for q, _ in qs]), torch.stack([s for _, s in qs])
                else:
                    q, scale = quantize_weight(b, mode, group)
                done[v.storage] = (_const(q, I8), _const(scale, F32))
        return done[v.storage]

    # B's laid out in panels by layout.py after this pass: here each is the natural [K, N] constant
    weights = set()
    for m in methods:
        for op in flat_ops(m.ops):
            if op.name in ("matmul_packed", "embedding_packed"):
                w = op.ins[1] if op.name == "matmul_packed" else op.ins[0]
                if w.storage.kind == CONST and w.offset == 0 and w.nbytes == w.storage.nbytes:
                    weights.add(w.storage)
    attrs = (lambda N: [N]) if mode == "int8" else (lambda N: [N, group])
    suffix = "q8" if mode == "int8" else "q4"
    # the experts of a mixture-of-experts layer: each expert's [K, N] as a Linear's weight
    for ops in (lst for m in methods for lst in op_lists(m.ops)):
        for i, op in enumerate(ops):
            w = op.ins[1] if op.name == "matmul_grouped" else None
            if w is not None and w.storage.kind == CONST and w.offset == 0 and w.nbytes == w.storage.nbytes:
                r = quantized(w, _natural(w))
                if r:
                    ops[i] = Op(f"matmul_grouped_{suffix}", [op.ins[0], *r, op.ins[2]], op.outs, attrs(op.iattr[0]), [], op.where)
    for ops in (lst for m in methods for lst in op_lists(m.ops)):
        for i, op in enumerate(ops):
            if op.name == "matmul_packed" and op.ins[1].storage in weights:
                r = quantized(op.ins[1], _natural(op.ins[1]))
                if r:
                    ops[i] = Op(f"matmul_{suffix}", [op.ins[0], *r], op.outs, attrs(op.iattr[0]), [], op.where)
            elif op.name == "embedding_packed" and op.ins[0].storage in weights:
                r = quantized(op.ins[0], _natural(op.ins[0]))
                if r:
                    ops[i] = Op(f"embedding_{suffix}", [*r, op.ins[1]], op.outs, attrs(op.iattr[0]), [], op.where)
            elif op.name == "index_select" and op.iattr == [0] and _is_table(op.ins[0]) and op.ins[1].dtype == I64:
                x = op.ins[0]
                r = quantized(x, _natural(x).t())
                if r:
                    ops[i] = Op(f"embedding_{suffix}", [*r, op.ins[1]], op.outs, attrs(x.shape[0]), [], op.where)
    if convs == "int8":  # the convolutions a streaming step reads many weight bytes for (quantize_conv.py)

        def q8(b):
            q, scale = quantize_weight(b, "int8")
            return _const(q, I8), _const(scale, F32)

        quantize_convs(methods, params, lambda n, s: _skipped(skip, n, s), q8)


def _natural(v: Value) -> torch.Tensor:
    return v.storage.tensor.reshape(v.shape)


def _is_table(x: Value) -> bool:
    return (
        x.storage.kind == CONST
        and x.dtype == F32
        and len(x.shape) == 2
        and x.offset == 0
        and x.nbytes == x.storage.nbytes
        and x.shape[0] > 0
        and x.shape[1] > 0
    )


def _const(t: torch.Tensor, dtype: int) -> Value:
    t = t.contiguous()
    return Value(dtype, tuple(t.shape), Storage(CONST, t.numel() * t.element_size(), tensor=t, dtype=dtype))
