"""The one declaration of what the exporter, the runtime and the docs must agree on.

Dtype codes, the packed-weight panel width, the file's section ids and record layouts, and every
runtime operator with the two facts the planner and the verifier share (can it fail on runtime
values, which input may its output overwrite). Plain data, no torch, so scripts can read it.

Everything else follows from this file:
- C: `scripts/gen_schema.py` writes `src/schema.h` (committed; the build needs no Python). The op
  tables in `src/kernels/*.c` take their flags from it (`TDM_OP`), `tests/c/test_schema.c` checks
  that the runtime has exactly these ops, and `src/util.c` asserts `include/tandem.h`'s dtypes.
- Python: `ir.py` (dtypes), `plan.py` (can fail, in place), `lowering/layout.py` (panel), `format.py` (records).
- Docs and the committed header: `tests/python/test_schema.py` fails when `src/schema.h`,
  `docs/ops.md` or `docs/format.md` disagree with this file.

Codes are append-only: a dtype, a section id or a field keeps its number and place forever.
"""
from __future__ import annotations

import struct
from typing import NamedTuple


class Dtype(NamedTuple):
    code: int
    name: str  # also the torch dtype's name (torch.float32, ...) and the JS one
    size: int  # bytes per element
    c: str  # the tdm_dtype enumerator in include/tandem.h is TDM_<c>
    const_only: bool = False  # quantized weights: only constants read by the QUANT_OPS have it


DTYPES = [Dtype(1, "float32", 4, "F32"), Dtype(2, "int64", 8, "I64"), Dtype(3, "bool", 1, "BOOL"),
          # One int8 per element (no torch name clash: torch.int8).
          Dtype(4, "int8", 1, "I8", const_only=True),
          # One element = one byte holding two signed 4-bit values, the first in the low nibble; dims
          # count bytes, so element count x 1 = size in bytes, as for every other dtype.
          Dtype(5, "int4x2", 1, "I4X2", const_only=True),
          Dtype(6, "int32", 4, "I32")]
CONST_ONLY_DTYPES = frozenset(d.code for d in DTYPES if d.const_only)

PANEL = 8  # columns per panel of a packed weight (matmul_packed, embedding_packed): [ceil(N/8), K, 8]
QUANT_GROUP = 32  # default int4 group size along K (matmul_q4, embedding_q4)


# ---- the file ------------------------------------------------------------------------------------

MAGIC = b"TNDM"
VERSION = 3  # the reader also reads versions 1 (no metadata section) and 2 (no dims and symbolic sizes)
ALIGN = 64  # the data section, each constant and state blob, each state slot
SECTION_ALIGN = 8  # where the writer places the other sections
SECTIONS = {1: "strings", 2: "constants", 3: "states", 4: "methods", 5: "data", 6: "metadata"}  # id -> name, in file order


class Record:
    """A fixed-size little-endian record: named fields, each a `struct` format letter."""

    def __init__(self, *fields: str):
        self.names = [f.split(":")[0] for f in fields]
        self.codes = [f.split(":")[1] for f in fields]
        self.fmt = "<" + "".join(self.codes)
        self.size = struct.calcsize(self.fmt)
        self.offset = {n: struct.calcsize("<" + "".join(self.codes[:i])) for i, n in enumerate(self.names)}

    def pack(self, *values) -> bytes:
        return struct.pack(self.fmt, *values)


# Records of docs/format.md, in file order. A record marked "+ dims" is followed by rank x i64 dims.
HEADER = Record("magic:4s", "version:I", "file_size:Q", "section_count:I", "flags:I", "reserved:Q")
SECTION = Record("id:I", "reserved:I", "offset:Q", "size:Q")  # HEADER is followed by one per section
STRINGS_HEAD = Record("count:I")  # then per string: u32 len, len bytes, a 0 byte
STRING = Record("len:I")
CONSTANTS_HEAD = Record("count:I")
CONSTANT = Record("name:I", "dtype:B", "rank:B", "reserved:H", "offset:Q", "nbytes:Q")  # + dims
STATES_HEAD = Record("region_size:Q", "count:I")
STATE = Record("name:I", "dtype:B", "rank:B", "init:B", "reserved:B", "offset:Q", "nbytes:Q", "init_offset:Q")  # + dims
METHODS_HEAD = Record("count:I")
METHOD = Record("name:I", "n_values:I", "n_inputs:I", "n_outputs:I", "n_ops:I", "n_dims:I", "scratch_size:Q")  # n_dims: 0 before v3
VALUE = Record("dtype:B", "rank:B", "region:B", "reserved:B", "ref:I", "offset:Q")  # + dims
IO = Record("value:I", "name:I")
METADATA_HEAD = Record("count:I")
METADATA_ENTRY = Record("key:I", "value:I")  # string indices: a name, and its value as JSON text
OP_HEADER = Record("name:I", "n_in:H", "n_out:H", "n_iattr:H", "n_fattr:H")  # + u32 in, u32 out, i64 iattr, f64 fattr
# Version 3, after a method's ops: its dynamic dims, then its symbolic sizes (docs/format.md, "Dims").
DIM = Record("name:I", "reserved:I", "min:q", "max:q")
SYMS_HEAD = Record("count:I")
SYM = Record("kind:B", "reserved:B", "index:H", "target:I", "n_terms:I", "reserved2:I", "constant:q")  # + n_terms x TERM
TERM = Record("dim:I", "reserved:I", "coef:q")
SYM_KINDS = ("dim", "offset", "iattr")  # codes 0, 1, 2: a value's dim, a value's offset, an op's integer attribute
MAX_DIMS = 8  # dynamic dims per method
MAX_SYM_COEF = 1 << 32  # |coefficient| and |constant| of a symbolic size; dims are below 2^31

RECORDS = {"header": HEADER, "section": SECTION, "strings_head": STRINGS_HEAD, "string": STRING,
           "constants_head": CONSTANTS_HEAD, "constant": CONSTANT, "states_head": STATES_HEAD, "state": STATE,
           "methods_head": METHODS_HEAD, "method": METHOD, "value": VALUE, "io": IO, "op_header": OP_HEADER,
           "metadata_head": METADATA_HEAD, "metadata_entry": METADATA_ENTRY,
           "dim": DIM, "syms_head": SYMS_HEAD, "sym": SYM, "term": TERM}


# ---- runtime operators ---------------------------------------------------------------------------

INPLACE_KINDS = ("none", "first", "any")  # codes 0, 1, 2 (TDM_INPLACE_NONE, _FIRST, _ANY)


class OpDef(NamedTuple):
    name: str
    can_fail: bool = False  # may reject runtime values (an index); validates before writing anything
    inplace: str = "none"  # 'none'; 'first': the output may be input 0; 'any': any input of its dtype and size


def _elementwise(*names):
    return [OpDef(n, inplace="any") for n in names]  # element i of the output needs only element i of it


OPS = [
    *_elementwise("add", "sub", "mul", "div", "maximum", "minimum", "pow", "remainder", "eq", "ne", "lt", "le", "gt",
                  "ge", "logical_and", "logical_or", "floor_divide", "trunc_divide"),
    *_elementwise("neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "gelu",
                  "gelu_tanh", "silu", "erf", "reciprocal", "floor", "ceil", "logical_not"),
    OpDef("where"), OpDef("cast"), OpDef("fill"), OpDef("copy"),
    OpDef("matmul"), OpDef("matmul_packed"), OpDef("embedding_packed"),
    OpDef("permute"), OpDef("slice"), OpDef("cat"), OpDef("expand"), OpDef("index_select"),
    OpDef("any"), OpDef("all"), OpDef("argmax"), OpDef("argmin"), OpDef("sum"), OpDef("mean"), OpDef("amax"),
    OpDef("amin"), OpDef("softmax"), OpDef("log_softmax"), OpDef("layer_norm"), OpDef("rms_norm"),
    OpDef("check_index", can_fail=True),
    OpDef("index_put", inplace="first"), OpDef("slice_scatter", inplace="first"),
    OpDef("attention"),
    OpDef("conv"), OpDef("max_pool"), OpDef("avg_pool"), OpDef("conv_transpose"),
    *_elementwise("log1p"),
    OpDef("cumsum"), OpDef("gather"), OpDef("sort"), OpDef("topk"),
    # Quantized weights (docs/ops.md): the only ops that may read the constant-only dtypes.
    OpDef("matmul_q8"), OpDef("matmul_q4"), OpDef("embedding_q8"), OpDef("embedding_q4"),
    # MobileNetV3's activations as one pass each (instead of 4-5 elementwise ops).
    *_elementwise("hardswish", "hardsigmoid"),
    # A Python branch on a tensor value, specialized at export: fails the call unless cond is true.
    OpDef("guard", can_fail=True),
    # scatter_ (moshi's ring KV cache) may update input 0 in place; isnan/isinf/isfinite give bool.
    OpDef("scatter", inplace="first"), OpDef("isnan"), OpDef("isinf"), OpDef("isfinite"),
]
OP_BY_NAME = {o.name: o for o in OPS}

CAN_FAIL = frozenset(o.name for o in OPS if o.can_fail)
IN_PLACE_FIRST = frozenset(o.name for o in OPS if o.inplace == "first")
IN_PLACE_ANY = frozenset(o.name for o in OPS if o.inplace == "any")
QUANT_OPS = frozenset(("matmul_q8", "matmul_q4", "embedding_q8", "embedding_q4"))
