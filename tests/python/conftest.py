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


@pytest.fixture(scope="module")
def wasm_lib():
    """The wasm runtime (web/tandem.wasm through wasmtime), once per test module."""
    pytest.importorskip("wasmtime")
    from tandem.wasm import WasmLibrary

    assert WASM.exists(), "web/tandem.wasm is missing: run `npm run build`"
    return WasmLibrary(WASM)


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
