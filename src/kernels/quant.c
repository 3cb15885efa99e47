/* quant.c — matrix multiply and row gather on weights quantized at export (docs/ops.md, "Quantized
 * weights"): matmul_q8 / embedding_q8 (int8, one float32 scale per output column) and matmul_q4 /
 * embedding_q4 (signed 4-bit, one float32 scale per column and group of G consecutive k). Weights
 * are packed in 8-column panels like matmul_packed's:
 *   int8:  qp [P, K, 8]            qp[p][k][j] = q[k][8p + j]
 *   int4:  qp [P, ceil(K/2), 8]    byte qp[p][k/2][j] holds q[k][8p + j], even k in the low nibble
 *   scale: [P, 8] (int8) or [P, ceil(K/G), 8] (int4), zero past N; P = ceil(N/8).
 * Activations and results stay float32: the kernels turn the weights into float lanes in registers
 * (no dequantized copy), so y equals (q · scale) @ a up to float32 rounding. Except matmul_q8 with
 * one row (a decode step): that row is quantized to int8 per block of 32 and multiplied with
 * integer dot products (tdm_q8_gemv_dot, docs/ops.md "Integer dot products"), about 1.5x faster
 * per weight. The scalar references and the SIMD128 variants are declared in variants.h and
 * compared by tests/c/kernel_selftest.c. */
#include "../ops.h"
#include "../threads.h"
#include "../util.h"
#include "variants.h"
#include "vec.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* The signed 4-bit value in the low (hi = 0) or high nibble of b. */
static inline int nibble(uint8_t b, int hi) { return (((hi ? b >> 4 : b) & 15) ^ 8) - 8; }

void tdm_q8_gemm__scalar(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      const int8_t *col = qp + (j / TDM_PANEL) * K * TDM_PANEL + j % TDM_PANEL;
      float acc = 0;
      for (int64_t k = 0; k < K; k++) acc += a[i * K + k] * (float)col[k * TDM_PANEL];
      y[i * N + j] = acc * scale[j];
    }
}

void tdm_q4_gemm__scalar(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale, float *y) {
  const int64_t KB = (K + 1) / 2, NG = K / G + (K % G != 0);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      const uint8_t *col = qp + (j / TDM_PANEL) * KB * TDM_PANEL + j % TDM_PANEL;
      const float *sc = scale + (j / TDM_PANEL) * NG * TDM_PANEL + j % TDM_PANEL;
      float acc = 0;
      for (int64_t g = 0; g < NG; g++) {
        float s = 0;
        const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
        for (int64_t k = g * G; k < k1; k++) s += a[i * K + k] * (float)nibble(col[(k / 2) * TDM_PANEL], (int)(k & 1));
        acc += s * sc[g * TDM_PANEL];
      }
      y[i * N + j] = acc;
    }
}

/* ---- int8 activations (variants.h: tdm_q8_quantize_row) ----------------------------------------- */

bool tdm_q8_quantize_row(int64_t K, const float *a, int16_t *xq, float *xs) {
  for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
    const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
    float m = 0;
    for (int64_t k = k0; k < k1; k++) {
      const float v = fabsf(a[k]);
      if (!(v <= FLT_MAX)) return false; /* NaN or ±inf */
      m = v > m ? v : m;
    }
    const float d = m / 127.0f;
    xs[b] = d;
    for (int64_t k = k0; k < k1; k++) {
      float q = d > 0 ? rintf(a[k] / d) : 0.0f; /* d = 0 also when m is denormal: the block is 0 */
      q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
      xq[k] = (int16_t)q;
    }
  }
  if (K % 2) xq[K] = 0;
  return true;
}

void tdm_q8_gemv_dot__scalar(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale, float *y) {
  for (int64_t j = 0; j < N; j++) {
    const int8_t *col = qp + (j / TDM_PANEL) * K * TDM_PANEL + j % TDM_PANEL;
    float acc = 0;
    for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
      const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
      int32_t s = 0;
      for (int64_t k = k0; k < k1; k++) s += (int32_t)xq[k] * col[k * TDM_PANEL];
      acc = acc + (float)s * xs[b];
    }
    y[j] = acc * scale[j];
  }
}

/* ---- int4 weights, int8 activations (variants.h: tdm_q4_quantize_row) --------------------------- */

bool tdm_q4_quantize_row(int64_t K, int64_t G, const float *a, int8_t *xq, float *xs, int32_t *xsum) {
  for (int64_t k0 = 0, g = 0; k0 < K; k0 += G, g++) {
    const int64_t k1 = k0 + G < K ? k0 + G : K;
    float m = 0;
    for (int64_t k = k0; k < k1; k++) {
      const float v = fabsf(a[k]);
      if (!(v <= FLT_MAX)) return false; /* NaN or ±inf */
      m = v > m ? v : m;
    }
    const float d = m / 127.0f;
    int32_t sum = 0;
    xs[g] = d;
    for (int64_t k = k0; k < k1; k++) {
      float q = d > 0 ? rintf(a[k] / d) : 0.0f;
      q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
      xq[k] = (int8_t)q;
      sum += xq[k];
    }
    xsum[g] = sum;
  }
  xq[K] = 0;
  return true;
}

void tdm_q4_gemv_dot__scalar(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum, const uint8_t *qp,
                             const float *scale, float *y) {
  const int64_t KB = (K + 1) / 2, NG = K / G + (K % G != 0);
  (void)xsum;
  for (int64_t j = 0; j < N; j++) {
    const uint8_t *col = qp + (j / TDM_PANEL) * KB * TDM_PANEL + j % TDM_PANEL;
    const float *sc = scale + (j / TDM_PANEL) * NG * TDM_PANEL + j % TDM_PANEL;
    float acc = 0;
    for (int64_t g = 0; g < NG; g++) {
      const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
      int32_t s = 0;
      for (int64_t k = g * G; k < k1; k++) s += (int32_t)xq[k] * nibble(col[(k / 2) * TDM_PANEL], (int)(k & 1));
      acc = acc + ((float)s * xs[g]) * sc[g * TDM_PANEL];
    }
    y[j] = acc;
  }
}

#if TDM_SIMD128

/* Lanes 0-3 (LO) or 4-7 (HI) of an i16x8 as f32x4, exactly. Not with extend + convert: clang
 * folds those into a conversion from <4 x i16>, which the wasm backend lowers one lane at a time
 * (f32.convert_i32_s x 4; measured 5x slower than the float GEMV). Instead each i16 w, biased to
 * u = w + 2^15 (flip the sign bit), becomes the low half of a float whose high half is 0x4B00:
 * the float 2^23 + u; subtracting 2^23 + 2^15 leaves w (an interleave and a subtract per 4 lanes). */
static inline v128_t f32x4_of_i16(v128_t w, int hi) {
  const v128_t u = wasm_v128_xor(w, wasm_i16x8_splat((int16_t)0x8000)), e = wasm_i16x8_splat(0x4B00);
  const v128_t f = hi ? wasm_i16x8_shuffle(u, e, 4, 12, 5, 13, 6, 14, 7, 15) : wasm_i16x8_shuffle(u, e, 0, 8, 1, 9, 2, 10, 3, 11);
  return wasm_f32x4_sub(f, wasm_f32x4_splat(8421376.0f)); /* 2^23 + 2^15 */
}
#define F32X4_OF_I16_LO(w) f32x4_of_i16((w), 0)
#define F32X4_OF_I16_HI(w) f32x4_of_i16((w), 1)
/* The same for u16 lanes holding q + 8 (int4 codes biased to [0, 15]): no bias flip needed. */
static inline v128_t f32x4_of_q4(v128_t u, int hi) {
  const v128_t e = wasm_i16x8_splat(0x4B00);
  const v128_t f = hi ? wasm_i16x8_shuffle(u, e, 4, 12, 5, 13, 6, 14, 7, 15) : wasm_i16x8_shuffle(u, e, 0, 8, 1, 9, 2, 10, 3, 11);
  return wasm_f32x4_sub(f, wasm_f32x4_splat(8388616.0f)); /* 2^23 + 8 */
}
#define MULADD(s, x, w) ((s) = tdm_madd((x), (w), (s)))

/* ---- int8 -------------------------------------------------------------------------------------- */

/* The 32 columns of four panels' sums s0..s7 times their column scales at y, or only the first n
 * (the fourth panel may be partial: 24 < n). */
static inline void store32_scaled(float *y, const float *sc, v128_t s0, v128_t s1, v128_t s2, v128_t s3, v128_t s4, v128_t s5, v128_t s6,
                                  v128_t s7, int64_t n) {
  tdm_store8(y, wasm_f32x4_mul(s0, wasm_v128_load(sc)), wasm_f32x4_mul(s1, wasm_v128_load(sc + 4)), 8);
  tdm_store8(y + 8, wasm_f32x4_mul(s2, wasm_v128_load(sc + 8)), wasm_f32x4_mul(s3, wasm_v128_load(sc + 12)), 8);
  tdm_store8(y + 16, wasm_f32x4_mul(s4, wasm_v128_load(sc + 16)), wasm_f32x4_mul(s5, wasm_v128_load(sc + 20)), 8);
  tdm_store8(y + 24, wasm_f32x4_mul(s6, wasm_v128_load(sc + 24)), wasm_f32x4_mul(s7, wasm_v128_load(sc + 28)), n - 24);
}

/* M = 1: four panels side by side (one splat of a[k] per 32 columns, four weight streams in
 * flight), each k's 8 int8 weights sign-extended on load (i16x8.load8x8_s) and widened to two f32x4;
 * the column scales are applied once at the end. Then the remaining panels one at a time. */
static void q8_gemv__simd128(int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y) {
  int64_t j = 0;
  for (; j + 24 < N; j += 32) {
    const int8_t *p0 = qp + (j / 8) * K * 8, *p1 = p0 + K * 8, *p2 = p1 + K * 8, *p3 = p2 + K * 8;
    const float *ak = a;
    v128_t s0 = wasm_f32x4_splat(0), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    for (size_t kk = (size_t)K; kk > 0; kk--, ak++, p0 += 8, p1 += 8, p2 += 8, p3 += 8) {
      const v128_t x = wasm_f32x4_splat(*ak);
      const v128_t w0 = wasm_i16x8_load8x8(p0), w1 = wasm_i16x8_load8x8(p1), w2 = wasm_i16x8_load8x8(p2), w3 = wasm_i16x8_load8x8(p3);
      MULADD(s0, x, F32X4_OF_I16_LO(w0));
      MULADD(s1, x, F32X4_OF_I16_HI(w0));
      MULADD(s2, x, F32X4_OF_I16_LO(w1));
      MULADD(s3, x, F32X4_OF_I16_HI(w1));
      MULADD(s4, x, F32X4_OF_I16_LO(w2));
      MULADD(s5, x, F32X4_OF_I16_HI(w2));
      MULADD(s6, x, F32X4_OF_I16_LO(w3));
      MULADD(s7, x, F32X4_OF_I16_HI(w3));
    }
    store32_scaled(y + j, scale + j, s0, s1, s2, s3, s4, s5, s6, s7, N - j);
  }
  for (; j < N; j += 8) {
    const int8_t *p = qp + (j / 8) * K * 8;
    v128_t s0 = wasm_f32x4_splat(0), s1 = s0;
    for (int64_t k = 0; k < K; k++, p += 8) {
      const v128_t x = wasm_f32x4_splat(a[k]), w = wasm_i16x8_load8x8(p);
      MULADD(s0, x, F32X4_OF_I16_LO(w));
      MULADD(s1, x, F32X4_OF_I16_HI(w));
    }
    tdm_store8(y + j, wasm_f32x4_mul(s0, wasm_v128_load(scale + j)), wasm_f32x4_mul(s1, wasm_v128_load(scale + j + 4)), N - j);
  }
}

/* ---- int8 weights × int8 activations, M = 1 --------------------------------------------------- */

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

void tdm_q8_gemv_dot__simd128(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale, float *y) {
  int64_t j = 0;
  for (; j + 24 < N; j += 32) {
    const int8_t *p0 = qp + (j / 8) * K * 8, *p1 = p0 + K * 8, *p2 = p1 + K * 8, *p3 = p2 + K * 8;
    v128_t t0 = wasm_f32x4_splat(0), t1 = t0, t2 = t0, t3 = t0, t4 = t0, t5 = t0, t6 = t0, t7 = t0;
    for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
      const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
      v128_t s0 = wasm_i32x4_splat(0), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
      int64_t k = k0;
      for (; k + 2 <= k1; k += 2) {
        const v128_t x = wasm_v128_load32_splat(xq + k);
        q8_dot_pair(wasm_v128_load(p0 + k * 8), x, &s0, &s1);
        q8_dot_pair(wasm_v128_load(p1 + k * 8), x, &s2, &s3);
        q8_dot_pair(wasm_v128_load(p2 + k * 8), x, &s4, &s5);
        q8_dot_pair(wasm_v128_load(p3 + k * 8), x, &s6, &s7);
      }
      if (k < k1) { /* odd K: its last row alone, paired with the padding 0 of xq */
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
      for (; k + 2 <= k1; k += 2) q8_dot_pair(wasm_v128_load(p + k * 8), wasm_v128_load32_splat(xq + k), &s0, &s1);
      if (k < k1) q8_dot_pair(wasm_v128_load64_zero(p + k * 8), wasm_v128_load32_splat(xq + k), &s0, &s1);
      const v128_t d = wasm_f32x4_splat(xs[b]);
      t0 = q8_dot_total(t0, s0, d), t1 = q8_dot_total(t1, s1, d);
    }
    tdm_store8(y + j, wasm_f32x4_mul(t0, wasm_v128_load(scale + j)), wasm_f32x4_mul(t1, wasm_v128_load(scale + j + 4)), N - j);
  }
}

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
#endif

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

/* Rows i..i+R-1 of y, the 8 columns of panel j / 8: each k's weights are widened once and serve R
 * rows (R = 1 to 4); the column scales are applied at the end. */
#define Q8_TILE(R) \
  do { \
    v128_t c00 = wasm_f32x4_splat(0), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00; \
    const float *a0 = a + i * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K; \
    const int8_t *pb = panel; \
    for (size_t kk = (size_t)K; kk > 0; kk--, a0++, a1++, a2++, a3++, pb += 8) { \
      const v128_t w = wasm_i16x8_load8x8(pb), b0 = F32X4_OF_I16_LO(w), b1 = F32X4_OF_I16_HI(w); \
      v128_t x = wasm_f32x4_splat(*a0); \
      MULADD(c00, x, b0); \
      MULADD(c01, x, b1); \
      if (R > 1) { \
        x = wasm_f32x4_splat(*a1); \
        MULADD(c10, x, b0); \
        MULADD(c11, x, b1); \
      } \
      if (R > 2) { \
        x = wasm_f32x4_splat(*a2); \
        MULADD(c20, x, b0); \
        MULADD(c21, x, b1); \
      } \
      if (R > 3) { \
        x = wasm_f32x4_splat(*a3); \
        MULADD(c30, x, b0); \
        MULADD(c31, x, b1); \
      } \
    } \
    const int64_t n = N - j; \
    tdm_store8(y + i * N + j, wasm_f32x4_mul(c00, sc0), wasm_f32x4_mul(c01, sc1), n); \
    if (R > 1) tdm_store8(y + (i + 1) * N + j, wasm_f32x4_mul(c10, sc0), wasm_f32x4_mul(c11, sc1), n); \
    if (R > 2) tdm_store8(y + (i + 2) * N + j, wasm_f32x4_mul(c20, sc0), wasm_f32x4_mul(c21, sc1), n); \
    if (R > 3) tdm_store8(y + (i + 3) * N + j, wasm_f32x4_mul(c30, sc0), wasm_f32x4_mul(c31, sc1), n); \
  } while (0)

void tdm_q8_gemm_tiles_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y) {
  for (int64_t j = 0; j < N; j += 8) {
    const int8_t *panel = qp + (j / 8) * K * 8;
    const v128_t sc0 = wasm_v128_load(scale + j), sc1 = wasm_v128_load(scale + j + 4);
    int64_t i = 0;
    for (; i + 4 <= M; i += 4) Q8_TILE(4);
    for (; i < M; i++) Q8_TILE(1);
  }
}

/* ---- int4 -------------------------------------------------------------------------------------- */

/* Two byte rows b (b[0..7]: k and k + 1 of 8 columns; b[8..15]: k + 2 and k + 3), k even
 * -> four u16x8 of the codes biased to q + 8 in [0, 15]: w0 = the first row's low nibbles
 * (k even), w1 its high nibbles, w2, w3 the second row's. Flipping bit 3 of each nibble (xor 0x88)
 * turns two's complement q into q + 8, so masks and a 16-bit shift (x86 has no 8-bit one) suffice;
 * f32x4_of_q4 then gives q. */
static inline void q4_unpack16(v128_t b, v128_t *w0, v128_t *w1, v128_t *w2, v128_t *w3) {
  const v128_t m = wasm_i8x16_splat(0x0F), x = wasm_v128_xor(b, wasm_i8x16_splat((int8_t)0x88));
  const v128_t lo = wasm_v128_and(x, m), hi = wasm_v128_and(wasm_u16x8_shr(x, 4), m);
  *w0 = wasm_u16x8_extend_low_u8x16(lo);
  *w1 = wasm_u16x8_extend_low_u8x16(hi);
  *w2 = wasm_u16x8_extend_high_u8x16(lo);
  *w3 = wasm_u16x8_extend_high_u8x16(hi);
}

/* One byte row (8 columns, k even in the low nibbles, k + 1 in the high) -> two u16x8 of q + 8. */
static inline void q4_unpack8(const uint8_t *p, v128_t *w0, v128_t *w1) {
  const v128_t m = wasm_i8x16_splat(0x0F), x = wasm_v128_xor(wasm_v128_load64_zero(p), wasm_i8x16_splat((int8_t)0x88));
  *w0 = wasm_u16x8_extend_low_u8x16(wasm_v128_and(x, m));
  *w1 = wasm_u16x8_extend_low_u8x16(wasm_v128_and(wasm_u16x8_shr(x, 4), m));
}

#if defined(TDM_RELAXED_SIMD)
/* The int4 integer-dot GEMV without the relaxed dot (tandem-mt-relaxed.wasm, Emscripten's LLVM 14),
 * so that the relaxed builds give the same bits at every thread count: per pair of k the codes
 * q + 8 of both k interleaved as 16-bit lanes (column c's two codes adjacent) and dotted with the
 * activation pair by i32x4.dot_i16x8_s, exact int32 sums per group, minus 8·xsum[g], then the group
 * total added as the scalar reference does. One panel at a time. */
void tdm_q4_gemv_dot_i16__simd128(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum,
                                  const uint8_t *qp, const float *scale, float *y) {
  const int64_t KB = (K + 1) / 2, NG = K / G + (K % G != 0);
  for (int64_t j = 0; j < N; j += 8) {
    const uint8_t *p = qp + (j / 8) * KB * 8;
    const float *sc = scale + (j / 8) * NG * 8;
    v128_t t0 = wasm_f32x4_splat(0), t1 = t0;
    for (int64_t g = 0; g < NG; g++) {
      const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
      v128_t s0 = wasm_i32x4_splat(0), s1 = s0;
      for (int64_t k = g * G; k < k1; k += 2) { /* past an odd K the high nibble meets the pad 0 of xq */
        v128_t w0, w1;
        q4_unpack8(p + (k / 2) * 8, &w0, &w1);
        const v128_t x = wasm_i32x4_splat((int32_t)(uint16_t)(int16_t)xq[k] | (int32_t)((uint32_t)(uint16_t)(int16_t)xq[k + 1] << 16));
        s0 = wasm_i32x4_add(s0, wasm_i32x4_dot_i16x8(wasm_i16x8_shuffle(w0, w1, 0, 8, 1, 9, 2, 10, 3, 11), x));
        s1 = wasm_i32x4_add(s1, wasm_i32x4_dot_i16x8(wasm_i16x8_shuffle(w0, w1, 4, 12, 5, 13, 6, 14, 7, 15), x));
      }
      const v128_t bias = wasm_i32x4_splat(8 * xsum[g]), d = wasm_f32x4_splat(xs[g]);
      t0 = wasm_f32x4_add(
          t0, wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_sub(s0, bias)), d), wasm_v128_load(sc + g * 8)));
      t1 = wasm_f32x4_add(
          t1, wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_sub(s1, bias)), d), wasm_v128_load(sc + g * 8 + 4)));
    }
    tdm_store8(y + j, t0, t1, N - j);
  }
}
#endif


#define F32X4_OF_Q4_LO(w) f32x4_of_q4((w), 0)
#define F32X4_OF_Q4_HI(w) f32x4_of_q4((w), 1)

/* M = 1: two panels side by side; per group a partial sum per column (four k per step from one
 * 16-byte load per panel), scaled and added to the total at the group's end. */
static void q4_gemv__simd128(int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale, float *y) {
  const int64_t KB = (K + 1) / 2, NG = K / G + (K % G != 0);
  int64_t j = 0;
  for (; j + 8 < N; j += 16) { /* panels j/8 and j/8 + 1 (the second may be partial) */
    const uint8_t *pa = qp + (j / 8) * KB * 8, *pb = pa + KB * 8;
    const float *sa = scale + (j / 8) * NG * 8, *sb = sa + NG * 8;
    v128_t t0 = wasm_f32x4_splat(0), t1 = t0, t2 = t0, t3 = t0;
    for (int64_t g = 0; g < NG; g++) {
      const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
      v128_t s0 = wasm_f32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
      int64_t k = g * G;
      for (; k + 4 <= k1; k += 4) {
        const v128_t x0 = wasm_f32x4_splat(a[k]), x1 = wasm_f32x4_splat(a[k + 1]), x2 = wasm_f32x4_splat(a[k + 2]),
                     x3 = wasm_f32x4_splat(a[k + 3]);
        v128_t w0, w1, w2, w3;
        q4_unpack16(wasm_v128_load(pa + (k / 2) * 8), &w0, &w1, &w2, &w3);
        MULADD(s0, x0, F32X4_OF_Q4_LO(w0));
        MULADD(s1, x0, F32X4_OF_Q4_HI(w0));
        MULADD(s0, x1, F32X4_OF_Q4_LO(w1));
        MULADD(s1, x1, F32X4_OF_Q4_HI(w1));
        MULADD(s0, x2, F32X4_OF_Q4_LO(w2));
        MULADD(s1, x2, F32X4_OF_Q4_HI(w2));
        MULADD(s0, x3, F32X4_OF_Q4_LO(w3));
        MULADD(s1, x3, F32X4_OF_Q4_HI(w3));
        q4_unpack16(wasm_v128_load(pb + (k / 2) * 8), &w0, &w1, &w2, &w3);
        MULADD(s2, x0, F32X4_OF_Q4_LO(w0));
        MULADD(s3, x0, F32X4_OF_Q4_HI(w0));
        MULADD(s2, x1, F32X4_OF_Q4_LO(w1));
        MULADD(s3, x1, F32X4_OF_Q4_HI(w1));
        MULADD(s2, x2, F32X4_OF_Q4_LO(w2));
        MULADD(s3, x2, F32X4_OF_Q4_HI(w2));
        MULADD(s2, x3, F32X4_OF_Q4_LO(w3));
        MULADD(s3, x3, F32X4_OF_Q4_HI(w3));
      }
      for (; k < k1; k += 2) { /* 1 to 3 k left: byte rows, the last maybe with only its low nibble */
        const v128_t x0 = wasm_f32x4_splat(a[k]), x1 = wasm_f32x4_splat(k + 1 < k1 ? a[k + 1] : 0.0f);
        v128_t w0, w1;
        q4_unpack8(pa + (k / 2) * 8, &w0, &w1);
        MULADD(s0, x0, F32X4_OF_Q4_LO(w0));
        MULADD(s1, x0, F32X4_OF_Q4_HI(w0));
        MULADD(s0, x1, F32X4_OF_Q4_LO(w1));
        MULADD(s1, x1, F32X4_OF_Q4_HI(w1));
        q4_unpack8(pb + (k / 2) * 8, &w0, &w1);
        MULADD(s2, x0, F32X4_OF_Q4_LO(w0));
        MULADD(s3, x0, F32X4_OF_Q4_HI(w0));
        MULADD(s2, x1, F32X4_OF_Q4_LO(w1));
        MULADD(s3, x1, F32X4_OF_Q4_HI(w1));
      }
      MULADD(t0, s0, wasm_v128_load(sa + g * 8));
      MULADD(t1, s1, wasm_v128_load(sa + g * 8 + 4));
      MULADD(t2, s2, wasm_v128_load(sb + g * 8));
      MULADD(t3, s3, wasm_v128_load(sb + g * 8 + 4));
    }
    tdm_store8(y + j, t0, t1, 8);
    tdm_store8(y + j + 8, t2, t3, N - j - 8);
  }
  for (; j < N; j += 8) {
    const uint8_t *pa = qp + (j / 8) * KB * 8;
    const float *sa = scale + (j / 8) * NG * 8;
    v128_t t0 = wasm_f32x4_splat(0), t1 = t0;
    for (int64_t g = 0; g < NG; g++) {
      const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
      v128_t s0 = wasm_f32x4_splat(0), s1 = s0;
      for (int64_t k = g * G; k < k1; k += 2) {
        const v128_t x0 = wasm_f32x4_splat(a[k]), x1 = wasm_f32x4_splat(k + 1 < k1 ? a[k + 1] : 0.0f);
        v128_t w0, w1;
        q4_unpack8(pa + (k / 2) * 8, &w0, &w1);
        MULADD(s0, x0, F32X4_OF_Q4_LO(w0));
        MULADD(s1, x0, F32X4_OF_Q4_HI(w0));
        MULADD(s0, x1, F32X4_OF_Q4_LO(w1));
        MULADD(s1, x1, F32X4_OF_Q4_HI(w1));
      }
      MULADD(t0, s0, wasm_v128_load(sa + g * 8));
      MULADD(t1, s1, wasm_v128_load(sa + g * 8 + 4));
    }
    tdm_store8(y + j, t0, t1, N - j);
  }
}

/* Rows i..i+R-1, panel j / 8: each byte row's weights are widened and multiplied by their group's
 * scales once, then serve R rows. */
#define Q4_TILE(R) \
  do { \
    v128_t c00 = wasm_f32x4_splat(0), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00; \
    for (int64_t k = 0; k < K; k += 2) { \
      const float *sg = sc + (k / G) * 8; \
      const v128_t g0 = wasm_v128_load(sg), g1 = wasm_v128_load(sg + 4); \
      v128_t w0, w1; \
      q4_unpack8(panel + (k / 2) * 8, &w0, &w1); \
      const v128_t b0 = wasm_f32x4_mul(F32X4_OF_Q4_LO(w0), g0), b1 = wasm_f32x4_mul(F32X4_OF_Q4_HI(w0), g1); \
      const v128_t d0 = wasm_f32x4_mul(F32X4_OF_Q4_LO(w1), g0), d1 = wasm_f32x4_mul(F32X4_OF_Q4_HI(w1), g1); \
      const bool two = k + 1 < K; \
      for (int r = 0; r < R; r++) { \
        const float *ar = a + (i + r) * K + k; \
        const v128_t x0 = wasm_f32x4_splat(ar[0]), x1 = wasm_f32x4_splat(two ? ar[1] : 0.0f); \
        v128_t *c0 = r == 0 ? &c00 : r == 1 ? &c10 : r == 2 ? &c20 : &c30; \
        v128_t *c1 = r == 0 ? &c01 : r == 1 ? &c11 : r == 2 ? &c21 : &c31; \
        *c0 = tdm_madd2(*c0, x0, b0, x1, d0); \
        *c1 = tdm_madd2(*c1, x0, b1, x1, d1); \
      } \
    } \
    const int64_t n = N - j; \
    tdm_store8(y + i * N + j, c00, c01, n); \
    if (R > 1) tdm_store8(y + (i + 1) * N + j, c10, c11, n); \
    if (R > 2) tdm_store8(y + (i + 2) * N + j, c20, c21, n); \
    if (R > 3) tdm_store8(y + (i + 3) * N + j, c30, c31, n); \
  } while (0)

void tdm_q4_gemm_tiles_4x8__simd128(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale,
                                    float *y) {
  const int64_t KB = (K + 1) / 2, NG = K / G + (K % G != 0);
  for (int64_t j = 0; j < N; j += 8) {
    const uint8_t *panel = qp + (j / 8) * KB * 8;
    const float *sc = scale + (j / 8) * NG * 8;
    int64_t i = 0;
    for (; i + 4 <= M; i += 4) Q4_TILE(4);
    for (; i < M; i++) Q4_TILE(1);
  }
}

void tdm_q8_gemm_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y) {
  if (M == 1) q8_gemv__simd128(N, K, a, qp, scale, y);
  else tdm_q8_gemm_tiles_4x8__simd128(M, N, K, a, qp, scale, y);
}

void tdm_q4_gemm_4x8__simd128(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale, float *y) {
  if (M == 1) q4_gemv__simd128(N, K, G, a, qp, scale, y);
  else tdm_q4_gemm_tiles_4x8__simd128(M, N, K, G, a, qp, scale, y);
}

#endif

/* ---- ops --------------------------------------------------------------------------------------- */

static bool packed_n(int64_t N, int64_t panels) {
  return N >= 1 && N <= INT64_MAX - TDM_PANEL && panels == (N + TDM_PANEL - 1) / TDM_PANEL;
}

/* The int4 geometry: K values in ceil(K/2) byte rows, groups of G (even, so a group starts on a
 * byte), ceil(K/G) scales per column. */
static bool q4_geometry(const tdm_value *q, const tdm_value *s, int64_t N, int64_t K, int64_t G) {
  if (G < 2 || G % 2 || K < 0 || q->shape.rank != 3 || s->shape.rank != 3 || q->shape.dims[2] != TDM_PANEL ||
      s->shape.dims[2] != TDM_PANEL || !packed_n(N, q->shape.dims[0]) || s->shape.dims[0] != q->shape.dims[0])
    return false;
  return q->shape.dims[1] == K / 2 + K % 2 && s->shape.dims[1] == K / G + (K % G != 0);
}

/* a [..., K], qp, scale -> y [..., N]: a's shape with N columns. */
static tdm_status matmul_q_check(const tdm_method *m, const tdm_op *op, bool q4) {
  if (op->n_in != 3 || op->n_out != 1 || op->n_iattr != (q4 ? 2 : 1))
    return tdm__rule(op, q4 ? "takes a, packed q, scales, 1 output, [N, G]" : "takes a, packed q, scales, 1 output, [N]");
  const tdm_value *a = TDM_VAL(m, op, 0), *q = TDM_VAL(m, op, 1), *s = TDM_VAL(m, op, 2), *y = TDM_OUTVAL(m, op, 0);
  if (a->dtype != TDM_F32 || s->dtype != TDM_F32 || y->dtype != TDM_F32 || q->dtype != (q4 ? TDM_I4X2 : TDM_I8))
    return tdm__rule(op, q4 ? "a, scales and output float32, weights int4x2" : "a, scales and output float32, weights int8");
  if (a->shape.rank < 1) return tdm__rule(op, "a must have rank >= 1");
  const int64_t N = op->iattr[0], K = a->shape.dims[a->shape.rank - 1];
  if (q4) {
    if (!q4_geometry(q, s, N, K, op->iattr[1]))
      return tdm__rule(op, "weights must be [ceil(N/8), ceil(K/2), 8] and scales [ceil(N/8), ceil(K/G), 8] with G even");
  } else if (q->shape.rank != 3 || q->shape.dims[2] != TDM_PANEL || !packed_n(N, q->shape.dims[0]) || q->shape.dims[1] != K ||
             s->shape.rank != 2 || s->shape.dims[0] != q->shape.dims[0] || s->shape.dims[1] != TDM_PANEL) {
    return tdm__rule(op, "weights must be [ceil(N/8), K, 8] and scales [ceil(N/8), 8]");
  }
  tdm_shape want = a->shape;
  want.dims[want.rank - 1] = N;
  if (!tdm__shape_eq(&want, &y->shape)) return tdm__rule(op, "output must be a's shape with N columns");
  return TDM_OK;
}

static tdm_status matmul_q8_check(const tdm_method *m, const tdm_op *op) { return matmul_q_check(m, op, false); }
static tdm_status matmul_q4_check(const tdm_method *m, const tdm_op *op) { return matmul_q_check(m, op, true); }

/* The quantized GEMMs over threads (src/threads.h): rows in blocks of 4, or for a GEMV output
 * columns in blocks of 32 (four int8 / two int4 panels), as tdm_f32_gemm_packed_parallel. */
typedef struct {
  int64_t N, K, G;
  const float *a, *scale;
  const void *qp;
  float *y;
} q_job;

static void q8_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const q_job *j = c;
  (void)t, (void)ws;
  const int8_t *qp = j->qp;
  if (j->G < 0) /* columns of a GEMV */
    tdm_q8_gemm(1, hi - lo, j->K, j->a, qp + lo / 8 * j->K * 8, j->scale + lo, j->y + lo);
  else tdm_q8_gemm_tiles(hi - lo, j->N, j->K, j->a + lo * j->K, qp, j->scale, j->y + lo * j->N);
}

static void q4_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const q_job *j = c;
  (void)t, (void)ws;
  const uint8_t *qp = j->qp;
  const int64_t G = j->G < 0 ? -j->G : j->G, KB = (j->K + 1) / 2, NG = j->K / G + (j->K % G != 0);
  if (j->G < 0) tdm_q4_gemm(1, hi - lo, j->K, G, j->a, qp + lo / 8 * KB * 8, j->scale + lo / 8 * NG * 8, j->y + lo);
  else tdm_q4_gemm_tiles(hi - lo, j->N, j->K, G, j->a + lo * j->K, qp, j->scale, j->y + lo * j->N);
}

/* The integer-dot GEMV's columns [lo, hi), from the activations quantized once before the split
 * (so every thread count gives the same bits). */
typedef struct {
  int64_t K;
  const int16_t *xq;
  const float *xs, *scale;
  const int8_t *qp;
  float *y;
} q8_dot_job;

static void q8_dot_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const q8_dot_job *j = c;
  (void)t, (void)ws;
  tdm_q8_gemv_dot(hi - lo, j->K, j->xq, j->xs, j->qp + lo / 8 * j->K * 8, j->scale + lo, j->y + lo);
}

/* G < 0 in the job marks a GEMV split by columns (and carries -G for int4). */
static void q_parallel(int64_t M, q_job *j, tdm_part_fn part) {
  if (M == 1) {
    j->G = -j->G;
    tdm__parallel(j->N, 32, part, j);
  } else {
    tdm__parallel(M, 4, part, j);
  }
}

static tdm_status matmul_q8_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t N = op->iattr[0], K = in[1].shape->dims[1];
  if (K == 0) {
    memset(out->data, 0, (size_t)out->numel * sizeof(float));
    return TDM_OK;
  }
  const int64_t M = in[0].numel / K;
  if (M == 1 && K <= TDM_Q8_DOT_MAX_K) { /* one row: int8 activations, integer dot products */
    int16_t xq[TDM_Q8_DOT_MAX_K];
    float xs[TDM_Q8_DOT_MAX_K / TDM_Q8_ABLOCK];
    if (tdm_q8_quantize_row(K, in[0].data, xq, xs)) {
      q8_dot_job d = {K, xq, xs, in[2].data, in[1].data, out->data};
      tdm__parallel(N, 32, q8_dot_part, &d);
      return TDM_OK;
    }
  }
  q_job j = {N, K, 1, in[0].data, in[2].data, in[1].data, out->data};
  q_parallel(M, &j, q8_part);
  return TDM_OK;
}

#if TDM_RELAXED_DOT || (TDM_SIMD128 && defined(TDM_RELAXED_SIMD))
#define TDM_Q4_DOT 1
#if TDM_RELAXED_DOT
#define q4_gemv_dot tdm_q4_gemv_dot__relaxed
#else
#define q4_gemv_dot tdm_q4_gemv_dot_i16__simd128
#endif
/* The int4 integer-dot GEMV's columns [lo, hi) (whole panels: lo is a multiple of 32). */
typedef struct {
  int64_t K, G;
  const int8_t *xq;
  const float *xs, *scale;
  const int32_t *xsum;
  const uint8_t *qp;
  float *y;
} q4_dot_job;

static void q4_dot_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const q4_dot_job *j = c;
  (void)t, (void)ws;
  const int64_t KB = (j->K + 1) / 2, NG = j->K / j->G + (j->K % j->G != 0);
  q4_gemv_dot(hi - lo, j->K, j->G, j->xq, j->xs, j->xsum, j->qp + lo / 8 * KB * 8, j->scale + lo / 8 * NG * 8, j->y + lo);
}
#endif

static tdm_status matmul_q4_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t N = op->iattr[0], G = op->iattr[1], K = in[0].shape->dims[in[0].shape->rank - 1];
  if (K == 0) {
    memset(out->data, 0, (size_t)out->numel * sizeof(float));
    return TDM_OK;
  }
#if defined(TDM_Q4_DOT)
  /* one row (a decode step) in the relaxed builds: int8 activations per group, integer dot
   * products over the codes (the same integers, so the same bits, in both relaxed builds) */
  if (in[0].numel == K && K <= TDM_Q8_DOT_MAX_K && G >= TDM_Q4_DOT_MIN_G && G % 4 == 0) {
    int8_t xq[TDM_Q8_DOT_MAX_K + 1];
    float xs[TDM_Q8_DOT_MAX_K / TDM_Q4_DOT_MIN_G];
    int32_t xsum[TDM_Q8_DOT_MAX_K / TDM_Q4_DOT_MIN_G];
    if (tdm_q4_quantize_row(K, G, in[0].data, xq, xs, xsum)) {
      q4_dot_job d = {K, G, xq, xs, in[2].data, xsum, in[1].data, out->data};
      tdm__parallel(N, 32, q4_dot_part, &d);
      return TDM_OK;
    }
  }
#endif
  q_job j = {N, K, G, in[0].data, in[2].data, in[1].data, out->data};
  q_parallel(in[0].numel / K, &j, q4_part);
  return TDM_OK;
}

/* qp, scale, idx i64 [...] -> y [..., K], rows idx of the table [N, K] the weights hold. */
static tdm_status embedding_q_check(const tdm_method *m, const tdm_op *op, bool q4) {
  if (op->n_in != 3 || op->n_out != 1 || op->n_iattr != (q4 ? 2 : 1))
    return tdm__rule(op, q4 ? "takes packed q, scales, index, 1 output, [N, G]" : "takes packed q, scales, index, 1 output, [N]");
  const tdm_value *q = TDM_VAL(m, op, 0), *s = TDM_VAL(m, op, 1), *ix = TDM_VAL(m, op, 2), *y = TDM_OUTVAL(m, op, 0);
  if (s->dtype != TDM_F32 || y->dtype != TDM_F32 || ix->dtype != TDM_I64 || q->dtype != (q4 ? TDM_I4X2 : TDM_I8))
    return tdm__rule(
        op, q4 ? "scales and output float32, index int64, weights int4x2" : "scales and output float32, index int64, weights int8");
  if (ix->shape.rank + 1 > TDM_MAX_RANK || y->shape.rank != ix->shape.rank + 1) return tdm__rule(op, "output must be index.shape + [K]");
  const int64_t N = op->iattr[0], K = y->shape.dims[y->shape.rank - 1];
  if (q4) {
    if (!q4_geometry(q, s, N, K, op->iattr[1]))
      return tdm__rule(op, "weights must be [ceil(N/8), ceil(K/2), 8] and scales [ceil(N/8), ceil(K/G), 8] with G even");
  } else if (q->shape.rank != 3 || q->shape.dims[2] != TDM_PANEL || !packed_n(N, q->shape.dims[0]) || q->shape.dims[1] != K ||
             s->shape.rank != 2 || s->shape.dims[0] != q->shape.dims[0] || s->shape.dims[1] != TDM_PANEL) {
    return tdm__rule(op, "weights must be [ceil(N/8), K, 8] and scales [ceil(N/8), 8]");
  }
  tdm_shape want = ix->shape;
  want.dims[want.rank++] = K;
  if (!tdm__shape_eq(&want, &y->shape)) return tdm__rule(op, "output must be index.shape + [K]");
  return TDM_OK;
}

static tdm_status embedding_q8_check(const tdm_method *m, const tdm_op *op) { return embedding_q_check(m, op, false); }
static tdm_status embedding_q4_check(const tdm_method *m, const tdm_op *op) { return embedding_q_check(m, op, true); }

/* Row v of the table, or -1 (zeros) out of range (never reached after check_index). */
static int64_t row_of(int64_t i, int64_t N) {
  const int64_t v = i < 0 ? i + N : i;
  return v < 0 || v >= N ? -1 : v;
}

static tdm_status embedding_q8_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t N = op->iattr[0], K = in[0].shape->dims[1];
  const int8_t *qp = in[0].data;
  const float *scale = in[1].data;
  const int64_t *idx = in[2].data;
  float *y = out->data;
  for (int64_t t = 0; t < in[2].numel; t++, y += K) {
    const int64_t v = row_of(idx[t], N);
    if (v < 0) {
      memset(y, 0, (size_t)K * sizeof(float));
      continue;
    }
    const int8_t *col = qp + (v / TDM_PANEL) * K * TDM_PANEL + v % TDM_PANEL;
    const float s = scale[v];
    for (int64_t k = 0; k < K; k++) y[k] = (float)col[k * TDM_PANEL] * s;
  }
  return TDM_OK;
}

static tdm_status embedding_q4_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t N = op->iattr[0], G = op->iattr[1], K = out->shape->dims[out->shape->rank - 1];
  const int64_t KB = (K + 1) / 2, NG = K / G + (K % G != 0);
  const uint8_t *qp = in[0].data;
  const float *scale = in[1].data;
  const int64_t *idx = in[2].data;
  float *y = out->data;
  for (int64_t t = 0; t < in[2].numel; t++, y += K) {
    const int64_t v = row_of(idx[t], N);
    if (v < 0) {
      memset(y, 0, (size_t)K * sizeof(float));
      continue;
    }
    const uint8_t *col = qp + (v / TDM_PANEL) * KB * TDM_PANEL + v % TDM_PANEL;
    const float *sc = scale + (v / TDM_PANEL) * NG * TDM_PANEL + v % TDM_PANEL;
    for (int64_t k = 0; k < K; k++) y[k] = (float)nibble(col[(k / 2) * TDM_PANEL], (int)(k & 1)) * sc[(k / G) * TDM_PANEL];
  }
  return TDM_OK;
}

const tdm_opdef tdm__quant_ops[] = {
    TDM_OP(matmul_q8, 0, matmul_q8_check, matmul_q8_run),
    TDM_OP(matmul_q4, 0, matmul_q4_check, matmul_q4_run),
    TDM_OP(embedding_q8, 0, embedding_q8_check, embedding_q8_run),
    TDM_OP(embedding_q4, 0, embedding_q4_check, embedding_q4_run),
    TDM_OP_END,
};
