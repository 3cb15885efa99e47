#!/usr/bin/env bash
# Every test: builds (the wasm, the native library and the Python wheel), exports the fixtures and the malformed-file corpus, then C (ctest, plain and
# ASan+UBSan; the kernel self-test cross-built for arm64 under qemu), a 60 s fuzzing run, Python (pytest), the Python lint and format check (ruff), the C format check (clang-format), the JS lint (ESLint) and JS (node --test, in Node and in headless Chromium;
# the Node tests twice, on the SIMD128 and the relaxed-SIMD builds). Stops at the first failing suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/setup.sh chromium clang libclang-rt-14-dev espeak-ng | tail -n 1)
bash scripts/build.sh
echo "== the Python wheel (npm run wheel; tests/python/test_wheel.py installs it into a fresh venv)"
WHEEL=$(bash scripts/wheel.sh | tail -n 1)
echo "$WHEEL"
echo "== fixtures"
"$PY" -W ignore tests/fixtures/make.py build/fixtures
echo "== the audio demo's model, recording and ONNX reference (demo/build_audio.py)"
"$PY" -W ignore demo/build_audio.py build/demo
echo "== the chat demo's checkpoint folder and its export (demo/build_chat.py)"
"$PY" -W ignore demo/build_chat.py build/demo
rm -rf build/fixtures/malformed
"$PY" tests/fixtures/malformed.py build/fixtures/malformed build/fixtures/state_io.tandem build/fixtures/streaming_conv.tandem build/fixtures/dynamic_appender.tandem
echo "== C tests (native)"
ctest --test-dir build/native --output-on-failure -j 2
echo "== the kernel self-test on arm64 (cross-built, under qemu-aarch64: SIMDe's NEON mapping; scripts/arm64_selftest.sh)"
bash scripts/arm64_selftest.sh
echo "== C tests (AddressSanitizer + UndefinedBehaviorSanitizer)"
ctest --test-dir build/asan --output-on-failure -j 2
echo "== Fuzzing the loader for 60 s (libFuzzer, ASan+UBSan)"
bash scripts/fuzz.sh 60
echo "== Python tests"
rm -rf build/fixtures/ops build/fixtures/programs # recorded anew for tests/js/ops.test.js and random-programs.test.js
TANDEM_WHEEL="$WHEEL" TANDEM_OPS_FIXTURES=build/fixtures/ops TANDEM_PROGRAM_FIXTURES=build/fixtures/programs "$PY" -m pytest -q -p no:cacheprovider -n 2 tests/python
echo "== Python lint and format (ruff check, ruff format --check, ruff.toml: python/, tests/, bench/, scripts/, demo/, examples/)" && "$(dirname "$PY")/ruff" check --quiet . && "$(dirname "$PY")/ruff" format --check --quiet .
echo "== C format (scripts/format_c.sh --check: .clang-format over src/, include/, tests/c/, tests/fuzz/)" && bash scripts/format_c.sh --check
echo "== JS lint (npm run lint: ESLint over web/, node/, the JS tests, bench/**/*.mjs and demo/)" && npm run lint --silent
echo "== JS tests (Node on the SIMD128 builds, and headless Chromium)"
node --test tests/js/ tests/browser/
echo "== JS tests again in Node with relaxed SIMD (the relaxed builds, web/tandem*-relaxed.wasm)"
node --experimental-wasm-relaxed-simd --test tests/js/
