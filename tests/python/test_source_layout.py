"""The source tree's shape (issue 25): no hand-written source file over 700 lines in src/, include/,
python/tandem/ or web/, and no import cycle among tandem's Python modules (tests/js/modules.test.js
checks the JS modules' imports)."""

import ast
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
