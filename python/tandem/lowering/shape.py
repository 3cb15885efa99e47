"""Views, copies, fills and shape ops: view/reshape/squeeze (a value over its base's storage),
expand, permute, slice, select, split, cat, repeat, constant_pad, full/zeros/ones, arange, empty
(src/kernels/shape.c)."""

from __future__ import annotations

import math

import torch

from .. import schema
from ..ir import DTYPE_SIZE, F32, TORCH_DTYPE, SymDim, Value, as_size
from .core import FILL_MAX_NUMEL, _corners, _dim, _dtype_of, _position, _shape_of, _static, aten, handles, size_expr_text


@handles(aten._to_copy.default, aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default, aten.detach.default)
def _to_copy(L, node, args, kwargs):
    return L.cast(args[0], _dtype_of(node))


@handles(
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.squeeze.default,
    aten.unsqueeze.default,
    aten.flatten.using_ints,
)
def _view(L, node, args, kwargs):
    return L.reshape(args[0], _shape_of(node))


@handles(aten.full.default)
def _full(L, node, args, kwargs):
    dt, shape = _dtype_of(node), _shape_of(node)
    return _fill(L, args[1], dt, shape)


@handles(aten.full_like.default)
def _full_like(L, node, args, kwargs):
    return _fill(L, args[1], _dtype_of(node), _shape_of(node))


@handles(aten.zeros_like.default, aten.zeros.default)
def _zeros(L, node, args, kwargs):
    return _fill(L, 0, _dtype_of(node), _shape_of(node))


@handles(aten.ones_like.default, aten.ones.default)
def _ones(L, node, args, kwargs):
    return _fill(L, 1, _dtype_of(node), _shape_of(node))


def _fill(L, value, dt, shape):
    if isinstance(value, (SymDim, torch.SymInt, torch.SymFloat, torch.SymBool)):  # a size as the value: per call
        return L.expand(L.scalar(value, dt), shape)
    if isinstance(value, Value):  # computed per call from sizes (n / 2)
        return L.expand(L.cast(L.reshape(value, ()), dt), shape)
    n = 1
    for d in shape:
        n *= d
    if n <= FILL_MAX_NUMEL and not isinstance(n, SymDim):
        return L.const(torch.full(shape, value, dtype=TORCH_DTYPE[dt]))
    if dt == F32:
        return L.emit("fill", [], dt, shape, fattr=[float(value)])
    return L.emit("fill", [], dt, shape, iattr=[int(value)])


@handles(aten.copy.default)
def _copy(L, node, args, kwargs):
    dst, src = args[0], args[1]
    return L.expand(L.cast(src, dst.dtype), dst.shape)


@handles(aten.expand.default)
def _expand(L, node, args, kwargs):
    return L.expand(args[0], _shape_of(node))


@handles(aten.permute.default)
def _permute(L, node, args, kwargs):
    x = args[0]
    perm = [_dim(int(p), len(x.shape)) for p in args[1]]
    if perm == sorted(perm):
        return x
    # moving only size-1 dims keeps the byte order: a view
    if [d for d in perm if x.shape[d] != 1] == sorted(d for d in perm if x.shape[d] != 1):
        return L.reshape(x, _shape_of(node))
    return L.emit("permute", [x], x.dtype, _shape_of(node), iattr=perm)


def _same_size(a, b) -> bool:
    """Whether two sizes are equal in every call: a SymDim equals a static size only at its maximum
    (x[:, :off + T] of a cache is not the whole cache)."""
    if isinstance(a, SymDim) or isinstance(b, SymDim):
        return isinstance(a, SymDim) and isinstance(b, SymDim) and int(a) == int(b) and a.expr == b.expr
    return a == b


def _slice_is_view(x: Value, dim: int, length, step: int) -> bool:
    """Whether x[.., start:start + length*step:step, ..] along dim is contiguous bytes of x (a view)."""
    outer = 1
    for d in x.shape[:dim]:
        outer *= d
    return (step == 1 or length <= 1) and (outer == 1 or _same_size(length, x.shape[dim]))


def _slice_value(L, x: Value, dim: int, start: int, length: int, step: int) -> Value:
    shape = list(x.shape)
    shape[dim] = length
    inner = DTYPE_SIZE[x.dtype]
    for d in x.shape[dim + 1 :]:
        inner *= d
    src = L.sliced.get(x.storage)
    if src is not None and src[4] is x and src[1] != dim:
        # x is a slice copy of base along another dim (pocket-tts' `valid = cache[:, :, :offset + T]`, then
        # valid[0], valid[1]): slices along different dims commute, so when this one is a view of base,
        # take it first and slice the (smaller) result: cache[0][:, :offset + T] is a view, and the copy of
        # the whole cache prefix is left unread (dropped by the planner)
        base, d0, start0, step0, _ = src
        if _slice_is_view(base, dim, length, step):
            return _slice_value(L, _slice_value(L, base, dim, start, length, step), d0, start0, x.shape[d0], step0)
    if _slice_is_view(x, dim, length, step):
        if _same_size(length, x.shape[dim]) and start == 0:
            return x
        return x.view(shape, start * inner)
    out = L.emit("slice", [x], x.dtype, shape, iattr=[dim, start, step])
    L.sliced[out.storage] = (x, dim, start, step, out)
    return out


def _is_slice_of(base: Value, v: Value, dim: int, start: int, step: int) -> bool:
    """Whether v is the view base[..., start::step (len v.shape[dim]), ...] of base's bytes."""
    if v.storage is not base.storage or v.dtype != base.dtype or len(v.shape) != len(base.shape):
        return False
    length = v.shape[dim]
    if any(a != b for i, (a, b) in enumerate(zip(v.shape, base.shape)) if i != dim):
        return False
    outer = math.prod(base.shape[:dim])
    inner = DTYPE_SIZE[base.dtype] * math.prod(base.shape[dim + 1 :])
    contiguous = (step == 1 or length <= 1) and (outer == 1 or _same_size(length, base.shape[dim]))
    return contiguous and v.offset == base.offset + start * inner


@handles(aten.slice.Tensor)
def _slice(L, node, args, kwargs):
    x = args[0]
    dim = _dim(int(args[1]) if len(args) > 1 else 0, len(x.shape))
    size = x.shape[dim]
    start = args[2] if len(args) > 2 and args[2] is not None else 0
    step = _static(L, args[4], "the slice's step") if len(args) > 4 else 1
    start = _position(L, start, size, "the slice's start", clamp=True)
    length = _shape_of(node)[dim]
    return _slice_value(L, x, dim, start, length, step)


@handles(aten.select.int)
def _select(L, node, args, kwargs):
    x = args[0]
    dim = _dim(int(args[1]), len(x.shape))
    i = _position(L, as_size(args[2]), x.shape[dim], "the index", clamp=False)
    return L.reshape(_slice_value(L, x, dim, i, 1, 1), _shape_of(node))


@handles(aten.split_with_sizes.default, aten.split.Tensor)
def _split(L, node, args, kwargs):
    x = args[0]
    dim = _dim(int(args[2]) if len(args) > 2 else 0, len(x.shape))
    if node.target == aten.split.Tensor:
        size = _static(L, args[1], "the split size")
        if isinstance(x.shape[dim], SymDim):  # pieces whose number depends on the dim
            L.fail(
                f"split of a dim of size {size_expr_text(x.shape[dim])} gives a number of pieces that depends on it; split "
                "with explicit sizes (torch.split(x, [a, b], dim)) instead"
            )
        sizes = [min(size, x.shape[dim] - s) for s in range(0, x.shape[dim], size)]
    else:
        sizes = [as_size(s) for s in args[1]]
    outs, start = [], 0
    for s in sizes:
        outs.append(_slice_value(L, x, dim, start, s, 1))
        start += s
    return outs


@handles(aten.cat.default)
def _cat(L, node, args, kwargs):
    dt = _dtype_of(node)
    # an empty input adds no elements (torch checked its other dims): not read, so a torch.empty((1, 0, d))
    # beside real rows (pocket-tts' `backbone_input_latents`) is no read of unwritten memory
    xs = [L.cast(x, dt) for x in args[0] if not _same_size(x.numel, 0)]
    dim = _dim(int(args[1]) if len(args) > 1 else 0, len(_shape_of(node)))
    if not xs:  # every input is empty: so is the result
        return _fill(L, 0, dt, _shape_of(node))
    if len(xs) == 1:
        return xs[0]
    return L.emit("cat", xs, dt, _shape_of(node), iattr=[dim])


@handles(aten.repeat.default)
def _repeat(L, node, args, kwargs):
    """x.repeat(r0, r1, ...): x viewed with a size-1 dim before each repeated dim, expanded to r_i
    there, and read as the merged dims (one expand copy)."""
    x, reps = args[0], [_static(L, r, "a repeat count") for r in args[1]]
    out_shape = _shape_of(node)
    shape = (1,) * (len(reps) - len(x.shape)) + tuple(x.shape)
    if math.prod(out_shape) == 0:
        return _fill(L, 0, x.dtype, out_shape)
    src, big = [], []
    for r, d in zip(reps, shape):
        if r != 1 and d != 1:
            src += [1, d]
            big += [r, d]
        else:
            src.append(d)
            big.append(r * d)
    if len(big) > schema.MAX_RANK:
        L.fail(f"repeat over {len(big)} dims after splitting is above tandem's maximum rank {schema.MAX_RANK}")
    return L.reshape(L.expand(L.reshape(x, src), big), out_shape)


@handles(aten.constant_pad_nd.default)
def _constant_pad(L, node, args, kwargs):
    """Padding pairs (before, after) from the last dim backward: a negative amount crops (a slice),
    a positive one adds constant blocks around x (a cat); dims without padding cost nothing."""
    x, pad = args[0], [_static(L, p, "a padding amount") for p in args[1]]
    value = kwargs.get("value", args[2] if len(args) > 2 else 0)
    out_shape, dt = _shape_of(node), x.dtype
    if math.prod(out_shape) == 0 or math.prod(x.shape) == 0:
        return _fill(L, value, dt, out_shape)
    for k in range(len(pad) // 2):
        d = len(x.shape) - 1 - k
        before, after = pad[2 * k], pad[2 * k + 1]
        if before < 0 or after < 0:
            start, stop = max(0, -before), x.shape[d] - max(0, -after)
            x = _slice_value(L, x, d, start, stop - start, 1)
        parts = []
        for amount in (before, after):
            shape = list(x.shape)
            shape[d] = amount
            parts.append(_fill(L, value, dt, shape) if amount > 0 else None)
        pieces = [p for p in (parts[0], x, parts[1]) if p is not None]
        if len(pieces) > 1:
            shape = list(x.shape)
            shape[d] = sum(p.shape[d] for p in pieces)
            x = L.emit("cat", pieces, dt, shape, iattr=[d])
    return x


@handles(aten.scalar_tensor.default)
def _scalar_tensor(L, node, args, kwargs):
    return L.scalar(args[0], _dtype_of(node))


# Evaluated at export when every tensor input is a constant (or there is none).
FOLDABLE_EXTRA = {aten.arange.start_step, aten.arange.default, aten.arange.start}


@handles(*FOLDABLE_EXTRA)
def _arange(L, node, args, kwargs):
    """arange whose start (or end and start) is a size, so not folded: start + step * k for k in
    [0, length), from a constant 0, 1, ... (as long as the longest length over the dims' range)
    viewed at the call's length."""
    if node.target == aten.arange.default:
        start, step = 0, 1
    else:
        start = args[0]
        step = args[2] if len(args) > 2 else kwargs.get("step", 1)
    step = _static(L, step, "arange's step") if isinstance(step, (SymDim, torch.SymInt)) else step
    dt = _dtype_of(node)
    (length,) = _shape_of(node)
    longest = max(int(length.expr.subs(c)) for c in _corners()) if isinstance(length, SymDim) else int(length)
    k = L.const(torch.arange(max(longest, 1), dtype=TORCH_DTYPE[dt])).view((length,))
    if step != 1:
        k = L.emit("mul", [k, L.scalar(step, dt)], dt, (length,))
    return L.emit("add", [k, L.scalar(start, dt)], dt, (length,))


EMPTY = (aten.empty.memory_format, aten.empty_like.default, aten.new_empty.default, aten.empty_strided.default, aten.empty_permuted.default)


@handles(*EMPTY)
def _empty(L, node, args, kwargs):
    """torch.empty & co.: uninitialized scratch. Its bytes must be written before they are read
    (checked in lower_method's _check_empty_reads; the verifier checks it again at load)."""
    v = L.new(_dtype_of(node), _shape_of(node))
    L.empty.add(v.storage)
    return v
