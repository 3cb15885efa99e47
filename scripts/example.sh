#!/usr/bin/env bash
# The main job: export the original report's model (two modules sharing one buffer) with
# tandem.export, then call its methods from Node through the wasm runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/setup.sh | tail -n 1)
TANDEM_NO_ASAN=1 bash scripts/build.sh >/dev/null
mkdir -p build/example
"$PY" -W ignore examples/export_shared.py build/example/shared.tandem
node examples/run_shared.mjs build/example/shared.tandem
