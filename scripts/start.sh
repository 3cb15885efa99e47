#!/usr/bin/env bash
# The demo (the LM page, demo/, the audio page, demo/audio.html, and the chat page, demo/chat.html): builds what is missing, serves the repository on 127.0.0.1 and prints the page's URL.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f web/tandem.wasm ] || { bash scripts/setup.sh >/dev/null && TANDEM_NO_ASAN=1 bash scripts/build.sh >/dev/null; }
# The audio page's files (demo/audio.html): Silero VAD exported from the silero-vad package, the
# espeak-ng recording and the shipped ONNX model's segments on it.
if [ ! -f build/demo/recording.json ] || [ ! -f build/demo/silero_vad.tandem ]; then
  PY=$(bash scripts/setup.sh espeak-ng | tail -n 1)
  "$PY" -W ignore demo/build_audio.py build/demo
fi
exec node scripts/serve.mjs "${PORT:-8080}"
