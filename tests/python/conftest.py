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


def zoo_seed() -> int:
    """The seed of tests/python/test_registry_walk.py's sample: TANDEM_ZOO_SEED, else one drawn when
    pytest starts and put in the environment, so every xdist worker (which inherits it) samples the
    same classes."""
    if "TANDEM_ZOO_SEED" not in os.environ:
        import random

        os.environ["TANDEM_ZOO_SEED"] = str(random.SystemRandom().randrange(1_000_000))
    return int(os.environ["TANDEM_ZOO_SEED"])


def pytest_report_header(config):
    every = " (every class: TANDEM_ZOO=all)" if os.environ.get("TANDEM_ZOO") == "all" else ""
    return f"registry walk (test_registry_walk.py): TANDEM_ZOO_SEED={zoo_seed()}{every}"


def pytest_configure(config):
    """Draws the registry walk's seed in the controller, before pytest-xdist starts its workers (which
    inherit the environment), so that every worker collects the same sample."""
    zoo_seed()
