#!/usr/bin/env bash
# q8_avx2_walk.sh [OLD_REV] [ROUNDS] — builds bench/probes/q8_avx2_walk.c against this tree's native
# library (build/native/libtandem_static.a) and OLD_REV's (default main) src/kernels/quant_x86.c with its
# tdm_q8_gemv_dot__avx2 renamed old_q8_gemv_dot__avx2, then runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build/q8_avx2_walk
mkdir -p "$out"
git show "${1:-main}:src/kernels/quant_x86.c" > "$out/old_x86.c"
cc -O3 -std=gnu11 -Iinclude -Isrc -Isrc/kernels -Dtdm_q8_gemv_dot__avx2=old_q8_gemv_dot__avx2 -c "$out/old_x86.c" -o "$out/old_x86.o"
cc -O3 -std=gnu11 -mavx2 -Iinclude -Isrc bench/probes/q8_avx2_walk.c "$out/old_x86.o" build/native/libtandem_static.a \
  -Wl,--allow-multiple-definition -lm -lpthread -o "$out/q8_avx2_walk"
"$out/q8_avx2_walk" "${2:-15}"
