#!/usr/bin/env bash
# Installs what tandem needs when it is missing, and only then: Emscripten, CMake and Ninja from
# Debian's packages, torch into a virtual environment outside the clone (reused by every clone on
# this machine), npm dependencies. Safe to run again; prints the venv's python on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=()
command -v emcc >/dev/null 2>&1 || missing+=(emscripten)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
for pkg in "$@"; do  # extra Debian packages a caller needs (e.g. chromium, clang)
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]} from Debian's packages" >&2
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >&2
fi

VENV="${TANDEM_VENV:-$HOME/.cache/tandem-venv}"
if ! "$VENV/bin/python" -c "import torch, numpy, pytest, transformers, wasmtime" >/dev/null 2>&1; then
  echo "setup: installing python/requirements.txt into $VENV (torch is a large download the first time)" >&2
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check -r python/requirements.txt >&2
fi

if [ ! -x node_modules/.bin/tsc ] || [ ! -d node_modules/playwright-core ]; then
  npm ci --no-audit --no-fund >&2
fi
echo "$VENV/bin/python"
