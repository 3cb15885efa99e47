"""python/tandem/schema.py is the one declaration; these fail when something that should follow it
does not: the committed src/schema.h, include/tandem.h's dtypes, docs/ops.md's operator table and
docs/format.md's layout. (The C op tables are checked against src/schema.h by tests/c/test_schema.c;
plan.py, ir.py, lowering/layout.py and format.py import the schema.)"""
import importlib.util
import re
import struct
from pathlib import Path

import pytest

from tandem import schema as S

ROOT = Path(__file__).resolve().parents[2]
TYPE = {"B": "u8", "H": "u16", "I": "u32", "Q": "u64", "q": "i64", "d": "f64"}


def _gen():
    spec = importlib.util.spec_from_file_location("gen_schema", ROOT / "scripts" / "gen_schema.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_header_is_generated_from_the_schema():
    assert (ROOT / "src" / "schema.h").read_text() == _gen().render(S), \
        "src/schema.h is stale: run python3 scripts/gen_schema.py and commit it"


def test_public_dtype_enum_matches_the_schema():
    h = (ROOT / "include" / "tandem.h").read_text()
    body = re.search(r"typedef enum tdm_dtype \{([^}]*)\}", h).group(1)
    declared = {name: int(code) for name, code in re.findall(r"TDM_(\w+)\s*=\s*(\d+)", body)}
    assert declared == {d.c: d.code for d in S.DTYPES}
    assert int(re.search(r"#define TDM_FORMAT_VERSION (\d+)u", h).group(1)) == S.VERSION


def test_schema_is_consistent():
    assert len({o.name for o in S.OPS}) == len(S.OPS)
    assert all(o.inplace in S.INPLACE_KINDS for o in S.OPS)
    assert list(S.SECTIONS) == list(range(1, len(S.SECTIONS) + 1))  # the reader indexes sections by id
    assert len({d.code for d in S.DTYPES}) == len(S.DTYPES) and all(d.code > 0 for d in S.DTYPES)


# ---- docs/ops.md ---------------------------------------------------------------------------------

def _table_rows(text: str, heading: str) -> list:
    """The body rows of the first table under `heading`, as lists of cells."""
    part = text.split(heading, 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in part.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in rows[2:]]  # skip header + rule


def _names(cell: str) -> list:
    return re.findall(r"`(\w+)`", cell)


OPS_MD = (ROOT / "docs" / "ops.md").read_text()


def test_ops_doc_lists_exactly_the_schema_ops():
    rows = _table_rows(OPS_MD, "## Runtime operators")
    listed = [n for r in rows for n in _names(r[0])]
    assert sorted(listed) == sorted(set(listed)), "an op has two rows"
    assert set(listed) - set(S.OP_BY_NAME) == set(), "docs/ops.md lists ops the schema does not declare"
    assert set(S.OP_BY_NAME) - set(listed) == set(), "docs/ops.md misses ops the schema declares"
    can_fail = {n for r in rows if "**can fail**" in "|".join(r) for n in _names(r[0])}
    in_place = {n for r in rows if "**in place**" in "|".join(r) for n in _names(r[0])}
    assert can_fail == S.CAN_FAIL
    assert in_place == S.IN_PLACE_FIRST


def test_ops_doc_simd_table_and_panel_width():
    simd = {n for r in _table_rows(OPS_MD, "## SIMD128 kernels") for n in _names(r[0])}
    assert simd and simd <= set(S.OP_BY_NAME), simd - set(S.OP_BY_NAME)
    widths = re.findall(r"ceil\(N/(\d+)\), K, (\d+)\]", OPS_MD) + re.findall(r"(\d+)-column panels", OPS_MD)
    assert widths and {int(w) for ws in widths for w in (ws if isinstance(ws, tuple) else (ws,))} == {S.PANEL}


# ---- docs/format.md ------------------------------------------------------------------------------

FORMAT_MD = (ROOT / "docs" / "format.md").read_text()


def _between(start: str, end: str) -> str:
    assert start in FORMAT_MD, start
    part = FORMAT_MD.split(start, 1)[1]
    assert end in part, end
    return part.split(end, 1)[0]


def _types(text: str) -> list:
    return re.findall(r"\b(u8|u16|u32|u64|i64|f64)\b", text)


def _rec(*recs) -> list:
    return [TYPE[c] for r in recs for c in r.codes if c in TYPE]


# Each record's description in docs/format.md (from, to) and the types it must list, in order.
LAYOUT = [
    (("Section table entry", "Ids:"), _rec(S.SECTION), S.SECTION),
    (("### 1 · strings", "### 2"), _rec(S.STRINGS_HEAD, S.STRING), None),
    (("### 2 · constants", "The bytes are"), _rec(S.CONSTANTS_HEAD, S.CONSTANT) + ["i64"], None),
    (("### 3 · states", "A session's state"), _rec(S.STATES_HEAD, S.STATE) + ["i64"], None),
    (("### 4 · methods", "**Value**"), _rec(S.METHODS_HEAD, S.METHOD), None),
    (("**Value**", "**Input / output**"), _rec(S.VALUE) + ["i64"], S.VALUE),
    (("**Input / output**", "**Op**"), _rec(S.IO), S.IO),
    (("**Op**", "Ops run in file order"), _rec(S.OP_HEADER) + ["u32", "u32", "i64", "f64"], None),
    (("### 6 · metadata", "Named values"), _rec(S.METADATA_HEAD, S.METADATA_ENTRY), None),
    (("**Dims**", "**Symbolic sizes**"), _rec(S.DIM), None),
    (("**Symbolic sizes**", "The size is constant"), _rec(S.SYMS_HEAD, S.SYM, S.TERM), None),
]


@pytest.mark.parametrize("where, types, rec", LAYOUT, ids=[w[0] for w, _, _ in LAYOUT])
def test_format_doc_records_match_the_schema(where, types, rec):
    text = _between(*where)
    assert _types(text) == types, f"docs/format.md {where[0]!r} lists {_types(text)}, schema.py declares {types}"
    if rec is not None:  # its stated size, "(24 bytes)" or "(16 + 8 × rank bytes)"
        assert [int(n) for n in re.findall(r"\((\d+)(?: \+ 8 × rank)? bytes\)", text)] == [rec.size]


def test_format_doc_header_sections_and_dtypes_match_the_schema():
    layout = _between("## Layout", "Section table entry")
    rows = re.findall(r"^\| (\d+) \| (\d+) \|", layout, re.M)
    h = S.HEADER
    assert [(int(o), int(n)) for o, n in rows] == [(h.offset[f], struct.calcsize("<" + c)) for f, c in zip(h.names, h.codes)]
    assert f"magic `{S.MAGIC.decode()}`" in layout and f"format version (= {S.VERSION})" in layout
    assert f"section count (= {len(S.SECTIONS)})" in layout
    assert f"| {h.size} | {len(S.SECTIONS)} × {S.SECTION.size} | section table |" in layout
    ids = re.search(r"Ids: ([^.]*)\.", FORMAT_MD).group(1)
    assert {int(i): n for i, n in re.findall(r"(\d+) (\w+)", ids)} == S.SECTIONS
    assert {int(i): n for i, n in re.findall(r"^### (\d+) · (\w+)", FORMAT_MD, re.M)} == S.SECTIONS
    assert f"at or after byte {h.size + len(S.SECTIONS) * S.SECTION.size}" in FORMAT_MD
    assert f"each {S.SECTION_ALIGN}-byte aligned, and the data section {S.ALIGN}-byte aligned" in FORMAT_MD
    assert {int(n) for n in re.findall(r"multiple of (\d+)", FORMAT_MD)} == {S.ALIGN}
    dtypes = re.search(r"u8 dtype \(([^)]*)\)", FORMAT_MD).group(1)
    assert {int(c): n for c, n in re.findall(r"(\d+) (\w+)", dtypes)} == {d.code: d.name for d in S.DTYPES}
