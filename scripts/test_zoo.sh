#!/usr/bin/env bash
# npm run test:zoo: every causal-LM class transformers registers, built tiny, through `python -m tandem export`
# and greedy generation against transformers' generate, natively and in wasm (tests/python/test_registry_walk.py,
# which `npm test` runs on a sample); every class passes or is listed in docs/models.md. Builds the runtime first
# when it is missing. Every class runs (the seed is fixed, so pytest-xdist workers agree: "-n 2" works);
# pytest options pass through ("-k Llama", "-n 2").
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${TANDEM_VENV:-$HOME/.cache/tandem-venv}"
PY="${TANDEM_PYTHON:-$VENV/bin/python}"
[ -x "$PY" ] || PY=python3
test -f web/tandem.wasm || bash scripts/build.sh
TANDEM_ZOO_SEED="${TANDEM_ZOO_SEED:-0}" TANDEM_ZOO=all exec nice -n 10 "$PY" -W ignore -m pytest -q -p no:cacheprovider tests/python/test_registry_walk.py "$@"
