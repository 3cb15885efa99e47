/* conv.c — convolution (1-d and 2-d, groups, stride, padding, dilation), transposed convolution
 * and max/avg pooling. 1-d runs as 2-d with a height of 1.
 *
 * Convolution takes one of three paths, the exporter choosing by giving the op a workspace or not:
 *  - 1×1 without groups, stride or padding: the GEMM kernel on x itself (y[n] = w @ x[n]);
 *  - with a workspace (docs/ops.md: the exporter gives one when each output sums over 16 or more
 *    products, Cg·KH·KW >= 16): im2col into the workspace in 8-column panels, a chunk of output
 *    positions at a time, then a packed GEMM with register tiles (tdm_f32_conv_gemm_*), the bias as
 *    the accumulators' start;
 *  - otherwise (depthwise, tiny kernels) directly: per output value (the scalar reference), and in
 *    the wasm build 16 (then 4) output columns at a time for strides 1 and 2; where that would
 *    leave many border columns to the scalar kernel (short rows), the group's rows are first copied
 *    with zero columns on both sides into a stack buffer (a band of rows at a time), so every
 *    column of the row runs in vectors with no bounds checks.
 * Transposed convolution is a GEMM (w rearranged at export to [groups, Og·KH·KW, Cg]; x's group
 * packed in 8-column panels in the workspace) into the workspace, then col2im: each product added to the output position it lands on.
 * Pooling: per output value, and in the wasm build 4 columns at a time where every tap of the row
 * lands inside x (strides 1 and 2). */
#include "../ops.h"
#include "../threads.h"
#include "../util.h"
#include "gemm.h"
#include "variants.h"
#include "vec.h"

#include <math.h>
#include <string.h>

typedef tdm_conv_geom geom;

/* Reads [stride(r), padding(r), dilation(r)] from attr (r = 1 or 2) and shapes into g. */
static void read_geom(int r, const int64_t *a, const tdm_shape *x, const tdm_shape *y, int64_t kh, int64_t kw, geom *g) {
  g->N = x->dims[0];
  g->C = x->dims[1];
  g->H = r == 2 ? x->dims[2] : 1;
  g->W = x->dims[1 + r];
  g->OH = r == 2 ? y->dims[2] : 1;
  g->OW = y->dims[1 + r];
  g->KH = kh;
  g->KW = kw;
  g->sh = r == 2 ? a[0] : 1;
  g->sw = a[r - 1];
  g->ph = r == 2 ? a[r] : 0;
  g->pw = a[2 * r - 1];
  g->dh = r == 2 ? a[2 * r] : 1;
  g->dw = a[3 * r - 1];
}

static bool out_size_ok(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t out) {
  if (s < 1 || p < 0 || d < 1 || k < 1 || in > INT64_MAX / 4 || k > INT64_MAX / 4 / d || p > INT64_MAX / 4) return false;
  const int64_t span = d * (k - 1) + 1;
  if (in + 2 * p < span) return false;
  return out == (in + 2 * p - span) / s + 1;
}

/* One output value of conv: sum over the group's channels and the taps that land inside x. The
 * scalar reference, and the path for border columns and non-unit strides. */
float tdm_f32_conv_point__scalar(const geom *g, const float *xg, const float *wo, int64_t Cg, int64_t oh, int64_t ow, float acc) {
  for (int64_t c = 0; c < Cg; c++)
    for (int64_t kh = 0; kh < g->KH; kh++) {
      const int64_t ih = oh * g->sh - g->ph + kh * g->dh;
      if (ih < 0 || ih >= g->H) continue;
      const float *xr = xg + (c * g->H + ih) * g->W, *wr = wo + (c * g->KH + kh) * g->KW;
      for (int64_t kw = 0; kw < g->KW; kw++) {
        const int64_t iw = ow * g->sw - g->pw + kw * g->dw;
        if (iw >= 0 && iw < g->W) acc += wr[kw] * xr[iw];
      }
    }
  return acc;
}

#if TDM_SIMD128
/* x[p], x[p + S], x[p + 2S], x[p + 3S] for S = 1 or 2 (S = 2 reads p[7] too). */
#define LOAD4S(p, S) ((S) == 1 ? wasm_v128_load(p) : wasm_i32x4_shuffle(wasm_v128_load(p), wasm_v128_load((p) + 4), 0, 2, 4, 6))

/* Output columns ow0 .. ow0 + 4V - 1 of one row (column stride S, every tap inside x), V vectors
 * of accumulators in registers over all channels and taps, stored at dst. */
#define CONV_BLOCK(V, S, dst)                                                                      \
  do {                                                                                             \
    v128_t a0 = wasm_f32x4_splat(b), a1 = a0, a2 = a0, a3 = a0;                                    \
    for (int64_t c = 0; c < Cg; c++)                                                               \
      for (int64_t kh = 0; kh < g->KH; kh++) {                                                     \
        const int64_t ih = oh * g->sh - g->ph + kh * g->dh;                                        \
        if (ih < 0 || ih >= g->H) continue;                                                        \
        const float *xr = xg + (c * g->H + ih) * g->W + ow0 * (S) - g->pw, *wr = wo + (c * g->KH + kh) * g->KW; \
        for (int64_t kw = 0; kw < g->KW; kw++) {                                                   \
          const v128_t wv = wasm_f32x4_splat(wr[kw]);                                              \
          const float *p = xr + kw * g->dw;                                                        \
          a0 = tdm_madd(wv, LOAD4S(p, S), a0);                               \
          if (V > 1) a1 = tdm_madd(wv, LOAD4S(p + 4 * (S), S), a1);          \
          if (V > 2) a2 = tdm_madd(wv, LOAD4S(p + 8 * (S), S), a2);          \
          if (V > 3) a3 = tdm_madd(wv, LOAD4S(p + 12 * (S), S), a3);         \
        }                                                                                          \
      }                                                                                            \
    wasm_v128_store((dst), a0);                                                                    \
    if (V > 1) wasm_v128_store((dst) + 4, a1);                                                     \
    if (V > 2) wasm_v128_store((dst) + 8, a2);                                                     \
    if (V > 3) wasm_v128_store((dst) + 12, a3);                                                    \
  } while (0)

int64_t tdm_f32_conv_row__simd128(const geom *g, const float *xg, const float *wo, int64_t Cg, int64_t oh, float b,
                                 float *yr, int64_t lo, int64_t hi) {
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
static void conv_tail__simd128(const geom *g, const float *xg, const float *wo, int64_t Cg, int64_t oh, float b, float *yr,
                               int64_t ow0) {
  float t[4];
  if (g->sw == 1) CONV_BLOCK(1, 1, t);
  else CONV_BLOCK(1, 2, t);
  for (int64_t i = ow0; i < g->OW; i++) yr[i] = t[i - ow0];
}

bool tdm_f32_conv_plane_padded__simd128(const geom *g, const float *xg, const float *wo, int64_t Cg, float b, float *yc,
                                        float *buf, int64_t cap) {
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
#endif

/* The columns [lo, hi) of an output row where every tap of a kernel of width KW (dilation dw,
 * stride sw, padding pw) lands inside a row of W, reading `extra` more values after the last tap
 * (stride 2 vector loads read one past it). */
static void inside_columns(int64_t W, int64_t OW, int64_t KW, int64_t sw, int64_t pw, int64_t dw, int64_t extra, int64_t *lo, int64_t *hi) {
  const int64_t last = W - 1 - (KW - 1) * dw - extra + pw;
  *lo = (pw + sw - 1) / sw;
  *hi = last < 0 ? 0 : (last / sw + 1 < OW ? last / sw + 1 : OW);
  if (*hi < *lo) *hi = *lo;
}

/* ---- convolution as a GEMM --------------------------------------------------------------------- */

int64_t tdm_conv_gemm_chunk(int64_t K, int64_t N) {
  int64_t per = TDM_CONV_CHUNK_FLOATS / (K > 0 ? K : 1) / TDM_PANEL * TDM_PANEL;
  if (per < TDM_PANEL) per = TDM_PANEL;
  const int64_t all = (N + TDM_PANEL - 1) / TDM_PANEL * TDM_PANEL;
  return per < all ? per : all;
}

void tdm_f32_im2col_packed(const geom *g, const float *xg, int64_t Cg, int64_t n0, int64_t nc, float *colp) {
  const int64_t K = Cg * g->KH * g->KW, HW = g->H * g->W;
  for (int64_t q = 0; q < nc; q += TDM_PANEL) {
    int64_t ih0[TDM_PANEL], iw0[TDM_PANEL];
    const int64_t m = nc - q < TDM_PANEL ? nc - q : TDM_PANEL;
    for (int64_t t = 0; t < TDM_PANEL; t++) {
      const int64_t p = n0 + q + (t < m ? t : m - 1), oh = p / g->OW, ow = p % g->OW;
      ih0[t] = t < m ? oh * g->sh - g->ph : -(INT64_MAX / 4); /* columns past the chunk read nothing: zeros */
      iw0[t] = ow * g->sw - g->pw;
    }
    /* The whole panel in one output row with every tap inside the row: plain strided copies. */
    const bool row = m == TDM_PANEL && ih0[0] == ih0[TDM_PANEL - 1] && iw0[0] >= 0 &&
                     iw0[TDM_PANEL - 1] + (g->KW - 1) * g->dw < g->W;
    float *dst = colp + (q / TDM_PANEL) * K * TDM_PANEL;
    for (int64_t c = 0; c < Cg; c++) {
      const float *xc = xg + c * HW;
      for (int64_t kh = 0; kh < g->KH; kh++) {
        if (row) {
          const int64_t ih = ih0[0] + kh * g->dh;
          if (ih < 0 || ih >= g->H) {
            memset(dst, 0, sizeof(float) * TDM_PANEL * (size_t)g->KW);
            dst += TDM_PANEL * g->KW;
            continue;
          }
          const float *xr = xc + ih * g->W + iw0[0];
          for (int64_t kw = 0; kw < g->KW; kw++, dst += TDM_PANEL) {
            const float *s = xr + kw * g->dw;
            if (g->sw == 1) /* a loop, not memcpy: the compiler makes it two vector moves */
              for (int64_t t = 0; t < TDM_PANEL; t++) dst[t] = s[t];
            else
              for (int64_t t = 0; t < TDM_PANEL; t++) dst[t] = s[t * g->sw];
          }
          continue;
        }
        for (int64_t kw = 0; kw < g->KW; kw++, dst += TDM_PANEL)
          for (int64_t t = 0; t < TDM_PANEL; t++) {
            const int64_t ih = ih0[t] + kh * g->dh, iw = iw0[t] + kw * g->dw;
            dst[t] = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W ? xc[ih * g->W + iw] : 0.0f;
          }
      }
    }
  }
}

void tdm_f32_conv_gemm__scalar(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y,
                               int64_t ldy) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      const float *col = bp + (j / TDM_PANEL) * K * TDM_PANEL + j % TDM_PANEL;
      float acc = bias ? bias[i] : 0.0f;
      for (int64_t k = 0; k < K; k++) acc += a[i * K + k] * col[k * TDM_PANEL];
      y[i * ldy + j] = acc;
    }
}

#if TDM_SIMD128
/* Rows i .. i+R-1, the 8 columns of panel j, over k in [k0, k0 + kc): the accumulators start at
 * the bias (first block) or at what the previous block stored. */
#define CONV_TILE(R)                                                                               \
  do {                                                                                             \
    v128_t c[4][2];                                                                                \
    for (int r = 0; r < R; r++) {                                                                  \
      if (k0 == 0) c[r][0] = c[r][1] = wasm_f32x4_splat(bias ? bias[i + r] : 0.0f);                \
      else tdm_load8(y + (i + r) * ldy + j, n, &c[r][0], &c[r][1]);                                    \
    }                                                                                              \
    const float *a0 = a + i * K + k0, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K, *pb = panel;       \
    for (size_t kk = (size_t)kc; kk > 0; kk--, a0++, a1++, a2++, a3++, pb += 8) {                  \
      const v128_t b0 = wasm_v128_load(pb), b1 = wasm_v128_load(pb + 4);                          \
      v128_t x = wasm_f32x4_splat(*a0);                                                            \
      c[0][0] = tdm_madd(x, b0, c[0][0]);                                     \
      c[0][1] = tdm_madd(x, b1, c[0][1]);                                     \
      if (R > 1) {                                                                                 \
        x = wasm_f32x4_splat(*a1);                                                                 \
        c[1][0] = tdm_madd(x, b0, c[1][0]);                                   \
        c[1][1] = tdm_madd(x, b1, c[1][1]);                                   \
      }                                                                                            \
      if (R > 2) {                                                                                 \
        x = wasm_f32x4_splat(*a2);                                                                 \
        c[2][0] = tdm_madd(x, b0, c[2][0]);                                   \
        c[2][1] = tdm_madd(x, b1, c[2][1]);                                   \
      }                                                                                            \
      if (R > 3) {                                                                                 \
        x = wasm_f32x4_splat(*a3);                                                                 \
        c[3][0] = tdm_madd(x, b0, c[3][0]);                                   \
        c[3][1] = tdm_madd(x, b1, c[3][1]);                                   \
      }                                                                                            \
    }                                                                                              \
    for (int r = 0; r < R; r++) tdm_store8(y + (i + r) * ldy + j, c[r][0], c[r][1], n);               \
  } while (0)

/* K in blocks of CONV_KC so that a panel's block (CONV_KC x 8 floats) stays in L1 while every row
 * tile walks it, and rows in blocks of CONV_MC so that the weights' block [CONV_MC, CONV_KC] (64 KiB)
 * stays in L2 while every panel is walked: without the row blocks, a tall weight matrix's block
 * ([512 or 1280 or 3072 rows, 256]: Mimi's SEANet at a streaming step) was read from memory once per
 * panel. Each output's products are summed in the same order either way (the same bits). */
#define CONV_KC 256
#define CONV_MC 64
void tdm_f32_conv_gemm_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias,
                                    float *y, int64_t ldy) {
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
#endif

/* ---- few output positions: dot products along k ------------------------------------------------ */

void tdm_f32_im2row(const geom *g, const float *xg, int64_t Cg, int64_t n0, int64_t nc, float *colt) {
  const int64_t K = Cg * g->KH * g->KW;
  for (int64_t j = 0; j < nc; j++) {
    const int64_t p = n0 + j, ih0 = p / g->OW * g->sh - g->ph, iw0 = p % g->OW * g->sw - g->pw;
    float *dst = colt + j * K;
    for (int64_t c = 0; c < Cg; c++)
      for (int64_t kh = 0; kh < g->KH; kh++) {
        const int64_t ih = ih0 + kh * g->dh;
        const float *xr = xg + (c * g->H + ih) * g->W;
        for (int64_t kw = 0; kw < g->KW; kw++, dst++) {
          const int64_t iw = iw0 + kw * g->dw;
          *dst = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W ? xr[iw] : 0.0f;
        }
      }
  }
}

void tdm_f32_conv_dot__scalar(int64_t M, int64_t N, int64_t K, const float *a, const float *colt, const float *bias, float *y,
                              int64_t ldy) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; k++) acc += a[i * K + k] * colt[j * K + k];
      y[i * ldy + j] = acc + (bias ? bias[i] : 0.0f);
    }
}

#if TDM_SIMD128
/* Rows i .. i+R-1 of a against positions 0 .. P-1 of colt: R·P accumulators of 4 lanes (lane l
 * sums the k ≡ l mod 4 products), then each summed (lanes 0+1, 2+3, then both), the K % 4 tail
 * products and the bias added in order. */
#define CONV_DOT_TILE(R, P)                                                                        \
  do {                                                                                             \
    v128_t s[R][P];                                                                                \
    for (int r = 0; r < R; r++)                                                                    \
      for (int q = 0; q < P; q++) s[r][q] = wasm_f32x4_splat(0.0f);                                \
    const float *ar = a + i * K;                                                                   \
    int64_t k = 0;                                                                                 \
    for (; k + 4 <= K; k += 4) {                                                                   \
      v128_t c[P];                                                                                 \
      for (int q = 0; q < P; q++) c[q] = wasm_v128_load(colt + q * K + k);                         \
      for (int r = 0; r < R; r++) {                                                                \
        const v128_t w = wasm_v128_load(ar + r * K + k);                                           \
        for (int q = 0; q < P; q++) s[r][q] = tdm_madd(w, c[q], s[r][q]);                          \
      }                                                                                            \
    }                                                                                              \
    for (int r = 0; r < R; r++)                                                                    \
      for (int q = 0; q < P; q++) {                                                                \
        float t = (wasm_f32x4_extract_lane(s[r][q], 0) + wasm_f32x4_extract_lane(s[r][q], 1)) +    \
                  (wasm_f32x4_extract_lane(s[r][q], 2) + wasm_f32x4_extract_lane(s[r][q], 3));     \
        for (int64_t kk = k; kk < K; kk++) t += ar[r * K + kk] * colt[q * K + kk];                 \
        y[(i + r) * ldy + q] = t + (bias ? bias[i + r] : 0.0f);                                    \
      }                                                                                            \
  } while (0)

#define CONV_DOT_ROWS(R, P)                                                                        \
  do {                                                                                             \
    int64_t i = 0;                                                                                 \
    for (; i + (R) <= M; i += (R)) CONV_DOT_TILE(R, P);                                            \
    for (; i < M; i++) CONV_DOT_TILE(1, P);                                                        \
  } while (0)

void tdm_f32_conv_dot__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *colt, const float *bias, float *y,
                               int64_t ldy) {
  for (int64_t j = 0; j < N;) {
    const int64_t left = N - j;
    if (left >= 4) {
      CONV_DOT_ROWS(2, 4);
      j += 4, colt += 4 * K, y += 4;
    } else if (left == 3) {
      CONV_DOT_ROWS(2, 3);
      j += 3, colt += 3 * K, y += 3;
    } else if (left == 2) {
      CONV_DOT_ROWS(4, 2);
      j += 2, colt += 2 * K, y += 2;
    } else {
      CONV_DOT_ROWS(8, 1);
      j += 1, colt += K, y += 1;
    }
  }
}
#define conv_dot tdm_f32_conv_dot__simd128
#else
#define conv_dot tdm_f32_conv_dot__scalar
#endif

void tdm_f32_pack_panels(int64_t K, int64_t N, const float *b, float *bp) {
  for (int64_t j = 0; j < N; j += TDM_PANEL) {
    const int64_t m = N - j < TDM_PANEL ? N - j : TDM_PANEL;
    float *dst = bp + (j / TDM_PANEL) * K * TDM_PANEL;
    for (int64_t k = 0; k < K; k++, dst += TDM_PANEL) {
      const float *src = b + k * N + j;
      if (m == TDM_PANEL)
        for (int64_t t = 0; t < TDM_PANEL; t++) dst[t] = src[t];
      else
        for (int64_t t = 0; t < TDM_PANEL; t++) dst[t] = t < m ? src[t] : 0.0f;
    }
  }
}

/* ---- transposed convolution -------------------------------------------------------------------- */

/* The geometry of a transposed convolution in g: x [N, C, H, W] is the input, y [N, O, OH, OW] the
 * output, and input position ih lands on output row ih·sh - ph + kh·dh. */
void tdm_f32_conv_transpose__scalar(const geom *g, int64_t groups, int64_t O, const float *x, const float *wt, const float *bias,
                                    float *y) {
  const int64_t Cg = g->C / groups, Og = O / groups, KK = g->KH * g->KW, OHW = g->OH * g->OW;
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t o = 0; o < O; o++) {
      float *yo = y + (n * O + o) * OHW;
      for (int64_t i = 0; i < OHW; i++) yo[i] = bias ? bias[o] : 0.0f;
      const int64_t gi = o / Og, ol = o % Og;
      for (int64_t c = 0; c < Cg; c++) {
        const float *xc = x + (n * g->C + gi * Cg + c) * g->H * g->W;
        for (int64_t ih = 0; ih < g->H; ih++)
          for (int64_t iw = 0; iw < g->W; iw++)
            for (int64_t kh = 0; kh < g->KH; kh++) {
              const int64_t oh = ih * g->sh - g->ph + kh * g->dh;
              if (oh < 0 || oh >= g->OH) continue;
              for (int64_t kw = 0; kw < g->KW; kw++) {
                const int64_t ow = iw * g->sw - g->pw + kw * g->dw;
                if (ow < 0 || ow >= g->OW) continue;
                /* wt [groups, Og·KH·KW, Cg] */
                yo[oh * g->OW + ow] += xc[ih * g->W + iw] * wt[(gi * Og * KK + ol * KK + kh * g->KW + kw) * Cg + c];
              }
            }
      }
    }
}

void tdm_f32_col2im_add(const geom *g, int64_t Og, const float *z, float *yg) {
  const int64_t HW = g->H * g->W, OHW = g->OH * g->OW;
  for (int64_t o = 0; o < Og; o++)
    for (int64_t kh = 0; kh < g->KH; kh++)
      for (int64_t kw = 0; kw < g->KW; kw++, z += HW) {
        float *yo = yg + o * OHW;
        /* iw in [lo, hi) lands inside: 0 <= iw·sw - pw + kw·dw < OW */
        const int64_t off = kw * g->dw - g->pw;
        const int64_t lo = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
        const int64_t hi0 = g->OW - off <= 0 ? 0 : (g->OW - off - 1) / g->sw + 1, hi = hi0 < g->W ? hi0 : g->W;
        for (int64_t ih = 0; ih < g->H; ih++) {
          const int64_t oh = ih * g->sh - g->ph + kh * g->dh;
          if (oh < 0 || oh >= g->OH) continue;
          float *yr = yo + oh * g->OW + off;
          const float *zr = z + ih * g->W;
          if (g->sw == 1)
            for (int64_t iw = lo; iw < hi; iw++) yr[iw] += zr[iw];
          else
            for (int64_t iw = lo; iw < hi; iw++) yr[iw * g->sw] += zr[iw];
        }
      }
}

/* conv_transpose: x [N, C, (H,) W], wt [groups, Og·KH·KW, C/groups][, bias [O]] → y [N, O, (OH,) OW],
 * workspace [≥ Og·KH·KW·H·W + Cg·ceil8(H·W)]. iattr = [r, has_bias, groups, kernel(r), stride(r), padding(r),
 * dilation(r), output_padding(r)]. Per image and group: z = wt[g] @ x[n, g] (the conv GEMM on x's
 * group packed in panels), then
 * col2im adds each of z's rows onto y (which starts as the bias). */
static void read_geom_t(int r, const int64_t *a, const tdm_shape *x, const tdm_shape *y, geom *g) {
  const int64_t *k = a, *st = a + r, *pd = a + 2 * r, *dl = a + 3 * r;
  g->N = x->dims[0];
  g->C = x->dims[1];
  g->H = r == 2 ? x->dims[2] : 1;
  g->W = x->dims[1 + r];
  g->OH = r == 2 ? y->dims[2] : 1;
  g->OW = y->dims[1 + r];
  g->KH = r == 2 ? k[0] : 1;
  g->KW = k[r - 1];
  g->sh = r == 2 ? st[0] : 1;
  g->sw = st[r - 1];
  g->ph = r == 2 ? pd[0] : 0;
  g->pw = pd[r - 1];
  g->dh = r == 2 ? dl[0] : 1;
  g->dw = dl[r - 1];
}

/* tdm_f32_conv_gemm over threads (src/threads.h): output channels (rows) in blocks of 4, the register
 * tile's height, so any split gives the same values. */
typedef struct {
  int64_t N, K, ldy;
  const float *a, *bp, *bias;
  float *y;
} conv_gemm_job;

static void conv_gemm_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const conv_gemm_job *j = c;
  (void)t, (void)ws;
  tdm_f32_conv_gemm(hi - lo, j->N, j->K, j->a + lo * j->K, j->bp, j->bias ? j->bias + lo : NULL, j->y + lo * j->ldy, j->ldy);
}

static void conv_gemm_parallel(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y,
                               int64_t ldy) {
  conv_gemm_job j = {N, K, ldy, a, bp, bias, y};
  tdm__parallel(M, 4, conv_gemm_part, &j);
}

typedef struct {
  int64_t N, K, ldy;
  const float *a, *colt, *bias;
  float *y;
} conv_dot_job;

static void conv_dot_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const conv_dot_job *j = c;
  (void)t, (void)ws;
  conv_dot(hi - lo, j->N, j->K, j->a + lo * j->K, j->colt, j->bias ? j->bias + lo : NULL, j->y + lo * j->ldy, j->ldy);
}

/* conv_dot over threads: rows in blocks of 8 (the tallest tile). */
static void conv_dot_parallel(int64_t M, int64_t N, int64_t K, const float *a, const float *colt, const float *bias, float *y,
                              int64_t ldy) {
  conv_dot_job j = {N, K, ldy, a, colt, bias, y};
  tdm__parallel(M, 8, conv_dot_part, &j);
}

static tdm_status conv_transpose_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int r = (int)op->iattr[0];
  const int64_t groups = op->iattr[2], O = out[0].shape->dims[1], Og = O / groups;
  geom g;
  read_geom_t(r, op->iattr + 3, in[0].shape, out[0].shape, &g);
  const int64_t Cg = g.C / groups, M = Og * g.KH * g.KW, HW = g.H * g.W, OHW = g.OH * g.OW;
  const float *x = in[0].data, *wt = in[1].data, *bias = op->iattr[1] ? in[2].data : NULL;
  float *y = out[0].data, *z = out[1].data, *xp = z + M * HW;
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t gi = 0; gi < groups; gi++) {
      float *yg = y + (n * O + gi * Og) * OHW;
      for (int64_t o = 0; o < Og; o++)
        for (int64_t i = 0; i < OHW; i++) yg[o * OHW + i] = bias ? bias[gi * Og + o] : 0.0f;
      const float *xg = x + (n * g.C + gi * Cg) * HW;
      if (HW <= TDM_CONV_DOT_MAX_N) { /* few input positions: x's group transposed, then dot products */
        for (int64_t c = 0; c < Cg; c++)
          for (int64_t p = 0; p < HW; p++) xp[p * Cg + c] = xg[c * HW + p];
        conv_dot_parallel(M, HW, Cg, wt + gi * M * Cg, xp, NULL, z, HW);
      } else {
        tdm_f32_pack_panels(Cg, HW, xg, xp);
        conv_gemm_parallel(M, HW, Cg, wt + gi * M * Cg, xp, NULL, z, HW);
      }
      tdm_f32_col2im_add(&g, Og, z, yg);
    }
  return TDM_OK;
}

static bool out_size_t_ok(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t op, int64_t out) {
  if (s < 1 || p < 0 || d < 1 || k < 1 || op < 0 || (op >= s && op >= d) || in < 1 || in > INT64_MAX / 4 / s ||
      k > INT64_MAX / 4 / d || p > INT64_MAX / 4 || op > INT64_MAX / 4)
    return false;
  return out >= 1 && out == (in - 1) * s - 2 * p + d * (k - 1) + op + 1;
}

static tdm_status conv_transpose_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_out != 2 || op->n_iattr < 3)
    return tdm__rule(op, "takes x, w[, bias], outputs y and a workspace, [r, has_bias, groups, kernel, stride, padding, dilation, output_padding]");
  const int64_t r = op->iattr[0], hb = op->iattr[1], groups = op->iattr[2];
  if ((r != 1 && r != 2) || (hb != 0 && hb != 1) || op->n_iattr != 3 + 5 * (uint32_t)r || op->n_in != 2 + hb)
    return tdm__rule(op, "bad spatial rank, has_bias or attribute count");
  const tdm_value *x = TDM_VAL(m, op, 0), *w = TDM_VAL(m, op, 1), *y = TDM_OUTVAL(m, op, 0), *ws = TDM_OUTVAL(m, op, 1);
  if (x->dtype != TDM_F32 || w->dtype != TDM_F32 || y->dtype != TDM_F32 || ws->dtype != TDM_F32) return tdm__rule(op, "operands must be float32");
  if (x->shape.rank != r + 2 || y->shape.rank != r + 2 || w->shape.rank != 3) return tdm__rule(op, "x and y must have rank %d, w rank 3", (int)r + 2);
  const int64_t *a = op->iattr + 3;
  const int64_t C = x->shape.dims[1], O = y->shape.dims[1];
  if (groups < 1 || C % groups || O % groups) return tdm__rule(op, "channels do not match groups");
  if (y->shape.dims[0] != x->shape.dims[0]) return tdm__rule(op, "output must be [N, O, ...]");
  const int64_t Og = O / groups, Cg = C / groups;
  size_t rows = (size_t)Og, need = 1; /* w's rows Og·KH·KW, and the workspace Og·KH·KW·H·W */
  for (int i = 0; i < r; i++) {
    if (!out_size_t_ok(x->shape.dims[2 + i], a[i], a[r + i], a[2 * r + i], a[3 * r + i], a[4 * r + i], y->shape.dims[2 + i]))
      return tdm__rule(op, "spatial dim %d: output size does not follow from kernel, stride, padding, dilation and output padding", i);
    if (!tdm__mul_size(rows, (size_t)a[i], &rows)) return tdm__rule(op, "kernel too large");
  }
  if (w->shape.dims[0] != groups || w->shape.dims[2] != Cg || (size_t)w->shape.dims[1] != rows)
    return tdm__rule(op, "w must be [groups, O/groups·kernel, C/groups]");
  if (hb) {
    const tdm_value *b = TDM_VAL(m, op, 2);
    if (b->dtype != TDM_F32 || b->shape.rank != 1 || b->shape.dims[0] != O) return tdm__rule(op, "bias must be float32 [O]");
  }
  /* H·W can exceed x's numel when x has no elements (C or N is 0): every product is checked */
  for (int i = 0; i < r; i++)
    if (!tdm__mul_size(need, (size_t)x->shape.dims[2 + i], &need)) return tdm__rule(op, "spatial size too large");
  size_t panels;
  if (need > SIZE_MAX - TDM_PANEL || !tdm__mul_size((need + TDM_PANEL - 1) / TDM_PANEL * TDM_PANEL, (size_t)Cg, &panels))
    return tdm__rule(op, "spatial size too large");
  if (!tdm__mul_size(need, rows, &need) || !tdm__add_size(need, panels, &need) || (size_t)ws->numel < need)
    return tdm__rule(op, "workspace must hold O/groups·kernel·H·W + C/groups·ceil8(H·W) floats");
  return TDM_OK;
}

/* ---- convolution -------------------------------------------------------------------------------- */

#if TDM_SIMD128
/* The direct path over zero-padded rows pays when the row path would leave more than 1/8 of the
 * columns to the scalar point kernel (short rows: depthwise convs on 14×14 and 7×7 maps). */
static bool conv_padded_pays(const geom *g, int64_t lo, int64_t hi) {
  if (g->sw != 1 && g->sw != 2) return false;
  int64_t vec = 0;
  if (lo < hi) vec = (hi - lo) / 16 * 16 + (hi - lo) % 16 / 4 * 4;
  return (g->OW - vec) * 8 > g->OW;
}

/* Zero-padding adds 0·w for each tap outside x where the reference adds nothing: the same result
 * bit for bit while every weight is finite (0·inf would be NaN) and no bias is −0 (the one start
 * from which adding +0 changes the sum: −0 + +0 = +0). Otherwise the exact row path runs. */
static bool conv_padded_exact(const float *w, int64_t nw, const float *bias, int64_t O) {
  for (int64_t i = 0; i < nw; i++)
    if (!isfinite(w[i])) return false;
  if (bias)
    for (int64_t o = 0; o < O; o++)
      if (bias[o] == 0.0f && signbit(bias[o])) return false;
  return true;
}
#endif

/* The activation fused into a conv's output (its optional last attribute; python/tandem/fuse.py):
 * 0 none, 1 relu, 2 hardswish, 3 elu (alpha 1), applied in place by the elementwise kernels to each block of y right
 * after it is written (still in cache), so the results are those of the separate op. */

#if TDM_SIMD128
#define conv_binary_row tdm_f32_binary_row__simd128
#else
#define conv_binary_row tdm_f32_binary_row__scalar
#endif

/* ELU (alpha 1) as the exporter lowers it: maximum(y, exp(minimum(y, 0)) - 1), by the same
 * elementwise kernels in the same order, a block at a time through a stack buffer while y's block
 * is in cache. The same floats as the four ops, except that the last n % 4 values of a block take
 * the exp kernel's scalar tail (expf) where the separate op may have run them in its 4-lane
 * polynomial (within its 5e-7 relative error). */
static void conv_elu(float *y, int64_t n) {
  const float zero = 0.0f, one = 1.0f;
  float t[256];
  for (int64_t i = 0; i < n; i += 256) {
    const int64_t m = n - i < 256 ? n - i : 256;
    conv_binary_row(TDM_B_MIN, y + i, 1, &zero, 0, t, m);
#if TDM_SIMD128
    if (!tdm_f32_unary__simd128(TDM_U_EXP, t, t, m))
#endif
      tdm_f32_unary__scalar(TDM_U_EXP, t, t, m);
    conv_binary_row(TDM_B_SUB, t, 1, &one, 0, t, m);
    conv_binary_row(TDM_B_MAX, y + i, 1, t, 1, y + i, m);
  }
}

static void conv_activate(int act, float *y, int64_t n) {
  if (act == TDM_CONV_ACT_NONE) return;
  if (act == TDM_CONV_ACT_ELU) {
    conv_elu(y, n);
    return;
  }
  const int code = act == TDM_CONV_ACT_RELU ? TDM_U_RELU : TDM_U_HARDSWISH;
#if TDM_SIMD128
  if (tdm_f32_unary__simd128(code, y, y, n)) return;
#endif
  tdm_f32_unary__scalar(code, y, y, n);
}

/* conv: x [N, C, (H,) W], w [O, C/groups, (KH,) KW][, bias [O]] → y [N, O, (OH,) OW][, workspace].
 * iattr = [r, has_bias, groups, stride(r), padding(r), dilation(r)[, activation]]. See the top of
 * the file for the three paths. */
static tdm_status conv_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int r = (int)op->iattr[0];
  const int64_t groups = op->iattr[2];
  const tdm_shape *ws = in[1].shape;
  geom g;
  read_geom(r, op->iattr + 3, in[0].shape, out->shape, r == 2 ? ws->dims[2] : 1, ws->dims[1 + r], &g);
  const int64_t O = ws->dims[0], Cg = ws->dims[1], Og = O / groups;
  const float *x = in[0].data, *w = in[1].data, *bias = op->iattr[1] ? in[2].data : NULL;
  const int act = op->n_iattr == 4 + 3 * (uint32_t)r ? (int)op->iattr[3 + 3 * r] : TDM_CONV_ACT_NONE;
  float *y = out->data;
  if (g.KH == 1 && g.KW == 1 && groups == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0) {
    const int64_t HW = g.H * g.W;
    for (int64_t n = 0; n < g.N; n++) {
      float *yn = y + n * O * HW;
      if (HW == 1) /* a GEMV (squeeze-excite's layers on a 1×1 map, a streaming step): dot products, 8 rows of w at once */
        conv_dot_parallel(O, 1, g.C, w, x + n * g.C, NULL, yn, 1);
      else
        tdm_f32_gemm_rows_parallel(O, HW, g.C, w, x + n * g.C * HW, yn);
      for (int64_t o = 0; o < O; o++) {
        if (bias)
          for (int64_t i = 0; i < HW; i++) yn[o * HW + i] += bias[o];
        conv_activate(act, yn + o * HW, HW);
      }
    }
    return TDM_OK;
  }
  if (op->n_out == 2) { /* im2col + GEMM */
    const int64_t K = Cg * g.KH * g.KW, N = g.OH * g.OW, chunk = tdm_conv_gemm_chunk(K, N);
    float *colp = out[1].data;
    for (int64_t n = 0; n < g.N; n++)
      for (int64_t gi = 0; gi < groups; gi++) {
        const float *xg = x + (n * g.C + gi * Cg) * g.H * g.W;
        float *yg = y + (n * O + gi * Og) * N;
        if (N <= TDM_CONV_DOT_MAX_N) { /* few output positions (a streaming step): patches as rows, dot products */
          tdm_f32_im2row(&g, xg, Cg, 0, N, colp);
          conv_dot_parallel(Og, N, K, w + gi * Og * K, colp, bias ? bias + gi * Og : NULL, yg, N);
          for (int64_t o = 0; o < Og; o++) conv_activate(act, yg + o * N, N);
          continue;
        }
        for (int64_t n0 = 0; n0 < N; n0 += chunk) {
          const int64_t nc = N - n0 < chunk ? N - n0 : chunk;
          tdm_f32_im2col_packed(&g, xg, Cg, n0, nc, colp);
          conv_gemm_parallel(Og, nc, K, w + gi * Og * K, colp, bias ? bias + gi * Og : NULL, yg + n0, N);
          for (int64_t o = 0; o < Og; o++) conv_activate(act, yg + o * N + n0, nc);
        }
      }
    return TDM_OK;
  }
  int64_t lo, hi;
  inside_columns(g.W, g.OW, g.KW, g.sw, g.pw, g.dw, g.sw - 1, &lo, &hi);
  (void)lo, (void)hi; /* used by the SIMD128 path only */
#if TDM_SIMD128
  if (conv_padded_pays(&g, lo, hi) && conv_padded_exact(w, O * Cg * g.KH * g.KW, bias, O)) {
    float buf[TDM_CONV_PAD_FLOATS];
    bool done = true;
    for (int64_t n = 0; n < g.N && done; n++)
      for (int64_t o = 0; o < O && done; o++) {
        const float *xg = x + (n * g.C + (o / Og) * Cg) * g.H * g.W, *wo = w + o * Cg * g.KH * g.KW;
        /* false only for the geometry (a band of rows does not fit), so at the first channel */
        float *yc = y + (n * O + o) * g.OH * g.OW;
        done = tdm_f32_conv_plane_padded__simd128(&g, xg, wo, Cg, bias ? bias[o] : 0.0f, yc, buf, TDM_CONV_PAD_FLOATS);
        if (done) conv_activate(act, yc, g.OH * g.OW);
      }
    if (done) return TDM_OK;
  }
#endif
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t o = 0; o < O; o++) {
      const float *xg = x + (n * g.C + (o / Og) * Cg) * g.H * g.W, *wo = w + o * Cg * g.KH * g.KW;
      const float b = bias ? bias[o] : 0.0f;
      for (int64_t oh = 0; oh < g.OH; oh++) {
        float *yr = y + ((n * O + o) * g.OH + oh) * g.OW;
        int64_t ow = 0;
#if TDM_SIMD128
        if ((g.sw == 1 || g.sw == 2) && lo < hi) {
          for (; ow < lo; ow++) yr[ow] = tdm_f32_conv_point__scalar(&g, xg, wo, Cg, oh, ow, b);
          ow = tdm_f32_conv_row__simd128(&g, xg, wo, Cg, oh, b, yr, lo, hi);
        }
#endif
        for (; ow < g.OW; ow++) yr[ow] = tdm_f32_conv_point__scalar(&g, xg, wo, Cg, oh, ow, b);
      }
      conv_activate(act, y + (n * O + o) * g.OH * g.OW, g.OH * g.OW);
    }
  return TDM_OK;
}

static tdm_status conv_check(const tdm_method *m, const tdm_op *op) {
  if ((op->n_out != 1 && op->n_out != 2) || op->n_iattr < 3)
    return tdm__rule(op, "takes x, w[, bias], outputs y[, workspace], [r, has_bias, groups, stride, padding, dilation[, activation]]");
  const int64_t r = op->iattr[0], hb = op->iattr[1], groups = op->iattr[2];
  if ((r != 1 && r != 2) || (hb != 0 && hb != 1) || (op->n_iattr != 3 + 3 * (uint32_t)r && op->n_iattr != 4 + 3 * (uint32_t)r) ||
      op->n_in != 2 + hb)
    return tdm__rule(op, "bad spatial rank, has_bias or attribute count");
  if (op->n_iattr == 4 + 3 * (uint32_t)r && (op->iattr[3 + 3 * r] < 0 || op->iattr[3 + 3 * r] >= TDM_CONV_ACT_COUNT))
    return tdm__rule(op, "activation must be 0 (none), 1 (relu), 2 (hardswish) or 3 (elu)");
  const tdm_value *x = TDM_VAL(m, op, 0), *w = TDM_VAL(m, op, 1), *y = TDM_OUTVAL(m, op, 0);
  if (x->dtype != TDM_F32 || w->dtype != TDM_F32 || y->dtype != TDM_F32) return tdm__rule(op, "operands must be float32");
  if (x->shape.rank != r + 2 || w->shape.rank != r + 2 || y->shape.rank != r + 2) return tdm__rule(op, "x, w and y must have rank %d", (int)r + 2);
  const int64_t C = x->shape.dims[1], O = w->shape.dims[0], Cg = w->shape.dims[1];
  if (groups < 1 || C % groups || O % groups || Cg != C / groups) return tdm__rule(op, "channels do not match groups");
  if (y->shape.dims[0] != x->shape.dims[0] || y->shape.dims[1] != O) return tdm__rule(op, "output must be [N, O, ...]");
  if (hb) {
    const tdm_value *b = TDM_VAL(m, op, 2);
    if (b->dtype != TDM_F32 || b->shape.rank != 1 || b->shape.dims[0] != O) return tdm__rule(op, "bias must be float32 [O]");
  }
  const int64_t *a = op->iattr + 3;
  for (int i = 0; i < r; i++)
    if (!out_size_ok(x->shape.dims[2 + i], w->shape.dims[2 + i], a[i], a[r + i], a[2 * r + i], y->shape.dims[2 + i]))
      return tdm__rule(op, "spatial dim %d: output size does not follow from kernel, stride, padding and dilation", i);
  if (op->n_out == 2) { /* im2col + GEMM: the workspace holds K x chunk floats (w's and y's sizes bound both) */
    const tdm_value *ws = TDM_OUTVAL(m, op, 1);
    size_t no = 0; /* rows of y per channel: N·O, checked (y may have no elements while N and O are large) */
    if (!tdm__mul_size((size_t)y->shape.dims[0], (size_t)O, &no)) return tdm__rule(op, "batch times channels too large");
    const int64_t K = w->numel / (O > 0 ? O : 1), N = no > 0 && no <= (size_t)y->numel ? y->numel / (int64_t)no : 0;
    if (ws->dtype != TDM_F32 || ws->numel / (K > 0 ? K : 1) < tdm_conv_gemm_chunk(K, N)) return tdm__rule(op, "workspace must be float32 of Cg·KH·KW × chunk floats (docs/ops.md)");
  }
  return TDM_OK;
}

/* The pooling reference's divisor for output (oh, ow) whose taps in range number `count`. */
static inline int64_t pool_div(const geom *g, bool include_pad, int64_t oh, int64_t ow, int64_t count) {
  if (!include_pad) return count;
  const int64_t h0 = oh * g->sh - g->ph, w0 = ow * g->sw - g->pw;
  const int64_t h1 = h0 + g->KH > g->H + g->ph ? g->H + g->ph : h0 + g->KH, w1 = w0 + g->KW > g->W + g->pw ? g->W + g->pw : w0 + g->KW;
  return (h1 - h0) * (w1 - w0);
}

#if TDM_SIMD128
#define POOL_BLOCK(S)                                                                              \
  do {                                                                                             \
    v128_t acc = wasm_f32x4_splat(is_max ? -INFINITY : 0.0f);                                      \
    for (int64_t kh = 0; kh < g->KH; kh++) {                                                       \
      const int64_t ih = oh * g->sh - g->ph + kh * g->dh;                                          \
      if (ih < 0 || ih >= g->H) continue;                                                          \
      const float *xr = xc + ih * g->W + ow0 * (S) - g->pw;                                        \
      for (int64_t kw = 0; kw < g->KW; kw++) {                                                     \
        const v128_t v = LOAD4S(xr + kw * g->dw, S);                                               \
        if (is_max) acc = wasm_v128_bitselect(v, acc, wasm_v128_or(wasm_f32x4_gt(v, acc), wasm_f32x4_ne(v, v))); \
        else acc = wasm_f32x4_add(acc, v);                                                         \
      }                                                                                            \
    }                                                                                              \
    if (!is_max) {                                                                                 \
      float d[4];                                                                                  \
      for (int t = 0; t < 4; t++) {                                                                \
        const int64_t div = pool_div(g, include_pad, oh, ow0 + t, rows * g->KW);                   \
        d[t] = div ? (float)div : NAN;                                                             \
      }                                                                                            \
      acc = wasm_f32x4_div(acc, wasm_v128_load(d));                                                \
    }                                                                                              \
    wasm_v128_store(yr + ow0, acc);                                                                \
  } while (0)

/* Output columns [lo, hi) of row oh of one channel (column stride 1 or 2, every tap of the row
 * inside x), 4 at a time, in the scalar reference's order of taps; returns the first column not
 * written. */
int64_t tdm_f32_pool_row__simd128(const geom *g, bool is_max, bool include_pad, const float *xc, int64_t oh, float *yr,
                                 int64_t lo, int64_t hi) {
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
#endif

/* One output value of pooling (the scalar reference): the max (NaN propagates) or the mean of
 * the taps of xc [H, W] that land inside. */
float tdm_f32_pool_point__scalar(const geom *g, bool is_max, bool include_pad, const float *xc, int64_t oh, int64_t ow) {
  float acc = is_max ? -INFINITY : 0.0f;
  int64_t count = 0;
  for (int64_t kh = 0; kh < g->KH; kh++)
    for (int64_t kw = 0; kw < g->KW; kw++) {
      const int64_t ih = oh * g->sh - g->ph + kh * g->dh, iw = ow * g->sw - g->pw + kw * g->dw;
      if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W) continue;
      const float v = xc[ih * g->W + iw];
      if (is_max) acc = (v > acc || v != v) ? v : acc;
      else acc += v;
      count++;
    }
  if (!is_max) {
    const int64_t div = pool_div(g, include_pad, oh, ow, count);
    acc = div ? acc / (float)div : 0.0f;
  }
  return acc;
}

/* max_pool / avg_pool: x [N, C, (H,) W] → y. iattr = [r, kernel(r), stride(r), padding(r),
 * dilation(r), count_include_pad]. Floor mode. */
static tdm_status pool_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int r = (int)op->iattr[0];
  const int64_t *k = op->iattr + 1;
  geom g;
  read_geom(r, op->iattr + 1 + r, in[0].shape, out->shape, r == 2 ? k[0] : 1, k[r - 1], &g);
  const bool is_max = op->def->code == 0, include_pad = op->iattr[1 + 4 * r] != 0;
  const float *x = in[0].data;
  float *y = out->data;
  int64_t lo, hi;
  inside_columns(g.W, g.OW, g.KW, g.sw, g.pw, g.dw, g.sw - 1, &lo, &hi);
  (void)lo, (void)hi; /* used by the SIMD128 path only */
  for (int64_t nc = 0; nc < g.N * g.C; nc++) {
    const float *xc = x + nc * g.H * g.W;
    for (int64_t oh = 0; oh < g.OH; oh++) {
      float *yr = y + (nc * g.OH + oh) * g.OW;
      int64_t ow = 0;
#if TDM_SIMD128
      if ((g.sw == 1 || g.sw == 2) && lo + 4 <= hi) {
        for (; ow < lo; ow++) yr[ow] = tdm_f32_pool_point__scalar(&g, is_max, include_pad, xc, oh, ow);
        ow = tdm_f32_pool_row__simd128(&g, is_max, include_pad, xc, oh, yr, lo, hi);
      }
#endif
      for (; ow < g.OW; ow++) yr[ow] = tdm_f32_pool_point__scalar(&g, is_max, include_pad, xc, oh, ow);
    }
  }
  return TDM_OK;
}

static tdm_status pool_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 1 || op->n_iattr < 1) return tdm__rule(op, "takes 1 input, 1 output, [r, kernel, stride, padding, dilation, count_include_pad]");
  const int64_t r = op->iattr[0];
  if ((r != 1 && r != 2) || op->n_iattr != 2 + 4 * (uint32_t)r) return tdm__rule(op, "bad spatial rank or attribute count");
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  if (x->dtype != TDM_F32 || y->dtype != TDM_F32 || x->shape.rank != r + 2 || y->shape.rank != r + 2) return tdm__rule(op, "x and y must be float32 of rank %d", (int)r + 2);
  if (y->shape.dims[0] != x->shape.dims[0] || y->shape.dims[1] != x->shape.dims[1]) return tdm__rule(op, "output must be [N, C, ...]");
  const int64_t *a = op->iattr + 1;
  for (int i = 0; i < r; i++) {
    if (a[r + i] < 1 || a[2 * r + i] < 0 || a[2 * r + i] > a[i] / 2) return tdm__rule(op, "bad stride, or padding above half the kernel");
    if (!out_size_ok(x->shape.dims[2 + i], a[i], a[r + i], a[2 * r + i], a[3 * r + i], y->shape.dims[2 + i]))
      return tdm__rule(op, "spatial dim %d: output size does not follow from kernel, stride, padding and dilation", i);
  }
  return TDM_OK;
}

const tdm_opdef tdm__conv_ops[] = {
    TDM_OP(conv, 0, conv_check, conv_run),
    TDM_OP(max_pool, 0, pool_check, pool_run),
    TDM_OP(avg_pool, 1, pool_check, pool_run),
    TDM_OP(conv_transpose, 0, conv_transpose_check, conv_transpose_run),
    TDM_OP_END,
};
