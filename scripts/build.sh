#!/usr/bin/env bash
# Builds the native runtime (build/native: library + C tests), the sanitizer build (build/asan)
# and the wasm runtimes (build/wasm -> web/tandem.wasm, and web/tandem-mt.wasm with threads). Incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build/native -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build/native
if [ "${TANDEM_NO_ASAN:-}" != 1 ]; then
  cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTDM_SANITIZE=ON >/dev/null
  ninja -C build/asan
fi
[ -f build/wasm/build.ninja ] || emcmake cmake -S . -B build/wasm -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
NODE_PATH=/usr/share/nodejs ninja -C build/wasm # the threaded build's link runs Emscripten's acorn tools
cp build/wasm/tandem.wasm web/tandem.wasm
cp build/wasm/tandem-mt.wasm web/tandem-mt.wasm
