"""Builds the Python package (pyproject.toml has the static metadata): copies the runtime's
tandem.wasm into it and takes the version and URLs from the clone's package.json, the one source
of truth shared with the JS package.

The wasm comes from the clone's web/tandem.wasm (made by `npm run build`, or by `npm run wheel`
when it is missing); without it the build stops at once with one line saying what to run. Only a
clone builds the package (there is no sdist): a source tree without ../package.json must already
hold tandem/tandem.wasm and tandem/_version.py, as the built package does.
"""

import json
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PACKAGE_JSON = HERE.parent / "package.json"
WASM_SOURCES = [HERE.parent / "web" / "tandem.wasm", HERE / "tandem" / "tandem.wasm"]
MISSING_WASM = (
    "tandem: web/tandem.wasm is missing (a plain clone has no wasm build yet): run `npm run wheel` "
    "and `pip install dist/*.whl`, or `npm run build` and then `pip install ./python`"
)


def _package_json() -> dict:
    if PACKAGE_JSON.exists():
        return json.loads(PACKAGE_JSON.read_text())
    frozen = HERE / "tandem" / "_version.py"  # an sdist: the version written when it was made
    if frozen.exists():
        scope = {}
        exec(frozen.read_text(), scope)
        return {"version": scope["version"]}
    raise SystemExit(f"tandem: neither {PACKAGE_JSON} nor tandem/_version.py exists: build from a clone of the repository")


def _urls(pkg: dict) -> dict:
    """package.json's homepage, repository and bugs as the wheel's Project-URLs (those it has)."""
    urls = {}
    if pkg.get("homepage"):
        urls["Homepage"] = pkg["homepage"]
    repo = pkg.get("repository")
    if repo:
        urls["Source"] = repo if isinstance(repo, str) else repo.get("url", "")
    bugs = pkg.get("bugs")
    if bugs:
        urls["Issues"] = bugs if isinstance(bugs, str) else bugs.get("url", "")
    return {k: v.removeprefix("git+") for k, v in urls.items() if v}


def _wasm() -> Path:
    wasm = next((p for p in WASM_SOURCES if p.exists()), None)
    if wasm is None:
        raise SystemExit(MISSING_WASM)
    return wasm


class build_py_with_wasm(build_py):
    def run(self):
        wasm = _wasm()  # before any work: a plain clone fails in a second, with the line above
        super().run()
        target = Path(self.build_lib) / "tandem"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(wasm, target / "tandem.wasm")
        (target / "_version.py").write_text(f'version = "{PKG["version"]}"  # from package.json, by python/setup.py\n')


PKG = _package_json()
setup(version=PKG["version"], project_urls=_urls(PKG), cmdclass={"build_py": build_py_with_wasm})
