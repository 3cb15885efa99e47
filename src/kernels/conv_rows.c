/* conv_rows.c — direct convolution and pooling, one output plane at a time: the scalar references,
 * per output value (their SIMD128 variants: conv_simd128.c). config.c picks the plane variant the
 * ops call (tdm_f32_conv_plane, tdm_f32_pool_plane); tests/c/kernel_selftest.c checks each SIMD128
 * piece against these. */
#include "conv_rows.h"

#include <math.h>
#include <string.h>

typedef tdm_conv_geom geom;

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

void tdm_f32_conv_plane__scalar(const geom *g, const float *xg, const float *wo, int64_t Cg, float b, float *yc) {
  for (int64_t oh = 0; oh < g->OH; oh++)
    for (int64_t ow = 0; ow < g->OW; ow++) yc[oh * g->OW + ow] = tdm_f32_conv_point__scalar(g, xg, wo, Cg, oh, ow, b);
}

/* ---- pooling ------------------------------------------------------------------------------------ */

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
    const int64_t div = tdm__pool_div(g, include_pad, oh, ow, count);
    acc = div ? acc / (float)div : 0.0f;
  }
  return acc;
}

void tdm_f32_pool_plane__scalar(const geom *g, bool is_max, bool include_pad, const float *xc, float *yc) {
  for (int64_t oh = 0; oh < g->OH; oh++)
    for (int64_t ow = 0; ow < g->OW; ow++) yc[oh * g->OW + ow] = tdm_f32_pool_point__scalar(g, is_max, include_pad, xc, oh, ow);
}
