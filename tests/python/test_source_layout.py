"""The source tree's shape (issue 25): no hand-written source file over 700 lines in src/, include/,
python/tandem/ or web/, and no import cycle among tandem's Python modules (tests/js/modules.test.js
checks the JS modules' imports)."""

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
    """tandem's modules -> the tandem modules each imports at module level (imports inside functions
    run later, so they cannot make a cycle at import time)."""
    mods = {}
    for p in package.rglob("*.py"):
        parts = p.relative_to(package.parent).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    graph = {}
    for name, p in mods.items():
        pkg = name if p.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        for node in ast.parse(p.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                if node.module:
                    deps.add(target)
                deps |= {f"{target}.{a.name}" for a in node.names}
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
    assert {"tandem.lowering", "tandem.lowering.driver", "tandem.transformers", "tandem.seq2seq"} <= set(graph)
    assert _find_cycle(graph) is None, " -> ".join(_find_cycle(graph))


def test_the_cycle_finder_finds_a_cycle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


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
    introspect.c casts to no pointer type without const (the int8 weights' paired copy is matmul_q8's
    prepared data, never the file's bytes rewritten), and no file of src/ casts a program to a
    writable one."""
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
