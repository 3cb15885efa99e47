#!/usr/bin/env bash
# Differential fuzzing beyond npm test's seeds: random stateful programs (tests/programs.py) exported
# and run against eager, natively and then (the recorded ones) in wasm on 1/2 threads and in a worker.
#   npm run fuzz:programs                 # 2000 seeds from 100000
#   COUNT=500 FIRST=7 npm run fuzz:programs
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/setup.sh | tail -n 1)
[ -f build/native/libtandem.so ] && [ -f web/tandem.wasm ] || TANDEM_NO_ASAN=1 bash scripts/build.sh
OUT=build/fixtures/programs-fuzz
rm -rf "$OUT"
"$PY" -W ignore tests/programs.py --count "${COUNT:-2000}" --first "${FIRST:-100000}" --record "$OUT"
TANDEM_PROGRAM_FIXTURES="$OUT" node --test tests/js/random-programs.test.js
TANDEM_PROGRAM_FIXTURES="$OUT" node --experimental-wasm-relaxed-simd --test tests/js/random-programs.test.js
