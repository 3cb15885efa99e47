"""python/tandem/schema.py is the one declaration; these fail when something that should follow it
does not: the committed src/schema.h, include/tandem.h's dtypes, docs/ops.md's operator table and
docs/format.md's layout. (The C op tables are checked against src/schema.h by tests/c/test_schema.c;
plan.py, ir.py, layout.py and format.py import the schema.)"""

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
    assert (ROOT / "src" / "schema.h").read_text() == _gen().render(S), (
        "src/schema.h is stale: run python3 scripts/gen_schema.py and commit it"
    )


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


# ---- the C ABI: include/tandem.h, CMakeLists.txt, runtime.py, wasm.py, web/ -----------------------


def _c_type(text: str) -> str:
    return re.sub(r"\s*\*", "*", re.sub(r"\s+", " ", text)).strip()


def test_public_header_declares_exactly_the_schema_functions():
    h = (ROOT / "include" / "tandem.h").read_text()
    declared = []
    for ret, name, params in re.findall(r"^TDM_API\s+(.+?)\b(tdm_\w+)\((.*?)\);", h, re.M | re.S):
        types = () if params.strip() == "void" else tuple(_c_type(re.sub(r"\w+$", "", p.strip())) for p in params.split(","))
        declared.append(S.Fn(_c_type(ret), name, types))
    missing = [f.name for f in S.API if f not in declared]
    extra = [f.name for f in declared if f not in S.API]
    assert not missing and not extra, f"schema.API and include/tandem.h differ: only in the schema {missing}, only in tandem.h {extra}"
    assert declared == S.API, "include/tandem.h declares the functions in another order than schema.API"
    assert len(S.API_BY_NAME) == len(S.API)


def test_wasm_build_exports_exactly_the_schema_functions():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    block = re.search(r"set\(TDM_EXPORTS(.*?)\)", cmake, re.S).group(1)
    listed = re.findall(r"_(tdm_\w+)", block)
    assert sorted(listed) == sorted(set(listed)), "CMakeLists.txt's TDM_EXPORTS lists a function twice"
    want = {f.name for f in S.API}
    assert set(listed) == want, (
        f"CMakeLists.txt TDM_EXPORTS: missing {sorted(want - set(listed))}, not in schema.API {sorted(set(listed) - want)}"
    )


def test_built_wasm_module_exports_and_imports_match_the_schema():
    wasmtime = pytest.importorskip("wasmtime")
    path = ROOT / "web" / "tandem.wasm"
    if not path.exists():
        pytest.skip("web/tandem.wasm is not built (scripts/build.sh)")
    module = wasmtime.Module.from_file(wasmtime.Engine(), str(path))
    exported = {e.name for e in module.exports if e.name.startswith("tdm_")}
    assert exported == {f.name for f in S.API}
    imported = {i.name for i in module.imports if i.name.startswith("tdm_")}
    assert imported <= set(S.HOST_IMPORTS), imported


def test_python_bindings_follow_the_schema():
    from tandem import runtime, wasm

    for f in S.API:  # every C type has a ctypes type
        runtime._ctype(f.ret), [runtime._ctype(t) for t in f.params]
    assert set(S.HOST_IMPORTS) <= set(wasm._host_functions())
    assert wasm._STRINGS and wasm._UNSIGNED and wasm._U64 == {"tdm_program_fingerprint", "tdm_program_id"}
    known = set(S.API_BY_NAME) | set(S.HOST_IMPORTS)
    for path in sorted((ROOT / "python" / "tandem").glob("*.py")):
        used = set(re.findall(r"\b(tdm_[a-z0-9_]+)\(", path.read_text()))
        assert used <= known, f"{path.name} calls functions schema.API does not declare: {sorted(used - known)}"


def test_javascript_uses_only_the_schema_functions():
    known = set(S.API_BY_NAME) | set(S.HOST_IMPORTS)
    for path in sorted((ROOT / "web").rglob("*.js")) + sorted((ROOT / "node").rglob("*.js")):
        used = set(re.findall(r"\b(tdm_[a-z0-9_]*[a-z0-9])\b(?!\*)", path.read_text()))  # not tdm_x_*
        assert used <= known, f"{path.relative_to(ROOT)} names functions schema.API does not declare: {sorted(used - known)}"
    runtime_js = (ROOT / "web" / "runtime.js").read_text()
    assert "from './schema.js'" in runtime_js and "'tdm_" not in runtime_js, "web/runtime.js takes its lists from web/schema.js"


def test_committed_js_schema_is_generated_from_the_schema():
    assert (ROOT / "web" / "schema.js").read_text() == _gen().render_js(S), (
        "web/schema.js is stale: run python3 scripts/gen_schema.py and commit it"
    )


# ---- region and state-init codes: schema.h (program.h, reader.c, tests/c/builder.h), ir.py, docs ------


def test_region_and_init_codes_follow_the_schema():
    from tandem import ir

    assert (ir.SCRATCH, ir.CONST, ir.STATE) == tuple(S.REGION_CODE[c] for c in ("SCRATCH", "CONST", "STATE"))
    region = re.search(r"`u8 region` \(([^)]*)\)", FORMAT_MD).group(1)
    assert {int(c): w for c, w in re.findall(r"(\d+) (\w+)", region)} == {code: w for code, (_, w) in S.REGIONS.items()}
    init = re.search(r"u8 init kind: ([^|]*)\|", FORMAT_MD).group(1)
    assert {int(c): w.strip() for c, w in re.findall(r"(\d+) ([^,\d]+)", init)} == {c: w for c, (_, w) in S.STATE_INITS.items()}
    # The C copies come from src/schema.h: none of them may spell the codes out again.
    for path, pattern in [
        ("src/program.h", r"TDM_REGION_\w+\s*="),
        ("tests/c/builder.h", r"TB_\w+\s*=\s*\d"),
        ("src/reader.c", r"init\s*[<>=!]=?\s*\d"),
    ]:
        assert not re.search(pattern, (ROOT / path).read_text()), f"{path} writes a region or init code as a number"


# ---- max rank, conv activation codes -------------------------------------------------------------


def test_max_rank_follows_the_schema():
    h = (ROOT / "include" / "tandem.h").read_text()
    assert int(re.search(r"#define TDM_MAX_RANK (\d+)", h).group(1)) == S.MAX_RANK  # src/schema.h also #errors
    for f in sorted((ROOT / "python" / "tandem" / "lowering").glob("*.py")):
        assert not re.search(r"maximum rank \d|len\(\w+\) > 8\b", f.read_text()), f"{f.name} spells the maximum rank as a number"


def test_conv_activation_codes_follow_the_schema():
    from tandem import fuse

    assert fuse.CONV_ACTIVATIONS == {"relu": 1, "hardswish": 2} and fuse.CONV_ELU == 3  # values pinned: in files
    assert all(S.CONV_ACTIVATIONS[c] == a for a, c in fuse.CONV_ACTIVATIONS.items())
    assert S.CONV_ACTIVATIONS[fuse.CONV_ELU] == "elu"
    conv_c = (ROOT / "src" / "kernels" / "conv.c").read_text()
    assert not re.search(r"\benum\s*\{\s*CONV_ACT", conv_c), "conv.c declares its own activation codes"
    rule = re.search(r'"activation must be ([^"]*)"', conv_c).group(1)
    assert re.findall(r"(\d+) \((\w+)\)", rule) == [(str(i), a) for i, a in enumerate(S.CONV_ACTIVATIONS)]
    conv_row = next(r for r in _table_rows(OPS_MD, "## Runtime operators") if _names(r[0]) == ["conv"])
    listed = re.search(r"activation \(optional\) ([^(]*)", conv_row[3]).group(1)
    codes = [(int(c), w.lower()) for c, w in re.findall(r"(?:^|, )(\d+) `?(\w+)", listed)]
    assert codes == list(enumerate(S.CONV_ACTIVATIONS)), f"docs/ops.md's conv row lists activations {codes}"


# ---- the saved-state header: docs/format.md, web/schema.js -> web/model.js -------------------------


def test_saved_state_header_follows_the_schema():
    part = _between("## Saved state", "## Invariants")
    rows = re.findall(r"^\| (\d+) \| (\d+|n) \| (.*?) \|$", part, re.M)
    rec = S.SAVED_STATE
    want = [(rec.offset[f], struct.calcsize("<" + c)) for f, c in zip(rec.names, rec.codes)] + [(rec.size, "n")]
    assert [(int(o), int(n) if n != "n" else n) for o, n, _ in rows] == want
    assert f"magic `{S.SAVED_STATE_MAGIC.decode()}`" in part and f"saved-state format (= {S.SAVED_STATE_FORMAT})" in part
    assert f"with a {rec.size}-byte header" in part and f"whose format is {S.SAVED_STATE_FORMAT}," in part
    model_js = (ROOT / "web" / "model.js").read_text()
    assert "SAVED_STATE" in model_js and "0x534d4454" not in model_js and not re.search(r"[gs]et(Big)?Uint(32|64)\(\d", model_js), (
        "web/model.js spells the saved-state header's layout out instead of reading web/schema.js"
    )


# ---- operator signatures: docs/ops.md, and every op of the fixture programs ----------------------


def test_every_op_has_a_signature_or_is_listed_as_not_yet():
    assert set(S.SIGS) == set(S.OP_BY_NAME)
    assert all(o in S.OP_BY_NAME for o in S.SIGS)


def _brackets(cell: str, kind: str) -> list:
    """The attribute lists after "iattr " or "fattr ": one, or one per op ("iattr [N] / [N, G]")."""
    m = re.search(rf"{kind} ((?:\[[^\]]*\](?: / )?)+)", cell)
    lists = re.findall(r"\[([^\]]*)\]", m.group(1)) if m else []
    return [tuple(a.strip(" ()") for a in re.split(r",|\(,", x) if a.strip(" ()")) for x in lists]


DOC_DTYPE = {"f32": "float32", "i64": "int64", "i32": "int32", "bool": "bool"}


def test_ops_doc_attributes_and_dtypes_match_the_signatures():
    checked = set()
    for row in _table_rows(OPS_MD, "## Runtime operators"):
        names = [n for n in _names(row[0]) if n in S.SIGS]
        if not names:
            continue
        sigs = [S.SIGS[n] for n in names]
        for kind in ("iattr", "fattr"):
            declared = [getattr(s, kind) for s in sigs]
            if any(d is None for d in declared):  # a rank-dependent list: the docs name it, the schema counts nothing
                continue
            declared = [tuple(a.rstrip("?") for a in d) for d in declared]
            docs = _brackets(row[2], kind)
            if any(declared):
                want = docs * len(names) if len(docs) == 1 else docs
                assert want == declared, f"docs/ops.md {names} {kind}: {docs}, schema.SIGS: {declared}"
            elif kind == "iattr":
                assert row[2] == "—" or not docs, f"docs/ops.md gives {names} attributes the schema does not"
        plain = re.sub(r"\s+,", ",", re.sub(r"\([^)]*\)", "", row[3]))  # without its parentheses
        # a dtypes cell that opens with a plain list ("f32, i64 and i32 (wrapping)", "i64 and i32 only; ...", "any")
        dt = r"(?:f32|i64|i32|bool|any)"
        head = re.match(rf"^({dt}(?:(?:, | and |; ){dt}\b)*)(?:\s*$|\s*[;(]|\s+only\b|\s+exact\b)", plain)
        if head:
            toks = re.findall(r"f32|i64|i32|bool|any", head.group(1))
            union = set().union(*({"any"} if s.dtypes == "any" else s.dtypes for s in sigs))
            assert ({"any"} if toks == ["any"] else {DOC_DTYPE[t] for t in toks}) == union, f"docs/ops.md {names}: {toks} vs {union}"
            checked |= set(names)
    assert len(checked) >= 40, sorted(checked)


def test_fixture_programs_ops_match_the_signatures():
    fixtures = sorted((ROOT / "build" / "fixtures").glob("*.tandem"))
    lib_path = ROOT / "build" / "native" / "libtandem.so"
    if not fixtures or not lib_path.exists():
        pytest.skip("no fixtures or native library (tests/fixtures/make.py build/fixtures; scripts/build.sh)")
    import ctypes

    from tandem.runtime import NativeLibrary

    lib = NativeLibrary(lib_path)
    seen, problems = set(), []
    info = (ctypes.c_int64 * 13)()
    for path in fixtures:
        status, p = lib.load_program(path.read_bytes())
        assert status == 0, path.name
        status, s = lib.session_create(p)
        assert status == 0, path.name
        for m in range(lib.tdm_program_method_count(p)):
            assert lib.tdm_session_bind(s, m) == 0
            dtype = lambda v: lib.tdm_session_value_info(s, m, v, info) or info[0]  # noqa: E731
            for k in range(lib.tdm_method_op_count(p, m)):
                name = lib.tdm_method_op_name(p, m, k).decode()
                ins = [dtype(lib.tdm_method_op_operand(p, m, k, 0, j)) for j in range(lib.tdm_method_op_operand_count(p, m, k, 0))]
                outs = [dtype(lib.tdm_method_op_operand(p, m, k, 1, j)) for j in range(lib.tdm_method_op_operand_count(p, m, k, 1))]
                problem = S.check_op(name, ins, outs, lib.tdm_method_op_attr_count(p, m, k, 0), lib.tdm_method_op_attr_count(p, m, k, 1))
                seen.add(name)
                if problem:
                    problems.append(f"{path.name}: {problem}")
        lib.tdm_session_free(s)
        lib.tdm_program_free(p)
    assert not problems, "\n".join(sorted(set(problems)))
    assert len(seen & set(S.SIGS)) >= 20, sorted(seen)
