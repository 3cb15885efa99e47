/* quant_x86.c — AVX2 variants of the int8- and int4-weight kernels for native x86-64 builds (declared in
 * variants.h beside their scalar references in quant.c), compiled with the target attribute (AVX2
 * alone, no FMA: nothing here can be contracted into a fused multiply-add) so that the rest of the
 * library stays baseline x86-64; src/kernels/config.c calls them only where tdm_cpu_avx2_fma().
 * Each gives the bits of the SIMD128 variant it replaces (and of the scalar reference where that
 * one does): the same integer sums, and the same float operations per output value in the same
 * order, only eight columns per vector instead of four. tests/c/kernel_selftest.c compares them. */
#include "variants.h"

#if TDM_X86_AVX2

#include <immintrin.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2")))

/* The first n (at least 1) of the eight floats v at y. */
static inline AVX2 void store_n(float *y, __m256 v, int64_t n) {
  if (n >= 8) {
    _mm256_storeu_ps(y, v);
    return;
  }
  float t[8];
  _mm256_storeu_ps(t, v);
  memcpy(y, t, (size_t)n * sizeof(float));
}

/* ---- int8 weights × int8 activations, M = 1 ----------------------------------------------------- */

/* Rows k and k + 1 of a panel (16 bytes: k's 8 columns, then k + 1's; for an odd K's last k row k
 * alone, the upper 8 bytes zero) against the activation pair x (xq[k] in the low half of each
 * 32-bit lane, xq[k + 1] in the high): the bytes interleaved so that each column's two weights are
 * adjacent (in the paired layout, variants.h, they are already: paired, a constant at every call,
 * skips the shuffle), sign-extended to 16 bits and multiplied pairwise into one int32 per column
 * (exact: |sum| <= 2·127·127), added to s. */
static inline AVX2 __m256i dot_pair(int paired, __m128i b, __m256i x, __m256i s) {
  const __m128i il = _mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_cvtepi8_epi16(paired ? b : _mm_shuffle_epi8(b, il)), x));
}
#define LOAD2(p) _mm_loadu_si128((const __m128i *)(p))
#define LOAD1(p) _mm_loadl_epi64((const __m128i *)(p))

/* A block's exact sums into the float total, unfused: t + float(s)·d, as the references round. */
static inline AVX2 __m256 block_total(__m256 t, __m256i s, __m256 d) { return _mm256_add_ps(t, _mm256_mul_ps(_mm256_cvtepi32_ps(s), d)); }

/* Four panels at p0, p0 + PST, p0 + 2·PST, p0 + 3·PST (bytes), their columns' results at y + i·YS
 * (scales at scale + i·YS), n columns of the fourth written (the first three whole); per block of
 * TDM_Q8_ABLOCK k the int32 sums of each column, added to its float total in block order, times the
 * column scale at the end (tdm_q8_gemv_dot__scalar's operations, value for value). */
static inline __attribute__((always_inline)) AVX2 void q8_gemv_4panels(int paired, int64_t K, const int16_t *xq, const float *xs,
                                                                       const int8_t *p0, size_t PST, const float *scale, float *y,
                                                                       size_t YS, int64_t n) {
  const int8_t *p1 = p0 + PST, *p2 = p1 + PST, *p3 = p2 + PST;
  __m256 t0 = _mm256_setzero_ps(), t1 = t0, t2 = t0, t3 = t0;
  for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
    const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    int64_t k = k0;
    for (; k + 2 <= k1; k += 2) {
      int32_t pair;
      memcpy(&pair, xq + k, sizeof pair);
      const __m256i x = _mm256_set1_epi32(pair);
      s0 = dot_pair(paired, LOAD2(p0 + k * 8), x, s0);
      s1 = dot_pair(paired, LOAD2(p1 + k * 8), x, s1);
      s2 = dot_pair(paired, LOAD2(p2 + k * 8), x, s2);
      s3 = dot_pair(paired, LOAD2(p3 + k * 8), x, s3);
    }
    if (k < k1) { /* odd K: its last row alone, paired with the padding 0 of xq */
      int32_t pair;
      memcpy(&pair, xq + k, sizeof pair);
      const __m256i x = _mm256_set1_epi32(pair);
      s0 = dot_pair(paired, LOAD1(p0 + k * 8), x, s0);
      s1 = dot_pair(paired, LOAD1(p1 + k * 8), x, s1);
      s2 = dot_pair(paired, LOAD1(p2 + k * 8), x, s2);
      s3 = dot_pair(paired, LOAD1(p3 + k * 8), x, s3);
    }
    const __m256 d = _mm256_set1_ps(xs[b]);
    t0 = block_total(t0, s0, d), t1 = block_total(t1, s1, d), t2 = block_total(t2, s2, d), t3 = block_total(t3, s3, d);
  }
  _mm256_storeu_ps(y, _mm256_mul_ps(t0, _mm256_loadu_ps(scale)));
  _mm256_storeu_ps(y + YS, _mm256_mul_ps(t1, _mm256_loadu_ps(scale + YS)));
  _mm256_storeu_ps(y + 2 * YS, _mm256_mul_ps(t2, _mm256_loadu_ps(scale + 2 * YS)));
  store_n(y + 3 * YS, _mm256_mul_ps(t3, _mm256_loadu_ps(scale + 3 * YS)), n - 24);
}

/* Four panels at a time from four runs of columns H = ⌊N / 32⌋·8 apart (four sequential streams of
 * weights, which from memory read faster than four adjacent panels; the SIMD128 GEMV takes two, for
 * V8's registers), then the last N − 4H columns four adjacent panels (the last partial) and one panel at a
 * time; each column's sums are the same either way. */
static inline __attribute__((always_inline)) AVX2 void q8_gemv_dot(int paired, int64_t N, int64_t K, const int16_t *xq, const float *xs,
                                                                   const int8_t *qp, const float *scale, float *y) {
  const int64_t H = N / 32 * 8;
  const size_t PS = (size_t)K * 8;
  for (int64_t j = 0; j < H; j += 8)
    q8_gemv_4panels(paired, K, xq, xs, qp + (j / 8) * PS, (size_t)(H / 8) * PS, scale + j, y + j, (size_t)H, 32);
  int64_t j = 4 * H;
  for (; j + 24 < N; j += 32) q8_gemv_4panels(paired, K, xq, xs, qp + (j / 8) * PS, PS, scale + j, y + j, 8, N - j);
  for (; j < N; j += 8) {
    const int8_t *p = qp + (j / 8) * K * 8;
    __m256 t = _mm256_setzero_ps();
    for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
      const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
      __m256i s = _mm256_setzero_si256();
      int64_t k = k0;
      int32_t pair;
      for (; k + 2 <= k1; k += 2) {
        memcpy(&pair, xq + k, sizeof pair);
        s = dot_pair(paired, LOAD2(p + k * 8), _mm256_set1_epi32(pair), s);
      }
      if (k < k1) {
        memcpy(&pair, xq + k, sizeof pair);
        s = dot_pair(paired, LOAD1(p + k * 8), _mm256_set1_epi32(pair), s);
      }
      t = block_total(t, s, _mm256_set1_ps(xs[b]));
    }
    store_n(y + j, _mm256_mul_ps(t, _mm256_loadu_ps(scale + j)), N - j);
  }
}

AVX2 void tdm_q8_gemv_dot__avx2(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale, float *y) {
  q8_gemv_dot(0, N, K, xq, xs, qp, scale, y);
}
AVX2 void tdm_q8_gemv_dot_paired__avx2(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                                       float *y) {
  q8_gemv_dot(1, N, K, xq, xs, qp, scale, y);
}

/* 1 to 4 rows (tdm_q8_gemm_dot): R rows by NP panels (1 or 2), each panel's pair of k rows widened
 * once (interleaved first unless paired) and dotted with every row's activation pair; per block each
 * row's sums into its totals as above. paired, R and NP are constants at every call. */
static inline __attribute__((always_inline)) AVX2 void q8_dot_step(int paired, int R, int NP, int64_t K, int64_t KP, const int16_t *xq,
                                                                   const int8_t *p, int64_t k, __m128i il, __m256i s[4][2], bool last) {
  __m256i x[4];
  for (int r = 0; r < R; r++) {
    int32_t pair;
    memcpy(&pair, xq + r * KP + k, sizeof pair);
    x[r] = _mm256_set1_epi32(pair);
  }
  for (int i = 0; i < NP; i++) {
    const __m128i raw = last ? LOAD1(p + i * K * 8 + k * 8) : LOAD2(p + i * K * 8 + k * 8);
    const __m256i w = _mm256_cvtepi8_epi16(paired ? raw : _mm_shuffle_epi8(raw, il));
    for (int r = 0; r < R; r++) s[r][i] = _mm256_add_epi32(s[r][i], _mm256_madd_epi16(w, x[r]));
  }
}

static inline __attribute__((always_inline)) AVX2 void q8_dot_tile(int paired, int R, int NP, int64_t K, int64_t KP, int64_t NB,
                                                                   const int16_t *xq, const float *xs, const int8_t *p, const float *sc,
                                                                   float *y, int64_t ldy, int64_t n) {
  const __m128i il = _mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  __m256 t[4][2];
  for (int r = 0; r < R; r++)
    for (int i = 0; i < NP; i++) t[r][i] = _mm256_setzero_ps();
  for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
    const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
    __m256i s[4][2];
    for (int r = 0; r < R; r++)
      for (int i = 0; i < NP; i++) s[r][i] = _mm256_setzero_si256();
    int64_t k = k0;
    for (; k + 2 <= k1; k += 2) q8_dot_step(paired, R, NP, K, KP, xq, p, k, il, s, false);
    if (k < k1) q8_dot_step(paired, R, NP, K, KP, xq, p, k, il, s, true); /* odd K: its last row, the pad 0 of xq */
    for (int r = 0; r < R; r++) {
      const __m256 d = _mm256_set1_ps(xs[r * NB + b]);
      for (int i = 0; i < NP; i++) t[r][i] = block_total(t[r][i], s[r][i], d);
    }
  }
  for (int r = 0; r < R; r++)
    for (int i = 0; i < NP; i++) store_n(y + r * ldy + 8 * i, _mm256_mul_ps(t[r][i], _mm256_loadu_ps(sc + 8 * i)), n - 8 * i);
}

#define Q8_DOT_COLUMNS(R, NP) \
  do { \
    for (; j + 8 * (NP - 1) < N; j += 8 * NP) \
      q8_dot_tile(paired, R, NP, K, KP, NB, xq, xs, qp + (j / 8) * K * 8, scale + j, y + j, ldy, N - j); \
  } while (0)

static inline __attribute__((always_inline)) AVX2 void q8_dot_4rows(int paired, int64_t M, int64_t N, int64_t K, const int16_t *xq,
                                                                    const float *xs, const int8_t *qp, const float *scale, float *y,
                                                                    int64_t ldy) {
  const int64_t KP = K + K % 2, NB = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK;
  int64_t j = 0;
  switch (M) {
    case 1:
      Q8_DOT_COLUMNS(1, 2);
      Q8_DOT_COLUMNS(1, 1);
      break;
    case 2:
      Q8_DOT_COLUMNS(2, 2);
      Q8_DOT_COLUMNS(2, 1);
      break;
    case 3:
      Q8_DOT_COLUMNS(3, 2);
      Q8_DOT_COLUMNS(3, 1);
      break;
    case 4:
      Q8_DOT_COLUMNS(4, 2);
      Q8_DOT_COLUMNS(4, 1);
      break;
    default: (paired ? tdm_q8_gemm_dot_paired__scalar : tdm_q8_gemm_dot__scalar)(M, N, K, xq, xs, qp, scale, y, ldy);
  }
}

/* Any number of rows, four at a time. */
static AVX2 void q8_gemm_dot(int paired, int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp,
                             const float *scale, float *y, int64_t ldy) {
  const int64_t KP = K + K % 2, NB = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK;
  for (int64_t r = 0; r < M; r += 4) {
    const int64_t R = M - r < 4 ? M - r : 4;
    if (paired) q8_dot_4rows(1, R, N, K, xq + r * KP, xs + r * NB, qp, scale, y + r * ldy, ldy);
    else q8_dot_4rows(0, R, N, K, xq + r * KP, xs + r * NB, qp, scale, y + r * ldy, ldy);
  }
}
AVX2 void tdm_q8_gemm_dot__avx2(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                                float *y, int64_t ldy) {
  q8_gemm_dot(0, M, N, K, xq, xs, qp, scale, y, ldy);
}
AVX2 void tdm_q8_gemm_dot_paired__avx2(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp,
                                       const float *scale, float *y, int64_t ldy) {
  q8_gemm_dot(1, M, N, K, xq, xs, qp, scale, y, ldy);
}

/* ---- int8 weights × float activations (the GEMM, and a GEMV the integer dot does not take) ------ */

/* One k's 8 weights of a panel as floats (exact). */
static inline AVX2 __m256 weights8(const int8_t *p) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(LOAD1(p))); }
/* c + x·w, unfused, in the SIMD128 variant's operand order (tdm_madd there: add(mul(x, w), c)). */
#define MULADD(c, x, w) ((c) = _mm256_add_ps(_mm256_mul_ps((x), (w)), (c)))

/* Rows i..i+R-1 of y (R = 1 to 4), the columns of panels j / 8 and j / 8 + 1 (P = 2; the second may
 * be partial) or j / 8 alone (P = 1): each k's weights widened once serve R rows; the column scales
 * at the end. Every value is one chain c = x·w + c over k from 0, as in the SIMD128 tiles and GEMV. */
#define Q8_ROW(R, P, r) \
  if (R > r) { \
    const __m256 x = _mm256_broadcast_ss(a##r + k); \
    MULADD(c##r##0, x, w0); \
    if (P > 1) MULADD(c##r##1, x, w1); \
  }
#define Q8_STORE(R, P, r) \
  if (R > r) { \
    store_n(y + (i + r) * N + j, _mm256_mul_ps(c##r##0, sc0), n); \
    if (P > 1) store_n(y + (i + r) * N + j + 8, _mm256_mul_ps(c##r##1, sc1), n - 8); \
  }
/* clang-format off */
#define Q8_TILE(R, P) \
  do { \
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00; \
    const float *a0 = a + i * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K; \
    for (int64_t k = 0; k < K; k++) { \
      const __m256 w0 = weights8(pa + k * 8), w1 = P > 1 ? weights8(pb + k * 8) : w0; \
      Q8_ROW(R, P, 0) Q8_ROW(R, P, 1) Q8_ROW(R, P, 2) Q8_ROW(R, P, 3) \
    } \
    Q8_STORE(R, P, 0) Q8_STORE(R, P, 1) Q8_STORE(R, P, 2) Q8_STORE(R, P, 3) \
  } while (0)
/* clang-format on */
#define Q8_ROWS(P) \
  do { \
    int64_t i = 0; \
    for (; i + 4 <= M; i += 4) Q8_TILE(4, P); \
    switch (M - i) { \
      case 3: Q8_TILE(3, P); break; \
      case 2: Q8_TILE(2, P); break; \
      case 1: Q8_TILE(1, P); break; \
    } \
  } while (0)

/* Columns from j0 (a multiple of 16) on. Never inlined: in the AVX-512 caller (whose target has
 * FMA) GCC could contract its multiply and add. */
static AVX2 __attribute__((noinline)) void q8_tiles_from(int64_t j0, int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp,
                                                         const float *scale, float *y) {
  for (int64_t j = j0; j < N; j += 16) {
    const int8_t *pa = qp + (j / 8) * K * 8, *pb = pa + K * 8;
    const int64_t n = N - j;
    const __m256 sc0 = _mm256_loadu_ps(scale + j), sc1 = n > 8 ? _mm256_loadu_ps(scale + j + 8) : sc0;
    if (n > 8) Q8_ROWS(2);
    else Q8_ROWS(1);
  }
}

AVX2 void tdm_q8_gemm_tiles__avx2(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y) {
  q8_tiles_from(0, M, N, K, a, qp, scale, y);
}

/* AVX-512F: one __m512 holds two whole panels (16 columns), 6 rows a tile (6 accumulators), the
 * same unfused chain per value; the columns past the last whole pair of panels by the AVX2 tiles.
 * AVX-512F brings FMA, so the multiply and add are the explicit-rounding forms (round to nearest,
 * as the plain ones), which the compiler does not contract. */
#define AVX512 __attribute__((target("avx512f,avx2")))
#define RN (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define Q8Z_ROW(R, r) \
  if (R > r) c##r = _mm512_add_round_ps(_mm512_mul_round_ps(_mm512_set1_ps(a##r[k]), w, RN), c##r, RN);
#define Q8Z_STORE(R, r) \
  if (R > r) _mm512_storeu_ps(y + (i + r) * N + j, _mm512_mul_round_ps(c##r, sc, RN));
/* clang-format off */
#define Q8Z_TILE(R) \
  do { \
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0; \
    const float *a0 = a + i * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K, *a4 = a3 + K, *a5 = a4 + K; \
    for (int64_t k = 0; k < K; k++) { \
      const __m128i b = _mm_unpacklo_epi64(LOAD1(pa + k * 8), LOAD1(pb + k * 8)); \
      const __m512 w = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)); \
      Q8Z_ROW(R, 0) Q8Z_ROW(R, 1) Q8Z_ROW(R, 2) Q8Z_ROW(R, 3) Q8Z_ROW(R, 4) Q8Z_ROW(R, 5) \
    } \
    Q8Z_STORE(R, 0) Q8Z_STORE(R, 1) Q8Z_STORE(R, 2) Q8Z_STORE(R, 3) Q8Z_STORE(R, 4) Q8Z_STORE(R, 5) \
  } while (0)
/* clang-format on */

AVX512 void tdm_q8_gemm_tiles__avx512(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y) {
  int64_t j = 0;
  for (; j + 16 <= N; j += 16) {
    const int8_t *pa = qp + (j / 8) * K * 8, *pb = pa + K * 8;
    const __m512 sc = _mm512_loadu_ps(scale + j);
    int64_t i = 0;
    for (; i + 6 <= M; i += 6) Q8Z_TILE(6);
    switch (M - i) {
      case 5: Q8Z_TILE(5); break;
      case 4: Q8Z_TILE(4); break;
      case 3: Q8Z_TILE(3); break;
      case 2: Q8Z_TILE(2); break;
      case 1: Q8Z_TILE(1); break;
    }
  }
  if (j < N) q8_tiles_from(j, M, N, K, a, qp, scale, y);
}

/* M = 1: four panels side by side (four weight streams), then one panel at a time. */
static AVX2 void q8_gemv__avx2(int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y) {
  int64_t j = 0;
  for (; j + 24 < N; j += 32) {
    const int8_t *p0 = qp + (j / 8) * K * 8, *p1 = p0 + K * 8, *p2 = p1 + K * 8, *p3 = p2 + K * 8;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t k = 0; k < K; k++) {
      const __m256 x = _mm256_broadcast_ss(a + k);
      MULADD(s0, x, weights8(p0 + k * 8));
      MULADD(s1, x, weights8(p1 + k * 8));
      MULADD(s2, x, weights8(p2 + k * 8));
      MULADD(s3, x, weights8(p3 + k * 8));
    }
    _mm256_storeu_ps(y + j, _mm256_mul_ps(s0, _mm256_loadu_ps(scale + j)));
    _mm256_storeu_ps(y + j + 8, _mm256_mul_ps(s1, _mm256_loadu_ps(scale + j + 8)));
    _mm256_storeu_ps(y + j + 16, _mm256_mul_ps(s2, _mm256_loadu_ps(scale + j + 16)));
    store_n(y + j + 24, _mm256_mul_ps(s3, _mm256_loadu_ps(scale + j + 24)), N - j - 24);
  }
  for (; j < N; j += 8) {
    const int8_t *p = qp + (j / 8) * K * 8;
    __m256 s = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k++) MULADD(s, _mm256_broadcast_ss(a + k), weights8(p + k * 8));
    store_n(y + j, _mm256_mul_ps(s, _mm256_loadu_ps(scale + j)), N - j);
  }
}

AVX2 void tdm_q8_gemm__avx2(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y) {
  if (M == 1) q8_gemv__avx2(N, K, a, qp, scale, y);
  else tdm_q8_gemm_tiles__avx2(M, N, K, a, qp, scale, y);
}

/* ---- int4 weights × float activations --------------------------------------------------------- */

/* Block b of an int4 panel (variants.h, 32 bytes) as its four byte rows of 8 columns (k0 + 2r in
 * the low nibbles, k0 + 2r + 1 in the high), rows[r] in the low 8 bytes, as quant_simd128.c's
 * q4_block_rows. */
static inline AVX2 void q4_block_rows(const uint8_t *blk, __m128i rows[4]) {
  const __m128i t = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m128i a = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)blk), t);
  const __m128i b = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(blk + 16)), t);
  rows[0] = _mm_unpacklo_epi32(a, b), rows[2] = _mm_unpackhi_epi32(a, b);
  rows[1] = _mm_srli_si128(rows[0], 8), rows[3] = _mm_srli_si128(rows[2], 8);
}

/* One byte row as the signed codes of k (*lo) and k + 1 (*hi), floats (exact). */
static inline AVX2 void q4_row(__m128i row, __m256 *lo, __m256 *hi) {
  const __m256i b = _mm256_cvtepu8_epi32(row), m = _mm256_set1_epi32(15), e = _mm256_set1_epi32(8);
  *lo = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(b, m), e));
  *hi = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(_mm256_srli_epi32(b, 4), m), e));
}

/* Rows i..i+R-1 (R = 1 to 4) of panel j / 8, block by block: each pair of k's codes times their
 * group's scales once, then for every row c = c + (x0·b + x1·d) (the SIMD128 tiles' tdm_madd2,
 * unfused; a last odd k's pair with x1 = 0). */
static inline __attribute__((always_inline)) AVX2 void q4_tile(int R, int64_t i, int64_t j, int64_t N, int64_t K, int64_t G, const float *a,
                                                               const uint8_t *panel, const float *sc, float *y) {
  __m256 c[4];
  for (int r = 0; r < R; r++) c[r] = _mm256_setzero_ps();
  for (int64_t kb = 0; kb < K; kb += 8) {
    __m128i rows[4];
    q4_block_rows(panel + kb * 4, rows);
    for (int e = 0; e < 4; e++) {
      const int64_t k = kb + 2 * e;
      if (k >= K) break;
      const __m256 g8 = _mm256_loadu_ps(sc + (k / G) * 8);
      __m256 w0, w1;
      q4_row(rows[e], &w0, &w1);
      const __m256 b = _mm256_mul_ps(w0, g8), d = _mm256_mul_ps(w1, g8);
      const bool two = k + 1 < K;
      for (int r = 0; r < R; r++) {
        const float *ar = a + (i + r) * K + k;
        const __m256 x0 = _mm256_broadcast_ss(ar), x1 = _mm256_set1_ps(two ? ar[1] : 0.0f);
        c[r] = _mm256_add_ps(c[r], _mm256_add_ps(_mm256_mul_ps(x0, b), _mm256_mul_ps(x1, d)));
      }
    }
  }
  for (int r = 0; r < R; r++) store_n(y + (i + r) * N + j, c[r], N - j);
}

AVX2 void tdm_q4_gemm_tiles__avx2(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale,
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

AVX2 void tdm_q4_gemm__avx2(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale, float *y) {
  tdm_q4_gemm_tiles__avx2(M, N, K, G, a, qp, scale, y);
}

/* ---- int4 weights × int8 activations, M = 1 ---------------------------------------------------- */

/* quant_q4_simd128.c's q4_block_dot on a whole block of a panel (columns 0-3 in the low 128 bits,
 * 4-7 in the high): each position's codes masked in place (the last shifted down), times
 * tdm_q4_block_x16's pairs (xv[p] broadcast), 256·xq·(q + 8) summed into each column's lane. */
static inline AVX2 __m256i q4_block_dot(__m256i v, const __m256i *xv, __m256i acc) {
  const __m256i d0 = _mm256_madd_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x000F)), xv[0]);
  const __m256i d1 = _mm256_madd_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x00F0)), xv[1]);
  const __m256i d2 = _mm256_madd_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x0F00)), xv[2]);
  const __m256i d3 = _mm256_madd_epi16(_mm256_srli_epi16(v, 12), xv[3]);
  return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_add_epi32(d0, d1), _mm256_add_epi32(d2, d3)));
}

/* np (1, 2 or 4) whole panels from p (PS bytes apart), scales sc (SS floats apart), into y (8
 * columns per panel, YS floats apart), as quant_q4_simd128.c's q4_dot_panels: per group the exact
 * int32 sums Σ xq·q per column (times 256 where whole: tdm_q4_whole), then the group's total as the
 * scalar reference adds it. */
static inline __attribute__((always_inline)) AVX2 void q4_dot_panels(int whole, int np, int64_t K, int64_t G, size_t PS, int64_t NG,
                                                                     const int16_t *x16, const float *xs, const int32_t *xsum,
                                                                     const uint8_t *p, const float *sc, size_t SS, float *y, size_t YS) {
  __m256 t[4];
  for (int i = 0; i < np; i++) t[i] = _mm256_setzero_ps();
  for (int64_t g = 0; g < NG; g++) {
    const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
    __m256i s[4], h[4];
    for (int i = 0; i < np; i++) s[i] = _mm256_set1_epi32(-8 * xsum[g]), h[i] = _mm256_set1_epi32(whole ? -2048 * xsum[g] : 0);
    for (int64_t k = g * G; k < k1;) {
      const int64_t kend = whole || k1 - k <= TDM_Q4_WHOLE ? k1 : k + TDM_Q4_WHOLE;
      for (; k < kend; k += 8) {
        __m256i xv[4];
        for (int q = 0; q < 4; q++) {
          int32_t pair;
          memcpy(&pair, x16 + k + 2 * q, 4);
          xv[q] = _mm256_set1_epi32(pair);
        }
        for (int i = 0; i < np; i++) h[i] = q4_block_dot(_mm256_loadu_si256((const __m256i *)(p + i * PS + (size_t)k * 4)), xv, h[i]);
      }
      if (!whole)
        for (int i = 0; i < np; i++) s[i] = _mm256_add_epi32(s[i], _mm256_srai_epi32(h[i], 8)), h[i] = _mm256_setzero_si256();
    }
    const __m256 d = _mm256_set1_ps(whole ? xs[g] * 0x1p-8f : xs[g]);
    for (int i = 0; i < np; i++)
      t[i] = _mm256_add_ps(t[i],
                           _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(whole ? h[i] : s[i]), d), _mm256_loadu_ps(sc + i * SS + g * 8)));
  }
  for (int i = 0; i < np; i++) _mm256_storeu_ps(y + i * YS, t[i]);
}

/* Four panels from four runs of columns H = ⌊N / 32⌋·8 apart (four sequential streams, as the AVX2
 * int8 GEMV's), then two, one and a partial panel. */
static inline __attribute__((always_inline)) AVX2 void q4_gemv_columns(int whole, int64_t N, int64_t K, int64_t G, int64_t NG,
                                                                       const int16_t *x16, const float *xs, const int32_t *xsum,
                                                                       const uint8_t *qp, const float *scale, float *y) {
  const size_t PS = TDM_Q4_BLOCK_BYTES(K), SS = (size_t)NG * 8;
  const int64_t H = N / 32 * 8;
  for (int64_t j = 0; j < H; j += 8)
    q4_dot_panels(whole, 4, K, G, (size_t)(H / 8) * PS, NG, x16, xs, xsum, qp + (j / 8) * PS, scale + (j / 8) * SS, (size_t)(H / 8) * SS,
                  y + j, (size_t)H);
  int64_t j = 4 * H;
  for (; j + 16 <= N; j += 16) q4_dot_panels(whole, 2, K, G, PS, NG, x16, xs, xsum, qp + (j / 8) * PS, scale + (j / 8) * SS, SS, y + j, 8);
  for (; j + 8 <= N; j += 8) q4_dot_panels(whole, 1, K, G, PS, NG, x16, xs, xsum, qp + (j / 8) * PS, scale + (j / 8) * SS, SS, y + j, 8);
  if (j < N) {
    float t[8];
    q4_dot_panels(whole, 1, K, G, PS, NG, x16, xs, xsum, qp + (j / 8) * PS, scale + (j / 8) * SS, SS, t, 8);
    memcpy(y + j, t, sizeof(float) * (size_t)(N - j));
  }
}

AVX2 void tdm_q4_gemv_dot__avx2(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum, const uint8_t *qp,
                                const float *scale, float *y) {
  const int64_t NG = K / G + (K % G != 0);
  int16_t x16[TDM_Q8_DOT_MAX_K];
  tdm_q4_block_x16(K, xq, x16);
  if (tdm_q4_whole(G, NG, xs)) q4_gemv_columns(1, N, K, G, NG, x16, xs, xsum, qp, scale, y);
  else q4_gemv_columns(0, N, K, G, NG, x16, xs, xsum, qp, scale, y);
}

#endif
