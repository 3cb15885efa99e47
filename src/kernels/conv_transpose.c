/* conv_transpose.c — transposed convolution: the scalar reference (every input value times every
 * tap, added where it lands) and the runtime's path, a GEMM into the workspace (w rearranged at
 * export to [groups, Og·KH·KW, Cg]; x's group packed in 8-column panels, or transposed for dot
 * products at few positions) then col2im: each product added to the output position it lands on. */
#include "../util.h"
#include "conv.h"
#include "gemm.h"

typedef tdm_conv_geom geom;

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

bool tdm__col2im_phases_fit(const geom *g) { return g->H == 1 && g->OH == 1 && g->KH == 1 && g->pw == 0 && g->dw == 1 && g->sw >= 1; }

void tdm_f32_col2im_phases__scalar(const geom *g, int64_t Og, const float *z, const float *bias, float *yg) {
  const int64_t W = g->W, K = g->KW, s = g->sw, OW = g->OW;
  for (int64_t o = 0; o < Og; o++, z += K * W) {
    float *yo = yg + o * OW;
    const float b = bias ? bias[o] : 0.0f;
    for (int64_t t = 0; t < OW; t++) {
      const int64_t q = t / s, r = t % s;
      float acc = b;
      for (int64_t m = 0; r + m * s < K && m <= q; m++)
        if (q - m < W) acc += z[(r + m * s) * W + q - m];
      yo[t] = acc;
    }
  }
}

/* conv_transpose: x [N, C, (H,) W], wt [groups, Og·KH·KW, C/groups][, bias [O]] → y [N, O, (OH,) OW],
 * workspace [≥ Og·KH·KW·H·W + Cg·ceil8(H·W)]. iattr = [r, has_bias, groups, kernel(r), stride(r),
 * padding(r), dilation(r), output_padding(r)]. Per image and group: z = wt[g] @ x[n, g] (the conv
 * GEMM on x's group packed in panels), then col2im adds each of z's rows onto y (which starts as
 * the bias); 1-d without padding or dilation (Mimi's decoder) by output phase instead
 * (tdm_f32_col2im_phases: each output written once, bias + its products in the same order); with
 * kernel 2s and stride s and weights the runtime transformed at load (op->prepared), by Winograd
 * F(3,2) or F(2,2) instead, each output phase a row of a 2-tap conv (conv_wino.c). */
tdm_status tdm__conv_transpose_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int r = (int)op->iattr[0];
  const int64_t groups = op->iattr[2], O = out[0].shape->dims[1], Og = O / groups;
  geom g;
  tdm__conv_geom(&g, r, in[0].shape, out[0].shape, op->iattr + 3, op->iattr + 3 + r);
  const int64_t Cg = g.C / groups, M = Og * g.KH * g.KW, HW = g.H * g.W, OHW = g.OH * g.OW;
  const float *x = in[0].data, *wt = in[1].data, *bias = op->iattr[1] ? in[2].data : NULL;
  float *y = out[0].data, *z = out[1].data, *xp = z + M * HW;
  const bool phases = tdm__col2im_phases_fit(&g); /* 1-d, no padding or dilation: col2im writes y whole, bias included */
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t gi = 0; gi < groups; gi++) {
      float *yg = y + (n * O + gi * Og) * OHW;
      const tdm_wino_u *wu = op->prepared;
      if (phases && wu && groups == 1 && HW > TDM_CONV_DOT_MAX_N && g.sw >= 2 && g.KW == 2 * g.sw) {
        /* kernel 2s, stride s (Mimi's upsampling): Winograd F(3,2) or F(2,2) by output phase (conv_wino.c) */
        const tdm_wino wg = tdm_wino_transposed(wu->m, Og, Cg, g.sw, g.W);
        if (tdm__conv_wino(&wg, x + n * g.C * HW, wu->u, bias, yg, z, out[1].numel, TDM_CONV_ACT_NONE)) continue;
      }
      if (!phases)
        for (int64_t o = 0; o < Og; o++)
          for (int64_t i = 0; i < OHW; i++) yg[o * OHW + i] = bias ? bias[gi * Og + o] : 0.0f;
      const float *xg = x + (n * g.C + gi * Cg) * HW;
      if (HW <= TDM_CONV_DOT_MAX_N) { /* few input positions: x's group transposed, then dot products */
        for (int64_t c = 0; c < Cg; c++)
          for (int64_t p = 0; p < HW; p++) xp[p * Cg + c] = xg[c * HW + p];
        tdm__conv_dot_parallel(M, HW, Cg, wt + gi * M * Cg, xp, NULL, z, HW, TDM_CONV_ACT_NONE);
      } else {
        tdm_f32_pack_panels(Cg, HW, xg, xp);
        tdm__conv_gemm_parallel(M, HW, Cg, wt + gi * M * Cg, xp, NULL, z, HW, TDM_CONV_ACT_NONE);
      }
      if (phases) tdm__col2im_phases_parallel(&g, Og, z, bias ? bias + gi * Og : NULL, yg);
      else tdm_f32_col2im_add(&g, Og, z, yg);
    }
  return TDM_OK;
}

bool tdm__conv_t_out_size_ok(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t op, int64_t out) {
  if (s < 1 || p < 0 || d < 1 || k < 1 || op < 0 || (op >= s && op >= d) || in < 1 || in > INT64_MAX / 4 / s || k > INT64_MAX / 4 / d ||
      p > INT64_MAX / 4 || op > INT64_MAX / 4)
    return false;
  return out >= 1 && out == (in - 1) * s - 2 * p + d * (k - 1) + op + 1;
}

tdm_status tdm__conv_transpose_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_out != 2 || op->n_iattr < 3)
    return tdm__rule(
        op, "takes x, w[, bias], outputs y and a workspace, [r, has_bias, groups, kernel, stride, padding, dilation, output_padding]");
  const int64_t r = op->iattr[0], hb = op->iattr[1], groups = op->iattr[2];
  if ((r != 1 && r != 2) || (hb != 0 && hb != 1) || op->n_iattr != 3 + 5 * (uint32_t)r || op->n_in != 2 + hb)
    return tdm__rule(op, "bad spatial rank, has_bias or attribute count");
  const tdm_value *x = TDM_VAL(m, op, 0), *w = TDM_VAL(m, op, 1), *y = TDM_OUTVAL(m, op, 0), *ws = TDM_OUTVAL(m, op, 1);
  if (x->dtype != TDM_F32 || w->dtype != TDM_F32 || y->dtype != TDM_F32 || ws->dtype != TDM_F32)
    return tdm__rule(op, "operands must be float32");
  if (x->shape.rank != r + 2 || y->shape.rank != r + 2 || w->shape.rank != 3)
    return tdm__rule(op, "x and y must have rank %d, w rank 3", (int)r + 2);
  const int64_t *a = op->iattr + 3;
  const int64_t C = x->shape.dims[1], O = y->shape.dims[1];
  if (groups < 1 || C % groups || O % groups) return tdm__rule(op, "channels do not match groups");
  if (y->shape.dims[0] != x->shape.dims[0]) return tdm__rule(op, "output must be [N, O, ...]");
  const int64_t Og = O / groups, Cg = C / groups;
  size_t rows = (size_t)Og, need = 1; /* w's rows Og·KH·KW, and the workspace Og·KH·KW·H·W */
  for (int i = 0; i < r; i++) {
    if (!tdm__conv_t_out_size_ok(x->shape.dims[2 + i], a[i], a[r + i], a[2 * r + i], a[3 * r + i], a[4 * r + i], y->shape.dims[2 + i]))
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
