/* conv_rows.h — the helpers the direct convolution and pooling kernels share (conv_rows.c, the
 * scalar references; conv_simd128.c, their SIMD128 variants). src/kernels/ only. */
#ifndef TDM_CONV_ROWS_H
#define TDM_CONV_ROWS_H

#include "variants.h"

/* The columns [lo, hi) of an output row where every tap of the kernel lands inside a row of x,
 * and sw - 1 more values after the last tap (stride 2 vector loads read one past it). */
static inline void tdm__inside_columns(const tdm_conv_geom *g, int64_t *lo, int64_t *hi) {
  const int64_t last = g->W - 1 - (g->KW - 1) * g->dw - (g->sw - 1) + g->pw;
  *lo = (g->pw + g->sw - 1) / g->sw;
  *hi = last < 0 ? 0 : (last / g->sw + 1 < g->OW ? last / g->sw + 1 : g->OW);
  if (*hi < *lo) *hi = *lo;
}

/* The pooling reference's divisor for output (oh, ow) whose taps in range number `count`. */
static inline int64_t tdm__pool_div(const tdm_conv_geom *g, bool include_pad, int64_t oh, int64_t ow, int64_t count) {
  if (!include_pad) return count;
  const int64_t h0 = oh * g->sh - g->ph, w0 = ow * g->sw - g->pw;
  const int64_t h1 = h0 + g->KH > g->H + g->ph ? g->H + g->ph : h0 + g->KH, w1 = w0 + g->KW > g->W + g->pw ? g->W + g->pw : w0 + g->KW;
  return (h1 - h0) * (w1 - w0);
}

#endif
