/* attention.c — scaled dot-product attention as one op, so a decode step reads the KV cache in
 * place and writes only [Tq, Dv] rows (no cache-sized temporaries). The work is one query row of
 * the G query heads that share a K/V head (grouped-query attention): each block of K and V rows is
 * loaded from memory once and used by all G heads while it is in cache. The scalar code is the
 * reference (tdm_f32_attention_rows__scalar); the SIMD128 variant runs four keys per step. */
#include "../ops.h"
#include "../threads.h"
#include "../util.h"
#include "variants.h"
#include "vec.h"

#include <math.h>
#include <string.h>

/* Head g's query, output and mask in a tdm_attn_rows. */
#define ROW_Q(a, g) ((a)->q + (g) * (a)->qstride)
#define ROW_Y(a, g) ((a)->y + (g) * (a)->ystride)
#define ROW_MB(a, g) ((a)->mb ? (a)->mb + (g) * (a)->mhead : NULL)
#define ROW_MF(a, g) ((a)->mf ? (a)->mf + (g) * (a)->mhead : NULL)

void tdm_f32_attention_rows__scalar(const tdm_attn_rows *a, float *ws) {
  const int64_t jend = a->jend, D = a->D, Dv = a->Dv, ms = a->mstep;
  for (int64_t g = 0; g < a->G; g++) {
    const float *q = ROW_Q(a, g), *mf = ROW_MF(a, g);
    const uint8_t *mb = ROW_MB(a, g);
    float *y = ROW_Y(a, g), mx = -INFINITY;
    int64_t lo = jend, hi = 0; /* the kept keys lie in [lo, hi) */
    for (int64_t j = 0; j < jend; j++) {
      if (mb && !mb[j * ms]) {
        ws[j] = -INFINITY;
        continue;
      }
      float s = tdm_f32_dot__scalar(q, a->k + j * D, D) * a->scale;
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
      if (p != 0) tdm_f32_axpy__scalar(p, a->v + j * Dv, y, Dv); /* never 0 · v (v may hold inf) */
    }
  }
}

#if TDM_SIMD128
/* q · k_j for the four keys at k, k + D, k + 2D, k + 3D: one load of q serves four rows, and the
 * four partial sums are reduced together (a transpose) instead of one horizontal sum per key. */
static inline v128_t dot4__simd128(const float *q, const float *k, int64_t D) {
  const float *k0 = k, *k1 = k + D, *k2 = k1 + D, *k3 = k2 + D;
  v128_t a0 = wasm_f32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
  int64_t d = 0;
  for (; d + 4 <= D; d += 4) {
    const v128_t qv = wasm_v128_load(q + d);
    a0 = tdm_madd(qv, wasm_v128_load(k0 + d), a0);
    a1 = tdm_madd(qv, wasm_v128_load(k1 + d), a1);
    a2 = tdm_madd(qv, wasm_v128_load(k2 + d), a2);
    a3 = tdm_madd(qv, wasm_v128_load(k3 + d), a3);
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
    const v128_t a = tdm_madd2(wasm_v128_load(y + d), p0, wasm_v128_load(v0 + d), p1, wasm_v128_load(v1 + d));
    wasm_v128_store(y + d, tdm_madd2(a, p2, wasm_v128_load(v2 + d), p3, wasm_v128_load(v3 + d)));
  }
  float pl[4];
  wasm_v128_store(pl, p);
  for (; d < Dv; d++) y[d] += pl[0] * v0[d] + pl[1] * v1[d] + pl[2] * v2[d] + pl[3] * v3[d];
}

/* Heads of one group handled together by the SIMD128 variant (a larger group runs in chunks). */
#define GCHUNK 16

/* One head's state between the passes: running max (lanes and scalar), the kept keys [lo, hi),
 * the four-key blocks [s0, s1) (s0 a multiple of 4: blocks sit at the same keys for every head)
 * and 1 / sum. */
typedef struct {
  v128_t mxv;
  float mx, inv;
  int64_t lo, hi, s0, s1;
} head_state;

/* Key j of one head on its own (a masked key, or a tail past the last block of four). */
static inline void score1__simd128(const tdm_attn_rows *a, const float *q, const uint8_t *mb, const float *mf, float *w, int64_t j,
                                   head_state *h) {
  if (mb && !mb[j * a->mstep]) {
    w[j] = -INFINITY;
    return;
  }
  float s = tdm_f32_dot__simd128(q, a->k + j * a->D, a->D) * a->scale;
  if (mf) s += mf[j * a->mstep];
  w[j] = s;
  h->mx = (s > h->mx || s != s) ? s : h->mx;
  if (j < h->lo) h->lo = j;
  h->hi = j + 1;
}

/* Each head's values depend only on its own q, mask and the keys: blocks of four keys sit at
 * multiples of 4 and each head's sums run over its own span, so results do not depend on how many
 * heads run together (or on the thread split). ws: G·jend floats. */
static void attention_chunk__simd128(const tdm_attn_rows *a, int64_t G, float *ws) {
  const int64_t jend = a->jend, D = a->D, Dv = a->Dv, ms = a->mstep, j4 = jend & ~(int64_t)3;
  const v128_t sc = wasm_f32x4_splat(a->scale);
  head_state hs[GCHUNK];
  for (int64_t g = 0; g < G; g++) {
    hs[g].mxv = wasm_f32x4_splat(-INFINITY);
    hs[g].mx = -INFINITY;
    hs[g].lo = jend, hs[g].hi = 0;
    memset(ROW_Y(a, g), 0, (size_t)Dv * sizeof(float));
  }
  /* Scores: each block of four K rows, loaded once, dotted with the G queries. */
  for (int64_t j = 0; j < j4; j += 4) {
    const float *kj = a->k + j * D;
    for (int64_t g = 0; g < G; g++) {
      const uint8_t *mb = ROW_MB(a, g);
      const float *mf = ROW_MF(a, g), *q = ROW_Q(a, g);
      float *w = ws + g * jend;
      head_state *h = &hs[g];
      if (mb && !(mb[j * ms] && mb[(j + 1) * ms] && mb[(j + 2) * ms] && mb[(j + 3) * ms])) {
        for (int l = 0; l < 4; l++) score1__simd128(a, q, mb, mf, w, j + l, h);
        continue;
      }
      v128_t s = wasm_f32x4_mul(dot4__simd128(q, kj, D), sc);
      if (mf) s = wasm_f32x4_add(s, wasm_f32x4_make(mf[j * ms], mf[(j + 1) * ms], mf[(j + 2) * ms], mf[(j + 3) * ms]));
      wasm_v128_store(w + j, s);
      h->mxv = wasm_f32x4_max(h->mxv, s); /* NaN propagates, as in the scalar rule */
      if (j < h->lo) h->lo = j;
      h->hi = j + 4;
    }
  }
  for (int64_t j = j4; j < jend; j++)
    for (int64_t g = 0; g < G; g++) score1__simd128(a, ROW_Q(a, g), ROW_MB(a, g), ROW_MF(a, g), ws + g * jend, j, &hs[g]);
  /* Softmax of each head over its kept keys (exp(-inf) is exactly 0 in the four-key blocks). */
  int64_t b0 = jend, b1 = 0; /* the blocks any head uses */
  for (int64_t g = 0; g < G; g++) {
    head_state *h = &hs[g];
    float t[4];
    wasm_v128_store(t, h->mxv);
    for (int l = 0; l < 4; l++) h->mx = (t[l] > h->mx || t[l] != t[l]) ? t[l] : h->mx;
    h->s0 = h->s1 = 0;
    if (h->mx == -INFINITY) continue; /* every key masked: zeros */
    float *w = ws + g * jend;
    h->s0 = h->lo & ~(int64_t)3;
    h->s1 = h->s0 + ((h->hi - h->s0) & ~(int64_t)3);
    const v128_t m = wasm_f32x4_splat(h->mx);
    v128_t sv = wasm_f32x4_splat(0);
    for (int64_t j = h->s0; j < h->s1; j += 4) {
      const v128_t e = tdm_f32x4_exp(wasm_f32x4_sub(wasm_v128_load(w + j), m));
      wasm_v128_store(w + j, e);
      sv = wasm_f32x4_add(sv, e);
    }
    double sum = (double)wasm_f32x4_extract_lane(sv, 0) + wasm_f32x4_extract_lane(sv, 1) + wasm_f32x4_extract_lane(sv, 2) +
                 wasm_f32x4_extract_lane(sv, 3);
    for (int64_t j = h->s1; j < h->hi; j++) sum += (w[j] = w[j] == -INFINITY ? 0.0f : expf(w[j] - h->mx));
    h->inv = (float)(1.0 / sum);
    if (h->s0 < h->s1) {
      b0 = h->s0 < b0 ? h->s0 : b0;
      b1 = h->s1 > b1 ? h->s1 : b1;
    }
  }
  /* Outputs: each block of four V rows, loaded once, added into the G outputs with their weights;
   * then each head's last keys one by one. */
  for (int64_t j = b0; j < b1; j += 4) {
    const float *vj = a->v + j * Dv;
    for (int64_t g = 0; g < G; g++) {
      const head_state *h = &hs[g];
      if (j < h->s0 || j >= h->s1) continue;
      float *y = ROW_Y(a, g);
      const v128_t p = wasm_f32x4_mul(wasm_v128_load(ws + g * jend + j), wasm_f32x4_splat(h->inv));
      if (wasm_v128_any_true(wasm_f32x4_eq(p, wasm_f32x4_splat(0)))) { /* a masked or vanishing key: never 0 · v */
        float pl[4];
        wasm_v128_store(pl, p);
        for (int l = 0; l < 4; l++)
          if (pl[l] != 0) tdm_f32_axpy__simd128(pl[l], vj + l * Dv, y, Dv);
        continue;
      }
      axpy4__simd128(p, vj, y, Dv);
    }
  }
  for (int64_t g = 0; g < G; g++) {
    const head_state *h = &hs[g];
    if (h->mx == -INFINITY) continue;
    for (int64_t j = h->s1; j < h->hi; j++) {
      const float p = ws[g * jend + j] * h->inv;
      if (p != 0) tdm_f32_axpy__simd128(p, a->v + j * Dv, ROW_Y(a, g), Dv);
    }
  }
}

void tdm_f32_attention_rows__simd128(const tdm_attn_rows *a, float *ws) {
  for (int64_t g0 = 0; g0 < a->G; g0 += GCHUNK) {
    tdm_attn_rows c = *a;
    c.q = ROW_Q(a, g0), c.y = ROW_Y(a, g0), c.mb = ROW_MB(a, g0), c.mf = ROW_MF(a, g0);
    c.G = a->G - g0 < GCHUNK ? a->G - g0 : GCHUNK;
    attention_chunk__simd128(&c, c.G, ws);
  }
}
#define attention_rows tdm_f32_attention_rows__simd128
#else
#define attention_rows tdm_f32_attention_rows__scalar
#endif

/* The op's view of one call (see attention_run). */
typedef struct {
  const tdm_tensor *in;
  float *y, *ws; /* ws: the planned workspace, thread 0's */
  int r;
  int64_t Tq, D, Tk, Dv, group, ws_heads, thread_heads; /* heads per workspace: planned, a worker's */
  bool has_mask, causal;
  float scale;
  int64_t mst[TDM_MAX_RANK];
} attn_job;

/* Items [lo, hi) of (KV head over the batch dims, query row) pairs: the group's query heads at
 * that row, as many together as the thread's workspace holds. A head's values do not depend on
 * which heads run with it, so any split gives the same bits. */
static void attention_part(void *c, int64_t lo, int64_t hi, int t, void *tws) {
  const attn_job *j = c;
  const tdm_tensor *in = j->in;
  const tdm_shape *qs = in[0].shape;
  const int r = j->r;
  float *ws = t == 0 ? j->ws : tws;
  const int64_t per = t == 0 ? j->ws_heads : j->thread_heads;
  for (int64_t u = lo; u < hi; u++) {
    const int64_t o = u / j->Tq, i = u % j->Tq, b0 = o * j->group; /* KV head o; its first query head b0 */
    int64_t moff = 0, rest = b0; /* the mask's offset for b0: b0 unravelled over q's batch dims */
    for (int d = r - 3; d >= 0; d--) {
      moff += rest % qs->dims[d] * j->mst[d];
      rest /= qs->dims[d];
    }
    /* keys past i are masked when causal */
    const int64_t jend = j->causal && i + 1 < j->Tk ? i + 1 : j->Tk, mrow = moff + i * j->mst[r - 2];
    tdm_attn_rows a = {.q = (const float *)in[0].data + (b0 * j->Tq + i) * j->D,
                       .k = (const float *)in[1].data + o * j->Tk * j->D,
                       .v = (const float *)in[2].data + o * j->Tk * j->Dv,
                       .y = j->y + (b0 * j->Tq + i) * j->Dv,
                       .qstride = j->Tq * j->D, .ystride = j->Tq * j->Dv, .jend = jend, .D = j->D, .Dv = j->Dv, .scale = j->scale,
                       .mb = j->has_mask && in[3].dtype == TDM_BOOL ? (const uint8_t *)in[3].data + mrow : NULL,
                       .mf = j->has_mask && in[3].dtype == TDM_F32 ? (const float *)in[3].data + mrow : NULL,
                       .mhead = r >= 3 ? j->mst[r - 3] : 0, .mstep = j->mst[r - 1]};
    for (int64_t g0 = 0; g0 < j->group; g0 += per) {
      tdm_attn_rows part = a;
      part.G = j->group - g0 < per ? j->group - g0 : per;
      part.q += g0 * a.qstride, part.y += g0 * a.ystride;
      if (part.mb) part.mb += g0 * a.mhead;
      if (part.mf) part.mf += g0 * a.mhead;
      attention_rows(&part, ws);
    }
  }
}

/* q [..., H, Tq, D], k [..., Hkv, Tk, D], v [..., Hkv, Tk, Dv][, mask bool|f32 broadcastable to
 * [..., H, Tq, Tk]] → y [..., H, Tq, Dv], workspace f32 [W] with W >= Tk (the exporter plans
 * G·Tk: the scores of a KV group's G = H / Hkv query heads). iattr = [has_mask, is_causal];
 * fattr = [scale]. Grouped-query attention: H is a multiple of Hkv and query head h reads k/v head
 * h / G, so shared KV heads are never copied, and each K/V row is read once for the G heads.
 * Rows whose every key is masked give zeros. (KV head, row) pairs run in parallel (src/threads.h)
 * when each thread's workspace holds Tk scores. */
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
  if (j.group < 1) j.group = 1;
  const int64_t tk = j.Tk > 0 ? j.Tk : 1, thread_floats = TDM_THREAD_WS_BYTES / (int64_t)sizeof(float);
  j.ws_heads = out[1].numel / tk, j.thread_heads = thread_floats / tk;
  if (j.ws_heads < 1) j.ws_heads = 1; /* numel >= Tk (checked at load), or Tk = 0 */
  const int64_t items = batches / j.group * j.Tq;
  if (j.thread_heads >= 1) tdm__parallel(items, 1, attention_part, &j);
  else attention_part(&j, 0, items, 0, NULL);
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
