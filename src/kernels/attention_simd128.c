/* attention_simd128.c — the SIMD128 variant of attention's rows (declared in variants.h beside the
 * scalar reference in attention.c): four keys per step. config.c picks it where the build has
 * SIMD128; tests/c/kernel_selftest.c compares it with the reference. */
#include "variants.h"

#include <math.h>
#include <string.h>

#if TDM_SIMD128
#include "vec.h"

/* q · k_j for the four keys at k, k + ks, k + 2ks, k + 3ks (ks: the row stride, D or more): one
 * load of q serves four rows, and the four partial sums are reduced together (a transpose) instead
 * of one horizontal sum per key. */
static inline v128_t dot4__simd128(const float *q, const float *k, int64_t D, int64_t ks) {
  const float *k0 = k, *k1 = k + ks, *k2 = k1 + ks, *k3 = k2 + ks;
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

/* y += p[0] v + p[1] (v + vs) + p[2] (v + 2 vs) + p[3] (v + 3 vs) (vs: the row stride, Dv or
 * more): one load and store of y per four value rows. */
static inline void axpy4__simd128(v128_t p, const float *v, float *y, int64_t Dv, int64_t vs) {
  const float *v0 = v, *v1 = v + vs, *v2 = v1 + vs, *v3 = v2 + vs;
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
  float s = tdm_f32_dot__simd128(q, a->k + j * a->kstride, a->D) * a->scale;
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
    memset(TDM_ATTN_Y(a, g), 0, (size_t)Dv * sizeof(float));
  }
  /* Scores: each block of four K rows, loaded once, dotted with the G queries. */
  for (int64_t j = 0; j < j4; j += 4) {
    const float *kj = a->k + j * a->kstride;
    for (int64_t g = 0; g < G; g++) {
      const uint8_t *mb = TDM_ATTN_MB(a, g);
      const float *mf = TDM_ATTN_MF(a, g), *q = TDM_ATTN_Q(a, g);
      float *w = ws + g * jend;
      head_state *h = &hs[g];
      if (mb && !(mb[j * ms] && mb[(j + 1) * ms] && mb[(j + 2) * ms] && mb[(j + 3) * ms])) {
        for (int l = 0; l < 4; l++) score1__simd128(a, q, mb, mf, w, j + l, h);
        continue;
      }
      v128_t s = wasm_f32x4_mul(dot4__simd128(q, kj, D, a->kstride), sc);
      if (mf) s = wasm_f32x4_add(s, wasm_f32x4_make(mf[j * ms], mf[(j + 1) * ms], mf[(j + 2) * ms], mf[(j + 3) * ms]));
      wasm_v128_store(w + j, s);
      h->mxv = wasm_f32x4_max(h->mxv, s); /* NaN propagates, as in the scalar rule */
      if (j < h->lo) h->lo = j;
      h->hi = j + 4;
    }
  }
  for (int64_t j = j4; j < jend; j++)
    for (int64_t g = 0; g < G; g++) score1__simd128(a, TDM_ATTN_Q(a, g), TDM_ATTN_MB(a, g), TDM_ATTN_MF(a, g), ws + g * jend, j, &hs[g]);
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
    const float *vj = a->v + j * a->vstride;
    for (int64_t g = 0; g < G; g++) {
      const head_state *h = &hs[g];
      if (j < h->s0 || j >= h->s1) continue;
      float *y = TDM_ATTN_Y(a, g);
      const v128_t p = wasm_f32x4_mul(wasm_v128_load(ws + g * jend + j), wasm_f32x4_splat(h->inv));
      if (wasm_v128_any_true(wasm_f32x4_eq(p, wasm_f32x4_splat(0)))) { /* a masked or vanishing key: never 0 · v */
        float pl[4];
        wasm_v128_store(pl, p);
        for (int l = 0; l < 4; l++)
          if (pl[l] != 0) tdm_f32_axpy__simd128(pl[l], vj + l * a->vstride, y, Dv);
        continue;
      }
      axpy4__simd128(p, vj, y, Dv, a->vstride);
    }
  }
  for (int64_t g = 0; g < G; g++) {
    const head_state *h = &hs[g];
    if (h->mx == -INFINITY) continue;
    for (int64_t j = h->s1; j < h->hi; j++) {
      const float p = ws[g * jend + j] * h->inv;
      if (p != 0) tdm_f32_axpy__simd128(p, a->v + j * a->vstride, TDM_ATTN_Y(a, g), Dv);
    }
  }
}

void tdm_f32_attention_rows__simd128(const tdm_attn_rows *a, float *ws) {
  for (int64_t g0 = 0; g0 < a->G; g0 += GCHUNK) {
    tdm_attn_rows c = *a;
    c.q = TDM_ATTN_Q(a, g0), c.y = TDM_ATTN_Y(a, g0), c.mb = TDM_ATTN_MB(a, g0), c.mf = TDM_ATTN_MF(a, g0);
    c.G = a->G - g0 < GCHUNK ? a->G - g0 : GCHUNK;
    attention_chunk__simd128(&c, c.G, ws);
  }
}
#endif
