/* conv.c — convolution (1-d and 2-d, groups, stride, padding, dilation) and max/avg pooling.
 * 1-d runs as 2-d with a height of 1. Convolution: 1×1 as the GEMM kernel, otherwise a scalar
 * reference per output value with a SIMD128 path for unit-stride rows (see conv_run). Pooling is
 * scalar. */
#include "../ops.h"
#include "../util.h"
#include "gemm.h"
#include "variants.h"

#include <math.h>
#include <string.h>
#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

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

#if defined(__wasm_simd128__)
/* Output columns ow0 .. ow0 + 4V - 1 of one row (unit stride, every tap inside x), V vectors of
 * accumulators in registers over all channels and taps. */
#define CONV_BLOCK(V)                                                                              \
  do {                                                                                             \
    v128_t a0 = wasm_f32x4_splat(b), a1 = a0, a2 = a0, a3 = a0;                                    \
    for (int64_t c = 0; c < Cg; c++)                                                               \
      for (int64_t kh = 0; kh < g->KH; kh++) {                                                     \
        const int64_t ih = oh * g->sh - g->ph + kh * g->dh;                                        \
        if (ih < 0 || ih >= g->H) continue;                                                        \
        const float *xr = xg + (c * g->H + ih) * g->W + ow0 - g->pw, *wr = wo + (c * g->KH + kh) * g->KW; \
        for (int64_t kw = 0; kw < g->KW; kw++) {                                                   \
          const v128_t wv = wasm_f32x4_splat(wr[kw]);                                              \
          const float *p = xr + kw * g->dw;                                                        \
          a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(wv, wasm_v128_load(p)));                          \
          if (V > 1) a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(wv, wasm_v128_load(p + 4)));           \
          if (V > 2) a2 = wasm_f32x4_add(a2, wasm_f32x4_mul(wv, wasm_v128_load(p + 8)));           \
          if (V > 3) a3 = wasm_f32x4_add(a3, wasm_f32x4_mul(wv, wasm_v128_load(p + 12)));          \
        }                                                                                          \
      }                                                                                            \
    wasm_v128_store(yr + ow0, a0);                                                                 \
    if (V > 1) wasm_v128_store(yr + ow0 + 4, a1);                                                  \
    if (V > 2) wasm_v128_store(yr + ow0 + 8, a2);                                                  \
    if (V > 3) wasm_v128_store(yr + ow0 + 12, a3);                                                 \
  } while (0)

/* Columns [lo, hi) of one output row, where every tap lands inside x; returns the first column
 * left for conv_point (hi minus fewer than 4). */
int64_t tdm_f32_conv_row__simd128(const geom *g, const float *xg, const float *wo, int64_t Cg, int64_t oh, float b,
                                 float *yr, int64_t lo, int64_t hi) {
  int64_t ow0 = lo;
  for (; ow0 + 16 <= hi; ow0 += 16) CONV_BLOCK(4);
  for (; ow0 + 4 <= hi; ow0 += 4) CONV_BLOCK(1);
  return ow0;
}
#endif

/* conv: x [N, C, (H,) W], w [O, C/groups, (KH,) KW][, bias [O]] → y [N, O, (OH,) OW].
 * iattr = [r, has_bias, groups, stride(r), padding(r), dilation(r)].
 * A 1×1 convolution without groups, stride or padding is a matrix product per image,
 * y[n] = w[O, C] @ x[n][C, H·W], and runs as the GEMM kernel plus the bias. Otherwise each output
 * row is computed column by column; in the wasm build, with unit stride, the columns where every
 * tap lands inside x are computed 16 (then 4) at a time with the accumulators in registers. */
static tdm_status conv_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int r = (int)op->iattr[0];
  const int64_t groups = op->iattr[2];
  const tdm_shape *ws = in[1].shape;
  geom g;
  read_geom(r, op->iattr + 3, in[0].shape, out->shape, r == 2 ? ws->dims[2] : 1, ws->dims[1 + r], &g);
  const int64_t O = ws->dims[0], Cg = ws->dims[1], Og = O / groups;
  const float *x = in[0].data, *w = in[1].data, *bias = op->iattr[1] ? in[2].data : NULL;
  float *y = out->data;
  if (g.KH == 1 && g.KW == 1 && groups == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0) {
    const int64_t HW = g.H * g.W;
    for (int64_t n = 0; n < g.N; n++) {
      float *yn = y + n * O * HW;
      tdm_f32_gemm_rows(O, HW, g.C, w, x + n * g.C * HW, yn);
      if (bias)
        for (int64_t o = 0; o < O; o++)
          for (int64_t i = 0; i < HW; i++) yn[o * HW + i] += bias[o];
    }
    return TDM_OK;
  }
  /* Columns where every tap lands inside x: lo = ceil(pw / sw), hi - 1 = floor((W - 1 - span + pw) / sw). */
  const int64_t last = g.W - 1 - (g.KW - 1) * g.dw + g.pw;
  const int64_t lo = (g.pw + g.sw - 1) / g.sw, hi = last < 0 ? 0 : (last / g.sw + 1 < g.OW ? last / g.sw + 1 : g.OW);
  (void)lo, (void)hi; /* used by the SIMD128 path only */
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t o = 0; o < O; o++) {
      const float *xg = x + (n * g.C + (o / Og) * Cg) * g.H * g.W, *wo = w + o * Cg * g.KH * g.KW;
      const float b = bias ? bias[o] : 0.0f;
      for (int64_t oh = 0; oh < g.OH; oh++) {
        float *yr = y + ((n * O + o) * g.OH + oh) * g.OW;
        int64_t ow = 0;
#if defined(__wasm_simd128__)
        if (g.sw == 1 && lo < hi) {
          for (; ow < lo; ow++) yr[ow] = tdm_f32_conv_point__scalar(&g, xg, wo, Cg, oh, ow, b);
          ow = tdm_f32_conv_row__simd128(&g, xg, wo, Cg, oh, b, yr, lo, hi);
        }
#endif
        for (; ow < g.OW; ow++) yr[ow] = tdm_f32_conv_point__scalar(&g, xg, wo, Cg, oh, ow, b);
      }
    }
  return TDM_OK;
}

static tdm_status conv_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_out != 1 || op->n_iattr < 3) return tdm__rule(op, "takes x, w[, bias], 1 output, [r, has_bias, groups, stride, padding, dilation]");
  const int64_t r = op->iattr[0], hb = op->iattr[1], groups = op->iattr[2];
  if ((r != 1 && r != 2) || (hb != 0 && hb != 1) || op->n_iattr != 3 + 3 * (uint32_t)r || op->n_in != 2 + hb)
    return tdm__rule(op, "bad spatial rank, has_bias or attribute count");
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
  return TDM_OK;
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
  for (int64_t nc = 0; nc < g.N * g.C; nc++)
    for (int64_t oh = 0; oh < g.OH; oh++)
      for (int64_t ow = 0; ow < g.OW; ow++) {
        float acc = is_max ? -INFINITY : 0.0f;
        int64_t count = 0;
        for (int64_t kh = 0; kh < g.KH; kh++)
          for (int64_t kw = 0; kw < g.KW; kw++) {
            const int64_t ih = oh * g.sh - g.ph + kh * g.dh, iw = ow * g.sw - g.pw + kw * g.dw;
            if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
            const float v = x[(nc * g.H + ih) * g.W + iw];
            if (is_max) acc = (v > acc || v != v) ? v : acc;
            else acc += v;
            count++;
          }
        if (!is_max) {
          int64_t div = count;
          if (include_pad) {
            const int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
            const int64_t h1 = h0 + g.KH > g.H + g.ph ? g.H + g.ph : h0 + g.KH, w1 = w0 + g.KW > g.W + g.pw ? g.W + g.pw : w0 + g.KW;
            div = (h1 - h0) * (w1 - w0);
          }
          acc = div ? acc / (float)div : 0.0f;
        }
        y[(nc * g.OH + oh) * g.OW + ow] = acc;
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
    TDM_OP_END,
};
