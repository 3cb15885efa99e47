/* pool.c — max_pool and avg_pool (1-d runs as 2-d with a height of 1), one channel's plane at a
 * time by the variant config.c picks (tdm_f32_pool_plane: conv_rows.c). */
#include "conv.h"

/* max_pool / avg_pool: x [N, C, (H,) W] → y. iattr = [r, kernel(r), stride(r), padding(r),
 * dilation(r), count_include_pad]. Floor mode. */
tdm_status tdm__pool_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int r = (int)op->iattr[0];
  tdm_conv_geom g;
  tdm__conv_geom(&g, r, in[0].shape, out->shape, op->iattr + 1, op->iattr + 1 + r);
  const bool is_max = op->def->code == 0, include_pad = op->iattr[1 + 4 * r] != 0;
  const float *x = in[0].data;
  float *y = out->data;
  for (int64_t nc = 0; nc < g.N * g.C; nc++) tdm_f32_pool_plane(&g, is_max, include_pad, x + nc * g.H * g.W, y + nc * g.OH * g.OW);
  return TDM_OK;
}

tdm_status tdm__pool_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 1 || op->n_iattr < 1)
    return tdm__rule(op, "takes 1 input, 1 output, [r, kernel, stride, padding, dilation, count_include_pad]");
  const int64_t r = op->iattr[0];
  if ((r != 1 && r != 2) || op->n_iattr != 2 + 4 * (uint32_t)r) return tdm__rule(op, "bad spatial rank or attribute count");
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  if (x->dtype != TDM_F32 || y->dtype != TDM_F32 || x->shape.rank != r + 2 || y->shape.rank != r + 2)
    return tdm__rule(op, "x and y must be float32 of rank %d", (int)r + 2);
  if (y->shape.dims[0] != x->shape.dims[0] || y->shape.dims[1] != x->shape.dims[1]) return tdm__rule(op, "output must be [N, C, ...]");
  const int64_t *a = op->iattr + 1;
  for (int i = 0; i < r; i++) {
    if (a[r + i] < 1 || a[2 * r + i] < 0 || a[2 * r + i] > a[i] / 2) return tdm__rule(op, "bad stride, or padding above half the kernel");
    if (!tdm__conv_out_size_ok(x->shape.dims[2 + i], a[i], a[r + i], a[2 * r + i], a[3 * r + i], y->shape.dims[2 + i]))
      return tdm__rule(op, "spatial dim %d: output size does not follow from kernel, stride, padding and dilation", i);
  }
  return TDM_OK;
}
