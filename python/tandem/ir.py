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
F32, I64, BOOL, I8, I4X2, I32 = (next(d.code for d in schema.DTYPES if d.name == n)
                                 for n in ("float32", "int64", "bool", "int8", "int4x2", "int32"))
# torch dtype -> code for what a method computes with; the constant-only dtypes (quantized weights,
# made by quantize.py) are not in it, so no input, state or activation can take them.
DTYPE_CODE = {getattr(torch, d.name): d.code for d in schema.DTYPES if not d.const_only}
TORCH_DTYPE = {v: k for k, v in DTYPE_CODE.items()}
DTYPE_SIZE = {d.code: d.size for d in schema.DTYPES}
DTYPE_NAME = {d.code: d.name for d in schema.DTYPES}
SUPPORTED_DTYPES = ", ".join(d.name for d in schema.DTYPES)  # for messages
# Floating dtypes tandem stores as float32: constants (parameters, buffers never written, literals)
# convert exactly (float16, bfloat16) or by rounding to nearest (float64); float64 values computed
# inside a method (torch.full(..., dtype=torch.float64), x.double()) are computed in float32.
# docs/ops.md ("Dtypes") states the rule.
AS_FLOAT32 = (torch.float64, torch.float16, torch.bfloat16)
AS_INT32 = (torch.uint8, torch.int8, torch.int16)  # integer constants stored as int32 (exact)

SCRATCH, CONST, STATE = 0, 1, 2  # tdm_region


class ExportError(Exception):
    """A model tandem cannot export, with what to change."""


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
