#!/usr/bin/env bash
# npm run bench: installs what the benchmarks need (npm peers, onnx/onnxscript), builds, exports
# the models, then runs bench/bench.mjs. The table goes to stdout (docs/benchmarks.md holds one).
set -euo pipefail
# TANDEM_BENCH=image (or a comma-separated list of gemm, state, decode, smollm, conv, image, codec,
# memory, load, threads) exports and runs only those sections, e.g. `TANDEM_BENCH=image npm run bench`
# for the resnet18 / mobilenet_v3_small rows; unset, everything runs.
cd "$(dirname "$0")/.."
PY=$(bash scripts/setup.sh | tail -n 1)
"$PY" -c "import onnx, onnxscript" 2>/dev/null || "$PY" -m pip install -q --disable-pip-version-check -r bench/requirements.txt >&2
# torchvision (resnet18, mobilenet_v3_small) beside the venv's torch: --no-deps, so pip never
# changes the torch version (torchvision declares an older minimum); pillow is what it imports.
"$PY" -c "import torchvision" 2>/dev/null || "$PY" -m pip install -q --disable-pip-version-check --no-deps torchvision pillow >&2
[ -d node_modules/onnxruntime-web ] && [ -d node_modules/@tensorflow/tfjs-backend-wasm ] || npm ci --no-audit --no-fund >&2
TANDEM_NO_ASAN=1 bash scripts/build.sh >/dev/null
mkdir -p build/bench
emcc -O3 -msimd128 -mbulk-memory -sSTANDALONE_WASM --no-entry -sALLOW_MEMORY_GROWTH=1 \
  -sEXPORTED_FUNCTIONS=_tdm_bench_peak,_tdm_bench_alloc,_tdm_bench_copy,_tdm_bench_read bench/peak.c -o build/bench/peak.wasm
"$PY" -W ignore bench/make_models.py build/bench >&2
if [ "${TANDEM_BENCH:-}" != threads ]; then
  node --expose-gc --experimental-wasm-relaxed-simd bench/bench.mjs build/bench
fi
# The thread rows: 2 threads, and 4 and 8 where the machine has them (a process per count:
# onnxruntime-web's thread count is fixed per process).
if [ -z "${TANDEM_BENCH:-}" ] || [[ ",$TANDEM_BENCH," == *,threads,* ]]; then
  for t in 2 4 8; do
    [ "$t" -le "$(nproc)" ] || [ "$t" -eq 2 ] || continue
    node --expose-gc --experimental-wasm-relaxed-simd bench/threads.mjs build/bench "$t"
  done
fi
