/* conv_dot_runs.c — issue #23: which walk of the weights brings Mimi's memory-bound dot convs (2
 * output positions per streaming step, 6-34 MB of float32 weights each) near the ~11-12 GB/s a plain
 * SIMD128 read gets with 4-8 streams? For bench/probes/conv_dot_runs.mjs (emcc -O3 -msimd128 as
 * tandem.wasm; clang-19 -O3 -mrelaxed-simd as tandem-relaxed.wasm). M output rows of K weights
 * against 2 positions, y [M, 2]. Every probe kernel sums each row exactly as one of the runtime's
 * kernels does (linked from src/: tdm_f32_conv_dot__simd128, lane l the k = l mod 4 products in
 * order; tdm_f32_conv_dot_2s__simd128, each row from its two halves at once), so check() asks for the
 * same bits; only which rows run together, and so the order in which memory is walked, changes:
 *  - runs R: rows i, i + L, ..., i + (R-1)·L (L = M / R), R sequential streams M / R rows apart
 *    (the rows past R·L one at a time), as the int8 GEMV's four column runs;
 *  - runs R × A: A adjacent rows in each run;
 *  - "ahead": the next step's weights loaded before this step's multiply-adds;
 *  - a plain read of the weights in 4 runs (what memory gives this process now).
 * The weights are cycled through >= CYCLE_MB of copies so every call reads them from DRAM. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wasm_simd128.h>

#include "../../src/kernels/variants.h"
#include "../../src/kernels/vec.h"

#define P 2

static int64_t M, K, ncopy, next;
static float *w, *colt, *y, *yr;

/* off: the weights start off floats past a 16-byte boundary (0: aligned, as malloc gives them). */
int setup(int m, int k, int mb, int off) {
  M = m, K = k;
  const int64_t W = M * K, B = (int64_t)mb << 20;
  ncopy = B > 0 ? (B + 4 * W - 1) / (4 * W) : 1;
  w = malloc((size_t)(4 * W * ncopy + 64)), colt = malloc((size_t)(4 * P * K)), y = malloc((size_t)(4 * P * M)),
  yr = malloc((size_t)(4 * P * M));
  if (!w || !colt || !y || !yr) return 0;
  w += off;
  uint32_t r = 1;
  for (int64_t i = 0; i < W; i++) r = r * 1664525u + 1013904223u, w[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 0.05f;
  for (int64_t i = 0; i < P * K; i++) r = r * 1664525u + 1013904223u, colt[i] = (float)(r >> 8) / 8388608.0f - 1.0f;
  for (int64_t c = 1; c < ncopy; c++) memcpy(w + c * W, w, (size_t)(4 * W));
  return 1;
}

/* One row's end, as the runtime's CONV_DOT_SUM: lanes 0+1, 2+3, both, then the K % 4 tail. */
static inline float finish(v128_t s, const float *ar, const float *x, int64_t KT) {
  float t =
      (wasm_f32x4_extract_lane(s, 0) + wasm_f32x4_extract_lane(s, 1)) + (wasm_f32x4_extract_lane(s, 2) + wasm_f32x4_extract_lane(s, 3));
  for (int64_t kk = KT; kk < K; kk++) t += ar[kk] * x[kk];
  return t;
}

/* R rows at row stride S (in rows: 1 = adjacent, L = runs), one stream each. */
#define RUNS_TILE(R, S) RUNS_TILE_AT(R, r *(S))
#define RUNS_TILE_AT(R, OFF) \
  do { \
    v128_t s[R][P]; \
    for (int r = 0; r < R; r++) \
      for (int q = 0; q < P; q++) s[r][q] = wasm_f32x4_splat(0.0f); \
    const float *ar = a + i * K; \
    int64_t k = 0; \
    for (; k + 4 <= K; k += 4) { \
      v128_t c[P]; \
      for (int q = 0; q < P; q++) c[q] = wasm_v128_load(colt + q * K + k); \
      for (int r = 0; r < R; r++) { \
        const v128_t v = wasm_v128_load(ar + (OFF) * K + k); \
        for (int q = 0; q < P; q++) s[r][q] = tdm_madd(v, c[q], s[r][q]); \
      } \
    } \
    for (int r = 0; r < R; r++) \
      for (int q = 0; q < P; q++) yo[(i + (OFF)) * 2 + q] = finish(s[r][q], ar + (OFF) * K, colt + q * K, k); \
  } while (0)

static void dot_runs4(const float *a, float *yo) {
  const int64_t L = M / 4;
  int64_t i = 0;
  for (; i < L; i++) RUNS_TILE(4, L);
  for (i = 4 * L; i < M; i++) RUNS_TILE(1, 1);
}

static void dot_runs8(const float *a, float *yo) {
  const int64_t L = M / 8;
  int64_t i = 0;
  for (; i < L; i++) RUNS_TILE(8, L);
  for (i = 8 * L; i < M; i++) RUNS_TILE(1, 1);
}

/* 4 runs × 2 adjacent rows. */
static void dot_runs4x2(const float *a, float *yo) {
  const int64_t L = M / 8 * 2;
  for (int64_t i0 = 0; i0 < L; i0 += 2) {
    const int64_t i = i0;
    RUNS_TILE_AT(8, (r >> 1) * L + (r & 1));
  }
  for (int64_t i = 4 * L; i < M; i++) RUNS_TILE(1, 1);
}

/* 4 runs, the next step's weights loaded ahead of this step's multiply-adds. */
static void dot_runs4_ahead(const float *a, float *yo) {
  const int64_t L = M / 4, K4 = K / 4 * 4;
  int64_t i = 0;
  for (; i < L; i++) {
    v128_t s[4][P];
    for (int r = 0; r < 4; r++)
      for (int q = 0; q < P; q++) s[r][q] = wasm_f32x4_splat(0.0f);
    const float *ar = a + i * K;
    if (K4 > 0) {
      v128_t v[4];
      for (int r = 0; r < 4; r++) v[r] = wasm_v128_load(ar + r * L * K);
      for (int64_t k = 0; k < K4; k += 4) {
        const int64_t kn = k + 4 < K4 ? k + 4 : k;
        v128_t c[P], nv[4];
        for (int r = 0; r < 4; r++) nv[r] = wasm_v128_load(ar + r * L * K + kn);
        for (int q = 0; q < P; q++) c[q] = wasm_v128_load(colt + q * K + k);
        for (int r = 0; r < 4; r++)
          for (int q = 0; q < P; q++) s[r][q] = tdm_madd(v[r], c[q], s[r][q]);
        for (int r = 0; r < 4; r++) v[r] = nv[r];
      }
    }
    for (int r = 0; r < 4; r++)
      for (int q = 0; q < P; q++) yo[(i + r * L) * 2 + q] = finish(s[r][q], ar + r * L * K, colt + q * K, K4);
  }
  for (i = 4 * L; i < M; i++) RUNS_TILE(1, 1);
}

/* R rows at row stride S, each from its two halves at once (the _2s kernel's order). */
#define RUNS2_TILE(R, S) \
  do { \
    v128_t s[R][P]; \
    for (int r = 0; r < R; r++) \
      for (int q = 0; q < P; q++) s[r][q] = wasm_f32x4_splat(0.0f); \
    const float *ar = a + i * K; \
    for (int64_t k = 0; k < h; k += 4) { \
      v128_t c[P], e[P]; \
      for (int q = 0; q < P; q++) c[q] = wasm_v128_load(colt + q * K + k), e[q] = wasm_v128_load(colt + q * K + h + k); \
      for (int r = 0; r < R; r++) { \
        const v128_t w0 = wasm_v128_load(ar + r * (S) * K + k), w1 = wasm_v128_load(ar + r * (S) * K + h + k); \
        for (int q = 0; q < P; q++) s[r][q] = tdm_madd(w1, e[q], tdm_madd(w0, c[q], s[r][q])); \
      } \
    } \
    for (int64_t k = 2 * h; k < K4; k += 4) \
      for (int r = 0; r < R; r++) \
        for (int q = 0; q < P; q++) s[r][q] = tdm_madd(wasm_v128_load(ar + r * (S) * K + k), wasm_v128_load(colt + q * K + k), s[r][q]); \
    for (int r = 0; r < R; r++) \
      for (int q = 0; q < P; q++) yo[(i + r * (S)) * 2 + q] = finish(s[r][q], ar + r * (S) * K, colt + q * K, K4); \
  } while (0)

static void dot2_runs4(const float *a, float *yo) {
  const int64_t K4 = K / 4 * 4, h = K4 / 8 * 4, L = M / 4;
  int64_t i = 0;
  for (; i < L; i++) RUNS2_TILE(4, L);
  for (i = 4 * L; i < M; i++) RUNS2_TILE(1, 1);
}

static void dot2_runs2(const float *a, float *yo) {
  const int64_t K4 = K / 4 * 4, h = K4 / 8 * 4, L = M / 2;
  int64_t i = 0;
  for (; i < L; i++) RUNS2_TILE(2, L);
  for (i = 2 * L; i < M; i++) RUNS2_TILE(1, 1);
}

/* main's walk before this probe (4 adjacent rows a tile), both orders. */
static void dot_adjacent4(const float *a, float *yo) {
  int64_t i = 0;
  for (; i + 4 <= M; i += 4) RUNS_TILE(4, 1);
  for (; i < M; i++) RUNS_TILE(1, 1);
}

static void dot2_adjacent4(const float *a, float *yo) {
  const int64_t K4 = K / 4 * 4, h = K4 / 8 * 4;
  int64_t i = 0;
  for (; i + 4 <= M; i += 4) RUNS2_TILE(4, 1);
  for (; i < M; i++) RUNS2_TILE(1, 1);
}

static void dot2_runs8(const float *a, float *yo) {
  const int64_t K4 = K / 4 * 4, h = K4 / 8 * 4, L = M / 8;
  int64_t i = 0;
  for (; i < L; i++) RUNS2_TILE(8, L);
  for (i = 8 * L; i < M; i++) RUNS2_TILE(1, 1);
}

static float plain_read8(const float *a) {
  const int64_t n = M * K / 32 * 4; /* 8 runs of n floats */
  v128_t s[8];
  for (int r = 0; r < 8; r++) s[r] = wasm_f32x4_splat(0);
  for (int64_t k = 0; k < n; k += 4)
    for (int r = 0; r < 8; r++) s[r] = wasm_f32x4_add(s[r], wasm_v128_load(a + r * n + k));
  for (int r = 1; r < 8; r++) s[0] = wasm_f32x4_add(s[0], s[r]);
  return wasm_f32x4_extract_lane(s[0], 0);
}

static float plain_read4(const float *a) {
  const int64_t n = M * K / 16 * 4; /* 4 runs of n floats */
  v128_t s0 = wasm_f32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t k = 0; k < n; k += 4) {
    s0 = wasm_f32x4_add(s0, wasm_v128_load(a + k)), s1 = wasm_f32x4_add(s1, wasm_v128_load(a + n + k));
    s2 = wasm_f32x4_add(s2, wasm_v128_load(a + 2 * n + k)), s3 = wasm_f32x4_add(s3, wasm_v128_load(a + 3 * n + k));
  }
  v128_t s = wasm_f32x4_add(wasm_f32x4_add(s0, s1), wasm_f32x4_add(s2, s3));
  return wasm_f32x4_extract_lane(s, 0);
}

/* 0 main's dot walk, 1 main's dot_2s walk (4 adjacent rows), 11 / 12 the runtime's dot / dot_2s (linked), 2 runs4, 3 runs8, 4 runs4x2, 5 runs4 ahead, 6 dot2 runs4,
 * 7 dot2 runs2, 8 plain read. */
float run(int which, int reps) {
  float sink = 0;
  for (int rep = 0; rep < reps; rep++) {
    const float *a = w + (next++ % ncopy) * M * K;
    switch (which) {
      case 0: dot_adjacent4(a, y); break;
      case 1: dot2_adjacent4(a, y); break;
      case 11: tdm_f32_conv_dot__simd128(M, P, K, a, colt, NULL, y, 2); break;
      case 12: tdm_f32_conv_dot_2s__simd128(M, P, K, a, colt, NULL, y, 2); break;
      case 2: dot_runs4(a, y); break;
      case 3: dot_runs8(a, y); break;
      case 4: dot_runs4x2(a, y); break;
      case 5: dot_runs4_ahead(a, y); break;
      case 6: dot2_runs4(a, y); break;
      case 7: dot2_runs2(a, y); break;
      case 8: sink += plain_read4(a); break;
      case 9: dot2_runs8(a, y); break;
      case 10: sink += plain_read8(a); break;
      default: break;
    }
    sink += y[rep % (2 * M)];
  }
  return sink;
}

/* 0 when every probe kernel gives its runtime kernel's bits; else 1 + the first that does not. */
int check(void) {
  for (int which = 0; which <= 9; which++) {
    if (which == 8) continue;
    const int ref = which == 1 || (which >= 6 && which <= 9) ? 12 : 11;
    run(ref, 1);
    next--;
    memcpy(yr, y, (size_t)(4 * P * M));
    memset(y, 0, (size_t)(4 * P * M));
    run(which, 1);
    next--;
    if (memcmp(y, yr, (size_t)(4 * P * M))) return 1 + which;
  }
  return 0;
}
