"""Every code block of README.md and docs/guide/*.md runs here, so the docs cannot drift.

The blocks of one file run in order in one temporary folder, so a Python block can write the file a
later JS block loads:
- ```python: run by this Python (one interpreter per file, each block in a fresh namespace, as
  `python block.py` would run it), with the package on PYTHONPATH;
- ```js: run by node as an ES module; `tandem-runtime` resolves to this repository (a symlink in the
  folder's node_modules, as `npm install` of the tarball would place it);
- ```sh: run by bash, with this Python's folder first on PATH (`python` is this one);
- ```text right after a block that ran: that block's exact stdout.
A block that cannot run here says why on the line before it, `<!-- docs-test: skip REASON -->`, and is
still checked: Python compiles, JS parses as a module (`node --check`), shell parses (`bash -n`).
A ```js browser block (it needs a page: a microphone, WebGPU, a DOM) is parsed the same way, and
an ```html block (never run) must be marked; an import map in it must be JSON.
"""

import json
import os
import re
import select
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
LANGUAGES = {"python", "js", "sh", "text", "html"}
SKIP = re.compile(r"^<!-- docs-test: skip (\S.*?) -->$")
TIMEOUT_S = 300

# Runs the blocks of one file in one interpreter (torch is imported once): reads a path per line,
# runs it as __main__, answers one JSON line with its stdout and whether it succeeded.
DRIVER = r"""
import contextlib, io, json, runpy, sys, traceback
for line in sys.stdin:
    out, err, ok = io.StringIO(), io.StringIO(), True
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(line.strip(), run_name="__main__")
        except SystemExit as e:
            ok = e.code in (None, 0)
        except BaseException:
            traceback.print_exc()
            ok = False
    sys.__stdout__.write(json.dumps({"ok": ok, "out": out.getvalue(), "err": err.getvalue()}) + "\n")
    sys.__stdout__.flush()
"""


@dataclass
class Block:
    line: int  # of the opening fence, 1-based
    lang: str
    info: str  # the words after the language
    code: str
    skip: str | None  # the reason given in the marker before it


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with the skip marker on the line before each."""
    found, lines, i = [], path.read_text().split("\n"), 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*(.*)$", lines[i])
        if not m:
            i += 1
            continue
        start, lang, info = i, m[1], m[2].strip()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
        assert end is not None, f"{path.name}:{i + 1}: unclosed code block"
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        skip = SKIP.match(before.strip())
        found.append(Block(start + 1, lang, info, "\n".join(lines[start + 1 : end]) + "\n", skip[1] if skip else None))
        i = end + 1
    return found


def test_every_block_is_run_or_marked_with_a_reason():
    counts = {"run": 0, "marked": 0}
    for path in DOCS:
        markers = [line for line in path.read_text().split("\n") if "docs-test:" in line]
        assert all(SKIP.match(m.strip()) for m in markers), f"{path.name}: a marker is `<!-- docs-test: skip REASON -->`: {markers}"
        assert len(markers) == sum(1 for b in blocks(path) if b.skip), f"{path.name}: a skip marker not right before a code block"
        for b in blocks(path):
            where = f"{path.relative_to(ROOT)}:{b.line}"
            assert b.lang in LANGUAGES, f"{where}: a code block needs a language of {sorted(LANGUAGES)}, not {b.lang!r}"
            assert b.info in ("", "browser"), f"{where}: unknown info string {b.info!r} (only `js browser`)"
            assert b.info != "browser" or b.lang == "js", f"{where}: `browser` marks JS blocks only"
            assert b.lang != "html" or b.skip, f"{where}: an HTML block is never run: say why before it"
            counts["marked" if b.skip or b.info else "run"] += 1
    assert (ROOT / "docs" / "guide" / "getting-started.md") in DOCS
    assert counts["run"] >= 20, counts  # the parser found the blocks


def test_the_readme_keeps_the_test_command():
    """CI runs the README's test command (.ci/run): a shell block with `npm test` as its own line."""
    sh = [b.code for b in blocks(ROOT / "README.md") if b.lang == "sh"]
    assert any(re.search(r"^npm test\s+#", code, re.M) for code in sh)
    assert json.loads((ROOT / "package.json").read_text())["scripts"]["test"] == "bash scripts/test.sh"


def test_js_blocks_import_only_names_the_package_exports():
    """Also the blocks that do not run here (a page's): each name imported from 'tandem-runtime' is an
    export of web/tandem.js (browsers) and of node/index.js (Node)."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    script = "const [w, n] = await Promise.all([import('./web/tandem.js'), import('./node/index.js')]);"
    script += "console.log(JSON.stringify([Object.keys(w), Object.keys(n)]));"
    r = subprocess.run(["node", "--input-type=module", "-e", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    web, node = (set(names) for names in json.loads(r.stdout))
    assert {"load", "Tensor", "streamAudio"} <= web & node
    imported = 0
    for path in DOCS:
        for b in blocks(path):
            for m in re.finditer(r"import \{([^}]*)\} from 'tandem-runtime'", b.code if b.lang == "js" else ""):
                names = {n.strip().split(" as ")[0] for n in m[1].split(",") if n.strip()}
                imported += len(names)
                assert names <= web & node, f"{path.name}:{b.line}: not exported by the package: {names - (web & node)}"
    assert imported >= 10


def test_the_parser_sees_markers_and_languages(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("a\n\n<!-- docs-test: skip needs a GPU -->\n\n```js browser\nx;\n```\n```python\nprint(1)\n```\n")
    got = [(b.line, b.lang, b.info, b.code, b.skip) for b in blocks(doc)]
    assert got == [(5, "js", "browser", "x;\n", "needs a GPU"), (8, "python", "", "print(1)\n", None)]


class Python:
    """One interpreter that runs the Python blocks of a file (DRIVER)."""

    def __init__(self, cwd: Path, env: dict):
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-W", "ignore", "-c", DRIVER], cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def run(self, path: Path) -> tuple[bool, str, str]:
        self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT_S)
        assert ready, f"{path.name}: no answer in {TIMEOUT_S} s"
        r = json.loads(self.proc.stdout.readline())
        return r["ok"], r["out"], r["err"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def check_syntax(b: Block, path: Path, env: dict) -> None:
    if b.lang == "python":
        compile(b.code, str(path), "exec")
    elif b.lang in ("js", "sh"):
        cmd = ["node", "--check", str(path)] if b.lang == "js" else ["bash", "-n", str(path)]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        assert r.returncode == 0, f"{b.lang} does not parse:\n{r.stderr}"
    elif b.lang == "html":
        for m in re.finditer(r'<script type="importmap">(.*?)</script>', b.code, re.S):
            json.loads(m[1])


@pytest.mark.parametrize("doc", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_the_code_blocks_run(doc: Path, tmp_path: Path):
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), *filter(None, [env.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "tandem-runtime").symlink_to(ROOT, target_is_directory=True)
    python, last = None, None  # last: (where, stdout) of the block that ran before, for a ```text after it
    try:
        for n, b in enumerate(blocks(doc)):
            where = f"{doc.relative_to(ROOT)}:{b.line}"
            ext = {"python": "py", "js": "mjs", "sh": "sh", "text": "txt", "html": "html"}[b.lang]
            path = tmp_path / f"block{n}_line{b.line}.{ext}"
            path.write_text(b.code)
            if b.skip or b.info == "browser":
                check_syntax(b, path, env)
                last = None
                continue
            if b.lang == "text":
                assert last is not None, f"{where}: a ```text block that shows no output of a block run before it: mark it"
                assert last[1] == b.code, f"{where}: the output of {last[0]} differs from the doc:\n{last[1]}"
                last = None
                continue
            if b.lang == "python":
                python = python or Python(tmp_path, env)
                ok, out, err = python.run(path)
            else:
                cmd = ["node", str(path)] if b.lang == "js" else ["bash", "-eo", "pipefail", str(path)]
                r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
                ok, out, err = r.returncode == 0, r.stdout, r.stderr
            assert ok, f"{where}: the {b.lang} block failed:\n{out}\n{err}"
            last = (where, out)
    finally:
        if python:
            python.close()
