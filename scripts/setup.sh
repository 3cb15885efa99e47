#!/usr/bin/env bash
# Installs what tandem needs when it is missing, and only then: Emscripten, clang-19 with wasi-libc,
# CMake, Ninja, SIMDe, an arm64 cross compiler and qemu-user from Debian's packages, torch into a virtual environment outside the clone
# (reused by every clone on this machine), npm dependencies. Safe to run again; prints the venv's python on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=()
command -v emcc >/dev/null 2>&1 || missing+=(emscripten)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
# SIMDe (header only): the native build's SIMD kernels (src/kernels/simd.h)
[ -f /usr/include/simde/wasm/simd128.h ] || missing+=(libsimde-dev)
# tandem-relaxed.wasm: clang-19 and wasm-ld-19 over wasi-libc, with compiler-rt's wasm32 builtins
# (cmake/wasi-clang.cmake)
command -v clang-19 >/dev/null 2>&1 || missing+=(clang-19)
command -v wasm-ld-19 >/dev/null 2>&1 || missing+=(lld-19)
[ -f /usr/lib/wasm32-wasi/libc.a ] || missing+=(wasi-libc)
[ -n "$(ls /usr/lib/llvm-19/lib/clang/19/lib/*/libclang_rt.builtins*wasm32*.a 2>/dev/null)" ] || missing+=(libclang-rt-19-dev-wasm32)
# the arm64 kernel self-test (scripts/arm64_selftest.sh): a cross compiler, its libc, qemu-user
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing+=(gcc-aarch64-linux-gnu)
[ -f /usr/aarch64-linux-gnu/lib/libc.a ] || missing+=(libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null 2>&1 || missing+=(qemu-user)
# the C formatter the test command checks (.clang-format, scripts/format_c.sh)
command -v clang-format-19 >/dev/null 2>&1 || missing+=(clang-format-19)
for pkg in "$@"; do  # extra Debian packages a caller needs (e.g. chromium, clang)
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]} from Debian's packages" >&2
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >&2
fi

VENV="${TANDEM_VENV:-$HOME/.cache/tandem-venv}"
# The venv is (re)filled whenever the requirement files differ from what it was last filled from, so a
# venv made before a requirement was added is completed, not trusted. The field packages (moshi,
# pocket-tts) install with --no-deps: their own pins would pull another torch.
REQS=(python/requirements.txt python/requirements-field.txt)
STAMP="$VENV/.tandem-requirements"
want=$(cat "${REQS[@]}" | sha256sum | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing python/requirements*.txt into $VENV (torch is a large download the first time)" >&2
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check -r python/requirements.txt >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -r python/requirements-field.txt >&2
  echo "$want" >"$STAMP"
fi
# Every module the tests import, directly or through PyTorch's test utilities: a missing one fails here,
# by name, instead of in the middle of the test run.
"$VENV/bin/python" - <<'PY' >&2
import importlib, sys
mods = ["torch", "numpy", "pytest", "transformers", "wasmtime", "expecttest", "gguf",
        "torch.testing._internal.common_methods_invocations", "moshi.models.loaders", "pocket_tts",
        "silero_vad", "onnxruntime"]
bad = []
for m in mods:
    try:
        importlib.import_module(m)
    except Exception as e:  # noqa: BLE001 - report every failure by name
        bad.append(f"{m}: {type(e).__name__}: {e}")
if bad:
    sys.exit("setup: the venv cannot import what the tests need:\n  " + "\n  ".join(bad)
             + "\nadd the missing package to python/requirements*.txt")
PY

# npm: installed again when any dependency in package.json is missing from node_modules (a clone
# whose node_modules predates a new dependency is completed, not trusted)
if ! node -e '
  const p = require("./package.json");
  const names = Object.keys({ ...p.dependencies, ...p.devDependencies });
  const fs = require("fs");
  process.exit(names.every((n) => fs.existsSync(`node_modules/${n}/package.json`)) ? 0 : 1);' 2>/dev/null; then
  npm ci --no-audit --no-fund >&2
fi
# The package's own dependencies into npm's cache with their registry documents, as package.json's
# ranges resolve today and at package-lock.json's versions (and those of their own dependencies):
# tests/js/pack.test.js installs the packed tarball into an empty project offline, which resolves
# the ranges from those documents, and `npm ci` caches only the locked tarballs (a fresh machine's
# cache has nothing else).
mapfile -t RUNTIME_DEPS < <(node -e '
  const p = require("./package.json"), l = require("./package-lock.json");
  for (const [n, r] of Object.entries(p.dependencies ?? {})) console.log(`${n}@${r}`);
  for (const [k, v] of Object.entries(l.packages))
    if (k.startsWith("node_modules/") && !v.dev && !v.devOptional && !v.optional)
      console.log(`${k.slice(k.lastIndexOf("node_modules/") + 13)}@${v.version}`);')
[ ${#RUNTIME_DEPS[@]} -eq 0 ] || npm cache add "${RUNTIME_DEPS[@]}" >&2
echo "$VENV/bin/python"
