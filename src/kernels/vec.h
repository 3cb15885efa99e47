/* vec.h — small vector kernels shared by ops (attention, conv): a scalar reference and, in the
 * wasm build, a SIMD128 variant, both inline. Checked by the ops' parity tests in wasm. */
#ifndef TDM_VEC_H
#define TDM_VEC_H

#include <stdint.h>

static inline float tdm_f32_dot__scalar(const float *a, const float *b, int64_t n) {
  float r = 0;
  for (int64_t i = 0; i < n; i++) r += a[i] * b[i];
  return r;
}

/* y += p * x */
static inline void tdm_f32_axpy__scalar(float p, const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += p * x[i];
}

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>

static inline float tdm_f32_dot__simd128(const float *a, const float *b, int64_t n) {
  v128_t s = wasm_f32x4_splat(0);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) s = wasm_f32x4_add(s, wasm_f32x4_mul(wasm_v128_load(a + i), wasm_v128_load(b + i)));
  float r = wasm_f32x4_extract_lane(s, 0) + wasm_f32x4_extract_lane(s, 1) + wasm_f32x4_extract_lane(s, 2) +
            wasm_f32x4_extract_lane(s, 3);
  return r + tdm_f32_dot__scalar(a + i, b + i, n - i);
}

static inline void tdm_f32_axpy__simd128(float p, const float *x, float *y, int64_t n) {
  const v128_t pv = wasm_f32x4_splat(p);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) wasm_v128_store(y + i, wasm_f32x4_add(wasm_v128_load(y + i), wasm_f32x4_mul(pv, wasm_v128_load(x + i))));
  tdm_f32_axpy__scalar(p, x + i, y + i, n - i);
}
#define tdm_f32_dot tdm_f32_dot__simd128
#define tdm_f32_axpy tdm_f32_axpy__simd128

/* e^x for four lanes: x = n ln2 + r with |r| <= ln2/2, e^r by a degree-6 polynomial, 2^n by
 * building the exponent bits. Inputs are clamped to [-87.3, 88.7] (the float32 range; NaN stays
 * NaN). Measured maximum relative error against expf: 2.4e-7 (tests/c/kernel_selftest.c checks
 * < 5e-7 over [-87, 88]). */
static inline v128_t tdm_f32x4_exp(v128_t x) {
  x = wasm_f32x4_min(wasm_f32x4_max(x, wasm_f32x4_splat(-87.3f)), wasm_f32x4_splat(88.7f));
  const v128_t n = wasm_f32x4_nearest(wasm_f32x4_mul(x, wasm_f32x4_splat(1.44269504f)));
  v128_t r = wasm_f32x4_sub(x, wasm_f32x4_mul(n, wasm_f32x4_splat(0.693145752f)));
  r = wasm_f32x4_sub(r, wasm_f32x4_mul(n, wasm_f32x4_splat(1.42860677e-6f)));
  v128_t p = wasm_f32x4_splat(1.0f / 720);
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f / 120));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f / 24));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f / 6));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(0.5f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f));
  /* 2^n in two halves so that n = 128 (from x near 88.7) stays representable */
  const v128_t ni = wasm_i32x4_trunc_sat_f32x4(n);
  const v128_t h = wasm_i32x4_shr(ni, 1);
  const v128_t s1 = wasm_i32x4_shl(wasm_i32x4_add(h, wasm_i32x4_splat(127)), 23);
  const v128_t s2 = wasm_i32x4_shl(wasm_i32x4_add(wasm_i32x4_sub(ni, h), wasm_i32x4_splat(127)), 23);
  return wasm_f32x4_mul(wasm_f32x4_mul(p, s1), s2);
}

/* erf(x) for four lanes: Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7 in exact arithmetic) with
 * the SIMD exp and odd symmetry. In float32 the absolute error against erff is below 1e-6 over
 * [-6, 6] (tests/c/kernel_selftest.c; it exceeds 5e-7 at a few points). NaN propagates. */
static inline v128_t tdm_f32x4_erf(v128_t x) {
  const v128_t ax = wasm_f32x4_abs(x);
  const v128_t t = wasm_f32x4_div(wasm_f32x4_splat(1.0f), wasm_f32x4_add(wasm_f32x4_splat(1.0f), wasm_f32x4_mul(wasm_f32x4_splat(0.3275911f), ax)));
  v128_t p = wasm_f32x4_splat(1.061405429f);
  p = wasm_f32x4_add(wasm_f32x4_mul(p, t), wasm_f32x4_splat(-1.453152027f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, t), wasm_f32x4_splat(1.421413741f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, t), wasm_f32x4_splat(-0.284496736f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, t), wasm_f32x4_splat(0.254829592f));
  p = wasm_f32x4_mul(p, t);
  const v128_t y = wasm_f32x4_sub(wasm_f32x4_splat(1.0f), wasm_f32x4_mul(p, tdm_f32x4_exp(wasm_f32x4_neg(wasm_f32x4_mul(ax, ax)))));
  /* copy x's sign onto y (erf is odd); NaN: ax is NaN, so y is NaN */
  const v128_t sign = wasm_v128_and(x, wasm_i32x4_splat((int32_t)0x80000000u));
  return wasm_v128_or(y, sign);
}
#else
#define tdm_f32_dot tdm_f32_dot__scalar
#define tdm_f32_axpy tdm_f32_axpy__scalar
#endif

#endif
