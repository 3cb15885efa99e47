"""The lowering's shared core: the `Lowering` state of one method (its ops, constants and size
values), the table of handlers (`handles` registers one per ATen target), the method's dynamic dims,
and the helpers every handler uses to read a node's dtype, shape, dims and positions."""

from __future__ import annotations

import math
from typing import Callable

import torch

from ..ir import (
    AS_FLOAT32,
    AS_INT32,
    CONST,
    DTYPE_CODE,
    DTYPE_SIZE,
    F32,
    I64,
    SCRATCH,
    SUPPORTED_DTYPES,
    TORCH_DTYPE,
    ExportError,
    Op,
    Storage,
    SymDim,
    Value,
    as_size,
)
from .provenance import source_line

aten = torch.ops.aten

FOLD_MAX_NUMEL = 4096  # constant results larger than this are computed at run time instead
FILL_MAX_NUMEL = 64  # a full()/zeros() larger than this is a fill op, not stored bytes


# The method being lowered's dynamic dims: sympy symbol -> its maximum / its minimum (set by lower_method).
_DIM_MAX: dict = {}
_DIM_MIN: dict = {}
_DIM_NAMES: dict = {}  # symbol -> the user's dim name, for messages
# Sizes torch could not know at trace time (an unbacked symbol: the count of x[mask]) that follow from
# constants, so the lowering computed them at export: symbol -> int (set by bind_sizes).
_BOUND: dict = {}


def bind_sizes(node, shape) -> None:
    """Binds each size of node's result that torch left as an unbacked symbol (x[mask]'s count) to
    the size in `shape` the lowering computed from constants."""
    for d, n in zip(_meta(node).shape, shape):
        if isinstance(d, torch.SymInt) and d.node.expr.is_Symbol and d.node.expr not in _DIM_MAX:
            _BOUND[d.node.expr] = int(n)


def unbound_sizes(node) -> bool:
    """Whether node's result has a size over symbols that are neither the method's dims nor bound."""
    vals = node.meta.get("val")
    return any(
        isinstance(v, torch.Tensor)
        and any(
            isinstance(d, torch.SymInt) and any(x not in _DIM_MAX and x not in _BOUND for x in d.node.expr.free_symbols) for d in v.shape
        )
        for v in (vals if isinstance(vals, (list, tuple)) else [vals])
    )


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
        if _BOUND and expr.free_symbols & _BOUND.keys():
            expr = expr.subs(_BOUND)
            if expr.is_Integer:
                return int(expr)
        unknown = [str(s) for s in expr.free_symbols if s not in _DIM_MAX]
        if unknown:
            raise ExportError(
                f"a size {expr} depends on values tandem cannot bound ({', '.join(unknown)}): the result of "
                f"nonzero() or .item(), or a dynamic dim that no input has by itself as a size (only derived, "
                f"e.g. 2*n); sizes may depend only on dims that are some input's size{source_line(node)}"
            )
        return SymDim(int(expr.subs(_DIM_MAX)), expr)
    return as_size(d)


def _meta(node):
    v = node.meta.get("val")
    if isinstance(v, torch.Tensor):
        return v
    return None


def _dense_permutation(t: torch.Tensor) -> bool:
    """t holds each of its elements once, in some order of its dims (a parameter's transpose, as
    nn.Linear's weight is read): kept as that view, not copied, so a weight is read from the
    module's own tensor by quantize.py and layout.py, which write it in its final layout once."""
    if t.is_contiguous():
        return True
    dims = sorted(range(t.dim()), key=lambda d: -t.stride(d))
    return t.permute(dims).is_contiguous()


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
        self.sliced: dict = {}  # a slice op's output storage -> (input, dim, start, step, output) (shape._slice_value)
        self.env: dict = {}  # FX node -> Value while lowering (set by lower_method)
        self.at_end: list = []  # () -> (StateSpec, Value): state writes a handler adds (random.py's counter)

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
                self.fail(
                    f"{name} has dtype {t.dtype}; tandem supports {SUPPORTED_DTYPES} (other float and integer "
                    "constants are stored as float32 or int32): convert it, e.g. with .float() or .int()"
                )
        if not _dense_permutation(t):
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
            self.fail(
                f"the {type(x).__name__[3:].lower()} {x} is computed from sizes in Python; tandem computes sizes used as "
                "values per call only as integers: keep it an integer (n, n - 1, n // 2), or make a tensor first "
                "(torch.tensor(x.shape[1]) * 0.5)"
            )
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
            self.fail(
                f"the size {expr} depends on values tandem cannot bound ({', '.join(bad)}: the result of nonzero() or "
                ".item()); sizes used as values may depend only on dynamic dims of the inputs"
            )
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
                self.fail(
                    f"the size {expr} is used as a value; tandem computes sizes per call from +, -, *, //, %, min "
                    "and max of the dynamic dims, not this form: compute it from tensors instead"
                )
        self.sizes[key] = v
        return v

    def emit(self, name: str, ins, out_dtype: int, out_shape, iattr=(), fattr=()) -> Value:
        out = self.new(out_dtype, out_shape)
        if any(isinstance(a, (SymDim, torch.SymInt, torch.SymFloat)) for a in fattr):  # a float attribute is static
            self.fail(
                f"op '{name}' takes a size ({fattr}) as a float attribute, which would freeze it at its maximum; "
                "this is a bug in tandem's exporter, please report it"
            )
        self.ops.append(Op(name, list(ins), [out], [as_size(a) for a in iattr], [float(a) for a in fattr], source_line(self.node)))
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
        raise ExportError(
            f"{what} gives a tensor of dtype {getattr(m, 'dtype', None)}; tandem computes in "
            f"{SUPPORTED_DTYPES} (float64 as float32): convert with .float(), .long() or .int()"
            f"{source_line(node)}"
        )
    return DTYPE_CODE[m.dtype]


def _shape_of(node) -> tuple:
    m = _meta(node)
    return tuple(_size(d, node) for d in m.shape)


def _require_static(node) -> None:
    if node.target is aten._local_scalar_dense.default:
        raise ExportError(
            f"'.item()' (or int()/float() of a tensor) reads a value into Python, so what follows depends "
            f"on input values; tandem exports a fixed graph: keep it a tensor (index with "
            f"torch.index_select / torch.gather, select with torch.where, slice a fixed length from a start tensor "
            f"with torch.narrow(x, dim, start, length)){source_line(node)}"
        )
    vals = node.meta.get("val")
    for v in vals if isinstance(vals, (list, tuple)) else [vals]:
        if isinstance(v, torch.Tensor) and not all(
            isinstance(d, int) or all(x in _DIM_MAX or x in _BOUND for x in d.node.expr.free_symbols) for d in v.shape
        ):
            if node.target is aten.index.Tensor:
                hint = (
                    "x[mask] has a size that depends on values (tandem exports static shapes, or dims bounded in "
                    "dynamic_shapes): use torch.where(mask, x, 0) (or x * mask) to keep "
                    "x's shape, or torch.topk / torch.sort for a fixed number of elements"
                )
            elif node.target is aten.nonzero.default:
                hint = (
                    "nonzero() has a size that depends on values: use a mask with torch.where instead, or "
                    "torch.topk for a fixed number of indices"
                )
            else:
                hint = (
                    f"'{node.target}' gives a tensor of shape {tuple(v.shape)}, whose size depends on input values; "
                    f"tandem exports static shapes: compute a fixed-size result instead (e.g. torch.where with a mask)"
                )
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
        L.fail(
            f"{what} {size_expr_text(i)} is negative at some sizes of the dims and not at others, so it would count "
            "from the end in some calls only; compute one that keeps its sign"
        )
    if sym_range(i)[0] < 0 or sym_range(i - size)[1] > (0 if clamp else -1):
        L.fail(
            f"{what} {size_expr_text(i)} is outside the dim (of size {size_expr_text(size)}) at some sizes of the dims; "
            "tandem computes positions per call only inside the tensor: bound it (e.g. a larger buffer)"
        )
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
        L.fail(
            f"{what} is the size {size_expr_text(_size(x) if isinstance(x, torch.SymInt) else x)}, which depends on a "
            "dynamic dim; tandem needs it static: give it a fixed value"
        )
    return int(x)


# ---- handlers: (lowering, node, args, kwargs) -> Value or list of Values -----------------------
HANDLERS: dict = {}


def handles(*targets):
    """Registers a handler for ATen overloads, or for a library's custom op by its name
    ("transformers.grouped_mm_fallback.default": tandem does not import the library)."""

    def deco(fn):
        for t in targets:
            HANDLERS[t] = fn
        return fn

    return deco
