/* reduce_simd128.c — the SIMD128 variants of the reduction and normalization kernels (declared in
 * variants.h beside their scalar references in reduce.c): statistics in float lanes, so their order
 * differs from the references' (the tolerances are in docs/ops.md). config.c picks them where the
 * build has SIMD128; tests/c/kernel_selftest.c compares them with the references. */
#include "variants.h"

#include <math.h>

#if TDM_SIMD128
#include "vec.h"

static inline float hmax(v128_t v) {
  float m = wasm_f32x4_extract_lane(v, 0);
  for (int i = 1; i < 4; i++) {
    const float x = i == 1 ? wasm_f32x4_extract_lane(v, 1) : i == 2 ? wasm_f32x4_extract_lane(v, 2) : wasm_f32x4_extract_lane(v, 3);
    m = (x > m || x != x) ? x : m;
  }
  return m;
}

static inline float hsum(v128_t v) {
  return wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1) + wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3);
}

/* Four partial sums, then the tail: the order differs from the scalar reference. */
float tdm_f32_sum_row__simd128(const float *x, int64_t n) {
  v128_t s4 = wasm_f32x4_splat(0);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) s4 = wasm_f32x4_add(s4, wasm_v128_load(x + i));
  float sum = hsum(s4);
  for (; i < n; i++) sum += x[i];
  return sum;
}

/* One contiguous row of softmax / log_softmax, four lanes at a time (sum in float lanes; masked
 * -inf scores give exactly 0). */
void tdm_f32_softmax_row__simd128(const float *x, float *y, int64_t n, bool logp) {
  v128_t m4 = wasm_f32x4_splat(-INFINITY);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) m4 = wasm_f32x4_max(m4, wasm_v128_load(x + i)); /* NaN propagates */
  float mx = hmax(m4);
  for (; i < n; i++) mx = (x[i] > mx || x[i] != x[i]) ? x[i] : mx;
  if (mx == -INFINITY) mx = 0;
  const v128_t mv = wasm_f32x4_splat(mx), ninf = wasm_f32x4_splat(-INFINITY), zero = wasm_f32x4_splat(0);
  v128_t s4 = zero;
  for (i = 0; i + 4 <= n; i += 4) {
    const v128_t v = wasm_v128_load(x + i);
    const v128_t e = wasm_v128_bitselect(zero, tdm_f32x4_exp(wasm_f32x4_sub(v, mv)), wasm_f32x4_eq(v, ninf));
    if (!logp) wasm_v128_store(y + i, e);
    s4 = wasm_f32x4_add(s4, e);
  }
  float sum = hsum(s4);
  for (; i < n; i++) {
    const float e = x[i] == -INFINITY ? 0.0f : expf(x[i] - mx);
    if (!logp) y[i] = e;
    sum += e;
  }
  if (logp) {
    const v128_t c = wasm_f32x4_splat(mx + logf(sum));
    for (i = 0; i + 4 <= n; i += 4) wasm_v128_store(y + i, wasm_f32x4_sub(wasm_v128_load(x + i), c));
    for (; i < n; i++) y[i] = x[i] - (mx + logf(sum));
  } else {
    const float r = 1.0f / sum;
    const v128_t rv = wasm_f32x4_splat(r);
    for (i = 0; i + 4 <= n; i += 4) wasm_v128_store(y + i, wasm_f32x4_mul(wasm_v128_load(y + i), rv));
    for (; i < n; i++) y[i] *= r;
  }
}

void tdm_f32_layer_norm_row__simd128(const float *x, float *y, int64_t n, const float *w, const float *b, float eps) {
  const float mu = tdm_f32_sum_row__simd128(x, n) / (float)n; /* the row sum's order: the same bits */
  int64_t i;
  const v128_t muv = wasm_f32x4_splat(mu);
  v128_t q4 = wasm_f32x4_splat(0);
  for (i = 0; i + 4 <= n; i += 4) {
    const v128_t d = wasm_f32x4_sub(wasm_v128_load(x + i), muv);
    q4 = wasm_f32x4_add(q4, wasm_f32x4_mul(d, d));
  }
  float q = hsum(q4);
  for (; i < n; i++) q += (x[i] - mu) * (x[i] - mu);
  const float rstd = 1.0f / sqrtf(q / (float)n + eps);
  const v128_t rv = wasm_f32x4_splat(rstd);
  for (i = 0; i + 4 <= n; i += 4) {
    v128_t v = wasm_f32x4_mul(wasm_f32x4_sub(wasm_v128_load(x + i), muv), rv);
    if (w) v = wasm_f32x4_mul(v, wasm_v128_load(w + i));
    if (b) v = wasm_f32x4_add(v, wasm_v128_load(b + i));
    wasm_v128_store(y + i, v);
  }
  for (; i < n; i++) {
    float v = (x[i] - mu) * rstd;
    if (w) v *= w[i];
    if (b) v += b[i];
    y[i] = v;
  }
}

/* Four groups at x, x+1, x+2, x+3, each n values `stride` apart. */
void tdm_f32_layer_norm_4groups__simd128(const float *x, float *y, int64_t n, int64_t stride, const float *w, const float *b, float eps) {
  v128_t s4 = wasm_f32x4_splat(0);
  for (int64_t i = 0; i < n; i++) s4 = wasm_f32x4_add(s4, wasm_v128_load(x + i * stride));
  const v128_t mu = wasm_f32x4_div(s4, wasm_f32x4_splat((float)n));
  v128_t q4 = wasm_f32x4_splat(0);
  for (int64_t i = 0; i < n; i++) {
    const v128_t d = wasm_f32x4_sub(wasm_v128_load(x + i * stride), mu);
    q4 = wasm_f32x4_add(q4, wasm_f32x4_mul(d, d));
  }
  const v128_t one = wasm_f32x4_splat(1.0f);
  const v128_t rstd =
      wasm_f32x4_div(one, wasm_f32x4_sqrt(wasm_f32x4_add(wasm_f32x4_div(q4, wasm_f32x4_splat((float)n)), wasm_f32x4_splat(eps))));
  for (int64_t i = 0; i < n; i++) {
    v128_t v = wasm_f32x4_mul(wasm_f32x4_sub(wasm_v128_load(x + i * stride), mu), rstd);
    if (w) v = wasm_f32x4_mul(v, wasm_f32x4_splat(w[i]));
    if (b) v = wasm_f32x4_add(v, wasm_f32x4_splat(b[i]));
    wasm_v128_store(y + i * stride, v);
  }
}

void tdm_f32_rms_norm_row__simd128(const float *x, float *y, int64_t n, const float *w, float eps) {
  v128_t q4 = wasm_f32x4_splat(0);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const v128_t v = wasm_v128_load(x + i);
    q4 = wasm_f32x4_add(q4, wasm_f32x4_mul(v, v));
  }
  float q = hsum(q4);
  for (; i < n; i++) q += x[i] * x[i];
  const float rstd = 1.0f / sqrtf(q / (float)n + eps);
  const v128_t rv = wasm_f32x4_splat(rstd);
  for (i = 0; i + 4 <= n; i += 4) {
    v128_t v = wasm_f32x4_mul(wasm_v128_load(x + i), rv);
    if (w) v = wasm_f32x4_mul(v, wasm_v128_load(w + i));
    wasm_v128_store(y + i, v);
  }
  for (; i < n; i++) y[i] = w ? x[i] * rstd * w[i] : x[i] * rstd;
}
#endif
