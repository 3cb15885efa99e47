#!/usr/bin/env bash
# Builds the native runtime (build/native: library + C tests), the sanitizer build (build/asan)
# and the wasm runtimes (build/wasm -> web/: tandem.wasm, tandem-mt.wasm with threads, and both again
# with relaxed SIMD: tandem-relaxed.wasm, tandem-mt-relaxed.wasm). Incremental.
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
for w in tandem tandem-mt tandem-relaxed tandem-mt-relaxed; do cp build/wasm/$w.wasm web/$w.wasm; done
