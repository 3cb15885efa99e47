"""Elementwise ops: the binary and comparison ops (with PyTorch's type promotion), the unary ops,
gelu, elu, clamp, where, isnan/isinf/isfinite (src/kernels/elementwise.c)."""

from __future__ import annotations

import math

import torch

from ..ir import BOOL, DTYPE_CODE, F32, I32, I64, TORCH_DTYPE, Value
from .core import HANDLERS, Lowering, _dtype_of, _shape_of, aten, handles
from .index import _producer_op, _scatter
from .shape import _fill, _slice_value

BINARY = {
    aten.add.Tensor: "add",
    aten.add.Scalar: "add",
    aten.sub.Tensor: "sub",
    aten.sub.Scalar: "sub",
    aten.mul.Tensor: "mul",
    aten.mul.Scalar: "mul",
    aten.div.Tensor: "div",
    aten.div.Scalar: "div",
    aten.maximum.default: "maximum",
    aten.minimum.default: "minimum",
    aten.pow.Tensor_Tensor: "pow",
    aten.pow.Tensor_Scalar: "pow",
    aten.pow.Scalar: "pow",
    aten.remainder.Tensor: "remainder",
    aten.remainder.Scalar: "remainder",
    aten.eq.Tensor: "eq",
    aten.eq.Scalar: "eq",
    aten.ne.Tensor: "ne",
    aten.ne.Scalar: "ne",
    aten.lt.Tensor: "lt",
    aten.lt.Scalar: "lt",
    aten.le.Tensor: "le",
    aten.le.Scalar: "le",
    aten.gt.Tensor: "gt",
    aten.gt.Scalar: "gt",
    aten.ge.Tensor: "ge",
    aten.ge.Scalar: "ge",
    aten.logical_and.default: "logical_and",
    aten.logical_or.default: "logical_or",
}
COMPARE = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"}


def _compute_dtype(node, a, b) -> int:
    def probe(x):
        if isinstance(x, Value):
            return torch.empty((1,) * 0, dtype=TORCH_DTYPE[x.dtype])
        return x

    return DTYPE_CODE[torch.result_type(probe(a), probe(b))]


def _binary(L: Lowering, node, args, kwargs):
    name = BINARY[node.target]
    a, b = args[0], args[1]
    out_dtype = _dtype_of(node)
    alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
    if name in COMPARE:
        cd = _compute_dtype(node, a, b)
    else:
        cd = out_dtype
    va, vb = L.operand(a, cd), L.operand(b, cd)
    if alpha != 1 and name in ("add", "sub"):
        vb = L.emit("mul", [vb, L.scalar(alpha, cd)], cd, vb.shape)
    if name == "pow" and not isinstance(b, Value) and b == 2:
        return L.emit("mul", [va, va], out_dtype, _shape_of(node))
    if name == "div" and kwargs.get("rounding_mode"):
        L.fail("div with rounding_mode is not supported yet")
    return L.emit(name, [va, vb], out_dtype, _shape_of(node))


for _t in BINARY:
    HANDLERS[_t] = _binary


@handles(aten.div.Tensor_mode, aten.div.Scalar_mode, aten.floor_divide.default)
def _div_mode(L, node, args, kwargs):
    if node.target == aten.floor_divide.default:
        mode = "floor"
    else:
        mode = kwargs.get("rounding_mode", args[2] if len(args) > 2 else None)
    out_dtype = _dtype_of(node)
    if out_dtype in (I64, I32) and mode in ("floor", "trunc"):
        # integer division is exact over the whole int64 (int32) range (never through float32)
        name = "floor_divide" if mode == "floor" else "trunc_divide"
        return L.emit(name, [L.operand(args[0], out_dtype), L.operand(args[1], out_dtype)], out_dtype, _shape_of(node))
    cd = F32
    q = L.emit("div", [L.operand(args[0], cd), L.operand(args[1], cd)], cd, _shape_of(node))
    if mode == "floor":
        q = L.emit("floor", [q], cd, q.shape)
    elif mode == "trunc":
        f = L.emit("floor", [q], cd, q.shape)
        c = L.emit("ceil", [q], cd, q.shape)
        q = L.emit("where", [L.emit("lt", [q, L.scalar(0.0, cd)], BOOL, q.shape), c, f], cd, q.shape)
    return L.cast(q, out_dtype)


@handles(aten.fmod.Tensor, aten.fmod.Scalar)
def _fmod(L, node, args, kwargs):
    """fmod(a, b) = a - trunc(a / b) * b (the sign of a), where remainder has the sign of b:
    integers through the exact trunc_divide, floats as remainder moved by b where the signs differ
    (torch.roll's decomposition indexes with fmod)."""
    dt = _dtype_of(node)
    a, b = L.operand(args[0], dt), L.operand(args[1], dt)
    shape = _shape_of(node)
    if dt in (I64, I32):
        q = L.emit("trunc_divide", [a, b], dt, shape)
        return L.emit("sub", [a, L.emit("mul", [q, b], dt, shape)], dt, shape)
    r = L.emit("remainder", [a, b], dt, shape)
    zero = L.scalar(0.0, dt)
    differ = L.emit("ne", [L.emit("lt", [r, zero], BOOL, shape), L.emit("lt", [a, zero], BOOL, a.shape)], BOOL, shape)
    moved = L.emit("logical_and", [differ, L.emit("ne", [r, zero], BOOL, shape)], BOOL, shape)
    return L.emit("where", [moved, L.emit("sub", [r, b], dt, shape), r], dt, shape)


@handles(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(L, node, args, kwargs):
    cd = _dtype_of(node)
    alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
    va, vb = L.operand(args[0], cd), L.operand(args[1], cd)
    if alpha != 1:
        va = L.emit("mul", [va, L.scalar(alpha, cd)], cd, va.shape)
    return L.emit("sub", [vb, va], cd, _shape_of(node))


UNARY = {
    aten.neg.default: "neg",
    aten.abs.default: "abs",
    aten.exp.default: "exp",
    aten.log.default: "log",
    aten.sqrt.default: "sqrt",
    aten.rsqrt.default: "rsqrt",
    aten.sin.default: "sin",
    aten.cos.default: "cos",
    aten.tanh.default: "tanh",
    aten.sigmoid.default: "sigmoid",
    aten.relu.default: "relu",
    aten.silu.default: "silu",
    aten.erf.default: "erf",
    aten.reciprocal.default: "reciprocal",
    aten.floor.default: "floor",
    aten.ceil.default: "ceil",
    aten.logical_not.default: "logical_not",
    aten.log1p.default: "log1p",
    aten.hardswish.default: "hardswish",
    aten.hardsigmoid.default: "hardsigmoid",
}


def _unary(L, node, args, kwargs):
    name = UNARY[node.target]
    out_dtype = _dtype_of(node)
    x = args[0]
    if name == "logical_not":
        return L.emit(name, [x], BOOL, x.shape)
    return L.emit(name, [L.cast(x, out_dtype)], out_dtype, _shape_of(node))


for _t in UNARY:
    HANDLERS[_t] = _unary


@handles(aten.expm1.default)
def _expm1(L, node, args, kwargs):
    """e^x - 1 without the cancellation of exp(x) - 1 near 0: for |x| < 1/2 its Taylor series to x^8
    (Horner's, relative error below 1e-8 there, from multiplications and additions alone, so as exact
    on a GPU as on the CPU: no cancellation between an exp and a log), beyond it exp(x) - 1 (e^x is
    at least 0.39 from 1 there, so the subtraction loses under 2 bits)."""
    x = L.cast(args[0], F32)
    shape = x.shape
    poly = L.scalar(1.0 / 40320, F32)
    for k in range(7, 0, -1):  # ((x/8! + 1/7!) x + 1/6!) x ... + 1
        poly = L.emit("add", [L.emit("mul", [poly, x], F32, shape), L.scalar(1.0 / math.factorial(k), F32)], F32, shape)
    near = L.emit("mul", [poly, x], F32, shape)
    far = L.emit("sub", [L.emit("exp", [x], F32, shape), L.scalar(1.0, F32)], F32, shape)
    small = L.emit("lt", [L.emit("abs", [x], F32, shape), L.scalar(0.5, F32)], BOOL, shape)
    return L.emit("where", [small, near, far], F32, shape)


# erfinv's single-precision polynomials in w = -log(1 - x²) (M. Giles, "Approximating the erfinv
# function", GPU Computing Gems Jade, 2011): in w - 2.5 where w < 5 (|x| below about 0.9966), else
# in sqrt(w) - 3; highest degree first.
ERFINV_CENTRAL = (
    2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
    -0.00125372503, -0.00417768164, 0.246640727, 1.50140941,
)  # fmt: skip
ERFINV_TAIL = (
    -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
    -0.0076224613, 0.00943887047, 1.00167406, 2.83297682,
)  # fmt: skip


@handles(aten.erfinv.default)
def _erfinv(L, node, args, kwargs):
    """The inverse of erf from existing ops: x·p(w), w = -log((1 - x)(1 + x)), p one of two polynomials
    (Giles's, relative error below 3e-7 over (-1, 1)); ±1 give ±inf, |x| > 1 and NaN give NaN (the
    log of a negative number)."""
    x = L.cast(args[0], F32)
    shape = x.shape

    def poly(t, coefs):
        p = L.scalar(coefs[0], F32)
        for c in coefs[1:]:
            p = L.emit("add", [L.emit("mul", [p, t], F32, shape), L.scalar(c, F32)], F32, shape)
        return p

    one = L.scalar(1.0, F32)
    w = L.emit("mul", [L.emit("sub", [one, x], F32, shape), L.emit("add", [x, one], F32, shape)], F32, shape)
    w = L.emit("neg", [L.emit("log", [w], F32, shape)], F32, shape)
    central = poly(L.emit("sub", [w, L.scalar(2.5, F32)], F32, shape), ERFINV_CENTRAL)
    tail = poly(L.emit("sub", [L.emit("sqrt", [w], F32, shape), L.scalar(3.0, F32)], F32, shape), ERFINV_TAIL)
    p = L.emit("where", [L.emit("lt", [w, L.scalar(5.0, F32)], BOOL, shape), central, tail], F32, shape)
    y = L.emit("mul", [p, x], F32, shape)
    edge = L.emit("eq", [L.emit("abs", [x], F32, shape), one], BOOL, shape)  # the tail's polynomial at w = inf is -inf
    return L.emit("where", [edge, L.emit("mul", [x, L.scalar(math.inf, F32)], F32, shape), y], F32, shape)


@handles(aten.bitwise_and.Tensor, aten.bitwise_or.Tensor)
def _bitwise_bool(L, node, args, kwargs):
    if not all(isinstance(a, Value) and a.dtype == BOOL for a in args[:2]):
        L.fail("bitwise and/or are supported on bool tensors only")
    name = "logical_and" if node.target == aten.bitwise_and.Tensor else "logical_or"
    return L.emit(name, [args[0], args[1]], BOOL, _shape_of(node))


@handles(aten.bitwise_not.default)
def _bitwise_not(L, node, args, kwargs):
    if args[0].dtype != BOOL:
        L.fail("bitwise_not is supported on bool tensors only")
    return L.emit("logical_not", [args[0]], BOOL, args[0].shape)


@handles(aten.gelu.default)
def _gelu(L, node, args, kwargs):
    approx = kwargs.get("approximate", args[1] if len(args) > 1 else "none")
    return L.emit("gelu_tanh" if approx == "tanh" else "gelu", [args[0]], F32, args[0].shape)


@handles(aten.clamp.default, aten.clamp.Tensor)
def _clamp(L, node, args, kwargs):
    dt = _dtype_of(node)
    x = L.cast(args[0], dt)
    lo = kwargs.get("min", args[1] if len(args) > 1 else None)
    hi = kwargs.get("max", args[2] if len(args) > 2 else None)
    if lo is not None:
        x = L.emit("maximum", [x, L.operand(lo, dt)], dt, x.shape)
    if hi is not None:
        x = L.emit("minimum", [x, L.operand(hi, dt)], dt, x.shape)
    return x


@handles(aten.where.self)
def _where(L, node, args, kwargs):
    dt = _dtype_of(node)
    put = _where_as_slice_scatter(L, node, args, dt)
    if put is not None:
        return put
    return L.emit("where", [args[0], L.operand(args[1], dt), L.operand(args[2], dt)], dt, _shape_of(node))


@handles(aten.elu.default)
def _elu(L, node, args, kwargs):
    """x > 0 ? scale·x : scale·alpha·(e^(input_scale·x) - 1), from existing ops."""
    a = list(args) + [1.0, 1.0, 1.0]
    x, alpha, scale, input_scale = args[0], kwargs.get("alpha", a[1]), kwargs.get("scale", a[2]), kwargs.get("input_scale", a[3])
    xs = x if input_scale == 1 else L.emit("mul", [x, L.scalar(float(input_scale), F32)], F32, x.shape)
    if 0 <= alpha <= 1 and input_scale == 1:
        # alpha·(e^min(x, 0) - 1) is 0 for x > 0 and at least x for x <= 0 (e^x >= 1 + x): the
        # maximum of the two is ELU, in four 4-lane ops (no compare, no select)
        neg = L.emit("exp", [L.emit("minimum", [xs, L.scalar(0.0, F32)], F32, x.shape)], F32, x.shape)
        neg = L.emit("sub", [neg, L.scalar(1.0, F32)], F32, x.shape)
        if alpha != 1:
            neg = L.emit("mul", [neg, L.scalar(float(alpha), F32)], F32, x.shape)
        return L.emit("maximum", [x, neg], F32, x.shape)
    neg = L.emit("sub", [L.emit("exp", [xs], F32, x.shape), L.scalar(1.0, F32)], F32, x.shape)
    if alpha != 1:
        neg = L.emit("mul", [neg, L.scalar(float(alpha), F32)], F32, x.shape)
    y = L.emit("where", [L.emit("gt", [x, L.scalar(0.0, F32)], BOOL, x.shape), x, neg], F32, x.shape)
    if scale != 1:
        y = L.emit("mul", [y, L.scalar(float(scale), F32)], F32, x.shape)
    return y


CLASSIFY = {aten.isnan.default: "isnan", aten.isinf.default: "isinf", aten.isfinite.default: "isfinite"}


@handles(*CLASSIFY)
def _classify(L, node, args, kwargs):
    x = args[0]
    name = CLASSIFY[node.target]
    if x.dtype != F32:  # integers and bools are never NaN or infinite
        return _fill(L, int(name == "isfinite"), BOOL, x.shape)
    return L.emit(name, [x], BOOL, x.shape)


def _one_hot_dim(cond: torch.Tensor, rank: int):
    """(dim, i) when a constant bool cond, broadcast to rank, is true exactly at index i of one dim
    and the same along every other dim (torch's select_scatter decomposition:
    `arange(n).view(-1, 1, ..) == i`); else None."""
    c = cond.reshape((1,) * (rank - cond.dim()) + tuple(cond.shape))
    dims = [d for d in range(rank) if c.shape[d] != 1]
    if len(dims) != 1:
        return None
    d = dims[0]
    line = c.reshape(-1)
    hits = line.nonzero().reshape(-1).tolist()
    return (d, hits[0]) if len(hits) == 1 else None


def _where_as_slice_scatter(L, node, args, dt):
    """where(one-hot mask along dim d at i, a, base) with base of the result's shape writes only
    base's index i of d: slice_scatter(base, a's index i of d). What torch's select_scatter
    decomposes to (`cache[0].index_copy_(..)` on a view of a [2, ...] cache: an expand of the new
    [1, ...] slice and a where over the whole cache); as a slice_scatter the planner can write it
    into the state slot in place (plan.py), and the expand is left unread."""
    cond, a, base = args[0], args[1], args[2]
    if not (isinstance(cond, Value) and cond in L.const_tensor and isinstance(a, Value) and isinstance(base, Value)):
        return None
    shape = _shape_of(node)
    if tuple(base.shape) != tuple(shape) or base.dtype != dt or a.dtype != dt or len(shape) == 0:
        return None
    hit = _one_hot_dim(L.const_tensor[cond], len(shape))
    if hit is None:
        return None
    d, i = hit
    src = None
    op = _producer_op(L, a)
    if op is not None and op.name == "expand" and op.outs[0] is a:  # the new slice, broadcast
        x = op.ins[0]
        xs = (1,) * (len(shape) - len(x.shape)) + tuple(x.shape)
        if all(xs[k] == shape[k] for k in range(len(shape)) if k != d):
            x = L.reshape(x, xs)
            src = x if xs[d] == 1 else _slice_value(L, x, d, i, 1, 1)
    if src is None:
        if tuple(a.shape) != tuple(shape):
            return None
        src = _slice_value(L, a, d, i, 1, 1)
    return _scatter(L, base, src, d, i, 1)
