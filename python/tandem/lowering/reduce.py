"""Reductions and normalizations: sum/mean/amax/amin, any/all, argmax/argmin, cumsum, histc, softmax,
layer norm, variance and group norm (src/kernels/reduce.c)."""

from __future__ import annotations

import math
import operator

from ..ir import BOOL, F32, I32, I64, SymDim, Value, as_size
from .core import HANDLERS, _dim, _dtype_of, _shape_of, _size, _static, aten, handles
from .shape import _fill

REDUCE = {aten.sum.dim_IntList: "sum", aten.mean.dim: "mean", aten.amax.default: "amax", aten.amin.default: "amin"}


def _reduce(L, node, args, kwargs):
    name = REDUCE[node.target]
    x = args[0]
    dt = _dtype_of(node)
    dims = args[1] if len(args) > 1 and args[1] is not None else list(range(len(x.shape)))
    dims = sorted({_dim(int(d), len(x.shape)) for d in dims}) or list(range(len(x.shape)))
    if not x.shape:
        return L.cast(x, dt)
    if dt == I32:  # int32 extremes through int64 (exact)
        return L.cast(L.emit(name, [L.cast(x, I64)], I64, _shape_of(node), iattr=dims), I32)
    return L.emit(name, [L.cast(x, dt)], dt, _shape_of(node), iattr=dims)


for _t in REDUCE:
    HANDLERS[_t] = _reduce


@handles(aten.sum.default, aten.mean.default)
def _sum_all(L, node, args, kwargs):
    x = args[0]
    dt = _dtype_of(node)
    if not x.shape:
        return L.cast(x, dt)
    name = "sum" if node.target == aten.sum.default else "mean"
    return L.emit(name, [L.cast(x, dt)], dt, (), iattr=list(range(len(x.shape))))


@handles(aten.max.default, aten.min.default)
def _extreme_all(L, node, args, kwargs):
    """torch.max(x) / torch.min(x) of every element: amax / amin over all dims."""
    x = args[0]
    if x.dtype == BOOL:
        L.fail("max / min of a bool tensor is not supported; use x.any() / x.all()")
    if not x.shape:
        return x
    name = "amax" if node.target == aten.max.default else "amin"
    return _reduce_to(L, name, x, _dtype_of(node))


def _reduce_to(L, name, x, dt):
    dims = list(range(len(x.shape)))
    if dt == I32:  # int32 extremes through int64 (exact)
        return L.cast(L.emit(name, [L.cast(x, I64)], I64, (), iattr=dims), I32)
    return L.emit(name, [L.cast(x, dt)], dt, (), iattr=dims)


@handles(aten._softmax.default, aten._log_softmax.default)
def _softmax(L, node, args, kwargs):
    x = args[0]
    name = "softmax" if node.target == aten._softmax.default else "log_softmax"
    if not x.shape:  # a 0-d x: one element
        return L.reshape(L.emit(name, [L.reshape(x, (1,))], F32, (1,), iattr=[0]), ())
    return L.emit(name, [x], F32, x.shape, iattr=[_dim(int(args[1]), len(x.shape))])


@handles(aten.native_layer_norm.default)
def _layer_norm(L, node, args, kwargs):
    x, normalized, w, b, eps = args[0], args[1], args[2], args[3], args[4]
    ins = [x] + [t for t in (w, b) if t is not None]
    y = L.emit("layer_norm", ins, F32, x.shape, iattr=[len(normalized), int(w is not None), int(b is not None)], fattr=[eps])
    return [y, None, None]  # mean and rstd are not produced; using them fails in getitem


ANY_ALL = (aten.any.default, aten.all.default, aten._is_any_true.default, aten._is_all_true.default)  # over every element


@handles(aten.any.dim, aten.any.dims, aten.all.dim, aten.all.dims, *ANY_ALL)
def _any_all(L, node, args, kwargs):
    name = "any" if node.target in (aten.any.dim, aten.any.dims, aten.any.default, aten._is_any_true.default) else "all"
    x = L.cast(args[0], BOOL)
    d = kwargs.get("dim", args[1] if len(args) > 1 else None)
    if node.target in ANY_ALL or d is None:  # any.dims without dims: all of them
        dims = list(range(len(x.shape)))
    else:
        dims = sorted({_dim(int(i), len(x.shape)) for i in (d if isinstance(d, (list, tuple)) else [d])})
    if not x.shape or not dims:
        return x
    return L.emit(name, [x], BOOL, _shape_of(node), iattr=dims)


@handles(aten.argmax.default, aten.argmin.default)
def _argmax(L, node, args, kwargs):
    x = args[0]
    dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    if dim is None:
        x = L.reshape(x, (x.numel,))
        dim = 0
    name = "argmax" if node.target == aten.argmax.default else "argmin"
    if x.dtype not in (F32, I64):
        x = L.cast(x, I64)  # int32, bool: exact
    if not x.shape:  # a 0-d tensor's only index
        return _fill(L, 0, I64, _shape_of(node))
    return L.emit(name, [x], I64, _shape_of(node), iattr=[_dim(int(dim), len(x.shape))])


@handles(aten.max.dim, aten.min.dim)
def _max_dim(L, node, args, kwargs):
    """torch.max / torch.min over a dim: (values, indices) as amax / amin and argmax / argmin (the
    indices only where something reads them)."""
    x = args[0]
    dim = _dim(int(args[1]), max(len(x.shape), 1))
    keep = bool(args[2]) if len(args) > 2 else bool(kwargs.get("keepdim", False))
    if not x.shape:
        return [x, _fill(L, 0, I64, ())]
    shape = x.shape[:dim] + ((1,) if keep else ()) + x.shape[dim + 1 :]
    big = node.target == aten.max.dim
    if x.dtype in (F32, I64):
        vals = L.emit("amax" if big else "amin", [x], x.dtype, shape, iattr=[dim])
    else:  # int32, bool: through int64 (exact)
        vals = L.cast(L.emit("amax" if big else "amin", [L.cast(x, I64)], I64, shape, iattr=[dim]), x.dtype)
    read = any(u.target is operator.getitem and u.args[1] == 1 for u in node.users)
    idx = L.emit("argmax" if big else "argmin", [x if x.dtype in (F32, I64) else L.cast(x, I64)], I64, shape, iattr=[dim]) if read else None
    return [vals, idx]


@handles(aten.cumsum.default)
def _cumsum(L, node, args, kwargs):
    dt = _dtype_of(node)
    x = L.cast(args[0], dt)
    if not x.shape:
        return x
    return L.emit("cumsum", [x], dt, x.shape, iattr=[_dim(int(args[1]), len(x.shape))])


@handles(aten.histc.default)
def _histc(L, node, args, kwargs):
    """torch.histc with a static range min < max (a mixture-of-experts layer's tokens per expert): a
    sum over the elements of whether each lies in each bin, the bins' edges those torch computes
    (linspace of min, max), the last bin closed. O(elements x bins): the bins are few. One bin over
    the data's own range (min = max: a layer of one expert) counts every element."""
    import torch

    x = args[0]
    bins = int(args[1]) if len(args) > 1 else int(kwargs.get("bins", 100))
    lo = float(args[2]) if len(args) > 2 else float(kwargs.get("min", 0))
    hi = float(args[3]) if len(args) > 3 else float(kwargs.get("max", 0))
    if x.dtype != F32:
        L.fail("histc is supported for float32")
    if lo == hi and bins == 1:  # the range of the data itself, one bin (a single expert's count): every element
        flat = L.reshape(x, (math.prod(x.shape),)) if x.shape else L.reshape(x, (1,))
        counted = L.cast(L.emit("eq", [flat, flat], BOOL, flat.shape), F32)  # NaN aside
        return L.emit("sum", [counted], F32, (1,), iattr=[0])
    if not lo < hi or bins < 1:
        L.fail(f"histc is supported with min < max (a static range), not min={lo}, max={hi}")
    edges = torch.linspace(lo, hi, bins + 1, dtype=torch.float32)
    upper = edges[1:].clone()
    upper[-1] = torch.nextafter(upper[-1], torch.tensor(math.inf))  # the last bin holds max itself
    col = L.reshape(x, x.shape + (1,))
    ones = (1,) * len(x.shape)
    shape = x.shape + (bins,)
    above = L.emit("ge", [col, L.const(edges[:-1].reshape(ones + (bins,)))], BOOL, shape)
    below = L.emit("lt", [col, L.const(upper.reshape(ones + (bins,)))], BOOL, shape)
    inside = L.emit("logical_and", [above, below], BOOL, shape)
    if not x.shape:
        return L.cast(inside, F32)
    return L.emit("sum", [L.cast(inside, F32)], F32, (bins,), iattr=list(range(len(x.shape))))


def _var(L, x: Value, dims, correction, keepdim: bool):
    """(var, mean with keepdim) over dims: the mean of squared deviations, divided by
    max(0, N - correction) (PyTorch's rule: 0/0 gives NaN, s/0 inf)."""
    if not x.shape:
        x = L.reshape(x, (1,))
    rank = len(x.shape)
    dims = sorted({_dim(int(d), rank) for d in dims}) if dims else list(range(rank))
    n = math.prod(x.shape[d] for d in dims)
    keep = tuple(1 if i in dims else s for i, s in enumerate(x.shape))
    mean = L.emit("mean", [x], F32, keep, iattr=dims)
    dev = L.emit("sub", [x, mean], F32, x.shape)
    sq = L.emit("sum", [L.emit("mul", [dev, dev], F32, x.shape)], F32, keep, iattr=dims)
    c = 1.0 if correction is None else float(correction)
    if isinstance(n, SymDim):  # the count depends on the dims: max(0, N - correction) per call
        if c != int(c):
            L.fail(f"var/std over a dynamic dim with a fractional correction ({c}) is not supported; use an integer one")
        den = L.emit("maximum", [L.scalar(n - int(c), F32), L.scalar(0.0, F32)], F32, ())
    else:
        den = L.scalar(max(0.0, n - c), F32)
    var = L.emit("div", [sq, den], F32, keep)
    return var, mean


@handles(aten.var.correction, aten.var_mean.correction)
def _var_handler(L, node, args, kwargs):
    x = args[0]
    if x.dtype != F32:
        L.fail("var/std are supported on float32")
    dims = kwargs.get("dim", args[1] if len(args) > 1 else None)
    var, mean = _var(L, x, dims, kwargs.get("correction"), bool(kwargs.get("keepdim", False)))
    if node.target == aten.var.correction:
        return L.reshape(var, _shape_of(node))
    shape = tuple(_size(d, node) for d in node.meta["val"][0].shape)
    return [L.reshape(var, shape), L.reshape(mean, shape)]


@handles(aten.native_group_norm.default)
def _group_norm(L, node, args, kwargs):
    """Group norm as a layer norm over each group's channels and positions, then the per-channel
    weight and bias: x [N, C, *] -> [N, G, C/G * HW] -> layer_norm -> [N, C, HW] * w[C, 1] + b[C, 1]."""
    x, w, b, N, C, HW, G, eps = args[:8]
    N, C, HW, G = as_size(N), _static(L, C, "the channel count"), as_size(HW), _static(L, G, "the group count")
    if x.dtype != F32:
        L.fail("group norm is supported on float32")
    if N * C * HW == 0:
        return [_fill(L, 0, F32, x.shape), _fill(L, float("nan"), F32, (N, G)), _fill(L, float("nan"), F32, (N, G))]
    xg = L.reshape(x, (N, G, (C // G) * HW))
    y = L.emit("layer_norm", [xg], F32, xg.shape, iattr=[1, 0, 0], fattr=[eps])
    # mean and rstd [N, G] (dropped by the planner unless read)
    var, mean = _var(L, xg, [2], 0, True)
    rstd = L.emit("rsqrt", [L.emit("add", [var, L.scalar(eps, F32)], F32, var.shape)], F32, var.shape)
    y = L.reshape(y, (N, C, HW))
    if w is not None:
        y = L.emit("mul", [y, L.reshape(w, (C, 1))], F32, y.shape)
    if b is not None:
        y = L.emit("add", [y, L.reshape(b, (C, 1))], F32, y.shape)
    return [L.reshape(y, x.shape), L.reshape(mean, (N, G)), L.reshape(rstd, (N, G))]
