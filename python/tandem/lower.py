"""Core ATen graph of one method -> tandem ops (docs/ops.md lists the mapping).

Pure views (view, reshape, squeeze, contiguous slices, ...) become values that share their
base's storage; everything else becomes a runtime op writing a fresh scratch value. Nodes whose
inputs are all constants are evaluated here, with torch, and stored as constants.
"""
from __future__ import annotations

import operator
from typing import Callable

import torch
from torch.export.graph_signature import InputKind, OutputKind

from .ir import (BOOL, CONST, DTYPE_CODE, DTYPE_SIZE, F32, I64, SCRATCH, STATE, TORCH_DTYPE, ExportError, MethodIR, Op,
                 Storage, Value)

aten = torch.ops.aten

FOLD_MAX_NUMEL = 4096  # constant results larger than this are computed at run time (fill) instead


def source_line(node) -> str:
    """' (at file.py:12: code)' for the innermost user frame of a node, or ''."""
    trace = node.meta.get("stack_trace") if node is not None else None
    if not trace:
        return ""
    lines = trace.strip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        ln = lines[i].strip()
        if ln.startswith("File ") and "/torch/" not in ln:
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            parts = ln.split(",")
            file = parts[0][len("File "):].strip().strip('"').split("/")[-1]
            lineno = parts[1].strip().replace("line ", "") if len(parts) > 1 else "?"
            return f" (at {file}:{lineno}: {code})"
    return ""


def _meta(node):
    v = node.meta.get("val")
    if isinstance(v, torch.Tensor):
        return v
    return None


class Lowering:
    def __init__(self, method: str, states: dict, key_of: Callable):
        self.method = method
        self.states = states
        self.key_of = key_of
        self.ops: list[Op] = []
        self.const_tensor: dict = {}  # Value -> torch.Tensor for constant values
        self.node = None
        self.unsupported: list[str] = []

    # ---- values ---------------------------------------------------------------------------
    def fail(self, msg: str):
        raise ExportError(f"method '{self.method}': {msg}{source_line(self.node)}")

    def new(self, dtype: int, shape) -> Value:
        shape = tuple(int(d) for d in shape)
        v = Value(dtype, shape, Storage(SCRATCH, 0))
        v.storage.nbytes = v.nbytes
        return v

    def const(self, t: torch.Tensor) -> Value:
        t = t.detach()
        if t.dtype not in DTYPE_CODE:
            if t.is_floating_point():
                t = t.float()
            else:
                self.fail(f"a constant has dtype {t.dtype}; tandem supports float32, int64 and bool")
        t = t.contiguous()
        v = Value(DTYPE_CODE[t.dtype], tuple(t.shape), Storage(CONST, t.numel() * t.element_size(), tensor=t))
        self.const_tensor[v] = t
        return v

    def scalar(self, x, dtype: int) -> Value:
        return self.const(torch.tensor(x, dtype=TORCH_DTYPE[dtype]))

    def emit(self, name: str, ins, out_dtype: int, out_shape, iattr=(), fattr=()) -> Value:
        out = self.new(out_dtype, out_shape)
        self.ops.append(Op(name, list(ins), [out], [int(a) for a in iattr], [float(a) for a in fattr],
                           source_line(self.node)))
        return out

    def cast(self, v: Value, dtype: int) -> Value:
        if v.dtype == dtype:
            return v
        if v in self.const_tensor:
            return self.const(self.const_tensor[v].to(TORCH_DTYPE[dtype]))
        return self.emit("cast", [v], dtype, v.shape)

    def reshape(self, v: Value, shape) -> Value:
        shape = tuple(int(d) for d in shape)
        if shape == v.shape:
            return v
        if v in self.const_tensor:
            return self.const(self.const_tensor[v].reshape(shape))
        return v.view(shape)

    def expand(self, v: Value, shape) -> Value:
        shape = tuple(int(d) for d in shape)
        if v.shape == shape:
            return v
        return self.emit("expand", [v], v.dtype, shape)

    def operand(self, a, dtype: int) -> Value:
        """A node's argument as a Value of `dtype` (Python scalars become constants)."""
        if isinstance(a, Value):
            return self.cast(a, dtype)
        if isinstance(a, (bool, int, float)):
            return self.scalar(a, dtype)
        self.fail(f"unsupported operand {a!r}")


def _dtype_of(node) -> int:
    m = _meta(node)
    if m is None or m.dtype not in DTYPE_CODE:
        raise ExportError(f"value '{node.name}' has dtype {getattr(m, 'dtype', None)}; tandem supports float32, int64 and bool"
                          f"{source_line(node)}")
    return DTYPE_CODE[m.dtype]


def _shape_of(node) -> tuple:
    m = _meta(node)
    try:
        return tuple(int(d) for d in m.shape)
    except (TypeError, ValueError):
        raise ExportError(f"value '{node.name}' has a dynamic shape {tuple(m.shape)}; tandem exports static shapes: "
                          f"give example inputs of the exact size{source_line(node)}") from None


def _dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


# ---- handlers: (lowering, node, args, kwargs) -> Value or list of Values -----------------------
HANDLERS: dict = {}


def handles(*targets):
    def deco(fn):
        for t in targets:
            HANDLERS[t] = fn
        return fn
    return deco


BINARY = {
    aten.add.Tensor: "add", aten.add.Scalar: "add", aten.sub.Tensor: "sub", aten.sub.Scalar: "sub",
    aten.mul.Tensor: "mul", aten.mul.Scalar: "mul", aten.div.Tensor: "div", aten.div.Scalar: "div",
    aten.maximum.default: "maximum", aten.minimum.default: "minimum",
    aten.pow.Tensor_Tensor: "pow", aten.pow.Tensor_Scalar: "pow",
    aten.remainder.Tensor: "remainder", aten.remainder.Scalar: "remainder",
    aten.eq.Tensor: "eq", aten.eq.Scalar: "eq", aten.ne.Tensor: "ne", aten.ne.Scalar: "ne",
    aten.lt.Tensor: "lt", aten.lt.Scalar: "lt", aten.le.Tensor: "le", aten.le.Scalar: "le",
    aten.gt.Tensor: "gt", aten.gt.Scalar: "gt", aten.ge.Tensor: "ge", aten.ge.Scalar: "ge",
    aten.logical_and.default: "logical_and", aten.logical_or.default: "logical_or",
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


@handles(aten.div.Tensor_mode)
def _div_mode(L, node, args, kwargs):
    mode = kwargs.get("rounding_mode", args[2] if len(args) > 2 else None)
    out_dtype = _dtype_of(node)
    cd = F32
    q = L.emit("div", [L.operand(args[0], cd), L.operand(args[1], cd)], cd, _shape_of(node))
    if mode == "floor":
        q = L.emit("floor", [q], cd, q.shape)
    elif mode == "trunc":
        f = L.emit("floor", [q], cd, q.shape)
        c = L.emit("ceil", [q], cd, q.shape)
        q = L.emit("where", [L.emit("lt", [q, L.scalar(0.0, cd)], BOOL, q.shape), c, f], cd, q.shape)
    return L.cast(q, out_dtype)


@handles(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(L, node, args, kwargs):
    cd = _dtype_of(node)
    alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
    va, vb = L.operand(args[0], cd), L.operand(args[1], cd)
    if alpha != 1:
        va = L.emit("mul", [va, L.scalar(alpha, cd)], cd, va.shape)
    return L.emit("sub", [vb, va], cd, _shape_of(node))


UNARY = {
    aten.neg.default: "neg", aten.abs.default: "abs", aten.exp.default: "exp", aten.log.default: "log",
    aten.sqrt.default: "sqrt", aten.rsqrt.default: "rsqrt", aten.sin.default: "sin", aten.cos.default: "cos",
    aten.tanh.default: "tanh", aten.sigmoid.default: "sigmoid", aten.relu.default: "relu",
    aten.silu.default: "silu", aten.erf.default: "erf", aten.reciprocal.default: "reciprocal",
    aten.floor.default: "floor", aten.ceil.default: "ceil", aten.logical_not.default: "logical_not",
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
    return L.emit("where", [args[0], L.operand(args[1], dt), L.operand(args[2], dt)], dt, _shape_of(node))


@handles(aten._to_copy.default, aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default,
         aten.detach.default)
def _to_copy(L, node, args, kwargs):
    return L.cast(args[0], _dtype_of(node))


@handles(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.squeeze.dim,
         aten.squeeze.dims, aten.squeeze.default, aten.unsqueeze.default, aten.flatten.using_ints)
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
    n = 1
    for d in shape:
        n *= d
    if n <= FOLD_MAX_NUMEL:
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


def _slice_value(L, x: Value, dim: int, start: int, length: int, step: int) -> Value:
    shape = list(x.shape)
    shape[dim] = length
    outer = 1
    for d in x.shape[:dim]:
        outer *= d
    inner = DTYPE_SIZE[x.dtype]
    for d in x.shape[dim + 1:]:
        inner *= d
    if (step == 1 or length <= 1) and (outer == 1 or length == x.shape[dim]):
        if length == x.shape[dim] and start == 0:
            return x
        return x.view(shape, start * inner)
    return L.emit("slice", [x], x.dtype, shape, iattr=[dim, start, step])


@handles(aten.slice.Tensor)
def _slice(L, node, args, kwargs):
    x = args[0]
    dim = _dim(int(args[1]) if len(args) > 1 else 0, len(x.shape))
    size = x.shape[dim]
    start = args[2] if len(args) > 2 and args[2] is not None else 0
    step = int(args[4]) if len(args) > 4 else 1
    start = max(0, min(size, start + size if start < 0 else start))
    length = _shape_of(node)[dim]
    return _slice_value(L, x, dim, start, length, step)


@handles(aten.select.int)
def _select(L, node, args, kwargs):
    x = args[0]
    dim = _dim(int(args[1]), len(x.shape))
    i = int(args[2])
    i = i + x.shape[dim] if i < 0 else i
    return L.reshape(_slice_value(L, x, dim, i, 1, 1), _shape_of(node))


@handles(aten.split_with_sizes.default, aten.split.Tensor)
def _split(L, node, args, kwargs):
    x = args[0]
    dim = _dim(int(args[2]) if len(args) > 2 else 0, len(x.shape))
    if node.target == aten.split.Tensor:
        size = int(args[1])
        sizes = [min(size, x.shape[dim] - s) for s in range(0, x.shape[dim], size)]
    else:
        sizes = [int(s) for s in args[1]]
    outs, start = [], 0
    for s in sizes:
        outs.append(_slice_value(L, x, dim, start, s, 1))
        start += s
    return outs


@handles(aten.cat.default)
def _cat(L, node, args, kwargs):
    dt = _dtype_of(node)
    xs = [L.cast(x, dt) for x in args[0] if x.numel > 0 or len(x.shape) > 1]
    dim = _dim(int(args[1]) if len(args) > 1 else 0, len(_shape_of(node)))
    if len(xs) == 1:
        return xs[0]
    return L.emit("cat", xs, dt, _shape_of(node), iattr=[dim])


def _matmul(L, a: Value, b: Value, out_shape) -> Value:
    return L.emit("matmul", [a, b], F32, out_shape)


@handles(aten.mm.default, aten.bmm.default)
def _mm(L, node, args, kwargs):
    if _dtype_of(node) != F32:
        L.fail("matmul is supported for float32 only")
    return _matmul(L, args[0], args[1], _shape_of(node))


@handles(aten.addmm.default)
def _addmm(L, node, args, kwargs):
    bias, a, b = args[0], args[1], args[2]
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    shape = _shape_of(node)
    y = _matmul(L, a, b, shape)
    if alpha != 1:
        y = L.emit("mul", [y, L.scalar(alpha, F32)], F32, shape)
    if beta != 0:
        if beta != 1:
            bias = L.emit("mul", [bias, L.scalar(beta, F32)], F32, bias.shape)
        y = L.emit("add", [y, bias], F32, shape)
    return y


REDUCE = {aten.sum.dim_IntList: "sum", aten.mean.dim: "mean", aten.amax.default: "amax", aten.amin.default: "amin"}


def _reduce(L, node, args, kwargs):
    name = REDUCE[node.target]
    x = args[0]
    dt = _dtype_of(node)
    dims = args[1] if len(args) > 1 and args[1] is not None else list(range(len(x.shape)))
    dims = sorted({_dim(int(d), len(x.shape)) for d in dims}) or list(range(len(x.shape)))
    if not x.shape:
        return L.cast(x, dt)
    return L.emit(name, [L.cast(x, dt)], dt, _shape_of(node), iattr=dims)


for _t in REDUCE:
    HANDLERS[_t] = _reduce


@handles(aten.sum.default)
def _sum_all(L, node, args, kwargs):
    x = args[0]
    dt = _dtype_of(node)
    if not x.shape:
        return L.cast(x, dt)
    return L.emit("sum", [L.cast(x, dt)], dt, (), iattr=list(range(len(x.shape))))


@handles(aten._softmax.default, aten._log_softmax.default)
def _softmax(L, node, args, kwargs):
    x = args[0]
    name = "softmax" if node.target == aten._softmax.default else "log_softmax"
    return L.emit(name, [x], F32, x.shape, iattr=[_dim(int(args[1]), len(x.shape))])


@handles(aten.native_layer_norm.default)
def _layer_norm(L, node, args, kwargs):
    x, normalized, w, b, eps = args[0], args[1], args[2], args[3], args[4]
    ins = [x] + [t for t in (w, b) if t is not None]
    y = L.emit("layer_norm", ins, F32, x.shape, iattr=[len(normalized), int(w is not None), int(b is not None)],
               fattr=[eps])
    return [y, None, None]  # mean and rstd are not produced; using them fails in getitem


@handles(aten.embedding.default)
def _embedding(L, node, args, kwargs):
    w, idx = args[0], args[1]
    return L.emit("index_select", [w, L.cast(idx, I64)], w.dtype, _shape_of(node), iattr=[0])


@handles(aten.index_select.default)
def _index_select(L, node, args, kwargs):
    x, dim, idx = args[0], _dim(int(args[1]), len(args[0].shape)), args[2]
    return L.emit("index_select", [x, L.cast(idx, I64)], x.dtype, _shape_of(node), iattr=[dim])


@handles(aten.index.Tensor)
def _index(L, node, args, kwargs):
    x, indices = args[0], args[1]
    used = [(d, i) for d, i in enumerate(indices) if i is not None]
    if len(used) != 1 or used[0][1].dtype != I64:
        L.fail("indexing with more than one index tensor (or a boolean mask) is not supported yet")
    d, idx = used[0]
    return L.emit("index_select", [x, idx], x.dtype, _shape_of(node), iattr=[d])


@handles(aten.scalar_tensor.default)
def _scalar_tensor(L, node, args, kwargs):
    return L.scalar(args[0], _dtype_of(node))


# Evaluated at export when every tensor input is a constant (or there is none).
FOLDABLE_EXTRA = {aten.arange.start_step, aten.arange.default, aten.arange.start}


def _fold(L: Lowering, node, args, kwargs):
    """Run the node with torch on constant inputs; returns a Value or None."""
    def conv(a):
        if isinstance(a, Value):
            return L.const_tensor[a]
        if isinstance(a, (list, tuple)):
            return type(a)(conv(x) for x in a)
        return a
    res = node.target(*conv(args), **{k: conv(v) for k, v in kwargs.items()})
    if isinstance(res, torch.Tensor):
        if res.numel() > FOLD_MAX_NUMEL and not any(isinstance(a, Value) for a in args):
            return None
        return L.const(res)
    return None


def lower_method(name: str, ep, tensors: dict, states: dict, key_of) -> MethodIR:
    """Lower one exported (and decomposed) program to a MethodIR with unplanned scratch."""
    L = Lowering(name, states, key_of)
    gm = ep.graph_module
    sig = ep.graph_signature
    kinds = {s.arg.name: s for s in sig.input_specs}
    env: dict = {}
    inputs = []
    state_values: dict = {}  # StateSpec -> Value of its old contents
    for node in gm.graph.nodes:
        L.node = node
        if node.op == "placeholder":
            spec = kinds.get(node.name)
            if spec is None or spec.kind == InputKind.USER_INPUT:
                v = L.new(_dtype_of(node), _shape_of(node))
                v.storage.is_input = True
                env[node] = v
                inputs.append((node.name, v))
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                t = tensors[node.name]
                st = states.get(key_of(t))
                if st is not None:
                    v = Value(st.dtype, st.shape, Storage(STATE, st.nbytes, state=st))
                    state_values[st] = v
                    env[node] = v
                else:
                    env[node] = L.const(t)
            else:
                L.fail(f"input kind {spec.kind.name} is not supported")
        elif node.op == "call_function":
            args = torch.fx.node.map_arg(node.args, lambda n: env[n])
            kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
            if node.target is operator.getitem:
                r = args[0][args[1]]
                if r is None:
                    L.fail("uses an auxiliary output (e.g. layer norm's mean/rstd) that tandem does not produce")
                env[node] = r
                continue
            all_const = all(v in L.const_tensor for v in _values_in((args, kwargs)))
            handler = HANDLERS.get(node.target)
            if all_const and (handler is not None or node.target in FOLDABLE_EXTRA) and _meta(node) is not None:
                folded = _fold(L, node, args, kwargs)
                if folded is not None:
                    env[node] = folded
                    continue
            if handler is None:
                L.unsupported.append(f"  {node.target}{source_line(node)}")
                env[node] = L.new(F32, ()) if _meta(node) is None else L.new(DTYPE_CODE.get(_meta(node).dtype, F32), _meta(node).shape)
                continue
            env[node] = handler(L, node, args, kwargs)
        elif node.op == "output":
            outs = node.args[0]
        else:
            L.fail(f"graph node kind '{node.op}' is not supported")
    if L.unsupported:
        raise ExportError(f"method '{name}' uses operators tandem does not support yet:\n" + "\n".join(L.unsupported)
                          + "\nSee docs/ops.md for the supported set.")

    L.node = None
    user_outputs, mutations = [], []
    for spec, o in zip(sig.output_specs, outs):
        if spec.kind == OutputKind.USER_OUTPUT:
            if o is None:
                continue
            if not isinstance(o, torch.fx.Node):
                raise ExportError(f"method '{name}' returns {o!r}; methods return tensors, a tuple of tensors or None")
            user_outputs.append((spec.arg.name, env[o]))
        elif spec.kind == OutputKind.BUFFER_MUTATION:
            t = tensors[next(s.arg.name for s in sig.input_specs if s.target == spec.target)]
            mutations.append((states[key_of(t)], env[o]))
    _finish(L, user_outputs, mutations)
    outputs = [("output" if len(user_outputs) == 1 else f"output{i}", v) for i, (_, v) in enumerate(user_outputs)]
    return MethodIR(name, inputs, outputs, L.ops)


def _values_in(obj):
    if isinstance(obj, Value):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _values_in(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _values_in(x)


def _finish(L: Lowering, user_outputs: list, mutations: list):
    """Write each mutated buffer's new value into its state slot, at the end of the method.

    Values that still point at an old state slot (an output, or the source of another state's
    write) are copied to scratch first, so every write reads the values of before the writes.
    """
    written = {st for st, _ in mutations}

    def materialize(v: Value) -> Value:
        if v.storage.kind == STATE and v.storage.state in written:
            copy = L.new(v.dtype, v.shape)
            L.ops.append(Op("copy", [v], [copy]))
            return copy
        return v

    for i, (n, v) in enumerate(user_outputs):
        user_outputs[i] = (n, materialize(v))
    sources = [(st, materialize(v)) for st, v in mutations]
    for st, v in sources:
        if v.storage.kind == STATE and v.storage.state is st and v.offset == 0 and v.nbytes == st.nbytes:
            continue  # written back unchanged
        if (v.dtype, v.shape) != (st.dtype, st.shape):
            v = L.expand(L.cast(v, st.dtype), st.shape)
        dst = Value(st.dtype, st.shape, Storage(STATE, st.nbytes, state=st))
        L.ops.append(Op("copy", [v], [dst], where="(write-back of state '%s')" % st.name))
