/* attention.c — scaled dot-product attention as one op, so a decode step reads the KV cache in
 * place and writes only [Tq, Dv] rows (no cache-sized temporaries). The scalar code is the
 * reference; the SIMD128 build runs four keys per step where four in a row are kept. */
#include "../ops.h"
#include "../threads.h"
#include "../util.h"
#include "vec.h"

#include <math.h>
#include <string.h>


#if defined(__wasm_simd128__)
/* q · k_j for the four keys at k, k + D, k + 2D, k + 3D: one load of q serves four rows, and the
 * four partial sums are reduced together (a transpose) instead of one horizontal sum per key. */
static inline v128_t dot4__simd128(const float *q, const float *k, int64_t D) {
  const float *k0 = k, *k1 = k + D, *k2 = k1 + D, *k3 = k2 + D;
  v128_t a0 = wasm_f32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
  int64_t d = 0;
  for (; d + 4 <= D; d += 4) {
    const v128_t qv = wasm_v128_load(q + d);
    a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(qv, wasm_v128_load(k0 + d)));
    a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(qv, wasm_v128_load(k1 + d)));
    a2 = wasm_f32x4_add(a2, wasm_f32x4_mul(qv, wasm_v128_load(k2 + d)));
    a3 = wasm_f32x4_add(a3, wasm_f32x4_mul(qv, wasm_v128_load(k3 + d)));
  }
  const v128_t u0 = wasm_f32x4_add(wasm_i32x4_shuffle(a0, a1, 0, 4, 1, 5), wasm_i32x4_shuffle(a0, a1, 2, 6, 3, 7));
  const v128_t u1 = wasm_f32x4_add(wasm_i32x4_shuffle(a2, a3, 0, 4, 1, 5), wasm_i32x4_shuffle(a2, a3, 2, 6, 3, 7));
  v128_t s = wasm_f32x4_add(wasm_i32x4_shuffle(u0, u1, 0, 1, 4, 5), wasm_i32x4_shuffle(u0, u1, 2, 3, 6, 7));
  if (d < D) {
    float t[4];
    t[0] = tdm_f32_dot__scalar(q + d, k0 + d, D - d), t[1] = tdm_f32_dot__scalar(q + d, k1 + d, D - d);
    t[2] = tdm_f32_dot__scalar(q + d, k2 + d, D - d), t[3] = tdm_f32_dot__scalar(q + d, k3 + d, D - d);
    s = wasm_f32x4_add(s, wasm_v128_load(t));
  }
  return s;
}

/* y += p[0] v + p[1] (v + Dv) + p[2] (v + 2 Dv) + p[3] (v + 3 Dv): one load and store of y per
 * four value rows. */
static inline void axpy4__simd128(v128_t p, const float *v, float *y, int64_t Dv) {
  const float *v0 = v, *v1 = v + Dv, *v2 = v1 + Dv, *v3 = v2 + Dv;
  const v128_t p0 = wasm_i32x4_shuffle(p, p, 0, 0, 0, 0), p1 = wasm_i32x4_shuffle(p, p, 1, 1, 1, 1);
  const v128_t p2 = wasm_i32x4_shuffle(p, p, 2, 2, 2, 2), p3 = wasm_i32x4_shuffle(p, p, 3, 3, 3, 3);
  int64_t d = 0;
  for (; d + 4 <= Dv; d += 4) {
    const v128_t a = wasm_f32x4_add(wasm_f32x4_mul(p0, wasm_v128_load(v0 + d)), wasm_f32x4_mul(p1, wasm_v128_load(v1 + d)));
    const v128_t b = wasm_f32x4_add(wasm_f32x4_mul(p2, wasm_v128_load(v2 + d)), wasm_f32x4_mul(p3, wasm_v128_load(v3 + d)));
    wasm_v128_store(y + d, wasm_f32x4_add(wasm_v128_load(y + d), wasm_f32x4_add(a, b)));
  }
  float pl[4];
  wasm_v128_store(pl, p);
  for (; d < Dv; d++) y[d] += pl[0] * v0[d] + pl[1] * v1[d] + pl[2] * v2[d] + pl[3] * v3[d];
}
#endif

/* One query row against keys [0, jend): scores into ws (-inf where masked), the softmax over the
 * span of kept keys, and the weighted sum of value rows into yr [Dv]. The SIMD128 build takes four
 * keys at a time where all four are kept (a KV cache's filled prefix): dot products, exp and the
 * weighted sum each run four keys per step; the scalar code is the reference (and the rest). */
static void attention_row(const float *qi, const float *k, const float *v, float *yr, float *ws, int64_t jend, int64_t D,
                          int64_t Dv, float scale, const uint8_t *mb, const float *mf, int64_t mstep) {
  float mx = -INFINITY;
  /* The kept keys lie in [lo, hi); only those get exp and axpy (a decode step at a small fill
   * keeps the first few keys of a large cache). */
  int64_t lo = jend, hi = 0, j = 0;
#if defined(__wasm_simd128__)
  v128_t mxv = wasm_f32x4_splat(-INFINITY);
  const v128_t sc = wasm_f32x4_splat(scale);
  while (j < jend) {
    if (j + 4 <= jend && (!mb || (mb[j * mstep] && mb[(j + 1) * mstep] && mb[(j + 2) * mstep] && mb[(j + 3) * mstep]))) {
      v128_t s = wasm_f32x4_mul(dot4__simd128(qi, k + j * D, D), sc);
      if (mf) s = wasm_f32x4_add(s, wasm_f32x4_make(mf[j * mstep], mf[(j + 1) * mstep], mf[(j + 2) * mstep], mf[(j + 3) * mstep]));
      wasm_v128_store(ws + j, s);
      mxv = wasm_f32x4_max(mxv, s); /* NaN propagates, as in the scalar rule below */
      if (j < lo) lo = j;
      hi = j + 4;
      j += 4;
      continue;
    }
#else
  while (j < jend) {
#endif
    if (mb && !mb[j * mstep]) {
      ws[j++] = -INFINITY;
      continue;
    }
    float s = tdm_f32_dot(qi, k + j * D, D) * scale;
    if (mf) s += mf[j * mstep];
    ws[j] = s;
    mx = (s > mx || s != s) ? s : mx;
    if (j < lo) lo = j;
    hi = ++j;
  }
#if defined(__wasm_simd128__)
  for (int l = 0; l < 4; l++) {
    float t[4];
    wasm_v128_store(t, mxv);
    mx = (t[l] > mx || t[l] != t[l]) ? t[l] : mx;
  }
#endif
  memset(yr, 0, (size_t)Dv * sizeof(float));
  if (mx == -INFINITY) return;
  double sum = 0;
  j = lo;
#if defined(__wasm_simd128__)
  {
    const v128_t m = wasm_f32x4_splat(mx);
    v128_t sv = wasm_f32x4_splat(0);
    for (; j + 4 <= hi; j += 4) { /* exp(-inf) is exactly 0 here too */
      const v128_t e = tdm_f32x4_exp(wasm_f32x4_sub(wasm_v128_load(ws + j), m));
      wasm_v128_store(ws + j, e);
      sv = wasm_f32x4_add(sv, e);
    }
    sum = (double)wasm_f32x4_extract_lane(sv, 0) + wasm_f32x4_extract_lane(sv, 1) + wasm_f32x4_extract_lane(sv, 2) +
          wasm_f32x4_extract_lane(sv, 3);
  }
#endif
  /* masked keys are exactly 0 (expf(-inf) would be, but takes its slow underflow path) */
  for (; j < hi; j++) sum += (ws[j] = ws[j] == -INFINITY ? 0.0f : expf(ws[j] - mx));
  const float inv = (float)(1.0 / sum);
  j = lo;
#if defined(__wasm_simd128__)
  {
    const v128_t iv = wasm_f32x4_splat(inv), zero = wasm_f32x4_splat(0);
    for (; j + 4 <= hi; j += 4) {
      const v128_t p = wasm_f32x4_mul(wasm_v128_load(ws + j), iv);
      if (wasm_v128_any_true(wasm_f32x4_eq(p, zero))) { /* a masked or vanishing key: skipped below, never 0 * v */
        float pl[4];
        wasm_v128_store(pl, p);
        for (int l = 0; l < 4; l++)
          if (pl[l] != 0) tdm_f32_axpy(pl[l], v + (j + l) * Dv, yr, Dv);
        continue;
      }
      axpy4__simd128(p, v + j * Dv, yr, Dv);
    }
  }
#endif
  for (; j < hi; j++) {
    const float p = ws[j] * inv;
    if (p != 0) tdm_f32_axpy(p, v + j * Dv, yr, Dv);
  }
}

/* q [..., H, Tq, D], k [..., Hkv, Tk, D], v [..., Hkv, Tk, Dv][, mask bool|f32 broadcastable to
 * [..., H, Tq, Tk]] → y [..., H, Tq, Dv], workspace f32 [Tk]. iattr = [has_mask, is_causal];
 * fattr = [scale]. Grouped-query attention: H is a multiple of Hkv and query head h reads k/v head
 * h / (H / Hkv), so shared KV heads are never copied. Rows whose every key is masked give zeros. */
typedef struct {
  const tdm_tensor *in;
  float *y, *ws; /* ws: the planned workspace [Tk], thread 0's */
  int r;
  int64_t Tq, D, Tk, Dv, group;
  bool has_mask, causal;
  float scale;
  int64_t mst[TDM_MAX_RANK];
} attn_job;

/* Rows [lo, hi) of the (batch, query row) pairs: each row on its own, so any split gives the same
 * values. */
static void attention_part(void *c, int64_t lo, int64_t hi, int t, void *tws) {
  const attn_job *j = c;
  const tdm_tensor *in = j->in;
  const tdm_shape *qs = in[0].shape;
  const int r = j->r;
  float *ws = t == 0 ? j->ws : tws;
  for (int64_t u = lo; u < hi; u++) {
    const int64_t b = u / j->Tq, i = u % j->Tq;
    int64_t moff = 0, rest = b; /* the mask's offset for batch b: b unravelled over q's batch dims */
    for (int d = r - 3; d >= 0; d--) {
      moff += rest % qs->dims[d] * j->mst[d];
      rest /= qs->dims[d];
    }
    const float *q = (const float *)in[0].data + b * j->Tq * j->D;
    const float *k = (const float *)in[1].data + b / j->group * j->Tk * j->D;
    const float *v = (const float *)in[2].data + b / j->group * j->Tk * j->Dv;
    /* keys past i are masked when causal */
    const int64_t jend = j->causal && i + 1 < j->Tk ? i + 1 : j->Tk, mrow = moff + i * j->mst[r - 2];
    const uint8_t *mb = j->has_mask && in[3].dtype == TDM_BOOL ? (const uint8_t *)in[3].data + mrow : NULL;
    const float *mf = j->has_mask && in[3].dtype == TDM_F32 ? (const float *)in[3].data + mrow : NULL;
    attention_row(q + i * j->D, k, v, j->y + (b * j->Tq + i) * j->Dv, ws, jend, j->D, j->Dv, j->scale, mb, mf, j->mst[r - 1]);
  }
}

/* q [..., H, Tq, D], k [..., Hkv, Tk, D], v [..., Hkv, Tk, Dv][, mask bool|f32 broadcastable to
 * [..., H, Tq, Tk]] → y [..., H, Tq, Dv], workspace f32 [Tk]. iattr = [has_mask, is_causal];
 * fattr = [scale]. Grouped-query attention: H is a multiple of Hkv and query head h reads k/v head
 * h / (H / Hkv), so shared KV heads are never copied. Rows whose every key is masked give zeros.
 * Rows run in parallel (src/threads.h) when each thread's workspace holds Tk scores. */
static tdm_status attention_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const tdm_shape *qs = in[0].shape;
  const int r = qs->rank;
  attn_job j = {.in = in, .y = out[0].data, .ws = out[1].data, .r = r, .Tq = qs->dims[r - 2], .D = qs->dims[r - 1],
                .Tk = in[1].shape->dims[r - 2], .Dv = in[2].shape->dims[r - 1], .has_mask = op->iattr[0] != 0,
                .causal = op->iattr[1] != 0, .scale = (float)op->fattr[0]};
  tdm_shape full = *qs;
  full.dims[r - 1] = j.Tk;
  if (j.has_mask) tdm__broadcast_strides(in[3].shape, &full, j.mst);
  const int64_t batches = j.Tq && j.D ? in[0].numel / (j.Tq * j.D) : 0;
  const int64_t hkv = r >= 3 ? in[1].shape->dims[r - 3] : 1;
  j.group = r >= 3 && hkv > 0 ? qs->dims[r - 3] / hkv : 1; /* query heads per KV head */
  const int64_t rows = batches * j.Tq;
  if (j.Tk <= TDM_THREAD_WS_BYTES / (int64_t)sizeof(float)) tdm__parallel(rows, 1, attention_part, &j);
  else attention_part(&j, 0, rows, 0, NULL);
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
