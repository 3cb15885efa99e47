#!/usr/bin/env bash
# The kernel self-test (tests/c/kernel_selftest.c) cross-built for arm64 and run under qemu-user: the
# SIMD128 kernels through SIMDe's NEON mapping (src/kernels/simd.h) against their scalar references.
# Needs Debian's gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user and libsimde-dev
# (scripts/setup.sh installs them); skips, saying why, when any is absent. About 30 s to build and
# 30 s to run on one x86-64 core. Builds into build/arm64.
set -euo pipefail
cd "$(dirname "$0")/.."
CC=${TANDEM_ARM64_CC:-aarch64-linux-gnu-gcc}
for tool in "$CC" qemu-aarch64; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "arm64 kernel self-test: skipped ($tool not found; scripts/setup.sh installs gcc-aarch64-linux-gnu and qemu-user)"
    exit 0
  fi
done
if [ ! -f /usr/include/simde/wasm/simd128.h ]; then
  echo "arm64 kernel self-test: skipped (no SIMDe headers; scripts/setup.sh installs libsimde-dev)"
  exit 0
fi
mkdir -p build/arm64/include
# SIMDe is header-only and target-independent: give the cross compiler that directory alone, not the
# host's whole /usr/include
ln -sfn /usr/include/simde build/arm64/include/simde
bin=build/arm64/kernel_selftest
newest=$(find src include tests/c/kernel_selftest.c -newer "$bin" -name '*.[ch]' 2>/dev/null | head -n 1 || true)
if [ ! -x "$bin" ] || [ -n "$newest" ]; then
  # one static executable (qemu-aarch64 then needs no arm64 sysroot at run time); -ffp-contract=off:
  # GCC fuses a * b + c into one fma on arm64 by default, which would make the scalar references
  # fused (a dot product with an overflowing product then gave -inf where the unfused sum is NaN)
  "$CC" -O2 -std=gnu11 -ffp-contract=off -pthread -Wall -Iinclude -Isrc -isystem build/arm64/include tests/c/kernel_selftest.c src/*.c \
    src/kernels/*.c -lm -static -o "$bin"
fi
qemu-aarch64 "$bin"
