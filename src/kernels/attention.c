/* attention.c — scaled dot-product attention as one op, so a decode step reads the KV cache in
 * place and writes only [Tq, Dv] rows (no cache-sized temporaries). The work is one query row of
 * the G query heads that share a K/V head (grouped-query attention): each block of K and V rows is
 * loaded from memory once and used by all G heads while it is in cache. The scalar code is the
 * reference (tdm_f32_attention_rows__scalar); the SIMD128 variant (attention_simd128.c) runs four
 * keys per step; config.c picks one. */
#include "../ops.h"
#include "../threads.h"
#include "../util.h"
#include "variants.h"
#include "vec.h"

#include <math.h>
#include <string.h>

void tdm_f32_attention_rows__scalar(const tdm_attn_rows *a, float *ws) {
  const int64_t jend = a->jend, D = a->D, Dv = a->Dv, ms = a->mstep;
  for (int64_t g = 0; g < a->G; g++) {
    const float *q = TDM_ATTN_Q(a, g), *mf = TDM_ATTN_MF(a, g);
    const uint8_t *mb = TDM_ATTN_MB(a, g);
    float *y = TDM_ATTN_Y(a, g), mx = -INFINITY;
    int64_t lo = jend, hi = 0; /* the kept keys lie in [lo, hi) */
    for (int64_t j = 0; j < jend; j++) {
      if (mb && !mb[j * ms]) {
        ws[j] = -INFINITY;
        continue;
      }
      float s = tdm_f32_dot__scalar(q, a->k + j * a->kstride, D) * a->scale;
      if (mf) s += mf[j * ms];
      ws[j] = s;
      mx = (s > mx || s != s) ? s : mx; /* NaN propagates */
      if (j < lo) lo = j;
      hi = j + 1;
    }
    memset(y, 0, (size_t)Dv * sizeof(float));
    if (mx == -INFINITY) continue; /* every key masked: zeros */
    double sum = 0;
    /* masked keys are exactly 0 (expf(-inf) would be, but takes its slow underflow path) */
    for (int64_t j = lo; j < hi; j++) sum += (ws[j] = ws[j] == -INFINITY ? 0.0f : expf(ws[j] - mx));
    const float inv = (float)(1.0 / sum);
    for (int64_t j = lo; j < hi; j++) {
      const float p = ws[j] * inv;
      if (p != 0) tdm_f32_axpy__scalar(p, a->v + j * a->vstride, y, Dv); /* never 0 · v (v may hold inf) */
    }
  }
}


/* An operand as the op reads it: dims and element strides of x.permute(perm), x contiguous at its
 * own shape (perm NULL: x itself). The strides stay inside x's elements for any permutation. */
typedef struct {
  int64_t dims[TDM_MAX_RANK], st[TDM_MAX_RANK];
} attn_view;

static void attn_view_of(const tdm_shape *s, const int64_t *perm, attn_view *v) {
  int64_t cst[TDM_MAX_RANK], acc = 1;
  for (int d = s->rank - 1; d >= 0; d--) cst[d] = acc, acc *= s->dims[d];
  for (int d = 0; d < s->rank; d++) {
    const int p = perm ? (int)perm[d] : d;
    v->dims[d] = s->dims[p], v->st[d] = cst[p];
  }
}

/* The element offset of item `flat` over the operand's dims [0, n) (row-major), by its strides. */
static int64_t attn_offset(const attn_view *v, int n, int64_t flat) {
  int64_t off = 0;
  for (int d = n - 1; d >= 0; d--) {
    off += flat % v->dims[d] * v->st[d];
    flat /= v->dims[d];
  }
  return off;
}

/* The perm of operand i (0 q, 1 k, 2 v, 3 y) in iattr [has_mask, is_causal, perm q (r), perm k (r),
 * perm v (r)[, perm y (r)]], or NULL when the op has none for it (the two-attribute form: every
 * operand as stored; without perm y, y as stored). */
static const int64_t *attn_perm(const tdm_op *op, int r, int i) {
  const uint32_t n = op->n_iattr, ur = (uint32_t)r;
  return (n == 2u + 3u * ur && i < 3) || n == 2u + 4u * ur ? op->iattr + 2 + i * r : NULL;
}

/* Whether key j is kept for any of the part's heads (bool mask). */
static bool attn_key_kept(const tdm_attn_rows *a, int64_t j) {
  for (int64_t g = 0; g < (a->mhead ? a->G : 1); g++)
    if (a->mb[g * a->mhead + j * a->mstep]) return true;
  return false;
}

/* Drops the blocks of four keys that a bool mask masks for every head of the part (a decode step's
 * cache past its fill, a sliding window's start): the keys kept stay in the same blocks of four
 * (the SIMD128 variant's), and masked keys add nothing, so the results are the same bits; without
 * it, a long cache at a small fill spends most of the op's time on masked keys. */
static void attn_trim_masked(tdm_attn_rows *a) {
  int64_t hi = a->jend, lo = 0;
  while (hi > 0 && !attn_key_kept(a, hi - 1)) hi--;
  if (hi == 0) { /* every key masked: the kernels write zeros for an empty row */
    a->jend = 0;
    return;
  }
  while (!attn_key_kept(a, lo)) lo++;
  lo &= ~(int64_t)3, hi = (hi + 3) & ~(int64_t)3;
  a->jend = (hi < a->jend ? hi : a->jend) - lo;
  a->k += lo * a->kstride, a->v += lo * a->vstride, a->mb += lo * a->mstep;
}

/* The op's view of one call (see attention_run). */
typedef struct {
  const tdm_tensor *in;
  float *y, *ws; /* ws: the planned workspace, thread 0's */
  int r;
  int64_t Tq, D, Tk, Dv, group, ws_heads, thread_heads; /* heads per workspace: planned, a worker's */
  bool has_mask, causal;
  float scale;
  int64_t mst[TDM_MAX_RANK];
  attn_view q, k, v, yv; /* q, k, v as read: [..., H, Tq, D], [..., Hkv, Tk, D], [..., Hkv, Tk, Dv]; y as written */
} attn_job;

/* Items [lo, hi) of (KV head over the batch dims, query row) pairs: the group's query heads at
 * that row, as many together as the thread's workspace holds. A head's values do not depend on
 * which heads run with it, so any split gives the same bits. */
static void attention_part(void *c, int64_t lo, int64_t hi, int t, void *tws) {
  const attn_job *j = c;
  const tdm_tensor *in = j->in;
  const int r = j->r;
  float *ws = t == 0 ? j->ws : tws;
  const int64_t per = t == 0 ? j->ws_heads : j->thread_heads;
  for (int64_t u = lo; u < hi; u++) {
    const int64_t o = u / j->Tq, i = u % j->Tq, b0 = o * j->group; /* KV head o; its first query head b0 */
    int64_t moff = 0, rest = b0;                                   /* the mask's offset for b0: b0 unravelled over q's batch dims */
    for (int d = r - 3; d >= 0; d--) {
      moff += rest % j->q.dims[d] * j->mst[d];
      rest /= j->q.dims[d];
    }
    /* keys past i are masked when causal */
    const int64_t jend = j->causal && i + 1 < j->Tk ? i + 1 : j->Tk, mrow = moff + i * j->mst[r - 2];
    tdm_attn_rows a = {.q = (const float *)in[0].data + attn_offset(&j->q, r - 2, b0) + i * j->q.st[r - 2],
                       .k = (const float *)in[1].data + attn_offset(&j->k, r - 2, o),
                       .v = (const float *)in[2].data + attn_offset(&j->v, r - 2, o),
                       .y = j->y + attn_offset(&j->yv, r - 2, b0) + i * j->yv.st[r - 2],
                       .qstride = r >= 3 ? j->q.st[r - 3] : 0,
                       .ystride = r >= 3 ? j->yv.st[r - 3] : 0,
                       .jend = jend,
                       .D = j->D,
                       .Dv = j->Dv,
                       .kstride = j->k.st[r - 2],
                       .vstride = j->v.st[r - 2],
                       .scale = j->scale,
                       .mb = j->has_mask && in[3].dtype == TDM_BOOL ? (const uint8_t *)in[3].data + mrow : NULL,
                       .mf = j->has_mask && in[3].dtype == TDM_F32 ? (const float *)in[3].data + mrow : NULL,
                       .mhead = r >= 3 ? j->mst[r - 3] : 0,
                       .mstep = j->mst[r - 1]};
    for (int64_t g0 = 0; g0 < j->group; g0 += per) {
      tdm_attn_rows part = a;
      part.G = j->group - g0 < per ? j->group - g0 : per;
      part.q += g0 * a.qstride, part.y += g0 * a.ystride;
      if (part.mb) part.mb += g0 * a.mhead;
      if (part.mf) part.mf += g0 * a.mhead;
      if (part.mb) attn_trim_masked(&part);
      tdm_f32_attention_rows(&part, ws);
    }
  }
}

/* q [..., H, Tq, D], k [..., Hkv, Tk, D], v [..., Hkv, Tk, Dv][, mask bool|f32 broadcastable to
 * [..., H, Tq, Tk]] → y [..., H, Tq, Dv], workspace f32 [W] with W >= Tk (the exporter plans
 * G·Tk: the scores of a KV group's G = H / Hkv query heads). iattr = [has_mask, is_causal] or
 * [has_mask, is_causal, perm q, perm k, perm v[, perm y]] (r each): operand x is read as
 * x.permute(perm), in place by strides (a time-first cache [B, T, Hkv, D] read as [B, Hkv, T, D]
 * without a copy), and y is written so that y.permute(perm y) is [..., H, Tq, Dv] (time-first
 * [B, Tq, H, Dv] for the out projection); each perm keeps the last dim last, so rows of D floats
 * stay contiguous. fattr = [scale].
 * Grouped-query attention: H is a multiple of Hkv and query head h reads k/v head
 * h / G, so shared KV heads are never copied, and each K/V row is read once for the G heads.
 * Rows whose every key is masked give zeros. (KV head, row) pairs run in parallel (src/threads.h)
 * when each thread's workspace holds Tk scores. */
static tdm_status attention_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int r = in[0].shape->rank;
  attn_job j = {.in = in,
                .y = out[0].data,
                .ws = out[1].data,
                .r = r,
                .has_mask = op->iattr[0] != 0,
                .causal = op->iattr[1] != 0,
                .scale = (float)op->fattr[0]};
  attn_view_of(in[0].shape, attn_perm(op, r, 0), &j.q);
  attn_view_of(in[1].shape, attn_perm(op, r, 1), &j.k);
  attn_view_of(in[2].shape, attn_perm(op, r, 2), &j.v);
  attn_view_of(out[0].shape, attn_perm(op, r, 3), &j.yv);
  j.Tq = j.q.dims[r - 2], j.D = j.q.dims[r - 1], j.Tk = j.k.dims[r - 2], j.Dv = j.v.dims[r - 1];
  tdm_shape full = {.rank = r};
  memcpy(full.dims, j.q.dims, sizeof full.dims);
  full.dims[r - 1] = j.Tk;
  if (j.has_mask) tdm__broadcast_strides(in[3].shape, &full, j.mst);
  const int64_t batches = j.Tq && j.D ? in[0].numel / (j.Tq * j.D) : 0;
  const int64_t hkv = r >= 3 ? j.k.dims[r - 3] : 1;
  j.group = r >= 3 && hkv > 0 ? j.q.dims[r - 3] / hkv : 1; /* query heads per KV head */
  if (j.group < 1) j.group = 1;
  const int64_t tk = j.Tk > 0 ? j.Tk : 1, thread_floats = TDM_THREAD_WS_BYTES / (int64_t)sizeof(float);
  j.ws_heads = out[1].numel / tk, j.thread_heads = thread_floats / tk;
  if (j.ws_heads < 1) j.ws_heads = 1; /* numel >= Tk (checked at load), or Tk = 0 */
  const int64_t items = batches / j.group * j.Tq;
  if (j.thread_heads >= 1) tdm__parallel(items, 1, attention_part, &j);
  else attention_part(&j, 0, items, 0, NULL);
  return TDM_OK;
}

/* A perm of r dims that keeps the last one last (NULL: none). */
static bool attn_perm_ok(const int64_t *perm, int r) {
  if (!perm) return true;
  bool seen[TDM_MAX_RANK] = {false};
  for (int d = 0; d < r; d++) {
    if (perm[d] < 0 || perm[d] >= r || seen[perm[d]]) return false;
    seen[perm[d]] = true;
  }
  return perm[r - 1] == r - 1;
}

/* The shape of x.permute(perm). */
static tdm_shape attn_shape(const tdm_shape *s, const int64_t *perm) {
  tdm_shape p = *s;
  if (perm)
    for (int d = 0; d < s->rank; d++) p.dims[d] = s->dims[perm[d]];
  return p;
}

static tdm_status attention_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_out != 2 || op->n_fattr != 1 || op->n_in < 3 || op->n_iattr < 2)
    return tdm__rule(op, "takes q, k, v[, mask], outputs y and a workspace, [has_mask, is_causal[, perm q, k, v]], [scale]");
  const bool has_mask = op->iattr[0] != 0;
  if (op->n_in != 3u + has_mask) return tdm__rule(op, "input count does not match has_mask");
  const tdm_value *qv = TDM_VAL(m, op, 0), *kv = TDM_VAL(m, op, 1), *vv = TDM_VAL(m, op, 2), *y = TDM_OUTVAL(m, op, 0),
                  *ws = TDM_OUTVAL(m, op, 1);
  const int r = qv->shape.rank;
  if (r < 2 || kv->shape.rank != r || vv->shape.rank != r) return tdm__rule(op, "q, k, v must have one rank >= 2");
  if (op->n_iattr != 2 && op->n_iattr != 2u + 3u * (uint32_t)r && op->n_iattr != 2u + 4u * (uint32_t)r)
    return tdm__rule(op, "integer attributes must be [has_mask, is_causal] or those and a perm of the rank for each of q, k, v[, y]");
  for (int i = 0; i < 4; i++)
    if (!attn_perm_ok(attn_perm(op, r, i), r))
      return tdm__rule(op, "each perm must be a permutation of the dims that keeps the last dim last");
  const tdm_shape qs = attn_shape(&qv->shape, attn_perm(op, r, 0)), ks = attn_shape(&kv->shape, attn_perm(op, r, 1)),
                  vs = attn_shape(&vv->shape, attn_perm(op, r, 2));
  if (qv->dtype != TDM_F32 || kv->dtype != TDM_F32 || vv->dtype != TDM_F32 || y->dtype != TDM_F32 || ws->dtype != TDM_F32)
    return tdm__rule(op, "q, k, v, output and workspace must be float32");
  for (int d = 0; d < r - 3; d++)
    if (ks.dims[d] != qs.dims[d] || vs.dims[d] != qs.dims[d]) return tdm__rule(op, "batch dims of q, k, v differ");
  if (r >= 3) {
    const int64_t H = qs.dims[r - 3], Hkv = ks.dims[r - 3];
    const bool grouped = Hkv == 0 ? H == 0 : H % Hkv == 0;
    if (vs.dims[r - 3] != Hkv || !grouped)
      return tdm__rule(op, "k and v must have the same heads, and q's heads must be a multiple of them (grouped-query attention)");
  }
  const int64_t D = qs.dims[r - 1], Tk = ks.dims[r - 2];
  if (ks.dims[r - 1] != D || vs.dims[r - 2] != Tk) return tdm__rule(op, "k must be [..., Tk, D] and v [..., Tk, Dv]");
  tdm_shape want = qs;
  want.dims[r - 1] = vs.dims[r - 1];
  const tdm_shape ys = attn_shape(&y->shape, attn_perm(op, r, 3));
  if (!tdm__shape_eq(&want, &ys)) return tdm__rule(op, "output must be [..., Tq, Dv] (through its perm)");
  if (ws->numel < Tk) return tdm__rule(op, "workspace must hold Tk floats");
  if (has_mask) {
    const tdm_value *mk = TDM_VAL(m, op, 3);
    tdm_shape full = qs, b;
    full.dims[r - 1] = Tk;
    if ((mk->dtype != TDM_BOOL && mk->dtype != TDM_F32) || mk->shape.rank > r || !tdm__broadcast(&mk->shape, &full, &b) ||
        !tdm__shape_eq(&b, &full))
      return tdm__rule(op, "mask must be bool or float32 and broadcast to [..., Tq, Tk]");
  }
  return TDM_OK;
}

const tdm_opdef tdm__attention_ops[] = {
    TDM_OP(attention, 0, attention_check, attention_run),
    TDM_OP_END,
};
