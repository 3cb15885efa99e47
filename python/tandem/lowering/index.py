"""Indexing: index_select, embedding, advanced indexing, index_put, gather, scatter, slice_scatter
and select_scatter, sort/topk (src/kernels/select.c, scatter.c), and flip and as_strided (index_select
at constant positions). Every index tensor goes through check_index unless it is in range by construction."""

from __future__ import annotations

import math

import torch

from ..ir import BOOL, F32, I32, I64, Op, Value, as_size, same_shape
from .core import _dim, _meta, _position, _require_static, _shape_of, _size, _static, aten, bind_sizes, handles
from .provenance import source_line
from .shape import _fill, _is_slice_of, _slice_value


def _checked_index(L, idx: Value, n: int) -> Value:
    """idx (int64 or int32), after an op that fails the call if any index is outside [-n, n)."""
    if idx.dtype not in (I64, I32):
        idx = L.cast(idx, I64)
    if idx in L.const_tensor:
        t = L.const_tensor[idx]
        if t.numel() and (t.min() < -n or t.max() >= n):
            L.fail(f"constant index {t.tolist()} is out of range for a dimension of size {n}")
        return idx
    key = (idx.storage, idx.offset, idx.shape, n)
    if _in_range_by_construction(L, idx, n):
        return idx
    if key not in L.checked:
        L.checked.add(key)
        L.ops.append(Op("check_index", [idx], [], [n], [], source_line(L.node)))
    return idx


def _in_range_by_construction(L, idx: Value, n: int) -> bool:
    """Whether every element of idx is in [0, n) whatever the inputs: an argmax/argmin (or sort/topk
    indices) over a dim of at most n elements (the quantizer's codes index its codebook). Such an
    index needs no check_index, so the ops that compute it may run after state writes."""
    op = _producer_op(L, idx)
    if op is None or idx.dtype != I64:
        return False
    if op.name in ("argmax", "argmin") and op.outs[0].storage is idx.storage:
        return op.ins[0].shape[op.iattr[0]] <= n
    if op.name in ("sort", "topk") and op.outs[1].storage is idx.storage:
        return op.ins[0].shape[op.iattr[0]] <= n
    return False


def _index_select_value(L, x: Value, dim: int, idx: Value, out_shape) -> Value:
    if not x.shape:  # a 0-d x: its one element (index 0 or -1)
        x, dim = L.reshape(x, (1,)), 0
        return L.reshape(L.emit("index_select", [x, _checked_index(L, idx, 1)], x.dtype, idx.shape, iattr=[0]), out_shape)
    return L.emit("index_select", [x, _checked_index(L, idx, x.shape[dim])], x.dtype, out_shape, iattr=[dim])


@handles(aten.embedding.default)
def _embedding(L, node, args, kwargs):
    return _index_select_value(L, args[0], 0, args[1], _shape_of(node))


@handles(aten.index_select.default)
def _index_select(L, node, args, kwargs):
    return _index_select_value(L, args[0], _dim(int(args[1]), len(args[0].shape)), args[2], _shape_of(node))


def _advanced_index(L, x: Value, indices):
    """x[indices] as PyTorch's advanced indexing reads it, when every index is an integer tensor:
    (x', d, flat, S): x' is a view of x with the indexed dims merged into dim d, flat (int64, shape
    S = the indices' broadcast shape) indexes that merged dim (already validated by check_index,
    negative entries normalized). Indexed dims that are not adjacent are first moved to the front
    (a permute), as PyTorch then puts S first. One index: itself, unchanged."""
    used = [(d, i) for d, i in enumerate(indices) if i is not None]
    if not used:
        L.fail("indexing without an index tensor")
    for _, i in used:
        if not isinstance(i, Value) or i.dtype not in (I64, I32):
            L.fail(
                "indexing with a boolean mask gives a size that depends on values: use torch.where(mask, x, 0) "
                "(or x * mask) to keep the shape; integer index tensors (int64 or int32) are supported"
            )
    dims = [d for d, _ in used]
    if dims != list(range(dims[0], dims[0] + len(dims))):  # not adjacent: indexed dims first
        perm = dims + [d for d in range(len(x.shape)) if d not in dims]
        x = L.emit("permute", [x], x.dtype, [x.shape[p] for p in perm], iattr=perm)
        dims = list(range(len(dims)))
    d0 = dims[0]
    if len(used) == 1:
        return x, d0, _checked_index(L, used[0][1], x.shape[d0]), used[0][1].shape
    S = torch.broadcast_shapes(*[i.shape for _, i in used])
    flat, stride = None, 1
    for d, (_, i) in reversed(list(zip(dims, used))):
        n = x.shape[d]
        i = L.cast(_checked_index(L, i, n), I64)
        i = L.emit("remainder", [i, L.scalar(n, I64)], I64, i.shape) if n else i  # [-n, n) -> [0, n)
        term = i if stride == 1 else L.emit("mul", [i, L.scalar(stride, I64)], I64, i.shape)
        flat = term if flat is None else L.emit("add", [flat, term], I64, torch.broadcast_shapes(flat.shape, term.shape))
        stride *= n
    flat = L.expand(flat, S)
    merged = x.shape[:d0] + (stride,) + x.shape[d0 + len(dims) :]
    return L.reshape(x, merged), d0, flat, tuple(S)


def _constant_masks(L, indices):
    """indices with each boolean mask that is a constant (not 0-d) replaced by the integer indices of
    its true elements, one index tensor per dim it covers (torch.nonzero's columns), which PyTorch's
    x[mask] reads the same; None if a mask is not a constant."""
    out = []
    for i in indices:
        if isinstance(i, Value) and i.dtype == BOOL:
            if i not in L.const_tensor or not i.shape:
                return None
            where = L.const_tensor[i].nonzero()
            out += [L.const(where[:, k].contiguous()) for k in range(where.shape[1])]
        else:
            out.append(i)
    return out


@handles(aten.index.Tensor)
def _index(L, node, args, kwargs):
    """x[indices]; a boolean mask that is a constant indexes as its true elements' positions, so the
    size of x[mask], which torch leaves unknown, is known at export (bind_sizes)."""
    indices = _constant_masks(L, args[1])
    if indices is None:
        _require_static(node)  # a mask computed per call: a size that depends on values
        indices = args[1]
    x, d, idx, S = _advanced_index(L, args[0], indices)
    bind_sizes(node, x.shape[:d] + tuple(S) + x.shape[d + 1 :])
    return _index_select_value(L, x, d, idx, _shape_of(node))


def _mask_values_broadcast(base: Value, indices, values: Value) -> bool:
    """Whether values broadcast over base[mask]'s elements whatever their number (a number, one row)."""
    lead = next(d for d, i in enumerate(indices) if i is not None)
    rest = base.shape[lead + len(indices[lead].shape) :]
    vshape = tuple(values.shape)
    return not (len(vshape) > len(rest) + 1 or (len(vshape) == len(rest) + 1 and vshape[0] != 1))


def _mask_put(L, node, base: Value, indices, values: Value, acc: bool):
    """base[mask] = values (or +=) for one boolean mask over consecutive dims, with values that
    broadcast over the selected elements: where(mask, values, base), a fixed shape."""
    lead = next(d for d, i in enumerate(indices) if i is not None)
    mask = indices[lead]
    rest = base.shape[lead + len(mask.shape) :]
    vshape = tuple(values.shape)
    if not _mask_values_broadcast(base, indices, values):
        L.fail(
            "x[mask] = values needs values that broadcast over x[mask]'s elements (a number, or one row); "
            "the number of selected elements depends on the mask's values"
        )
    values = L.reshape(values, vshape[1:] if len(vshape) == len(rest) + 1 else vshape)
    m = L.reshape(mask, mask.shape + (1,) * len(rest))
    dt = base.dtype
    values = L.cast(values, dt)
    if acc:
        zero = L.scalar(0, dt)
        add = L.emit("where", [m, values, zero], dt, torch.broadcast_shapes(m.shape, values.shape))
        return L.emit("add", [base, add], dt, base.shape)
    return L.emit("where", [m, values, base], dt, base.shape)


@handles(aten.index_put.default)
def _index_put(L, node, args, kwargs):
    base, indices, values = args[0], args[1], args[2]
    acc = bool(kwargs.get("accumulate", args[3] if len(args) > 3 else False))
    used = [i for i in indices if i is not None]
    if len(used) == 1 and isinstance(used[0], Value) and used[0].dtype == BOOL:
        # values for every selected element (not one row) under a constant mask: put at its true
        # elements' positions; else where(mask, values, base)
        ints = None if _mask_values_broadcast(base, list(indices), values) else _constant_masks(L, indices)
        if ints is None:
            return _mask_put(L, node, base, list(indices), values, acc)
        indices = ints
    x, d, idx, S = _advanced_index(L, base, indices)
    k = math.prod(S)
    if x is not base and x.storage is not base.storage:  # permuted: put into the copy, permute back
        perm = [i for i, v in enumerate(indices) if v is not None]
        perm = perm + [i for i in range(len(base.shape)) if i not in perm]
        inv = [perm.index(i) for i in range(len(perm))]
        y = L.reshape(_put_rows(L, x, d, idx, S, k, values, acc), [base.shape[p] for p in perm])
        return L.emit("permute", [y], y.dtype, base.shape, iattr=inv)
    return L.reshape(_put_rows(L, x, d, idx, S, k, values, acc), base.shape)


def _put_rows(L, x: Value, d: int, idx: Value, S, k: int, values: Value, acc: bool) -> Value:
    """index_put on dim d of x with a flat index of shape S; values broadcast to x's shape with d
    replaced by S."""
    want = x.shape[:d] + tuple(S) + x.shape[d + 1 :]
    values = L.expand(L.cast(values, x.dtype), want)
    values = L.reshape(values, x.shape[:d] + (k,) + x.shape[d + 1 :])
    idx = L.reshape(idx, (k,))
    return L.emit("index_put", [x, idx, values], x.dtype, x.shape, iattr=[d, int(acc)])


@handles(aten.slice_scatter.default)
def _slice_scatter(L, node, args, kwargs):
    base, src = args[0], args[1]
    dim = _dim(int(args[2]) if len(args) > 2 else 0, len(base.shape))
    size = base.shape[dim]
    start = args[3] if len(args) > 3 and args[3] is not None else 0
    start = _position(L, start, size, "the slice's start", clamp=True)
    step = _static(L, args[5], "the slice's step") if len(args) > 5 else 1
    return _scatter(L, base, src, dim, start, step)


@handles(aten.select_scatter.default)
def _select_scatter(L, node, args, kwargs):
    base, src, dim = args[0], args[1], _dim(int(args[2]), len(args[0].shape))
    i = _position(L, as_size(args[3]), base.shape[dim], "the index", clamp=False)
    shape = list(base.shape)
    shape[dim] = 1
    return _scatter(L, base, L.reshape(src, shape), dim, i, 1)


def _scatter(L, base: Value, src: Value, dim: int, start: int, step: int) -> Value:
    if same_shape(src.shape, base.shape) and start == 0:
        return L.cast(src, base.dtype)  # replaces everything: no need to read base
    if _is_slice_of(base, src, dim, start, step):
        return base  # writes back what is already there (functionalization's view replay)
    return L.emit("slice_scatter", [base, L.cast(src, base.dtype)], base.dtype, base.shape, iattr=[dim, start, step])


@handles(aten.gather.default)
def _gather(L, node, args, kwargs):
    x, idx = args[0], args[2]
    out_shape = _shape_of(node)
    if math.prod(out_shape) == 0:
        return _fill(L, 0, x.dtype, out_shape)
    dim = _dim(int(args[1]), max(len(x.shape), 1))
    if not x.shape:  # a 0-d x: one element, index 0 (or -1)
        x, idx = L.reshape(x, (1,)), L.reshape(idx, (1,) * max(len(idx.shape), 1))
    idx = _checked_index(L, idx, x.shape[dim])
    y = L.emit("gather", [x, idx], x.dtype, idx.shape, iattr=[dim])
    return L.reshape(y, out_shape)


def _select_op(L, node, x: Value, name: str, dim: int, iattr_rest: list):
    """sort / topk: [values, indices] along dim (0-d x: itself and index 0)."""
    shapes = [tuple(_size(d, node) for d in v.shape) for v in node.meta["val"][:2]]
    if not x.shape:
        return [x, _fill(L, 0, I64, ())]
    dim = _dim(dim, len(x.shape))
    dt = x.dtype if x.dtype in (F32, I64, I32) else I32  # bool values are ordered as 0 and 1
    vals = L.new(dt, shapes[0])
    ids = L.new(I64, shapes[1])
    L.ops.append(Op(name, [L.cast(x, dt)], [vals, ids], [dim] + iattr_rest, [], source_line(L.node)))
    return [L.cast(vals, x.dtype), ids]


@handles(aten.sort.default, aten.sort.stable)
def _sort(L, node, args, kwargs):
    if node.target == aten.sort.default:
        dim = kwargs.get("dim", args[1] if len(args) > 1 else -1)
        desc = kwargs.get("descending", args[2] if len(args) > 2 else False)
    else:  # sort.stable(x, *, stable, dim, descending): tandem's sort is always stable
        dim, desc = kwargs.get("dim", -1), kwargs.get("descending", False)
    return _select_op(L, node, args[0], "sort", int(dim), [int(bool(desc))])


@handles(aten.topk.default)
def _topk(L, node, args, kwargs):
    a = list(args) + [None] * 5
    k = _static(L, a[1], "k of topk")
    dim = kwargs.get("dim", a[2] if a[2] is not None else -1)
    largest = kwargs.get("largest", a[3] if a[3] is not None else True)
    # sorted=False leaves the order to the implementation: tandem's is sorted
    return _select_op(L, node, args[0], "topk", int(dim), [k, int(bool(largest))])


def _producer_op(L, v: Value):
    """The op of L.ops that wrote v's storage (the last one), or None (an input, a constant, state)."""
    return next((o for o in reversed(L.ops) if any(u.storage is v.storage for u in o.outs)), None)


def _rows_index(L, idx: Value, dim: int, src: Value):
    """When idx is `i.view(1, .., k, .., 1).expand(src's shape)` (one index per position along dim,
    the same across every other dim: moshi's ring cache writes `cache.scatter_(2, i.expand(B, H, T, D), k)`),
    the 1-d index i of k entries; else None. Then the scatter writes whole rows: an index_put."""
    if idx.shape != src.shape:
        return None
    op = _producer_op(L, idx)
    if op is None or op.name != "expand" or op.outs[0] is not idx:
        return None
    i = op.ins[0]
    shape = (1,) * (len(idx.shape) - len(i.shape)) + tuple(i.shape)
    if any(s != 1 for d, s in enumerate(shape) if d != dim) or shape[dim] != idx.shape[dim]:
        return None
    return L.reshape(i, (idx.shape[dim],))


def _scatter_into(L, x: Value, dim: int, idx: Value, src: Value) -> Value:
    if math.prod(idx.shape) == 0:
        return x
    if not x.shape:  # a 0-d x: one element, index 0 (or -1)
        x1 = L.reshape(x, (1,))
        y = _scatter_into(L, x1, 0, L.reshape(idx, (1,)), L.reshape(src, (1,)))
        return L.reshape(y, ())
    rows = _rows_index(L, idx, dim, src)
    if rows is not None:
        rows = _checked_index(L, rows, x.shape[dim])
        want = x.shape[:dim] + (rows.shape[0],) + x.shape[dim + 1 :]
        if tuple(src.shape) == want:  # the index covers every position outside dim: whole rows
            return L.emit("index_put", [x, rows, L.cast(src, x.dtype)], x.dtype, x.shape, iattr=[dim, 0])
    idx = _checked_index(L, idx, x.shape[dim])
    return L.emit("scatter", [x, idx, L.cast(src, x.dtype)], x.dtype, x.shape, iattr=[dim])


@handles(aten.scatter.src, aten.scatter.value)
def _scatter_handler(L, node, args, kwargs):
    """x.scatter(dim, index, src) / x.scatter(dim, index, value) (and scatter_, functionalized):
    check_index + scatter, or index_put when the index is one row index expanded over the other dims."""
    x, idx = args[0], args[2]
    if kwargs.get("reduce") is not None:
        L.fail("scatter with reduce= is not supported yet (scatter_add and scatter_reduce neither)")
    dim = _dim(int(args[1]), max(len(x.shape), 1))
    if node.target == aten.scatter.value:
        src = L.expand(L.operand(args[3], x.dtype), idx.shape)
    else:
        src = args[3]
        if tuple(src.shape) != tuple(idx.shape):  # PyTorch reads src's leading corner of index's shape
            for d in range(len(idx.shape)):
                src = _slice_value(L, src, d, 0, idx.shape[d], 1)
            if tuple(src.shape) != tuple(idx.shape):
                src = L.emit("copy", [src], src.dtype, idx.shape)
    return _scatter_into(L, x, dim, idx, src)


@handles(aten.flip.default)
def _flip(L, node, args, kwargs):
    """flip: an index_select per flipped dim with the constant reversed positions (static dims)."""
    x = args[0]
    for d in dict.fromkeys(_dim(int(d), len(x.shape)) for d in args[1]):
        n = _static(L, x.shape[d], "a flipped dim")
        if n > 1:
            x = _index_select_value(L, x, d, L.const(torch.arange(n - 1, -1, -1)), x.shape)
    return x


@handles(aten.as_strided.default)
def _as_strided(L, node, args, kwargs):
    """as_strided (every size static): one index_select of x's elements at the constant positions the
    strides give (Longformer's and LED's overlapping chunks). The strides and offset count elements of
    x's storage as its traced strides lay x out there; each position read maps back to x's element there."""
    x, size, stride = args[0], args[1], args[2]
    offset = _static(L, args[3] if len(args) > 3 and args[3] is not None else kwargs.get("storage_offset") or 0, "as_strided's offset")
    base = _meta(node.args[0])
    shape = [_static(L, d, "an as_strided input's size") for d in x.shape]
    size = [_static(L, d, "as_strided's size") for d in size]
    stride = [_static(L, d, "as_strided's stride") for d in stride]
    n = math.prod(shape)
    layout = [int(d) for d in base.stride()]
    if any(s == 0 and d > 1 for d, s in zip(shape, layout)):
        L.fail("as_strided of an expanded tensor (a stride of 0) is not supported")

    def end(sizes, strides, start):  # one past the last storage element read
        return start + sum((d - 1) * s for d, s in zip(sizes, strides)) + 1 if all(sizes) else start

    storage = torch.full((max(end(shape, layout, int(base.storage_offset())), end(size, stride, offset), 1),), -1)
    storage.as_strided(shape, layout, int(base.storage_offset())).copy_(torch.arange(n).view(shape))
    positions = storage.as_strided(size, stride, offset).reshape(-1)
    if positions.numel() and int(positions.min()) < 0:
        L.fail("as_strided reads storage elements outside its input")
    flat = L.reshape(x, (n,))
    return L.reshape(_index_select_value(L, flat, 0, L.const(positions.clone()), (positions.numel(),)), tuple(size))
