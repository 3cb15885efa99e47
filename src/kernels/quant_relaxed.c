/* quant_relaxed.c — the quantized kernels on the relaxed integer dot product
 * (i16x8.relaxed_dot_i8x16_i7x16_s), compiled where the build has it (TDM_RELAXED_DOT, simd.h:
 * clang-19's tandem-relaxed.wasm): the int8 and int4 integer-dot GEMVs, bit for bit their scalar
 * references in quant.c (operands kept in the range where every engine computes the dot exactly).
 * Declared in variants.h; config.c picks the int4 one; tests/c/kernel_selftest.c checks both. */
#include "quant_simd128.h"

#if TDM_RELAXED_DOT
/* Rows k..k+3 of a panel (8 columns each) regrouped so that each column's four weights are adjacent:
 * *lo holds columns 0-3 (bytes 4c..4c+3 = w[k..k+3][c]), *hi columns 4-7. One byte shuffle per pair
 * of rows (rows k, k+1 interleaved), then one 16-bit interleave per half. */
static inline void q8_quad(const int8_t *p, v128_t *lo, v128_t *hi) {
  const v128_t r01 = wasm_v128_load(p), r23 = wasm_v128_load(p + 16);
  const v128_t a = wasm_i8x16_shuffle(r01, r01, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  const v128_t b = wasm_i8x16_shuffle(r23, r23, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  *lo = wasm_i16x8_shuffle(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
  *hi = wasm_i16x8_shuffle(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
}

/* s += the exact sums over four k of w·x for four columns (w: q8_quad's layout; xp, xn: the
 * activations' positive and negative parts, four bytes splatted). Both parts are in [0, 127], where
 * the relaxed dot is exact on every engine; each 16-bit lane of either dot is a sum of two products
 * of magnitude at most 128·127 (no saturation), and their difference is the true two-term sum, also
 * within 16 bits (at most 2·128·127 in magnitude), so the wrapping subtract is exact; the pairwise
 * widening add then sums the column's two halves into 32 bits. */
static inline v128_t q8_dot_quad(v128_t s, v128_t w, v128_t xp, v128_t xn) {
  const v128_t d = wasm_i16x8_sub(wasm_i16x8_relaxed_dot_i8x16_i7x16(w, xp), wasm_i16x8_relaxed_dot_i8x16_i7x16(w, xn));
  return wasm_i32x4_add(s, wasm_i32x4_extadd_pairwise_i16x8(d));
}

/* xq[k..k+3] (int16 in [-127, 127]) -> its positive parts max(x, 0) and negative parts max(-x, 0)
 * as four bytes, each splatted over the vector (the same k for every column). */
static inline void q8_split4(const int16_t *xq, v128_t *xp, v128_t *xn) {
  const v128_t v = wasm_v128_load64_zero(xq), z = wasm_i16x8_splat(0);
  const v128_t p = wasm_u8x16_narrow_i16x8(wasm_i16x8_max(v, z), z), n = wasm_u8x16_narrow_i16x8(wasm_i16x8_max(wasm_i16x8_neg(v), z), z);
  *xp = wasm_i32x4_shuffle(p, p, 0, 0, 0, 0);
  *xn = wasm_i32x4_shuffle(n, n, 0, 0, 0, 0);
}

/* As tdm_q8_gemv_dot__simd128 (four panels, then one; exact int32 block sums added unfused in block
 * order, so the same bits), four k per step on the relaxed dot; a block's last 1 to 3 k (only the
 * last block can have them) by the SIMD128 pair step. */
void tdm_q8_gemv_dot__relaxed(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale, float *y) {
  int64_t j = 0;
  for (; j + 24 < N; j += 32) {
    const int8_t *p0 = qp + (j / 8) * K * 8, *p1 = p0 + K * 8, *p2 = p1 + K * 8, *p3 = p2 + K * 8;
    v128_t t0 = wasm_f32x4_splat(0), t1 = t0, t2 = t0, t3 = t0, t4 = t0, t5 = t0, t6 = t0, t7 = t0;
    for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
      const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
      v128_t s0 = wasm_i32x4_splat(0), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
      int64_t k = k0;
      for (; k + 4 <= k1; k += 4) {
        v128_t xp, xn, lo, hi;
        q8_split4(xq + k, &xp, &xn);
        q8_quad(p0 + k * 8, &lo, &hi);
        s0 = q8_dot_quad(s0, lo, xp, xn), s1 = q8_dot_quad(s1, hi, xp, xn);
        q8_quad(p1 + k * 8, &lo, &hi);
        s2 = q8_dot_quad(s2, lo, xp, xn), s3 = q8_dot_quad(s3, hi, xp, xn);
        q8_quad(p2 + k * 8, &lo, &hi);
        s4 = q8_dot_quad(s4, lo, xp, xn), s5 = q8_dot_quad(s5, hi, xp, xn);
        q8_quad(p3 + k * 8, &lo, &hi);
        s6 = q8_dot_quad(s6, lo, xp, xn), s7 = q8_dot_quad(s7, hi, xp, xn);
      }
      for (; k + 2 <= k1; k += 2) {
        const v128_t x = wasm_v128_load32_splat(xq + k);
        q8_dot_pair(wasm_v128_load(p0 + k * 8), x, &s0, &s1);
        q8_dot_pair(wasm_v128_load(p1 + k * 8), x, &s2, &s3);
        q8_dot_pair(wasm_v128_load(p2 + k * 8), x, &s4, &s5);
        q8_dot_pair(wasm_v128_load(p3 + k * 8), x, &s6, &s7);
      }
      if (k < k1) {
        const v128_t x = wasm_v128_load32_splat(xq + k);
        q8_dot_pair(wasm_v128_load64_zero(p0 + k * 8), x, &s0, &s1);
        q8_dot_pair(wasm_v128_load64_zero(p1 + k * 8), x, &s2, &s3);
        q8_dot_pair(wasm_v128_load64_zero(p2 + k * 8), x, &s4, &s5);
        q8_dot_pair(wasm_v128_load64_zero(p3 + k * 8), x, &s6, &s7);
      }
      const v128_t d = wasm_f32x4_splat(xs[b]);
      t0 = q8_dot_total(t0, s0, d), t1 = q8_dot_total(t1, s1, d), t2 = q8_dot_total(t2, s2, d), t3 = q8_dot_total(t3, s3, d);
      t4 = q8_dot_total(t4, s4, d), t5 = q8_dot_total(t5, s5, d), t6 = q8_dot_total(t6, s6, d), t7 = q8_dot_total(t7, s7, d);
    }
    store32_scaled(y + j, scale + j, t0, t1, t2, t3, t4, t5, t6, t7, N - j);
  }
  for (; j < N; j += 8) {
    const int8_t *p = qp + (j / 8) * K * 8;
    v128_t t0 = wasm_f32x4_splat(0), t1 = t0;
    for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
      const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
      v128_t s0 = wasm_i32x4_splat(0), s1 = s0;
      int64_t k = k0;
      for (; k + 4 <= k1; k += 4) {
        v128_t xp, xn, lo, hi;
        q8_split4(xq + k, &xp, &xn);
        q8_quad(p + k * 8, &lo, &hi);
        s0 = q8_dot_quad(s0, lo, xp, xn), s1 = q8_dot_quad(s1, hi, xp, xn);
      }
      for (; k + 2 <= k1; k += 2) q8_dot_pair(wasm_v128_load(p + k * 8), wasm_v128_load32_splat(xq + k), &s0, &s1);
      if (k < k1) q8_dot_pair(wasm_v128_load64_zero(p + k * 8), wasm_v128_load32_splat(xq + k), &s0, &s1);
      const v128_t d = wasm_f32x4_splat(xs[b]);
      t0 = q8_dot_total(t0, s0, d), t1 = q8_dot_total(t1, s1, d);
    }
    tdm_store8(y + j, wasm_f32x4_mul(t0, wasm_v128_load(scale + j)), wasm_f32x4_mul(t1, wasm_v128_load(scale + j + 4)), N - j);
  }
}

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
