#!/usr/bin/env bash
# Builds the native runtime (build/native: library + C tests), the sanitizer build (build/asan)
# and the wasm runtimes (build/wasm -> web/: tandem.wasm, tandem-mt.wasm with threads, and both again
# with relaxed SIMD: tandem-mt-relaxed.wasm from Emscripten, tandem-relaxed.wasm from clang-19 and
# wasi-libc in build/wasi, optimized by npm's binaryen after linking). Incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build/native -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build/native
if [ "${TANDEM_NO_ASAN:-}" != 1 ]; then
  cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTDM_SANITIZE=ON >/dev/null
  ninja -C build/asan
fi
# Debian's Emscripten runs `wasm-opt` from PATH (not from its BINARYEN_ROOT), and under `npm test` PATH
# starts with node_modules/.bin, whose npm binaryen cannot read the LLVM 14 prototype relaxed-SIMD
# opcodes that scripts/relaxed_simd.py rewrites later: the Emscripten builds see PATH without it.
EM_PATH=$(tr ':' '\n' <<<"$PATH" | grep -v '/node_modules/\.bin$' | paste -sd: -)
[ -f build/wasm/build.ninja ] || PATH=$EM_PATH emcmake cmake -S . -B build/wasm -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
PATH=$EM_PATH NODE_PATH=/usr/share/nodejs ninja -C build/wasm # the threaded build's link runs Emscripten's acorn tools
# tandem-relaxed.wasm: clang-19 + wasi-libc (standard relaxed-SIMD opcodes; cmake/wasi-clang.cmake),
# then Binaryen's wasm-opt -O3 from npm's binaryen (cmake/wasm-opt.cmake; configured every time, so a
# binaryen installed after the first build is found)
cmake -S . -B build/wasi -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/wasi-clang.cmake >/dev/null
ninja -C build/wasi
for w in tandem tandem-mt tandem-mt-relaxed; do cp build/wasm/$w.wasm web/$w.wasm; done
cp build/wasi/tandem-relaxed.wasm web/tandem-relaxed.wasm
