#!/usr/bin/env bash
# The demo: builds what is missing, serves the repository on 127.0.0.1 and prints the page's URL.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f web/tandem.wasm ] || { bash scripts/setup.sh >/dev/null && TANDEM_NO_ASAN=1 bash scripts/build.sh >/dev/null; }
exec node scripts/serve.mjs "${PORT:-8080}"
