"""The exporter's intermediate form: storages, values and ops of one method, before the file.

A *storage* is a block of bytes in one region (scratch, a constant, or a state slot); a *value* is
a dtype + shape at a byte offset inside a storage (views share their base's storage). Ops read and
write values. The planner gives scratch storages their offsets; the writer serializes the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from . import schema

# Dtype codes from schema.py (append-only; include/tandem.h tdm_dtype has the same numbers).
F32, I64, BOOL, I8, I4X2, I32, BF16, I16 = (
    next(d.code for d in schema.DTYPES if d.name == n) for n in ("float32", "int64", "bool", "int8", "int4x2", "int32", "bfloat16", "int16")
)
# torch dtype -> code for what a method computes with; the constant-only dtypes (quantized weights,
# made by quantize.py) are not in it, so no input, state or activation can take them.
DTYPE_CODE = {getattr(torch, d.name): d.code for d in schema.DTYPES if not d.const_only}
TORCH_DTYPE = {v: k for k, v in DTYPE_CODE.items()}
DTYPE_SIZE = {d.code: d.size for d in schema.DTYPES}
DTYPE_NAME = {d.code: d.name for d in schema.DTYPES}
SUPPORTED_DTYPES = ", ".join(d.name for d in schema.DTYPES if not d.const_only)  # for messages
# Floating dtypes tandem stores as float32: constants (parameters, buffers never written, literals)
# convert exactly (float16, bfloat16) or by rounding to nearest (float64); float64 values computed
# inside a method (torch.full(..., dtype=torch.float64), x.double()) are computed in float32.
# docs/ops.md ("Dtypes") states the rule.
AS_FLOAT32 = (torch.float64, torch.float16, torch.bfloat16)
AS_INT32 = (torch.uint8, torch.int8, torch.int16)  # integer constants stored as int32 (exact)

SCRATCH, CONST, STATE = (schema.REGION_CODE[c] for c in ("SCRATCH", "CONST", "STATE"))  # tdm_region, from schema.py


class ExportError(Exception):
    """A model tandem cannot export, with what to change."""


class SymDim(int):
    """A size that depends on a method's dynamic dims: an int equal to its value at the maximum of
    every dim (so planning, comparisons and the file's stored sizes see the maximum), carrying the
    sympy expression it stands for (`expr`, in the dims' symbols). Arithmetic with ints and other
    SymDims keeps the expression; a result whose expression is a number is a plain int."""

    expr: object

    def __new__(cls, value: int, expr):
        import sympy

        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return int(expr)
        obj = super().__new__(cls, int(value))
        obj.expr = expr
        return obj

    def _op(self, other, f, fi):
        if not isinstance(other, int) or isinstance(other, bool) and False:
            return NotImplemented
        oe = other.expr if isinstance(other, SymDim) else other
        return SymDim(fi(int(self), int(other)), f(self.expr, oe))

    def __add__(self, o):
        return self._op(o, lambda a, b: a + b, lambda a, b: a + b)

    def __radd__(self, o):
        return self._op(o, lambda a, b: b + a, lambda a, b: b + a)

    def __sub__(self, o):
        return self._op(o, lambda a, b: a - b, lambda a, b: a - b)

    def __rsub__(self, o):
        return self._op(o, lambda a, b: b - a, lambda a, b: b - a)

    def __mul__(self, o):
        return self._op(o, lambda a, b: a * b, lambda a, b: a * b)

    def __rmul__(self, o):
        return self._op(o, lambda a, b: b * a, lambda a, b: b * a)

    def __floordiv__(self, o):
        import sympy

        return self._op(o, lambda a, b: sympy.floor(a / b), lambda a, b: a // b)

    def __rfloordiv__(self, o):
        import sympy

        return self._op(o, lambda a, b: sympy.floor(b / a), lambda a, b: b // a)

    def __mod__(self, o):
        import sympy

        return self._op(o, lambda a, b: sympy.Mod(a, b), lambda a, b: a % b)

    def __neg__(self):
        return SymDim(-int(self), -self.expr)

    def __pos__(self):
        return self

    def __hash__(self):
        return hash((int(self), str(self.expr)))

    def __eq__(self, o):
        if isinstance(o, SymDim):
            return int(self) == int(o) and bool((self.expr - o.expr).expand() == 0)
        return int(self) == o if isinstance(o, int) else NotImplemented

    def __ne__(self, o):
        r = self.__eq__(o)
        return r if r is NotImplemented else not r

    def __repr__(self):
        return f"SymDim({int(self)}, {self.expr})"


def same_shape(a, b) -> bool:
    """Whether two shapes are equal at every size of the dims: a SymDim equals its maximum as an int
    (so `==` on shapes holds for a prefix of a dynamic length), which this does not take."""
    return len(a) == len(b) and all(isinstance(x, SymDim) == isinstance(y, SymDim) and x == y for x, y in zip(a, b))


def size_expr(x):
    """x's expression: its sympy expression when it is a SymDim, else x."""
    return x.expr if isinstance(x, SymDim) else x


def as_size(x):
    """int(x) that keeps a SymDim (and reads a torch SymInt through `_SYMS`, see lowering/core.py)."""
    return x if isinstance(x, SymDim) else int(x)


@dataclass(eq=False)
class Storage:
    kind: int  # SCRATCH, CONST or STATE
    nbytes: int
    tensor: Optional[torch.Tensor] = None  # CONST: the bytes to store
    dtype: Optional[int] = None  # CONST: its dtype code when not the tensor's (int8, int4x2 weights)
    state: Optional["StateSpec"] = None  # STATE: which slot
    offset: int = 0  # SCRATCH: planned byte offset in the arena
    is_input: bool = False


@dataclass(eq=False)
class Value:
    dtype: int
    shape: tuple
    storage: Storage
    offset: int = 0  # bytes from the start of the storage

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_SIZE[self.dtype]

    def view(self, shape, offset_bytes: int = 0, dtype: Optional[int] = None) -> "Value":
        return Value(dtype or self.dtype, tuple(shape), self.storage, self.offset + offset_bytes)


@dataclass(eq=False)
class Op:
    name: str
    ins: list
    outs: list
    iattr: list = field(default_factory=list)
    fattr: list = field(default_factory=list)
    where: str = ""  # the user's source line, for messages
    # a cond's branches (torch.cond): (then ops, else ops). In the file they follow the op (docs/format.md),
    # and its ins are [pred]; here its ins are pred and every value its branches read from outside them
    # (refresh_conds), so the passes over a method's ops see what it reads.
    bodies: Optional[tuple] = None


def flat_ops(ops):
    """Every op in file order: each cond followed by its then ops and its else ops (recursively)."""
    for op in ops:
        yield op
        for body in op.bodies or ():
            yield from flat_ops(body)


def op_lists(ops):
    """The method's list of ops and every branch's, for passes that replace ops by index."""
    yield ops
    for op in ops:
        for body in op.bodies or ():
            yield from op_lists(body)


def refresh_conds(ops) -> None:
    """Each cond's ins become its pred and every value its branches read that they do not write."""
    for op in ops:
        if not op.bodies:
            continue
        for body in op.bodies:
            refresh_conds(body)
        inner = {id(v.storage) for body in op.bodies for o in flat_ops(body) for v in o.outs}
        free = [v for body in op.bodies for o in flat_ops(body) for v in o.ins if id(v.storage) not in inner]
        op.ins[1:] = list({id(v): v for v in free}.values())


@dataclass(eq=False)
class StateSpec:
    name: str
    tensor: torch.Tensor  # the module's buffer (identity)
    init: torch.Tensor  # its value at export
    dtype: int
    shape: tuple
    offset: int = 0  # in the state region, set by the writer

    @property
    def nbytes(self) -> int:
        n = DTYPE_SIZE[self.dtype]
        for d in self.shape:
            n *= d
        return n


@dataclass(eq=False)
class MethodIR:
    name: str
    inputs: list  # [(name, Value)]
    outputs: list  # [(name, Value)]
    ops: list
    scratch_size: int = 0
    dims: list = field(default_factory=list)  # [(name, min, max, sympy symbol)] dynamic dims
    dim_states: dict = field(default_factory=dict)  # sympy symbol -> StateSpec: a dim bound from that state's value
