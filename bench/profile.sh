#!/usr/bin/env bash
# Decode-step profile of the transformer family at KV-cache capacity 256 and 2048, same fill.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/setup.sh | tail -n 1)
TANDEM_NO_ASAN=1 bash scripts/build.sh >/dev/null
"$PY" bench/export_lm.py build/bench 256 2048 >/dev/null
node bench/decode_profile.mjs build/bench
