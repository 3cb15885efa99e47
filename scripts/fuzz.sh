#!/usr/bin/env bash
# Builds the libFuzzer target (clang, ASan+UBSan) and fuzzes the loader for $1 seconds (default 60),
# seeded with the exported fixtures and tests/fuzz/regressions (inputs that once crashed it, replayed
# first every run). Fails on any crash, sanitizer report or leak.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-60}"
mkdir -p build/fuzz/corpus build/fuzz/seeds
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude -Isrc \
  src/*.c src/kernels/*.c tests/fuzz/fuzz_load.c -lm -o build/fuzz/fuzz_load
cp build/fixtures/*.tandem build/fuzz/seeds/ 2>/dev/null || true
cp tests/fuzz/regressions/* build/fuzz/seeds/
find build/fuzz/seeds -size +64k -delete   # small seeds fuzz faster; the large ones add little
build/fuzz/fuzz_load -max_total_time="$SECS" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
  -print_final_stats=1 -artifact_prefix=build/fuzz/ build/fuzz/corpus build/fuzz/seeds 2>&1 | tail -n 25
