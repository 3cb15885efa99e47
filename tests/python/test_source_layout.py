"""The source tree's shape: no hand-written source file over 700 lines in src/, include/,
python/tandem/ or web/; no import cycle among tandem's Python modules, imports inside functions
included; and each exporter pass importing only from the layer below the passes (ir.py, schema.py),
never from another pass (tests/js/modules.test.js checks the JS modules' imports)."""

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
