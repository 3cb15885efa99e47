/* attention.c — scaled dot-product attention as one op, so a decode step reads the KV cache in
 * place and writes only [Tq, Dv] rows (no cache-sized temporaries). Scalar reference. */
#include "../ops.h"
#include "../util.h"
#include "vec.h"

#include <math.h>
#include <string.h>


/* q [..., H, Tq, D], k [..., Hkv, Tk, D], v [..., Hkv, Tk, Dv][, mask bool|f32 broadcastable to
 * [..., H, Tq, Tk]] → y [..., H, Tq, Dv], workspace f32 [Tk]. iattr = [has_mask, is_causal];
 * fattr = [scale]. Grouped-query attention: H is a multiple of Hkv and query head h reads k/v head
 * h / (H / Hkv), so shared KV heads are never copied. Rows whose every key is masked give zeros. */
static tdm_status attention_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const tdm_shape *qs = in[0].shape;
  const int r = qs->rank;
  const int64_t Tq = qs->dims[r - 2], D = qs->dims[r - 1], Tk = in[1].shape->dims[r - 2], Dv = in[2].shape->dims[r - 1];
  const bool has_mask = op->iattr[0] != 0, causal = op->iattr[1] != 0;
  const float scale = (float)op->fattr[0];
  float *ws = out[1].data;
  int64_t mst[TDM_MAX_RANK] = {0};
  tdm_shape full = *qs;
  full.dims[r - 1] = Tk;
  if (has_mask) tdm__broadcast_strides(in[3].shape, &full, mst);
  const int64_t batches = Tq && D ? in[0].numel / (Tq * D) : 0;
  const int64_t hkv = r >= 3 ? in[1].shape->dims[r - 3] : 1;
  const int64_t group = r >= 3 && hkv > 0 ? qs->dims[r - 3] / hkv : 1; /* query heads per KV head */
  int64_t bidx[TDM_MAX_RANK] = {0}, moff = 0;
  for (int64_t b = 0; b < batches; b++) {
    const float *q = (const float *)in[0].data + b * Tq * D;
    const float *k = (const float *)in[1].data + b / group * Tk * D;
    const float *v = (const float *)in[2].data + b / group * Tk * Dv;
    float *y = (float *)out[0].data + b * Tq * Dv;
    for (int64_t i = 0; i < Tq; i++) {
      float mx = -INFINITY;
      /* The kept keys lie in [lo, hi); only those get exp and axpy (a decode step at a small fill
       * keeps the first few keys of a large cache). Keys past i are masked when causal. */
      int64_t lo = Tk, hi = 0;
      const int64_t jend = causal && i + 1 < Tk ? i + 1 : Tk, mrow = moff + i * mst[r - 2], mstep = mst[r - 1];
      const uint8_t *mb = has_mask && in[3].dtype == TDM_BOOL ? (const uint8_t *)in[3].data + mrow : NULL;
      const float *mf = has_mask && in[3].dtype == TDM_F32 ? (const float *)in[3].data + mrow : NULL;
      for (int64_t j = 0; j < jend; j++) {
        if (mb && !mb[j * mstep]) {
          ws[j] = -INFINITY;
          continue;
        }
        float s = tdm_f32_dot(q + i * D, k + j * D, D) * scale;
        if (mf) s += mf[j * mstep];
        ws[j] = s;
        mx = (s > mx || s != s) ? s : mx;
        if (j < lo) lo = j;
        hi = j + 1;
      }
      float *yr = y + i * Dv;
      memset(yr, 0, (size_t)Dv * sizeof(float));
      if (mx == -INFINITY) continue;
      double sum = 0;
      /* masked keys are exactly 0 (expf(-inf) would be, but takes its slow underflow path) */
      for (int64_t j = lo; j < hi; j++) sum += (ws[j] = ws[j] == -INFINITY ? 0.0f : expf(ws[j] - mx));
      const float inv = (float)(1.0 / sum);
      for (int64_t j = lo; j < hi; j++) {
        const float p = ws[j] * inv;
        if (p != 0) tdm_f32_axpy(p, v + j * Dv, yr, Dv);
      }
    }
    for (int d = r - 3; d >= 0; d--) {
      if (++bidx[d] < qs->dims[d]) {
        moff += mst[d];
        break;
      }
      moff -= mst[d] * (qs->dims[d] - 1);
      bidx[d] = 0;
    }
  }
  return TDM_OK;
}

static tdm_status attention_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_out != 2 || op->n_iattr != 2 || op->n_fattr != 1 || op->n_in < 3)
    return tdm__rule(op, "takes q, k, v[, mask], outputs y and a workspace, [has_mask, is_causal], [scale]");
  const bool has_mask = op->iattr[0] != 0;
  if (op->n_in != 3u + has_mask) return tdm__rule(op, "input count does not match has_mask");
  const tdm_value *q = TDM_VAL(m, op, 0), *k = TDM_VAL(m, op, 1), *v = TDM_VAL(m, op, 2), *y = TDM_OUTVAL(m, op, 0),
                  *ws = TDM_OUTVAL(m, op, 1);
  const int r = q->shape.rank;
  if (r < 2 || k->shape.rank != r || v->shape.rank != r) return tdm__rule(op, "q, k, v must have one rank >= 2");
  if (q->dtype != TDM_F32 || k->dtype != TDM_F32 || v->dtype != TDM_F32 || y->dtype != TDM_F32 || ws->dtype != TDM_F32)
    return tdm__rule(op, "q, k, v, output and workspace must be float32");
  for (int d = 0; d < r - 3; d++)
    if (k->shape.dims[d] != q->shape.dims[d] || v->shape.dims[d] != q->shape.dims[d]) return tdm__rule(op, "batch dims of q, k, v differ");
  if (r >= 3) {
    const int64_t H = q->shape.dims[r - 3], Hkv = k->shape.dims[r - 3];
    const bool grouped = Hkv == 0 ? H == 0 : H % Hkv == 0;
    if (v->shape.dims[r - 3] != Hkv || !grouped)
      return tdm__rule(op, "k and v must have the same heads, and q's heads must be a multiple of them (grouped-query attention)");
  }
  const int64_t D = q->shape.dims[r - 1], Tk = k->shape.dims[r - 2];
  if (k->shape.dims[r - 1] != D || v->shape.dims[r - 2] != Tk) return tdm__rule(op, "k must be [..., Tk, D] and v [..., Tk, Dv]");
  tdm_shape want = q->shape;
  want.dims[r - 1] = v->shape.dims[r - 1];
  if (!tdm__shape_eq(&want, &y->shape)) return tdm__rule(op, "output must be [..., Tq, Dv]");
  if (ws->numel < Tk) return tdm__rule(op, "workspace must hold Tk floats");
  if (has_mask) {
    const tdm_value *mk = TDM_VAL(m, op, 3);
    tdm_shape full = q->shape, b;
    full.dims[r - 1] = Tk;
    if ((mk->dtype != TDM_BOOL && mk->dtype != TDM_F32) || mk->shape.rank > r || !tdm__broadcast(&mk->shape, &full, &b) || !tdm__shape_eq(&b, &full))
      return tdm__rule(op, "mask must be bool or float32 and broadcast to [..., Tq, Tk]");
  }
  return TDM_OK;
}

const tdm_opdef tdm__attention_ops[] = {
    TDM_OP(attention, 0, attention_check, attention_run),
    TDM_OP_END,
};
