#!/usr/bin/env bash
# npm run wheel: builds dist/tandem_runtime-<version>-py3-none-any.whl, one universal wheel holding
# the Python package (python/tandem) and the runtime's portable tandem.wasm, which tandem.load runs
# through the `wasmtime` package. Builds the wasm first when web/tandem.wasm is missing. The version
# is package.json's (python/setup.py reads it). `bash scripts/wheel.sh DIR` puts the wheel in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)
VENV="${TANDEM_VENV:-$HOME/.cache/tandem-venv}"
PY="${TANDEM_PYTHON:-$VENV/bin/python}"
[ -x "$PY" ] || PY=python3
test -f web/tandem.wasm || bash scripts/build.sh
VERSION=$(node -p 'require("./package.json").version')
rm -rf python/build "$OUT/tandem_runtime-$VERSION-py3-none-any.whl" # no file of an earlier build lingers
# With a recent enough setuptools here the build needs no network; else pip fetches one from PyPI.
ISOLATION=--no-build-isolation
"$PY" -c 'import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 77)' 2>/dev/null || ISOLATION=
"$PY" -m pip wheel -q --disable-pip-version-check --no-deps $ISOLATION -w "$OUT" ./python
rm -rf python/build
WHEEL="$OUT/tandem_runtime-$VERSION-py3-none-any.whl"
test -f "$WHEEL" || { echo "wheel: pip did not write $WHEEL" >&2; ls "$OUT" >&2; exit 1; }
echo "$WHEEL"
