"""The only writer of .tandem files. docs/format.md is the byte layout; src/reader.c reads it.
Section ids, records and alignment are declared in schema.py, which both sides follow."""

from __future__ import annotations

import hashlib
import json
import os
import struct

from .ir import CONST, DTYPE_CODE, SCRATCH, ExportError, MethodIR, Op, StateSpec, SymDim, flat_ops
from .schema import (
    ALIGN,
    CONSTANT,
    CONSTANTS_HEAD,
    DIM,
    HEADER,
    IO,
    MAGIC,
    MAX_DIMS,
    MAX_SYM_COEF,
    METADATA_ENTRY,
    METADATA_HEAD,
    METHOD,
    METHODS_HEAD,
    OP_HEADER,
    SECTION,
    SECTION_ALIGN,
    SECTIONS,
    STATE,
    STATE_INIT_CODE,
    STATES_HEAD,
    STRING,
    STRINGS_HEAD,
    SYM,
    SYM_KINDS,
    SYMS_HEAD,
    TERM,
    VALUE,
    VERSION,
    check_op,
)

# TANDEM_CHECK_OPS=1 (set by the tests) checks each op written against schema.SIGS.
CHECK_OPS = os.environ.get("TANDEM_CHECK_OPS") == "1"


def _pad(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


class _Strings:
    def __init__(self):
        self.index: dict[str, int] = {}

    def __call__(self, s: str) -> int:
        if s not in self.index:
            self.index[s] = len(self.index)
        return self.index[s]

    def section(self) -> bytes:
        out = [STRINGS_HEAD.pack(len(self.index))]
        for s in self.index:
            b = s.encode("utf-8")
            out.append(STRING.pack(len(b)) + b + b"\0")
        return b"".join(out)


def _dims(shape) -> bytes:
    return struct.pack(f"<{len(shape)}q", *(int(d) for d in shape))


def _affine(m: MethodIR, expr, what: str) -> tuple:
    """(constant, [(dim index, coefficient)]) of a size's sympy expression, or an ExportError naming it."""
    import sympy

    index = {sym: i for i, (_, _, _, sym) in enumerate(m.dims)}
    const, terms = 0, []
    e = sympy.expand(expr)
    for term, coef in e.as_coefficients_dict().items():
        if not coef.is_Integer or (term != 1 and term not in index) or abs(int(coef)) > MAX_SYM_COEF:
            names = {sym: n for n, _, _, sym in m.dims}
            raise ExportError(
                f"method '{m.name}': {what} has the size {expr.subs(names) if names else expr}, which is not an integer "
                "affine form of the dynamic dims (such as n, n + 1, 2*n - 1, n + m); tandem stores sizes in "
                "that form: compute it differently, or give that dim a static size"
            )
        if term == 1:
            const = int(coef)
        else:
            terms.append((index[term], int(coef)))
    return const, sorted(terms)


def _syms(m: MethodIR, values: list, vindex: dict, offset_of) -> list:
    """The method's symbolic sizes as SYM records: (kind, index, target, constant, terms)."""
    out = []

    def add(kind, index, target, x, what):
        if isinstance(x, SymDim):
            const, terms = _affine(m, x.expr, what)
            if terms:
                out.append((SYM_KINDS.index(kind), index, target, const, terms))

    for k, v in enumerate(values):
        for d, size in enumerate(v.shape):
            add("dim", d, k, size, f"dim {d} of a value")
        add("offset", 0, k, offset_of(v), "the offset of a view")
    for k, op in enumerate(file_ops(m)):
        for j, a in enumerate(op.iattr):
            add("iattr", j, k, a, f"attribute {j} of op '{op.name}'{op.where}")
    return out


def file_ops(m: MethodIR) -> list:
    """The method's ops as the file lists them: each cond (reading its pred, with the lengths of its
    branches) followed by its then ops and its else ops (docs/format.md, Op)."""
    out = []
    for op in flat_ops(m.ops):
        if op.bodies is None:
            out.append(op)
            continue
        n = [sum(1 for _ in flat_ops(body)) for body in op.bodies]
        out.append(Op(op.name, op.ins[:1], op.outs, n, [], op.where))
    return out


def _json_text(value) -> str:
    """A metadata value as compact JSON text, non-ASCII characters as themselves (UTF-8: a byte-level
    BPE vocabulary's 'Ġ' takes 2 bytes, not the 6 of '\\u0120'); escaped only when a string holds
    a lone surrogate, which UTF-8 cannot encode. Control characters (and so NUL) are always escaped."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    return text


def _bytes_of(t) -> memoryview:
    """Tensor t's bytes in C order: a view of its storage where it is contiguous, else of a copy."""
    return memoryview(t.contiguous().reshape(-1).numpy().view("u1"))


class _Data:
    """The data section as pieces: each blob's bytes (a view of its tensor, not copied) at its 64-byte
    aligned offset, zeros between them; `size` the section's length."""

    def __init__(self):
        self.pieces: list = []  # (offset, buffer of bytes)
        self.size = 0

    def put(self, view: memoryview) -> int:
        """Places these bytes (kept as the view, not copied) and returns their offset in the section."""
        off = _pad(self.size)
        self.pieces.append((off, view))
        self.size = off + len(view)
        return off

    def write(self, out) -> None:
        at = 0
        for off, view in self.pieces:
            out.write(bytes(off - at))
            out.write(view)
            at = off + len(view)


class FileLayout:
    """A program's file, laid out: every section but the data as bytes, the data section as the views
    of the tensors it holds. `write(out)` streams it to a binary file; `to_bytes()` gives it whole."""

    def __init__(self, sections: dict, data: _Data):
        out = HEADER.size + len(SECTIONS) * SECTION.size
        self._parts = []  # (offset, section bytes or the _Data)
        table = []
        for sid, name in SECTIONS.items():  # in id order; the data section 64-byte aligned
            part = data if name == "data" else sections[name]
            size = data.size if name == "data" else len(part)
            off = _pad(out, ALIGN if name == "data" else SECTION_ALIGN)
            self._parts.append((off, part))
            table.append((sid, off, size))
            out = off + size
        self.size = out
        self._head = HEADER.pack(MAGIC, VERSION, out, len(SECTIONS), 0, 0) + b"".join(
            SECTION.pack(sid, 0, off, size) for sid, off, size in table
        )

    def write(self, out) -> None:
        """Writes the file to `out` (a binary file object, borrowed), section by section."""
        out.write(self._head)
        at = len(self._head)
        for off, part in self._parts:
            out.write(bytes(off - at))
            if isinstance(part, _Data):
                part.write(out)
                at = off + part.size
            else:
                out.write(part)
                at = off + len(part)

    def write_into(self, buf: memoryview) -> None:
        """Copies each part to its offset in `buf` (self.size bytes, zeroed, borrowed): not through
        `write`, so the two ways of writing check each other (tests/python/test_file_writer.py)."""
        buf[: len(self._head)] = self._head
        for off, part in self._parts:
            if isinstance(part, _Data):
                for at, view in part.pieces:
                    buf[off + at : off + at + len(view)] = view
            else:
                buf[off : off + len(part)] = part

    def to_bytes(self) -> bytes:
        """The file whole, as bytes."""
        buf = bytearray(self.size)
        self.write_into(memoryview(buf))
        return bytes(buf)


def write_program(states: list[StateSpec], methods: list[MethodIR], metadata: dict | None = None, out=None) -> bytes | None:
    """The .tandem file of these states and methods: its bytes, or with `out` (a binary file object,
    borrowed) written to it section by section, the constants from their tensors, and None."""
    layout = lay_out_program(states, methods, metadata)
    if out is None:
        return layout.to_bytes()
    layout.write(out)
    return None


def lay_out_program(states: list[StateSpec], methods: list[MethodIR], metadata: dict | None = None) -> FileLayout:
    """Everything write_program checks and encodes, before a byte is written: a FileLayout."""
    strings = _Strings()
    data = _Data()

    # Constants: one entry per distinct content, however many methods or values use it.
    consts: list[tuple] = []  # (name, dtype, shape, offset, nbytes)
    by_content: dict = {}
    const_index: dict = {}  # Storage -> index

    def const_of(storage) -> int:
        if storage in const_index:
            return const_index[storage]
        t = storage.tensor
        dtype = storage.dtype or DTYPE_CODE[t.dtype]
        raw = _bytes_of(t)
        key = (dtype, tuple(t.shape), hashlib.sha256(raw).digest())
        if key not in by_content:
            by_content[key] = len(consts)
            consts.append((f"c{len(consts)}", dtype, t, data.put(raw), len(raw)))
        const_index[storage] = by_content[key]
        return const_index[storage]

    # State region: each slot 64-byte aligned, in order.
    state_size = 0
    state_index = {}
    for i, st in enumerate(states):
        st.offset = _pad(state_size)
        state_size = st.offset + st.nbytes
        state_index[st] = i

    meth = [METHODS_HEAD.pack(len(methods))]
    for m in methods:
        values: list = []
        vindex: dict = {}

        def val(v) -> int:
            if id(v) not in vindex:
                vindex[id(v)] = len(values)
                values.append(v)
            return vindex[id(v)]

        listed = file_ops(m)
        for _, v in m.inputs:
            val(v)
        for op in listed:
            for v in op.ins + op.outs:
                val(v)
        for _, v in m.outputs:
            val(v)
        if len(m.dims) > MAX_DIMS:
            raise ExportError(f"method '{m.name}' has {len(m.dims)} dynamic dims; tandem takes at most {MAX_DIMS}")
        body = []
        for v in values:
            s = v.storage
            if s.kind == SCRATCH:
                ref, off = 0, s.offset + v.offset
            elif s.kind == CONST:
                ref, off = const_of(s), v.offset
            else:
                ref, off = state_index[s.state], v.offset
            body.append(VALUE.pack(v.dtype, len(v.shape), s.kind, 0, ref, int(off)) + _dims(v.shape))
        io = b"".join(IO.pack(vindex[id(v)], strings(n)) for n, v in m.inputs)
        io += b"".join(IO.pack(vindex[id(v)], strings(n)) for n, v in m.outputs)
        ops = []
        for op in listed:
            if CHECK_OPS:  # tests (conftest.py): every op against its signature in the schema
                problem = check_op(op.name, [v.dtype for v in op.ins], [v.dtype for v in op.outs], len(op.iattr), len(op.fattr))
                if problem:
                    raise ExportError(
                        f"method '{m.name}': {problem} (the exporter and python/tandem/schema.py's SIGS "
                        f"disagree: a bug in tandem){op.where or ''}"
                    )
            ops.append(
                OP_HEADER.pack(strings(op.name), len(op.ins), len(op.outs), len(op.iattr), len(op.fattr))
                + b"".join(struct.pack("<I", vindex[id(v)]) for v in op.ins + op.outs)
                + b"".join(struct.pack("<q", int(a)) for a in op.iattr)
                + b"".join(struct.pack("<d", a) for a in op.fattr)
            )
        # the reserved field: 0 for a dim an input gives, else 1 + the index of the state it is bound from
        dims = b"".join(
            DIM.pack(strings(n), state_index[m.dim_states[sym]] + 1 if sym in m.dim_states else 0, lo, hi) for n, lo, hi, sym in m.dims
        )
        syms = _syms(m, values, vindex, lambda v: v.storage.offset + v.offset if v.storage.kind == SCRATCH else v.offset)
        sym = [SYMS_HEAD.pack(len(syms))]
        for kind, index, target, const, terms in syms:
            sym.append(SYM.pack(kind, 0, index, target, len(terms), 0, const) + b"".join(TERM.pack(d, 0, c) for d, c in terms))
        meth.append(
            METHOD.pack(strings(m.name), len(values), len(m.inputs), len(m.outputs), len(listed), len(m.dims), m.scratch_size)
            + b"".join(body)
            + io
            + b"".join(ops)
            + dims
            + b"".join(sym)
        )

    state_sec = [STATES_HEAD.pack(state_size, len(states))]
    for st in states:
        zero = not bool(st.init.any())
        init_off = 0 if zero else data.put(_bytes_of(st.init))
        state_sec.append(
            STATE.pack(
                strings(st.name), st.dtype, len(st.shape), STATE_INIT_CODE["ZEROS" if zero else "DATA"], 0, st.offset, st.nbytes, init_off
            )
            + _dims(st.shape)
        )

    const_sec = [CONSTANTS_HEAD.pack(len(consts))]
    for name, dtype, t, off, nbytes in consts:
        const_sec.append(CONSTANT.pack(strings(name), dtype, t.dim(), 0, off, nbytes) + _dims(t.shape))

    meta = [METADATA_HEAD.pack(len(metadata or {}))]
    for key, value in (metadata or {}).items():
        meta.append(METADATA_ENTRY.pack(strings(key), strings(_json_text(value))))

    sections = {
        "metadata": b"".join(meta),
        "strings": strings.section(),
        "constants": b"".join(const_sec),
        "states": b"".join(state_sec),
        "methods": b"".join(meth),
    }
    assert set(sections) | {"data"} == set(SECTIONS.values())
    return FileLayout(sections, data)
