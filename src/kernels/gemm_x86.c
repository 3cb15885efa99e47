/* gemm_x86.c — AVX2+FMA variants of the float GEMM/GEMV hot loops for native x86-64 builds (see
 * gemm.h), compiled with the target attribute so the rest of the library stays baseline x86-64:
 * src/kernels/config.c calls them only on a CPU that has AVX2 and FMA. One __m256 holds a whole
 * 8-column panel (TDM_PANEL), so a register tile is 6 rows x 16 columns (12 accumulators, two B
 * vectors and a broadcast: 15 of the 16 ymm registers). Every output value is one fused
 * multiply-add chain over k in order, starting at 0 (or the bias), whatever tile, panel group or
 * thread part it falls in, so results do not depend on M, on the tile or on the thread count; they
 * differ from the unfused SIMD128/scalar kernels by at most one rounding per product (the relaxed
 * wasm build's rule, docs/ops.md), checked in tests/c/kernel_selftest.c. */
#include "gemm.h"
#include "variants.h"

#if TDM_X86_AVX2

#include <immintrin.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2,fma")))

/* n < 8 lanes of v at y (the tail columns of the last, partial panel). */
static inline AVX2 void store_part(float *y, __m256 v, int64_t n) {
  float t[8];
  _mm256_storeu_ps(t, v);
  memcpy(y, t, (size_t)n * sizeof(float));
}
static inline AVX2 void store_n(float *y, __m256 v, int64_t n) {
  if (n >= 8) _mm256_storeu_ps(y, v);
  else if (n > 0) store_part(y, v, n);
}
/* The first min(n, 8) floats at p, zeros after. */
static inline AVX2 __m256 load_n(const float *p, int64_t n) {
  if (n >= 8) return _mm256_loadu_ps(p);
  float t[8] = {0};
  memcpy(t, p, (size_t)n * sizeof(float));
  return _mm256_loadu_ps(t);
}

/* Rows i..i+R-1 of a (row stride lda) against two panels at p0 and p1 = p0 + PSTEP (P = 2) or
 * one (P = 1); B's rows are BSTEP floats apart (8 in a packed panel, N in a row-major b). The
 * accumulators start at bias[i + r] or 0; y's rows are ldy apart, n columns of the two panels
 * valid (the rest not stored). LOADB loads b0 (and b1) from pb. */
#define AVX_ROW(R, P, r) \
  if (R > r) { \
    x = _mm256_broadcast_ss(a##r); \
    c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0); \
    if (P > 1) c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1); \
  }
#define AVX_INIT(R, P, r) \
  __m256 c##r##0 = _mm256_setzero_ps(), c##r##1 = c##r##0; \
  if (R > r) { \
    if (k0 > 0) { \
      c##r##0 = load_n(y + (i + r) * ldy + j, n); \
      if (P > 1) c##r##1 = load_n(y + (i + r) * ldy + j + 8, n - 8); \
    } else if (bias) { \
      c##r##0 = c##r##1 = _mm256_set1_ps(bias[i + r]); \
    } \
  }
#define AVX_STORE(R, P, r) \
  if (R > r) { \
    store_n(y + (i + r) * ldy + j, c##r##0, n); \
    if (P > 1) store_n(y + (i + r) * ldy + j + 8, c##r##1, n - 8); \
  }
/* The rows of macro calls below read as a table, which clang-format cannot settle on. */
/* clang-format off */
#define AVX_TILE(R, P, LOADB, BSTEP) \
  do { \
    AVX_INIT(R, P, 0) AVX_INIT(R, P, 1) AVX_INIT(R, P, 2) AVX_INIT(R, P, 3) AVX_INIT(R, P, 4) AVX_INIT(R, P, 5) \
    const float *a0 = a + i * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda, *a4 = a3 + lda, *a5 = a4 + lda; \
    const float *pb = p0; \
    for (size_t kk = (size_t)K; kk > 0; kk--, a0++, a1++, a2++, a3++, a4++, a5++, pb += (BSTEP)) { \
      __m256 b0, b1, x; \
      LOADB; \
      (void)b1; \
      AVX_ROW(R, P, 0) AVX_ROW(R, P, 1) AVX_ROW(R, P, 2) AVX_ROW(R, P, 3) AVX_ROW(R, P, 4) AVX_ROW(R, P, 5) \
    } \
    AVX_STORE(R, P, 0) AVX_STORE(R, P, 1) AVX_STORE(R, P, 2) AVX_STORE(R, P, 3) AVX_STORE(R, P, 4) AVX_STORE(R, P, 5) \
  } while (0)
/* clang-format on */
/* Every row of a for the panels at p0 (P of them): 6 rows at a time, then the last M % 6 in one
 * tile (each row's chain is the same in any tile). */
#define AVX_ROWS(P, LOADB, BSTEP) \
  do { \
    int64_t i = 0; \
    for (; i + 6 <= M; i += 6) AVX_TILE(6, P, LOADB, BSTEP); \
    switch (M - i) { \
      case 5: AVX_TILE(5, P, LOADB, BSTEP); break; \
      case 4: AVX_TILE(4, P, LOADB, BSTEP); break; \
      case 3: AVX_TILE(3, P, LOADB, BSTEP); break; \
      case 2: AVX_TILE(2, P, LOADB, BSTEP); break; \
      case 1: AVX_TILE(1, P, LOADB, BSTEP); break; \
    } \
  } while (0)

#define LOAD_PACKED2 (b0 = _mm256_load_ps_u(pb), b1 = _mm256_load_ps_u(pb + PSTEP))
#define LOAD_PACKED1 (b0 = _mm256_load_ps_u(pb))
/* unaligned loads: the program's buffers are 16-byte aligned, not always 32 */
#define _mm256_load_ps_u(p) _mm256_loadu_ps(p)

/* y[i·ldy + j] = bias[i] (or 0) + a[i, :] · column j of the packed panels, K in blocks of KC so a
 * panel pair's block (KC x 16 floats, 32 KiB) stays in L1 while every row tile walks it; the
 * accumulators of a later block start from what the earlier one stored (the same chain: a float
 * stored and loaded again is the same float). */
#define KC 512
static AVX2 void packed_tiles(int64_t M, int64_t N, int64_t K0, const float *a0_, int64_t lda, const float *bp, const float *bias, float *y,
                              int64_t ldy) {
  for (int64_t k0 = 0; k0 < K0; k0 += KC) {
    const int64_t K = K0 - k0 < KC ? K0 - k0 : KC;
    const float *a = a0_ + k0;
    for (int64_t j = 0; j < N; j += 16) {
      const float *p0 = bp + (j / 8) * K0 * 8 + k0 * 8;
      const int64_t PSTEP = K0 * 8, n = N - j;
      if (n > 8) AVX_ROWS(2, LOAD_PACKED2, 8);
      else AVX_ROWS(1, LOAD_PACKED1, 8);
    }
  }
}

AVX2 void tdm_f32_gemm_packed_tiles__avx2(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y) {
  packed_tiles(M, N, K, a, K, bp, NULL, y, N);
}

AVX2 void tdm_f32_conv_gemm__avx2(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y,
                                  int64_t ldy) {
  packed_tiles(M, N, K, a, K, bp, bias, y, ldy);
}

/* M = 1: four panels (32 columns) at a time, one at a time after; every panel as two chains, k in
 * [0, K/2) and [K/2, K) (eight weight streams in flight over four panels, as in the SIMD128 GEMV),
 * added at the end: a column's value is the same in either loop. */
static AVX2 void gemv_packed(int64_t N, int64_t K, const float *a, const float *bp, float *y) {
  const int64_t half = K / 2, rest = K - half;
  int64_t j = 0;
  for (; j + 24 < N; j += 32) {
    const float *p = bp + (j / 8) * K * 8, *q = p + half * 8;
    const int64_t S = K * 8;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, t0 = s0, t1 = s0, t2 = s0, t3 = s0;
    for (int64_t k = 0; k < half; k++, p += 8, q += 8) {
      const __m256 x = _mm256_broadcast_ss(a + k), z = _mm256_broadcast_ss(a + half + k);
      s0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(p), s0);
      t0 = _mm256_fmadd_ps(z, _mm256_loadu_ps(q), t0);
      s1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(p + S), s1);
      t1 = _mm256_fmadd_ps(z, _mm256_loadu_ps(q + S), t1);
      s2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(p + 2 * S), s2);
      t2 = _mm256_fmadd_ps(z, _mm256_loadu_ps(q + 2 * S), t2);
      s3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(p + 3 * S), s3);
      t3 = _mm256_fmadd_ps(z, _mm256_loadu_ps(q + 3 * S), t3);
    }
    if (rest > half) { /* odd K: the last k, in the second chain */
      const __m256 z = _mm256_broadcast_ss(a + K - 1);
      t0 = _mm256_fmadd_ps(z, _mm256_loadu_ps(q), t0);
      t1 = _mm256_fmadd_ps(z, _mm256_loadu_ps(q + S), t1);
      t2 = _mm256_fmadd_ps(z, _mm256_loadu_ps(q + 2 * S), t2);
      t3 = _mm256_fmadd_ps(z, _mm256_loadu_ps(q + 3 * S), t3);
    }
    _mm256_storeu_ps(y + j, _mm256_add_ps(s0, t0));
    _mm256_storeu_ps(y + j + 8, _mm256_add_ps(s1, t1));
    _mm256_storeu_ps(y + j + 16, _mm256_add_ps(s2, t2));
    store_n(y + j + 24, _mm256_add_ps(s3, t3), N - j - 24);
  }
  for (; j < N; j += 8) {
    const float *p = bp + (j / 8) * K * 8, *q = p + half * 8;
    __m256 s = _mm256_setzero_ps(), t = s;
    for (int64_t k = 0; k < half; k++, p += 8, q += 8) {
      s = _mm256_fmadd_ps(_mm256_broadcast_ss(a + k), _mm256_loadu_ps(p), s);
      t = _mm256_fmadd_ps(_mm256_broadcast_ss(a + half + k), _mm256_loadu_ps(q), t);
    }
    if (rest > half) t = _mm256_fmadd_ps(_mm256_broadcast_ss(a + K - 1), _mm256_loadu_ps(q), t);
    store_n(y + j, _mm256_add_ps(s, t), N - j);
  }
}

AVX2 void tdm_f32_gemm_packed__avx2(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y) {
  if (M == 1) gemv_packed(N, K, a, bp, y);
  else packed_tiles(M, N, K, a, K, bp, NULL, y, N);
}

/* b row-major [K, N]: 16 columns at a time straight from b's rows (stride N), then 8, then the
 * last N % 8 through a zero-padded copy of those columns (at most 8·K floats, in blocks of
 * TAIL_K rows so it fits on the stack; a block after the first continues the stored chain). */
#define TAIL_K 512
AVX2 void tdm_f32_gemm_rows__avx2(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y) {
  const float *bias = NULL;
  const int64_t lda = K, ldy = N, k0 = 0;
  int64_t j = 0;
  for (; j + 16 <= N; j += 16) {
    const float *p0 = b + j;
    const int64_t PSTEP = 8, n = 16;
    AVX_ROWS(2, LOAD_PACKED2, N);
  }
  for (; j + 8 <= N; j += 8) {
    const float *p0 = b + j;
    const int64_t n = 8;
    AVX_ROWS(1, LOAD_PACKED1, N);
  }
  if (j < N) {
    float tail[TAIL_K * 8];
    const int64_t n = N - j;
    for (int64_t kb = 0; kb < K; kb += TAIL_K) {
      const int64_t kc = K - kb < TAIL_K ? K - kb : TAIL_K;
      for (int64_t k = 0; k < kc; k++)
        for (int64_t t = 0; t < 8; t++) tail[k * 8 + t] = t < n ? b[(kb + k) * N + j + t] : 0.0f;
      for (int64_t i = 0; i < M; i++) {
        __m256 c = _mm256_setzero_ps();
        if (kb > 0) c = load_n(y + i * N + j, n);
        const float *pa = a + i * K + kb;
        for (int64_t k = 0; k < kc; k++) c = _mm256_fmadd_ps(_mm256_broadcast_ss(pa + k), _mm256_loadu_ps(tail + k * 8), c);
        store_part(y + i * N + j, c, n);
      }
    }
  }
  (void)bias, (void)lda, (void)ldy, (void)k0;
}

/* ---- AVX-512F: the same chains, 32 columns (four panels) per tile -------------------------------
 * Two zmm hold four panels' 8 columns each (two 8-column halves put together from two loads), so
 * a tile of up to 8 rows x 32 columns keeps 16 accumulators (of 32 registers) and starts 16 fused
 * multiply-adds per k for 4 loads and 2 inserts. Every value is the same fused chain as in the
 * AVX2 kernel (k in order from 0 or the bias; K blocks continue from the stored sums), so the two
 * give the same bits and the last N % 32 columns run the AVX2 kernel. */
#define AVX512 __attribute__((target("avx512f,avx2,fma")))

static inline AVX512 __m512 load16(const float *lo, const float *hi) {
  const __m512d l = _mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(lo)));
  return _mm512_castpd_ps(_mm512_insertf64x4(l, _mm256_castps_pd(_mm256_loadu_ps(hi)), 1));
}

#define Z_INIT(R, r) \
  __m512 z##r##0 = _mm512_setzero_ps(), z##r##1 = z##r##0; \
  if (R > r) { \
    if (k0 > 0) { \
      z##r##0 = _mm512_loadu_ps(y + (i + r) * ldy + j); \
      z##r##1 = _mm512_loadu_ps(y + (i + r) * ldy + j + 16); \
    } else if (bias) { \
      z##r##0 = z##r##1 = _mm512_set1_ps(bias[i + r]); \
    } \
  }
#define Z_ROW(R, r) \
  if (R > r) { \
    const __m512 x = _mm512_set1_ps(a[(i + r) * lda + k]); \
    z##r##0 = _mm512_fmadd_ps(x, b0, z##r##0); \
    z##r##1 = _mm512_fmadd_ps(x, b1, z##r##1); \
  }
#define Z_STORE(R, r) \
  if (R > r) { \
    _mm512_storeu_ps(y + (i + r) * ldy + j, z##r##0); \
    _mm512_storeu_ps(y + (i + r) * ldy + j + 16, z##r##1); \
  }
#define Z_TILE(R) \
  do { \
    Z_INIT(R, 0) Z_INIT(R, 1) Z_INIT(R, 2) Z_INIT(R, 3) Z_INIT(R, 4) Z_INIT(R, 5) Z_INIT(R, 6) Z_INIT(R, 7) const float *pb = p0; \
    for (int64_t k = 0; k < K; k++, pb += 8) { \
      const __m512 b0 = load16(pb, pb + S), b1 = load16(pb + 2 * S, pb + 3 * S); \
      Z_ROW(R, 0) Z_ROW(R, 1) Z_ROW(R, 2) Z_ROW(R, 3) Z_ROW(R, 4) Z_ROW(R, 5) Z_ROW(R, 6) Z_ROW(R, 7) \
    } \
    Z_STORE(R, 0) Z_STORE(R, 1) Z_STORE(R, 2) Z_STORE(R, 3) Z_STORE(R, 4) Z_STORE(R, 5) Z_STORE(R, 6) Z_STORE(R, 7) \
  } while (0)

#define KC512 256 /* four panels' block: 32 KiB, in L1 while every row tile walks it */
static AVX512 void packed_tiles_512(int64_t M, int64_t N32, int64_t K0, const float *a0_, int64_t lda, const float *bp, const float *bias,
                                    float *y, int64_t ldy) {
  const int64_t S = K0 * 8;
  for (int64_t k0 = 0; k0 < K0; k0 += KC512) {
    const int64_t K = K0 - k0 < KC512 ? K0 - k0 : KC512;
    const float *a = a0_ + k0;
    for (int64_t j = 0; j < N32; j += 32) {
      const float *p0 = bp + (j / 8) * S + k0 * 8;
      int64_t i = 0;
      for (; i + 8 <= M; i += 8) Z_TILE(8);
      switch (M - i) {
        case 7: Z_TILE(7); break;
        case 6: Z_TILE(6); break;
        case 5: Z_TILE(5); break;
        case 4: Z_TILE(4); break;
        case 3: Z_TILE(3); break;
        case 2: Z_TILE(2); break;
        case 1: Z_TILE(1); break;
      }
    }
  }
}

/* The whole columns in groups of 32 by the AVX-512 kernel, the rest by the AVX2 one. */
static AVX512 void packed_tiles_avx512(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y,
                                       int64_t ldy) {
  const int64_t N32 = N / 32 * 32;
  if (N32) packed_tiles_512(M, N32, K, a, K, bp, bias, y, ldy);
  if (N32 < N) packed_tiles(M, N - N32, K, a, K, bp + N32 * K, bias, y + N32, ldy);
}

AVX512 void tdm_f32_gemm_packed_tiles__avx512(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y) {
  packed_tiles_avx512(M, N, K, a, bp, NULL, y, N);
}

AVX512 void tdm_f32_gemm_packed__avx512(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y) {
  if (M == 1) gemv_packed(N, K, a, bp, y); /* bound by memory: the AVX2 GEMV */
  else packed_tiles_avx512(M, N, K, a, bp, NULL, y, N);
}

AVX512 void tdm_f32_conv_gemm__avx512(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y,
                                      int64_t ldy) {
  packed_tiles_avx512(M, N, K, a, bp, bias, y, ldy);
}

#endif
