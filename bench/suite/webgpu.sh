#!/usr/bin/env bash
# `npm run bench:webgpu`: exports the SmolLM-135M-shaped Llama (bench/models/smollm.py, with its ONNX for
# onnxruntime-web) and the streaming codec (bench/models/make_models.py, TANDEM_BENCH=codec) into
# build/bench-webgpu once, then runs bench/suite/webgpu.mjs in headless Chromium with WebGPU.
# TANDEM_WEBGPU_LAYERS=N exports N layers instead of 30 (quicker, for development).
# transformers.js (@huggingface/transformers, pinned below) is a bench-only install into build/transformersjs
# (--ignore-scripts: the page uses its browser bundle only, not onnxruntime-node's or sharp's binaries).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${TANDEM_WEBGPU_OUT:-build/bench-webgpu}
PY=${TANDEM_PYTHON:-$HOME/.cache/tandem-venv/bin/python}
test -f web/tandem.wasm || bash scripts/build.sh
# the ONNX export of the peer's model needs onnx (bench/requirements.txt's pin; nothing else of it)
"$PY" -c "import onnx" 2>/dev/null || "$PY" -m pip install -q --disable-pip-version-check "$(grep '^onnx==' bench/requirements.txt)" >&2
TJS=${TANDEM_WEBGPU_TJS:-build/transformersjs}
if [ ! -f "$TJS/node_modules/@huggingface/transformers/package.json" ]; then
  mkdir -p "$TJS" && echo '{"name":"tandem-bench-transformersjs","private":true}' >"$TJS/package.json"
  npm install --prefix "$TJS" --no-audit --no-fund --ignore-scripts @huggingface/transformers@4.3.1 >&2
fi
# smollm-tjs/ (transformers.js's local model folder) came with the export of the [1, 1, V] logits
if [ ! -f "$OUT/smollm.tandem" ] || [ ! -f "$OUT/smollm.onnx" ] || [ ! -f "$OUT/smollm-tjs/config.json" ]; then
  "$PY" -W ignore bench/models/smollm.py "$OUT" ${TANDEM_WEBGPU_LAYERS:+--layers "$TANDEM_WEBGPU_LAYERS"}
fi
if [ ! -f "$OUT/codec.tandem" ]; then TANDEM_BENCH=codec "$PY" -W ignore bench/models/make_models.py "$OUT"; fi
TANDEM_WEBGPU_TJS=$TJS node bench/suite/webgpu.mjs "$OUT"
