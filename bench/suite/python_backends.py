"""Per-call overhead of tandem.load's two backends (native ctypes, wasm through wasmtime) on the
accumulator case of tests/cases.py (3 floats in, 3 out): median of 5 runs of 1000 calls each.

    PYTHONPATH=python:tests ~/.cache/tandem-venv/bin/python bench/suite/python_backends.py
"""

import statistics
import time

import torch

import tandem
import tandem.runtime as runtime
from cases import accumulator
from tandem.wasm import WasmLibrary


def per_call_us(model, x, calls=1000, runs=5) -> float:
    for _ in range(100):
        model.forward(x)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(calls):
            model.forward(x)
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


module, spec, eager, _ = accumulator()
data = tandem.export(module, spec).to_bytes()
x = torch.tensor([1.0, 2.0, 3.0])
results = {}
for backend in ("native", "wasm"):
    runtime._lib = runtime.NativeLibrary(runtime._native_path()) if backend == "native" else WasmLibrary(runtime._wasm_path())
    results[backend] = per_call_us(tandem.load(data), x)
    print(f"{backend:>6}: {results[backend]:.1f} us per call")
with torch.no_grad():
    eager_us = per_call_us(eager["forward"].__self__, x)
print(f" eager: {eager_us:.1f} us per call (PyTorch, for scale)")
print(f"wasm / native: {results['wasm'] / results['native']:.1f}x")
