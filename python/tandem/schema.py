"""The one declaration of what the exporter, the runtime and the docs must agree on.

Dtype codes, the packed-weight panel width, the file's section ids and record layouts, and every
runtime operator with the two facts the planner and the verifier share (can it fail on runtime
values, which input may its output overwrite). Plain data, no torch, so scripts can read it.

Everything else follows from this file:
- C: `scripts/gen_schema.py` writes `src/schema.h` (committed; the build needs no Python). The op
  tables in `src/kernels/*.c` take their flags from it (`TDM_OP`), `tests/c/test_schema.c` checks
  that the runtime has exactly these ops, and `src/util.c` asserts `include/tandem.h`'s dtypes.
- Python: `ir.py` (dtypes), `plan.py` (can fail, in place), `layout.py` (panel), `format.py` (records).
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


DTYPES = [
    Dtype(1, "float32", 4, "F32"),
    Dtype(2, "int64", 8, "I64"),
    Dtype(3, "bool", 1, "BOOL"),
    # One int8 per element (no torch name clash: torch.int8).
    Dtype(4, "int8", 1, "I8", const_only=True),
    # One element = one byte holding two 4-bit codes (q + 8), in blocks of 8 k (docs/ops.md, layout.py);
    # dims count bytes, so element count x 1 = size in bytes, as for every other dtype.
    Dtype(5, "int4x2", 1, "I4X2", const_only=True),
    Dtype(6, "int32", 4, "I32"),
    # The top 16 bits of a float32 (rounded to nearest even by the exporter): the weights of conv_bf16 /
    # conv_transpose_bf16 only (quantize_convs="bf16"; no torch.bfloat16 tensor is ever a program's input).
    Dtype(7, "bfloat16", 2, "BF16", const_only=True),
    # A signed 16-bit integer: the weights of conv_i16 / conv_transpose_i16 only (quantize_convs="int16",
    # codes within ±4095 with a float32 scale per row).
    Dtype(8, "int16", 2, "I16", const_only=True),
]
CONST_ONLY_DTYPES = frozenset(d.code for d in DTYPES if d.const_only)

MAX_RANK = 8  # dims of a tensor (include/tandem.h TDM_MAX_RANK, which src/schema.h checks at compile time)
PANEL = 8  # columns per panel of a packed weight (matmul_packed, embedding_packed): [ceil(N/8), K, 8]
QUANT_GROUP = 32  # default int4 group size along K (matmul_q4, embedding_q4)


# ---- the file ------------------------------------------------------------------------------------

MAGIC = b"TNDM"
VERSION = 4  # also reads 1 (no metadata section), 2 (no dims or symbolic sizes), 3 (refusing its int4 weights)
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
# A value's u8 region (VALUE.region): code -> (C enumerator TDM_REGION_<c>, docs/format.md's word).
REGIONS = {0: ("SCRATCH", "scratch"), 1: ("CONST", "constant"), 2: ("STATE", "state")}
REGION_CODE = {c: code for code, (c, _) in REGIONS.items()}  # "SCRATCH" -> 0
# A state's u8 init kind (STATE.init): code -> (C enumerator TDM_INIT_<c>, docs/format.md's words).
STATE_INITS = {0: ("ZEROS", "all zeros"), 1: ("DATA", "bytes in the data section")}
STATE_INIT_CODE = {c: code for code, (c, _) in STATE_INITS.items()}  # "ZEROS" -> 0
MAX_DIMS = 8  # dynamic dims per method
MAX_COND_DEPTH = 16  # cond ops nested inside one another's branches
MAX_SYM_COEF = 1 << 32  # |coefficient| and |constant| of a symbolic size; dims are below 2^31

# The header of saved state (the JS saveState() / loadState(), docs/format.md "Saved state"), then
# nbytes bytes of the state region. web/model.js reads it from the generated web/schema.js.
SAVED_STATE_MAGIC = b"TDMS"
SAVED_STATE_FORMAT = 2  # format 1 (24 bytes, no program id) is not read
SAVED_STATE = Record("magic:4s", "format:I", "fingerprint:Q", "program_id:Q", "nbytes:Q")

RECORDS = {
    "header": HEADER,
    "section": SECTION,
    "strings_head": STRINGS_HEAD,
    "string": STRING,
    "constants_head": CONSTANTS_HEAD,
    "constant": CONSTANT,
    "states_head": STATES_HEAD,
    "state": STATE,
    "methods_head": METHODS_HEAD,
    "method": METHOD,
    "value": VALUE,
    "io": IO,
    "op_header": OP_HEADER,
    "metadata_head": METADATA_HEAD,
    "metadata_entry": METADATA_ENTRY,
    "dim": DIM,
    "syms_head": SYMS_HEAD,
    "sym": SYM,
    "term": TERM,
}


# ---- runtime operators ---------------------------------------------------------------------------

# conv's optional last integer attribute: the activation applied to each block of its output
# (python/tandem/fuse.py fuses it, src/kernels/conv.c applies it, docs/ops.md's conv row): codes 0, 1, ...
CONV_ACTIVATIONS = ("none", "relu", "hardswish", "elu")

INPLACE_KINDS = ("none", "first", "any")  # codes 0, 1, 2 (TDM_INPLACE_NONE, _FIRST, _ANY)


class OpDef(NamedTuple):
    name: str
    can_fail: bool = False  # may reject runtime values (an index); validates before writing anything
    inplace: str = "none"  # 'none'; 'first': the output may be input 0; 'any': any input of its dtype and size


def _elementwise(*names):
    return [OpDef(n, inplace="any") for n in names]  # element i of the output needs only element i of it


OPS = [
    *_elementwise(
        "add",
        "sub",
        "mul",
        "div",
        "maximum",
        "minimum",
        "pow",
        "remainder",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "floor_divide",
        "trunc_divide",
    ),
    *_elementwise(
        "neg",
        "abs",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "sin",
        "cos",
        "tanh",
        "sigmoid",
        "relu",
        "gelu",
        "gelu_tanh",
        "silu",
        "erf",
        "reciprocal",
        "floor",
        "ceil",
        "logical_not",
    ),
    OpDef("where"),
    OpDef("cast"),
    OpDef("fill"),
    OpDef("copy"),
    OpDef("matmul"),
    OpDef("matmul_packed"),
    OpDef("embedding_packed"),
    OpDef("permute"),
    OpDef("slice"),
    OpDef("cat"),
    OpDef("expand"),
    OpDef("index_select"),
    OpDef("any"),
    OpDef("all"),
    OpDef("argmax"),
    OpDef("argmin"),
    OpDef("sum"),
    OpDef("mean"),
    OpDef("amax"),
    OpDef("amin"),
    OpDef("softmax"),
    OpDef("log_softmax"),
    OpDef("layer_norm"),
    OpDef("rms_norm"),
    OpDef("check_index", can_fail=True),
    OpDef("index_put", inplace="first"),
    OpDef("slice_scatter", inplace="first"),
    OpDef("attention"),
    OpDef("conv"),
    OpDef("max_pool"),
    OpDef("avg_pool"),
    OpDef("conv_transpose"),
    *_elementwise("log1p"),
    OpDef("cumsum"),
    OpDef("gather"),
    OpDef("sort"),
    OpDef("topk"),
    # Quantized weights (docs/ops.md): the only ops that may read the constant-only dtypes.
    OpDef("matmul_q8"),
    OpDef("matmul_q4"),
    OpDef("embedding_q8"),
    OpDef("embedding_q4"),
    # MobileNetV3's activations as one pass each (instead of 4-5 elementwise ops).
    *_elementwise("hardswish", "hardsigmoid"),
    # A Python branch on a tensor value, specialized at export: fails the call unless cond is true.
    OpDef("guard", can_fail=True),
    # scatter_ (moshi's ring KV cache) may update input 0 in place; isnan/isinf/isfinite give bool.
    OpDef("scatter", inplace="first"),
    OpDef("isnan"),
    OpDef("isinf"),
    OpDef("isfinite"),
    # Random sampling (docs/ops.md, "Random sampling"): read the program's `__rng__` state slot, never
    # write it (the exporter advances its counter once per call); multinomial rejects bad weights.
    OpDef("random"),
    OpDef("multinomial", can_fail=True),
    # Convolutions with int8 weights (quantize="int8" where a streaming step reads many weight bytes
    # per output: python/tandem/quantize_conv.py, src/kernels/conv_q8.c).
    OpDef("conv_q8"),
    OpDef("conv_transpose_q8"),
    # ELU (alpha 1) of a value no conv produced (SEANet's after each residual add): one pass, fused
    # from its four-op lowering by python/tandem/fuse_elu.py.
    *_elementwise("elu"),
    # Convolutions with bfloat16 weights (quantize_convs="bf16": the same convs as conv_q8, at most
    # 2 rows of activations; python/tandem/quantize_conv.py, src/kernels/conv_q8.c).
    OpDef("conv_bf16"),
    OpDef("conv_transpose_bf16"),
    # Convolutions over many positions with int16 weights and activations quantized to 13 bits per block
    # of 32 (quantize_convs="int16"; python/tandem/quantize_conv.py, src/kernels/conv_i16.c).
    OpDef("conv_i16"),
    OpDef("conv_transpose_i16"),
    # A version of a method for one value of a Python bool or int it branches on (kept as int64 state):
    # fails the call unless the state holds that value (session.c picks the version that fits).
    OpDef("when", can_fail=True),
    # The same for a run of values lo..hi of a Python int it branches on (moshi's `offset_cpu <= max_delay`).
    OpDef("when_in", can_fail=True),
    # A branch in the program (torch.cond): the next `then` ops run when pred holds, else the `else` ops
    # after them; both write the op's outputs (src/session.c runs it, src/verify.c checks both branches).
    OpDef("cond"),
    # A mixture-of-experts layer's expert GEMMs: each group of rows against its expert's packed weights
    # (src/kernels/linalg.c); only the experts that have rows are read.
    OpDef("matmul_grouped"),
    OpDef("matmul_grouped_q8"),
    OpDef("matmul_grouped_q4"),
]
OP_BY_NAME = {o.name: o for o in OPS}

CAN_FAIL = frozenset(o.name for o in OPS if o.can_fail)
IN_PLACE_FIRST = frozenset(o.name for o in OPS if o.inplace == "first")
IN_PLACE_ANY = frozenset(o.name for o in OPS if o.inplace == "any")
QUANT_OPS = frozenset(
    (
        "matmul_q8",
        "matmul_grouped_q8",
        "matmul_q4",
        "matmul_grouped_q4",
        "embedding_q8",
        "embedding_q4",
        "conv_q8",
        "conv_transpose_q8",
        "conv_bf16",
        "conv_transpose_bf16",
        "conv_i16",
        "conv_transpose_i16",
    )
)


# ---- the C ABI -----------------------------------------------------------------------------------

# Every function include/tandem.h marks TDM_API, in its order, as C prototypes without parameter
# names. tests/python/test_schema.py checks tandem.h, CMakeLists.txt's wasm exports (TDM_EXPORTS),
# the exports of the built libtandem.so (tests/c/check_exports.sh, against tandem.h) and of
# web/tandem.wasm against it; python/tandem/runtime.py (ctypes) and wasm.py take their signatures
# and result kinds from it, and web/runtime.js from the generated web/schema.js.
_API = [
    "const char* tdm_status_string(tdm_status)",
    "const char* tdm_last_error()",
    "size_t tdm_dtype_size(int)",
    "const char* tdm_dtype_name(int)",
    "void* tdm_malloc(size_t)",
    "void tdm_free(void*)",
    "void tdm_set_max_declared_bytes(uint64_t)",
    "tdm_status tdm_program_load(const void*, size_t, tdm_program**)",
    "tdm_status tdm_program_load_owned(void*, size_t, tdm_program**)",
    "void tdm_program_free(tdm_program*)",
    "uint32_t tdm_program_method_count(const tdm_program*)",
    "const char* tdm_program_method_name(const tdm_program*, uint32_t)",
    "int32_t tdm_program_find_method(const tdm_program*, const char*)",
    "uint32_t tdm_method_io_count(const tdm_program*, uint32_t, int)",
    "const char* tdm_method_io_name(const tdm_program*, uint32_t, int, uint32_t)",
    "int tdm_method_io_dtype(const tdm_program*, uint32_t, int, uint32_t)",
    "int tdm_method_io_rank(const tdm_program*, uint32_t, int, uint32_t)",
    "int64_t tdm_method_io_dim(const tdm_program*, uint32_t, int, uint32_t, int)",
    "size_t tdm_method_io_nbytes(const tdm_program*, uint32_t, int, uint32_t)",
    "uint32_t tdm_program_state_count(const tdm_program*)",
    "const char* tdm_state_name(const tdm_program*, uint32_t)",
    "int tdm_state_dtype(const tdm_program*, uint32_t)",
    "int tdm_state_rank(const tdm_program*, uint32_t)",
    "int64_t tdm_state_dim(const tdm_program*, uint32_t, int)",
    "size_t tdm_state_offset(const tdm_program*, uint32_t)",
    "size_t tdm_state_nbytes(const tdm_program*, uint32_t)",
    "size_t tdm_program_state_size(const tdm_program*)",
    "size_t tdm_program_scratch_size(const tdm_program*)",
    "uint64_t tdm_program_fingerprint(const tdm_program*)",
    "uint64_t tdm_program_id(const tdm_program*)",
    "uint32_t tdm_program_metadata_count(const tdm_program*)",
    "const char* tdm_program_metadata_name(const tdm_program*, uint32_t)",
    "const char* tdm_program_metadata_value(const tdm_program*, uint32_t)",
    "tdm_status tdm_session_create(const tdm_program*, tdm_session**)",
    "void tdm_session_free(tdm_session*)",
    "void tdm_session_reset_state(tdm_session*)",
    "void* tdm_session_state(tdm_session*)",
    "void* tdm_session_input(tdm_session*, uint32_t, uint32_t)",
    "tdm_status tdm_session_run(tdm_session*, uint32_t)",
    "const void* tdm_session_output(tdm_session*, uint32_t, uint32_t)",
    "uint32_t tdm_method_dim_count(const tdm_program*, uint32_t)",
    "const char* tdm_method_dim_name(const tdm_program*, uint32_t, uint32_t)",
    "int64_t tdm_method_dim_min(const tdm_program*, uint32_t, uint32_t)",
    "int64_t tdm_method_dim_max(const tdm_program*, uint32_t, uint32_t)",
    "size_t tdm_method_io_dim_expr(const tdm_program*, uint32_t, int, uint32_t, int, char*, size_t)",
    "tdm_status tdm_session_set_input_shape(tdm_session*, uint32_t, uint32_t, const int64_t*, int)",
    "int64_t tdm_session_io_dim(const tdm_session*, uint32_t, int, uint32_t, int)",
    "size_t tdm_session_io_nbytes(const tdm_session*, uint32_t, int, uint32_t)",
    "uint32_t tdm_method_op_count(const tdm_program*, uint32_t)",
    "const char* tdm_method_op_name(const tdm_program*, uint32_t, uint32_t)",
    "tdm_status tdm_session_run_profiled(tdm_session*, uint32_t, double*)",
    "size_t tdm_method_op_bytes_written(const tdm_program*, uint32_t, uint32_t)",
    "size_t tdm_method_op_state_bytes_written(const tdm_program*, uint32_t, uint32_t)",
    "const void* tdm_program_data(const tdm_program*)",
    "size_t tdm_program_data_size(const tdm_program*)",
    "uint32_t tdm_method_value_count(const tdm_program*, uint32_t)",
    "uint32_t tdm_method_io_value(const tdm_program*, uint32_t, int, uint32_t)",
    "tdm_status tdm_session_bind(tdm_session*, uint32_t)",
    "tdm_status tdm_session_value_info(const tdm_session*, uint32_t, uint32_t, int64_t*)",
    "uint32_t tdm_method_op_operand_count(const tdm_program*, uint32_t, uint32_t, int)",
    "uint32_t tdm_method_op_operand(const tdm_program*, uint32_t, uint32_t, int, uint32_t)",
    "uint32_t tdm_method_op_attr_count(const tdm_program*, uint32_t, uint32_t, int)",
    "int64_t tdm_session_op_iattr(const tdm_session*, uint32_t, uint32_t, uint32_t)",
    "double tdm_method_op_fattr(const tdm_program*, uint32_t, uint32_t, uint32_t)",
    "tdm_status tdm_threads_start(int32_t, int32_t)",
    "void tdm_thread_worker(int32_t, void*)",
    "void tdm_threads_stop()",
    "int32_t tdm_threads_count()",
    "int32_t tdm_build_features()",
]


class Fn(NamedTuple):
    ret: str  # a C type, spaced as "const char*"
    name: str
    params: tuple  # C types


def _parse_fn(decl: str) -> Fn:
    ret_name, params = decl[:-1].split("(")
    ret, name = ret_name.rsplit(" ", 1)
    return Fn(ret, name, tuple(p.strip() for p in params.split(",")) if params else ())


API = [_parse_fn(d) for d in _API]
API_BY_NAME = {f.name: f for f in API}
# What tandem.wasm imports from its host (web/loader.js, python/tandem/wasm.py), besides Emscripten's.
HOST_IMPORTS = ("tdm_now_ms",)


def result_kind(c_type: str) -> str:
    """How a binding reads a C result: 'void', 'str' (a C string), 'ptr', 'size' (size_t: unsigned,
    32-bit in wasm), 'u32', 'i32', 'i64', 'u64' (an i64 in wasm, unsigned in C) or 'f64'."""
    kinds = {
        "void": "void",
        "const char*": "str",
        "size_t": "size",
        "uint32_t": "u32",
        "int": "i32",
        "int32_t": "i32",
        "tdm_status": "i32",
        "int64_t": "i64",
        "uint64_t": "u64",
        "double": "f64",
    }
    if c_type in kinds:
        return kinds[c_type]
    assert c_type.endswith("*"), c_type
    return "ptr"


# ---- operator signatures -------------------------------------------------------------------------


class OpSig(NamedTuple):
    """What an op takes: input and output counts (lo, hi; hi None: any number), its integer and
    float attributes by name ("name?" optional and last; None: a list whose length varies, e.g. the
    dims of a reduction) and the dtypes of its input 0, or of its result when it has no input
    ("any", or a set of DTYPES names). docs/ops.md's table states the same (test_schema.py)."""

    ins: tuple
    outs: tuple
    iattr: object  # tuple of names, or None
    fattr: tuple
    dtypes: object  # "any" or frozenset of dtype names


_F, _INT = ("float32",), ("float32", "int64", "int32")


def _sig(names: str, ins, outs=1, iattr=(), fattr=(), dtypes="any") -> dict:
    rng = lambda n: n if isinstance(n, tuple) else (n, n)  # noqa: E731
    d = dtypes if dtypes == "any" else frozenset(dtypes)
    return {n: OpSig(rng(ins), rng(outs), iattr, fattr, d) for n in names.split()}


SIGS = {
    **_sig("add sub mul maximum minimum remainder pow", 2, dtypes=_INT),
    **_sig("div", 2, dtypes=_F),
    **_sig("floor_divide trunc_divide", 2, dtypes=("int64", "int32")),
    **_sig("eq ne lt le gt ge logical_and logical_or", 2),
    **_sig("neg abs relu floor ceil", 1, dtypes=_INT),
    **_sig("exp log sqrt rsqrt sin cos tanh sigmoid gelu gelu_tanh silu erf reciprocal log1p hardswish hardsigmoid", 1, dtypes=_F),
    **_sig("logical_not cast copy expand", 1),
    **_sig("where", 3),
    **_sig("fill", 0, iattr=("value?",), fattr=("value?",)),
    **_sig("matmul", 2, dtypes=_F),
    **_sig("matmul_packed", 2, iattr=("N",), dtypes=_F),
    **_sig("embedding_packed", 2, iattr=("N",), dtypes=_F),
    **_sig("matmul_grouped", 3, iattr=("N",), dtypes=_F),
    **_sig("matmul_grouped_q8", 4, iattr=("N", "layout?"), dtypes=_F),
    **_sig("matmul_grouped_q4", 4, iattr=("N", "G"), dtypes=_F),
    **_sig("permute", 1, iattr=None),
    **_sig("slice", 1, iattr=("dim", "start", "step")),
    **_sig("cat", (1, None), iattr=("dim",)),
    **_sig("index_select gather", 2, iattr=("dim",)),
    **_sig("index_put", 3, iattr=("dim", "accumulate")),
    **_sig("slice_scatter", 2, iattr=("dim", "start", "step")),
    **_sig("scatter", 3, iattr=("dim",)),
    **_sig("check_index", 1, 0, iattr=("n",), dtypes=("int64", "int32")),
    **_sig("guard", 1, 0, iattr=("line",), dtypes=("bool",)),
    **_sig("when", 1, 0, iattr=("value", "line"), dtypes=("int64",)),
    **_sig("when_in", 1, 0, iattr=("lo", "hi", "line"), dtypes=("int64",)),
    **_sig("cond", 1, (0, None), iattr=("then ops", "else ops"), dtypes=("bool",)),
    **_sig("isnan isinf isfinite", 1, dtypes=_F),
    **_sig("sum amax amin", 1, iattr=None, dtypes=("float32", "int64")),
    **_sig("mean", 1, iattr=None, dtypes=_F),
    **_sig("any all", 1, iattr=None, dtypes=("bool",)),
    **_sig("argmax argmin", 1, iattr=("dim",), dtypes=("float32", "int64")),
    **_sig("cumsum", 1, iattr=("dim",), dtypes=_INT),
    **_sig("sort", 1, 2, iattr=("dim", "descending"), dtypes=_INT),
    **_sig("topk", 1, 2, iattr=("dim", "k", "largest"), dtypes=_INT),
    **_sig("softmax log_softmax", 1, iattr=("dim",), dtypes=_F),
    **_sig("layer_norm", (1, 3), iattr=("normalized ndim", "has w", "has b", "axis?"), fattr=("eps",), dtypes=_F),
    **_sig("rms_norm", (1, 2), iattr=("has w",), fattr=("eps",), dtypes=_F),
    # iattr [has_mask, is_causal] or those and a perm of the rank for each of q, k, v (docs/ops.md):
    # counted by attention_check in src/kernels/attention.c
    **_sig("attention", (3, 4), 2, iattr=None, fattr=("scale",), dtypes=_F),
    # layout 1: the int8 weights in the paired layout (docs/ops.md, Quantized weights); absent: plain panels
    **_sig("matmul_q8", 3, iattr=("N", "layout?"), dtypes=_F),
    **_sig("matmul_q4", 3, iattr=("N", "G"), dtypes=_F),
    **_sig("embedding_q8", 3, iattr=("N", "layout?"), dtypes=("int8",)),
    **_sig("embedding_q4", 3, iattr=("N", "G"), dtypes=("int4x2",)),
    # Attribute lists whose length depends on the spatial rank r (docs/ops.md names them): counted
    # by their *_check in src/kernels/conv.c, conv_transpose.c and pool.c, not here.
    **_sig("conv", (2, 3), (1, 2), iattr=None, dtypes=_F),
    **_sig("conv_transpose", (2, 3), 2, iattr=None, dtypes=_F),
    **_sig("conv_q8 conv_transpose_q8 conv_i16 conv_transpose_i16", (3, 4), 2, iattr=None, dtypes=_F),
    **_sig("conv_bf16 conv_transpose_bf16", (2, 3), 2, iattr=None, dtypes=_F),
    **_sig("elu", 1, dtypes=_F),
    **_sig("max_pool avg_pool", 1, iattr=None, dtypes=_F),
    # input 0 is the rng state (int64 [2]: seed, calls); docs/ops.md, Random sampling
    **_sig("random", 1, iattr=("kind", "stream", "lo", "hi"), fattr=("a", "b"), dtypes=("int64",)),
    **_sig("multinomial", 2, iattr=("stream", "replacement"), dtypes=("int64",)),
}


# Ops without a signature yet (the test requires every op to be in SIGS or here).
def _count_ok(n: int, lohi: tuple) -> bool:
    return lohi[0] <= n and (lohi[1] is None or n <= lohi[1])


def _attr_range(names) -> tuple:
    return (0, None) if names is None else (sum(not a.endswith("?") for a in names), len(names))


def check_op(name: str, in_dtypes, out_dtypes, n_iattr: int, n_fattr: int):
    """None when an op with these operands (dtype codes) and attribute counts fits its signature,
    else what does not."""
    sig = SIGS.get(name)
    if sig is None:
        return f"op '{name}' has no signature in schema.SIGS"
    problems = []
    for what, n, rng in (
        ("inputs", len(in_dtypes), sig.ins),
        ("outputs", len(out_dtypes), sig.outs),
        ("integer attributes", n_iattr, _attr_range(sig.iattr)),
        ("float attributes", n_fattr, _attr_range(sig.fattr)),
    ):
        if not _count_ok(n, rng):
            problems.append(f"{n} {what}, the schema says {rng[0]}..{'' if rng[1] is None else rng[1]}")
    first = in_dtypes[0] if in_dtypes else (out_dtypes[0] if out_dtypes else None)
    names = {d.code: d.name for d in DTYPES}
    if sig.dtypes != "any" and first is not None and names.get(first) not in sig.dtypes:
        problems.append(f"dtype {names.get(first, first)}, the schema allows {sorted(sig.dtypes)}")
    return f"op '{name}': " + "; ".join(problems) if problems else None
