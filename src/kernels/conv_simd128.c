/* conv_simd128.c — the convolution family's SIMD128 variants (variants.h declares them beside their
 * scalar references in conv_rows.c and conv_gemm.c; config.c picks them; tests/c/kernel_selftest.c
 * checks each against its reference):
 *  - direct convolution: 16, then 4 output columns at a time for column strides 1 and 2; for convs
 *    whose rows are short, the group's rows first copied with zero columns on both sides into a
 *    stack buffer, a band of rows at a time, so every column runs in vectors with no bounds checks;
 *  - pooling rows, 4 columns at a time;
 *  - the conv GEMM's register tiles over packed panels, and the dot products at few positions. */
#include "conv_rows.h"
#include "gemm.h"
#include "vec.h"

#include <math.h>
#include <string.h>

#if TDM_SIMD128
typedef tdm_conv_geom geom;

/* x[p], x[p + S], x[p + 2S], x[p + 3S] for S = 1 or 2 (S = 2 reads p[7] too). */
#define LOAD4S(p, S) ((S) == 1 ? wasm_v128_load(p) : wasm_i32x4_shuffle(wasm_v128_load(p), wasm_v128_load((p) + 4), 0, 2, 4, 6))

/* Output columns ow0 .. ow0 + 4V - 1 of one row (column stride S, every tap inside x), V vectors
 * of accumulators in registers over all channels and taps, stored at dst. */
#define CONV_BLOCK(V, S, dst) \
  do { \
    v128_t a0 = wasm_f32x4_splat(b), a1 = a0, a2 = a0, a3 = a0; \
    for (int64_t c = 0; c < Cg; c++) \
      for (int64_t kh = 0; kh < g->KH; kh++) { \
        const int64_t ih = oh * g->sh - g->ph + kh * g->dh; \
        if (ih < 0 || ih >= g->H) continue; \
        const float *xr = xg + (c * g->H + ih) * g->W + ow0 * (S) - g->pw, *wr = wo + (c * g->KH + kh) * g->KW; \
        for (int64_t kw = 0; kw < g->KW; kw++) { \
          const v128_t wv = wasm_f32x4_splat(wr[kw]); \
          const float *p = xr + kw * g->dw; \
          a0 = tdm_madd(wv, LOAD4S(p, S), a0); \
          if (V > 1) a1 = tdm_madd(wv, LOAD4S(p + 4 * (S), S), a1); \
          if (V > 2) a2 = tdm_madd(wv, LOAD4S(p + 8 * (S), S), a2); \
          if (V > 3) a3 = tdm_madd(wv, LOAD4S(p + 12 * (S), S), a3); \
        } \
      } \
    wasm_v128_store((dst), a0); \
    if (V > 1) wasm_v128_store((dst) + 4, a1); \
    if (V > 2) wasm_v128_store((dst) + 8, a2); \
    if (V > 3) wasm_v128_store((dst) + 12, a3); \
  } while (0)

int64_t tdm_f32_conv_row__simd128(const geom *g, const float *xg, const float *wo, int64_t Cg, int64_t oh, float b, float *yr, int64_t lo,
                                  int64_t hi) {
  int64_t ow0 = lo;
  if (g->sw == 1) {
    for (; ow0 + 16 <= hi; ow0 += 16) CONV_BLOCK(4, 1, yr + ow0);
    for (; ow0 + 4 <= hi; ow0 += 4) CONV_BLOCK(1, 1, yr + ow0);
  } else if (g->sw == 2) {
    for (; ow0 + 16 <= hi; ow0 += 16) CONV_BLOCK(4, 2, yr + ow0);
    for (; ow0 + 4 <= hi; ow0 += 4) CONV_BLOCK(1, 2, yr + ow0);
  }
  return ow0;
}

/* The last, partial block of a row: columns ow0 .. OW - 1 (fewer than 4) into a temporary. */
static void conv_tail__simd128(const geom *g, const float *xg, const float *wo, int64_t Cg, int64_t oh, float b, float *yr, int64_t ow0) {
  float t[4];
  if (g->sw == 1) CONV_BLOCK(1, 1, t);
  else CONV_BLOCK(1, 2, t);
  for (int64_t i = ow0; i < g->OW; i++) yr[i] = t[i - ow0];
}

bool tdm_f32_conv_plane_padded__simd128(const geom *g, const float *xg, const float *wo, int64_t Cg, float b, float *yc, float *buf,
                                        int64_t cap) {
  const int64_t S = g->sw;
  if ((S != 1 && S != 2) || g->OW < 1 || g->OH < 1) return false;
  /* A padded row: pw zeros, the W values, then zeros up to the last vector block's last read
   * (its first column (ceil4(OW) - 4)·S, the last tap, and for stride 2 a second load of 4). */
  int64_t Wp = ((g->OW + 3) / 4 * 4 - 4) * S + (g->KW - 1) * g->dw + 4 * S;
  if (Wp < g->pw + g->W) Wp = g->pw + g->W;
  const int64_t span = (g->KH - 1) * g->dh + 1; /* input rows one output row reads */
  if (Cg < 1 || Wp > cap / Cg || cap / Cg / Wp < span) return false;
  const int64_t per_band = (cap / Cg / Wp - span) / g->sh + 1; /* output rows whose input rows fit */
  /* The band's buffer is x with padded rows: the same geometry, W = Wp, no column padding, and
   * rows [r0, r1) of x at rows 0 .. r1 - r0 (the row padding and the skip of rows outside x stay). */
  geom p = *g;
  p.W = Wp;
  p.pw = 0;
  for (int64_t oh0 = 0; oh0 < g->OH; oh0 += per_band) {
    const int64_t oh1 = oh0 + per_band < g->OH ? oh0 + per_band : g->OH;
    int64_t r0 = oh0 * g->sh - g->ph, r1 = (oh1 - 1) * g->sh - g->ph + span;
    if (r0 < 0) r0 = 0;
    if (r1 > g->H) r1 = g->H;
    const int64_t rows = r1 > r0 ? r1 - r0 : 0;
    for (int64_t c = 0; c < Cg; c++)
      for (int64_t r = 0; r < rows; r++) {
        float *d = buf + (c * rows + r) * Wp;
        memset(d, 0, sizeof(float) * (size_t)g->pw);
        memcpy(d + g->pw, xg + (c * g->H + r0 + r) * g->W, sizeof(float) * (size_t)g->W);
        memset(d + g->pw + g->W, 0, sizeof(float) * (size_t)(Wp - g->pw - g->W));
      }
    p.H = rows;
    p.ph = g->ph + r0;
    for (int64_t oh = oh0; oh < oh1; oh++) {
      float *yr = yc + oh * g->OW;
      const int64_t end = tdm_f32_conv_row__simd128(&p, buf, wo, Cg, oh, b, yr, 0, g->OW);
      if (end < g->OW) conv_tail__simd128(&p, buf, wo, Cg, oh, b, yr, end);
    }
  }
  return true;
}

/* The direct path over zero-padded rows pays when the row path would leave more than 1/8 of the
 * columns to the scalar point kernel (short rows: depthwise convs on 14×14 and 7×7 maps). */
static bool conv_padded_pays(const geom *g, int64_t lo, int64_t hi) {
  if (g->sw != 1 && g->sw != 2) return false;
  int64_t vec = 0;
  if (lo < hi) vec = (hi - lo) / 16 * 16 + (hi - lo) % 16 / 4 * 4;
  return (g->OW - vec) * 8 > g->OW;
}

/* Zero-padding adds 0·w for each tap outside x where the reference adds nothing: the same result
 * bit for bit while every weight of the channel is finite (0·inf would be NaN) and its bias is not
 * −0 (the one start from which adding +0 changes the sum: −0 + +0 = +0). Otherwise the exact row
 * path runs. */
static bool conv_padded_exact(const float *wo, int64_t nw, float b) {
  for (int64_t i = 0; i < nw; i++)
    if (!isfinite(wo[i])) return false;
  return !(b == 0.0f && signbit(b));
}

void tdm_f32_conv_plane__simd128(const geom *g, const float *xg, const float *wo, int64_t Cg, float b, float *yc) {
  int64_t lo, hi;
  tdm__inside_columns(g, &lo, &hi);
  if (conv_padded_pays(g, lo, hi) && conv_padded_exact(wo, Cg * g->KH * g->KW, b)) {
    float buf[TDM_CONV_PAD_FLOATS];
    if (tdm_f32_conv_plane_padded__simd128(g, xg, wo, Cg, b, yc, buf, TDM_CONV_PAD_FLOATS)) return;
  }
  const bool vec = (g->sw == 1 || g->sw == 2) && lo < hi;
  for (int64_t oh = 0; oh < g->OH; oh++) {
    float *yr = yc + oh * g->OW;
    int64_t ow = 0;
    if (vec) {
      for (; ow < lo; ow++) yr[ow] = tdm_f32_conv_point__scalar(g, xg, wo, Cg, oh, ow, b);
      ow = tdm_f32_conv_row__simd128(g, xg, wo, Cg, oh, b, yr, lo, hi);
    }
    for (; ow < g->OW; ow++) yr[ow] = tdm_f32_conv_point__scalar(g, xg, wo, Cg, oh, ow, b);
  }
}

/* ---- pooling ------------------------------------------------------------------------------------ */

#define POOL_BLOCK(S) \
  do { \
    v128_t acc = wasm_f32x4_splat(is_max ? -INFINITY : 0.0f); \
    for (int64_t kh = 0; kh < g->KH; kh++) { \
      const int64_t ih = oh * g->sh - g->ph + kh * g->dh; \
      if (ih < 0 || ih >= g->H) continue; \
      const float *xr = xc + ih * g->W + ow0 * (S) - g->pw; \
      for (int64_t kw = 0; kw < g->KW; kw++) { \
        const v128_t v = LOAD4S(xr + kw * g->dw, S); \
        if (is_max) acc = wasm_v128_bitselect(v, acc, wasm_v128_or(wasm_f32x4_gt(v, acc), wasm_f32x4_ne(v, v))); \
        else acc = wasm_f32x4_add(acc, v); \
      } \
    } \
    if (!is_max) { \
      float d[4]; \
      for (int t = 0; t < 4; t++) { \
        const int64_t div = tdm__pool_div(g, include_pad, oh, ow0 + t, rows * g->KW); \
        d[t] = div ? (float)div : NAN; \
      } \
      acc = wasm_f32x4_div(acc, wasm_v128_load(d)); \
    } \
    wasm_v128_store(yr + ow0, acc); \
  } while (0)

/* Output columns [lo, hi) of row oh of one channel (column stride 1 or 2, every tap of the row
 * inside x), 4 at a time, in the scalar reference's order of taps; returns the first column not
 * written. */
int64_t tdm_f32_pool_row__simd128(const geom *g, bool is_max, bool include_pad, const float *xc, int64_t oh, float *yr, int64_t lo,
                                  int64_t hi) {
  int64_t rows = 0;
  for (int64_t kh = 0; kh < g->KH; kh++) {
    const int64_t ih = oh * g->sh - g->ph + kh * g->dh;
    rows += ih >= 0 && ih < g->H;
  }
  if (rows == 0) return lo; /* the reference's 0 divisor: left to it */
  int64_t ow0 = lo;
  if (g->sw == 1)
    for (; ow0 + 4 <= hi; ow0 += 4) POOL_BLOCK(1);
  else if (g->sw == 2)
    for (; ow0 + 4 <= hi; ow0 += 4) POOL_BLOCK(2);
  return ow0;
}

void tdm_f32_pool_plane__simd128(const geom *g, bool is_max, bool include_pad, const float *xc, float *yc) {
  int64_t lo, hi;
  tdm__inside_columns(g, &lo, &hi);
  const bool vec = (g->sw == 1 || g->sw == 2) && lo + 4 <= hi;
  for (int64_t oh = 0; oh < g->OH; oh++) {
    float *yr = yc + oh * g->OW;
    int64_t ow = 0;
    if (vec) {
      for (; ow < lo; ow++) yr[ow] = tdm_f32_pool_point__scalar(g, is_max, include_pad, xc, oh, ow);
      ow = tdm_f32_pool_row__simd128(g, is_max, include_pad, xc, oh, yr, lo, hi);
    }
    for (; ow < g->OW; ow++) yr[ow] = tdm_f32_pool_point__scalar(g, is_max, include_pad, xc, oh, ow);
  }
}

/* ---- convolution as a GEMM, and dot products at few positions ------------------------------------ */

/* Rows i .. i+R-1, the 8 columns of panel j, over k in [k0, k0 + kc): the accumulators start at
 * the bias (first block) or at what the previous block stored. */
#define CONV_TILE(R) \
  do { \
    v128_t c[4][2]; \
    for (int r = 0; r < R; r++) { \
      if (k0 == 0) c[r][0] = c[r][1] = wasm_f32x4_splat(bias ? bias[i + r] : 0.0f); \
      else tdm_load8(y + (i + r) * ldy + j, n, &c[r][0], &c[r][1]); \
    } \
    const float *a0 = a + i * K + k0, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K, *pb = panel; \
    for (size_t kk = (size_t)kc; kk > 0; kk--, a0++, a1++, a2++, a3++, pb += 8) { \
      const v128_t b0 = wasm_v128_load(pb), b1 = wasm_v128_load(pb + 4); \
      v128_t x = wasm_f32x4_splat(*a0); \
      c[0][0] = tdm_madd(x, b0, c[0][0]); \
      c[0][1] = tdm_madd(x, b1, c[0][1]); \
      if (R > 1) { \
        x = wasm_f32x4_splat(*a1); \
        c[1][0] = tdm_madd(x, b0, c[1][0]); \
        c[1][1] = tdm_madd(x, b1, c[1][1]); \
      } \
      if (R > 2) { \
        x = wasm_f32x4_splat(*a2); \
        c[2][0] = tdm_madd(x, b0, c[2][0]); \
        c[2][1] = tdm_madd(x, b1, c[2][1]); \
      } \
      if (R > 3) { \
        x = wasm_f32x4_splat(*a3); \
        c[3][0] = tdm_madd(x, b0, c[3][0]); \
        c[3][1] = tdm_madd(x, b1, c[3][1]); \
      } \
    } \
    for (int r = 0; r < R; r++) tdm_store8(y + (i + r) * ldy + j, c[r][0], c[r][1], n); \
  } while (0)

/* K in blocks of CONV_KC so that a panel's block (CONV_KC x 8 floats) stays in L1 while every row
 * tile walks it, and rows in blocks of CONV_MC so that the weights' block [CONV_MC, CONV_KC] (64 KiB)
 * stays in L2 while every panel is walked: without the row blocks, a tall weight matrix's block
 * ([512 or 1280 or 3072 rows, 256]: Mimi's SEANet at a streaming step) was read from memory once per
 * panel. Each output's products are summed in the same order either way (the same bits). */
#define CONV_KC 256
#define CONV_MC 64
void tdm_f32_conv_gemm_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y,
                                    int64_t ldy) {
  for (int64_t k0 = 0; k0 < K; k0 += CONV_KC) {
    const int64_t kc = K - k0 < CONV_KC ? K - k0 : CONV_KC;
    for (int64_t i0 = 0; i0 < M; i0 += CONV_MC) {
      const int64_t i1 = M - i0 < CONV_MC ? M : i0 + CONV_MC;
      for (int64_t j = 0; j < N; j += TDM_PANEL) {
        const float *panel = bp + (j / TDM_PANEL) * K * TDM_PANEL + k0 * TDM_PANEL;
        const int64_t n = N - j;
        int64_t i = i0;
        for (; i + 4 <= i1; i += 4) CONV_TILE(4);
        for (; i < i1; i++) CONV_TILE(1);
      }
    }
  }
}

/* convrate: the conv GEMM with B's rows read where they lie (tdm_conv_x), each panel's block packed
 * just before its tiles use it: for each block of CONV_KC steps and CONV_MC rows, panel by panel,
 * the block's kc rows of 8 columns are copied from x (or from the packed tail for the last partial
 * panel) into an 8 KiB stack panel, which every 4-row tile then walks from L1 (CONV_TILE, the
 * packed kernel's tiles: the same products in the same order, so the same bits as im2col +
 * tdm_f32_conv_gemm_4x8__simd128). Reading B's rows straight from x in the tiles is slower (every
 * step a row of its own, 192 cache lines a panel at [32, 192] x [192, 1920]); im2col's whole-chunk
 * buffer (up to 1 MiB written, then read back from L2/L3) costs a large share of such a conv. The copy is repeated for each block of CONV_MC rows (M / 64
 * times; about 1/25 of the tiles' work per block). */
void tdm_f32_conv1d_gemm_no_im2col__simd128(int64_t M, int64_t N, const tdm_conv_x *b, const float *a, const float *bias, float *y,
                                            int64_t ldy) {
  const int64_t KW = b->KW, K = b->Cg * KW, N8 = N / TDM_PANEL * TDM_PANEL;
  const float *rows[CONV_KC];
  float panel[CONV_KC * TDM_PANEL];
  for (int64_t k0 = 0; k0 < K; k0 += CONV_KC) {
    const int64_t kc = K - k0 < CONV_KC ? K - k0 : CONV_KC;
    for (int64_t t = 0; t < kc; t++) {
      const int64_t k = k0 + t;
      rows[t] = tdm_conv_x_row(b, k);
    }
    for (int64_t i0 = 0; i0 < M; i0 += CONV_MC) {
      const int64_t i1 = M - i0 < CONV_MC ? M : i0 + CONV_MC;
      for (int64_t j = 0; j < N; j += TDM_PANEL) {
        const int64_t n = N - j;
        if (j < N8) {
          float *d = panel;
          const float *const *r = rows;
          for (uint32_t kk = (uint32_t)kc; kk > 0; kk--, d += TDM_PANEL, r++) {
            const float *src = *r + j;
            wasm_v128_store(d, wasm_v128_load(src));
            wasm_v128_store(d + 4, wasm_v128_load(src + 4));
          }
        } else memcpy(panel, b->tail + k0 * TDM_PANEL, sizeof(float) * (size_t)(kc * TDM_PANEL));
        int64_t i = i0;
        for (; i + 4 <= i1; i += 4) CONV_TILE(4);
        for (; i < i1; i++) CONV_TILE(1);
      }
    }
  }
}

/* The end of a dot tile over rows i + r·S: each of the R·P accumulators' lanes summed (lanes 0+1,
 * 2+3, then both), the tail products from k = KT on and the bias added in order, stored in y. */
#define CONV_DOT_SUM(R, P, S, KT) \
  for (int r = 0; r < R; r++) \
    for (int q = 0; q < P; q++) { \
      float t = (wasm_f32x4_extract_lane(s[r][q], 0) + wasm_f32x4_extract_lane(s[r][q], 1)) + \
          (wasm_f32x4_extract_lane(s[r][q], 2) + wasm_f32x4_extract_lane(s[r][q], 3)); \
      for (int64_t kk = (KT); kk < K; kk++) t += ar[r * (S) * K + kk] * colt[q * K + kk]; \
      y[(i + r * (S)) * ldy + q] = t + (bias ? bias[i + r * (S)] : 0.0f); \
    }

/* Positions 4 at a time (2 rows a tile), then the last 3, 2 (4 rows) or 1 (R1 rows), each by
 * ROWS(R, P) over every row of a. */
#define CONV_DOT_POSITIONS(ROWS, R1) \
  for (int64_t j = 0; j < N;) { \
    const int64_t left = N - j, p = left >= 4 ? 4 : left; \
    if (p == 4) ROWS(2, 4); \
    else if (p == 3) ROWS(2, 3); \
    else if (p == 2) ROWS(4, 2); \
    else ROWS(R1, 1); \
    j += p, colt += p * K, y += p; \
  }

/* Rows i, i+S, .., i+(R-1)·S of a against positions 0 .. P-1 of colt: R·P accumulators of 4 lanes
 * (lane l sums the k ≡ l mod 4 products), then each summed (lanes 0+1, 2+3, then both), the K % 4
 * tail products and the bias added in order. */
#define CONV_DOT_TILE(R, P, S) \
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
        const v128_t w = wasm_v128_load(ar + r * (S) * K + k); \
        for (int q = 0; q < P; q++) s[r][q] = tdm_madd(w, c[q], s[r][q]); \
      } \
    } \
    CONV_DOT_SUM(R, P, S, k); \
  } while (0)

/* The rows in R runs of L = M / R (a tile: row i of every run, i < L; R sequential weight streams
 * M / R rows apart instead of R adjacent rows, which the prefetchers follow better from memory), then
 * the rows from R·L on one at a time.
 * A row's sums do not depend on the rows beside it, so the walk changes no value. */
#define CONV_DOT_ROWS(R, P) \
  do { \
    const int64_t L = M / (R); \
    int64_t i = 0; \
    for (; i < L; i++) CONV_DOT_TILE(R, P, L); \
    for (i = (R) * L; i < M; i++) CONV_DOT_TILE(1, P, 1); \
  } while (0)

void tdm_f32_conv_dot__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *colt, const float *bias, float *y,
                               int64_t ldy) {
  CONV_DOT_POSITIONS(CONV_DOT_ROWS, 8)
}

/* As CONV_DOT_TILE, each row read at two places at once: its first and second half of the vector
 * part (h = a multiple of 4, K4 = K rounded down to 4), both halves adding into the same
 * accumulators, so R rows are 2R weight streams in flight (the dot products at a streaming step
 * stream their weights from memory: Mimi's [1024, 8192] and [8192, 1024] convs, 32 MB each). Lane l
 * sums, in order, the products k ≡ l mod 4 of the first half and of the second alternately, then
 * those of [2h, K4) if K4 is not 8-aligned; then the lanes are summed, the K % 4 tail products and
 * the bias added in order, as CONV_DOT_TILE does. A row's value depends on that row alone. */
#define CONV_DOT2_TILE(R, P, S) \
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
    CONV_DOT_SUM(R, P, S, K4); \
  } while (0)

/* In R runs as CONV_DOT_ROWS (2R weight streams, faster than R adjacent rows from memory at
 * K = 3072-8192). */
#define CONV_DOT2_ROWS(R, P) \
  do { \
    const int64_t L = M / (R); \
    int64_t i = 0; \
    for (; i < L; i++) CONV_DOT2_TILE(R, P, L); \
    for (i = (R) * L; i < M; i++) CONV_DOT2_TILE(1, P, 1); \
  } while (0)

void tdm_f32_conv_dot_2s__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *colt, const float *bias, float *y,
                                  int64_t ldy) {
  const int64_t K4 = K / 4 * 4, h = K4 / 8 * 4;
  CONV_DOT_POSITIONS(CONV_DOT2_ROWS, 4)
}

/* ---- conv_bf16's GEMV over 2-row bfloat16 panels ------------------------------------------------ */

static inline float bf16_lanes(v128_t s) {
  return (wasm_f32x4_extract_lane(s, 0) + wasm_f32x4_extract_lane(s, 1)) + (wasm_f32x4_extract_lane(s, 2) + wasm_f32x4_extract_lane(s, 3));
}

/* The weight rows of G panels (pa; and pb when G = 2) against NR rows of activations from row r. */
#define BF16_PANELS(G, NR) \
  do { \
    v128_t s[2 * (G)][NR]; \
    for (int j = 0; j < 2 * (G); j++) \
      for (int q = 0; q < (NR); q++) s[j][q] = wasm_f32x4_splat(0.0f); \
    const uint16_t *wa = w + pa * K8 * 16, *wb = w + pb * K8 * 16; \
    const float *x = eo + r * K8 * 8; \
    for (int64_t b = 0; b < K8; b++) { \
      v128_t e[NR], o[NR]; \
      for (int q = 0; q < (NR); q++) e[q] = wasm_v128_load(x + (q * K8 + b) * 8), o[q] = wasm_v128_load(x + (q * K8 + b) * 8 + 4); \
      for (int j = 0; j < 2 * (G); j++) { \
        const v128_t v = wasm_v128_load((j < 2 ? wa : wb) + b * 16 + (j % 2) * 8); \
        const v128_t we = wasm_i32x4_shl(v, 16), wo = wasm_v128_and(v, hi); \
        for (int q = 0; q < (NR); q++) s[j][q] = tdm_madd(wo, o[q], tdm_madd(we, e[q], s[j][q])); \
      } \
    } \
    for (int j = 0; j < 2 * (G); j++) { \
      const int64_t i = 2 * (j < 2 ? pa : pb) + j % 2; \
      if (i < M) \
        for (int q = 0; q < (NR); q++) yt[(r + q) * ldy + i] = bf16_lanes(s[j][q]); \
    } \
  } while (0)

void tdm_bf16_gemv__simd128(int64_t R, int64_t M, int64_t K8, const float *eo, const uint16_t *w, int64_t p0, int64_t p1, float *yt,
                            int64_t ldy) {
  const v128_t hi = wasm_i32x4_splat((int32_t)0xFFFF0000u);
  const int64_t h = (p1 - p0) / 2;
  for (int64_t r = 0; r < R; r += 2) {
    const bool two = r + 1 < R;
    for (int64_t t = 0; t < h; t++) {
      const int64_t pa = p0 + t, pb = p0 + h + t;
      if (two) BF16_PANELS(2, 2);
      else BF16_PANELS(2, 1);
    }
    if ((p1 - p0) % 2) {
      const int64_t pa = p1 - 1, pb = pa;
      if (two) BF16_PANELS(1, 2);
      else BF16_PANELS(1, 1);
    }
  }
}

/* ---- the transposed convolution's col2im, by output phase ----------------------------------------- */

/* Output t = q·s + r of phase r as tdm_f32_col2im_phases__scalar sums it. */
static inline float col2im_point(const float *z, int64_t W, int64_t K, int64_t s, int64_t q, int64_t r, float b) {
  float acc = b;
  for (int64_t m = 0; r + m * s < K && m <= q; m++)
    if (q - m < W) acc += z[(r + m * s) * W + q - m];
  return acc;
}

void tdm_f32_col2im_phases__simd128(const geom *g, int64_t Og, const float *z, const float *bias, float *yg) {
  const int64_t W = g->W, K = g->KW, s = g->sw, OW = g->OW;
  for (int64_t o = 0; o < Og; o++, z += K * W) {
    float *yo = yg + o * OW;
    const float b = bias ? bias[o] : 0.0f;
    for (int64_t r = 0; r < s && r < OW; r++) {
      const int64_t Q = (OW - r + s - 1) / s, taps = r < K ? (K - 1 - r) / s + 1 : 0;
      /* q in [lo, W): every tap lands inside z; 4 at a time (each lane the scalar sum, in order) */
      const int64_t lo = taps > 0 ? taps - 1 : 0, hi = taps > 0 && W < Q ? W : Q;
      int64_t q = 0;
      for (; q < lo && q < Q; q++) yo[q * s + r] = col2im_point(z, W, K, s, q, r, b);
      for (; q + 4 <= hi; q += 4) {
        v128_t acc = wasm_f32x4_splat(b);
        for (int64_t m = 0; m < taps; m++) acc = wasm_f32x4_add(acc, wasm_v128_load(z + (r + m * s) * W + q - m));
        float *d = yo + q * s + r;
        d[0] = wasm_f32x4_extract_lane(acc, 0);
        d[s] = wasm_f32x4_extract_lane(acc, 1);
        d[2 * s] = wasm_f32x4_extract_lane(acc, 2);
        d[3 * s] = wasm_f32x4_extract_lane(acc, 3);
      }
      for (; q < Q; q++) yo[q * s + r] = col2im_point(z, W, K, s, q, r, b);
    }
  }
}

/* ---- the convolution GEMM on 16-bit integers (conv_i16.c: the operands and the float steps) ---- */

/* tdm_i16_quantize_panel__scalar's codes and scales: per block of 32 k the 8 columns' max |x| in
 * two vectors (after a pass that returns false for a NaN or ±inf; the values being finite, pmax is
 * max, one instruction in V8 where f32x4.max is several), the scales, and the codes: x / s rounded
 * to nearest even by adding 1.5·2^23 (exact for |x / s| <= 4096, which puts the integer in the low
 * mantissa bits: nearbyintf's value, without f32x4.nearest and the float→int conversion, a long
 * sequence in V8 on x86), clamped and masked to 0 where s is 0 in int32 lanes, narrowed and
 * interleaved so that each column's k pair is adjacent. */
bool tdm_i16_quantize_panel__simd128(int64_t K, const float *panel, int16_t *q, float *s) {
  const int64_t K32 = (K + 31) / 32 * 32;
  const v128_t zero = wasm_f32x4_splat(0.0f), lim = wasm_f32x4_splat(4095.0f), magic = wasm_f32x4_splat(12582912.0f);
  const v128_t ilim = wasm_i32x4_splat(4095), nilim = wasm_i32x4_splat(-4095);
  v128_t bad = wasm_i32x4_splat(0); /* x · 0 is ±0 for finite x, NaN for a NaN or ±inf */
  for (int64_t k = 0; k < K * 8; k += 4) bad = wasm_v128_or(bad, wasm_f32x4_ne(wasm_f32x4_mul(wasm_v128_load(panel + k), zero), zero));
  if (wasm_v128_any_true(bad)) return false;
  for (int64_t b = 0; b < K32 / 32; b++) {
    const int64_t k0 = 32 * b, kn = K - k0 < 32 ? K - k0 : 32;
    v128_t m0 = zero, m1 = zero;
    for (int64_t k = k0; k < k0 + kn; k++) {
      m0 = wasm_f32x4_pmax(m0, wasm_f32x4_abs(wasm_v128_load(panel + k * 8)));
      m1 = wasm_f32x4_pmax(m1, wasm_f32x4_abs(wasm_v128_load(panel + k * 8 + 4)));
    }
    const v128_t s0 = wasm_f32x4_div(m0, lim), s1 = wasm_f32x4_div(m1, lim);
    const v128_t pos0 = wasm_f32x4_gt(s0, zero), pos1 = wasm_f32x4_gt(s1, zero);
    wasm_v128_store(s + b * 8, s0);
    wasm_v128_store(s + b * 8 + 4, s1);
    for (int64_t k = k0; k < k0 + 32; k += 2) {
      v128_t c[4]; /* k's columns 0-3, 4-7, then k + 1's */
      for (int h = 0; h < 2; h++)
        for (int e = 0; e < 2; e++) {
          const int64_t kk = k + h;
          const v128_t x = kk < K ? wasm_v128_load(panel + kk * 8 + e * 4) : zero;
          const v128_t v = wasm_i32x4_sub(wasm_f32x4_add(wasm_f32x4_div(x, e ? s1 : s0), magic), magic); /* the integer (where s > 0) */
          c[h * 2 + e] = wasm_v128_and(wasm_i32x4_min(wasm_i32x4_max(v, nilim), ilim), e ? pos1 : pos0);
        }
      /* int32 lanes to int16 (exact: |code| <= 4095), then k and k + 1 interleaved per column */
      const v128_t lo = wasm_i16x8_narrow_i32x4(c[0], c[1]), hi = wasm_i16x8_narrow_i32x4(c[2], c[3]);
      wasm_v128_store(q + (k / 2) * 16, wasm_i16x8_shuffle(lo, hi, 0, 8, 1, 9, 2, 10, 3, 11));
      wasm_v128_store(q + (k / 2) * 16 + 8, wasm_i16x8_shuffle(lo, hi, 4, 12, 5, 13, 6, 14, 7, 15));
    }
  }
  return true;
}

/* Rows i .. i+R-1 of a against panel j's 8 columns over all K32 k, by blocks of 32: 2R
 * int32 accumulators a block (two dots a k pair and row), converted and multiplied into the float
 * totals kept in y (loaded and stored each block: 2R more accumulators would pass V8's 15 xmm
 * registers). */
#define I16_TILE(R) \
  do { \
    float *yr = y + i * ldy + j; \
    for (int64_t kb = 0; kb < K32; kb += 32) { \
      v128_t c[4][2]; \
      for (int r = 0; r < R; r++) c[r][0] = c[r][1] = wasm_i32x4_splat(0); \
      const int16_t *ar = a + i * K32 + kb, *pb = panel + kb * 8; \
      for (int kk = 0; kk < 32; kk += 2, ar += 2, pb += 16) { \
        const v128_t b0 = wasm_v128_load(pb), b1 = wasm_v128_load(pb + 8); \
        for (int r = 0; r < R; r++) { \
          const v128_t x = wasm_v128_load32_splat(ar + r * K32); \
          c[r][0] = wasm_i32x4_add(c[r][0], wasm_i32x4_dot_i16x8(x, b0)); \
          c[r][1] = wasm_i32x4_add(c[r][1], wasm_i32x4_dot_i16x8(x, b1)); \
        } \
      } \
      const v128_t s0 = wasm_v128_load(sp + (kb / 32) * 8), s1 = wasm_v128_load(sp + (kb / 32) * 8 + 4); \
      for (int r = 0; r < R; r++) { \
        v128_t t0, t1; \
        if (kb == 0) t0 = t1 = wasm_f32x4_splat(0.0f); \
        else tdm_load8(yr + r * ldy, n, &t0, &t1); \
        t0 = tdm_madd(wasm_f32x4_convert_i32x4(c[r][0]), s0, t0); \
        t1 = tdm_madd(wasm_f32x4_convert_i32x4(c[r][1]), s1, t1); \
        tdm_store8(yr + r * ldy, t0, t1, n); \
      } \
    } \
  } while (0)

void tdm_i16_conv_gemm__simd128(int64_t M, int64_t N, int64_t K32, const int16_t *a, const float *sa, const int16_t *bq, const float *sb,
                                const float *bias, float *y, int64_t ldy) {
  if (K32 == 0)
    for (int64_t i = 0; i < M; i++) memset(y + i * ldy, 0, sizeof(float) * (size_t)N);
  /* No blocking of k or rows (the float tiles' CONV_KC / CONV_MC): a's rows are the conv's weights,
   * read from memory once per call, and each tile's rows walk all of K in order, every panel in
   * turn while they are in L1 (B, the few positions' panels, stays in L2). Blocks of 256 k read each
   * row in 512-byte pieces, a pattern the prefetchers follow late; the same sums in the same order. */
  for (int64_t i = 0; i < M; i += M - i >= 4 ? 4 : 1) /* 4-row tiles, then the last M % 4 rows one at a time */
    for (int64_t j = 0; j < N; j += TDM_PANEL) {
      const int16_t *panel = bq + (j / TDM_PANEL) * K32 * TDM_PANEL;
      const float *sp = sb + (j / TDM_PANEL) * (K32 / 32) * TDM_PANEL;
      const int64_t n = N - j;
      if (M - i >= 4) I16_TILE(4);
      else I16_TILE(1);
    }
  /* the row scale and the bias, each output once */
  for (int64_t i = 0; i < M; i++) {
    const v128_t s = wasm_f32x4_splat(sa[i]), b = wasm_f32x4_splat(bias ? bias[i] : 0.0f);
    int64_t j = 0;
    for (; j + 4 <= N; j += 4) wasm_v128_store(y + i * ldy + j, tdm_madd(wasm_v128_load(y + i * ldy + j), s, b));
    if (j < N) { /* the last 1-3 columns in a vector too: the same rounding as the others */
      float t[4] = {0};
      memcpy(t, y + i * ldy + j, sizeof(float) * (size_t)(N - j));
      wasm_v128_store(t, tdm_madd(wasm_v128_load(t), s, b));
      memcpy(y + i * ldy + j, t, sizeof(float) * (size_t)(N - j));
    }
  }
}
#endif
