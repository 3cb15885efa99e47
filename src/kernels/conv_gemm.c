/* conv_gemm.c — convolution as a GEMM: im2col into 8-column panels and the packed conv GEMM (the
 * bias as the accumulators' start), and, at few output positions (a streaming step), im2row and dot
 * products along k; the scalar references (the SIMD128 variants are in conv_simd128.c; config.c
 * picks: tdm_f32_conv_gemm, tdm_f32_conv_dot), the fused activation and the drivers over threads. */
#include "../threads.h"
#include "conv.h"
#include "gemm.h"
#include "vec.h"

#include <string.h>

typedef tdm_conv_geom geom;

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
    const bool row = m == TDM_PANEL && ih0[0] == ih0[TDM_PANEL - 1] && iw0[0] >= 0 && iw0[TDM_PANEL - 1] + (g->KW - 1) * g->dw < g->W;
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

void tdm_f32_conv_gemm__scalar(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y, int64_t ldy) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      const float *col = bp + (j / TDM_PANEL) * K * TDM_PANEL + j % TDM_PANEL;
      float acc = bias ? bias[i] : 0.0f;
      for (int64_t k = 0; k < K; k++) acc += a[i * K + k] * col[k * TDM_PANEL];
      y[i * ldy + j] = acc;
    }
}

/* ---- without im2col's buffer: B's rows read from x (1-d, stride 1, no padding) ------------------------------------- */

void tdm_f32_conv_gemm_x__scalar(int64_t M, int64_t N, const tdm_conv_x *b, const float *a, const float *bias, float *y, int64_t ldy) {
  const int64_t K = b->Cg * b->KW, N8 = N / TDM_PANEL * TDM_PANEL;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      float acc = bias ? bias[i] : 0.0f;
      for (int64_t k = 0; k < K; k++) acc += a[i * K + k] * (j < N8 ? tdm_conv_x_row(b, k)[j] : b->tail[k * TDM_PANEL + j - N8]);
      y[i * ldy + j] = acc;
    }
}

void tdm_f32_conv_x_tail(const tdm_conv_x *b, int64_t N, float *tail) {
  const int64_t K = b->Cg * b->KW, N8 = N / TDM_PANEL * TDM_PANEL;
  for (int64_t k = 0; k < K; k++) {
    const float *row = tdm_conv_x_row(b, k);
    for (int64_t t = 0; t < TDM_PANEL; t++) tail[k * TDM_PANEL + t] = N8 + t < N ? row[N8 + t] : 0.0f;
  }
}

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

/* ---- the fused activation ---------------------------------------------------------------------- */

/* ELU (alpha 1) as the exporter lowers it: maximum(y, exp(minimum(y, 0)) - 1), by the same
 * elementwise kernels in the same order, a block at a time through a stack buffer while y's block
 * is in cache. The same floats as the four ops, except that the last n % 4 values of a block take
 * the exp kernel's scalar tail (expf) where the separate op may have run them in its 4-lane
 * polynomial (within its 5e-7 relative error). tdm_f32_elu (config.c) is this chain, or its
 * SIMD128 form with the same floats in one pass (conv_simd128.c). */
void tdm_f32_elu__chain(const float *x, float *y, int64_t n) {
  const float zero = 0.0f, one = 1.0f;
  float t[256];
  for (int64_t i = 0; i < n; i += 256) {
    const int64_t m = n - i < 256 ? n - i : 256;
    tdm_f32_binary_row(TDM_B_MIN, x + i, 1, &zero, 0, t, m);
    tdm_f32_unary(TDM_U_EXP, t, t, m);
    tdm_f32_binary_row(TDM_B_SUB, t, 1, &one, 0, t, m);
    tdm_f32_binary_row(TDM_B_MAX, x + i, 1, t, 1, y + i, m);
  }
}

static void conv_elu(float *y, int64_t n) { tdm_f32_elu(y, y, n); }

/* ---- elu: the same ELU as its own op, on a value no conv produced (after a residual add) ------- */

typedef struct {
  const float *x;
  float *y;
} elu_job;

static void elu_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const elu_job *j = c;
  (void)t, (void)ws;
  tdm_f32_elu(j->x + lo, j->y + lo, hi - lo);
}

/* elu: x → y (alpha 1), one pass in 256-float blocks instead of the four ops' four passes; any
 * split over threads gives the same floats (blocks of 256 from the start of each part, the block
 * boundaries are multiples of 256). */
tdm_status tdm__elu_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  (void)op;
  elu_job j = {in[0].data, out->data};
  if (out->numel < 16384) elu_part(&j, 0, out->numel, 0, NULL); /* below, a thread's share is a few us */
  else tdm__parallel(out->numel, 256, elu_part, &j);
  return TDM_OK;
}

tdm_status tdm__elu_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 1 || op->n_iattr || op->n_fattr) return tdm__rule(op, "takes x, outputs y, no attributes");
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  if (x->dtype != TDM_F32 || y->dtype != TDM_F32) return tdm__rule(op, "x and y must be float32");
  if (!tdm__shape_eq(&x->shape, &y->shape)) return tdm__rule(op, "output shape differs from input shape");
  return TDM_OK;
}

void tdm__conv_activate(int act, float *y, int64_t n) {
  if (act == TDM_CONV_ACT_NONE) return;
  if (act == TDM_CONV_ACT_ELU) conv_elu(y, n);
  else tdm_f32_unary(act == TDM_CONV_ACT_RELU ? TDM_U_RELU : TDM_U_HARDSWISH, y, y, n);
}

/* ---- over threads ------------------------------------------------------------------------------- */

typedef struct {
  tdm_conv_gemm_fn fn; /* tdm_f32_conv_gemm or tdm_f32_conv_dot: the same arguments */
  int64_t N, K, ldy;
  const float *a, *b, *bias;
  float *y;
  int act;
} conv_job;

static void conv_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const conv_job *j = c;
  (void)t, (void)ws;
  j->fn(hi - lo, j->N, j->K, j->a + lo * j->K, j->b, j->bias ? j->bias + lo : NULL, j->y + lo * j->ldy, j->ldy);
  if (j->act != TDM_CONV_ACT_NONE)
    for (int64_t i = lo; i < hi; i++) tdm__conv_activate(j->act, j->y + i * j->ldy, j->N);
}

/* Rows split in blocks of the kernel's tallest register tile (4 for the GEMM, 8 for the dots), so
 * any split gives the same values. */
void tdm__conv_gemm_parallel(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y, int64_t ldy,
                             int act) {
  conv_job j = {tdm_f32_conv_gemm, N, K, ldy, a, bp, bias, y, act};
  tdm__parallel(M, 4, conv_part, &j);
}

void tdm__conv_dot_parallel(int64_t M, int64_t N, int64_t K, const float *a, const float *colt, const float *bias, float *y, int64_t ldy,
                            int act) {
  conv_job j = {tdm_f32_conv_dot, N, K, ldy, a, colt, bias, y, act};
  tdm__parallel(M, 8, conv_part, &j);
}

typedef struct {
  tdm_conv_gemm_x_fn fn;
  int64_t N, ldy;
  const tdm_conv_x *b;
  const float *a, *bias;
  float *y;
  int act;
} convx_job;

static void convx_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const convx_job *j = c;
  (void)t, (void)ws;
  const int64_t K = j->b->Cg * j->b->KW;
  j->fn(hi - lo, j->N, j->b, j->a + lo * K, j->bias ? j->bias + lo : NULL, j->y + lo * j->ldy, j->ldy);
  if (j->act != TDM_CONV_ACT_NONE)
    for (int64_t i = lo; i < hi; i++) tdm__conv_activate(j->act, j->y + i * j->ldy, j->N);
}

void tdm__conv_gemm_x_parallel(tdm_conv_gemm_x_fn fn, int64_t M, int64_t N, const tdm_conv_x *b, const float *a, const float *bias,
                               float *y, int64_t ldy, int act) {
  convx_job j = {fn, N, ldy, b, a, bias, y, act};
  tdm__parallel(M, 4, convx_part, &j);
}

typedef struct {
  const tdm_conv_geom *g;
  const float *xg;
  int64_t Cg, n0, nc;
  float *colp;
} im2col_job;

static void im2col_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const im2col_job *j = c;
  (void)t, (void)ws;
  const int64_t K = j->Cg * j->g->KH * j->g->KW, p0 = lo * TDM_PANEL, p1 = hi * TDM_PANEL < j->nc ? hi * TDM_PANEL : j->nc;
  tdm_f32_im2col_packed(j->g, j->xg, j->Cg, j->n0 + p0, p1 - p0, j->colp + lo * K * TDM_PANEL);
}

/* Below about 16 K floats a thread's share costs less than handing it out (a parallel region has a
 * fixed cost even with the workers spinning; a late worker's chunks go to the others). */
void tdm__im2col_parallel(const tdm_conv_geom *g, const float *xg, int64_t Cg, int64_t n0, int64_t nc, float *colp) {
  const int64_t K = Cg * g->KH * g->KW, panels = (nc + TDM_PANEL - 1) / TDM_PANEL;
  im2col_job j = {g, xg, Cg, n0, nc, colp};
  if (K * nc < 16384) im2col_part(&j, 0, panels, 0, NULL);
  else tdm__parallel(panels, 1, im2col_part, &j);
}

typedef struct {
  int64_t N, K;
  const float *a, *b, *bias;
  float *y;
  int act;
} rows_job;

static void rows_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const rows_job *j = c;
  (void)t, (void)ws;
  if (j->K > 0) tdm_f32_gemm_rows(hi - lo, j->N, j->K, j->a + lo * j->K, j->b, j->y + lo * j->N);
  else memset(j->y + lo * j->N, 0, (size_t)((hi - lo) * j->N) * sizeof(float)); /* the tile kernels assume K >= 1 */
  for (int64_t o = lo; o < hi; o++) {
    float *yo = j->y + o * j->N;
    if (j->bias)
      for (int64_t i = 0; i < j->N; i++) yo[i] += j->bias[o];
    tdm__conv_activate(j->act, yo, j->N);
  }
}

void tdm__conv_rows_parallel(int64_t M, int64_t N, int64_t K, const float *a, const float *b, const float *bias, float *y, int act) {
  rows_job j = {N, K, a, b, bias, y, act};
  tdm__parallel(M, 4, rows_part, &j);
}

typedef struct {
  const tdm_conv_geom *g;
  const float *z, *bias;
  float *yg;
} phases_job;

static void phases_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const phases_job *j = c;
  (void)t, (void)ws;
  tdm_f32_col2im_phases(j->g, hi - lo, j->z + lo * j->g->KW * j->g->W, j->bias ? j->bias + lo : NULL, j->yg + lo * j->g->OW);
}

/* Below about 16 K outputs a thread's share costs less than handing it out. */
void tdm__col2im_phases_parallel(const tdm_conv_geom *g, int64_t Og, const float *z, const float *bias, float *yg) {
  phases_job j = {g, z, bias, yg};
  if (Og * g->OW < 16384) phases_part(&j, 0, Og, 0, NULL);
  else tdm__parallel(Og, 1, phases_part, &j);
}
