"""Core ATen graph of one method -> tandem ops (docs/ops.md lists the mapping).

Pure views (view, reshape, squeeze, contiguous slices, ...) become values that share their
base's storage; everything else becomes a runtime op writing a fresh scratch value. Nodes whose
inputs are all constants are evaluated here, with torch, and stored as constants.
"""
from __future__ import annotations

import math
import operator
import os
from pathlib import Path
from typing import Callable

import torch
from torch.export.graph_signature import InputKind, OutputKind

from . import schema
from .ir import (AS_FLOAT32, AS_INT32, BOOL, CONST, DTYPE_CODE, DTYPE_SIZE, F32, I32, I64, SCRATCH, STATE, SUPPORTED_DTYPES,
                 TORCH_DTYPE, ExportError, MethodIR, Op, Storage, SymDim, Value, as_size)

aten = torch.ops.aten

FOLD_MAX_NUMEL = 4096  # constant results larger than this are computed at run time instead
FILL_MAX_NUMEL = 64  # a full()/zeros() larger than this is a fill op, not stored bytes


_TANDEM_DIR = str(Path(__file__).resolve().parent) + os.sep
_STDLIB = os.path.dirname(os.__file__) + os.sep


def is_user_file(path: str) -> bool:
    """Whether a traceback frame's file is the user's: not torch's, not tandem's own, not Python's."""
    path = str(path)
    stdlib = path.startswith(_STDLIB) and "-packages/" not in path  # installed packages (transformers) are user code
    return "/torch/" not in path and not path.startswith(_TANDEM_DIR) and not stdlib and "<frozen" not in path


def source_line(node) -> str:
    """' (at file.py:12: code)' for the innermost user frame of a node, or ''."""
    trace = node.meta.get("stack_trace") if node is not None else None
    if not trace:
        return ""
    lines = trace.strip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        ln = lines[i].strip()
        if ln.startswith("File ") and is_user_file(ln[len("File "):].split(",")[0].strip().strip('"')):
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            parts = ln.split(",")
            file = parts[0][len("File "):].strip().strip('"').split("/")[-1]
            lineno = parts[1].strip().replace("line ", "") if len(parts) > 1 else "?"
            return f" (at {file}:{lineno}: {code})"
    return ""


# The method being lowered's dynamic dims: sympy symbol -> its maximum / its minimum (set by lower_method).
_DIM_MAX: dict = {}
_DIM_MIN: dict = {}
_DIM_NAMES: dict = {}  # symbol -> the user's dim name, for messages


def _corners():
    """Every corner of the box of the method's dims ({symbol: value}), at most 256."""
    syms = list(_DIM_MAX)
    for c in range(1 << len(syms)):
        yield {s: (_DIM_MAX[s] if (c >> i) & 1 else _DIM_MIN[s]) for i, s in enumerate(syms)}


def _is_affine(expr) -> bool:
    """Whether a sympy expression is constant + sum(integer coefficient x dim): what the file stores."""
    import sympy
    for term, coef in sympy.expand(expr).as_coefficients_dict().items():
        if not coef.is_Integer or (term != 1 and term not in _DIM_MAX):
            return False
    return True


def sym_range(x) -> tuple:
    """(lowest, highest) value of an int or an affine SymDim over the dims' bounds (its corners)."""
    if not isinstance(x, SymDim):
        return int(x), int(x)
    vals = [int(x.expr.subs(c)) for c in _corners()]
    return min(vals), max(vals)


def _size(d, node=None):
    """A size from torch's metadata: an int, or a SymDim for a torch SymInt over the method's dims."""
    if isinstance(d, torch.SymInt):
        expr = d.node.expr
        unknown = [str(s) for s in expr.free_symbols if s not in _DIM_MAX]
        if unknown:
            raise ExportError(f"a size {expr} depends on values tandem cannot bound ({', '.join(unknown)}): the result of "
                              f"nonzero() or .item(), or a dynamic dim that no input has by itself as a size (only derived, "
                              f"e.g. 2*n); sizes may depend only on dims that are some input's size{source_line(node)}")
        return SymDim(int(expr.subs(_DIM_MAX)), expr)
    return as_size(d)


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
        self.checked: set = set()  # (storage, offset, shape, n) of indices already checked
        self.sizes: dict = {}  # sympy expression (srepr) -> its Value (Lowering.size_value)
        self.empty: set = set()  # storages of torch.empty() results: written by no op (yet)
        self.env: dict = {}  # FX node -> Value while lowering (set by lower_method)
        self.at_end: list = []  # () -> (StateSpec, Value): state writes a handler adds (lower_random's counter)

    # ---- values ---------------------------------------------------------------------------
    def fail(self, msg: str):
        raise ExportError(f"method '{self.method}': {msg}{source_line(self.node)}")

    def new(self, dtype: int, shape) -> Value:
        shape = tuple(as_size(d) for d in shape)
        v = Value(dtype, shape, Storage(SCRATCH, 0))
        # planned for the largest size over the dims' range, which is not at their maximum for a
        # size that decreases with a dim (cache[:, n:] * 2)
        v.storage.nbytes = DTYPE_SIZE[dtype] * math.prod(sym_range(d)[1] for d in shape)
        return v

    def const(self, t: torch.Tensor, name: str = "a constant") -> Value:
        t = t.detach()
        if t.dtype not in DTYPE_CODE:
            if t.dtype in AS_FLOAT32:  # stored as float32 (ir.AS_FLOAT32; docs/ops.md, Dtypes)
                t = t.float()
            elif t.dtype in AS_INT32:
                t = t.int()
            else:
                self.fail(f"{name} has dtype {t.dtype}; tandem supports {SUPPORTED_DTYPES} (other float and integer "
                          "constants are stored as float32 or int32): convert it, e.g. with .float() or .int()")
        t = t.contiguous()
        v = Value(DTYPE_CODE[t.dtype], tuple(t.shape), Storage(CONST, t.numel() * t.element_size(), tensor=t))
        self.const_tensor[v] = t
        return v

    def scalar(self, x, dtype: int) -> Value:
        """A 0-d Value of x: a constant, or for a symbolic size (a SymDim) its value in each call."""
        if isinstance(x, SymDim):
            return self.cast(self.size_value(x.expr), dtype)
        if isinstance(x, torch.SymInt):
            return self.scalar(_size(x, self.node), dtype)
        if isinstance(x, (torch.SymFloat, torch.SymBool)):
            self.fail(f"the {type(x).__name__[3:].lower()} {x} is computed from sizes in Python; tandem computes sizes used as "
                      "values per call only as integers: keep it an integer (n, n - 1, n // 2), or make a tensor first "
                      "(torch.tensor(x.shape[1]) * 0.5)")
        return self.const(torch.tensor(x, dtype=TORCH_DTYPE[dtype]))

    def size_value(self, expr) -> Value:
        """An int64 0-d Value equal, in each call, to the sympy expression `expr` of the method's dims:
        a fill op whose attribute is the symbolic size when expr is affine (the runtime evaluates it
        per call), else built from such fills with integer ops (floor division, remainder, products,
        min/max). Anything else is an ExportError naming the use."""
        import sympy
        from torch.utils._sympy import functions as tf
        expr = sympy.sympify(expr)
        key = sympy.srepr(expr)
        if key in self.sizes:
            return self.sizes[key]
        bad = [str(s) for s in expr.free_symbols if s not in _DIM_MAX]
        if bad:
            self.fail(f"the size {expr} depends on values tandem cannot bound ({', '.join(bad)}: the result of nonzero() or "
                      ".item()); sizes used as values may depend only on dynamic dims of the inputs")
        if expr.is_Integer:
            v = self.const(torch.tensor(int(expr), dtype=torch.long))
        elif _is_affine(expr):
            v = self.emit("fill", [], I64, (), iattr=[SymDim(int(expr.subs(_DIM_MAX)), expr)])
        else:
            def two(name):
                a, b = (self.size_value(e) for e in expr.args)
                return self.emit(name, [a, b], I64, ())

            def fold(name, args):
                vals = [self.size_value(e) for e in args]
                out = vals[0]
                for w in vals[1:]:
                    out = self.emit(name, [out, w], I64, ())
                return out
            if expr.is_Add:
                v = fold("add", expr.args)
            elif expr.is_Mul and all(a.is_Integer or not a.is_Rational for a in expr.args):
                v = fold("mul", expr.args)
            elif expr.is_Pow and expr.exp.is_Integer and int(expr.exp) > 0:
                v = fold("mul", [expr.base] * int(expr.exp))
            elif isinstance(expr, tf.FloorDiv):
                v = two("floor_divide")
            elif isinstance(expr, (tf.PythonMod, tf.Mod, sympy.Mod)):
                v = two("remainder")  # Python's sign rule, as torch.remainder on integers
            elif isinstance(expr, sympy.floor):
                num, den = sympy.fraction(sympy.together(expr.args[0]))
                v = self.emit("floor_divide", [self.size_value(num), self.size_value(den)], I64, ())
            elif isinstance(expr, (sympy.Max, tf.Max)):
                v = fold("maximum", expr.args)
            elif isinstance(expr, (sympy.Min, tf.Min)):
                v = fold("minimum", expr.args)
            else:
                self.fail(f"the size {expr} is used as a value; tandem computes sizes per call from +, -, *, //, %, min "
                          "and max of the dynamic dims, not this form: compute it from tensors instead")
        self.sizes[key] = v
        return v

    def emit(self, name: str, ins, out_dtype: int, out_shape, iattr=(), fattr=()) -> Value:
        out = self.new(out_dtype, out_shape)
        if any(isinstance(a, (SymDim, torch.SymInt, torch.SymFloat)) for a in fattr):  # a float attribute is static
            self.fail(f"op '{name}' takes a size ({fattr}) as a float attribute, which would freeze it at its maximum; "
                      "this is a bug in tandem's exporter, please report it")
        self.ops.append(Op(name, list(ins), [out], [as_size(a) for a in iattr], [float(a) for a in fattr],
                           source_line(self.node)))
        return out

    def cast(self, v: Value, dtype: int) -> Value:
        if v.dtype == dtype:
            return v
        if v in self.const_tensor:
            return self.const(self.const_tensor[v].to(TORCH_DTYPE[dtype]))
        return self.emit("cast", [v], dtype, v.shape)

    def reshape(self, v: Value, shape) -> Value:
        shape = tuple(as_size(d) for d in shape)
        if shape == v.shape:
            return v
        if v in self.const_tensor:
            return self.const(self.const_tensor[v].reshape(shape))
        return v.view(shape)

    def expand(self, v: Value, shape) -> Value:
        shape = tuple(as_size(d) for d in shape)
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
    if m is not None and m.dtype == torch.float64:
        return F32  # float64 computed in a method is computed in float32 (ir.AS_FLOAT32)
    if m is None or m.dtype not in DTYPE_CODE:
        what = f"'{node.target}'" if node.op == "call_function" else f"value '{node.name}'"
        raise ExportError(f"{what} gives a tensor of dtype {getattr(m, 'dtype', None)}; tandem computes in "
                          f"{SUPPORTED_DTYPES} (float64 as float32): convert with .float(), .long() or .int()"
                          f"{source_line(node)}")
    return DTYPE_CODE[m.dtype]


def _shape_of(node) -> tuple:
    m = _meta(node)
    return tuple(_size(d, node) for d in m.shape)


def _require_static(node) -> None:
    if node.target is aten._local_scalar_dense.default:
        raise ExportError(f"'.item()' (or int()/float() of a tensor) reads a value into Python, so what follows depends "
                          f"on input values; tandem exports a fixed graph: keep it a tensor (index with "
                          f"torch.index_select / torch.gather, select with torch.where, slice a fixed length from a start tensor "
                          f"with torch.narrow(x, dim, start, length)){source_line(node)}")
    vals = node.meta.get("val")
    for v in vals if isinstance(vals, (list, tuple)) else [vals]:
        if isinstance(v, torch.Tensor) and not all(isinstance(d, int) or all(x in _DIM_MAX for x in d.node.expr.free_symbols)
                                                   for d in v.shape):
            if node.target is aten.index.Tensor:
                hint = ("x[mask] has a size that depends on values (tandem exports static shapes, or dims bounded in "
                        "dynamic_shapes): use torch.where(mask, x, 0) (or x * mask) to keep "
                        "x's shape, or torch.topk / torch.sort for a fixed number of elements")
            elif node.target is aten.nonzero.default:
                hint = ("nonzero() has a size that depends on values: use a mask with torch.where instead, or "
                        "torch.topk for a fixed number of indices")
            else:
                hint = (f"'{node.target}' gives a tensor of shape {tuple(v.shape)}, whose size depends on input values; "
                        f"tandem exports static shapes: compute a fixed-size result instead (e.g. torch.where with a mask)")
            raise ExportError(hint + source_line(node))


def _dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def _position(L, i, size, what: str, clamp: bool):
    """A start or index as PyTorch reads it: negative counts from the end (then clamped to [0, size]
    for a slice's start). A symbolic one (a SymDim) must fall on one side of 0 at every size of the
    dims (so the same rule holds in every call), and inside [0, size]; else an ExportError naming it."""
    if not isinstance(i, SymDim) and not isinstance(size, SymDim):
        i = int(i)
        i = i + size if i < 0 else i
        return max(0, min(size, i)) if clamp else i
    lo, hi = sym_range(i)
    if hi < 0:
        i = i + size  # negative at every size: counts from the end
    elif lo < 0:
        L.fail(f"{what} {size_expr_text(i)} is negative at some sizes of the dims and not at others, so it would count "
               "from the end in some calls only; compute one that keeps its sign")
    if sym_range(i)[0] < 0 or sym_range(i - size)[1] > (0 if clamp else -1):
        L.fail(f"{what} {size_expr_text(i)} is outside the dim (of size {size_expr_text(size)}) at some sizes of the dims; "
               "tandem computes positions per call only inside the tensor: bound it (e.g. a larger buffer)")
    return i


def size_expr_text(x) -> str:
    """A size for a message: its expression of the dims' names (n + 1), or the number."""
    if not isinstance(x, SymDim):
        return str(int(x))
    return str(x.expr.subs({s: __import__("sympy").Symbol(n) for s, n in _DIM_NAMES.items()}))


def _has_size(obj) -> bool:
    if isinstance(obj, (SymDim, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_has_size(x) for x in obj)
    if isinstance(obj, dict):
        return any(_has_size(x) for x in obj.values())
    return False


def _static(L, x, what: str) -> int:
    """x, which must not depend on the dims (a stride, a kernel size, a step, k of topk)."""
    if isinstance(x, (SymDim, torch.SymInt)):
        L.fail(f"{what} is the size {size_expr_text(_size(x) if isinstance(x, torch.SymInt) else x)}, which depends on a "
               "dynamic dim; tandem needs it static: give it a fixed value")
    return int(x)


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
    aten.neg.default: "neg", aten.abs.default: "abs", aten.exp.default: "exp", aten.log.default: "log",
    aten.sqrt.default: "sqrt", aten.rsqrt.default: "rsqrt", aten.sin.default: "sin", aten.cos.default: "cos",
    aten.tanh.default: "tanh", aten.sigmoid.default: "sigmoid", aten.relu.default: "relu",
    aten.silu.default: "silu", aten.erf.default: "erf", aten.reciprocal.default: "reciprocal",
    aten.floor.default: "floor", aten.ceil.default: "ceil", aten.logical_not.default: "logical_not",
    aten.log1p.default: "log1p", aten.hardswish.default: "hardswish", aten.hardsigmoid.default: "hardsigmoid",
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


@handles(aten.bitwise_and.Tensor, aten.bitwise_or.Tensor)
def _bitwise_bool(L, node, args, kwargs):
    if not all(isinstance(a, Value) and a.dtype == BOOL for a in args[:2]):
        L.fail("bitwise and/or are supported on bool tensors only")
    name = "logical_and" if node.target == aten.bitwise_and.Tensor else "logical_or"
    return L.emit(name, [args[0], args[1]], BOOL, _shape_of(node))


@handles(aten._assert_tensor_metadata.default, aten._assert_scalar.default)
def _assertion(L, node, args, kwargs):
    return None  # export-time shape/dtype assertions: the verifier checks these at load


@handles(aten._assert_async.msg, aten._assert_async.default)
def _assert_async(L, node, args, kwargs):
    """A runtime assertion: a `guard` op, failing the call (TDM_ERR_GUARD, before any state write)
    unless cond is true. tandem writes one for each Python branch on a tensor value it specialized
    (python/tandem/runtime_values.py), with the branch's line in the message."""
    cond = args[0]
    msg = args[1] if len(args) > 1 else ""
    line = int(msg.split()[-1]) if isinstance(msg, str) and msg.startswith("tandem-guard ") else 0
    if not isinstance(cond, Value):
        cond = L.scalar(bool(cond), BOOL)
    if cond.numel != 1:
        L.fail(f"an assertion on {cond.numel} values; it takes one")
    if cond in L.const_tensor:
        if bool(L.const_tensor[cond].reshape(())):
            return None  # holds in every call
        L.fail("a branch on a tensor value goes, in every call, the other way than when it was exported")
    cond = L.cast(L.reshape(cond, ()), BOOL)
    L.ops.append(Op("guard", [cond], [], [line], [], source_line(node)))
    return None


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


def _slice_value(L, x: Value, dim: int, start: int, length: int, step: int) -> Value:
    shape = list(x.shape)
    shape[dim] = length
    outer = 1
    for d in x.shape[:dim]:
        outer *= d
    inner = DTYPE_SIZE[x.dtype]
    for d in x.shape[dim + 1:]:
        inner *= d
    whole = _same_size(length, x.shape[dim])
    if (step == 1 or length <= 1) and (outer == 1 or whole):
        if whole and start == 0:
            return x
        return x.view(shape, start * inner)
    return L.emit("slice", [x], x.dtype, shape, iattr=[dim, start, step])


def _is_slice_of(base: Value, v: Value, dim: int, start: int, step: int) -> bool:
    """Whether v is the view base[..., start::step (len v.shape[dim]), ...] of base's bytes."""
    if v.storage is not base.storage or v.dtype != base.dtype or len(v.shape) != len(base.shape):
        return False
    length = v.shape[dim]
    if any(a != b for i, (a, b) in enumerate(zip(v.shape, base.shape)) if i != dim):
        return False
    outer = math.prod(base.shape[:dim])
    inner = DTYPE_SIZE[base.dtype] * math.prod(base.shape[dim + 1:])
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
            L.fail(f"split of a dim of size {size_expr_text(x.shape[dim])} gives a number of pieces that depends on it; split "
                   "with explicit sizes (torch.split(x, [a, b], dim)) instead")
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
    xs = [L.cast(x, dt) for x in args[0] if x.numel > 0 or len(x.shape) > 1]
    dim = _dim(int(args[1]) if len(args) > 1 else 0, len(_shape_of(node)))
    if not xs:  # every input is empty: so is the result
        return _fill(L, 0, dt, _shape_of(node))
    if len(xs) == 1:
        return xs[0]
    return L.emit("cat", xs, dt, _shape_of(node), iattr=[dim])


PANEL = schema.PANEL  # columns per packed panel (schema.py; TDM_PANEL in the runtime)


def pack_panels(w: torch.Tensor) -> torch.Tensor:
    """Weights w [K, N] as [ceil(N/PANEL), K, PANEL]: PANEL-column panels, zero past N (matmul_packed's b)."""
    K, N = w.shape
    panels = (N + PANEL - 1) // PANEL
    padded = torch.zeros(K, panels * PANEL)
    padded[:, :N] = w
    return padded.reshape(K, panels, PANEL).permute(1, 0, 2).contiguous()


def _producer(L, v: Value):
    """The op in L.ops whose whole first result v is (or a view of all of it), or None."""
    for op in reversed(L.ops):
        o = op.outs[0]
        if o.storage is v.storage:
            return op if v.offset == 0 and v.nbytes == o.storage.nbytes and o.nbytes == o.storage.nbytes else None
    return None


def _is_ones(L, v: Value) -> bool:
    if v in L.const_tensor:
        return bool((L.const_tensor[v] == 1).all())
    op = _producer(L, v)
    return op is not None and op.name == "fill" and list(op.fattr) == [1.0]


_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default, aten.unsqueeze.default)


def _through_views(n):
    while isinstance(n, torch.fx.Node) and n.target in _VIEWS:
        n = n.args[0]
    return n


def _is_call(n, target) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target is target


def _sum_of_squares_of(n, x) -> bool:
    """n is sum(pow(x, 2), [-1], keepdim=True), as torch's cdist decomposition writes it."""
    if not _is_call(n, aten.sum.dim_IntList) or list(n.args[1]) not in ([-1], [len(_shape_of(n)) - 1]) or not (
            len(n.args) > 2 and n.args[2] or n.kwargs.get("keepdim")):
        return False
    p = n.args[0]
    return _is_call(p, aten.pow.Tensor_Scalar) and p.args[0] is x and p.args[1] == 2


def _cdist_matmul(L, node, out_shape):
    """torch.cdist (p = 2) against a constant set of points C [N, D], as torch decomposes it when it
    takes the matmul path (more than 25 points on either side; torch's _euclidean_dist):
    cat([x·-2, Σx², 1], -1) @ cat([C, 1, ΣC²], -1)ᵀ. The right operand is C with two columns
    appended, transposed: rebuilt on every call (a cat and a permute of the whole set, C being too
    large to fold) or, folded, stored beside C. Lowered as the same sum in the same terms:
    (x·-2) @ Cᵀ (matmul_packed against C packed once at export, the constant a lookup of C's rows
    reads too: fuse.tie_embeddings) + Σx² + (ΣC²)ᵀ (a constant [N]). The dead cat and permute are
    dropped by the planner. None when the mm is not that pattern."""
    a, b = _through_views(node.args[0]), _through_views(node.args[1])
    if not _is_call(b, aten.permute.default) or not _is_call(a, aten.cat.default):
        return None
    bc = _through_views(b.args[0])
    rank = len(_shape_of(bc)) if _is_call(bc, aten.cat.default) else 0
    if rank < 2 or [_dim(int(p), rank) for p in b.args[1]] != list(range(rank - 2)) + [rank - 1, rank - 2]:
        return None
    if len(bc.args[0]) != 3 or len(a.args[0]) != 3:
        return None
    if _dim(int(bc.args[1]) if len(bc.args) > 1 else 0, rank) != rank - 1 or \
            _dim(int(a.args[1]) if len(a.args) > 1 else 0, len(_shape_of(a))) != len(_shape_of(a)) - 1:
        return None
    pts, ones_b, sq = bc.args[0]
    xm, xsq, ones_a = a.args[0]
    if not _is_call(xm, aten.mul.Tensor) or xm.args[1] != -2 or not _sum_of_squares_of(xsq, xm.args[0]) or \
            not _sum_of_squares_of(sq, pts):
        return None
    env = L.env
    P = env.get(pts)
    if P is None or P not in L.const_tensor or P.dtype != F32 or not all(
            isinstance(env.get(n), Value) and _is_ones(L, env[n]) for n in (ones_a, ones_b)):
        return None
    C = L.const_tensor[P]
    C = C.reshape((-1,) + tuple(C.shape[-2:]))
    if not torch.equal(C, C[:1].expand(C.shape)):  # the same points for every batch (x1 batched, x2 broadcast)
        return None
    C = C[0]
    N, D = C.shape
    x2, xs = env[xm], env[xsq]
    if out_shape[-1] != N or math.prod(x2.shape[:-1]) != math.prod(out_shape[:-1]) or x2.shape[-1] != D:
        return None
    x2, xs = L.reshape(x2, out_shape[:-1] + (D,)), L.reshape(xs, out_shape[:-1] + (1,))
    y = _matmul(L, x2, L.const(C.t()), out_shape)
    y = L.emit("add", [y, xs], F32, out_shape)
    c2 = (C * C).sum(-1)  # what ΣC² folded to: pow then sum over D, in float32
    c2 = L.const_tensor[env[sq]].reshape(-1, N)[0] if env.get(sq) in L.const_tensor else c2
    return L.emit("add", [y, L.const(c2.reshape((1,) * (len(out_shape) - 1) + (N,)))], F32, out_shape)


def _matmul(L, a: Value, b: Value, out_shape) -> Value:
    if b in L.const_tensor and (len(b.shape) == 2 or math.prod(b.shape[:-2]) == 1):
        # Weights: packed at export into 8-column panels, so the kernel streams them in order.
        w = L.const_tensor[b].reshape(b.shape[-2:])
        K, N = w.shape
        a = L.reshape(a, out_shape[:-1] + (K,)) if len(a.shape) < len(out_shape) else a
        return L.emit("matmul_packed", [a, L.const(pack_panels(w))], F32, out_shape, iattr=[N])
    return L.emit("matmul", [a, b], F32, out_shape)


@handles(aten.mm.default, aten.bmm.default)
def _mm(L, node, args, kwargs):
    dt = _dtype_of(node)
    if dt in (I64, I32):
        return _int_matmul(L, args[0], args[1], _shape_of(node), dt)
    if dt != F32:
        L.fail("matmul is supported for float32, int64 and int32")
    fused = _cdist_matmul(L, node, _shape_of(node))
    if fused is not None:
        return fused
    return _matmul(L, args[0], args[1], _shape_of(node))


def _int_matmul(L, a: Value, b: Value, out_shape, dt: int) -> Value:
    """Integer a [..., M, K] @ b [..., K, N], exact and wrapping like PyTorch: the products
    a[..., M, K, 1] * b[..., 1, K, N] summed over K (an [..., M, K, N] temporary: integer matmuls are
    small index arithmetic, not weights)."""
    a, b = L.cast(a, I64), L.cast(b, I64)
    pa = L.reshape(a, a.shape + (1,))
    pb = L.reshape(b, b.shape[:-2] + (1,) + b.shape[-2:])
    prod = L.emit("mul", [pa, pb], I64, torch.broadcast_shapes(pa.shape, pb.shape))
    y = L.emit("sum", [prod], I64, out_shape, iattr=[len(prod.shape) - 2])
    return L.cast(y, dt)


@handles(aten.addmm.default)
def _addmm(L, node, args, kwargs):
    bias, a, b = args[0], args[1], args[2]
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    shape, dt = _shape_of(node), _dtype_of(node)
    y = _int_matmul(L, a, b, shape, dt) if dt in (I64, I32) else _matmul(L, a, b, shape)
    if alpha != 1:
        y = L.emit("mul", [y, L.scalar(alpha, dt)], dt, shape)
    if beta != 0:
        bias = L.cast(bias, dt)
        if beta != 1:
            bias = L.emit("mul", [bias, L.scalar(beta, dt)], dt, bias.shape)
        y = L.emit("add", [y, bias], dt, shape)
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
    y = L.emit("layer_norm", ins, F32, x.shape, iattr=[len(normalized), int(w is not None), int(b is not None)],
               fattr=[eps])
    return [y, None, None]  # mean and rstd are not produced; using them fails in getitem


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
            L.fail("indexing with a boolean mask gives a size that depends on values: use torch.where(mask, x, 0) "
                   "(or x * mask) to keep the shape; integer index tensors (int64 or int32) are supported")
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
    merged = x.shape[:d0] + (stride,) + x.shape[d0 + len(dims):]
    return L.reshape(x, merged), d0, flat, tuple(S)


@handles(aten.index.Tensor)
def _index(L, node, args, kwargs):
    x, d, idx, _ = _advanced_index(L, args[0], args[1])
    return _index_select_value(L, x, d, idx, _shape_of(node))


def _mask_put(L, node, base: Value, indices, values: Value, acc: bool):
    """base[mask] = values (or +=) for one boolean mask over consecutive dims, with values that
    broadcast over the selected elements: where(mask, values, base), a fixed shape."""
    lead = next(d for d, i in enumerate(indices) if i is not None)
    mask = indices[lead]
    rest = base.shape[lead + len(mask.shape):]
    vshape = tuple(values.shape)
    if len(vshape) > len(rest) + 1 or (len(vshape) == len(rest) + 1 and vshape[0] != 1):
        L.fail("x[mask] = values needs values that broadcast over x[mask]'s elements (a number, or one row); "
               "the number of selected elements depends on the mask's values")
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
        return _mask_put(L, node, base, list(indices), values, acc)
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
    want = x.shape[:d] + tuple(S) + x.shape[d + 1:]
    values = L.expand(L.cast(values, x.dtype), want)
    values = L.reshape(values, x.shape[:d] + (k,) + x.shape[d + 1:])
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
    if src.shape == base.shape and start == 0:
        return L.cast(src, base.dtype)  # replaces everything: no need to read base
    if _is_slice_of(base, src, dim, start, step):
        return base  # writes back what is already there (functionalization's view replay)
    return L.emit("slice_scatter", [base, L.cast(src, base.dtype)], base.dtype, base.shape, iattr=[dim, start, step])


def _unrepeat_kv(L, x: Value) -> Value:
    """x without its head repetition when x is `repeat_kv(kv, g)` (transformers' expand of
    [B, Hkv, 1, T, D] to [B, Hkv, g, T, D], reshaped to [B, Hkv*g, T, D]); else x. The attention
    kernel reads a grouped KV head for each query head, so the copy is never made (the expand is
    then unread and dropped by the planner)."""
    if len(x.shape) != 4 or x.offset != 0 or x.nbytes != x.storage.nbytes:
        return x
    op = next((o for o in reversed(L.ops) if any(v.storage is x.storage for v in o.outs)), None)
    if op is None or op.name != "expand":
        return x
    src, out = op.ins[0], op.outs[0]
    B, H, T, D = x.shape
    if len(src.shape) != 5 or src.shape[2] != 1 or out.shape[:2] != src.shape[:2] or out.shape[3:] != (T, D):
        return x
    if out.shape[0] != B or out.shape[1] * out.shape[2] != H:
        return x
    return L.reshape(src, (B, src.shape[1], T, D))


@handles(aten.scaled_dot_product_attention.default)
def _sdpa(L, node, args, kwargs):
    names = ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"]
    a = dict(zip(names, args))
    a.update(kwargs)
    q, k, v, mask = a["query"], a["key"], a["value"], a.get("attn_mask")
    if a.get("dropout_p", 0.0) not in (0, 0.0):
        L.fail("scaled_dot_product_attention with dropout is not supported (export in eval mode, dropout_p=0)")
    k, v = _unrepeat_kv(L, k), _unrepeat_kv(L, v)
    if len(q.shape) < len(k.shape) and len(k.shape) == len(v.shape):  # q's batch dims broadcast against k's
        q = L.expand(q, tuple(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])) + q.shape[-2:])
    if len(q.shape) < 3 or len(k.shape) != len(q.shape):
        if q.shape[:-2] != k.shape[:-2]:
            L.fail("scaled_dot_product_attention needs q, k, v of one rank with equal batch dims")
    elif q.shape[:-3] != k.shape[:-3] or k.shape[:-2] != v.shape[:-2] or (k.shape[-3] and q.shape[-3] % k.shape[-3]):
        L.fail(f"scaled_dot_product_attention: q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}: k and v need "
               "q's batch dims and a number of heads that divides q's (grouped-query attention)")
    scale = a.get("scale") or 1.0 / math.sqrt(q.shape[-1])
    ins = [q, k, v] + ([mask] if mask is not None else [])
    out_shape = q.shape[:-1] + (v.shape[-1],)
    y = L.new(F32, out_shape)
    group = q.shape[-3] // k.shape[-3] if len(q.shape) >= 3 and k.shape[-3] else 1
    ws = L.new(F32, (group * k.shape[-2],))  # the scores of the query heads that share a KV head
    L.ops.append(Op("attention", ins, [y, ws], [int(mask is not None), int(bool(a.get("is_causal", False)))], [scale],
                    source_line(L.node)))
    return y


@handles(aten.any.dim, aten.any.dims, aten.any.default, aten.all.dim, aten.all.dims, aten.all.default)
def _any_all(L, node, args, kwargs):
    name = "any" if node.target in (aten.any.dim, aten.any.dims, aten.any.default) else "all"
    x = L.cast(args[0], BOOL)
    d = kwargs.get("dim", args[1] if len(args) > 1 else None)
    if node.target in (aten.any.default, aten.all.default) or d is None:  # any.dims without dims: all of them
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


CONV_CHUNK_FLOATS = 262144  # src/kernels/variants.h TDM_CONV_CHUNK_FLOATS


def conv_gemm_chunk(K: int, N: int) -> int:
    """Output positions per im2col chunk (src/kernels/conv_gemm.c tdm_conv_gemm_chunk): whole 8-column
    panels, about CONV_CHUNK_FLOATS floats of patches, at least one panel, at most every position."""
    per = max(PANEL, CONV_CHUNK_FLOATS // max(K, 1) // PANEL * PANEL)
    return min(per, (N + PANEL - 1) // PANEL * PANEL)


@handles(aten.convolution.default)
def _convolution(L, node, args, kwargs):
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = args[:9]
    r = len(x.shape) - 2
    if r not in (1, 2):
        L.fail(f"{r}-d convolution is not supported (1-d and 2-d are)")
    stride, padding, dilation = [int(s) for s in stride], [int(p) for p in padding], [int(d) for d in dilation]
    groups = int(groups)
    if transposed:
        return _conv_transpose(L, node, x, w, b, stride, padding, dilation, [int(p) for p in output_padding], groups)
    ins = [x, w] + ([b] if b is not None else [])
    iattr = [r, int(b is not None), groups] + stride + padding + dilation
    out_shape = _shape_of(node)
    O, Cg = w.shape[0], w.shape[1]
    K = Cg * math.prod(w.shape[2:])
    plain_1x1 = K == Cg and groups == 1 and all(s == 1 for s in stride) and not any(padding)
    # im2col + GEMM where each output sums enough products and the GEMM's rows (output channels of a
    # group) fill its 4-row tiles, or where the stride leaves the direct kernel scalar; else direct
    # (depthwise, tiny kernels).
    if not plain_1x1 and K >= 16 and (O // groups >= 4 or stride[-1] > 2):
        y = L.new(F32, out_shape)
        ws = L.new(F32, (K * conv_gemm_chunk(K, math.prod(out_shape[2:])),))
        L.ops.append(Op("conv", ins, [y, ws], iattr, [], source_line(L.node)))
        return y
    return L.emit("conv", ins, F32, out_shape, iattr=iattr)


def _conv_transpose(L, node, x, w, b, stride, padding, dilation, output_padding, groups):
    """conv_transpose with w [C, O/groups, *kernel] rearranged to [groups, O/groups·prod(kernel), C/groups]
    (the GEMM's rows) and a workspace for the GEMM's result, O/groups·prod(kernel)·H·W, and for x's
    group packed in 8-column panels, C/groups·ceil8(H·W)."""
    C, Og = w.shape[0], w.shape[1]
    kernel = [int(k) for k in w.shape[2:]]
    rows = Og * math.prod(kernel)
    if w in L.const_tensor:
        wt = L.const(L.const_tensor[w].reshape(groups, C // groups, rows).permute(0, 2, 1).contiguous())
    else:
        wt = L.emit("permute", [L.reshape(w, (groups, C // groups, rows))], F32, (groups, rows, C // groups), iattr=[0, 2, 1])
    y = L.new(F32, _shape_of(node))
    hw = math.prod(x.shape[2:])
    ws = L.new(F32, (rows * hw + (C // groups) * ((hw + PANEL - 1) // PANEL * PANEL),))
    ins = [x, wt] + ([b] if b is not None else [])
    iattr = [len(kernel), int(b is not None), groups] + kernel + stride + padding + dilation + output_padding
    L.ops.append(Op("conv_transpose", ins, [y, ws], iattr, [], source_line(L.node)))
    return y


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


@handles(aten._native_batch_norm_legit_no_training.default)
def _batch_norm_eval(L, node, args, kwargs):
    x, w, b, mean, var, _momentum, eps = args[:7]
    C = x.shape[1]
    shape = (C,) + (1,) * (len(x.shape) - 2)
    if all(t is None or t in L.const_tensor for t in (w, b, mean, var)):
        inv = 1.0 / torch.sqrt(L.const_tensor[var] + eps)
        scale = inv * (L.const_tensor[w] if w is not None else 1.0)
        shift = -L.const_tensor[mean] * scale + (L.const_tensor[b] if b is not None else 0.0)
        if _fold_into_conv(L, node, x, scale, shift):
            return [x, None, None]
        y = L.emit("mul", [x, L.const(scale.reshape(shape))], F32, x.shape)
        y = L.emit("add", [y, L.const(shift.reshape(shape))], F32, x.shape)
        return [y, None, None]
    # statistics computed or given at run time: (x - mean) * rsqrt(var + eps) [* w] [+ b]
    def per_channel(t):
        return L.reshape(L.cast(t, F32), shape)
    y = L.emit("sub", [x, per_channel(mean)], F32, x.shape)
    inv = L.emit("rsqrt", [L.emit("add", [per_channel(var), L.scalar(eps, F32)], F32, shape)], F32, shape)
    y = L.emit("mul", [y, inv], F32, x.shape)
    if w is not None:
        y = L.emit("mul", [y, per_channel(w)], F32, x.shape)
    if b is not None:
        y = L.emit("add", [y, per_channel(b)], F32, x.shape)
    return [y, None, None]


def _fold_into_conv(L, node, x, scale, shift) -> bool:
    """Batch norm right after a convolution with constant weights that nothing else reads: scale
    the conv's weights and bias instead (conv·scale + shift), so the norm costs nothing at run time."""
    op = L.ops[-1] if L.ops else None
    if op is None or op.name != "conv" or op.outs[0] is not x or len(node.args[0].users) != 1:
        return False
    w, has_bias = op.ins[1], op.iattr[1] == 1
    if w not in L.const_tensor or (has_bias and op.ins[2] not in L.const_tensor):
        return False
    wt = L.const_tensor[w]
    op.ins[1] = L.const(wt * scale.reshape((-1,) + (1,) * (wt.dim() - 1)))
    bias = shift + (L.const_tensor[op.ins[2]] * scale if has_bias else 0.0)
    op.ins[2:3] = [L.const(bias.reshape(-1).float())]
    op.iattr[1] = 1
    return True


def _pool(L, out_shape, name, x, kernel, stride, padding, dilation, ceil_mode, include_pad):
    r = len(x.shape) - 2
    n = lambda v: [int(i) for i in v] * (r if len(v) == 1 else 1)  # noqa: E731
    kernel = n(kernel)
    stride = n(stride) if stride else kernel
    if ceil_mode:
        L.fail("pooling with ceil_mode=True is not supported yet")
    return L.emit(name, [x], F32, out_shape, iattr=[r] + kernel + stride + n(padding) + n(dilation) + [int(include_pad)])


@handles(aten.max_pool2d_with_indices.default)
def _max_pool(L, node, args, kwargs):
    a = list(args) + [None] * 6
    out_shape = tuple(_size(d, node) for d in node.meta["val"][0].shape)
    y = _pool(L, out_shape, "max_pool", a[0], a[1], a[2], a[3] or [0], a[4] or [1], a[5] or False, 0)
    return [y, None]  # the indices are not produced: using them fails in getitem


@handles(aten.avg_pool2d.default, aten.avg_pool1d.default)
def _avg_pool(L, node, args, kwargs):
    a = list(args) + [None] * 7
    if a[6] is not None:
        L.fail("avg_pool with divisor_override is not supported")
    return _pool(L, _shape_of(node), "avg_pool", a[0], a[1], a[2], a[3] or [0], [1], a[4] or False,
                 True if a[5] is None else a[5])


@handles(aten.cumsum.default)
def _cumsum(L, node, args, kwargs):
    dt = _dtype_of(node)
    x = L.cast(args[0], dt)
    if not x.shape:
        return x
    return L.emit("cumsum", [x], dt, x.shape, iattr=[_dim(int(args[1]), len(x.shape))])


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


def _fold(L: Lowering, node, args, kwargs):
    """Run the node with torch on constant inputs; returns a Value or None."""
    def conv(a):
        if isinstance(a, Value):
            return L.const_tensor[a]
        if isinstance(a, (list, tuple)):
            return type(a)(conv(x) for x in a)
        return a
    shape = _shape_of(node) if _meta(node) is not None else ()
    if _has_size((args, kwargs)) and not (node.target in FOLDABLE_EXTRA and any(isinstance(d, SymDim) for d in shape)):
        return None  # a size used as a value: computed per call by the handler, never frozen at the maximum
    if any(isinstance(d, SymDim) for d in shape):
        # A result whose size depends on a dim is folded only when the result at any size is the
        # start of the result at the maximum: arange with a static start and step, a dynamic end.
        end = 0 if node.target == aten.arange.default else 1
        others = [a for i, a in enumerate(args) if i != end] + list(kwargs.values())
        if node.target not in FOLDABLE_EXTRA or any(isinstance(a, SymDim) for a in others):
            return None
        res = node.target(*conv(args), **{k: conv(v) for k, v in kwargs.items()})
        return L.const(res.contiguous()).view(shape)
    if _has_symdim((args, kwargs)):
        # a value that depends on a dynamic dim (e.g. a count plus n): torch would see the dim's
        # maximum (a SymDim is an int at the maximum), so it is computed by the runtime, not here
        return None
    res = node.target(*conv(args), **{k: conv(v) for k, v in kwargs.items()})
    if isinstance(res, torch.Tensor):
        if res.numel() > FOLD_MAX_NUMEL and not any(isinstance(a, Value) for a in args):
            return None
        return L.const(res)
    return None


# Python arithmetic on sizes that gives a float (n / 2, n * 0.5) or a bool (n > 3): computed per call.
SIZE_OPS = {operator.mul: "mul", operator.add: "add", operator.sub: "sub", operator.truediv: "div", operator.neg: "neg",
            operator.gt: "gt", operator.ge: "ge", operator.lt: "lt", operator.le: "le", operator.eq: "eq", operator.ne: "ne",
            torch.sym_float: None}


def _size_op(L, node, args) -> Value:
    name = SIZE_OPS[node.target]
    if name is None:  # sym_float(n)
        return L.operand(args[0], F32)
    if name in COMPARE:
        cd = F32 if any(isinstance(a, float) or isinstance(a, Value) and a.dtype == F32 for a in args) else I64
        return L.emit(name, [L.operand(a, cd) for a in args], BOOL, ())
    return L.emit(name, [L.operand(a, F32) for a in args], F32, ())


def _unread_items(graph) -> set:
    """`.item()` nodes whose value reaches only torch's own assertions on it (through size
    arithmetic), with those nodes: what is left of a bool() that tandem specialized with a guard
    (runtime_values.py) after torch read the value; nothing a method computes depends on them."""
    out = set()
    for node in graph.nodes:
        if node.target is not aten._local_scalar_dense.default:
            continue
        chain, todo, ok = {node}, list(node.users), True
        while todo and ok:
            u = todo.pop()
            if u in chain:
                continue
            chain.add(u)
            if u.target is aten._assert_scalar.default:
                continue
            ok = isinstance(u.meta.get("val"), (torch.SymInt, torch.SymBool, torch.SymFloat))
            todo.extend(u.users)
        if ok:
            out |= chain
    return out


def lower_method(name: str, ep, tensors: dict, states: dict, key_of, dims: list = ()) -> MethodIR:
    """Lower one exported (and decomposed) program to a MethodIR with unplanned scratch. `dims`:
    the method's dynamic dims, [(name, min, max, sympy symbol)]."""
    _DIM_MAX.clear()
    _DIM_MAX.update({sym: mx for _, _, mx, sym in dims})
    _DIM_MIN.clear()
    _DIM_MIN.update({sym: mn for _, mn, _, sym in dims})
    _DIM_NAMES.clear()
    _DIM_NAMES.update({sym: n for n, _, _, sym in dims})
    L = Lowering(name, states, key_of)
    gm = ep.graph_module
    sig = ep.graph_signature
    kinds = {s.arg.name: s for s in sig.input_specs}
    env: dict = {}
    L.env = env  # FX node -> its Value: for handlers that recognize a pattern of nodes (_cdist_matmul)
    inputs = []
    state_values: dict = {}  # StateSpec -> Value of its old contents
    unread = _unread_items(gm.graph)
    dim_states = {}  # a dim bound from the state at the start of a call (export._state_dims): its .item() is no op
    for sym, (t, where) in getattr(ep, "_tandem_dim_tensors", {}).items():
        if key_of(t) not in states:
            raise ExportError(f"method '{name}' slices a length read from a tensor that no method changes"
                              f"{where}; tandem binds such a length from the state "
                              "at the start of each call: keep the offset in state that a method advances, or slice a "
                              "fixed length")
        dim_states[sym] = states[key_of(t)]
    for node in gm.graph.nodes:
        L.node = node
        if node.op == "placeholder":
            spec = kinds.get(node.name)
            if (spec is None or spec.kind == InputKind.USER_INPUT) and node.meta.get("val") is None:
                env[node] = None  # an example input given as None: not an input of the method
            elif spec is None or spec.kind == InputKind.USER_INPUT:
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
                elif not node.users:
                    env[node] = None  # held by the module, not read by this method: not stored
                else:
                    L.node = next(iter(node.users))  # an error names the first line that reads it
                    env[node] = L.const(t, f"tensor '{spec.target}'")
            else:
                L.fail(f"input kind {spec.kind.name} is not supported")
        elif node.op == "call_function":
            args = torch.fx.node.map_arg(node.args, lambda n: env[n])
            kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
            val = node.meta.get("val")
            if node in unread:  # read and unused (a branch tandem specialized, runtime_values.py)
                env[node] = None
                continue
            if node.target is aten._local_scalar_dense.default and getattr(getattr(val, "node", None), "expr", None) in dim_states:
                env[node] = _size(val, node)  # bound by the runtime before the first op
                continue
            if node.target is aten._local_scalar_dense.default:
                _require_static(node)  # .item(): says what to do instead
            if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool) and node.target is not operator.getitem:
                L.node = node
                env[node] = _size(val, node)  # a size (sym_size, n + 1, ...): an int or a SymDim
                continue
            if isinstance(val, (torch.SymFloat, torch.SymBool)) and node.target in SIZE_OPS:
                L.node = node  # a float or a comparison computed from sizes: a 0-d value per call
                env[node] = _size_op(L, node, args)
                continue
            if isinstance(val, torch.SymBool) or node.target in (torch.ops.aten.sym_constrain_range_for_size.default,):
                env[node] = None  # a guard on sizes: the verifier checks sizes over the dims' bounds
                continue
            if node.target is operator.getitem:
                r = args[0][args[1]]
                if r is None:
                    L.fail("uses an auxiliary output (e.g. layer norm's mean/rstd) that tandem does not produce")
                env[node] = r
                continue
            _require_static(node)
            all_const = all(v in L.const_tensor for v in _values_in((args, kwargs)))
            handler = HANDLERS.get(node.target)
            if torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ()):
                all_const = False  # a random op draws in every call: never folded into a constant
            if all_const and (handler is not None or node.target in FOLDABLE_EXTRA) and _meta(node) is not None:
                folded = _fold(L, node, args, kwargs)
                if folded is not None:
                    env[node] = folded
                    continue
            if handler is None:
                L.unsupported.append(f"  {node.target}{source_line(node)}")
                env[node] = _stand_in(L, node.meta.get("val"))  # lets lowering go on to list every unsupported op
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
    _check_empty_reads(L)
    user_outputs, mutations = [], []
    for spec, o in zip(sig.output_specs, outs):
        if spec.kind == OutputKind.USER_OUTPUT:
            if o is None:
                continue
            if not isinstance(o, torch.fx.Node):
                raise ExportError(f"method '{name}' returns {o!r}; methods return tensors, a tuple of tensors or None (a method "
                                  "that takes no inputs, changes no state and returns only constants is stored as metadata)")
            v = env[o]
            if isinstance(v, int) and not isinstance(v, bool):  # a size returned: a 0-d int64 tensor of its value per call
                L.node = o
                v = L.scalar(v, I64)
                L.node = None
            user_outputs.append((spec.arg.name, v))
        elif spec.kind == OutputKind.BUFFER_MUTATION:
            t = tensors[next(s.arg.name for s in sig.input_specs if s.target == spec.target)]
            mutations.append((states[key_of(t)], env[o]))
    mutations += [finish() for finish in L.at_end]
    _finish(L, user_outputs, mutations)
    outputs = [("output" if len(user_outputs) == 1 else f"output{i}", v) for i, (_, v) in enumerate(user_outputs)]
    return MethodIR(name, inputs, outputs, L.ops, dims=list(dims), dim_states=dim_states)


def _stand_in(L, val):
    if isinstance(val, (list, tuple)):
        return [_stand_in(L, v) for v in val]
    if isinstance(val, torch.Tensor):
        return L.new(DTYPE_CODE.get(val.dtype, F32), tuple(int(d) for d in val.shape))
    return L.new(F32, ())


def _has_symdim(obj) -> bool:
    if isinstance(obj, SymDim):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_has_symdim(x) for x in obj)
    if isinstance(obj, dict):
        return any(_has_symdim(x) for x in obj.values())
    return False


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


# ---- scatter, isnan/isinf/isfinite, empty (issue #23) -------------------------------------------

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
        want = x.shape[:dim] + (rows.shape[0],) + x.shape[dim + 1:]
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


CLASSIFY = {aten.isnan.default: "isnan", aten.isinf.default: "isinf", aten.isfinite.default: "isfinite"}


@handles(*CLASSIFY)
def _classify(L, node, args, kwargs):
    x = args[0]
    name = CLASSIFY[node.target]
    if x.dtype != F32:  # integers and bools are never NaN or infinite
        return _fill(L, int(name == "isfinite"), BOOL, x.shape)
    return L.emit(name, [x], BOOL, x.shape)


@handles(aten.empty.memory_format, aten.empty_like.default, aten.new_empty.default, aten.empty_strided.default,
         aten.empty_permuted.default)
def _empty(L, node, args, kwargs):
    """torch.empty & co.: uninitialized scratch. Its bytes must be written before they are read
    (checked in lower_method's _check_empty_reads; the verifier checks it again at load)."""
    v = L.new(_dtype_of(node), _shape_of(node))
    L.empty.add(v.storage)
    return v


def _check_empty_reads(L) -> None:
    """A torch.empty() value is read only as the base of an update (x[:2] = a, x.scatter_(..),
    x.index_copy_(..)): it is filled with zeros first (any contents are what torch.empty may give),
    so the bytes the update does not write are defined. Any other read is an ExportError naming the
    line, since its result would depend on bytes nothing wrote."""
    if not L.empty:
        return
    ops, filled = [], set()
    for op in L.ops:
        for i, v in enumerate(op.ins):
            s = v.storage
            if s not in L.empty or s in filled:
                continue
            if i == 0 and op.name in schema.IN_PLACE_FIRST:
                whole = Value(v.dtype, (int(s.nbytes) // DTYPE_SIZE[v.dtype],), s)
                ops.append(Op("fill", [], [whole], [] if v.dtype == F32 else [0], [0.0] if v.dtype == F32 else [],
                              op.where))
                filled.add(s)
            else:
                raise ExportError(f"method '{L.method}': op '{op.name}' reads the contents of torch.empty() (or "
                                  f"new_empty/empty_like) before anything wrote them{op.where}: its result would be "
                                  "undefined; write every element first, or use torch.zeros")
        ops.append(op)
    L.ops[:] = ops


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


from . import lower_random  # noqa: E402,F401  (random sampling: registers its handlers)
