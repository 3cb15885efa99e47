import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
os.environ.setdefault("TANDEM_CHECK_OPS", "1")  # python/tandem/format.py checks every op against schema.SIGS
sys.path.insert(0, str(ROOT / "tests"))
warnings.filterwarnings("ignore", message=".*erase_node.*")

import pytest  # noqa: E402

WASM = ROOT / "web" / "tandem.wasm"


def _wasm_library(path: Path):
    pytest.importorskip("wasmtime")
    from tandem.wasm import WasmLibrary

    assert path.exists(), f"web/{path.name} is missing: run `npm run build`"
    return WasmLibrary(path)


@pytest.fixture(scope="module")
def wasm_lib():
    """The wasm runtime (web/tandem.wasm through wasmtime), once per test module."""
    return _wasm_library(WASM)


@pytest.fixture(scope="module")
def relaxed_wasm_lib():
    """The relaxed-SIMD wasm runtime (web/tandem-relaxed.wasm, clang-19) through wasmtime."""
    return _wasm_library(ROOT / "web" / "tandem-relaxed.wasm")


@pytest.fixture(params=["native", "wasm"])
def backend(request, monkeypatch):
    """Runs a test once on the native library and once on the wasm runtime (tandem.runtime's backend)."""
    import tandem.runtime as runtime

    if request.param == "wasm":
        monkeypatch.setattr(runtime, "_lib", request.getfixturevalue("wasm_lib"))
        monkeypatch.setattr(runtime, "BACKEND", "wasm")
    else:
        assert runtime.BACKEND == "native", "the native runtime is not built: run `npm run build`"
    return request.param
