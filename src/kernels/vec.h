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
#else
#define tdm_f32_dot tdm_f32_dot__scalar
#define tdm_f32_axpy tdm_f32_axpy__scalar
#endif

#endif
