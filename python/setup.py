"""Copies the runtime's tandem.wasm into the package when it is built (pyproject.toml has the rest).

The wasm comes from the clone's web/tandem.wasm (made by `npm run build`); a source tree that has
python/tandem/tandem.wasm already (e.g. an unpacked sdist) uses that one.
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SOURCES = [HERE.parent / "web" / "tandem.wasm", HERE / "tandem" / "tandem.wasm"]


class build_py_with_wasm(build_py):
    def run(self):
        super().run()
        wasm = next((p for p in SOURCES if p.exists()), None)
        if wasm is None:
            raise SystemExit("tandem: web/tandem.wasm is missing: run `npm run build` in the clone, then `pip install ./python`")
        target = Path(self.build_lib) / "tandem" / "tandem.wasm"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(wasm, target)


setup(cmdclass={"build_py": build_py_with_wasm})
