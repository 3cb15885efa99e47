/* quant_simd128.h — the SIMD128 helpers that the quantized kernels' SIMD128 variants
 * (quant_simd128.c) and their relaxed-SIMD ones (quant_relaxed.c) share: the int8 GEMV's pairwise
 * integer dot, its block totals and its 32-column store. src/kernels/ only. */
#ifndef TDM_QUANT_SIMD128_H
#define TDM_QUANT_SIMD128_H

#include "variants.h"

#if TDM_SIMD128
#include "vec.h"

/* The 32 columns of four panels' sums s0..s7 times their column scales at y, or only the first n
 * (the fourth panel may be partial: 24 < n). */
static inline void store32_scaled(float *y, const float *sc, v128_t s0, v128_t s1, v128_t s2, v128_t s3, v128_t s4, v128_t s5, v128_t s6,
                                  v128_t s7, int64_t n) {
  tdm_store8(y, wasm_f32x4_mul(s0, wasm_v128_load(sc)), wasm_f32x4_mul(s1, wasm_v128_load(sc + 4)), 8);
  tdm_store8(y + 8, wasm_f32x4_mul(s2, wasm_v128_load(sc + 8)), wasm_f32x4_mul(s3, wasm_v128_load(sc + 12)), 8);
  tdm_store8(y + 16, wasm_f32x4_mul(s4, wasm_v128_load(sc + 16)), wasm_f32x4_mul(s5, wasm_v128_load(sc + 20)), 8);
  tdm_store8(y + 24, wasm_f32x4_mul(s6, wasm_v128_load(sc + 24)), wasm_f32x4_mul(s7, wasm_v128_load(sc + 28)), n - 24);
}

/* Rows k, k + 1 of a panel (16 bytes: k's 8 columns, then k + 1's) interleaved so that each
 * column's two weights are adjacent, widened to i16 and dotted with the activation pair x (k in the
 * low half of each i32 lane): the i32x4 sums w[k][c]·x[k] + w[k+1][c]·x[k+1] of columns 0-3 into
 * *lo and 4-7 into *hi. For an odd K's last k, b holds row k alone (zero upper bytes). */
static inline void q8_dot_pair(v128_t b, v128_t x, v128_t *lo, v128_t *hi) {
  b = wasm_i8x16_shuffle(b, b, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  *lo = wasm_i32x4_add(*lo, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(b), x));
  *hi = wasm_i32x4_add(*hi, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(b), x));
}

/* A block's exact int32 sums into the float total, unfused (as the scalar reference rounds). */
static inline v128_t q8_dot_total(v128_t t, v128_t s, v128_t d) {
  return wasm_f32x4_add(t, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s), d));
}
#endif

#endif
