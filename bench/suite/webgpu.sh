#!/usr/bin/env bash
# `npm run bench:webgpu`: exports the SmolLM-135M-shaped Llama (bench/models/smollm.py, with its ONNX for
# onnxruntime-web), the streaming codec (bench/models/make_models.py, TANDEM_BENCH=codec) and Kyutai's speech
# pipeline (bench/models/stt.py, mimi.py) into build/bench-webgpu once, then runs bench/suite/webgpu.mjs in
# headless Chromium with WebGPU: on SwiftShader, or with TANDEM_WEBGPU_ADAPTER=gpu on the machine's GPU (Vulkan).
# On a machine with a GPU: `TANDEM_WEBGPU_ADAPTER=gpu TANDEM_WEBGPU_ONLY=benchSpeech bash bench/suite/webgpu.sh`
# times only the speech pipeline, WebGPU against wasm (one thread), and checks their tokens and codes agree
# (TANDEM_WEBGPU_ONLY: only what the named page functions need is exported or installed).
# TANDEM_WEBGPU_LAYERS=N exports N layers instead of 30 (quicker, for development).
# transformers.js (@huggingface/transformers, pinned below) is a bench-only install into build/transformersjs
# (--ignore-scripts: the page uses its browser bundle only, not onnxruntime-node's or sharp's binaries).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${TANDEM_WEBGPU_OUT:-build/bench-webgpu}
PY=${TANDEM_PYTHON:-$HOME/.cache/tandem-venv/bin/python}
test -f web/tandem.wasm || bash scripts/build.sh
want() { [ -z "${TANDEM_WEBGPU_ONLY:-}" ] || [[ ",$TANDEM_WEBGPU_ONLY," =~ ,($1), ]]; } # want 'fnA|fnB': one of them is run
TJS=${TANDEM_WEBGPU_TJS:-build/transformersjs}
if want 'benchLM|benchOrt|benchTjs|tandemGreedy'; then
  # the ONNX export of the peer's model needs onnx (bench/requirements.txt's pin; nothing else of it)
  "$PY" -c "import onnx" 2>/dev/null || "$PY" -m pip install -q --disable-pip-version-check "$(grep '^onnx==' bench/requirements.txt)" >&2
  if [ ! -f "$TJS/node_modules/@huggingface/transformers/package.json" ]; then
    mkdir -p "$TJS" && echo '{"name":"tandem-bench-transformersjs","private":true}' >"$TJS/package.json"
    npm install --prefix "$TJS" --no-audit --no-fund --ignore-scripts @huggingface/transformers@4.3.1 >&2
  fi
  # smollm-tjs/ (transformers.js's local model folder) came with the export of the [1, 1, V] logits
  if [ ! -f "$OUT/smollm.tandem" ] || [ ! -f "$OUT/smollm.onnx" ] || [ ! -f "$OUT/smollm-tjs/config.json" ]; then
    "$PY" -W ignore bench/models/smollm.py "$OUT" ${TANDEM_WEBGPU_LAYERS:+--layers "$TANDEM_WEBGPU_LAYERS"}
  fi
fi
if want benchCodec && [ ! -f "$OUT/codec.tandem" ]; then TANDEM_BENCH=codec "$PY" -W ignore bench/models/make_models.py "$OUT"; fi
# Kyutai's speech pipeline: the STT at TANDEM_WEBGPU_STT_SIZE (1b: kyutai/stt-1b-en_fr's size, the default; small:
# tests/python/packaged_models.py's small config) with int4 and int8 weights, its frames' audio (stt_frames.json) and
# eager's tokens; Mimi at full size: float32, int8 linear weights, and with int8, bfloat16 or int16 convs too (its eager
# frames are not used here)
SPEECH_FRAMES=$((${TANDEM_WEBGPU_SPEECH_WARM:-8} + ${TANDEM_WEBGPU_SPEECH_FRAMES:-16}))
if want benchSpeech && { [ ! -f "$OUT/stt_int4.tandem" ] || [ ! -f "$OUT/stt_int8.tandem" ]; }; then
  "$PY" -W ignore bench/models/stt.py "$OUT" "$SPEECH_FRAMES" int4,int8 "${TANDEM_WEBGPU_STT_SIZE:-1b}"
fi
if want benchSpeech && { [ ! -f "$OUT/mimi.tandem" ] || [ ! -f "$OUT/mimi_int8i16.tandem" ]; }; then
  "$PY" -W ignore bench/models/mimi.py "$OUT" 2 float32,int8,int8convs,int8bf16,int8i16
fi
TANDEM_WEBGPU_TJS=$TJS node bench/suite/webgpu.mjs "$OUT"
