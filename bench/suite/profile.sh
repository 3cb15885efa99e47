#!/usr/bin/env bash
# npm run bench:profile [-- --flag-fraction=F]: decode steps op by op (bench/suite/decode_profile.mjs):
# the transformer family at KV-cache capacity 256 and 2048, and the SmolLM-135M-shaped Llama
# (exported once into build/bench by bench/models/smollm.py, about 3 minutes; delete it to re-export).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=$(bash scripts/setup.sh | tail -n 1)
TANDEM_NO_ASAN=1 bash scripts/build.sh >/dev/null
"$PY" bench/models/export_lm.py build/bench 256 2048 >/dev/null
[ -f build/bench/smollm.tandem ] && [ -f build/bench/smollm.json ] || "$PY" -W ignore bench/models/smollm.py build/bench --tandem-only
node bench/suite/decode_profile.mjs build/bench "$@"
