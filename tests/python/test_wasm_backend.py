"""The wasm backend (tandem.wasm through wasmtime, what `pip install ./python` uses) against
PyTorch eager and the native backend; and the backend choice. The installed package itself (the
wheel in a fresh venv outside the clone) is tests/python/test_wheel.py."""

import pytest
import torch

import tandem
import tandem.runtime as runtime
from cases import CASES, as_tuple, original_report, run_eager

pytest.importorskip("wasmtime")


@pytest.fixture
def on_wasm(monkeypatch, wasm_lib):
    """tandem.load, verify and the CLI on the wasm backend for one test."""
    monkeypatch.setattr(runtime, "_lib", wasm_lib)
    monkeypatch.setattr(runtime, "BACKEND", "wasm")


@pytest.mark.parametrize("case", sorted(CASES))
def test_sequence_matches_eager_on_wasm(case, on_wasm):
    module, spec, eager, calls = CASES[case]()
    model = tandem.load(tandem.export(module, spec).to_bytes())
    assert isinstance(model._lib, type(runtime._lib)) and runtime.BACKEND == "wasm"
    got, want = [as_tuple(model.call(n, *a)) for n, a in calls], run_eager(eager, calls)
    for i, (g, w) in enumerate(zip(got, want)):
        assert len(g) == len(w), f"call {i}"
        for a, b in zip(g, w):
            torch.testing.assert_close(a, b, msg=lambda m: f"call {i} {calls[i][0]}: {m}")


def test_state_profile_and_metadata_match_the_native_backend(monkeypatch, wasm_lib):
    _, spec, _, calls = original_report()
    program = tandem.export(None, spec, metadata={"who": "report", "n": [1, 2]})
    native = tandem.load(program.to_bytes())
    monkeypatch.setattr(runtime, "_lib", wasm_lib)
    wasm = tandem.load(program.to_bytes())
    assert wasm._lib is wasm_lib and native._lib is not wasm_lib
    assert wasm.metadata == native.metadata == {"who": "report", "n": [1, 2]}
    assert list(wasm.methods) == list(native.methods)
    for name, inputs in calls:
        torch.testing.assert_close(wasm.call(name, *inputs), native.call(name, *inputs))
        torch.testing.assert_close(wasm.read_state("shared_module._v"), native.read_state("shared_module._v"))
    (out_w, ops_w), (out_n, ops_n) = wasm.profile("forward1", torch.ones(1)), native.profile("forward1", torch.ones(1))
    torch.testing.assert_close(out_w, out_n)
    # the same ops writing the same bytes on both backends (times differ)
    assert [(o.name, o.bytes_written, o.state_bytes_written) for o in ops_w] == [
        (o.name, o.bytes_written, o.state_bytes_written) for o in ops_n
    ]
    assert all(o.ms >= 0 for o in ops_w) and sum(o.state_bytes_written for o in ops_w) > 0
    wasm.reset_state()
    torch.testing.assert_close(wasm.read_state("shared_module._v"), torch.tensor([1.0]))


def test_runtime_errors_keep_their_codes_on_wasm(on_wasm):
    _, spec, _, _ = original_report()
    data = tandem.export(None, spec).to_bytes()
    with pytest.raises(tandem.TandemError) as e:
        tandem.load(data[:100])
    assert e.value.code == "TDM_ERR_TRUNCATED" and "truncated" in str(e.value)
    with pytest.raises(tandem.TandemError) as e:
        runtime.verify(b"not a tandem file at all")
    assert e.value.code.startswith("TDM_ERR_")


def test_cli_describe_is_the_same_on_both_backends(monkeypatch, wasm_lib):
    from tandem.cli import describe

    _, spec, _, _ = original_report()
    data = tandem.export(None, spec).to_bytes()
    native = describe(data)
    monkeypatch.setattr(runtime, "_lib", wasm_lib)
    wasm = describe(data)
    assert wasm == native  # the program id too: the data size is hashed as 8 bytes on every host


def test_backend_choice(monkeypatch, tmp_path):
    monkeypatch.delenv("TANDEM_BACKEND", raising=False)
    monkeypatch.setenv("TANDEM_LIB", str(tmp_path / "libtandem.so"))
    assert runtime._choose_backend() == "native"  # TANDEM_LIB: developer mode
    monkeypatch.setenv("TANDEM_BACKEND", "wasm")
    assert runtime._choose_backend() == "wasm"
    monkeypatch.setenv("TANDEM_BACKEND", "gpu")
    with pytest.raises(ValueError):
        runtime._choose_backend()
    monkeypatch.delenv("TANDEM_BACKEND")
    monkeypatch.delenv("TANDEM_LIB")
    monkeypatch.setattr(runtime, "_REPO", tmp_path)  # no build/native next to the package
    assert runtime._choose_backend() == "wasm"
