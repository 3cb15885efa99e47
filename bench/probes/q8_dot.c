/* q8_dot.c — one int8 GEMV two ways, for bench/probes/q8_dot.mjs: the float-activation kernel
 * (tdm_q8_gemm_4x8__simd128, M = 1) and the integer-dot one (tdm_q8_quantize_row +
 * tdm_q8_gemv_dot__simd128), on the same random weights. Built by that script with emcc. */
#include <stdint.h>
#include <stdlib.h>

#include "../../src/kernels/variants.h"

static int64_t N, K;
static float *a, *scale, *y;
static int8_t *qp;
static int16_t *xq;
static float *xs;

int setup(int n, int k) {
  N = n, K = k;
  const int64_t P = (N + 7) / 8;
  a = malloc(sizeof(float) * (size_t)K), scale = malloc(sizeof(float) * (size_t)P * 8), y = malloc(sizeof(float) * (size_t)N);
  qp = malloc((size_t)(P * K * 8)), xq = malloc(sizeof(int16_t) * (size_t)(K + 1)), xs = malloc(sizeof(float) * (size_t)(K / 32 + 1));
  if (!a || !scale || !y || !qp || !xq || !xs) return 0;
  uint32_t r = 1;
  for (int64_t i = 0; i < P * K * 8; i++) r = r * 1664525u + 1013904223u, qp[i] = (int8_t)((int)(r >> 24) % 127);
  for (int64_t i = 0; i < K; i++) r = r * 1664525u + 1013904223u, a[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
  for (int64_t i = 0; i < P * 8; i++) scale[i] = 0.01f;
  return 1;
}

float run_float(int reps) {
  for (int i = 0; i < reps; i++) tdm_q8_gemm_4x8__simd128(1, N, K, a, qp, scale, y);
  return y[N - 1];
}

float run_dot(int reps) {
  for (int i = 0; i < reps; i++) {
    tdm_q8_quantize_row(K, a, xq, xs);
    tdm_q8_gemv_dot__simd128(N, K, xq, xs, qp, scale, y);
  }
  return y[N - 1];
}
