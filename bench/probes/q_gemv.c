/* q_gemv.c — the decode step's integer-dot GEMVs on their own, for bench/probes/q_gemv.mjs (which
 * builds this with clang-19 for wasm32-wasi, as tandem-relaxed.wasm is built): the int8 one
 * (tdm_q8_gemv_dot__simd128) and the int4 one (tdm_q4_gemv_dot__relaxed), each with its activation
 * quantization, and a plain SIMD read of the int8 weights' bytes (what memory gives this process
 * now), on the same random weights. check() compares both GEMVs with their scalar references bit
 * for bit. Built from any tree's src/, so a before/after is two builds of this file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wasm_simd128.h>

#include "../../src/kernels/variants.h"

static int64_t N, K, G = 32;
static float *a, *s8, *s4, *y, *y2, *xs;
static int8_t *q8, *q8p, *xq4;
static uint8_t *q4;
static int16_t *xq8;
static int32_t *xsum;

int setup(int n, int k) {
  N = n, K = k;
  const int64_t P = (N + 7) / 8, NG = (K + G - 1) / G, B8 = P * K * 8, B4 = P * ((K + 1) / 2) * 8;
  a = malloc(4 * K), s8 = malloc(4 * P * 8), s4 = malloc(4 * P * 8 * NG), y = malloc(4 * N), y2 = malloc(8 * N);
  q8 = malloc(B8), q8p = malloc(B8), q4 = malloc(B4), xq8 = malloc(4 * (K + 2)), xq4 = malloc(K + 2), xs = malloc(8 * (K / 16 + 2));
  xsum = malloc(4 * (K / 16 + 2));
  if (!a || !q8p || !s8 || !s4 || !y || !y2 || !q8 || !q4 || !xq8 || !xq4 || !xs || !xsum) return 0;
  uint32_t r = 1;
  for (int64_t i = 0; i < B8; i++) r = r * 1664525u + 1013904223u, q8[i] = (int8_t)((int)(r >> 24) % 127);
  for (int64_t i = 0; i < B4; i++) r = r * 1664525u + 1013904223u, q4[i] = (uint8_t)(r >> 24);
  for (int64_t i = 0; i < K; i++) r = r * 1664525u + 1013904223u, a[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
  memcpy(q8p, q8, (size_t)B8);
  if (K % 2 == 0) tdm_q8_pair_panels(N, K, q8p, true);
  for (int64_t i = 0; i < P * 8; i++) s8[i] = 0.01f;
  for (int64_t i = 0; i < P * 8 * NG; i++) s4[i] = 0.01f + (float)i * 1e-6f;
  return 1;
}

/* which: 0 int8, 1 int4, 2 the plain read of the int8 bytes (4 accumulators, 64 bytes a step), 3 int8 on
 * the paired layout (K even), 4 / 5 int8 with 2 rows on the file's / the paired layout */
float run(int which, int reps) {
  const int8_t *e = q8 + ((N + 7) / 8) * K * 8;
  for (int i = 0; i < reps; i++) {
    if (which == 0) tdm_q8_quantize_row(K, a, xq8, xs), tdm_q8_gemv_dot__simd128(N, K, xq8, xs, q8, s8, y);
#if TDM_RELAXED_DOT
    else if (which == 1) tdm_q4_quantize_row(K, G, a, xq4, xs, xsum), tdm_q4_gemv_dot__relaxed(N, K, G, xq4, xs, xsum, q4, s4, y);
#endif
    else if (which == 3) tdm_q8_quantize_row(K, a, xq8, xs), tdm_q8_gemv_dot_paired__simd128(N, K, xq8, xs, q8p, s8, y);
    else if (which == 4 || which == 5) {
      tdm_q8_quantize_row(K, a, xq8, xs), tdm_q8_quantize_row(K, a, xq8 + K, xs + (K + 31) / 32);
      (which == 4 ? tdm_q8_gemm_dot__simd128 : tdm_q8_gemm_dot_paired__simd128)(2, N, K, xq8, xs, which == 4 ? q8 : q8p, s8, y2, N);
    } else {
      v128_t t0 = wasm_i32x4_splat(0), t1 = t0, t2 = t0, t3 = t0;
      for (const int8_t *p = q8; p + 64 <= e; p += 64) {
        t0 = wasm_i32x4_add(t0, wasm_v128_load(p)), t1 = wasm_i32x4_add(t1, wasm_v128_load(p + 16));
        t2 = wasm_i32x4_add(t2, wasm_v128_load(p + 32)), t3 = wasm_i32x4_add(t3, wasm_v128_load(p + 48));
      }
      y[0] = (float)wasm_i32x4_extract_lane(wasm_i32x4_add(wasm_i32x4_add(t0, t1), wasm_i32x4_add(t2, t3)), 0);
    }
  }
  return y[N - 1];
}

/* 0 when both GEMVs give their scalar reference's bits; bit 0 int8 differs, bit 1 int4 */
int check(void) {
  int bad = 0;
  tdm_q8_quantize_row(K, a, xq8, xs);
  tdm_q8_gemv_dot__scalar(N, K, xq8, xs, q8, s8, y), tdm_q8_gemv_dot__simd128(N, K, xq8, xs, q8, s8, y2);
  bad |= memcmp(y, y2, 4 * (size_t)N) != 0;
  tdm_q8_gemv_dot_paired__simd128(N, K, xq8, xs, q8p, s8, y2);
  bad |= (memcmp(y, y2, 4 * (size_t)N) != 0) << 2;
#if TDM_RELAXED_DOT
  tdm_q4_quantize_row(K, G, a, xq4, xs, xsum);
  tdm_q4_gemv_dot__scalar(N, K, G, xq4, xs, xsum, q4, s4, y), tdm_q4_gemv_dot__relaxed(N, K, G, xq4, xs, xsum, q4, s4, y2);
  bad |= (memcmp(y, y2, 4 * (size_t)N) != 0) << 1;
#endif
  return bad;
}
