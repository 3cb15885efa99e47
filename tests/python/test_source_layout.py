"""The source tree's shape: no hand-written source file over 700 lines in src/, include/,
python/tandem/ or web/, no import cycle among tandem's Python modules (tests/js/modules.test.js
checks the JS modules' imports), and docs that describe what is: docs/performance.md as the one
page of benchmark results, no lab notebook or one-off probes left, no development history in the
docs, README.md or CONTRIBUTING.md."""

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


def test_the_history_pattern_matches_history_and_not_the_api():
    history = ["(issue #16)", "issue 25", "see #12", "2026-12-01", "this session", "After the sixth session's merges",
               "the thirteenth session", "main at the session's start", "earlier sessions' probes"]  # fmt: skip
    api = ["a session on a loaded program", "one session's state", "its other sessions stay usable", "methods `name`, `name#1`",
           "tdm_session_run", "KV cache of 512, fill 32", "1024-wide MLP", "version 0.2.13"]  # fmt: skip
    assert [h for h in history if not HISTORY.search(h)] == []
    assert [a for a in api if HISTORY.search(a)] == []
