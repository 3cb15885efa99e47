#!/usr/bin/env bash
# Every test: builds, exports the fixtures, then C (ctest, plain and ASan+UBSan), Python (pytest)
# and JS (node --test, in Node and in headless Chromium). Stops at the first failing suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/setup.sh chromium | tail -n 1)
bash scripts/build.sh
echo "== fixtures"
"$PY" -W ignore tests/fixtures/make.py build/fixtures
echo "== C tests (native)"
ctest --test-dir build/native --output-on-failure
echo "== C tests (AddressSanitizer + UndefinedBehaviorSanitizer)"
ctest --test-dir build/asan --output-on-failure
echo "== Python tests"
TANDEM_OPS_FIXTURES=build/fixtures/ops "$PY" -m pytest -q -p no:cacheprovider tests/python
echo "== JS tests (Node, and headless Chromium)"
node --test tests/js/ tests/browser/
