/* kernel_selftest.c — every SIMD128 kernel (src/kernels/variants.h, vec.h, gemm.h) against its
 * scalar reference, both compiled into one test-only wasm module (build/wasm/kernel_selftest.wasm)
 * that tests/js/kernels.test.js runs, and natively into the kernel_selftest ctest (the SIMD128
 * kernels through SIMDe, plus the x86-64 AVX2+FMA and AVX-512 GEMMs where the CPU has them): on
 * sizes that exercise each tail (n % 4, rows % 4, columns % 8 and, for one row, % 32, K % 4) and on
 * special values (NaN, ±inf, ±0, denormals, the largest floats, exp's overflow and underflow
 * thresholds). Exact kernels must match bit for bit (every NaN counts as equal); the others within
 * the tolerance docs/ops.md states. Built a second time with relaxed SIMD
 * (kernel_selftest_relaxed.wasm), the kernels' multiply-adds may be fused: the multiply-add kernels
 * that are exact in SIMD128 (axpy, the padded convolution) are then held to the rounding of one
 * product per term (fused_near) instead. Built with -DTDM_NATIVE_SIMD=OFF only the scalar kernels
 * are checked. Returns the number of mismatches;
 * tdm_kernel_selftest_family(k) gives them per family (the order of the F_ enum below) and
 * tdm_kernel_selftest_first(k, field) the family's first mismatch. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/kernels/gemm.h"
#include "../../src/kernels/variants.h"
#include "../../src/kernels/vec.h"

#if !defined(__wasm__)
#include <stdio.h>
#define REPORT(...) fprintf(stderr, __VA_ARGS__)
#else
#define REPORT(...) ((void)0)
#endif

static uint32_t rng = 12345;
static float frand(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

enum {
  F_GEMM,
  F_BINARY,
  F_UNARY_EXACT,
  F_EXP,
  F_EXP_FAMILY,
  F_ERF,
  F_SOFTMAX,
  F_SUM,
  F_NORM,
  F_ATTENTION,
  F_CONV,
  F_CONV_GEMM,
  F_CONV_TRANSPOSE,
  F_POOL,
  F_QUANT,
  F_COUNT
};
static int bad_by_family[F_COUNT];

/* Special float32 values every elementwise check mixes into its inputs. */
static const float SPECIAL[] = {NAN,     INFINITY, -INFINITY, 0.0f,  -0.0f,  FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, 1e-45f,
                                -1e-45f, 1.0f,     -1.0f,     0.5f,  1e-8f,  -1e-8f,  88.72f,   88.73f,  89.0f,    -87.5f,
                                -103.9f, -104.5f,  -110.0f,   20.0f, -20.0f, 7.9f,    -9.5f,    4.0f};
#define N_SPECIAL (int)(sizeof SPECIAL / sizeof SPECIAL[0])

/* n values: random in [-scale, scale], and with `special` the special values at positions that
 * move with n (so they land in the SIMD body and in the tail). */
static void fill(float *x, int64_t n, float scale, bool special, int salt) {
  for (int64_t i = 0; i < n; i++) x[i] = frand() * scale;
  if (special)
    for (int64_t i = 0; i < n; i++)
      if ((i * 7 + salt + n) % 3 == 0) x[i] = SPECIAL[(i + salt + n) % N_SPECIAL];
}

static bool near(float y, float ref, float rtol, float atol);

/* Same value, the same sign of zero, or both NaN. */
static bool same(float a, float b) {
  if (a != a || b != b) return a != a && b != b;
  return a == b && signbit(a) == signbit(b);
}

/* Within rtol·|ref| + atol; NaN, ±inf and exact zeros must match in kind. */
/* A multiply-add kernel's y against its unfused scalar reference: bit for bit in the SIMD128 build;
 * with relaxed SIMD, where each fused step skips one rounding of a product, within a float32
 * rounding of each of the `terms` products' magnitude (`mag`, their sum of absolute values). */
static bool fused_near(float y, float ref, float mag) {
#if defined(TDM_RELAXED_SIMD)
  return near(y, ref, 1.2e-7f, 1.2e-7f * mag);
#else
  (void)mag;
  return same(y, ref);
#endif
}

static bool near(float y, float ref, float rtol, float atol) {
  if (ref != ref || y != y) return ref != ref && y != y;
  if (isinf(ref) || isinf(y)) return y == ref;
  return fabsf(y - ref) <= rtol * fabsf(ref) + atol;
}

/* The bound fused_near takes for one output of a direct convolution: the bias's and the products'
 * absolute values summed, times the number of terms (a rounding each). */
static float conv_point_magnitude(const tdm_conv_geom *g, const float *xg, const float *wo, int64_t Cg, int64_t oh, int64_t ow, float b) {
  float mag = fabsf(b);
  int64_t terms = 1;
  for (int64_t c = 0; c < Cg; c++)
    for (int64_t kh = 0; kh < g->KH; kh++) {
      const int64_t ih = oh * g->sh - g->ph + kh * g->dh;
      if (ih < 0 || ih >= g->H) continue;
      for (int64_t kw = 0; kw < g->KW; kw++) {
        const int64_t iw = ow * g->sw - g->pw + kw * g->dw;
        if (iw >= 0 && iw < g->W) mag += fabsf(wo[(c * g->KH + kh) * g->KW + kw] * xg[(c * g->H + ih) * g->W + iw]), terms++;
      }
    }
  return mag * (float)terms;
}

/* The first mismatch of each family: n, i, x, the kernel's value, the reference's. */
static double first_bad[F_COUNT][5];

static int mismatch(int family, const char *what, int64_t n, int64_t i, double x, float y, float ref) {
  REPORT("%s n=%lld i=%lld x=%.9g: %.9g, reference %.9g\n", what, (long long)n, (long long)i, x, y, ref);
  (void)what;
  if (bad_by_family[family]++ == 0) {
    const double v[5] = {(double)n, (double)i, x, y, ref};
    memcpy(first_bad[family], v, sizeof v);
  }
  return 1;
}

static const int64_t SIZES[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 17, 31, 32, 33, 37, 64, 100, 257};
#define N_SIZES (int)(sizeof SIZES / sizeof SIZES[0])
#define MAXN 258 /* the largest of SIZES, plus the value past it that check_binary fills (n + 1) */

static void pack(int64_t N, int64_t K, const float *b, float *bp) {
  const int64_t panels = (N + TDM_PANEL - 1) / TDM_PANEL;
  memset(bp, 0, (size_t)(panels * K * TDM_PANEL) * sizeof(float));
  for (int64_t k = 0; k < K; k++)
    for (int64_t j = 0; j < N; j++) bp[((j / TDM_PANEL) * K + k) * TDM_PANEL + j % TDM_PANEL] = b[k * N + j];
}

static int gemm_compare(const float *x, const float *ref, int64_t n, int64_t K) {
  int bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (!(fabsf(x[i] - ref[i]) <= 1e-5f * (float)K + 1e-5f * fabsf(ref[i]))) bad++;
  return bad;
}

static int check_gemm(int64_t M, int64_t N, int64_t K) {
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
  bad += gemm_compare(y, ref, M * N, K);
  tdm_f32_gemm_packed__scalar(M, N, K, a, bp, y);
  bad += gemm_compare(y, ref, M * N, K);
#if TDM_SIMD128
  tdm_f32_gemm_rows_4x8__simd128(M, N, K, a, b, y);
  bad += gemm_compare(y, ref, M * N, K);
  tdm_f32_gemm_packed_4x8__simd128(M, N, K, a, bp, y);
  bad += gemm_compare(y, ref, M * N, K);
  if (M == 1 && N <= MAXN) { /* the GEMV split by columns in blocks of 32 (the thread parts): the same bits */
    float row[MAXN];
    for (int64_t lo = 32; lo < N; lo += 32) {
      tdm_f32_gemm_packed_4x8__simd128(1, N - lo, K, a, bp + lo / TDM_PANEL * K * TDM_PANEL, row);
      for (int64_t j = lo; j < N; j++)
        if (!same(row[j - lo], y[j])) bad += mismatch(F_GEMM, "gemv packed, columns from lo", N, j, (double)lo, row[j - lo], y[j]);
    }
  }
  { /* the packed tiles (4 rows; 5 with the relaxed builds' shuffled splats) on rows 4.. (a thread
     * part: rows split in blocks of 4) and on each row alone: the bits of the whole GEMM's rows */
    float *yw = malloc(sizeof(float) * (size_t)(M * N + 1)), *yp = malloc(sizeof(float) * (size_t)(M * N + 1));
    tdm_f32_gemm_packed_tiles_4x8__simd128(M, N, K, a, bp, yw);
    if (M > 4) {
      tdm_f32_gemm_packed_tiles_4x8__simd128(M - 4, N, K, a + 4 * K, bp, yp);
      for (int64_t i = 0; i < (M - 4) * N; i++)
        if (!same(yp[i], yw[4 * N + i])) bad += mismatch(F_GEMM, "gemm packed tiles, rows from 4", N, i, (double)M, yp[i], yw[4 * N + i]);
    }
    for (int64_t i = 0; i < M; i++) {
      tdm_f32_gemm_packed_tiles_4x8__simd128(1, N, K, a + i * K, bp, yp);
      for (int64_t j = 0; j < N; j++)
        if (!same(yp[j], yw[i * N + j]))
          bad += mismatch(F_GEMM, "gemm packed tiles, one row", N, i * N + j, (double)M, yp[j], yw[i * N + j]);
    }
    free(yw), free(yp);
  }
#endif
#if TDM_X86_AVX2
  if (tdm_cpu_avx2_fma()) {
    tdm_f32_gemm_rows__avx2(M, N, K, a, b, y);
    bad += gemm_compare(y, ref, M * N, K);
    tdm_f32_gemm_packed_tiles__avx2(M, N, K, a, bp, y);
    bad += gemm_compare(y, ref, M * N, K);
    /* a row's value does not depend on the tile it falls in (the thread parts split rows) */
    float row[MAXN];
    for (int64_t i = 0; i < M && N <= MAXN; i++) {
      tdm_f32_gemm_packed_tiles__avx2(1, N, K, a + i * K, bp, row);
      for (int64_t j = 0; j < N; j++) bad += !same(row[j], y[i * N + j]);
      tdm_f32_gemm_rows__avx2(1, N, K, a + i * K, b, row);
      float *yr = malloc(sizeof(float) * (size_t)(M * N));
      tdm_f32_gemm_rows__avx2(M, N, K, a, b, yr);
      for (int64_t j = 0; j < N; j++) bad += !same(row[j], yr[i * N + j]);
      free(yr);
    }
    if (tdm_cpu_avx512()) { /* the same chains as the AVX2 tiles: the same bits */
      float *y2 = malloc(sizeof(float) * (size_t)(M * N + 1));
      tdm_f32_gemm_packed_tiles__avx512(M, N, K, a, bp, y2);
      for (int64_t i = 0; i < M * N; i++) bad += !same(y2[i], y[i]);
      tdm_f32_gemm_packed__avx512(M, N, K, a, bp, y2);
      bad += gemm_compare(y2, ref, M * N, K);
      free(y2);
    }
    tdm_f32_gemm_packed__avx2(M, N, K, a, bp, y);
    bad += gemm_compare(y, ref, M * N, K);
    if (M == 1 && N <= MAXN) { /* the GEMV split by columns in blocks of 32 (the thread parts) */
      for (int64_t lo = 32; lo < N; lo += 32) {
        tdm_f32_gemm_packed__avx2(1, N - lo, K, a, bp + lo / TDM_PANEL * K * TDM_PANEL, row);
        for (int64_t j = lo; j < N; j++) bad += !same(row[j - lo], y[j]);
      }
    }
  }
#endif
  /* The strided tiles on the columns from panel 1 on (a column split's part) into a wider y: the
   * other columns untouched, the part's columns equal to the tiles' own on the whole GEMM. */
  if (N > TDM_PANEL) {
    float *yl = malloc(sizeof(float) * (size_t)(M * N + 1)), *yt = malloc(sizeof(float) * (size_t)(M * N + 1));
    for (int v = 0; v < 2; v++) {
      for (int64_t i = 0; i < M * N; i++) yl[i] = -7.0f;
#if TDM_SIMD128
      if (v) tdm_f32_gemm_packed_ld_4x8__simd128(M, N - TDM_PANEL, K, a, bp + K * TDM_PANEL, yl + TDM_PANEL, N);
      if (v) tdm_f32_gemm_packed_tiles_4x8__simd128(M, N, K, a, bp, yt);
#endif
      if (!v) tdm_f32_gemm_packed_ld__scalar(M, N - TDM_PANEL, K, a, bp + K * TDM_PANEL, yl + TDM_PANEL, N);
      if (!v) tdm_f32_gemm_packed__scalar(M, N, K, a, bp, yt);
#if !TDM_SIMD128
      if (v) break;
#endif
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
          const float want = j < TDM_PANEL ? -7.0f : yt[i * N + j];
          if (!same(yl[i * N + j], want)) bad += mismatch(F_GEMM, "gemm packed ld", N, i * N + j, (double)M, yl[i * N + j], want);
        }
    }
#if TDM_SIMD128
    /* the few-row kernel (M = 2: two panels, two halves of K; more: every tile panel by panel) on the
     * columns from panel 1 on, against the whole GEMM's columns: the same bits wherever the split falls */
    if (M >= 2 && M <= TDM_GEMM_FEW_MAX) {
      for (int64_t i = 0; i < M * N; i++) yl[i] = -7.0f;
      tdm_f32_gemm_packed_few_4x8__simd128(M, N - TDM_PANEL, K, a, bp + K * TDM_PANEL, yl + TDM_PANEL, N);
      tdm_f32_gemm_packed_4x8__simd128(M, N, K, a, bp, yt);
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
          const float want = j < TDM_PANEL ? -7.0f : yt[i * N + j];
          if (!same(yl[i * N + j], want)) bad += mismatch(F_GEMM, "gemm packed few", N, i * N + j, (double)M, yl[i * N + j], want);
        }
    }
#endif
    free(yl), free(yt);
  }
  free(a), free(b), free(bp), free(ref), free(y);
  bad_by_family[F_GEMM] += bad;
  return bad;
}

/* ---- quantized weights (src/kernels/quant*.c) ------------------------------------------------ */

/* int4 codes as the exporter lays them out (variants.h's blocks of 8 k, q + 8 per nibble, 8 past K):
 * q4_alloc's buffer for [K, N], q4_put's code v of (k, j). */
static uint8_t *q4_alloc(int64_t N, int64_t K) {
  const size_t n = (size_t)((N + TDM_PANEL - 1) / TDM_PANEL * TDM_Q4_BLOCK_BYTES(K) + 1);
  uint8_t *q4 = malloc(n);
  memset(q4, 0x88, n);
  return q4;
}
static void q4_put(uint8_t *q4, int64_t K, int64_t k, int64_t j, int v) {
  uint8_t *b = q4 + (j / 8) * TDM_Q4_BLOCK_BYTES(K) + (k / 8) * 32 + (j % 8) * 4 + (k % 8) / 2;
  *b = (uint8_t)(k % 2 ? (*b & 0x0F) | (v + 8) << 4 : (*b & 0xF0) | (v + 8));
}

/* int8 and int4 GEMM (scalar and, in wasm, SIMD128) against the dequantized weights @ a in double:
 * random codes over the whole range ([-127, 127], [-8, 7]), positive scales, packed as the
 * exporter packs them. Within float32 accumulation error, like the float GEMM. */
static int check_quant(int64_t M, int64_t N, int64_t K, int64_t G) {
  const int64_t P = (N + TDM_PANEL - 1) / TDM_PANEL, NG = (K + G - 1) / G;
  float *a = malloc(sizeof(float) * (size_t)(M * K + 1)), *w8 = malloc(sizeof(float) * (size_t)(K * N + 1));
  float *w4 = malloc(sizeof(float) * (size_t)(K * N + 1));
  int8_t *q8 = calloc((size_t)(P * K * 8 + 1), 1);
  uint8_t *q4 = q4_alloc(N, K);
  float *s8 = calloc((size_t)(P * 8 + 1), sizeof(float)), *s4 = calloc((size_t)(P * NG * 8 + 1), sizeof(float));
  float *ref8 = malloc(sizeof(float) * (size_t)(M * N + 1)), *ref4 = malloc(sizeof(float) * (size_t)(M * N + 1));
  float *y = malloc(sizeof(float) * (size_t)(M * N + 1));
  for (int64_t i = 0; i < M * K; i++) a[i] = frand();
  for (int64_t j = 0; j < N; j++) {
    s8[j] = (frand() + 1.5f) / 127;
    for (int64_t g = 0; g < NG; g++) s4[((j / 8) * NG + g) * 8 + j % 8] = (frand() + 1.5f) / 7;
    for (int64_t k = 0; k < K; k++) {
      rng = rng * 1664525u + 1013904223u;
      const int v8 = (int)((rng >> 8) % 255) - 127, v4 = (int)((rng >> 20) % 16) - 8;
      q8[((j / 8) * K + k) * 8 + j % 8] = (int8_t)v8;
      q4_put(q4, K, k, j, v4);
      w8[k * N + j] = (float)v8 * s8[j];
      w4[k * N + j] = (float)v4 * s4[((j / 8) * NG + k / G) * 8 + j % 8];
    }
  }
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc8 = 0, acc4 = 0;
      for (int64_t k = 0; k < K; k++) acc8 += (double)a[i * K + k] * w8[k * N + j], acc4 += (double)a[i * K + k] * w4[k * N + j];
      ref8[i * N + j] = (float)acc8, ref4[i * N + j] = (float)acc4;
    }
  int bad = 0;
  tdm_q8_gemm__scalar(M, N, K, a, q8, s8, y);
  bad += gemm_compare(y, ref8, M * N, K);
  tdm_q4_gemm__scalar(M, N, K, G, a, q4, s4, y);
  bad += gemm_compare(y, ref4, M * N, K);
#if TDM_SIMD128
  tdm_q8_gemm_4x8__simd128(M, N, K, a, q8, s8, y);
  bad += gemm_compare(y, ref8, M * N, K);
  tdm_q4_gemm_4x8__simd128(M, N, K, G, a, q4, s4, y);
  bad += gemm_compare(y, ref4, M * N, K);
  /* The register tiles alone (what a GEMM split by rows runs, M = 1 included): within tolerance of
   * the reference, and each row the bits of that row run alone (any split over threads gives the
   * same result). */
  float *yr = malloc(sizeof(float) * (size_t)(N + 1));
  tdm_q8_gemm_tiles_4x8__simd128(M, N, K, a, q8, s8, y);
  bad += gemm_compare(y, ref8, M * N, K);
  for (int64_t i = 0; i < M; i++) {
    tdm_q8_gemm_tiles_4x8__simd128(1, N, K, a + i * K, q8, s8, yr);
    for (int64_t j = 0; j < N; j++)
      if (!same(y[i * N + j], yr[j]))
        bad += mismatch(F_QUANT, "q8_gemm_tiles_4x8__simd128 row alone", N, i * N + j, (double)M, yr[j], y[i * N + j]);
  }
  tdm_q4_gemm_tiles_4x8__simd128(M, N, K, G, a, q4, s4, y);
  bad += gemm_compare(y, ref4, M * N, K);
  for (int64_t i = 0; i < M; i++) {
    tdm_q4_gemm_tiles_4x8__simd128(1, N, K, G, a + i * K, q4, s4, yr);
    for (int64_t j = 0; j < N; j++)
      if (!same(y[i * N + j], yr[j]))
        bad += mismatch(F_QUANT, "q4_gemm_tiles_4x8__simd128 row alone", N, i * N + j, (double)M, yr[j], y[i * N + j]);
  }
  free(yr);
#endif
#if TDM_X86_AVX2
  /* the int8 and int4 AVX2 variants (quant_x86.c): the bits of the SIMD128 ones they replace, every M. On
   * activations times 1/pi: frand's 16-bit values times int8 codes are exact products, on which a
   * fused multiply-add would go unseen. */
  if (tdm_cpu_avx2_fma()) {
    float *y2 = malloc(sizeof(float) * (size_t)(M * N + 1)), *a2 = malloc(sizeof(float) * (size_t)(M * K + 1));
    for (int64_t i = 0; i < M * K; i++) a2[i] = a[i] * 0.318309886f;
    tdm_q8_gemm_4x8__simd128(M, N, K, a2, q8, s8, y);
    tdm_q8_gemm__avx2(M, N, K, a2, q8, s8, y2);
    for (int64_t i = 0; i < M * N; i++)
      if (!same(y2[i], y[i])) bad += mismatch(F_QUANT, "q8_gemm__avx2 vs simd128", N, i, (double)M, y2[i], y[i]);
    tdm_q8_gemm_tiles_4x8__simd128(M, N, K, a2, q8, s8, y);
    tdm_q8_gemm_tiles__avx2(M, N, K, a2, q8, s8, y2);
    for (int64_t i = 0; i < M * N; i++)
      if (!same(y2[i], y[i])) bad += mismatch(F_QUANT, "q8_gemm_tiles__avx2 vs simd128", N, i, (double)M, y2[i], y[i]);
    if (tdm_cpu_avx512()) {
      tdm_q8_gemm_tiles__avx512(M, N, K, a2, q8, s8, y2);
      for (int64_t i = 0; i < M * N; i++)
        if (!same(y2[i], y[i])) bad += mismatch(F_QUANT, "q8_gemm_tiles__avx512 vs simd128", N, i, (double)M, y2[i], y[i]);
    }
    tdm_q4_gemm_4x8__simd128(M, N, K, G, a2, q4, s4, y);
    tdm_q4_gemm__avx2(M, N, K, G, a2, q4, s4, y2);
    for (int64_t i = 0; i < M * N; i++)
      if (!same(y2[i], y[i])) bad += mismatch(F_QUANT, "q4_gemm__avx2 vs simd128", N, i, (double)M, y2[i], y[i]);
    tdm_q4_gemm_tiles_4x8__simd128(M, N, K, G, a2, q4, s4, y);
    tdm_q4_gemm_tiles__avx2(M, N, K, G, a2, q4, s4, y2);
    for (int64_t i = 0; i < M * N; i++)
      if (!same(y2[i], y[i])) bad += mismatch(F_QUANT, "q4_gemm_tiles__avx2 vs simd128", N, i, (double)M, y2[i], y[i]);
    free(y2), free(a2);
  }
#endif
  if (bad) REPORT("quant M=%lld N=%lld K=%lld G=%lld: %d mismatches\n", (long long)M, (long long)N, (long long)K, (long long)G, bad);
  free(a), free(w8), free(w4), free(q8), free(q4), free(s8), free(s4), free(ref8), free(ref4), free(y);
  bad_by_family[F_QUANT] += bad;
  return bad;
}

/* The paired layout (variants.h, even K): a copy of q8 repacked, its GEMVs against ref (the file
 * layout's scalar reference) bit for bit, and the repack undone giving q8's bytes back. */
static int q8_paired_variants(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *q8, const float *s8, const float *ref,
                              float *y) {
  if (K % 2) return 0;
  const size_t nb = (size_t)((N + TDM_PANEL - 1) / TDM_PANEL * K * TDM_PANEL);
  int8_t *qp = malloc(nb + 1);
  memcpy(qp, q8, nb);
  tdm_q8_pair_panels(N, K, qp, true);
  int bad = 0;
  if (nb >= 16 && (qp[1] != q8[8] || qp[2] != q8[1])) bad += mismatch(F_QUANT, "q8_pair_panels layout", K, 1, N, qp[1], q8[8]);
  struct {
    const char *name;
    tdm_q8_gemv_dot_fn fn;
    bool run;
  } v[] = {
      {"q8_gemv_dot_paired__scalar", tdm_q8_gemv_dot_paired__scalar, true},
#if TDM_SIMD128
      {"q8_gemv_dot_paired__simd128", tdm_q8_gemv_dot_paired__simd128, true},
#endif
#if TDM_X86_AVX2
      {"q8_gemv_dot_paired__avx2", tdm_q8_gemv_dot_paired__avx2, tdm_cpu_avx2_fma()},
#endif
  };
  for (size_t f = 0; f < sizeof v / sizeof v[0]; f++) {
    if (!v[f].run) continue;
    for (int64_t j = 0; j < N; j++) y[j] = -7.0f;
    v[f].fn(N, K, xq, xs, qp, s8, y);
    for (int64_t j = 0; j < N; j++)
      if (!same(y[j], ref[j])) bad += mismatch(F_QUANT, v[f].name, K, j, N, y[j], ref[j]);
  }
  tdm_q8_pair_panels(N, K, qp, false);
  if (memcmp(qp, q8, nb)) bad += mismatch(F_QUANT, "q8_pair_panels round trip", K, 0, N, 0, 1);
  free(qp);
  return bad;
}

/* The integer-dot GEMV's variants against the scalar reference's ref, bit for bit (y: N floats). */
static int q8_dot_variants(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *q8, const float *s8, const float *ref,
                           float *y) {
  int bad = 0;
  (void)xq, (void)xs, (void)q8, (void)s8, (void)ref, (void)y, (void)K;
#if TDM_SIMD128
  tdm_q8_gemv_dot__simd128(N, K, xq, xs, q8, s8, y);
  for (int64_t j = 0; j < N; j++)
    if (!same(y[j], ref[j])) bad += mismatch(F_QUANT, "q8_gemv_dot__simd128", K, j, N, y[j], ref[j]);
#endif
#if TDM_X86_AVX2
  if (tdm_cpu_avx2_fma()) { /* quant_x86.c */
    tdm_q8_gemv_dot__avx2(N, K, xq, xs, q8, s8, y);
    for (int64_t j = 0; j < N; j++)
      if (!same(y[j], ref[j])) bad += mismatch(F_QUANT, "q8_gemv_dot__avx2", K, j, N, y[j], ref[j]);
  }
#endif
  return bad + q8_paired_variants(N, K, xq, xs, q8, s8, ref, y);
}

/* An activation row for the quantizers' and the int4 GEMV's checks, by block of B: random, zeros,
 * denormals, huge values, values whose a / d lands on halves (m = 3.5), random with every third k -0. */
static void quantize_input(float *a, int64_t K, int64_t B) {
  for (int64_t k = 0; k < K; k++) {
    const int64_t b = k / B;
    a[k] = 2 * frand();
    if (b == 1) a[k] = 0;
    if (b == 2) a[k] *= 1e-44f;
    if (b == 3) a[k] *= 1e30f;
    if (b == 4) a[k] = (float)((k % 7) - 3) + 0.5f;
    if (b == 5 && k % 3 == 0) a[k] = -0.0f;
  }
}

/* tdm_q4_quantize_row's SIMD128 loop against the scalar one: the same codes, scales and group sums
 * (quantize_input's groups), and both refuse a NaN or ±inf. */
static int check_q4_quantize(int64_t K, int64_t G) {
  int bad = 0;
#if TDM_SIMD128
  const int64_t NG = (K + G - 1) / G;
  float *a = malloc(sizeof(float) * (size_t)(K + 1)), *xs = malloc(sizeof(float) * (size_t)(NG + 1)),
        *xs2 = malloc(sizeof(float) * (size_t)(NG + 1));
  int32_t *sum = malloc(sizeof(int32_t) * (size_t)(NG + 1)), *sum2 = malloc(sizeof(int32_t) * (size_t)(NG + 1));
  int8_t *xq = malloc((size_t)(K + 1)), *xq2 = malloc((size_t)(K + 1));
  quantize_input(a, K, G);
  memset(xq, 0x55, (size_t)(K + 1)), memset(xq2, 0x55, (size_t)(K + 1));
  const bool r1 = tdm_q4_quantize_row__scalar(K, G, a, xq, xs, sum), r2 = tdm_q4_quantize_row__simd128(K, G, a, xq2, xs2, sum2);
  if (!r1 || !r2) bad += mismatch(F_QUANT, "q4_quantize_row__simd128 refused finite", K, G, r1, r2, 1);
  for (int64_t g = 0; g < NG; g++)
    if (!same(xs[g], xs2[g]) || sum[g] != sum2[g]) bad += mismatch(F_QUANT, "q4_quantize_row__simd128 group", K, g, G, xs2[g], xs[g]);
  for (int64_t k = 0; k <= K; k++)
    if (xq[k] != xq2[k]) bad += mismatch(F_QUANT, "q4_quantize_row__simd128", K, k, G, xq2[k], xq[k]);
  if (K > 0) {
    const float special[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
      const int64_t k = (K - 1) * i / 2;
      const float keep = a[k];
      a[k] = special[i];
      if (tdm_q4_quantize_row__simd128(K, G, a, xq2, xs2, sum2) || tdm_q4_quantize_row__scalar(K, G, a, xq, xs, sum))
        bad += mismatch(F_QUANT, "q4_quantize_row took a NaN or inf", K, k, i, 1, 0);
      a[k] = keep;
    }
  }
  free(a), free(xs), free(xs2), free(sum), free(sum2), free(xq), free(xq2);
#else
  (void)K, (void)G;
#endif
  return bad;
}

/* The activation row's quantizer: the SIMD128 variant against the scalar reference bit for bit (xq,
 * xs) at qmax 127 and TDM_Q8_A16_MAX, over blocks of zeros, subnormals, large values and ties
 * (a[k] / d at half-integers), and both refusing a NaN or ±inf anywhere in the row. */
static int check_q8_quantize(int64_t K) {
  int bad = 0;
#if TDM_SIMD128
  const int64_t NB = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK;
  float *a = malloc(sizeof(float) * (size_t)(K + 1)), *xs = malloc(sizeof(float) * (size_t)(NB + 1)),
        *xs2 = malloc(sizeof(float) * (size_t)(NB + 1));
  int16_t *xq = malloc(sizeof(int16_t) * (size_t)(K + 2)), *xq2 = malloc(sizeof(int16_t) * (size_t)(K + 2));
  quantize_input(a, K, TDM_Q8_ABLOCK);
  const float qmax[] = {127.0f, (float)TDM_Q8_A16_MAX};
  for (int q = 0; q < 2; q++) {
    memset(xq, 0x55, sizeof(int16_t) * (size_t)(K + 2)), memset(xq2, 0x55, sizeof(int16_t) * (size_t)(K + 2));
    const bool r1 = tdm_q8_quantize_row__scalar(K, a, xq, xs, qmax[q]), r2 = tdm_q8_quantize_row__simd128(K, a, xq2, xs2, qmax[q]);
    if (!r1 || !r2) bad += mismatch(F_QUANT, "q8_quantize_row__simd128 refused finite", K, q, r1, r2, 1);
    for (int64_t b = 0; b < NB; b++)
      if (!same(xs[b], xs2[b])) bad += mismatch(F_QUANT, "q8_quantize_row__simd128 scale", K, b, qmax[q], xs2[b], xs[b]);
    for (int64_t k = 0; k < K + (K % 2); k++)
      if (xq[k] != xq2[k]) bad += mismatch(F_QUANT, "q8_quantize_row__simd128", K, k, qmax[q], xq2[k], xq[k]);
  }
  if (K > 0) {
    const float special[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
      const int64_t k = (K - 1) * i / 2;
      const float keep = a[k];
      a[k] = special[i];
      if (tdm_q8_quantize_row__simd128(K, a, xq2, xs2, 127.0f) || tdm_q8_quantize_row__scalar(K, a, xq, xs, 127.0f))
        bad += mismatch(F_QUANT, "q8_quantize_row took a NaN or inf", K, k, i, 1, 0);
      a[k] = keep;
    }
  }
  free(a), free(xs), free(xs2), free(xq), free(xq2);
#else
  (void)K;
#endif
  return bad;
}

/* The integer-dot GEMV (int8 activations, variants.h): the scalar reference against the scheme in
 * double (xq·q summed exactly, times the block scale, times the column scale: within float32
 * rounding of the block totals), and in wasm the SIMD128 variant against the scalar one bit for bit
 * (both add the exact block sums unfused, in block order). Activations random in [-2, 2], with one
 * block all zeros, one of denormals (its scale rounds to 0: the block counts as 0) and one huge;
 * with a NaN or ±inf anywhere tdm_q8_quantize_row must refuse. */
static int check_q8_dot(int64_t N, int64_t K) {
  const int64_t P = (N + TDM_PANEL - 1) / TDM_PANEL, NB = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK;
  float *a = malloc(sizeof(float) * (size_t)(K + 1)), *s8 = calloc((size_t)(P * 8), sizeof(float));
  float *xs = malloc(sizeof(float) * (size_t)(NB + 1)), *ref = malloc(sizeof(float) * (size_t)N), *y = malloc(sizeof(float) * (size_t)N);
  int8_t *q8 = calloc((size_t)(P * K * 8 + 1), 1);
  int16_t *xq = malloc(sizeof(int16_t) * (size_t)(K + 2));
  for (int64_t k = 0; k < K; k++) a[k] = 2 * frand();
  for (int64_t k = 0; k < K; k++) {
    const int64_t b = k / TDM_Q8_ABLOCK;
    if (b == 1) a[k] = 0;
    if (b == 2) a[k] *= 1e-44f;
    if (b == 3) a[k] *= 1e30f;
  }
  for (int64_t j = 0; j < N; j++) {
    s8[j] = (frand() + 1.5f) / 127;
    for (int64_t k = 0; k < K; k++) {
      rng = rng * 1664525u + 1013904223u;
      q8[((j / 8) * K + k) * 8 + j % 8] = (int8_t)((int)((rng >> 8) % 255) - 127);
    }
  }
  int bad = 0;
  if (!tdm_q8_quantize_row(K, a, xq, xs)) bad += mismatch(F_QUANT, "q8_quantize_row refused finite", K, 0, 0, 0, 0);
  for (int64_t k = 0; k < K; k++) {
    const float d = xs[k / TDM_Q8_ABLOCK];
    if (xq[k] < -127 || xq[k] > 127 || (d >= FLT_MIN && fabsf(xq[k] * d - a[k]) > 0.5f * d * 1.0001f) || (d == 0 && xq[k] != 0))
      bad += mismatch(F_QUANT, "q8_quantize_row", K, k, a[k], (float)xq[k], a[k] / d);
  }
  if (K % 2 && xq[K] != 0) bad += mismatch(F_QUANT, "q8_quantize_row pad", K, K, 0, xq[K], 0);
  for (int64_t j = 0; j < N; j++) {
    double acc = 0, mag = 0;
    for (int64_t b = 0; b < NB; b++) {
      int64_t s = 0;
      for (int64_t k = b * TDM_Q8_ABLOCK; k < K && k < (b + 1) * TDM_Q8_ABLOCK; k++) s += xq[k] * q8[((j / 8) * K + k) * 8 + j % 8];
      acc += (double)s * xs[b], mag += fabs((double)s * xs[b]);
    }
    ref[j] = (float)(acc * s8[j]);
    y[j] = (float)(mag * s8[j]); /* the tolerance's scale, for a moment */
  }
  float *tol = malloc(sizeof(float) * (size_t)N);
  memcpy(tol, y, sizeof(float) * (size_t)N);
  tdm_q8_gemv_dot__scalar(N, K, xq, xs, q8, s8, y);
  for (int64_t j = 0; j < N; j++)
    if (!near(y[j], ref[j], 1e-6f, 1.2e-7f * (float)(NB + 2) * tol[j]))
      bad += mismatch(F_QUANT, "q8_gemv_dot__scalar", K, j, N, y[j], ref[j]);
  memcpy(ref, y, sizeof(float) * (size_t)N);
  bad += q8_dot_variants(N, K, xq, xs, q8, s8, ref, y);
  /* again with moderate values in every block (the huge block above swamps the other blocks'
   * roundings, so a fused or reordered total would go unseen there) */
  for (int64_t k = 3 * TDM_Q8_ABLOCK; k < K && k < 4 * TDM_Q8_ABLOCK; k++) a[k] *= 1e-30f;
  tdm_q8_quantize_row(K, a, xq, xs);
  tdm_q8_gemv_dot__scalar(N, K, xq, xs, q8, s8, ref);
  bad += q8_dot_variants(N, K, xq, xs, q8, s8, ref, y);
  const float nonfinite[] = {NAN, INFINITY, -INFINITY};
  for (int i = 0; i < 3 && K > 0; i++) {
    a[(K * (i + 1)) / 4] = nonfinite[i];
    if (tdm_q8_quantize_row(K, a, xq, xs)) bad += mismatch(F_QUANT, "q8_quantize_row took a non-finite value", K, i, nonfinite[i], 1, 0);
    a[(K * (i + 1)) / 4] = 0;
  }
  free(a), free(s8), free(xs), free(ref), free(y), free(q8), free(xq), free(tol);
  return bad;
}

/* The integer-dot GEMV over 1 to 4 rows (tdm_q8_gemm_dot): row r of every variant bit for bit
 * tdm_q8_gemv_dot__scalar on that row alone, at a row stride ldy > N whose gaps stay untouched.
 * Activations random in [-2, 2], row 1 scaled by 1e-3 and row 2 with a zero block (rows differ in
 * their block scales). */
static int check_q8_rows(int64_t M, int64_t N, int64_t K) {
  const int64_t P = (N + TDM_PANEL - 1) / TDM_PANEL, NB = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK, KP = K + K % 2, ldy = N + 3;
  float *a = malloc(sizeof(float) * (size_t)(M * K + 1)), *s8 = calloc((size_t)(P * 8), sizeof(float));
  float *xs = malloc(sizeof(float) * (size_t)(M * NB + 1)), *ref = malloc(sizeof(float) * (size_t)(M * ldy));
  float *y = malloc(sizeof(float) * (size_t)(M * ldy));
  int8_t *q8 = calloc((size_t)(P * K * 8 + 1), 1);
  int16_t *xq = malloc(sizeof(int16_t) * (size_t)(M * KP + 1));
  for (int64_t i = 0; i < M * K; i++) a[i] = 2 * frand() * (i / K == 1 ? 1e-3f : 1.0f);
  for (int64_t k = 0; k < K && M > 2; k++)
    if (k / TDM_Q8_ABLOCK == 1) a[2 * K + k] = 0;
  for (int64_t j = 0; j < N; j++) {
    s8[j] = (frand() + 1.5f) / 127;
    for (int64_t k = 0; k < K; k++) {
      rng = rng * 1664525u + 1013904223u;
      q8[((j / 8) * K + k) * 8 + j % 8] = (int8_t)((int)((rng >> 8) % 255) - 127);
    }
  }
  int bad = 0;
  for (int64_t r = 0; r < M; r++) {
    tdm_q8_quantize_row(K, a + r * K, xq + r * KP, xs + r * NB);
    for (int64_t j = 0; j < ldy; j++) ref[r * ldy + j] = -7.0f; /* the gaps */
    tdm_q8_gemv_dot__scalar(N, K, xq + r * KP, xs + r * NB, q8, s8, ref + r * ldy);
  }
  struct {
    const char *name;
    tdm_q8_gemm_dot_fn fn;
    bool run;
  } v[] = {
      {"q8_gemm_dot__scalar", tdm_q8_gemm_dot__scalar, true},
#if TDM_SIMD128
      {"q8_gemm_dot__simd128", tdm_q8_gemm_dot__simd128, true},
#endif
#if TDM_X86_AVX2
      {"q8_gemm_dot__avx2", tdm_q8_gemm_dot__avx2, tdm_cpu_avx2_fma()},
#endif
  };
  for (size_t f = 0; f < sizeof v / sizeof v[0]; f++) {
    if (!v[f].run) continue;
    for (int64_t i = 0; i < M * ldy; i++) y[i] = -7.0f;
    v[f].fn(M, N, K, xq, xs, q8, s8, y, ldy);
    for (int64_t i = 0; i < M * ldy; i++)
      if (!same(y[i], ref[i])) bad += mismatch(F_QUANT, v[f].name, K, i, (double)(M * 1000 + N), y[i], ref[i]);
  }
  if (K % 2 == 0) { /* the paired layout's rows kernels (variants.h), the same bits */
    tdm_q8_pair_panels(N, K, q8, true);
    struct {
      const char *name;
      tdm_q8_gemm_dot_fn fn;
      bool run;
    } w[] = {
        {"q8_gemm_dot_paired__scalar", tdm_q8_gemm_dot_paired__scalar, true},
#if TDM_SIMD128
        {"q8_gemm_dot_paired__simd128", tdm_q8_gemm_dot_paired__simd128, true},
#endif
#if TDM_X86_AVX2
        {"q8_gemm_dot_paired__avx2", tdm_q8_gemm_dot_paired__avx2, tdm_cpu_avx2_fma()},
#endif
    };
    for (size_t f = 0; f < sizeof w / sizeof w[0]; f++) {
      if (!w[f].run) continue;
      for (int64_t i = 0; i < M * ldy; i++) y[i] = -7.0f;
      w[f].fn(M, N, K, xq, xs, q8, s8, y, ldy);
      for (int64_t i = 0; i < M * ldy; i++)
        if (!same(y[i], ref[i])) bad += mismatch(F_QUANT, w[f].name, K, i, (double)(M * 1000 + N), y[i], ref[i]);
    }
    /* and the float path over it (matmul_q8's non-finite rows) against the file layout's reference */
    float *f0 = malloc(sizeof(float) * (size_t)(M * N)), *f1 = malloc(sizeof(float) * (size_t)(M * N));
    tdm_q8_gemm_paired__scalar(M, N, K, a, q8, s8, f1);
    tdm_q8_pair_panels(N, K, q8, false);
    tdm_q8_gemm__scalar(M, N, K, a, q8, s8, f0);
    for (int64_t i = 0; i < M * N; i++)
      if (!same(f1[i], f0[i])) bad += mismatch(F_QUANT, "q8_gemm_paired__scalar", K, i, (double)(M * 1000 + N), f1[i], f0[i]);
    free(f0), free(f1);
  }
  free(a), free(s8), free(xs), free(ref), free(y), free(q8), free(xq);
  return bad;
}

/* conv_q8's int16 rows (tdm_conv_q8_quantize_row, branch dotconv) through the int8-weight GEMV over
 * 1 to 8 rows: the codes against their definition (|xq| <= 32767, within half a step of a / d (and
 * a / d's float rounding, 2^-24 of 32767 steps), a
 * block's largest at ±32767), the scalar rows against the scheme in double (exact int64 block
 * sums: int32 must not overflow, so row 0's first block is all one value and column 0's weights all
 * 127, the largest sum there can be), and every variant bit for bit the scalar one; NaN / ±inf
 * refused. Activations in [-2, 2], row 1 scaled by 1e-3, row 2 with a zero block. */
static int check_conv_q8_rows(int64_t M, int64_t N, int64_t K) {
  const int64_t P = (N + TDM_PANEL - 1) / TDM_PANEL, NB = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK, KP = K + K % 2, ldy = N + 3;
  float *a = malloc(sizeof(float) * (size_t)(M * K + 1)), *s8 = calloc((size_t)(P * 8), sizeof(float));
  float *xs = malloc(sizeof(float) * (size_t)(M * NB + 1)), *ref = malloc(sizeof(float) * (size_t)(M * ldy));
  float *y = malloc(sizeof(float) * (size_t)(M * ldy));
  int8_t *q8 = calloc((size_t)(P * K * 8 + 1), 1);
  int16_t *xq = malloc(sizeof(int16_t) * (size_t)(M * KP + 1));
  for (int64_t i = 0; i < M * K; i++) a[i] = 2 * frand() * (i / K == 1 ? 1e-3f : 1.0f);
  for (int64_t k = 0; k < K && k < TDM_Q8_ABLOCK; k++) a[k] = -1.75f;
  for (int64_t k = 0; k < K && M > 2; k++)
    if (k / TDM_Q8_ABLOCK == 1) a[2 * K + k] = 0;
  for (int64_t j = 0; j < N; j++) {
    s8[j] = (frand() + 1.5f) / 127;
    for (int64_t k = 0; k < K; k++) {
      rng = rng * 1664525u + 1013904223u;
      q8[((j / 8) * K + k) * 8 + j % 8] = j == 0 ? 127 : (int8_t)((int)((rng >> 8) % 255) - 127);
    }
  }
  int bad = 0;
  for (int64_t r = 0; r < M; r++) {
    const float *ar = a + r * K;
    int16_t *xr = xq + r * KP;
    float *sr = xs + r * NB;
    if (!tdm_conv_q8_quantize_row(K, ar, xr, sr)) bad += mismatch(F_QUANT, "conv_q8_quantize_row refused finite", K, r, 0, 0, 0);
    for (int64_t b = 0; b < NB; b++) {
      int top = 0;
      for (int64_t k = b * TDM_Q8_ABLOCK; k < K && k < (b + 1) * TDM_Q8_ABLOCK; k++) {
        const float d = sr[b];
        top = abs(xr[k]) > top ? abs(xr[k]) : top;
        if (xr[k] < -TDM_Q8_A16_MAX || xr[k] > TDM_Q8_A16_MAX || (d >= FLT_MIN && fabs((double)xr[k] * d - ar[k]) > 0.501 * d) ||
            (d == 0 && xr[k] != 0))
          bad += mismatch(F_QUANT, "conv_q8_quantize_row", K, k, ar[k], (float)xr[k], ar[k] / d);
      }
      if (sr[b] >= FLT_MIN && top != TDM_Q8_A16_MAX) bad += mismatch(F_QUANT, "conv_q8_quantize_row block max", K, b, 0, (float)top, 32767);
    }
    if (K % 2 && xr[K] != 0) bad += mismatch(F_QUANT, "conv_q8_quantize_row pad", K, K, 0, xr[K], 0);
    for (int64_t j = 0; j < ldy; j++) ref[r * ldy + j] = -7.0f; /* the gaps */
    tdm_q8_gemv_dot__scalar(N, K, xr, sr, q8, s8, ref + r * ldy);
    for (int64_t j = 0; j < N; j++) {
      double acc = 0, mag = 0;
      for (int64_t b = 0; b < NB; b++) {
        int64_t sum = 0;
        for (int64_t k = b * TDM_Q8_ABLOCK; k < K && k < (b + 1) * TDM_Q8_ABLOCK; k++)
          sum += (int64_t)xr[k] * q8[((j / 8) * K + k) * 8 + j % 8];
        acc += (double)sum * sr[b], mag += fabs((double)sum * sr[b]);
      }
      if (!near(ref[r * ldy + j], (float)(acc * s8[j]), 1e-6f, 1.2e-7f * (float)(NB + 2) * (float)(mag * s8[j])))
        bad += mismatch(F_QUANT, "q8_gemv_dot__scalar on int16 rows", K, j, (double)r, ref[r * ldy + j], (float)(acc * s8[j]));
    }
  }
  struct {
    const char *name;
    tdm_q8_gemm_dot_fn fn;
    bool run;
  } v[] = {
      {"q8_gemm_dot (the runtime's) on int16 rows", tdm_q8_gemm_dot, true},
#if TDM_SIMD128
      {"q8_gemm_dot__simd128 on int16 rows", tdm_q8_gemm_dot__simd128, true},
#endif
#if TDM_X86_AVX2
      {"q8_gemm_dot__avx2 on int16 rows", tdm_q8_gemm_dot__avx2, tdm_cpu_avx2_fma()},
#endif
  };
  for (size_t f = 0; f < sizeof v / sizeof v[0]; f++) {
    if (!v[f].run) continue;
    for (int64_t i = 0; i < M * ldy; i++) y[i] = -7.0f;
    v[f].fn(M, N, K, xq, xs, q8, s8, y, ldy);
    for (int64_t i = 0; i < M * ldy; i++)
      if (!same(y[i], ref[i])) bad += mismatch(F_QUANT, v[f].name, K, i, (double)(M * 1000 + N), y[i], ref[i]);
  }
  tdm_q8_gemv_dot(N, K, xq, xs, q8, s8, y);
  for (int64_t j = 0; j < N; j++)
    if (!same(y[j], ref[j])) bad += mismatch(F_QUANT, "q8_gemv_dot (the runtime's) on an int16 row", K, j, N, y[j], ref[j]);
  const float nonfinite[] = {NAN, INFINITY, -INFINITY};
  for (int i = 0; i < 3 && K > 0; i++) {
    a[(K * (i + 1)) / 4] = nonfinite[i];
    if (tdm_conv_q8_quantize_row(K, a, xq, xs))
      bad += mismatch(F_QUANT, "conv_q8_quantize_row took a non-finite value", K, i, nonfinite[i], 1, 0);
    a[(K * (i + 1)) / 4] = 0;
  }
  free(a), free(s8), free(xs), free(ref), free(y), free(q8), free(xq);
  return bad;
}

/* The int4 integer-dot GEMV (int8 activations per weight group, variants.h): tdm_q4_quantize_row's
 * codes, scales and group sums checked against their definition; the scalar reference against the
 * scheme in double (exact group sums times the activation and weight scales: within float32
 * rounding of the group totals); the SIMD128 and AVX2 variants and, where the build has the
 * relaxed integer dot, its variant against the scalar one bit for bit. Codes random over all 16 values (-8 included), activations in [-2, 2]
 * with a zero group, a denormal one, a huge one and two of ±127 codes only (columns 3 and 6 of each panel there codes 7 and -8 only, 0 in the huge group);
 * NaN / ±inf refused. With tiny 0 the denormal group's activations are scaled up to normal floats: the
 * SIMD128 and AVX2 GEMVs then take their one-pass sums, which a group scale below 2^-100 turns off. */
static int check_q4_dot_input(int64_t N, int64_t K, int64_t G, int tiny) {
  const int64_t P = (N + TDM_PANEL - 1) / TDM_PANEL, NG = K / G + (K % G != 0);
  float *a = malloc(sizeof(float) * (size_t)(K + 1)), *s4 = calloc((size_t)(P * NG * 8 + 1), sizeof(float));
  float *xs = malloc(sizeof(float) * (size_t)(NG + 1)), *ref = malloc(sizeof(float) * (size_t)N), *y = malloc(sizeof(float) * (size_t)N);
  float *tol = malloc(sizeof(float) * (size_t)N);
  int32_t *xsum = malloc(sizeof(int32_t) * (size_t)(NG + 1));
  uint8_t *q4 = q4_alloc(N, K);
  int8_t *xq = malloc((size_t)(K + 1));
  quantize_input(a, K, G);
  for (int64_t k = 0; k < K; k++) {
    const int64_t g = k / G;
    if (g == 4 || g == 5) a[k] = g == 4 ? 1.0f : -1.0f; /* every code ±127: the 16-bit sums' extremes */
    if (G >= 2048) a[k] = 1.0f;                         /* one group of ±127 codes: the int32 sums' extremes */
    if (g == 2 && !tiny && G < 2048) a[k] *= 1e30f;
  }
  for (int64_t j = 0; j < N; j++)
    for (int64_t k = 0; k < K; k++) {
      rng = rng * 1664525u + 1013904223u;
      int v4 = (int)((rng >> 8) % 16) - 8;
      if (j % 8 == 3 || j % 8 == 6) /* groups 4, 5: codes 7 and -8 only; the huge group 3 left out, or it hides them */
        v4 = G >= 2048 ? (j % 8 == 3 ? 7 : -8) : k / G == 3 ? 0 : k / G == 4 || k / G == 5 ? (j % 8 == 3 ? 7 : -8) : v4;
      q4_put(q4, K, k, j, v4);
      if (k % G == 0) s4[((j / 8) * NG + k / G) * 8 + j % 8] = (frand() + 1.5f) / 7;
    }
  int bad = 0;
  if (!tdm_q4_quantize_row(K, G, a, xq, xs, xsum)) bad += mismatch(F_QUANT, "q4_quantize_row refused finite", K, 0, 0, 0, 0);
  for (int64_t g = 0; g < NG; g++) {
    int32_t sum = 0;
    for (int64_t k = g * G; k < K && k < (g + 1) * G; k++) {
      const float d = xs[g];
      sum += xq[k];
      if (xq[k] < -127 || (d >= FLT_MIN && fabsf(xq[k] * d - a[k]) > 0.5f * d * 1.0001f) || (d == 0 && xq[k] != 0))
        bad += mismatch(F_QUANT, "q4_quantize_row", K, k, a[k], (float)xq[k], a[k] / d);
    }
    if (sum != xsum[g]) bad += mismatch(F_QUANT, "q4_quantize_row group sum", K, g, 0, (float)xsum[g], (float)sum);
  }
  if (xq[K] != 0) bad += mismatch(F_QUANT, "q4_quantize_row pad", K, K, 0, xq[K], 0);
  for (int64_t j = 0; j < N; j++) {
    double acc = 0, mag = 0;
    for (int64_t g = 0; g < NG; g++) {
      int64_t s = 0;
      for (int64_t k = g * G; k < K && k < (g + 1) * G; k++) { s += xq[k] * tdm_q4_code(q4 + (j / 8) * TDM_Q4_BLOCK_BYTES(K), k, j); }
      const double t = (double)s * xs[g] * s4[((j / 8) * NG + g) * 8 + j % 8];
      acc += t, mag += fabs(t);
    }
    ref[j] = (float)acc;
    tol[j] = (float)mag;
  }
  tdm_q4_gemv_dot__scalar(N, K, G, xq, xs, xsum, q4, s4, y);
  for (int64_t j = 0; j < N; j++)
    if (!near(y[j], ref[j], 1e-6f, 2.4e-7f * (float)(NG + 2) * tol[j]))
      bad += mismatch(F_QUANT, "q4_gemv_dot__scalar", K, j, N, y[j], ref[j]);
#if TDM_RELAXED_DOT
  memcpy(ref, y, sizeof(float) * (size_t)N);
  tdm_q4_gemv_dot__relaxed(N, K, G, xq, xs, xsum, q4, s4, y);
  for (int64_t j = 0; j < N; j++)
    if (!same(y[j], ref[j])) bad += mismatch(F_QUANT, "q4_gemv_dot__relaxed", K, j, N, y[j], ref[j]);
#endif
#if TDM_SIMD128
  if (!TDM_RELAXED_DOT) memcpy(ref, y, sizeof(float) * (size_t)N);
  tdm_q4_gemv_dot__simd128(N, K, G, xq, xs, xsum, q4, s4, y);
  for (int64_t j = 0; j < N; j++)
    if (!same(y[j], ref[j])) bad += mismatch(F_QUANT, "q4_gemv_dot__simd128", K, j, N, y[j], ref[j]);
#endif
#if TDM_X86_AVX2
  if (tdm_cpu_avx2_fma()) { /* quant_x86.c */
    tdm_q4_gemv_dot__avx2(N, K, G, xq, xs, xsum, q4, s4, y);
    for (int64_t j = 0; j < N; j++)
      if (!same(y[j], ref[j])) bad += mismatch(F_QUANT, "q4_gemv_dot__avx2", K, j, N, y[j], ref[j]);
  }
#endif
  const float nonfinite[] = {NAN, INFINITY, -INFINITY};
  for (int i = 0; i < 3 && K > 0; i++) {
    a[(K * (i + 1)) / 4] = nonfinite[i];
    if (tdm_q4_quantize_row(K, G, a, xq, xs, xsum))
      bad += mismatch(F_QUANT, "q4_quantize_row took a non-finite value", K, i, nonfinite[i], 1, 0);
    a[(K * (i + 1)) / 4] = 0;
  }
  free(a), free(s4), free(xs), free(ref), free(y), free(tol), free(xsum), free(q4), free(xq);
  return bad;
}

static int check_q4_dot(int64_t N, int64_t K, int64_t G) { return check_q4_dot_input(N, K, G, 1) + check_q4_dot_input(N, K, G, 0); }

/* The int4 integer-dot GEMV over 1 to 4 rows (tdm_q4_gemm_dot): row r of every
 * variant bit for bit tdm_q4_gemv_dot__scalar on that row alone, at a row stride ldy > N whose gaps
 * stay untouched; rows of different magnitudes, row 2 with a zero group, row 3 with a group scale
 * below 2^-100 (the SIMD128 kernel's flushed sums; with 2 or 3 rows its one-pass sums). */
static int check_q4_rows(int64_t M, int64_t N, int64_t K, int64_t G) {
  const int64_t P = (N + TDM_PANEL - 1) / TDM_PANEL, NG = K / G + (K % G != 0), ldy = N + 3;
  float *a = malloc(sizeof(float) * (size_t)(M * K + 1)), *s4 = calloc((size_t)(P * NG * 8 + 1), sizeof(float));
  float *xs = malloc(sizeof(float) * (size_t)(M * NG + 1)), *ref = malloc(sizeof(float) * (size_t)(M * ldy));
  float *y = malloc(sizeof(float) * (size_t)(M * ldy));
  int32_t *xsum = malloc(sizeof(int32_t) * (size_t)(M * NG + 1));
  uint8_t *q4 = q4_alloc(N, K);
  int8_t *xq = malloc((size_t)(M * (K + 1)));
  for (int64_t i = 0; i < M * K; i++) a[i] = 2 * frand() * (i / K == 1 ? 1e-3f : 1.0f);
  for (int64_t k = 0; k < K && M > 2; k++)
    if (k / G == 1) a[2 * K + k] = 0;
  for (int64_t k = 0; k < K && k < G && M > 3; k++) a[3 * K + k] *= 1e-36f;
  for (int64_t j = 0; j < N; j++)
    for (int64_t k = 0; k < K; k++) {
      rng = rng * 1664525u + 1013904223u;
      const int v4 = (int)((rng >> 8) % 16) - 8;
      q4_put(q4, K, k, j, v4);
      if (k % G == 0) s4[((j / 8) * NG + k / G) * 8 + j % 8] = (frand() + 1.5f) / 7;
    }
  for (int64_t r = 0; r < M; r++) {
    tdm_q4_quantize_row(K, G, a + r * K, xq + r * (K + 1), xs + r * NG, xsum + r * NG);
    for (int64_t j = 0; j < ldy; j++) ref[r * ldy + j] = -7.0f; /* the gaps */
    tdm_q4_gemv_dot__scalar(N, K, G, xq + r * (K + 1), xs + r * NG, xsum + r * NG, q4, s4, ref + r * ldy);
  }
  struct {
    const char *name;
    tdm_q4_gemm_dot_fn fn;
  } v[] = {
      {"q4_gemm_dot__scalar", tdm_q4_gemm_dot__scalar},
#if TDM_RELAXED_DOT
      {"q4_gemm_dot__relaxed", tdm_q4_gemm_dot__relaxed},
#endif
#if TDM_SIMD128
      {"q4_gemm_dot__simd128", tdm_q4_gemm_dot__simd128},
#endif
  };
  int bad = 0;
  for (size_t f = 0; f < sizeof v / sizeof v[0]; f++) {
    for (int64_t i = 0; i < M * ldy; i++) y[i] = -7.0f;
    v[f].fn(M, N, K, G, xq, xs, xsum, q4, s4, y, ldy);
    for (int64_t i = 0; i < M * ldy; i++)
      if (!same(y[i], ref[i])) bad += mismatch(F_QUANT, v[f].name, K, i, (double)(M * 1000 + N), y[i], ref[i]);
  }
  free(a), free(s4), free(xs), free(ref), free(y), free(xsum), free(q4), free(xq);
  return bad;
}

#if TDM_SIMD128
/* ---- elementwise ----------------------------------------------------------------------------- */

/* Binary float32 ops: exact, for contiguous and broadcast (stride 0) operands. */
static int check_binary(void) {
  static const int codes[] = {TDM_B_ADD, TDM_B_SUB, TDM_B_MUL, TDM_B_DIV, TDM_B_MAX, TDM_B_MIN, TDM_B_POW, TDM_B_REM};
  static const char *names[] = {"add", "sub", "mul", "div", "maximum", "minimum", "pow", "remainder"};
  float a[MAXN], b[MAXN], y[MAXN], ref[MAXN];
  int bad = 0;
  for (int c = 0; c < 8; c++)
    for (int s = 0; s < N_SIZES; s++) {
      const int64_t n = SIZES[s];
      fill(a, n + 1, 3, true, c), fill(b, n + 1, 3, true, c + 5);
      for (int mode = 0; mode < 4; mode++) {
        const int64_t sa = mode & 1 ? 0 : 1, sb = mode & 2 ? 0 : 1;
        tdm_f32_binary_row__scalar(codes[c], a, sa, b, sb, ref, n);
        tdm_f32_binary_row__simd128(codes[c], a, sa, b, sb, y, n);
        for (int64_t i = 0; i < n; i++)
          if (!same(y[i], ref[i])) bad += mismatch(F_BINARY, names[c], n, i, a[i * sa], y[i], ref[i]);
      }
    }
  /* signed zeros and NaN in both orders, in the SIMD body */
  const float za[8] = {0.0f, -0.0f, 0.0f, -0.0f, NAN, 1.0f, NAN, -INFINITY}, zb[8] = {-0.0f, 0.0f, 0.0f, -0.0f, 1.0f, NAN, NAN, INFINITY};
  for (int c = 0; c < 8; c++) {
    tdm_f32_binary_row__scalar(codes[c], za, 1, zb, 1, ref, 8);
    tdm_f32_binary_row__simd128(codes[c], za, 1, zb, 1, y, 8);
    for (int64_t i = 0; i < 8; i++)
      if (!same(y[i], ref[i])) bad += mismatch(F_BINARY, names[c], 8, i, za[i], y[i], ref[i]);
  }
  return bad;
}

/* The unary ops whose SIMD128 variant is the same IEEE operation: bit for bit. */
static int check_unary_exact(void) {
  static const int codes[] = {TDM_U_NEG,   TDM_U_ABS,   TDM_U_RELU, TDM_U_SQRT,      TDM_U_RSQRT,
                              TDM_U_RECIP, TDM_U_FLOOR, TDM_U_CEIL, TDM_U_HARDSWISH, TDM_U_HARDSIGMOID};
  static const char *names[] = {"neg", "abs", "relu", "sqrt", "rsqrt", "reciprocal", "floor", "ceil", "hardswish", "hardsigmoid"};
  float x[MAXN], y[MAXN], ref[MAXN];
  int bad = 0;
  for (int c = 0; c < (int)(sizeof codes / sizeof codes[0]); c++)
    for (int s = 0; s < N_SIZES; s++) {
      const int64_t n = SIZES[s];
      fill(x, n, 5, true, c);
      tdm_f32_unary__scalar(codes[c], x, ref, n);
      if (!tdm_f32_unary__simd128(codes[c], x, y, n)) {
        bad += mismatch(F_UNARY_EXACT, names[c], n, -1, 0, 0, 0); /* documented as SIMD128 */
        continue;
      }
      for (int64_t i = 0; i < n; i++)
        if (!same(y[i], ref[i])) bad += mismatch(F_UNARY_EXACT, names[c], n, i, x[i], y[i], ref[i]);
    }
  return bad;
}

/* One unary op through its SIMD128 variant against the scalar reference, within
 * rtol·|ref| + atol + xtol·|x|, on random values of each scale plus the special values. */
static int check_unary_approx(int family, int code, const char *name, float rtol, float atol, float xtol) {
  static const float scales[] = {0.01f, 1, 10, 120};
  float x[MAXN], y[MAXN], ref[MAXN];
  int bad = 0;
  for (int k = 0; k < 4; k++)
    for (int s = 0; s < N_SIZES; s++) {
      const int64_t n = SIZES[s];
      fill(x, n, scales[k], k != 0, code + k);
      tdm_f32_unary__scalar(code, x, ref, n);
      if (!tdm_f32_unary__simd128(code, x, y, n)) return bad + mismatch(family, name, n, -1, 0, 0, 0);
      for (int64_t i = 0; i < n; i++)
        if (!near(y[i], ref[i], rtol, atol + (xtol != 0 ? xtol * fabsf(x[i]) : 0))) bad += mismatch(family, name, n, i, x[i], y[i], ref[i]);
    }
  return bad;
}

/* exp against expf: the special values, every float in [-104, -80] and [80, 89] (overflow, the
 * denormal range and full underflow), and a sweep of the whole range. Relative error below 5e-7 on
 * normal results, denormal results within one unit of 2^-149, exact ±inf, 0 and NaN. */
static int check_exp(void) {
  int bad = check_unary_approx(F_EXP, TDM_U_EXP, "exp", 5e-7f, 1.5e-45f, 0);
  const float ends[2][2] = {{-104.0f, -80.0f}, {80.0f, 89.0f}};
  for (int e = 0; e < 2; e++) {
    float x = ends[e][0];
    while (x < ends[e][1]) {
      float xs[4], y[4];
      for (int i = 0; i < 4; i++) xs[i] = x, x = nextafterf(x, INFINITY);
      wasm_v128_store(y, tdm_f32x4_exp(wasm_v128_load(xs)));
      for (int i = 0; i < 4; i++)
        if (!near(y[i], expf(xs[i]), 5e-7f, 1.5e-45f)) bad += mismatch(F_EXP, "exp (range)", 4, i, xs[i], y[i], expf(xs[i]));
    }
  }
  for (float x = -120.0f; x < 120.0f; x += 0.0173f) {
    float y[4];
    const float xs[4] = {x, x + 0.004f, x + 0.008f, x + 0.012f};
    wasm_v128_store(y, tdm_f32x4_exp(wasm_v128_load(xs)));
    for (int i = 0; i < 4; i++)
      if (!near(y[i], expf(xs[i]), 5e-7f, 1.5e-45f)) bad += mismatch(F_EXP, "exp (sweep)", 4, i, xs[i], y[i], expf(xs[i]));
  }
  /* the named cases: e^89 and e^+inf overflow, e^-inf and e^-104 are 0, NaN stays NaN */
  const float xs[8] = {89.0f, INFINITY, -INFINITY, -104.0f, NAN, 88.7228f, -87.5f, -0.0f};
  float y[8];
  wasm_v128_store(y, tdm_f32x4_exp(wasm_v128_load(xs)));
  wasm_v128_store(y + 4, tdm_f32x4_exp(wasm_v128_load(xs + 4)));
  if (!(y[0] == INFINITY && y[1] == INFINITY && y[2] == 0.0f && y[3] == 0.0f && y[4] != y[4] && y[5] < INFINITY && y[5] > 3.4e38f &&
        y[6] > 0 && y[7] == 1.0f))
    bad += mismatch(F_EXP, "exp (named cases)", 8, -1, 0, y[0], 0);
  return bad;
}

/* gelu_tanh as x / (1 + e^-2u) against the scalar 0.5 x (1 + tanhf(u)): within 1e-6 relative plus
 * 1e-7·|x| (the reference's own 1 + tanh u cancels for negative x, an absolute error up to 3e-8·|x|),
 * on random values of each scale with the special ones, and a sweep of [-12, 12]. */
static int check_gelu_tanh(void) {
  int bad = check_unary_approx(F_EXP_FAMILY, TDM_U_GELU_TANH, "gelu_tanh", 1e-6f, 1e-30f, 1e-7f);
  float xs[4], y[4], ref[4];
  for (float x = -12.0f; x < 12.0f; x += 0.0029f) {
    for (int i = 0; i < 4; i++) xs[i] = x + 0.0007f * (float)i;
    tdm_f32_unary__scalar(TDM_U_GELU_TANH, xs, ref, 4);
    tdm_f32_unary__simd128(TDM_U_GELU_TANH, xs, y, 4);
    for (int i = 0; i < 4; i++)
      if (!near(y[i], ref[i], 1e-6f, 1e-30f + 1e-7f * fabsf(xs[i])))
        bad += mismatch(F_EXP_FAMILY, "gelu_tanh (sweep)", 4, i, xs[i], y[i], ref[i]);
  }
  return bad;
}

/* The ops built on exp and erf (docs/ops.md's tolerances). */
static int check_exp_family(void) {
  return check_unary_approx(F_EXP_FAMILY, TDM_U_SIGMOID, "sigmoid", 1e-6f, 1.5e-45f, 0) +
      check_unary_approx(F_EXP_FAMILY, TDM_U_SILU, "silu", 1e-6f, 1.5e-45f, 0) +
      check_unary_approx(F_EXP_FAMILY, TDM_U_TANH, "tanh", 1e-6f, 2e-7f, 0) + check_gelu_tanh();
}

static int check_erf(void) {
  int bad =
      check_unary_approx(F_ERF, TDM_U_ERF, "erf", 0, 5e-7f, 0) + check_unary_approx(F_ERF, TDM_U_GELU, "gelu", 1e-6f, 1e-30f, 2.5e-7f);
  for (float x = -6.0f; x < 6.0f; x += 0.0031f) {
    float y[4];
    const float xs[4] = {x, -x, x * 0.5f, x * 0.01f};
    wasm_v128_store(y, tdm_f32x4_erf(wasm_v128_load(xs)));
    for (int i = 0; i < 4; i++)
      if (!(fabsf(y[i] - erff(xs[i])) < 5e-7f)) bad += mismatch(F_ERF, "erf (sweep)", 4, i, xs[i], y[i], erff(xs[i]));
  }
  return bad;
}

/* ---- rows: softmax, sums, norms ---------------------------------------------------------------- */

/* Rows of scores: random, with masked (-inf) entries, all masked, a +inf, a NaN, huge values. */
static void score_row(float *x, int64_t n, int kind) {
  fill(x, n, 4, false, 0);
  for (int64_t i = 0; i < n; i++) {
    if (kind == 1 && i % 3 == 1) x[i] = -INFINITY;
    if (kind == 2) x[i] = -INFINITY;
    if (kind == 5) x[i] *= 1e30f;
  }
  if (n && kind == 3) x[n / 2] = INFINITY;
  if (n && kind == 4) x[n - 1] = NAN;
}

static int check_softmax(void) {
  float x[MAXN], y[MAXN], ref[MAXN];
  int bad = 0;
  for (int logp = 0; logp < 2; logp++)
    for (int kind = 0; kind < 6; kind++)
      for (int s = 1; s < N_SIZES; s++) {
        const int64_t n = SIZES[s];
        score_row(x, n, kind);
        tdm_f32_softmax_group__scalar(x, ref, n, 1, logp);
        tdm_f32_softmax_row__simd128(x, y, n, logp);
        for (int64_t i = 0; i < n; i++)
          if (!(logp ? near(y[i], ref[i], 1e-6f, 1e-5f) : near(y[i], ref[i], 1e-5f, 1e-7f)))
            bad += mismatch(F_SOFTMAX, logp ? "log_softmax" : "softmax", n, i, x[i], y[i], ref[i]);
      }
  return bad;
}

static int check_sum(void) {
  float x[MAXN];
  int bad = 0;
  for (int special = 0; special < 2; special++)
    for (int s = 0; s < N_SIZES; s++) {
      const int64_t n = SIZES[s];
      fill(x, n, 2, special && n % 2, (int)n);
      float mag = 0;
      for (int64_t i = 0; i < n; i++) mag += fabsf(x[i]);
      const float ref = tdm_f32_sum_row__scalar(x, n), y = tdm_f32_sum_row__simd128(x, n);
      if (!near(y, ref, 0, (float)n * 1.2e-7f * mag)) bad += mismatch(F_SUM, "sum row", n, -1, 0, y, ref);
    }
  return bad;
}

static int check_norms(void) {
  enum { S = 7 }; /* groups side by side: x [n, S], groups at columns 0..3 */
  static float x[MAXN * S], y[MAXN * S], ref[MAXN * S];
  float w[MAXN], b[MAXN];
  int bad = 0;
  for (int kind = 0; kind < 4; kind++)
    for (int s = 1; s < N_SIZES; s++) {
      const int64_t n = SIZES[s];
      fill(x, n * S, 3, false, 0);
      fill(w, n, 1.5f, false, 0), fill(b, n, 1, false, 0);
      if (kind == 1)
        for (int64_t i = 0; i < n * S; i++) x[i] = 2.5f;       /* zero variance */
      if (kind == 2) x[n / 2] = NAN, x[S * (n / 2) + 1] = NAN; /* NaN: the row or group is NaN */
      if (kind == 3) x[n - 1] = INFINITY, x[S * (n - 1) + 2] = -INFINITY;
      const float *wv = kind % 2 ? NULL : w, *bv = kind == 2 ? NULL : b;
      tdm_f32_layer_norm_group__scalar(x, ref, n, 1, wv, bv, 1e-5f);
      tdm_f32_layer_norm_row__simd128(x, y, n, wv, bv, 1e-5f);
      for (int64_t i = 0; i < n; i++)
        if (!near(y[i], ref[i], 1e-5f, 1e-5f)) bad += mismatch(F_NORM, "layer_norm row", n, i, x[i], y[i], ref[i]);
      tdm_f32_rms_norm_group__scalar(x, ref, n, 1, wv, 1e-6f);
      tdm_f32_rms_norm_row__simd128(x, y, n, wv, 1e-6f);
      for (int64_t i = 0; i < n; i++)
        if (!near(y[i], ref[i], 1e-5f, 1e-5f)) bad += mismatch(F_NORM, "rms_norm row", n, i, x[i], y[i], ref[i]);
      for (int j = 0; j < 4; j++) tdm_f32_layer_norm_group__scalar(x + j, ref + j, n, S, wv, bv, 1e-5f);
      tdm_f32_layer_norm_4groups__simd128(x, y, n, S, wv, bv, 1e-5f);
      for (int64_t i = 0; i < n; i++)
        for (int j = 0; j < 4; j++)
          if (!near(y[i * S + j], ref[i * S + j], 1e-5f, 1e-5f))
            bad += mismatch(F_NORM, "layer_norm 4 groups", n, i * S + j, x[i * S + j], y[i * S + j], ref[i * S + j]);
    }
  return bad;
}

/* ---- attention and convolution ------------------------------------------------------------------ */

static int check_attention(void) {
  float a[MAXN], b[MAXN], y[MAXN], ref[MAXN];
  int bad = 0;
  for (int special = 0; special < 2; special++)
    for (int s = 0; s < N_SIZES; s++) {
      const int64_t n = SIZES[s];
      fill(a, n, 2, special && n > 8, 1), fill(b, n, 2, false, 2);
      float mag = 0;
      for (int64_t i = 0; i < n; i++) mag += fabsf(a[i] * b[i]);
      const float d = tdm_f32_dot__simd128(a, b, n), dref = tdm_f32_dot__scalar(a, b, n);
      if (!near(d, dref, 0, (float)n * 1.2e-7f * mag)) bad += mismatch(F_ATTENTION, "dot", n, -1, 0, d, dref);
      for (int k = 0; k < 3; k++) {
        const float p = k == 0 ? 0.37f : k == 1 ? -0.0f : (special ? NAN : 1e-30f);
        fill(y, n, 1, false, 3);
        memcpy(ref, y, (size_t)n * sizeof(float));
        tdm_f32_axpy__simd128(p, a, y, n);
        tdm_f32_axpy__scalar(p, a, ref, n);
        for (int64_t i = 0; i < n; i++)
          if (!fused_near(y[i], ref[i], fabsf(p * a[i]))) bad += mismatch(F_ATTENTION, "axpy", n, i, a[i], y[i], ref[i]);
      }
    }
  return bad;
}

/* The SIMD128 columns of a unit-stride convolution row against the scalar reference per column. */
static int check_conv(void) {
  enum { C = 3, H = 4, MAXW = 80 };
  static float x[C * H * MAXW], w[C * 3 * 5], yr[MAXW];
  int bad = 0;
  fill(w, C * 3 * 5, 1, false, 0);
  for (int64_t W = 1; W <= MAXW; W += (W < 40 ? 1 : 13))
    for (int KW = 1; KW <= 5; KW += 2)
      for (int dw = 1; dw <= 2; dw++)
        for (int pw = 0; pw <= 2; pw++) {
          for (int sw = 1; sw <= 2; sw++) {
            tdm_conv_geom g = {1, C, H, W, 0, 0, 2, KW, 1, sw, 1, pw, 1, dw};
            const int64_t span = (int64_t)dw * (KW - 1) + 1;
            if (W + 2 * pw < span) continue;
            g.OH = H + 2 * g.ph - (g.dh * (g.KH - 1) + 1) + 1;
            g.OW = (W + 2 * pw - span) / sw + 1;
            fill(x, C * H * W, 2, W % 5 == 0, (int)W);
            /* every tap inside the row, and for stride 2 the value after the last one too */
            const int64_t last = g.W - 1 - (g.KW - 1) * g.dw - (sw - 1) + g.pw;
            const int64_t lo = (g.pw + sw - 1) / sw, hi = last < 0 ? 0 : (last / sw + 1 < g.OW ? last / sw + 1 : g.OW);
            if (lo >= hi) continue;
            for (int64_t oh = 0; oh < g.OH; oh++) {
              const int64_t end = tdm_f32_conv_row__simd128(&g, x, w, C, oh, 0.25f, yr, lo, hi);
              if (end > hi || end < hi - 3 || end < lo) bad += mismatch(F_CONV, "conv row end", W, end, 0, 0, 0);
              for (int64_t ow = lo; ow < end && ow <= hi; ow++) {
                const float ref = tdm_f32_conv_point__scalar(&g, x, w, C, oh, ow, 0.25f);
                if (!near(yr[ow], ref, 1e-5f, 1e-5f * C * 2 * KW)) bad += mismatch(F_CONV, "conv row", W, ow, 0, yr[ow], ref);
              }
            }
          }
        }
  return bad;
}

/* A whole output plane over zero-padded rows (depthwise convs on short rows) against the scalar
 * reference per value, bit for bit (finite weights; NaN, ±inf and ±0 in x): borders on every
 * side, strides 1 and 2 in both dims, kernels 1, 3 and 5, padding up to the kernel's width,
 * dilation 2, widths 1–17 (every tail of 4 and 16) and 28, heights 1 (1-d) to 14, one and two
 * channels per group, and buffers small enough to need several bands or to be refused. */
static int check_conv_padded(void) {
  enum { MAXC = 2, MAXH = 14, MAXW = 28, CAP = 4096 };
  static float x[MAXC * MAXH * MAXW], w[MAXC * 5 * 5], y[(MAXH + 10) * (MAXW + 10)], buf[CAP]; /* padding up to 5 */
  static const int64_t Ws[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 14, 15, 16, 17, 28}, Hs[] = {1, 3, 7, 14};
  int bad = 0;
  for (size_t wi = 0; wi < sizeof Ws / sizeof Ws[0]; wi++)
    for (size_t hi = 0; hi < sizeof Hs / sizeof Hs[0]; hi++)
      for (int K = 1; K <= 5; K += 2)
        for (int s = 1; s <= 2; s++)
          for (int pad = 0; pad <= K; pad++)
            for (int d = 1; d <= 2; d++)
              for (int Cg = 1; Cg <= MAXC; Cg++) {
                const int64_t W = Ws[wi], H = Hs[hi], KH = H == 1 ? 1 : K, ph = H == 1 ? 0 : pad, dh = H == 1 ? 1 : d;
                const int64_t spanw = (int64_t)d * (K - 1) + 1, spanh = dh * (KH - 1) + 1;
                if (W + 2 * pad < spanw || H + 2 * ph < spanh) continue;
                if (d == 2 && (K == 1 || (H > 3 && W > 9 && W != 14))) continue; /* dilation on a few shapes only */
                tdm_conv_geom g = {1,  Cg,  H,  W, (H + 2 * ph - spanh) / s + 1, (W + 2 * pad - spanw) / s + 1, KH, K, H == 1 ? 1 : s, s,
                                   ph, pad, dh, d};
                fill(x, Cg * H * W, 2, (W + H) % 3 == 0, (int)(W * 7 + H));
                fill(w, Cg * KH * K, 1, false, K + s);
                const float b = pad == 1 ? 0.0f : 0.375f;
                /* the full buffer, one band of the rows one output row reads, and one float less (refused) */
                const int64_t Wp0 = ((g.OW + 3) / 4 * 4 - 4) * s + (K - 1) * d + 4 * s, Wp = Wp0 > pad + W ? Wp0 : pad + W;
                const int64_t caps[] = {CAP, Cg * Wp * spanh, Cg * Wp * spanh - 1};
                for (int c = 0; c < 3; c++) {
                  for (int64_t i = 0; i < g.OH * g.OW; i++) y[i] = -12345.0f;
                  const bool ok = tdm_f32_conv_plane_padded__simd128(&g, x, w, Cg, b, y, buf, caps[c]);
                  if (ok != (c < 2)) {
                    bad += mismatch(F_CONV, "conv padded refusal", W, c, (double)caps[c], (float)ok, (float)(c < 2));
                    continue;
                  }
                  for (int64_t i = 0; i < g.OH * g.OW; i++) {
                    const float ref = ok ? tdm_f32_conv_point__scalar(&g, x, w, Cg, i / g.OW, i % g.OW, b) : -12345.0f;
                    if (!fused_near(y[i], ref, ok ? conv_point_magnitude(&g, x, w, Cg, i / g.OW, i % g.OW, b) : 0))
                      bad += mismatch(F_CONV, "conv padded", W * 1000 + H, i, (double)(K * 100 + s * 10 + pad), y[i], ref);
                  }
                }
              }
  return bad;
}

/* Pooling rows, 4 columns at a time (strides 1 and 2), against the reference per value: exact,
 * NaN and ±inf included, max and mean, with and without the padding counted. */
static int check_pool(void) {
  enum { H = 5, MAXW = 60 };
  static float x[H * MAXW], yr[MAXW];
  int bad = 0;
  for (int64_t W = 1; W <= MAXW; W += (W < 30 ? 1 : 7))
    for (int KW = 1; KW <= 4; KW++)
      for (int sw = 1; sw <= 2; sw++)
        for (int pw = 0; pw <= KW / 2; pw++)
          for (int dw = 1; dw <= 2; dw++) {
            tdm_conv_geom g = {1, 1, H, W, 0, 0, 3, KW, 2, sw, 1, pw, 1, dw};
            const int64_t span = (int64_t)dw * (KW - 1) + 1;
            if (W + 2 * pw < span) continue;
            g.OH = (H + 2 - 3) / 2 + 1;
            g.OW = (W + 2 * pw - span) / sw + 1;
            fill(x, H * W, 3, W % 3 == 0, (int)W + KW);
            const int64_t last = g.W - 1 - (g.KW - 1) * g.dw - (sw - 1) + g.pw;
            const int64_t lo = (g.pw + sw - 1) / sw, hi = last < 0 ? 0 : (last / sw + 1 < g.OW ? last / sw + 1 : g.OW);
            if (lo + 4 > hi) continue;
            for (int kind = 0; kind < 3; kind++) {
              const bool is_max = kind == 0, include_pad = kind == 1;
              for (int64_t oh = 0; oh < g.OH; oh++) {
                const int64_t end = tdm_f32_pool_row__simd128(&g, is_max, include_pad, x, oh, yr, lo, hi);
                if (end > hi || end < hi - 3 || end < lo) bad += mismatch(F_POOL, "pool row end", W, end, 0, 0, 0);
                for (int64_t ow = lo; ow < end && ow < hi; ow++) {
                  const float ref = tdm_f32_pool_point__scalar(&g, is_max, include_pad, x, oh, ow);
                  if (!same(yr[ow], ref)) bad += mismatch(F_POOL, is_max ? "max_pool row" : "avg_pool row", W, ow, 0, yr[ow], ref);
                }
              }
            }
          }
  return bad;
}
#endif

/* The plane variants the runtime calls (tdm_f32_conv_plane, tdm_f32_pool_plane: config.c; SIMD128 where built) against
 * the scalar plane, value by value: short rows (the padded path), long rows (the row kernel between
 * scalar border columns), strides 1–3, and the cases the padded path must leave to the exact one:
 * a weight of +inf in the channel (0·inf would be NaN where the reference adds nothing) and a bias
 * of −0 (−0 + +0 = +0). Pooling exact. */
static int check_planes(void) {
  enum { C = 2, MAXH = 6, MAXW = 70 };
  static float x[C * MAXH * MAXW], w[C * 3 * 5], y[MAXH * MAXW], ref[MAXH * MAXW];
  static const int64_t Ws[] = {3, 7, 14, 33, 70};
  int bad = 0, cases = 0;
  for (size_t wi = 0; wi < sizeof Ws / sizeof Ws[0]; wi++)
    for (int s = 1; s <= 3; s++)
      for (int KW = 1; KW <= 5; KW += 2)
        for (int kind = 0; kind < 3; kind++) {
          const int64_t W = Ws[wi], H = kind == 2 ? 1 : MAXH, KH = H == 1 ? 1 : 3, pad = KW / 2, ph = H == 1 ? 0 : 1;
          tdm_conv_geom g = {1,  C,   H, W, (H + 2 * ph - KH) / (H == 1 ? 1 : s) + 1, (W + 2 * pad - KW) / s + 1, KH, KW, H == 1 ? 1 : s, s,
                             ph, pad, 1, 1};
          fill(x, C * H * W, 2, W % 7 == 0, (int)W + s);
          fill(w, C * KH * KW, 1, false, KW);
          if (kind == 1) w[KW / 2] = INFINITY; /* a tap of channel 0 that borders read past */
          const float b = kind == 1 ? 0.5f : kind == 2 ? -0.0f : 0.25f;
#if TDM_SIMD128
          tdm_f32_conv_plane__simd128(&g, x, w, C, b, y); /* what config.c picks in this build */
#else
          tdm_f32_conv_plane(&g, x, w, C, b, y);
#endif
          tdm_f32_conv_plane__scalar(&g, x, w, C, b, ref);
          cases++;
          for (int64_t i = 0; i < g.OH * g.OW; i++)
            if (!fused_near(y[i], ref[i], conv_point_magnitude(&g, x, w, C, i / g.OW, i % g.OW, b)))
              bad += mismatch(F_CONV, "conv plane", W * 10 + s, i, (double)(KW * 10 + kind), y[i], ref[i]);
          for (int pk = 0; pk < 3; pk++) {
            const bool is_max = pk == 0, include_pad = pk == 1;
            tdm_conv_geom p = g;
            p.C = 1;
#if TDM_SIMD128
            tdm_f32_pool_plane__simd128(&p, is_max, include_pad, x, y);
#else
            tdm_f32_pool_plane(&p, is_max, include_pad, x, y);
#endif
            tdm_f32_pool_plane__scalar(&p, is_max, include_pad, x, ref);
            for (int64_t i = 0; i < p.OH * p.OW; i++)
              if (!same(y[i], ref[i])) bad += mismatch(F_POOL, "pool plane", W * 10 + s, i, (double)(KW * 10 + pk), y[i], ref[i]);
          }
        }
  if (cases == 0) bad += mismatch(F_CONV, "no conv plane cases", 0, 0, 0, 0, 0);
  return bad;
}

/* The row and four-group forms of the scalar references (what config.c picks without SIMD128):
 * bit for bit the group kernels at stride 1 and four groups in turn, in every build. */
static int check_row_forms(void) {
  enum { S = 5 };
  static float x[MAXN * S], y[MAXN * S], ref[MAXN * S];
  float w[MAXN], b[MAXN];
  int bad = 0;
  for (int kind = 0; kind < 3; kind++)
    for (int s = 1; s < N_SIZES; s++) {
      const int64_t n = SIZES[s];
      fill(x, n * S, 3, false, 0);
      fill(w, n, 1.5f, false, 0), fill(b, n, 1, false, 0);
      if (kind == 1) x[n / 2] = NAN, x[n - 1] = -INFINITY;
      if (kind == 2)
        for (int64_t i = 1; i < n; i += 3) x[i] = -INFINITY; /* masked scores */
      const float *wv = kind == 1 ? NULL : w;
      for (int logp = 0; logp < 2; logp++) {
        tdm_f32_softmax_group__scalar(x, ref, n, 1, logp);
        tdm_f32_softmax_row__scalar(x, y, n, logp);
        if (memcmp(y, ref, (size_t)n * sizeof(float))) bad += mismatch(F_SOFTMAX, "softmax row (scalar form)", n, -1, 0, y[0], ref[0]);
      }
      tdm_f32_layer_norm_group__scalar(x, ref, n, 1, wv, b, 1e-5f);
      tdm_f32_layer_norm_row__scalar(x, y, n, wv, b, 1e-5f);
      if (memcmp(y, ref, (size_t)n * sizeof(float))) bad += mismatch(F_NORM, "layer_norm row (scalar form)", n, -1, 0, y[0], ref[0]);
      tdm_f32_rms_norm_group__scalar(x, ref, n, 1, wv, 1e-6f);
      tdm_f32_rms_norm_row__scalar(x, y, n, wv, 1e-6f);
      if (memcmp(y, ref, (size_t)n * sizeof(float))) bad += mismatch(F_NORM, "rms_norm row (scalar form)", n, -1, 0, y[0], ref[0]);
      memset(ref, 0, sizeof ref), memset(y, 0, sizeof y);
      for (int j = 0; j < 4; j++) tdm_f32_layer_norm_group__scalar(x + j, ref + j, n, S, wv, b, 1e-5f);
      tdm_f32_layer_norm_4groups__scalar(x, y, n, S, wv, b, 1e-5f);
      if (memcmp(y, ref, (size_t)(n * S) * sizeof(float)))
        bad += mismatch(F_NORM, "layer_norm 4 groups (scalar form)", n, -1, 0, y[0], ref[0]);
    }
  return bad;
}


/* Grouped attention rows: the scalar reference against a plain double-precision softmax here, and
 * (wasm) the SIMD128 variant against the scalar reference, and against itself one head at a time
 * (bit for bit: a head's values must not depend on how many heads run together). Head dims with
 * every tail of 4, fills from 1 (a decode step's first key) past a few blocks of four, groups of 1,
 * 2, 3, 8 and 17 (more than one chunk), no mask, a bool mask (some rows all masked, some keys
 * masked inside a block), a float mask (-inf, the most negative float, finite values), a mask
 * shared by the heads or one per head; K and V rows one after another or strided (a time-first
 * cache [T, H, D] read in place: rows kstride, vstride floats apart, other floats between). */
static void attention_naive(const tdm_attn_rows *a, float *y) {
  for (int64_t g = 0; g < a->G; g++) {
    double s[64], mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < a->jend; j++) {
      const int64_t mi = g * a->mhead + j * a->mstep;
      if (a->mb && !a->mb[mi]) {
        s[j] = -INFINITY;
        continue;
      }
      double d = 0;
      for (int64_t c = 0; c < a->D; c++) d += (double)a->q[g * a->qstride + c] * a->k[j * a->kstride + c];
      s[j] = (float)d * a->scale + (a->mf ? a->mf[mi] : 0.0f); /* in float32, as a float mask is added (-FLT_MAX absorbs) */
      if (s[j] > mx) mx = s[j];
    }
    for (int64_t c = 0; c < a->Dv; c++) y[g * a->ystride + c] = 0;
    if (mx == -INFINITY) continue;
    for (int64_t j = 0; j < a->jend; j++) sum += s[j] == -INFINITY ? 0 : exp(s[j] - mx);
    for (int64_t c = 0; c < a->Dv; c++) {
      double acc = 0;
      for (int64_t j = 0; j < a->jend; j++)
        if (s[j] != -INFINITY) acc += exp(s[j] - mx) / sum * a->v[j * a->vstride + c];
      y[g * a->ystride + c] = (float)acc;
    }
  }
}

static int check_attention_rows(void) {
  enum { MAXG = 17, MAXT = 40, MAXD = 66 };
  static float q[MAXG * 2 * MAXD], k[MAXT * (3 * MAXD + 2)], v[MAXT * (2 * MAXD + 1)], mf[MAXG * MAXT], y[MAXG * 2 * MAXD],
      ref[MAXG * 2 * MAXD], one[MAXG * 2 * MAXD], ws[MAXG * MAXT];
  static uint8_t mb[MAXG * MAXT];
  static const int64_t Ds[] = {1, 3, 4, 5, 8, 13, 64, 66}, Ts[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 33, 40}, Gs[] = {1, 2, 3, 8, 17};
  int bad = 0;
  for (size_t di = 0; di < sizeof Ds / sizeof Ds[0]; di++)
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
      for (size_t gi = 0; gi < sizeof Gs / sizeof Gs[0]; gi++)
        for (int m10 = 0; m10 < 10; m10++) { /* mask: none, bool shared, bool per head, float shared, float per head */
          const int mask = m10 % 5, strided = m10 >= 5;
          const int64_t D = Ds[di], Dv = D == 1 ? 4 : D - (D > 4), T = Ts[ti], G = Gs[gi];
          const int64_t ks = strided ? 3 * D + 2 : D, vs = strided ? 2 * Dv + 1 : Dv;
          const int salt = (int)(D * 131 + T * 7 + G + mask);
          fill(q, G * 2 * MAXD, 1.5f, false, salt), fill(k, T * ks, 1.5f, false, salt + 1), fill(v, T * vs, 1, false, salt + 2);
          const bool per_head = mask == 2 || mask == 4;
          for (int64_t i = 0; i < G * T; i++) {
            mb[i] = (uint8_t)((i * 5 + salt) % 7 != 0);
            mf[i] = frand() * 3;
            if ((i * 3 + salt) % 11 == 0) mf[i] = -INFINITY;
            if ((i * 3 + salt) % 13 == 0) mf[i] = -FLT_MAX;
          }
          if (per_head && G > 1) /* head 1 sees no key at all */
            for (int64_t j = 0; j < T; j++) mb[T + j] = 0, mf[T + j] = -INFINITY;
          tdm_attn_rows a = {.q = q,
                             .k = k,
                             .v = v,
                             .y = y,
                             .G = G,
                             .qstride = 2 * D + 1,
                             .ystride = 2 * Dv + 3,
                             .jend = T,
                             .D = D,
                             .Dv = Dv,
                             .kstride = ks,
                             .vstride = vs,
                             .scale = 0.3f,
                             .mb = mask == 1 || mask == 2 ? mb : NULL,
                             .mf = mask == 3 || mask == 4 ? mf : NULL,
                             .mhead = per_head ? T : 0,
                             .mstep = 1};
          const int64_t ny = (G - 1) * a.ystride + Dv;
          for (int64_t i = 0; i < ny; i++) y[i] = ref[i] = one[i] = 7.0f; /* every output value is written */
          tdm_f32_attention_rows__scalar(&a, ws);
          a.y = ref;
          attention_naive(&a, ref);
          for (int64_t g = 0; g < G; g++)
            for (int64_t c = 0; c < Dv; c++) {
              const int64_t i = g * a.ystride + c;
              if (!near(y[i], ref[i], 1e-5f, 1e-5f)) bad += mismatch(F_ATTENTION, "attention rows scalar", T, i, (double)G, y[i], ref[i]);
            }
#if TDM_SIMD128
          memcpy(ref, y, (size_t)ny * sizeof(float));
          for (int64_t i = 0; i < ny; i++) y[i] = 7.0f;
          a.y = y;
          tdm_f32_attention_rows__simd128(&a, ws);
          for (int64_t g = 0; g < G; g++) { /* the same heads one at a time */
            tdm_attn_rows h = a;
            h.G = 1, h.q = q + g * a.qstride, h.y = one + g * a.ystride;
            if (h.mb) h.mb += g * a.mhead;
            if (h.mf) h.mf += g * a.mhead;
            tdm_f32_attention_rows__simd128(&h, ws);
          }
          for (int64_t g = 0; g < G; g++)
            for (int64_t c = 0; c < Dv; c++) {
              const int64_t i = g * a.ystride + c;
              if (!near(y[i], ref[i], 1e-5f, 1e-5f)) bad += mismatch(F_ATTENTION, "attention rows simd128", T, i, (double)G, y[i], ref[i]);
              if (!same(y[i], one[i])) bad += mismatch(F_ATTENTION, "attention rows simd128 by group", T, i, (double)G, y[i], one[i]);
            }
#endif
        }
  return bad;
}

/* ---- convolution as a GEMM, transposed convolution (natively with the scalar GEMM too) -------- */

/* im2col in chunks (one panel, an odd number of panels, all) then the conv GEMM, against the
 * reference per output value: 1-d and 2-d, strides 1 to 3, dilation, padding, groups, and output
 * channels and positions on every tail of the 4-row x 8-column tiles. */
static int check_conv_gemm(void) {
  enum { MAXX = 6 * 7 * 19, MAXW = 18 * 36, MAXY = 18 * 256 };
  static float x[MAXX], w[MAXW], bias[18], y[MAXY], colp[3 * 4 * 8 * 200];
  int bad = 0, cases = 0;
  fill(bias, 18, 1, false, 1);
  for (int r = 1; r <= 2; r++)
    for (int Og = 1; Og <= 9; Og += (Og < 5 ? 1 : 4))
      for (int Cg = 1; Cg <= 3; Cg += 2)
        for (int groups = 1; groups <= 2; groups++)
          for (int K = 1; K <= 4; K += 3)
            for (int s = 1; s <= 3; s++)
              for (int d = 1; d <= 2; d++)
                for (int pad = 0; pad <= 2; pad++) {
                  const int64_t H = r == 2 ? 7 : 1, W = 19 - s, KH = r == 2 ? K - (K > 1) : 1, C = Cg * groups, O = Og * groups;
                  tdm_conv_geom g = {1, C, H, W, 0, 0, KH, K, r == 2 ? s : 1, s, r == 2 ? pad : 0, pad, r == 2 ? d : 1, d};
                  const int64_t spanh = g.dh * (KH - 1) + 1, spanw = d * (K - 1) + 1;
                  if (H + 2 * g.ph < spanh || W + 2 * pad < spanw) continue;
                  g.OH = (H + 2 * g.ph - spanh) / g.sh + 1;
                  g.OW = (W + 2 * pad - spanw) / s + 1;
                  const int64_t Kk = Cg * KH * K, N = g.OH * g.OW;
                  fill(x, C * H * W, 2, false, (int)(Og * 3 + Cg)); /* no specials: inf - inf depends on the order */
                  fill(w, O * Kk, 1, false, Og);
                  const int64_t chunks[3] = {8, 24, (N + 7) / 8 * 8};
                  for (int ci = 0; ci < 3; ci++)
                    for (int variant = 0; variant < 4; variant++) {
#if !TDM_SIMD128
                      if (variant == 1) continue;
#endif
#if TDM_X86_AVX2
                      if ((variant == 2 && !tdm_cpu_avx2_fma()) || (variant == 3 && !tdm_cpu_avx512())) continue;
#else
                      if (variant >= 2) continue;
#endif
                      for (int64_t gi = 0; gi < groups; gi++)
                        for (int64_t n0 = 0; n0 < N; n0 += chunks[ci]) {
                          const int64_t nc = N - n0 < chunks[ci] ? N - n0 : chunks[ci];
                          tdm_f32_im2col_packed(&g, x + gi * Cg * H * W, Cg, n0, nc, colp);
                          const float *b = (Og + s) % 2 ? bias + gi * Og : NULL;
                          float *yg = y + gi * Og * N + n0;
                          if (variant == 0) tdm_f32_conv_gemm__scalar(Og, nc, Kk, w + gi * Og * Kk, colp, b, yg, N);
#if TDM_SIMD128
                          else if (variant == 1) tdm_f32_conv_gemm_4x8__simd128(Og, nc, Kk, w + gi * Og * Kk, colp, b, yg, N);
#endif
#if TDM_X86_AVX2
                          else if (variant == 2) tdm_f32_conv_gemm__avx2(Og, nc, Kk, w + gi * Og * Kk, colp, b, yg, N);
                          else tdm_f32_conv_gemm__avx512(Og, nc, Kk, w + gi * Og * Kk, colp, b, yg, N);
#endif
                        }
                      cases++;
                      for (int64_t o = 0; o < O; o++)
                        for (int64_t oh = 0; oh < g.OH; oh++)
                          for (int64_t ow = 0; ow < g.OW; ow++) {
                            const int64_t gi = o / Og;
                            const float b0 = (Og + s) % 2 ? bias[o] : 0.0f;
                            const float ref = tdm_f32_conv_point__scalar(&g, x + gi * Cg * H * W, w + o * Kk, Cg, oh, ow, b0);
                            const float got = y[o * N + oh * g.OW + ow];
                            if (!near(got, ref, 1e-5f, 1e-5f * (float)Kk * 4))
                              bad += mismatch(F_CONV_GEMM,
                                              variant == 3       ? "conv gemm avx512"
                                                  : variant == 2 ? "conv gemm avx2"
                                                  : variant      ? "conv gemm simd128"
                                                                 : "conv gemm",
                                              N, o * N + oh * g.OW + ow, 0, got, ref);
                          }
                    }
                }
  /* a deep K (several blocks of the SIMD kernel's K loop) */
  {
    static float xd[40 * 30], wd[5 * 40 * 9], yd[5 * 30], cold[40 * 9 * 32];
    tdm_conv_geom g = {1, 40, 1, 30, 1, 28, 1, 9, 1, 1, 0, 3, 1, 1};
    g.OW = (30 + 6 - 9) / 1 + 1;
    fill(xd, 40 * 30, 1, false, 3), fill(wd, 5 * 40 * 9, 1, false, 4);
    const int64_t Kk = 40 * 9, N = g.OW;
    tdm_f32_im2col_packed(&g, xd, 40, 0, N, cold);
    tdm_f32_conv_gemm(5, N, Kk, wd, cold, NULL, yd, N); /* the variant the runtime uses */
    for (int64_t o = 0; o < 5; o++)
      for (int64_t ow = 0; ow < N; ow++) {
        const float ref = tdm_f32_conv_point__scalar(&g, xd, wd + o * Kk, 40, 0, ow, 0.0f);
        if (!near(yd[o * N + ow], ref, 1e-5f, 1e-5f * (float)Kk))
          bad += mismatch(F_CONV_GEMM, "conv gemm deep K", N, o * N + ow, 0, yd[o * N + ow], ref);
      }
  }
  if (cases == 0) bad += mismatch(F_CONV_GEMM, "no cases", 0, 0, 0, 0, 0);
  return bad;
}

/* convrate: the conv GEMM with B's rows read from x (tdm_f32_conv1d_gemm_no_im2col: 1-d, stride 1, no
 * padding, dilation 1 and 2; the last partial panel from the packed tail) against the reference per
 * output value, and in the SIMD128 build bit for bit against im2col + tdm_f32_conv_gemm_4x8__simd128
 * (the path it replaces); channels past one K block (256 products), M past one row block (64), and
 * output channels and positions on every tail of the 4-row x 8-column tiles. */
static int check_conv1d_gemm_no_im2col(void) {
  enum { MAXX = 100 * 60, MAXW = 70 * 100 * 4, MAXY = 70 * 60 };
  static float x[MAXX], w[MAXW], bias[70], y[MAXY], ya[MAXY], tail[100 * 4 * 8], colp[100 * 4 * 64];
  int bad = 0, cases = 0;
  fill(bias, 70, 1, false, 5);
  const int64_t cgs[] = {1, 3, 100}, ogs[] = {1, 2, 3, 4, 5, 9, 70};
  for (int ci = 0; ci < 3; ci++)
    for (int oi = 0; oi < 7; oi++)
      for (int64_t KW = 1; KW <= 4; KW++)
        for (int64_t d = 1; d <= 2; d++)
          for (int64_t W = 5 + KW * d; W <= 60; W += 13) {
            const int64_t Cg = cgs[ci], Og = ogs[oi], span = d * (KW - 1) + 1, N = W - span + 1, K = Cg * KW;
            if (N < 1 || N > 64 || (Og == 70 && ci < 2)) continue;
            const tdm_conv_geom g = {1, Cg, 1, W, 1, N, 1, KW, 1, 1, 0, 0, 1, d};
            fill(x, Cg * W, 2, false, (int)(Og + KW));
            fill(w, Og * K, 1, false, (int)(Og * 2 + d));
            const float *b = (Og + KW) % 2 ? bias : NULL;
            tdm_conv_x bx = {.Cg = Cg, .KW = KW, .cs = W, .xb = x, .tail = NULL};
            for (int64_t kw = 0; kw < KW; kw++) bx.koff[kw] = kw * d;
            if (N % 8) {
              tdm_f32_conv_x_tail(&bx, N, tail);
              bx.tail = tail;
            }
            for (int variant = 0; variant < 3; variant++) {
              if (variant == 0) tdm_f32_conv1d_gemm_no_im2col__scalar(Og, N, &bx, w, b, y, N);
#if TDM_SIMD128
              else if (variant == 1) tdm_f32_conv1d_gemm_no_im2col__simd128(Og, N, &bx, w, b, y, N);
#endif
              else if (variant == 2 && tdm_f32_conv1d_gemm_no_im2col()) tdm_f32_conv1d_gemm_no_im2col()(Og, N, &bx, w, b, y, N);
              else continue;
              cases++;
              for (int64_t o = 0; o < Og; o++)
                for (int64_t j = 0; j < N; j++) {
                  const float ref = tdm_f32_conv_point__scalar(&g, x, w + o * K, Cg, 0, j, b ? b[o] : 0.0f);
                  if (!near(y[o * N + j], ref, 1e-5f, 1e-5f * (float)K * 4))
                    bad += mismatch(F_CONV_GEMM, variant ? "conv gemm x simd128" : "conv gemm x", N, o * N + j, 0, y[o * N + j], ref);
                }
#if TDM_SIMD128
              if (variant == 1) { /* the path it replaces: im2col's panels, the packed tiles */
                tdm_f32_im2col_packed(&g, x, Cg, 0, N, colp);
                tdm_f32_conv_gemm_4x8__simd128(Og, N, K, w, colp, b, ya, N);
                for (int64_t i = 0; i < Og * N; i++)
                  if (!same(y[i], ya[i])) bad += mismatch(F_CONV_GEMM, "conv gemm x vs im2col bits", N, i, 0, y[i], ya[i]);
              }
#endif
            }
          }
  if (cases == 0) bad += mismatch(F_CONV_GEMM, "conv gemm x: no cases", 0, 0, 0, 0, 0);
  return bad;
}

/* Winograd F(2,3) and F(4,3) for 1-d k3 convs, F(2,2) and F(3,2) for convs and transposed convs with
 * kernel 2s and stride s (tdm_f32_conv_wino over a tdm_wino view, conv_wino.c), against each op's own
 * definition summed in double (the k3 and strided convs' sums of taps, the transposed conv's scatter
 * of every input times every tap): every tile tail (N % m, N % 8m), channels not a multiple of 4,
 * strides 2 to 4, 1 to 9 rows, bias or not, relu and ELU fused, a workspace of one panel of tiles
 * (many chunks) and a whole one (the same bits: any chunk size does), one too small (refused, y untouched), and x with a NaN or an
 * infinity (refused). The bound, per output j of view row o: (C + 8)·ε·Σ_i |A_ji| Σ_c (|G||w|)_i
 * (|Bᵀ||d|)_i over the view's taps w and inputs d (the float sums of the transformed products, the
 * transforms with absolute values). */
static const double WINO_G2[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
static const double WINO_B2[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
static const double WINO_A2[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
static const double WINO_G4[6][3] = {
    {.25, 0, 0}, {-1. / 6, -1. / 6, -1. / 6}, {-1. / 6, 1. / 6, -1. / 6}, {1. / 24, 1. / 12, 1. / 6}, {1. / 24, -1. / 12, 1. / 6},
    {0, 0, 1}};
static const double WINO_B4[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                     {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
static const double WINO_A4[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
static const double WINO_G22[3][3] = {{1, 0}, {1, 1}, {0, 1}};
static const double WINO_B22[3][3] = {{1, -1, 0}, {0, 1, 0}, {0, -1, 1}};
static const double WINO_A22[2][3] = {{1, 1, 0}, {0, 1, 1}};
static const double WINO_G32[4][3] = {{1, 0}, {.5, .5}, {.5, -.5}, {0, 1}};
static const double WINO_B32[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, -1, 0, 1}};
static const double WINO_A32[3][4] = {{1, 1, 1, 0}, {0, 1, -1, 0}, {0, 1, 1, 1}};

/* The view's input d_c(i) (variants.h, tdm_wino). */
static double wino_d(const tdm_wino *g, const float *x, int64_t c, int64_t i) {
  return i - g->lp >= 0 && i - g->lp < g->L ? x[(c / g->xs) * g->xw + c % g->xs + (i - g->lp) * g->xs] : 0.0;
}

static double wino_bound(const tdm_wino *g, const float *x, const float *w2, int64_t o, int64_t j) {
  const int m = g->m, r = g->r, T = m + r - 1;
  const int64_t q = j / m, rr = j % m;
  double mag[6] = {0};
  for (int64_t c = 0; c < g->C; c++)
    for (int i = 0; i < T; i++) {
      double gw = 0, bd = 0;
      for (int k = 0; k < r; k++) {
        const double G = r == 3 ? (m == 2 ? WINO_G2[i][k] : WINO_G4[i][k]) : (m == 2 ? WINO_G22[i][k] : WINO_G32[i][k]);
        gw += fabs(G) * fabs(w2[(o * g->C + c) * r + k]);
      }
      for (int k = 0; k < T; k++) {
        const double B = r == 3 ? (m == 2 ? WINO_B2[i][k] : WINO_B4[i][k]) : (m == 2 ? WINO_B22[i][k] : WINO_B32[i][k]);
        bd += fabs(B) * fabs(wino_d(g, x, c, q * m + k));
      }
      mag[i] += gw * bd;
    }
  double s = 0;
  for (int i = 0; i < T; i++)
    s += fabs(r == 3 ? (m == 2 ? WINO_A2[rr][i] : WINO_A4[rr][i]) : (m == 2 ? WINO_A22[rr][i] : WINO_A32[rr][i])) * mag[i];
  return (double)(g->C + 8) * FLT_EPSILON * s;
}

enum { WC = 70, WO = 9, WN = 140, WS = 4 };
static float wx[WC * (WN + 2) * WS], ww[WO * WC * 3 * WS], wu[6 * WO * WC * WS], wtaps[WO * WC * 3 * WS], wbias[WO], wy[WO * (WN + 2) * WS],
    wy1[WO * (WN + 2) * WS], wws[6 * (WC * WS + WO * WS) * (WN / 2 + 16)];

/* One case of form 0 (k3), 1 (kernel 2s, stride s), 2 (transposed, kernel 2s, stride s): y's
 * reference from the op's definition, the view's taps for U, every refusal above, then every output
 * within the bound. C, O: the op's channels; N: the conv's outputs or the transposed conv's inputs. */
static int wino_case(int form, int m, int64_t s, int64_t C, int64_t O, int64_t N, int bform, bool small_ws, int *cases) {
  const int r = form == 0 ? 3 : 2;
  const int act = form != 2 && bform == 2 ? TDM_CONV_ACT_RELU : form != 2 && bform == 3 ? TDM_CONV_ACT_ELU : TDM_CONV_ACT_NONE;
  const int64_t K = form == 0 ? 3 : 2 * s, W = form == 0 ? N + 2 : form == 1 ? s * (N + 1) + (N % 2) * (s - 1) : N;
  const int64_t OW = form == 2 ? s * (N + 1) : N;
  const tdm_wino g = form == 0 ? tdm_wino_k3(m, O, C, N)
      : form == 1              ? tdm_wino_strided(m, O, C, s, W, N)
                               : tdm_wino_transposed(m, O, C, s, N);
  int bad = 0;
  fill(wx, C * W, 2, false, (int)(C + N)), fill(ww, O * C * K, 1, false, (int)(O + bform)), fill(wbias, O, 1, false, 7);
  const float *b = bform % 2 ? wbias : NULL;
  /* the view's taps: k3 as is; strided w [O, C, 2s] → [O, C·s, 2]; transposed wt [O·2s, C] → [O·s, C, 2] */
  for (int64_t o = 0; o < g.O; o++)
    for (int64_t c = 0; c < g.C; c++)
      for (int k = 0; k < r; k++)
        wtaps[(o * g.C + c) * r + k] = form == 0 ? ww[(o * C + c) * 3 + k]
            : form == 1                          ? ww[(o * C + c / s) * K + s * k + c % s]
                                                 : ww[((o / s) * K + o % s + (k == 0 ? s : 0)) * C + c];
  tdm_conv_wino_weights(m, r, g.O, g.C, wtaps, wu);
  const int64_t T = m + r - 1, one = T * (g.C + g.O) * 8, wsn = small_ws ? one : (int64_t)(sizeof wws / sizeof wws[0]);
  for (int64_t i = 0; i < O * OW; i++) wy[i] = -7.0f;
  if (tdm_f32_conv_wino(&g, wx, wu, b, wy, wws, one - 1, act) || wy[0] != -7.0f)
    bad += mismatch(F_CONV_GEMM, "conv wino took a workspace under one panel", N, 0, (double)C, wy[0], -7.0f);
  for (int k = 0; k < 3 && N == 5; k++) { /* a NaN or infinity anywhere in x: refused (the direct path) */
    const int64_t at = (k * 7919) % (C * W);
    const float keep = wx[at];
    wx[at] = k == 0 ? NAN : k == 1 ? INFINITY : -INFINITY;
    if (tdm_f32_conv_wino(&g, wx, wu, b, wy, wws, wsn, act) || wy[0] != -7.0f)
      bad += mismatch(F_CONV_GEMM, "conv wino took a non-finite x", N, at, (double)k, wy[0], -7.0f);
    wx[at] = keep;
  }
  if (!tdm_f32_conv_wino(&g, wx, wu, b, wy, wws, wsn, act))
    return bad + mismatch(F_CONV_GEMM, "conv wino refused its workspace", N, 0, (double)wsn, 0, 1);
  ++*cases;
  if (!small_ws) { /* chunks of one panel of tiles give the bits of the whole (conv_wino.c's tile mode hands chunks to threads) */
    if (!tdm_f32_conv_wino(&g, wx, wu, b, wy1, wws, one, act)) bad += mismatch(F_CONV_GEMM, "conv wino refused one panel", N, 0, 0, 0, 1);
    for (int64_t i = 0; i < O * OW; i++)
      if (!same(wy1[i], wy[i])) bad += mismatch(F_CONV_GEMM, "conv wino chunk size changed a bit", N, i, (double)C, wy1[i], wy[i]);
  }
  for (int64_t o = 0; o < O; o++)
    for (int64_t t = 0; t < OW; t++) {
      double ref = b ? b[o] : 0.0;
      if (form == 2) /* every input i times every tap k lands on i·s + k */
        for (int64_t c = 0; c < C; c++)
          for (int64_t i = 0; i < N; i++) {
            if (t - i * s >= 0 && t - i * s < K) ref += (double)ww[(o * K + t - i * s) * C + c] * wx[c * N + i];
          }
      else
        for (int64_t c = 0; c < C; c++)
          for (int64_t k = 0; k < K; k++) ref += (double)ww[(o * C + c) * K + k] * wx[c * W + (form == 0 ? t : s * t) + k];
      const int64_t vo = form == 2 ? o * s + t % s : o, vj = form == 2 ? t / s : t; /* the view's row and output */
      const double bound = wino_bound(&g, wx, wtaps, vo, vj) + (b ? FLT_EPSILON * fabs(b[o]) : 0) + 1e-6 * fabs(ref);
      if (act == TDM_CONV_ACT_RELU) ref = ref > 0 ? ref : 0;
      if (act == TDM_CONV_ACT_ELU) ref = ref > 0 ? ref : expm1(ref);
      if (!(fabs((double)wy[o * OW + t] - ref) <= bound)) {
        static const char *what[3][5] = {{"", "", "conv wino F(2,3)", "", "conv wino F(4,3)"},
                                         {"", "", "conv wino strided F(2,2)", "conv wino strided F(3,2)", ""},
                                         {"", "", "conv wino transposed F(2,2)", "conv wino transposed F(3,2)", ""}};
        bad +=
            mismatch(F_CONV_GEMM, what[form][m], N, o * OW + t, (double)(C * 1000 + O * 100 + s * 10 + bform), wy[o * OW + t], (float)ref);
      }
    }
  return bad;
}

static int check_conv_wino(void) {
  int bad = 0, cases = 0;
  const int64_t cs[] = {1, 5, 32, 70}, os[] = {1, 4, 9}, ns[] = {1, 2, 3, 5, 16, 17, 31, 64, 139};
  for (int m = 2; m <= 4; m += 2)
    for (int ci = 0; ci < 4; ci++)
      for (int oi = 0; oi < 3; oi++)
        for (int ni = 0; ni < 9; ni++)
          for (int bform = 0; bform < 4; bform++) bad += wino_case(0, m, 1, cs[ci], os[oi], ns[ni], bform, ni % 2, &cases);
  const int64_t cs2[] = {1, 5, 17}, os2[] = {1, 3, 9}, ns2[] = {1, 2, 3, 5, 16, 17, 31, 64};
  for (int form = 1; form <= 2; form++)
    for (int m = 2; m <= 3; m++)
      for (int64_t s = 2; s <= WS; s++)
        for (int ci = 0; ci < 3; ci++)
          for (int oi = 0; oi < 3; oi++)
            for (int ni = 0; ni < 8; ni++)
              for (int bform = 0; bform < 2; bform++)
                bad += wino_case(form, m, s, cs2[ci], os2[oi], ns2[ni], bform + (form == 1 && ni % 3 == 0 ? 2 : 0), ni % 2, &cases);
  if (cases == 0) bad += mismatch(F_CONV_GEMM, "conv wino: no cases", 0, 0, 0, 0, 0);
  return bad;
}

/* ELU in one pass (tdm_f32_elu__simd128) against the chain of the four elementwise ops, bit for bit:
 * every length's tail, the special values (NaN, infinities, signed zeros, exp's edges). */
static int check_elu(void) {
  static float x[1030], y[1030], ref[1030];
  int bad = 0;
  for (int64_t n = 0; n <= 1030; n += (n < 20 ? 1 : 101)) {
    fill(x, n, 30, true, (int)n);
    tdm_f32_elu__chain(x, ref, n);
    tdm_f32_elu(x, y, n);
    for (int64_t i = 0; i < n; i++)
      if (!same(y[i], ref[i])) bad += mismatch(F_EXP, "elu one pass", n, i, x[i], y[i], ref[i]);
  }
  { /* every 1/64 from -110 to 0 (the one-pass exp's clamp at -87, the denormal results below), NaN, ±inf */
    static float v[7046], o[7046], r[7046];
    int64_t n = 0;
    for (int k = -7040; k <= 0; k++) v[n++] = (float)k / 64.0f;
    v[n++] = NAN, v[n++] = INFINITY, v[n++] = -INFINITY, v[n++] = -87.00001f, v[n++] = -86.99999f;
    tdm_f32_elu__chain(v, r, n);
    tdm_f32_elu(v, o, n);
    for (int64_t i = 0; i < n; i++)
      if (!same(o[i], r[i])) bad += mismatch(F_EXP, "elu one pass, [-110, 0]", n, i, v[i], o[i], r[i]);
  }
  { /* -1 + e^x: exactly -1 far left, x itself right of 0 */
    const float v[4] = {-200.0f, 3.5f, -0.0f, 0.0f};
    float o[4];
    tdm_f32_elu(v, o, 4);
    if (o[0] != -1.0f || o[1] != 3.5f || o[2] != 0.0f || o[3] != 0.0f) bad += mismatch(F_EXP, "elu values", 4, 0, 0, o[0], -1.0f);
  }
  return bad;
}

/* Few output positions (a streaming step): im2row, then the dot-product kernel (scalar and, in
 * wasm, SIMD128) against the reference per output value: 1 to 4 positions (each tile shape), rows
 * 1 to 19 (every tail of the 8-, 4- and 2-row tiles), K = Cg·KH·KW over every K % 4, strides,
 * dilation, padding, 1-d and 2-d, with and without bias. The SIMD128 rows are also run split at
 * every row (as threads split them): the same bits. Then the transposed convolution's path for
 * few input positions (x's group transposed, dot products into z, col2im) against its reference. */
static int check_conv_dot(void) {
  enum { MAXX = 9 * 4 * 12, MAXW = 19 * 9 * 3 * 5, MAXCOL = 4 * 9 * 3 * 5 };
  static float x[MAXX], w[MAXW], bias[19], y[19 * 4], y2[19 * 4], colt[MAXCOL];
  int bad = 0, cases = 0;
  fill(bias, 19, 1, false, 5);
  for (int r = 1; r <= 2; r++)
    for (int Cg = 1; Cg <= 9; Cg += 2)
      for (int KW = 1; KW <= 5; KW += 2)
        for (int s = 1; s <= 3; s++)
          for (int d = 1; d <= 2; d++)
            for (int pad = 0; pad <= 1; pad++)
              for (int pos = 1; pos <= 4; pos++) {
                /* W such that OW = pos; 2-d: one row of height 1 padded by 1 on both sides, KH = 3 (OH = 1) */
                const int64_t KH = r == 2 ? 3 : 1, spanw = d * (KW - 1) + 1, W = (pos - 1) * s + spanw - 2 * pad;
                if (W < 1) continue;
                tdm_conv_geom g = {1, Cg, 1, W, 1, pos, KH, KW, 1, s, r == 2 ? 1 : 0, pad, 1, d};
                const int64_t K = Cg * g.KH * KW, M = 19;
                fill(x, Cg * g.H * W, 2, false, Cg + KW);
                fill(w, M * K, 1, false, s + d);
                tdm_f32_im2row(&g, x, Cg, 0, pos, colt);
                for (int variant = 0; variant < 3; variant++) {
#if !TDM_SIMD128
                  if (variant >= 1) continue;
#endif
                  for (int64_t m = 1; m <= M; m += (m < 9 ? 1 : 5)) {
                    const float *b = (m + s) % 2 ? bias : NULL;
                    if (variant == 0) tdm_f32_conv_dot__scalar(m, pos, K, w, colt, b, y, pos);
#if TDM_SIMD128
                    else if (variant == 1) tdm_f32_conv_dot__simd128(m, pos, K, w, colt, b, y, pos);
                    else tdm_f32_conv_dot_2s__simd128(m, pos, K, w, colt, b, y, pos);
#endif
                    cases++;
                    for (int64_t o = 0; o < m; o++)
                      for (int64_t ow = 0; ow < pos; ow++) {
                        const float ref = tdm_f32_conv_point__scalar(&g, x, w + o * K, Cg, 0, ow, b ? b[o] : 0.0f);
                        if (!near(y[o * pos + ow], ref, 1e-5f, 1e-5f * (float)K * 4))
                          bad += mismatch(F_CONV_GEMM,
                                          variant == 2  ? "conv dot simd128 2 streams"
                                              : variant ? "conv dot simd128"
                                                        : "conv dot",
                                          K, o * pos + ow, (double)(m * 10 + pos), y[o * pos + ow], ref);
                      }
#if TDM_SIMD128
                    if (variant >= 1)
                      for (int64_t split = 1; split < m; split += 3) {
                        const tdm_conv_dot_fn f = variant == 1 ? tdm_f32_conv_dot__simd128 : tdm_f32_conv_dot_2s__simd128;
                        f(split, pos, K, w, colt, b, y2, pos);
                        f(m - split, pos, K, w + split * K, colt, b ? b + split : NULL, y2 + split * pos, pos);
                        for (int64_t i = 0; i < m * pos; i++)
                          if (!same(y2[i], y[i])) bad += mismatch(F_CONV_GEMM, "conv dot split", K, i, (double)split, y2[i], y[i]);
                      }
#endif
                  }
                }
              }
  /* rows long enough for the runtime's dot to read each from both halves (K >= 2048: config.c),
   * 1 to 4 positions, every K % 8, against the scalar dots */
  {
    enum { DK = 2061, DM = 6 };
    static float wd[DM * DK], cd[4 * DK], yd[DM * 4], rd[DM * 4];
    fill(wd, DM * DK, 1, false, 11), fill(cd, 4 * DK, 1, false, 12);
    for (int64_t K = 2048; K <= DK; K += 3)
      for (int64_t pos = 1; pos <= 4; pos++) {
        tdm_f32_conv_dot(DM, pos, K, wd, cd, bias, yd, pos);
        tdm_f32_conv_dot__scalar(DM, pos, K, wd, cd, bias, rd, pos);
        cases++;
        for (int64_t i = 0; i < DM * pos; i++)
          if (!near(yd[i], rd[i], 1e-5f, 1e-5f * (float)K))
            bad += mismatch(F_CONV_GEMM, "conv dot long rows", K, i, (double)pos, yd[i], rd[i]);
      }
  }
  /* the SIMD128 dots walk the rows in R runs of M / R (R = the tile's rows), the rows past R·(M / R)
   * one at a time: at every M up to 41 (every tail of 8, 4 and 2 runs, runs of 1 to 20 rows), short
   * rows and rows read from both halves, each row's value equals that row run alone (bit for bit)
   * and the scalar dots */
  {
    enum { RK = 2054, RM = 41 };
    static float wr[RM * RK], cr[4 * RK], yr[RM * 4], y1[4], rr[RM * 4];
    fill(wr, RM * RK, 1, false, 13), fill(cr, 4 * RK, 1, false, 14);
    const int64_t Ks[] = {7, 64, 2054};
    for (int kc = 0; kc < 3; kc++)
      for (int64_t pos = 1; pos <= 4; pos++)
        for (int64_t m = 1; m <= RM; m++) {
          const int64_t K = Ks[kc];
          const float *b = m % 2 ? bias : NULL;
          if (m > 19 && b) continue; /* bias holds 19 */
          tdm_f32_conv_dot__scalar(m, pos, K, wr, cr, b, rr, pos);
          for (int variant = 0; variant < 2; variant++) {
#if TDM_SIMD128
            const tdm_conv_dot_fn f = variant ? tdm_f32_conv_dot_2s__simd128 : tdm_f32_conv_dot__simd128;
#else
            const tdm_conv_dot_fn f = tdm_f32_conv_dot;
            if (variant) continue;
#endif
            f(m, pos, K, wr, cr, b, yr, pos);
            cases++;
            for (int64_t o = 0; o < m; o++) {
              f(1, pos, K, wr + o * K, cr, b ? b + o : NULL, y1, pos);
              for (int64_t q = 0; q < pos; q++) {
                if (!same(yr[o * pos + q], y1[q]))
                  bad += mismatch(F_CONV_GEMM, variant ? "conv dot 2s runs vs one row" : "conv dot runs vs one row", K, o * pos + q,
                                  (double)(m * 10 + pos), yr[o * pos + q], y1[q]);
                if (!near(yr[o * pos + q], rr[o * pos + q], 1e-5f, 1e-5f * (float)K))
                  bad += mismatch(F_CONV_GEMM, variant ? "conv dot 2s runs" : "conv dot runs", K, o * pos + q, (double)(m * 10 + pos),
                                  yr[o * pos + q], rr[o * pos + q]);
              }
            }
          }
        }
  }
  /* transposed: few input positions */
  {
    static float xt[12 * 4], wt[2 * 7 * 8 * 6], zt[7 * 8 * 4], ytr[2 * 7 * 40], ref[2 * 7 * 40], xT[6 * 4];
    for (int groups = 1; groups <= 2; groups++)
      for (int HW = 1; HW <= 4; HW++)
        for (int s = 2; s <= 8; s += 3) {
          const int64_t Cg = 6, Og = 7, KW = 8, C = Cg * groups, O = Og * groups, M = Og * KW;
          tdm_conv_geom g = {1, C, 1, HW, 1, (HW - 1) * s + KW, 1, KW, 1, s, 0, 0, 1, 1};
          fill(xt, C * HW, 1, false, HW), fill(wt, groups * M * Cg, 1, false, s);
          tdm_f32_conv_transpose__scalar(&g, groups, O, xt, wt, bias, ref);
          for (int variant = 0; variant < 2; variant++) {
#if !TDM_SIMD128
            if (variant == 1) continue;
#endif
            for (int64_t gi = 0; gi < groups; gi++) {
              float *yg = ytr + gi * Og * g.OW;
              for (int64_t o = 0; o < Og; o++)
                for (int64_t i = 0; i < g.OW; i++) yg[o * g.OW + i] = bias[gi * Og + o];
              for (int64_t c = 0; c < Cg; c++)
                for (int64_t p = 0; p < HW; p++) xT[p * Cg + c] = xt[(gi * Cg + c) * HW + p];
              if (variant == 0) tdm_f32_conv_dot__scalar(M, HW, Cg, wt + gi * M * Cg, xT, NULL, zt, HW);
#if TDM_SIMD128
              else tdm_f32_conv_dot__simd128(M, HW, Cg, wt + gi * M * Cg, xT, NULL, zt, HW);
#endif
              tdm_f32_col2im_add(&g, Og, zt, yg);
            }
            cases++;
            for (int64_t i = 0; i < O * g.OW; i++)
              if (!near(ytr[i], ref[i], 1e-5f, 1e-5f * (float)Cg * 4))
                bad += mismatch(F_CONV_TRANSPOSE, "conv transpose dot", HW, i, (double)s, ytr[i], ref[i]);
          }
        }
  }
  if (cases == 0) bad += mismatch(F_CONV_GEMM, "no conv dot cases", 0, 0, 0, 0, 0);
  return bad;
}

/* conv_bf16's GEMV (tdm_bf16_gemv): float32 weights rounded to bfloat16 (to nearest even, by
 * bits), packed into 2-row panels, rows of activations split into even and odd k: the scalar and
 * SIMD128 variants against a float64 sum of the widened weights' products (within float32
 * rounding of the sum of |w·x|); the SIMD128 one against the scalar one (bit for bit where its
 * multiply-adds round twice, within a rounding per product with relaxed SIMD), on R 1-5 rows, M 1-19
 * (an odd M: a half-empty last panel), every K % 8, and split into panel ranges as threads split
 * them (each row's bits those of the whole call). A NaN or ±inf weight or activation reaches
 * exactly the outputs that read it. */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (f != f) return 0x7FC0u;
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* The 16-bit integer conv GEMM (conv_i16.c): the panel quantizer's codes and
 * scales (SIMD128 against scalar bit for bit; each code within half a step of x / s, plus the
 * division's and the scale's roundings; an all-zero
 * block gives zero codes and scale), the GEMM against the float64 sum of the same integers and
 * scales (scalar within rounding; SIMD128 bit for bit with it where the steps round twice, within
 * fused_near where the relaxed build fuses them), at M over the 4-row tiles' tail, N over a
 * panel's tail, K over a block's and CONV_KC's (256) edges, and a hand-computed case. */
static int check_i16_conv_gemm(void) {
  enum { MM = 9, MN = 17, MK = 300, MK32 = 320, MP = 3 };
  static float x[MN * MK], pan[MP * MK * 8], s1[MP * MK32 / 32 * 8], s2[MP * MK32 / 32 * 8], sa[MM], bias[MM];
  static float y[MM * MN], ys[MM * MN];
  static int16_t q1[MP * MK32 * 8], q2[MP * MK32 * 8], a[MM * MK32];
  int bad = 0;
  static const int64_t ks[] = {1, 5, 31, 32, 33, 64, 100, 256, 257, 300}, ns[] = {1, 3, 8, 9, 16, 17}, ms[] = {1, 3, 4, 5, 9};
  for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
      const int64_t K = ks[ki], N = ns[ni], K32 = (K + 31) / 32 * 32, P = (N + 7) / 8;
      fill(x, N * K, 2.0f, false, (int)(K + N));
      if (K > 40) /* an all-zero block in column 0 */
        for (int64_t k = 32; k < 64 && k < K; k++) x[k * N] = 0.0f;
      memset(pan, 0, sizeof pan);
      for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) pan[((j / 8) * K + k) * 8 + j % 8] = x[k * N + j];
      for (int64_t p = 0; p < P; p++) {
        if (!tdm_i16_quantize_panel__scalar(K, pan + p * K * 8, q1 + p * K32 * 8, s1 + p * (K32 / 32) * 8))
          bad += mismatch(F_CONV_GEMM, "i16 panel quantizer: a finite panel refused", K, p, (double)N, 0, 1);
#if TDM_SIMD128
        if (!tdm_i16_quantize_panel__simd128(K, pan + p * K * 8, q2 + p * K32 * 8, s2 + p * (K32 / 32) * 8))
          bad += mismatch(F_CONV_GEMM, "i16 panel quantizer simd128: a finite panel refused", K, p, (double)N, 0, 1);
        if (memcmp(q1 + p * K32 * 8, q2 + p * K32 * 8, sizeof(int16_t) * (size_t)(K32 * 8)) ||
            memcmp(s1 + p * (K32 / 32) * 8, s2 + p * (K32 / 32) * 8, sizeof(float) * (size_t)(K32 / 32 * 8)))
          bad += mismatch(F_CONV_GEMM, "i16 panel quantizer simd128 vs scalar", K, p, (double)N, 1, 0);
#endif
      }
      for (int64_t k = 0; k < K32; k++)
        for (int64_t j = 0; j < N; j++) {
          const float sc = s1[((j / 8) * (K32 / 32) + k / 32) * 8 + j % 8];
          const float v = k < K ? x[k * N + j] : 0.0f;
          const int16_t code = q1[(j / 8) * K32 * 8 + (k / 2) * 16 + (j % 8) * 2 + k % 2];
          if (sc == 0 ? code != 0 : fabsf((float)code * sc - v) > 0.502f * sc || abs(code) > 4095)
            bad += mismatch(F_CONV_GEMM, "i16 panel code", K, k * N + j, v, (float)code * sc, v);
        }
      for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
        const int64_t M = ms[mi];
        for (int64_t i = 0; i < M; i++) {
          sa[i] = 0.001f + 0.01f * (float)(i + 1);
          bias[i] = frand();
          for (int64_t k = 0; k < K32; k++) a[i * K32 + k] = k < K ? (int16_t)((i * 131 + k * 977 + K) % 8191 - 4095) : 0;
        }
        for (int variant = 0; variant < 2; variant++) {
#if !TDM_SIMD128
          if (variant) continue;
#endif
          float *out = variant ? y : ys;
#if TDM_SIMD128
          if (variant) tdm_i16_conv_gemm__simd128(M, N, K32, a, sa, q1, s1, (mi % 2) ? NULL : bias, out, MN);
          else
#endif
            tdm_i16_conv_gemm__scalar(M, N, K32, a, sa, q1, s1, (mi % 2) ? NULL : bias, out, MN);
          for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
              double t = 0, mag = 0;
              for (int64_t b = 0; b < K32 / 32; b++) {
                int64_t isum = 0;
                for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                  isum += (int64_t)a[i * K32 + k] * q1[(j / 8) * K32 * 8 + (k / 2) * 16 + (j % 8) * 2 + k % 2];
                const double term = (double)isum * s1[((j / 8) * (K32 / 32) + b) * 8 + j % 8];
                t += term, mag += fabs(term);
              }
              const double b0 = (mi % 2) ? 0.0 : bias[i], ref = t * sa[i] + b0;
              const float got = out[i * MN + j], bound = (float)((mag * sa[i] + fabs(b0)) * (double)(K32 / 32 + 2));
              if (!near(got, (float)ref, 1e-6f, 1.2e-7f * bound))
                bad += mismatch(F_CONV_GEMM, variant ? "i16 conv gemm simd128" : "i16 conv gemm", K, i * MN + j, (double)(M * 100 + N), got,
                                (float)ref);
              if (variant && !fused_near(got, ys[i * MN + j], bound))
                bad += mismatch(F_CONV_GEMM, "i16 conv gemm simd128 vs scalar", K, i * MN + j, (double)(M * 100 + N), got, ys[i * MN + j]);
            }
        }
      }
    }
  { /* by hand: one block, column 0 all 0.5 (scale 0.5 / 4095, codes 4095), weights all 2 with row
     * scale 0.25: t = 32·2·4095 · (0.5 / 4095) = 32 (to a rounding of the scale), y = 32·0.25 + 1 = 9 */
    float p1[32 * 8] = {0}, sc[8];
    static int16_t qq[32 * 8], w[32];
    for (int k = 0; k < 32; k++) p1[k * 8] = 0.5f, w[k] = 2;
    tdm_i16_quantize_panel(32, p1, qq, sc);
    const float r = 0.25f, b1 = 1.0f;
    float out[1];
    tdm_i16_conv_gemm(1, 1, 32, w, &r, qq, sc, &b1, out, 1);
    if (qq[0] != 4095 || qq[1] != 4095 || qq[2] != 0 || sc[1] != 0.0f || !near(out[0], 9.0f, 1e-6f, 0))
      bad += mismatch(F_CONV_GEMM, "i16 conv gemm by hand", 32, 0, qq[0], out[0], 9.0f);
    /* a NaN or ±inf anywhere in the panel (the last column's last k too): refused by both variants */
    for (int sp = 0; sp < 3; sp++) {
      const int at = sp == 0 ? 0 : sp == 1 ? 8 * 17 + 3 : 32 * 8 - 1;
      p1[at] = sp == 1 ? -INFINITY : sp == 2 ? INFINITY : NAN;
      if (tdm_i16_quantize_panel__scalar(32, p1, qq, sc)) bad += mismatch(F_CONV_GEMM, "i16 panel non-finite kept", 32, at, 0, 1, 0);
#if TDM_SIMD128
      if (tdm_i16_quantize_panel__simd128(32, p1, qq, sc))
        bad += mismatch(F_CONV_GEMM, "i16 panel non-finite kept simd128", 32, at, 0, 1, 0);
#endif
      p1[at] = 0.5f;
    }
  }
  return bad;
}

static int check_bf16_gemv(void) {
  enum { MM = 19, MK = 41, MR = 5 };
  static float wf[MM * MK], a[MR * MK], eo[MR * 48], y[MR * MM], y2[MR * MM], ys[MR * MM];
  static uint16_t w[10 * 6 * 16];
  int bad = 0;
  { /* rounding: ties to even, a carry into the exponent, NaN stays NaN */
    static const uint32_t in[] = {0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F807FFFu, 0xBF818000u, 0x3F7F8000u, 0x7FFFFFFFu};
    static const uint16_t out[] = {0x3F80u, 0x3F82u, 0x3F81u, 0x3F80u, 0xBF82u, 0x3F80u, 0x7FC0u};
    for (int i = 0; i < 7; i++) {
      float f;
      memcpy(&f, &in[i], 4);
      if (to_bf16(f) != out[i]) bad += mismatch(F_CONV_GEMM, "bfloat16 rounding", 7, i, f, to_bf16(f), out[i]);
    }
    if (tdm_bf16_to_f32(0x3F82u) != 1.015625f || tdm_bf16_to_f32(0xBF80u) != -1.0f)
      bad += mismatch(F_CONV_GEMM, "bfloat16 widening", 1, 0, 0, tdm_bf16_to_f32(0x3F82u), 1.015625f);
  }
  for (int special = 0; special <= 1; special++)
    for (int64_t K = 1; K <= MK; K += (K < 17 ? 1 : 8))
      for (int64_t M = 1; M <= MM; M += (M < 6 ? 1 : 4))
        for (int64_t R = 1; R <= MR; R++) {
          const int64_t K8 = (K + 7) / 8, P = (M + 1) / 2;
          fill(wf, M * K, 1, false, (int)(K + M)), fill(a, R * K, 1, false, (int)(K + R));
          if (special) wf[(K * 7) % (M * K)] = NAN, a[(R * K) / 2] = INFINITY;
          memset(w, 0, sizeof w);
          for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++) w[((i / 2) * K8 + k / 8) * 16 + (i % 2) * 8 + k % 8] = to_bf16(wf[i * K + k]);
          for (int64_t r = 0; r < R; r++)
            for (int64_t b = 0; b < K8; b++)
              for (int l = 0; l < 8; l++) {
                const int64_t k = 8 * b + (l < 4 ? 2 * l : 2 * (l - 4) + 1);
                eo[(r * K8 + b) * 8 + l] = k < K ? a[r * K + k] : 0.0f;
              }
          for (int variant = 0; variant < 2; variant++) {
#if !TDM_SIMD128
            if (variant) continue;
#endif
            float *out = variant ? y : ys;
#if TDM_SIMD128
            if (variant) tdm_bf16_gemv__simd128(R, M, K8, eo, w, 0, P, out, MM);
            else
#endif
              tdm_bf16_gemv__scalar(R, M, K8, eo, w, 0, P, out, MM);
            for (int64_t r = 0; r < R; r++)
              for (int64_t i = 0; i < M; i++) {
                double ref = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) {
                  const double p = (double)tdm_bf16_to_f32(w[((i / 2) * K8 + k / 8) * 16 + (i % 2) * 8 + k % 8]) * a[r * K + k];
                  ref += p, mag += fabs(p);
                }
                const float got = out[r * MM + i];
                if (!near(got, (float)ref, 1e-6f, 2e-7f * (float)mag * (float)K))
                  bad += mismatch(F_CONV_GEMM, variant ? "bf16 gemv simd128" : "bf16 gemv", K, r * MM + i, (double)(R * 100 + M), got,
                                  (float)ref);
                if (variant) {
                  float mg = 0;
                  for (int64_t k = 0; k < K; k++)
                    mg += fabsf(tdm_bf16_to_f32(w[((i / 2) * K8 + k / 8) * 16 + (i % 2) * 8 + k % 8]) * a[r * K + k]);
                  if (!fused_near(got, ys[r * MM + i], mg))
                    bad += mismatch(F_CONV_GEMM, "bf16 gemv simd128 vs scalar", K, r * MM + i, (double)(R * 100 + M), got, ys[r * MM + i]);
                }
              }
#if TDM_SIMD128
            if (variant) /* split into panel ranges at every panel, as threads split them */
              for (int64_t cut = 1; cut < P; cut++) {
                tdm_bf16_gemv__simd128(R, M, K8, eo, w, 0, cut, y2, MM);
                tdm_bf16_gemv__simd128(R, M, K8, eo, w, cut, P, y2, MM);
                for (int64_t r = 0; r < R; r++)
                  for (int64_t i = 0; i < M; i++)
                    if (!same(y2[r * MM + i], y[r * MM + i]))
                      bad += mismatch(F_CONV_GEMM, "bf16 gemv split", K, r * MM + i, (double)cut, y2[r * MM + i], y[r * MM + i]);
              }
#endif
          }
        }
  return bad;
}

/* The runtime's transposed convolution (x packed, the conv GEMM into z, then col2im) against the reference scatter:
 * 1-d and 2-d, strides 1 to 3, padding, dilation, output padding, groups. */
static int check_conv_transpose(void) {
  enum { MAXX = 4 * 5 * 9, MAXW = 4 * 6 * 9, MAXY = 6 * 20 * 40 };
  static float x[MAXX], wt[MAXW], bias[6], y[MAXY], ref[MAXY], z[6 * 9 * 5 * 9], xp[2 * 48];
  int bad = 0;
  fill(bias, 6, 1, false, 2);
  for (int r = 1; r <= 2; r++)
    for (int groups = 1; groups <= 2; groups++)
      for (int K = 1; K <= 4; K++)
        for (int s = 1; s <= 3; s++)
          for (int d = 1; d <= 2; d++)
            for (int pad = 0; pad <= 1; pad++)
              for (int opad = 0; opad < s || opad < d; opad++) {
                const int64_t Cg = 2, Og = 3, C = Cg * groups, O = Og * groups, H = r == 2 ? 5 : 1, W = 9;
                const int64_t KH = r == 2 ? (K + 1) / 2 + 1 : 1;
                tdm_conv_geom g = {1, C, H, W, 0, 0, KH, K, r == 2 ? s : 1, s, r == 2 ? pad : 0, pad, r == 2 ? d : 1, d};
                g.OH = (H - 1) * g.sh - 2 * g.ph + g.dh * (KH - 1) + (r == 2 ? opad : 0) + 1;
                g.OW = (W - 1) * s - 2 * pad + d * (K - 1) + opad + 1;
                if (g.OH < 1 || g.OW < 1) continue;
                const int64_t M = Og * KH * K, HW = H * W, OHW = g.OH * g.OW;
                fill(x, C * HW, 2, false, (int)(K + s));
                fill(wt, groups * M * Cg, 1, false, (int)d);
                const float *b = (K + pad) % 2 ? bias : NULL;
                tdm_f32_conv_transpose__scalar(&g, groups, O, x, wt, b, ref);
                for (int variant = 0; variant < 2; variant++) {
#if !TDM_SIMD128
                  if (variant == 1) continue;
#endif
                  for (int64_t gi = 0; gi < groups; gi++) {
                    float *yg = y + gi * Og * OHW;
                    for (int64_t o = 0; o < Og; o++)
                      for (int64_t i = 0; i < OHW; i++) yg[o * OHW + i] = b ? b[gi * Og + o] : 0.0f;
                    tdm_f32_pack_panels(Cg, HW, x + gi * Cg * HW, xp);
                    if (variant == 0) tdm_f32_conv_gemm__scalar(M, HW, Cg, wt + gi * M * Cg, xp, NULL, z, HW);
#if TDM_SIMD128
                    else tdm_f32_conv_gemm_4x8__simd128(M, HW, Cg, wt + gi * M * Cg, xp, NULL, z, HW);
#endif
                    tdm_f32_col2im_add(&g, Og, z, yg);
                  }
                  for (int64_t i = 0; i < O * OHW; i++)
                    if (!near(y[i], ref[i], 1e-5f, 1e-5f * 16))
                      bad += mismatch(F_CONV_TRANSPOSE, "conv_transpose", OHW, i, 0, y[i], ref[i]);
                }
              }
  /* col2im by output phase (1-d, no padding or dilation) against the bias then tdm_f32_col2im_add:
   * the same bits, strides 1 to 9, kernels 1 to 17 (shorter and longer than the stride), 1 to 13
   * inputs (every tail of the 4-wide blocks), output padding, with and without bias */
  {
    static float zc[3 * 17 * 13], yr[3 * 140], yp[3 * 140], bc[3];
    fill(bc, 3, 1, false, 13);
    for (int64_t s = 1; s <= 9; s++)
      for (int64_t K = 1; K <= 17; K += (K < 4 ? 1 : 3))
        for (int64_t W = 1; W <= 13; W++)
          for (int64_t op = 0; op <= 1 && op < s; op++) {
            const int64_t Og = 1 + (s + K) % 3, OW = (W - 1) * s + K + op;
            tdm_conv_geom g = {1, 1, 1, W, 1, OW, 1, K, 1, s, 0, 0, 1, 1};
            const float *b = (W + s) % 2 ? bc : NULL;
            fill(zc, Og * K * W, 1, false, (int)(s * 100 + K * 10 + W));
            for (int64_t o = 0; o < Og; o++)
              for (int64_t t = 0; t < OW; t++) yr[o * OW + t] = b ? b[o] : 0.0f;
            tdm_f32_col2im_add(&g, Og, zc, yr);
            for (int variant = 0; variant < 2; variant++) {
#if !TDM_SIMD128
              if (variant == 1) continue;
#endif
              for (int64_t i = 0; i < Og * OW; i++) yp[i] = NAN;
              if (variant == 0) tdm_f32_col2im_phases__scalar(&g, Og, zc, b, yp);
#if TDM_SIMD128
              else tdm_f32_col2im_phases__simd128(&g, Og, zc, b, yp);
#endif
              for (int64_t i = 0; i < Og * OW; i++)
                if (!same(yp[i], yr[i]))
                  bad += mismatch(F_CONV_TRANSPOSE, variant ? "col2im phases simd128" : "col2im phases", OW, i, (double)(s * 100 + K),
                                  yp[i], yr[i]);
            }
          }
  }
  return bad;
}

int tdm_kernel_selftest_family(int family) { return family >= 0 && family < F_COUNT ? bad_by_family[family] : -1; }
/* Field k (0 n, 1 index, 2 input, 3 kernel's value, 4 reference) of the family's first mismatch. */
double tdm_kernel_selftest_first(int family, int k) {
  return family >= 0 && family < F_COUNT && k >= 0 && k < 5 ? first_bad[family][k] : 0;
}

int tdm_kernel_selftest(void) {
  memset(bad_by_family, 0, sizeof bad_by_family);
  memset(first_bad, 0, sizeof first_bad);
  int bad = 0;
#if TDM_SIMD128
  bad += check_binary() + check_unary_exact() + check_exp() + check_exp_family() + check_erf() + check_softmax() + check_sum() +
      check_norms() + check_attention() + check_conv() + check_conv_padded() + check_pool();
#endif
  bad += check_conv_gemm() + check_conv1d_gemm_no_im2col() + check_conv_wino() + check_elu() + check_conv_dot() + check_bf16_gemv() +
      check_i16_conv_gemm() + check_conv_transpose() + check_attention_rows() + check_row_forms() + check_planes();
  const int64_t ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 13}, ns[] = {1, 3, 7, 8, 9, 15, 16, 17, 29, 33, 50, 65}, ks[] = {1, 2, 3, 4, 5, 8, 17, 64};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
    for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
      for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) bad += check_gemm(ms[i], ns[j], ks[k]);
  bad += check_gemm(64, 256, 128);
  /* the partial last panel of gemm_rows: copied to a zero-padded stack panel up to K = 1024, past
   * that loaded with zero padding per step (N = 49: a 1×1 convolution on a 7×7 map) */
  bad += check_gemm(9, 49, 576) + check_gemm(6, 1, 1024) + check_gemm(5, 13, 1025);
  /* the AVX2 kernels' K blocks (512) and the rows kernel's tail blocks; the GEMV's 32-column groups */
  bad += check_gemm(7, 37, 1100) + check_gemm(13, 29, 513) + check_gemm(1, 200, 1100) + check_gemm(1, 257, 77);
  bad += check_gemm(17, 96, 300) + check_gemm(9, 71, 600) + check_gemm(64, 64, 33); /* AVX-512: 8-row tiles, K blocks of 256, N % 32 */
  /* the SIMD128 packed tiles' blocks of 512 steps x 256 columns (gemm.c): K and N ending on a block
   * edge, and past it by a step / a panel / a partial panel */
  bad += check_gemm(6, 256, 512) + check_gemm(9, 264, 513) + check_gemm(5, 300, 1030);
  /* the few-row kernel's tiles of nearly equal height (16: 4 x 4; 11: 4 + 4 + 3), its K blocks, the
   * early reads of a next panel that is partial, up to TDM_GEMM_FEW_MAX rows and one past it */
  bad += check_gemm(16, 37, 1030) + check_gemm(11, 9, 513) + check_gemm(23, 65, 17) + check_gemm(40, 17, 600) + check_gemm(41, 24, 64);
#if TDM_X86_AVX2
  REPORT("kernel_selftest: AVX2+FMA variants %s, AVX-512 %s\n",
         tdm_cpu_avx2_fma() ? "checked" : "skipped (this CPU lacks AVX2 or FMA, or TANDEM_NATIVE_ISA=simd128)",
         tdm_cpu_avx512() ? "checked" : "skipped");
#endif
  /* quantized: every N % 8 and N % 32 (the GEMV's 4- and 2-panel paths), K % 4, K % G and K < G */
  const int64_t qm[] = {1, 2, 3, 4, 5, 9}, qn[] = {1, 7, 8, 9, 15, 16, 17, 24, 25, 31, 33, 40, 65},
                qk[] = {0, 1, 2, 3, 4, 5, 7, 8, 17, 31, 32, 33, 34, 63, 64, 65, 100}, qg[] = {2, 6, 8, 32};
  for (size_t i = 0; i < sizeof qm / sizeof qm[0]; i++)
    for (size_t j = 0; j < sizeof qn / sizeof qn[0]; j++)
      for (size_t k = 0; k < sizeof qk / sizeof qk[0]; k++)
        for (size_t g = 0; g < sizeof qg / sizeof qg[0]; g++) bad += check_quant(qm[i], qn[j], qk[k], qg[g]);
  bad += check_quant(1, 1536, 576, 32) + check_quant(7, 96, 576, 32);
  /* the integer-dot GEMV: K odd, K % 32 (partial last block), N % 32 and N % 8 */
  const int64_t dn[] = {1, 7, 8, 9, 15, 16, 17, 24, 25, 31, 32, 33, 40, 65}, dk[] = {1, 2, 3, 4, 31, 32, 33, 63, 64, 65, 97, 128, 129, 577};
  for (size_t j = 0; j < sizeof dn / sizeof dn[0]; j++)
    for (size_t k = 0; k < sizeof dk / sizeof dk[0]; k++) bad += check_q8_dot(dn[j], dk[k]);
  bad += check_q8_dot(1536, 576) + check_q8_dot(576, 1536);
  bad += check_q8_dot(57, 64) + check_q8_dot(1000, 130); /* four column runs of 8 and 248, then 25 and 8 left */
  const int64_t qk8[] = {1, 2, 3, 4, 5, 7, 31, 32, 33, 35, 63, 64, 100, 191, 192, 193, 576, 1537};
  for (size_t k = 0; k < sizeof qk8 / sizeof qk8[0]; k++) bad += check_q8_quantize(qk8[k]);
  for (size_t k = 0; k < sizeof qk8 / sizeof qk8[0]; k++)
    bad += check_q4_quantize(qk8[k], 16) + check_q4_quantize(qk8[k], 6) + check_q4_quantize(qk8[k], 32);
  /* the walk's tails: 8 left (one panel), 4 left (a partial panel), odd K over the four runs, the k / v shape */
  bad += check_q8_dot(72, 34) + check_q8_dot(100, 576) + check_q8_dot(1000, 129) + check_q8_dot(192, 576) + check_q8_dot(129, 1537);
  /* the same over 1 to 4 rows: K odd, K % 32, N % 16 and N % 8 (the two- and one-panel tiles) */
  const int64_t rn[] = {1, 7, 8, 9, 16, 17, 24, 33}, rk[] = {1, 2, 3, 31, 32, 33, 64, 65, 129};
  for (int64_t m = 1; m <= TDM_Q8_DOT_MAX_ROWS; m++)
    for (size_t j = 0; j < sizeof rn / sizeof rn[0]; j++)
      for (size_t k = 0; k < sizeof rk / sizeof rk[0]; k++) bad += check_q8_rows(m, rn[j], rk[k]);
  bad += check_q8_rows(2, 1536, 512) + check_q8_rows(4, 512, 2048) + check_q8_rows(3, 72, 577);
  bad += check_q8_rows(2, 1000, 96) + check_q8_rows(1, 40, 64); /* two column runs of 496 and 16, then 8 left */
  /* the paired layout's half tiles (two rows: four runs of columns, three or four rows: two runs), then the
   * panels left: Mimi's and pocket-tts' shapes, N % 32 and N % 16 left over, K % 32 != 0, and up to 16 rows */
  bad += check_q8_rows(2, 2048, 512) + check_q8_rows(3, 1000, 66) + check_q8_rows(4, 1000, 66) + check_q8_rows(2, 56, 34);
  for (int64_t m = 1; m <= 16; m++) bad += check_q8_rows(m, 41, 64) + check_q8_rows(m, 512, 2048 - 32 * (m % 2));
  /* conv_q8's int16 rows through the same kernels (Mimi's shapes: K = 8192 at 2 rows, 16 rows in two runs) */
  for (int64_t m = 1; m <= TDM_Q8_DOT_MAX_ROWS; m += 3)
    for (size_t j = 0; j < sizeof rn / sizeof rn[0]; j++)
      for (size_t k = 0; k < sizeof rk / sizeof rk[0]; k++) bad += check_conv_q8_rows(m, rn[j], rk[k]);
  bad += check_conv_q8_rows(2, 64, 8192) + check_conv_q8_rows(8, 40, 3072);
  /* the int4 integer-dot GEMV: K odd, K % 8 (a partial block), K % 32 (the relaxed 16-bit flush), K % G, K < G, N % 16 and N % 8 */
  const int64_t en[] = {1, 7, 8, 9, 15, 16, 17, 24, 33, 40, 57}, ek[] = {1, 2, 3, 5, 15, 16, 17, 31, 32, 33, 63, 64, 65, 97, 130},
                eg[] = {16, 24, 32, 64};
  for (size_t j = 0; j < sizeof en / sizeof en[0]; j++)
    for (size_t k = 0; k < sizeof ek / sizeof ek[0]; k++)
      for (size_t g = 0; g < sizeof eg / sizeof eg[0]; g++) bad += check_q4_dot(en[j], ek[k], eg[g]);
  bad += check_q4_dot(1536, 576, 32) + check_q4_dot(576, 1536, 32);
  bad += check_q4_dot(72, 96, 32) + check_q4_dot(1000, 64, 32);      /* two column runs of 32 and 496, then 8 left */
  bad += check_q4_dot(40, 2053, 64) + check_q4_dot(17, 2101, 128);   /* K past one 2048-k chunk */
  bad += check_q4_dot(16, 8192, 8192) + check_q4_dot(9, 6001, 4096); /* groups of many chunks at the largest sums */
  bad += check_q4_dot(24, 4100, 2048);                               /* the largest group summed in one pass */
  /* the same over 1 to 4 rows: K odd, K % 8, K % 32, K % G, N % 16 and N % 8 */
  const int64_t fn[] = {1, 6, 8, 9, 13, 16, 17, 33}, fk[] = {1, 3, 5, 16, 17, 33, 64, 65, 130}, fg[] = {16, 24, 32};
  for (int64_t m = 1; m <= TDM_Q8_DOT_MAX_ROWS; m++)
    for (size_t j = 0; j < sizeof fn / sizeof fn[0]; j++)
      for (size_t k = 0; k < sizeof fk / sizeof fk[0]; k++)
        for (size_t g = 0; g < sizeof fg / sizeof fg[0]; g++) bad += check_q4_rows(m, fn[j], fk[k], fg[g]);
  bad += check_q4_rows(2, 1536, 512, 32) + check_q4_rows(4, 512, 2047, 32);
  return bad;
}

#if !defined(__wasm__)
int main(void) {
  int bad = tdm_kernel_selftest();
  printf("kernel_selftest: %d mismatches\n", bad);
  return bad != 0;
}
#endif
