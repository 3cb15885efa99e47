/* quant_simd128.c — the SIMD128 variants of the quantized-weight kernels (declared in variants.h
 * beside their scalar references in quant.c): the float GEMM and GEMV over int8 / int4 weights
 * widened in registers and the int8 integer-dot GEMVs (int4's are in quant_q4_simd128.c). config.c picks them;
 * tests/c/kernel_selftest.c compares them with the references. */
#include "variants.h"

#include <float.h>
#include <math.h>
#include <string.h>

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

/* The same pair of rows read from the panel at p (16 bytes), without the byte shuffle: each row's
 * 8 weights sign-extended on load (i16x8.load8x8_s) and the two i16x8 interleaved (punpcklwd /
 * punpckhwd on x86), which measured faster on the decode's GEMVs; the same products and sums. */
static inline void q8_pair_widen(const int8_t *p, v128_t *lo, v128_t *hi) {
  const v128_t r0 = wasm_i16x8_load8x8(p), r1 = wasm_i16x8_load8x8(p + 8);
  *lo = wasm_i16x8_shuffle(r0, r1, 0, 8, 1, 9, 2, 10, 3, 11);
  *hi = wasm_i16x8_shuffle(r0, r1, 4, 12, 5, 13, 6, 14, 7, 15);
}
/* The paired layout (variants.h, tdm_q8_pair_panels) holds each column's two weights adjacent
 * already: the two sign-extending loads alone give the same i16x8 (no interleave). */
static inline void q8_pair_load(const int8_t *p, int paired, v128_t *lo, v128_t *hi) {
  if (paired) *lo = wasm_i16x8_load8x8(p), *hi = wasm_i16x8_load8x8(p + 8);
  else q8_pair_widen(p, lo, hi);
}
static inline void q8_dot_pair_at(const int8_t *p, int paired, v128_t x, v128_t *lo, v128_t *hi) {
  v128_t a, b;
  q8_pair_load(p, paired, &a, &b);
  *lo = wasm_i32x4_add(*lo, wasm_i32x4_dot_i16x8(a, x));
  *hi = wasm_i32x4_add(*hi, wasm_i32x4_dot_i16x8(b, x));
}

/* The one-row GEMV's pair step (q8_gemv_dot): on the paired layout one 16-byte load widened in
 * registers (i16x8.extend_{low,high}_i8x16_s) instead of two sign-extending 8-byte loads (the same
 * products and sums). V8 keeps a loop body's loads in the wasm's order but sinks the arithmetic to
 * its uses, so every loaded value of a step is live at once: one v128 per panel, not two i16x8. */
static inline void q8_gemv_pair_at(const int8_t *p, int paired, v128_t x, v128_t *lo, v128_t *hi) {
  if (!paired) {
    q8_dot_pair_at(p, 0, x, lo, hi);
    return;
  }
  const v128_t b = wasm_v128_load(p);
  *lo = wasm_i32x4_add(*lo, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(b), x));
  *hi = wasm_i32x4_add(*hi, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(b), x));
}

/* A block's exact int32 sums into the float total, unfused (as the scalar reference rounds). */
static inline v128_t q8_dot_total(v128_t t, v128_t s, v128_t d) {
  return wasm_f32x4_add(t, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s), d));
}

/* Lanes 0-3 (LO) or 4-7 (HI) of an i16x8 as f32x4, exactly. Not with extend + convert: clang
 * folds those into a conversion from <4 x i16>, which the wasm backend lowers one lane at a time
 * (f32.convert_i32_s x 4: slower than the float GEMV itself). Instead each i16 w, biased to
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

/* ---- the activation row's quantization (tdm_q8_quantize_row__scalar's floats) ------------------- */

/* max |a[k]| over [k0, k1) into *m, four k at a time (f32x4.pmax, one instruction, as NaNs are
 * refused anyway), the last (k1 - k0) % 4 as the reference; false at a NaN or ±inf. */
static inline bool absmax_finite(const float *a, int64_t k0, int64_t k1, float *m) {
  const v128_t big = wasm_f32x4_splat(FLT_MAX);
  const int64_t k4 = k0 + (k1 - k0) / 4 * 4;
  v128_t m4 = wasm_f32x4_splat(0), ok = wasm_i32x4_splat(-1);
  for (int64_t k = k0; k < k4; k += 4) {
    const v128_t v = wasm_f32x4_abs(wasm_v128_load(a + k));
    ok = wasm_v128_and(ok, wasm_f32x4_le(v, big));
    m4 = wasm_f32x4_pmax(m4, v);
  }
  if (!wasm_i32x4_all_true(ok)) return false;
  float r = 0;
  for (int i = 0; i < 4; i++) {
    const float v = wasm_f32x4_extract_lane(m4, 0);
    r = v > r ? v : r;
    m4 = wasm_i32x4_shuffle(m4, m4, 1, 2, 3, 0);
  }
  for (int64_t k = k4; k < k1; k++) {
    const float v = fabsf(a[k]);
    if (!(v <= FLT_MAX)) return false;
    r = v > r ? v : r;
  }
  *m = r;
  return true;
}

/* Four codes round-half-even(a[k] / d) within ±qmax, each as the float q + 1.5·2^23, whose bits are
 * 0x4B400000 + q (q in the low 16 bits): exact for |q| <= 32767. */
static inline v128_t q_biased(const float *a, v128_t dv, v128_t lo, v128_t hi) {
  const v128_t q = wasm_f32x4_pmin(wasm_f32x4_pmax(wasm_f32x4_nearest(wasm_f32x4_div(wasm_v128_load(a), dv)), lo), hi);
  return wasm_f32x4_add(q, wasm_f32x4_splat(12582912.0f)); /* 1.5·2^23 */
}

/* Per block of 32 k: the largest |a| four lanes at a time (max is exact: any order gives the
 * reference's m; f32x4.pmax, one instruction, as NaNs are refused anyway), d = m / qmax, then a / d
 * rounded half to even (f32x4.nearest is rintf in the default rounding mode) and clamped to ±qmax
 * (pmin / pmax: never NaN here, and -0 stays -0 as the reference's compares keep it), an integer q
 * with |q| <= 32767; q + 1.5·2^23 is exact and holds q in its low 16 bits, which one shuffle packs
 * into int16 (V8 lowers i32x4.trunc_sat_f32x4_s to eight x86 instructions). A block's last K % 4 k
 * as the reference does them; false at a NaN or ±inf, as the reference. */
bool tdm_q8_quantize_row__simd128(int64_t K, const float *a, int16_t *xq, float *xs, float qmax) {
  const v128_t hi = wasm_f32x4_splat(qmax), lo = wasm_f32x4_splat(-qmax);
  for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
    const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K, k4 = k0 + (k1 - k0) / 4 * 4;
    float m;
    if (!absmax_finite(a, k0, k1, &m)) return false;
    const float d = m / qmax;
    xs[b] = d;
    int64_t k = k0;
    if (d > 0) {
      const v128_t dv = wasm_f32x4_splat(d);
      for (; k < k4; k += 4) {
        const v128_t f = q_biased(a + k, dv, lo, hi);
        const v128_t w = wasm_i16x8_shuffle(f, f, 0, 2, 4, 6, 0, 2, 4, 6);
        const int64_t four = wasm_i64x2_extract_lane(w, 0);
        memcpy(xq + k, &four, sizeof four);
      }
    }
    for (; k < k1; k++) {
      float q = d > 0 ? rintf(a[k] / d) : 0.0f;
      q = q > qmax ? qmax : q < -qmax ? -qmax : q;
      xq[k] = (int16_t)q;
    }
  }
  if (K % 2) xq[K] = 0;
  return true;
}

/* tdm_q4_quantize_row's loop (variants.h) on SIMD128, as tdm_q8_quantize_row__simd128's per group of
 * G: each code's low byte picked from its biased float, the group's sum from the floats' bits less
 * the bias; the tail of a group (G % 4) as the scalar loop. */
bool tdm_q4_quantize_row__simd128(int64_t K, int64_t G, const float *a, int8_t *xq, float *xs, int32_t *xsum) {
  const v128_t hi = wasm_f32x4_splat(127.0f), lo = wasm_f32x4_splat(-127.0f), bias = wasm_i32x4_splat(0x4B400000);
  for (int64_t k0 = 0, g = 0; k0 < K; k0 += G, g++) {
    const int64_t k1 = k0 + G < K ? k0 + G : K, k4 = k0 + (k1 - k0) / 4 * 4;
    float m;
    if (!absmax_finite(a, k0, k1, &m)) return false;
    const float d = m / 127.0f;
    xs[g] = d;
    int64_t k = k0;
    v128_t s4 = wasm_i32x4_splat(0);
    if (d > 0) {
      const v128_t dv = wasm_f32x4_splat(d);
      for (; k < k4; k += 4) {
        const v128_t f = q_biased(a + k, dv, lo, hi);
        s4 = wasm_i32x4_add(s4, wasm_i32x4_sub(f, bias));
        wasm_v128_store32_lane(xq + k, wasm_i8x16_shuffle(f, f, 0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12), 0);
      }
    }
    int32_t sum =
        wasm_i32x4_extract_lane(s4, 0) + wasm_i32x4_extract_lane(s4, 1) + wasm_i32x4_extract_lane(s4, 2) + wasm_i32x4_extract_lane(s4, 3);
    for (; k < k1; k++) {
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

/* ---- int8 weights × int8 activations, M = 1 (the pair step and block totals above) --------------- */

/* paired (a constant at every call): the weights in the paired layout, K even */
/* Two panels at p and p + PST (bytes), their columns' results at y and y + YS (scales at sc and
 * sc + YS), n columns written (the first panel whole). Two panels at most: V8 issues a step's loads
 * first, and four panels' loads, widened pairs and sums spilled past its 15 vector registers. */
static inline __attribute__((always_inline)) void q8_gemv_2panels(int paired, int64_t K, const int16_t *xq, const float *xs,
                                                                  const int8_t *p0, size_t PST, const float *sc, float *y, size_t YS,
                                                                  int64_t n) {
  const int8_t *p1 = p0 + PST;
  v128_t t0 = wasm_f32x4_splat(0), t1 = t0, t2 = t0, t3 = t0, pf = t0;
  for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
    const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
    pf = tdm_touch_ahead(tdm_touch_ahead(pf, p0, (size_t)k0 * 8, (size_t)K * 8), p1, (size_t)k0 * 8, (size_t)K * 8); /* vec.h */
    v128_t s0 = wasm_i32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
    int64_t k = k0;
    TDM_NO_UNROLL
    for (; k + 2 <= k1; k += 2) {
      const v128_t x = wasm_v128_load32_splat(xq + k);
      q8_gemv_pair_at(p0 + k * 8, paired, x, &s0, &s1);
      q8_gemv_pair_at(p1 + k * 8, paired, x, &s2, &s3);
    }
    if (k < k1) { /* odd K: its last row alone, paired with the padding 0 of xq */
      const v128_t x = wasm_v128_load32_splat(xq + k);
      q8_dot_pair(wasm_v128_load64_zero(p0 + k * 8), x, &s0, &s1);
      q8_dot_pair(wasm_v128_load64_zero(p1 + k * 8), x, &s2, &s3);
    }
    const v128_t d = wasm_f32x4_splat(xs[b]);
    t0 = q8_dot_total(t0, s0, d), t1 = q8_dot_total(t1, s1, d), t2 = q8_dot_total(t2, s2, d), t3 = q8_dot_total(t3, s3, d);
  }
  tdm_touch_end(pf);
  tdm_store8(y, wasm_f32x4_mul(t0, wasm_v128_load(sc)), wasm_f32x4_mul(t1, wasm_v128_load(sc + 4)), 8);
  tdm_store8(y + YS, wasm_f32x4_mul(t2, wasm_v128_load(sc + YS)), wasm_f32x4_mul(t3, wasm_v128_load(sc + YS + 4)), n - 8);
}

/* The one-row GEMV: two panels at a time from two runs of columns H = ⌊N / 16⌋·8 apart (two
 * sequential streams, which from memory read faster than two adjacent panels), then the last
 * N − 2H columns two adjacent panels (the last partial) and one panel at a time; each column's sums
 * are the same either way. */
static inline __attribute__((always_inline)) void q8_gemv_dot(int paired, int64_t N, int64_t K, const int16_t *xq, const float *xs,
                                                              const int8_t *qp, const float *scale, float *y) {
  const int64_t H = N / 16 * 8;
  const size_t PS = (size_t)K * 8;
  for (int64_t j = 0; j < H; j += 8)
    q8_gemv_2panels(paired, K, xq, xs, qp + (j / 8) * PS, (size_t)(H / 8) * PS, scale + j, y + j, (size_t)H, 16);
  int64_t j = 2 * H;
  for (; j + 8 < N; j += 16) q8_gemv_2panels(paired, K, xq, xs, qp + (j / 8) * PS, PS, scale + j, y + j, 8, N - j);
  for (; j < N; j += 8) {
    const int8_t *p = qp + (j / 8) * K * 8;
    v128_t t0 = wasm_f32x4_splat(0), t1 = t0;
    for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
      const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
      v128_t s0 = wasm_i32x4_splat(0), s1 = s0;
      int64_t k = k0;
      for (; k + 2 <= k1; k += 2) q8_gemv_pair_at(p + k * 8, paired, wasm_v128_load32_splat(xq + k), &s0, &s1);
      if (k < k1) q8_dot_pair(wasm_v128_load64_zero(p + k * 8), wasm_v128_load32_splat(xq + k), &s0, &s1);
      const v128_t d = wasm_f32x4_splat(xs[b]);
      t0 = q8_dot_total(t0, s0, d), t1 = q8_dot_total(t1, s1, d);
    }
    tdm_store8(y + j, wasm_f32x4_mul(t0, wasm_v128_load(scale + j)), wasm_f32x4_mul(t1, wasm_v128_load(scale + j + 4)), N - j);
  }
}

void tdm_q8_gemv_dot__simd128(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale, float *y) {
  q8_gemv_dot(0, N, K, xq, xs, qp, scale, y);
}
void tdm_q8_gemv_dot_paired__simd128(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                                     float *y) {
  q8_gemv_dot(1, N, K, xq, xs, qp, scale, y);
}

/* ---- int8 weights × int8 activations, 2 to 4 rows ---------------------------------------------- */

/* R rows (1 to 4) by NP panels (1 or 2) from p (K·8 bytes apart): per pair of k each panel's 16
 * bytes are interleaved and widened once and dotted with every row's activation pair; per block
 * each row's exact sums into its float totals as tdm_q8_gemv_dot__scalar adds them; n columns of
 * each row written (n > 8 when NP = 2). R and NP are constants at every call: the arrays become
 * registers. */
static inline __attribute__((always_inline)) void q8_dot_tile(int paired, int R, int NP, int64_t K, int64_t KP, int64_t NB,
                                                              const int16_t *xq, const float *xs, const int8_t *p, size_t PST,
                                                              const float *sc, float *y, int64_t ldy, int64_t YS, int64_t n) {
  v128_t t[4][4], pf = wasm_f32x4_splat(0);
  for (int r = 0; r < R; r++)
    for (int i = 0; i < 2 * NP; i++) t[r][i] = wasm_f32x4_splat(0);
  for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
    const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
    for (int i = 0; i < NP; i++) pf = tdm_touch_ahead(pf, p + i * PST, (size_t)k0 * 8, (size_t)K * 8); /* vec.h */
    v128_t s[4][4];
    for (int r = 0; r < R; r++)
      for (int i = 0; i < 2 * NP; i++) s[r][i] = wasm_i32x4_splat(0);
    int64_t k = k0;
    for (; k + 2 <= k1; k += 2) {
      v128_t x[4];
      for (int r = 0; r < R; r++) x[r] = wasm_v128_load32_splat(xq + r * KP + k);
      for (int i = 0; i < NP; i++) {
        v128_t lo, hi;
        q8_pair_load(p + i * PST + k * 8, paired, &lo, &hi);
        for (int r = 0; r < R; r++) {
          s[r][2 * i] = wasm_i32x4_add(s[r][2 * i], wasm_i32x4_dot_i16x8(lo, x[r]));
          s[r][2 * i + 1] = wasm_i32x4_add(s[r][2 * i + 1], wasm_i32x4_dot_i16x8(hi, x[r]));
        }
      }
    }
    if (k < k1) /* odd K: its last row alone, paired with the padding 0 of each row's xq */
      for (int i = 0; i < NP; i++)
        for (int r = 0; r < R; r++)
          q8_dot_pair(wasm_v128_load64_zero(p + i * PST + k * 8), wasm_v128_load32_splat(xq + r * KP + k), &s[r][2 * i], &s[r][2 * i + 1]);
    for (int r = 0; r < R; r++) {
      const v128_t d = wasm_f32x4_splat(xs[r * NB + b]);
      for (int i = 0; i < 2 * NP; i++) t[r][i] = q8_dot_total(t[r][i], s[r][i], d);
    }
  }
  tdm_touch_end(pf);
  for (int r = 0; r < R; r++)
    for (int i = 0; i < NP; i++)
      tdm_store8(y + r * ldy + YS * i, wasm_f32x4_mul(t[r][2 * i], wasm_v128_load(sc + YS * i)),
                 wasm_f32x4_mul(t[r][2 * i + 1], wasm_v128_load(sc + YS * i + 4)), n - 8 * i);
}

/* All M rows at once (M <= 4): two panels for up to two rows, one for three or four (at most 8
 * integer accumulators), then a last single panel. The two panels come from two runs of columns
 * H = ⌊N / 16⌋·8 apart first (two sequential streams, which read faster from memory than two adjacent
 * panels, as the one-row GEMV's four), then side by side; each column's sums are the same either way. */
#define Q8_DOT_COLUMNS(R, NP) \
  do { \
    for (; j + 8 * (NP - 1) < N; j += 8 * NP) \
      q8_dot_tile(paired, R, NP, K, KP, NB, xq, xs, qp + (j / 8) * K * 8, (size_t)K * 8, scale + j, y + j, ldy, 8, N - j); \
  } while (0)
#define Q8_DOT_TWO_RUNS(R) \
  do { \
    const int64_t H = N / 16 * 8; \
    for (; j < H; j += 8) \
      q8_dot_tile(paired, R, 2, K, KP, NB, xq, xs, qp + (j / 8) * K * 8, (size_t)(H / 8) * K * 8, scale + j, y + j, ldy, H, 16); \
    j = 2 * H; \
  } while (0)

static inline __attribute__((always_inline)) void q8_dot_4rows(int paired, int64_t M, int64_t N, int64_t K, const int16_t *xq,
                                                               const float *xs, const int8_t *qp, const float *scale, float *y,
                                                               int64_t ldy) {
  const int64_t KP = K + K % 2, NB = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK;
  int64_t j = 0;
  switch (M) {
    case 1:
      Q8_DOT_TWO_RUNS(1);
      Q8_DOT_COLUMNS(1, 2);
      Q8_DOT_COLUMNS(1, 1);
      break;
    case 2:
      Q8_DOT_TWO_RUNS(2);
      Q8_DOT_COLUMNS(2, 2);
      Q8_DOT_COLUMNS(2, 1);
      break;
    case 3: Q8_DOT_COLUMNS(3, 1); break;
    case 4: Q8_DOT_COLUMNS(4, 1); break;
    default: (paired ? tdm_q8_gemm_dot_paired__scalar : tdm_q8_gemm_dot__scalar)(M, N, K, xq, xs, qp, scale, y, ldy);
  }
}

/* Any number of rows, four at a time. */
void tdm_q8_gemm_dot__simd128(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                              float *y, int64_t ldy) {
  const int64_t KP = K + K % 2, NB = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK;
  for (int64_t r = 0; r < M; r += 4) q8_dot_4rows(0, M - r < 4 ? M - r : 4, N, K, xq + r * KP, xs + r * NB, qp, scale, y + r * ldy, ldy);
}
void tdm_q8_gemm_dot_paired__simd128(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp,
                                     const float *scale, float *y, int64_t ldy) {
  const int64_t NB = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK;
  for (int64_t r = 0; r < M; r += 4) q8_dot_4rows(1, M - r < 4 ? M - r : 4, N, K, xq + r * K, xs + r * NB, qp, scale, y + r * ldy, ldy);
}

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

/* Block b of an int4 panel (variants.h, 32 bytes) as its four byte rows of 8 columns (k0 + 2r in
 * the low nibbles, k0 + 2r + 1 in the high): rows 0 and 1 in *r01, 2 and 3 in *r23 (each half's
 * column-major bytes transposed by a byte shuffle, then the halves' rows interleaved). */
static inline void q4_block_rows(const uint8_t *blk, v128_t *r01, v128_t *r23) {
  const v128_t v0 = wasm_v128_load(blk), v1 = wasm_v128_load(blk + 16);
  const v128_t a = wasm_i8x16_shuffle(v0, v0, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const v128_t b = wasm_i8x16_shuffle(v1, v1, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  *r01 = wasm_i32x4_shuffle(a, b, 0, 4, 1, 5);
  *r23 = wasm_i32x4_shuffle(a, b, 2, 6, 3, 7);
}

/* Two byte rows (b[0..7]: k and k + 1 of 8 columns; b[8..15]: k + 2 and k + 3) -> four u16x8 of the
 * codes q + 8 in [0, 15]: w0 = the first row's low nibbles (k), w1 its high nibbles, w2, w3 the
 * second row's (masks and a 16-bit shift: x86 has no 8-bit one); f32x4_of_q4 then gives q. */
static inline void q4_unpack16(v128_t b, v128_t *w) {
  const v128_t m = wasm_i8x16_splat(0x0F);
  const v128_t lo = wasm_v128_and(b, m), hi = wasm_v128_and(wasm_u16x8_shr(b, 4), m);
  w[0] = wasm_u16x8_extend_low_u8x16(lo);
  w[1] = wasm_u16x8_extend_low_u8x16(hi);
  w[2] = wasm_u16x8_extend_high_u8x16(lo);
  w[3] = wasm_u16x8_extend_high_u8x16(hi);
}

#define F32X4_OF_Q4_LO(w) f32x4_of_q4((w), 0)
#define F32X4_OF_Q4_HI(w) f32x4_of_q4((w), 1)

/* Rows i..i+R-1 (R = 1 to 4), panel j / 8, block by block: each pair of k's codes times their
 * group's scales once (any even G: a pair never straddles groups), then for every row
 * c = c + (x0·b + x1·d) (tdm_madd2, unfused; a last odd k's pair with x1 = 0). */
static inline __attribute__((always_inline)) void q4_tile(int R, int64_t i, int64_t j, int64_t N, int64_t K, int64_t G, const float *a,
                                                          const uint8_t *panel, const float *sc, float *y) {
  v128_t c[4][2];
  for (int r = 0; r < R; r++) c[r][0] = c[r][1] = wasm_f32x4_splat(0);
  for (int64_t kb = 0; kb < K; kb += 8) {
    v128_t rows[2];
    q4_block_rows(panel + kb * 4, &rows[0], &rows[1]);
    for (int h = 0; h < 2; h++) {
      v128_t w[4];
      q4_unpack16(rows[h], w);
      for (int e = 0; e < 2; e++) {
        const int64_t k = kb + 4 * h + 2 * e;
        if (k >= K) break;
        const float *sg = sc + (k / G) * 8;
        const v128_t g0 = wasm_v128_load(sg), g1 = wasm_v128_load(sg + 4);
        const v128_t b0 = wasm_f32x4_mul(F32X4_OF_Q4_LO(w[2 * e]), g0), b1 = wasm_f32x4_mul(F32X4_OF_Q4_HI(w[2 * e]), g1);
        const v128_t d0 = wasm_f32x4_mul(F32X4_OF_Q4_LO(w[2 * e + 1]), g0), d1 = wasm_f32x4_mul(F32X4_OF_Q4_HI(w[2 * e + 1]), g1);
        const bool two = k + 1 < K;
        for (int r = 0; r < R; r++) {
          const float *ar = a + (i + r) * K + k;
          const v128_t x0 = wasm_f32x4_splat(ar[0]), x1 = wasm_f32x4_splat(two ? ar[1] : 0.0f);
          c[r][0] = tdm_madd2(c[r][0], x0, b0, x1, d0);
          c[r][1] = tdm_madd2(c[r][1], x0, b1, x1, d1);
        }
      }
    }
  }
  for (int r = 0; r < R; r++) tdm_store8(y + (i + r) * N + j, c[r][0], c[r][1], N - j);
}

void tdm_q4_gemm_tiles_4x8__simd128(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale,
                                    float *y) {
  const int64_t PB = TDM_Q4_BLOCK_BYTES(K), NG = K / G + (K % G != 0);
  for (int64_t j = 0; j < N; j += 8) {
    const uint8_t *panel = qp + (j / 8) * PB;
    const float *sc = scale + (j / 8) * NG * 8;
    int64_t i = 0;
    for (; i + 4 <= M; i += 4) q4_tile(4, i, j, N, K, G, a, panel, sc, y);
    for (; i < M; i++) q4_tile(1, i, j, N, K, G, a, panel, sc, y);
  }
}

void tdm_q8_gemm_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y) {
  if (M == 1) q8_gemv__simd128(N, K, a, qp, scale, y);
  else tdm_q8_gemm_tiles_4x8__simd128(M, N, K, a, qp, scale, y);
}

void tdm_q4_gemm_4x8__simd128(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale, float *y) {
  tdm_q4_gemm_tiles_4x8__simd128(M, N, K, G, a, qp, scale, y);
}

#endif
