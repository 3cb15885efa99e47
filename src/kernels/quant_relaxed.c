/* quant_relaxed.c — the quantized kernels on the relaxed integer dot product
 * (i16x8.relaxed_dot_i8x16_i7x16_s), compiled where the build has it (TDM_RELAXED_DOT, simd.h:
 * clang-19's tandem-relaxed.wasm): the int4 integer-dot GEMV, bit for bit its scalar reference in
 * quant.c (operands kept in the range where every engine computes the dot exactly). Declared in
 * variants.h; config.c picks it; tests/c/kernel_selftest.c checks it. An int8 GEMV on the relaxed
 * dot measured no faster than the SIMD128 one (docs/benchmarks.md), so int8 has none. */
#include "variants.h"
#include "vec.h"

#if TDM_RELAXED_DOT
/* Byte rows r, r + 1 of an int4 panel (k = 2r .. 2r + 3 of 8 columns) -> the codes biased to q + 8,
 * in the relaxed dot's pair layout: *a = [u(k, c), u(k + 1, c)] for c = 0..7, *b the same for k + 2,
 * k + 3 (the xor with 0x88 flips bit 3 of each nibble: q + 8; then a mask, a 16-bit shift, and two
 * byte interleaves). */
static inline void q4_codes4(v128_t bytes, v128_t *a, v128_t *b) {
  const v128_t m = wasm_i8x16_splat(0x0F), x = wasm_v128_xor(bytes, wasm_i8x16_splat((int8_t)0x88));
  const v128_t lo = wasm_v128_and(x, m), hi = wasm_v128_and(wasm_u16x8_shr(x, 4), m);
  *a = wasm_i8x16_shuffle(lo, hi, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  *b = wasm_i8x16_shuffle(lo, hi, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
}

/* np (1 or 2) panels from p (KB byte rows apart), scales sc (NG·8 apart), into y (np·8 columns, n
 * written). Per group: 16-bit sums of xq·(q + 8) over at most 16 k (each term at most 127·15 in
 * magnitude: 16 of them fit), widened into 32-bit sums, minus 8·xsum[g]; then the group's total as
 * the scalar reference adds it. */
static inline __attribute__((always_inline)) void q4_dot_panels(int np, int64_t K, int64_t G, int64_t KB, int64_t NG, const int8_t *xq,
                                                                const float *xs, const int32_t *xsum, const uint8_t *p, const float *sc,
                                                                float *y, int64_t n) {
  v128_t t[4] = {wasm_f32x4_splat(0), wasm_f32x4_splat(0), wasm_f32x4_splat(0), wasm_f32x4_splat(0)};
  for (int64_t g = 0; g < NG; g++) {
    const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
    v128_t s[4] = {wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0)};
    for (int64_t k = g * G; k < k1;) {
      const int64_t kend = k + 16 < k1 ? k + 16 : k1;
      v128_t h[2] = {wasm_i16x8_splat(0), wasm_i16x8_splat(0)};
      for (; k + 4 <= kend; k += 4) {
        const v128_t x0 = wasm_v128_load16_splat(xq + k), x1 = wasm_v128_load16_splat(xq + k + 2);
        for (int i = 0; i < np; i++) {
          v128_t a, b;
          q4_codes4(wasm_v128_load(p + i * KB * 8 + (k / 2) * 8), &a, &b);
          h[i] = wasm_i16x8_add(h[i], wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(x0, a), wasm_i16x8_relaxed_dot_i8x16_i7x16(x1, b)));
        }
      }
      for (; k < kend; k += 2) { /* one byte row; past an odd K its high nibble meets the pad 0 of xq */
        const v128_t x0 = wasm_v128_load16_splat(xq + k);
        for (int i = 0; i < np; i++) {
          v128_t a, b;
          q4_codes4(wasm_v128_load64_zero(p + i * KB * 8 + (k / 2) * 8), &a, &b);
          h[i] = wasm_i16x8_add(h[i], wasm_i16x8_relaxed_dot_i8x16_i7x16(x0, a));
        }
      }
      for (int i = 0; i < np; i++) {
        s[2 * i] = wasm_i32x4_add(s[2 * i], wasm_i32x4_extend_low_i16x8(h[i]));
        s[2 * i + 1] = wasm_i32x4_add(s[2 * i + 1], wasm_i32x4_extend_high_i16x8(h[i]));
      }
    }
    const v128_t bias = wasm_i32x4_splat(8 * xsum[g]), d = wasm_f32x4_splat(xs[g]);
    for (int i = 0; i < 2 * np; i++) {
      const v128_t f = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_sub(s[i], bias)), d);
      t[i] = wasm_f32x4_add(t[i], wasm_f32x4_mul(f, wasm_v128_load(sc + (i / 2) * NG * 8 + g * 8 + (i % 2) * 4)));
    }
  }
  tdm_store8(y, t[0], t[1], n);
  if (np > 1) tdm_store8(y + 8, t[2], t[3], n - 8);
}

void tdm_q4_gemv_dot__relaxed(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum, const uint8_t *qp,
                              const float *scale, float *y) {
  const int64_t KB = (K + 1) / 2, NG = K / G + (K % G != 0);
  int64_t j = 0;
  for (; j + 8 < N; j += 16) q4_dot_panels(2, K, G, KB, NG, xq, xs, xsum, qp + (j / 8) * KB * 8, scale + (j / 8) * NG * 8, y + j, N - j);
  for (; j < N; j += 8) q4_dot_panels(1, K, G, KB, NG, xq, xs, xsum, qp + (j / 8) * KB * 8, scale + (j / 8) * NG * 8, y + j, N - j);
}
#endif
