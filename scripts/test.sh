#!/usr/bin/env bash
# Every test: builds (the wasm, the native library and the Python wheel), exports the fixtures and the malformed-file corpus, then C (ctest, plain and
# ASan+UBSan; the kernel self-test cross-built for arm64 under qemu), a 60 s fuzzing run, Python (pytest), the Python lint and format check (ruff), the C format check (clang-format), the JS lint (ESLint) and JS (node --test, in Node and in headless Chromium;
# the Node tests twice, on the SIMD128 and the relaxed-SIMD builds). Stops at the first failing suite.
# Where two steps need neither the other's output nor both cores, they run side by side: the second in the background,
# its output kept in build/logs/NAME.log and printed when it is joined.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/logs
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT # a step that fails stops the one beside it too
side() { # side NAME COMMAND...: start COMMAND in the background
  local name=$1
  shift
  ("$@") >"build/logs/$name.log" 2>&1 &
  eval "SIDE_$name=$!"
}
join() { # join NAME: wait for it, print its output, stop if it failed
  local pid
  eval "pid=\$SIDE_$1"
  if wait "$pid"; then cat "build/logs/$1.log"; else
    cat "build/logs/$1.log"
    echo "== $1 failed (above)"
    exit 1
  fi
}
demos() {
  echo "== the audio demo's model, recording and ONNX reference (demo/build_audio.py)"
  "$PY" -W ignore demo/build_audio.py build/demo
}
PY=$(bash scripts/setup.sh chromium clang libclang-rt-14-dev espeak-ng | tail -n 1)
bash scripts/build.sh
echo "== the Python wheel (npm run wheel; tests/python/test_wheel.py installs it into a fresh venv)"
WHEEL=$(bash scripts/wheel.sh | tail -n 1)
echo "$WHEEL"
side demos demos
echo "== fixtures"
"$PY" -W ignore tests/fixtures/make.py build/fixtures
join demos
rm -rf build/fixtures/malformed
"$PY" tests/fixtures/malformed.py build/fixtures/malformed build/fixtures/state_io.tandem build/fixtures/streaming_conv.tandem build/fixtures/dynamic_appender.tandem
echo "== C tests (native)"
ctest --test-dir build/native --output-on-failure -j 2
echo "== C tests (AddressSanitizer + UndefinedBehaviorSanitizer)"
ctest --test-dir build/asan --output-on-failure -j 2
side arm64 bash -c 'echo "== the kernel self-test on arm64 (cross-built, under qemu-aarch64: SIMDe'"'"'s NEON mapping; scripts/arm64_selftest.sh)" && bash scripts/arm64_selftest.sh'
echo "== Fuzzing the loader for 60 s (libFuzzer, ASan+UBSan)"
bash scripts/fuzz.sh 60
join arm64
echo "== Python tests"
rm -rf build/fixtures/ops build/fixtures/programs # recorded anew for tests/js/ops.test.js and random-programs.test.js
TANDEM_WHEEL="$WHEEL" TANDEM_OPS_FIXTURES=build/fixtures/ops TANDEM_PROGRAM_FIXTURES=build/fixtures/programs "$PY" -m pytest -q -p no:cacheprovider -n 2 tests/python
echo "== Python lint and format (ruff check, ruff format --check, ruff.toml: python/, tests/, bench/, scripts/, demo/, examples/)" && "$(dirname "$PY")/ruff" check --quiet . && "$(dirname "$PY")/ruff" format --check --quiet .
echo "== C format (scripts/format_c.sh --check: .clang-format over src/, include/, tests/c/, tests/fuzz/)" && bash scripts/format_c.sh --check
echo "== JS lint (npm run lint: ESLint over web/, node/, the JS tests, bench/**/*.mjs and demo/)" && npm run lint --silent
side chromium bash -c 'echo "== JS tests in headless Chromium" && node --test tests/browser/'
echo "== JS tests (Node on the SIMD128 builds)"
node --test tests/js/
echo "== JS tests again in Node with relaxed SIMD (the relaxed builds, web/tandem*-relaxed.wasm)"
node --experimental-wasm-relaxed-simd --test tests/js/
join chromium
