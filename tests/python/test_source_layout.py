"""The source tree's shape: no hand-written source file over 700 lines in src/, include/,
python/tandem/ or web/; no import cycle among tandem's Python modules, imports inside functions
included; each exporter pass importing only from the layer below the passes (ir.py, schema.py),
never from another pass (tests/js/modules.test.js checks the JS modules' imports); and docs that
describe what is: docs/performance.md as the one page of benchmark results, no lab notebook or
one-off probes left, no development history in the docs, README.md or CONTRIBUTING.md."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 700
# Written by scripts/gen_schema.py from python/tandem/schema.py, not by hand.
GENERATED = {"src/schema.h", "web/schema.js"}


def test_no_hand_written_source_file_is_over_700_lines():
    files = [p for d, exts in (("src", ("c", "h")), ("include", ("h",)), ("python/tandem", ("py",)), ("web", ("js",))) for e in exts
             for p in (ROOT / d).rglob(f"*.{e}")]  # fmt: skip
    assert len(files) > 100
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not {f: n for f, n in long.items() if f not in GENERATED}, f"split these by what they hold (CONTRIBUTING.md): {long}"


def _module_imports(package: Path) -> dict:
    """tandem's modules -> the tandem modules each imports, at module level or inside a function (one
    run later, from a module another imports, still needs both: a cycle is two modules that cannot be
    understood, or split out, apart)."""
    mods = {}
    for p in package.rglob("*.py"):
        parts = p.relative_to(package.parent).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    graph = {}
    for name, p in mods.items():
        pkg = name if p.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                if node.module:
                    deps.add(target)
                deps |= {f"{target}.{a.name}" for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == package.name:
                deps.add(node.module)
                deps |= {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def _find_cycle(graph: dict):
    state, path = {}, []

    def visit(u):
        if state.get(u) == "done":
            return None
        if state.get(u) == "open":
            return path[path.index(u) :] + [u]
        state[u] = "open"
        path.append(u)
        for v in sorted(graph[u]):
            if cycle := visit(v):
                return cycle
        path.pop()
        state[u] = "done"
        return None

    return next((c for u in sorted(graph) if (c := visit(u))), None)


def test_no_import_cycle_among_tandems_python_modules():
    graph = _module_imports(ROOT / "python" / "tandem")
    assert {"tandem.lowering", "tandem.lowering.driver", "tandem.transformers", "tandem.recipes.seq2seq"} <= set(graph)
    assert _find_cycle(graph) is None, " -> ".join(_find_cycle(graph))


def test_the_cycle_finder_finds_a_cycle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


PERFORMANCE_MAX_LINES = 300
# The docs a reader is sent to: none of them may name what no longer exists.
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
GONE = ("bench/probes", "benchmarks.md")
# Development history: issue numbers, ISO dates, work sessions. "session" alone is an API word (a
# program's session), so only the history's uses of it match: this / earlier / the sixth session,
# the session's start or merges.
HISTORY = re.compile(
    r"\bissues?\s+#?\d+\b"  # issue #12, issue 25
    r"|(?<![\w`/&#])#\d+\b"  # (#12), see #12; not `name#1` (a method's version)
    r"|\b\d{4}-\d{2}-\d{2}\b"  # an ISO date
    r"|\b(?:this|that|an? earlier|earlier|previous|the next|later|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth"
    r"|eleventh|twelfth|(?:thir|four|fif|six|seven|eigh|nine)teenth|\d+(?:st|nd|rd|th))\s+sessions?\b"
    r"|\bsession's (?:start|merges)\b",
    re.IGNORECASE,
)


def test_performance_page_is_short_and_the_notebook_and_probes_are_gone():
    page = ROOT / "docs" / "performance.md"
    assert page.is_file(), "docs/performance.md: how to run each bench, the current results, the known limits"
    n = len(page.read_text().splitlines())
    assert 50 < n <= PERFORMANCE_MAX_LINES, f"docs/performance.md has {n} lines: results, not a diary (history stays in git)"
    assert not (ROOT / "docs" / "benchmarks.md").exists()
    assert not (ROOT / "bench" / "probes").exists(), "a kept measurement goes in bench/suite/ (CONTRIBUTING.md)"


def test_no_doc_names_the_notebook_or_the_probes():
    files = DOCS + [ROOT / "package.json"]
    files += [p for d in ("src", "include", "python", "web", "bench", "scripts", "cmake", "demo", "tests") for p in (ROOT / d).rglob("*")
              if p.is_file() and p.suffix in {".md", ".c", ".h", ".py", ".js", ".mjs", ".sh", ".cmake", ".json", ".html"}
              and p != Path(__file__).resolve()]  # fmt: skip
    assert len(files) > 200
    named = sorted(f"{p.relative_to(ROOT)}: {g}" for p in files for g in GONE if g in p.read_text(errors="replace"))
    assert not named, named


def test_docs_hold_no_development_history():
    assert {p.name for p in DOCS} >= {"api.md", "format.md", "ops.md", "security.md", "README.md", "CONTRIBUTING.md"}
    lines = [f"{p.relative_to(ROOT)}:{i}: {m.group(0)!r}" for p in DOCS for i, line in enumerate(p.read_text().splitlines(), 1)
             if (m := HISTORY.search(line))]  # fmt: skip
    assert not lines, f"docs describe what is (history stays in git): {lines}"


# In code and tests the same, less the session words ("this session's state" is the runtime's) and
# the `#444` of a colour: an issue number or a date.
CODE_HISTORY = re.compile(r"\bissues?\s+#?\d+\b|\(#\d+\b|\b20\d\d-\d{2}-\d{2}\b", re.IGNORECASE)


def test_code_holds_no_issue_numbers_or_dates():
    dirs = ("src", "include", "python", "web", "bench", "scripts", "cmake", "demo", "tests", "node")
    files = [p for d in dirs for p in (ROOT / d).rglob("*")
             if p.is_file() and p.suffix in {".c", ".h", ".py", ".js", ".mjs", ".sh", ".cmake", ".html", ".ts", ".wgsl"}
             and p != Path(__file__).resolve()]  # fmt: skip
    assert len(files) > 200
    lines = [f"{p.relative_to(ROOT)}:{i}: {m.group(0)!r}" for p in files
             for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if (m := CODE_HISTORY.search(line))]  # fmt: skip
    assert not lines, f"code and comments describe what is (history stays in git): {lines}"


def test_the_history_pattern_matches_history_and_not_the_api():
    history = ["(issue #16)", "issue 25", "see #12", "2026-12-01", "this session", "After the sixth session's merges",
               "the thirteenth session", "main at the session's start", "earlier sessions' probes"]  # fmt: skip
    api = ["a session on a loaded program", "one session's state", "its other sessions stay usable", "methods `name`, `name#1`",
           "tdm_session_run", "KV cache of 512, fill 32", "1024-wide MLP", "version 0.2.13"]  # fmt: skip
    assert [h for h in history if not HISTORY.search(h)] == []
    assert [a for a in api if HISTORY.search(a)] == []


def test_imports_inside_functions_are_seen(tmp_path):
    pkg = tmp_path / "tandem"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import g\n    return g\n")
    graph = _module_imports(pkg)
    assert graph["tandem.b"] == {"tandem.a"}
    assert _find_cycle(graph) == ["tandem.a", "tandem.b", "tandem.a"]


# The exporter's passes in the order export.py runs them (a pass's own helpers in its group), and
# the layer below them all: a pass that needs what another holds takes it from that layer.
PASSES = {
    "lowering": ("tandem.lowering",),
    "fuse": ("tandem.fuse",),
    "quantize": ("tandem.quantize", "tandem.quantize_conv"),
    "layout": ("tandem.layout",),
    "plan": ("tandem.plan",),
    "format": ("tandem.format",),
}
BELOW_PASSES = {"tandem.ir", "tandem.schema"}


def test_each_pass_imports_only_from_the_layer_below_the_passes():
    graph = _module_imports(ROOT / "python" / "tandem")
    group = {m: p for p, prefixes in PASSES.items() for m in graph for pre in prefixes if m == pre or m.startswith(pre + ".")}
    assert set(group.values()) == set(PASSES)
    wrong = {m: sorted(d for d in graph[m] if group.get(d, p) != p or (d not in group and d not in BELOW_PASSES)) for m, p in group.items()}
    assert not {m: d for m, d in wrong.items() if d}, "a pass imports another pass (or something above it)"


# ---- the reader and the CPU backend (CONTRIBUTING.md, "Prepared data") -----------------------------

SRC = ROOT / "src"
READER = ("reader.c", "reader_methods.c", "verify.c")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# a cast to a pointer type without const: (void *), (uint8_t *), (tdm_program *), (int8_t **) ...
NON_CONST_POINTER_CAST = re.compile(r"\(\s*(?!const\b)(?:struct\s+)?[A-Za-z_]\w*\s*\*+\s*\)")


def _code(text: str) -> str:
    """C source without its comments."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)


def _includes(path: Path, seen=None) -> set:
    """The src/ files path includes, directly or through the headers it includes."""
    seen = set() if seen is None else seen
    for name in INCLUDE.findall(_code(path.read_text())):
        inc = (path.parent / name).resolve()
        if inc.is_file() and inc.is_relative_to(SRC) and inc not in seen:
            seen.add(inc)
            _includes(inc, seen)
    return seen


def test_the_reader_includes_nothing_from_the_kernels():
    """reader.c, reader_methods.c and verify.c read and verify the file's bytes: nothing they include,
    directly or through a header, is a kernel's (a backend prepares its data through the ops'
    prepare hooks, called by program.c)."""
    for name in READER:
        kernels = sorted(str(p.relative_to(SRC)) for p in _includes(SRC / name) if p.is_relative_to(SRC / "kernels"))
        assert kernels == [], f"src/{name} includes {kernels}"
        code = _code((SRC / name).read_text())
        assert not re.search(r"\btdm__\w*prepare\w*\s*\(|\bq8_pair|\bwino", code), f"src/{name} prepares data for the kernels"
    assert SRC / "kernels" / "variants.h" in _includes(SRC / "kernels" / "quant.c"), "the include walk finds nothing"


def test_program_data_is_handed_out_without_removing_const():
    """tdm_program_data and the other introspection functions take a const program and only read it:
    introspect.c casts to no pointer type without const (prepared data, such as the Winograd
    transforms, lives beside the file's bytes, never rewriting them), and no file of src/ casts a
    program to a writable one."""
    code = _code((SRC / "introspect.c").read_text())
    assert "tdm_program_data" in code
    assert NON_CONST_POINTER_CAST.findall(code) == []
    for p in sorted(SRC.rglob("*.c")):
        assert "(tdm_program *)" not in _code(p.read_text()), f"{p.relative_to(ROOT)} casts const away from a program"


def test_the_cast_check_finds_a_cast_removing_const():
    old = "const void *tdm_program_data(const tdm_program *p) { tdm__q8_unpair_weights((tdm_program *)p); return p->data; }"
    assert NON_CONST_POINTER_CAST.findall(old) == ["(tdm_program *)"]
    assert NON_CONST_POINTER_CAST.findall("f((void *)p, (uint8_t *)q, (int8_t **)r)") == ["(void *)", "(uint8_t *)", "(int8_t **)"]
    assert NON_CONST_POINTER_CAST.findall("f((const void *)p, (const uint8_t *)q, sizeof(x), (size_t)n)") == []
