/* kernel_selftest.c — every SIMD128 kernel against its scalar reference, on sizes that exercise
 * each tail (rows % 4, columns % 8 and, for one row, % 32, K % 4). Built into a test-only wasm module
 * (build/wasm/kernel_selftest.wasm) that tests/js/kernels.test.js runs; natively it checks the
 * scalar kernels against a naive triple loop. Returns the number of mismatches. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/kernels/gemm.h"
#include "../../src/kernels/vec.h"

static uint32_t rng = 12345;
static float frand(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void pack(int64_t N, int64_t K, const float *b, float *bp) {
  const int64_t panels = (N + TDM_PANEL - 1) / TDM_PANEL;
  memset(bp, 0, (size_t)(panels * K * TDM_PANEL) * sizeof(float));
  for (int64_t k = 0; k < K; k++)
    for (int64_t j = 0; j < N; j++) bp[((j / TDM_PANEL) * K + k) * TDM_PANEL + j % TDM_PANEL] = b[k * N + j];
}

static int compare(const float *x, const float *ref, int64_t n, int64_t K) {
  int bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (!(fabsf(x[i] - ref[i]) <= 1e-5f * (float)K + 1e-5f * fabsf(ref[i]))) bad++;
  return bad;
}

static int check(int64_t M, int64_t N, int64_t K) {
  const int64_t panels = (N + TDM_PANEL - 1) / TDM_PANEL;
  float *a = malloc(sizeof(float) * (size_t)(M * K + 1)), *b = malloc(sizeof(float) * (size_t)(K * N + 1));
  float *bp = malloc(sizeof(float) * (size_t)(panels * K * TDM_PANEL + 1));
  float *ref = malloc(sizeof(float) * (size_t)(M * N + 1)), *y = malloc(sizeof(float) * (size_t)(M * N + 1));
  for (int64_t i = 0; i < M * K; i++) a[i] = frand();
  for (int64_t i = 0; i < K * N; i++) b[i] = frand();
  pack(N, K, b, bp);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++) acc += (double)a[i * K + k] * b[k * N + j];
      ref[i * N + j] = (float)acc;
    }
  int bad = 0;
  tdm_f32_gemm_rows__scalar(M, N, K, a, b, y);
  bad += compare(y, ref, M * N, K);
  tdm_f32_gemm_packed__scalar(M, N, K, a, bp, y);
  bad += compare(y, ref, M * N, K);
#if defined(__wasm_simd128__)
  tdm_f32_gemm_rows_4x8__simd128(M, N, K, a, b, y);
  bad += compare(y, ref, M * N, K);
  tdm_f32_gemm_packed_4x8__simd128(M, N, K, a, bp, y);
  bad += compare(y, ref, M * N, K);
#endif
  free(a), free(b), free(bp), free(ref), free(y);
  return bad;
}

/* The SIMD exp against expf over the float32 range: relative error below 5e-7. */
static int check_exp(void) {
  int bad = 0;
#if defined(__wasm_simd128__)
  float worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.0173f) {
    float y[4];
    wasm_v128_store(y, tdm_f32x4_exp(wasm_f32x4_make(x, x + 0.004f, x + 0.008f, x + 0.012f)));
    for (int i = 0; i < 4; i++) {
      const float xi = x + 0.004f * (float)i, want = expf(xi), rel = fabsf(y[i] - want) / want;
      if (rel > worst) worst = rel;
      if (!(rel < 5e-7f)) bad++;
    }
  }
  float nan[4];
  wasm_v128_store(nan, tdm_f32x4_exp(wasm_f32x4_splat(NAN)));
  if (nan[0] == nan[0]) bad++; /* NaN propagates */
#endif
  return bad;
}

/* The SIMD erf against erff: absolute error below 5e-7 over [-6, 6]. */
static int check_erf(void) {
  int bad = 0;
#if defined(__wasm_simd128__)
  for (float x = -6.0f; x < 6.0f; x += 0.0031f) {
    float y[4];
    wasm_v128_store(y, tdm_f32x4_erf(wasm_f32x4_make(x, -x, x * 0.5f, x * 0.01f)));
    const float xs[4] = {x, -x, x * 0.5f, x * 0.01f};
    for (int i = 0; i < 4; i++)
      if (!(fabsf(y[i] - erff(xs[i])) < 5e-7f)) bad++;
  }
  float nan[4];
  wasm_v128_store(nan, tdm_f32x4_erf(wasm_f32x4_splat(NAN)));
  if (nan[0] == nan[0]) bad++;
#endif
  return bad;
}

int tdm_kernel_selftest(void) {
  int bad = check_exp() + check_erf();
  const int64_t ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 13}, ns[] = {1, 3, 7, 8, 9, 15, 16, 17, 29, 33, 50, 65}, ks[] = {1, 2, 3, 4, 5, 8, 17, 64};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
    for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
      for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) bad += check(ms[i], ns[j], ks[k]);
  bad += check(64, 256, 128);
  return bad;
}

#if !defined(__wasm__)
#include <stdio.h>
int main(void) {
  int bad = tdm_kernel_selftest();
  printf("kernel_selftest: %d mismatches\n", bad);
  return bad != 0;
}
#endif
