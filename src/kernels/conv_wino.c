/* conv_wino.c — Winograd minimal filtering F(m, r) for 1-d convolutions, as the correlation of r
 * taps over a view of x (variants.h, tdm_wino): F(2,3) and F(4,3) for k3 convs (stride 1, dilation 1,
 * no padding, one group: the SEANet residual units' convs in Mimi's streaming step, whose state
 * holds the left context); F(2,2) and F(3,2) for convs and transposed convs with kernel 2s and
 * stride s (SEANet's down- and upsampling), split by phase into a 2-tap conv. A tile of m outputs
 * from the T = m + r - 1 inputs d0.. and the taps w0.. takes T products instead of r·m
 * (y = Aᵀ[(G w) ⊙ (Bᵀ d)]; r = 3: Lavin & Gray's matrices, r = 2: Toom-Cook at 0, ±1, ∞):
 *   F(2,3): V = [d0 - d2, d1 + d2, d2 - d1, d1 - d3],  U = [w0, (w0 + w1 + w2)/2, (w0 - w1 + w2)/2, w2],
 *           y0 = M0 + M1 + M2,  y1 = M1 - M2 - M3;
 *   F(4,3): V = [4d0 - 5d2 + d4, (d4 - 4d2) ± (d3 - 4d1), (d4 - d2) ± 2(d3 - d1), 4d1 - 5d3 + d5],
 *           U = [w0/4, -(w0 ± w1 + w2)/6, w0/24 ± w1/12 + w2/6, w2],
 *           y0 = M0 + (M1 + M2) + (M3 + M4), y1 = (M1 - M2) + 2(M3 - M4), y2 = (M1 + M2) + 4(M3 + M4),
 *           y3 = (M1 - M2) + 8(M3 - M4) + M5;
 *   F(2,2): V = [d0 - d1, d1, d2 - d1],  U = [w0, w0 + w1, w1],  y0 = M0 + M1, y1 = M1 + M2;
 *   F(3,2): V = [d0 - d2, d1 + d2, d2 - d1, d3 - d1],  U = [w0, (w0 + w1)/2, (w0 - w1)/2, w1],
 *           y0 = M0 + M1 + M2, y1 = M1 - M2, y2 = M1 + M2 + M3;
 * with M_i = the sum over channels of U_i V_i: T GEMMs U_i [O, C] @ V_i [C, tiles] on the packed
 * conv GEMM (tdm_f32_conv_gemm, any ISA), V_i packed straight into its 8-column panels (the input
 * transform is the packing), the bias as M1's accumulators' start (M1 enters every output once;
 * a transposed conv's rows, whose bias is per output channel, add it in the output transform),
 * the output transform and the fused activation by each thread on its own rows. U is computed once
 * at load into memory the runtime owns (tdm__conv_wino_prepare: never the file's data, never
 * state), F(4,3) for k3 convs with at least TDM_CONV_WINO4_MIN_N outputs, and for the 2-tap views
 * the m whose GEMMs cover the fewest 8-column panels, only where that is at most 0.9 of the direct
 * GEMM's and the tiles fill two panels or more. Multiplies per output: 3 direct, 2 for F(2,3), 1.5 for F(4,3); 2 direct, 1.5 for F(2,2),
 * 1.33 for F(3,2). The rounding differs from the direct sum by a few ulps of the terms (more for
 * F(4,3), whose transforms scale by up to 8: tests/c/kernel_selftest.c bounds all four). */
#include "../threads.h"
#include "../util.h"
#include "conv.h"
#include "gemm.h"
#include "simd.h"

#ifndef WINO_CHUNK_FLOATS
#define WINO_CHUNK_FLOATS 32768 /* V + M of a chunk of tiles stay in L2 (at least U's size) */
#endif

tdm_wino tdm_wino_k3(int m, int64_t O, int64_t C, int64_t N) {
  return (tdm_wino){.m = m, .r = 3, .O = O, .C = C, .N = N, .xs = 1, .xw = N + 2, .L = N + 2, .lp = 0, .ys = 1, .yw = N};
}

tdm_wino tdm_wino_strided(int m, int64_t O, int64_t C, int64_t s, int64_t W, int64_t N) {
  return (tdm_wino){.m = m, .r = 2, .O = O, .C = C * s, .N = N, .xs = s, .xw = W, .L = N + 1, .lp = 0, .ys = 1, .yw = N};
}

tdm_wino tdm_wino_transposed(int m, int64_t O, int64_t C, int64_t s, int64_t T) {
  return (tdm_wino){.m = m, .r = 2, .O = O * s, .C = C, .N = T + 1, .xs = 1, .xw = T, .L = T, .lp = 1, .ys = s, .yw = s * (T + 1)};
}

void tdm_conv_wino_weights(int m, int r, int64_t O, int64_t C, const float *w, float *u) {
  const int64_t OC = O * C;
  for (int64_t i = 0; i < OC; i++) {
    if (r == 2) {
      const double w0 = w[2 * i], w1 = w[2 * i + 1];
      if (m == 2) u[i] = (float)w0, u[OC + i] = (float)(w0 + w1), u[2 * OC + i] = (float)w1;
      else u[i] = (float)w0, u[OC + i] = (float)(0.5 * (w0 + w1)), u[2 * OC + i] = (float)(0.5 * (w0 - w1)), u[3 * OC + i] = (float)w1;
      continue;
    }
    const double w0 = w[3 * i], w1 = w[3 * i + 1], w2 = w[3 * i + 2];
    if (m == 2) {
      u[i] = (float)w0, u[OC + i] = (float)(0.5 * (w0 + w1 + w2)), u[2 * OC + i] = (float)(0.5 * (w0 - w1 + w2)), u[3 * OC + i] = (float)w2;
      continue;
    }
    u[i] = (float)(w0 / 4), u[OC + i] = (float)(-(w0 + w1 + w2) / 6), u[2 * OC + i] = (float)(-(w0 - w1 + w2) / 6);
    u[3 * OC + i] = (float)(w0 / 24 + w1 / 12 + w2 / 6), u[4 * OC + i] = (float)(w0 / 24 - w1 / 12 + w2 / 6), u[5 * OC + i] = (float)w2;
  }
}

int64_t tdm_conv_wino_tiles(const tdm_wino *g, int64_t wsn) {
  const int64_t T = g->m + g->r - 1, all = ((g->N + g->m - 1) / g->m + TDM_PANEL - 1) / TDM_PANEL * TDM_PANEL;
  const int64_t want = T * g->O * g->C > WINO_CHUNK_FLOATS ? T * g->O * g->C : WINO_CHUNK_FLOATS, cap = wsn < want ? wsn : want;
  const int64_t fit = (g->O + g->C > 0 ? cap / (T * (g->O + g->C)) : 0) / TDM_PANEL * TDM_PANEL;
  return fit < all ? fit : all;
}

typedef struct {
  const tdm_wino *g;
  int64_t q0, nt, P; /* tiles [q0, q0 + nt) of this chunk, P (a multiple of 8) per transformed point */
  const float *x, *u, *bias;
  float *v, *mm, *y; /* v [T][P/8][C][8], mm [T][O][P] (in the workspace), y: the view's rows */
  int act;
} wino_job;

/* The transformed points of one tile from its inputs d (scalar: the SIMD128 lanes' operations). */
static void wino_point(int m, int r, const float *d, float *v, int64_t stride) {
  if (r == 2) {
    if (m == 2) v[0] = d[0] - d[1], v[stride] = d[1], v[2 * stride] = d[2] - d[1];
    else v[0] = d[0] - d[2], v[stride] = d[1] + d[2], v[2 * stride] = d[2] - d[1], v[3 * stride] = d[3] - d[1];
    return;
  }
  if (m == 2) {
    v[0] = d[0] - d[2], v[stride] = d[1] + d[2], v[2 * stride] = d[2] - d[1], v[3 * stride] = d[1] - d[3];
    return;
  }
  const float a = d[4] - 4.0f * d[2], b = d[3] - 4.0f * d[1], c = d[4] - d[2], e = 2.0f * (d[3] - d[1]);
  v[0] = (4.0f * d[0] - 5.0f * d[2]) + d[4], v[stride] = a + b, v[2 * stride] = a - b, v[3 * stride] = c + e, v[4 * stride] = c - e;
  v[5 * stride] = (4.0f * d[1] - 5.0f * d[3]) + d[5];
}

#if TDM_SIMD128
/* Four tiles' points in lanes: F(2,3) from s[0 .. 10) (tiles 2 apart), F(4,3) from s[0 .. 20). */
static void wino_point4(int m, const float *s, float *v, int64_t stride) {
  v128_t d[6];
  if (m == 2) {
    const v128_t a = wasm_v128_load(s), b = wasm_v128_load(s + 4), c = wasm_v128_load(s + 2), e = wasm_v128_load(s + 6);
    d[0] = wasm_i32x4_shuffle(a, b, 0, 2, 4, 6), d[1] = wasm_i32x4_shuffle(a, b, 1, 3, 5, 7);
    d[2] = wasm_i32x4_shuffle(c, e, 0, 2, 4, 6), d[3] = wasm_i32x4_shuffle(c, e, 1, 3, 5, 7);
    wasm_v128_store(v, wasm_f32x4_sub(d[0], d[2])), wasm_v128_store(v + stride, wasm_f32x4_add(d[1], d[2]));
    wasm_v128_store(v + 2 * stride, wasm_f32x4_sub(d[2], d[1])), wasm_v128_store(v + 3 * stride, wasm_f32x4_sub(d[1], d[3]));
    return;
  }
  const v128_t a0 = wasm_v128_load(s), a1 = wasm_v128_load(s + 4), a2 = wasm_v128_load(s + 8), a3 = wasm_v128_load(s + 12),
               a4 = wasm_v128_load(s + 16);
  const v128_t t0 = wasm_i32x4_shuffle(a0, a1, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(a2, a3, 0, 4, 1, 5);
  const v128_t t2 = wasm_i32x4_shuffle(a0, a1, 2, 6, 3, 7), t3 = wasm_i32x4_shuffle(a2, a3, 2, 6, 3, 7);
  const v128_t u0 = wasm_i32x4_shuffle(a1, a2, 0, 4, 1, 5), u1 = wasm_i32x4_shuffle(a3, a4, 0, 4, 1, 5);
  d[0] = wasm_i32x4_shuffle(t0, t1, 0, 1, 4, 5), d[1] = wasm_i32x4_shuffle(t0, t1, 2, 3, 6, 7);
  d[2] = wasm_i32x4_shuffle(t2, t3, 0, 1, 4, 5), d[3] = wasm_i32x4_shuffle(t2, t3, 2, 3, 6, 7);
  d[4] = wasm_i32x4_shuffle(u0, u1, 0, 1, 4, 5), d[5] = wasm_i32x4_shuffle(u0, u1, 2, 3, 6, 7);
  const v128_t two = wasm_f32x4_splat(2.0f), four = wasm_f32x4_splat(4.0f), five = wasm_f32x4_splat(5.0f);
  const v128_t a = wasm_f32x4_sub(d[4], wasm_f32x4_mul(four, d[2])), b = wasm_f32x4_sub(d[3], wasm_f32x4_mul(four, d[1]));
  const v128_t c = wasm_f32x4_sub(d[4], d[2]), e = wasm_f32x4_mul(two, wasm_f32x4_sub(d[3], d[1]));
  wasm_v128_store(v, wasm_f32x4_add(wasm_f32x4_sub(wasm_f32x4_mul(four, d[0]), wasm_f32x4_mul(five, d[2])), d[4]));
  wasm_v128_store(v + stride, wasm_f32x4_add(a, b)), wasm_v128_store(v + 2 * stride, wasm_f32x4_sub(a, b));
  wasm_v128_store(v + 3 * stride, wasm_f32x4_add(c, e)), wasm_v128_store(v + 4 * stride, wasm_f32x4_sub(c, e));
  wasm_v128_store(v + 5 * stride, wasm_f32x4_add(wasm_f32x4_sub(wasm_f32x4_mul(four, d[1]), wasm_f32x4_mul(five, d[3])), d[5]));
}
#endif

/* V's panels of channels [lo, hi): lane l of panel p is tile q0 + 8p + l (zeros past the chunk and
 * for inputs outside x's row: those outputs are never stored, or the view's padding). */
static void wino_pack(void *ctx, int64_t lo, int64_t hi, int t, void *ws) {
  const wino_job *j = ctx;
  const tdm_wino *g = j->g;
  (void)t, (void)ws;
  const int m = g->m, T = m + g->r - 1;
  const int64_t C = g->C, xs = g->xs, L = g->L, lp = g->lp, stride = C * j->P; /* floats between the transformed points' blocks */
  for (int64_t ch = lo; ch < hi; ch++) {
    const float *xb = j->x + (ch / xs) * g->xw + ch % xs;
    for (int64_t p = 0; p * TDM_PANEL < j->nt; p++) {
      float *v = j->v + (p * C + ch) * TDM_PANEL;
      const int64_t qb = j->q0 + p * TDM_PANEL, i0 = m * qb - lp; /* the panel's first input, in x's positions */
      const bool full = p * TDM_PANEL + TDM_PANEL <= j->nt && i0 >= 0 && i0 + m * (TDM_PANEL - 1) + T <= L;
#if TDM_SIMD128
      if (full && g->r == 3 && xs == 1 && i0 + (m == 2 ? 17 : 35) < L) { /* the SIMD128 loads' reach: x[i0 + 17 or 35] */
        wino_point4(m, xb + i0, v, stride), wino_point4(m, xb + i0 + 4 * m, v + 4, stride);
        continue;
      }
#endif
      if (full && g->r == 2) { /* 2 taps: tile l + 1's first input is tile l's last, T loads of x and T stores a tile */
        const float *sx = xb + i0 * xs;
        float *v0 = v, *v1 = v + stride, *v2 = v1 + stride, *v3 = v2 + stride, d0 = sx[0];
        if (m == 3)
          for (int l = 0; l < TDM_PANEL; l++, sx += 3 * xs) {
            const float d1 = sx[xs], d2 = sx[2 * xs], d3 = sx[3 * xs];
            v0[l] = d0 - d2, v1[l] = d1 + d2, v2[l] = d2 - d1, v3[l] = d3 - d1, d0 = d3;
          }
        else
          for (int l = 0; l < TDM_PANEL; l++, sx += 2 * xs) {
            const float d1 = sx[xs], d2 = sx[2 * xs];
            v0[l] = d0 - d1, v1[l] = d1, v2[l] = d2 - d1, d0 = d2;
          }
        continue;
      }
      if (full) { /* every input inside x: no bounds to check */
        for (int l = 0; l < TDM_PANEL; l++) {
          const float *s = xb + (i0 + m * l) * xs;
          float d[6];
          for (int k = 0; k < T; k++) d[k] = s[k * xs];
          wino_point(m, g->r, d, v + l, stride);
        }
        continue;
      }
      for (int l = 0; l < TDM_PANEL; l++) {
        float d[6] = {0, 0, 0, 0, 0, 0};
        if (p * TDM_PANEL + l < j->nt)
          for (int k = 0; k < T; k++) {
            const int64_t i = i0 + m * l + k;
            d[k] = i >= 0 && i < L ? xb[i * xs] : 0.0f;
          }
        wino_point(m, g->r, d, v + l, stride);
      }
    }
  }
}

/* Outputs [0, n) of one row from its tiles' products m0.. (P apart), each plus b when add_b. */
static void wino_out(const tdm_wino *g, const float *m0, int64_t P, int64_t n, float *yb, bool add_b, float b) {
  const int m = g->m;
  const int64_t ys = g->ys;
  const float *m1 = m0 + P, *m2 = m1 + P, *m3 = m2 + P;
  int64_t q = 0;
  if (g->r == 3 && ys == 1 && !add_b && m == 4) /* the whole tiles without the branches below (the same floats) */
    for (const float *m4 = m3 + P, *m5 = m4 + P; 4 * q + 4 <= n; q++) {
      const float s12 = m1[q] + m2[q], d12 = m1[q] - m2[q], s34 = m3[q] + m4[q], d34 = m3[q] - m4[q];
      yb[4 * q] = m0[q] + s12 + s34, yb[4 * q + 1] = d12 + 2.0f * d34, yb[4 * q + 2] = s12 + 4.0f * s34,
             yb[4 * q + 3] = d12 + 8.0f * d34 + m5[q];
    }
  else if (g->r == 3 && ys == 1 && !add_b)
    for (; 2 * q + 2 <= n; q++) yb[2 * q] = m0[q] + m1[q] + m2[q], yb[2 * q + 1] = m1[q] - m2[q] - m3[q];
  else if (g->r == 2 && m == 3 && !add_b) /* the whole tiles of the 2-tap transforms without the branches below (the same floats) */
    for (; 3 * q + 3 <= n; q++) {
      const float s12 = m1[q] + m2[q];
      yb[3 * q * ys] = m0[q] + s12, yb[(3 * q + 1) * ys] = m1[q] - m2[q], yb[(3 * q + 2) * ys] = s12 + m3[q];
    }
  else if (g->r == 2 && m == 3)
    for (; 3 * q + 3 <= n; q++) {
      const float s12 = m1[q] + m2[q];
      yb[3 * q * ys] = (m0[q] + s12) + b, yb[(3 * q + 1) * ys] = (m1[q] - m2[q]) + b, yb[(3 * q + 2) * ys] = (s12 + m3[q]) + b;
    }
  else if (g->r == 2 && !add_b)
    for (; 2 * q + 2 <= n; q++) yb[2 * q * ys] = m0[q] + m1[q], yb[(2 * q + 1) * ys] = m1[q] + m2[q];
  else if (g->r == 2)
    for (; 2 * q + 2 <= n; q++) yb[2 * q * ys] = (m0[q] + m1[q]) + b, yb[(2 * q + 1) * ys] = (m1[q] + m2[q]) + b;
  for (; q * m < n; q++) {
    float r[4];
    if (g->r == 2 && m == 2) r[0] = m0[q] + m1[q], r[1] = m1[q] + m2[q];
    else if (g->r == 2) {
      const float s12 = m1[q] + m2[q];
      r[0] = m0[q] + s12, r[1] = m1[q] - m2[q], r[2] = s12 + m3[q];
    } else if (m == 2) r[0] = m0[q] + m1[q] + m2[q], r[1] = m1[q] - m2[q] - m3[q];
    else {
      const float *m4 = m3 + P, *m5 = m4 + P;
      const float s12 = m1[q] + m2[q], d12 = m1[q] - m2[q], s34 = m3[q] + m4[q], d34 = m3[q] - m4[q];
      r[0] = m0[q] + s12 + s34, r[1] = d12 + 2.0f * d34, r[2] = s12 + 4.0f * s34, r[3] = d12 + 8.0f * d34 + m5[q];
    }
    for (int k = 0; k < m && m * q + k < n; k++) yb[(m * q + k) * ys] = add_b ? r[k] + b : r[k];
  }
}

/* Rows [lo, hi) of the view: the T GEMMs, then the output transform (M1 holds the bias of rows
 * that have one each), then the activation, while the rows are in this thread's cache. */
static void wino_rows(void *ctx, int64_t lo, int64_t hi, int t, void *ws) {
  const wino_job *j = ctx;
  const tdm_wino *g = j->g;
  (void)t, (void)ws;
  const int m = g->m, T = m + g->r - 1;
  const int64_t O = g->O, C = g->C, P = j->P, OC = O * C, OP = O * P, ys = g->ys;
  const bool row_bias = ys == 1 && j->bias; /* a transposed conv's rows share their channel's bias */
  for (int i = 0; i < T; i++)
    tdm_f32_conv_gemm(hi - lo, j->nt, C, j->u + i * OC + lo * C, j->v + i * C * P, i == 1 && row_bias ? j->bias + lo : NULL,
                      j->mm + i * OP + lo * P, P);
  const int64_t y0 = m * j->q0, n = g->N - y0 < m * j->nt ? g->N - y0 : m * j->nt;
  for (int64_t o = lo; o < hi; o++) {
    float *yb = j->y + (o / ys) * g->yw + o % ys + y0 * ys;
    wino_out(g, j->mm + o * P, OP, n, yb, ys > 1 && j->bias, ys > 1 && j->bias ? j->bias[o / ys] : 0.0f);
    if (ys == 1) tdm__conv_activate(j->act, yb, n);
  }
}

/* Whether x [n] holds a NaN or an infinity (x - x is then NaN, 0 otherwise). */
static bool any_nonfinite(const float *x, int64_t n) {
  int64_t i = 0;
  bool bad = false;
#if TDM_SIMD128
  v128_t acc = wasm_i32x4_splat(0);
  for (; i + 4 <= n; i += 4) {
    const v128_t v = wasm_v128_load(x + i), z = wasm_f32x4_sub(v, v);
    acc = wasm_v128_or(acc, wasm_f32x4_ne(z, z));
  }
  bad = wasm_v128_any_true(acc);
#endif
  for (; i < n; i++) bad |= !(x[i] - x[i] == 0.0f);
  return bad;
}

/* Whole chunks of tiles per thread (tile mode): each chunk's input transform, its T GEMMs over every
 * row and its output transform by one thread in its own workspace (thread 0: the op's), one region
 * a call. The same floats as the chunks run one after another: a tile's points and each column of
 * the GEMMs (full 8-column panels, every row) do not depend on the chunk the tile is in. */
typedef struct {
  wino_job j; /* P: the chunk's tiles, the same for every chunk */
  int64_t tiles;
  float *ws0; /* thread 0's workspace */
} tiles_job;

static void wino_chunks(void *ctx, int64_t lo, int64_t hi, int t, void *ws) {
  const tiles_job *tj = ctx;
  wino_job j = tj->j;
  const int64_t T = j.g->m + j.g->r - 1, P = j.P;
  j.v = t ? (float *)ws : tj->ws0;
  j.mm = j.v + T * j.g->C * P;
  for (int64_t c = lo; c < hi; c++) {
    j.q0 = c * P, j.nt = tj->tiles - j.q0 < P ? tj->tiles - j.q0 : P;
    wino_pack(&j, 0, j.g->C, 0, NULL);
    wino_rows(&j, 0, j.g->O, 0, NULL);
  }
}

/* Tile mode's tiles per chunk on `threads` (> 1) threads (TILE_CHUNK, fewer where a thread's workspace
 * holds fewer), or 0 where it does not pay: with fewer than 2 chunks a thread, or with a panel of
 * tiles above a thread's workspace. Rows are then split instead (chunks of rows in blocks of 4). */
#define TILE_CHUNK 32
static int64_t tile_mode_P(const tdm_wino *g, int64_t tiles, int64_t wsn, int threads) {
  const int64_t T = g->m + g->r - 1, per = T * (g->O + g->C), cap = TDM_THREAD_WS_BYTES / (int64_t)sizeof(float);
  int64_t P = (cap < wsn ? cap : wsn) / per / TDM_PANEL * TDM_PANEL;
  if (P > TILE_CHUNK) P = TILE_CHUNK;
  return P >= TDM_PANEL && (tiles + P - 1) / P >= 2 * threads ? P : 0;
}

/* The chunks of tiles, each region run by `par` (tdm__parallel, or serial_run: the same floats). */
static bool wino_run(const tdm_wino *g, const float *x, const float *u, const float *bias, float *y, float *ws, int64_t wsn, int act,
                     void (*par)(int64_t, int64_t, tdm_part_fn, void *), int threads) {
  const int m = g->m, T = m + g->r - 1;
  const bool known = g->r == 3 ? m == 2 || m == 4 : g->r == 2 && (m == 2 || m == 3);
  if (!known || (act != TDM_CONV_ACT_NONE && g->ys != 1) || g->O < 1 || g->C < 1 || g->N < 1 || g->xs < 1 || g->ys < 1 || g->C % g->xs)
    return false;
  const int64_t P = tdm_conv_wino_tiles(g, wsn), tiles = (g->N + m - 1) / m;
  /* A NaN or infinity in x would reach every output of its tiles (inf - inf in the transforms),
   * where the direct sum keeps it to the outputs whose taps read it: the direct path takes such x. */
  if (P < TDM_PANEL || any_nonfinite(x, g->C / g->xs * g->xw)) return false;
  wino_job j = {g, 0, 0, P, x, u, bias, ws, ws + T * g->C * P, y, act};
  const int64_t Pt = threads > 1 ? tile_mode_P(g, tiles, wsn, threads) : 0;
  if (Pt) {
    tiles_job tj = {j, tiles, ws};
    tj.j.P = Pt;
    par((tiles + Pt - 1) / Pt, 1, wino_chunks, &tj);
    return true;
  }
  for (int64_t q0 = 0; q0 < tiles; q0 += P) {
    j.q0 = q0, j.nt = tiles - q0 < P ? tiles - q0 : P;
    if (g->C * j.nt * T < 16384) wino_pack(&j, 0, g->C, 0, NULL); /* below, a thread's share costs less than handing it out */
    else par(g->C, 1, wino_pack, &j);
    par(g->O, 4, wino_rows, &j);
  }
  return true;
}

static void serial_run(int64_t n, int64_t align, tdm_part_fn fn, void *ctx) {
  (void)align;
  fn(ctx, 0, n, 0, NULL);
}

bool tdm_f32_conv_wino(const tdm_wino *g, const float *x, const float *u, const float *bias, float *y, float *ws, int64_t wsn, int act) {
  return wino_run(g, x, u, bias, y, ws, wsn, act, serial_run, 1);
}

bool tdm__conv_wino(const tdm_wino *g, const float *x, const float *u, const float *bias, float *y, float *ws, int64_t wsn, int act) {
  return wino_run(g, x, u, bias, y, ws, wsn, act, tdm__parallel, tdm__threads());
}

/* ---- at load: U for every conv that may take this path ---------------------------------------- */

/* The m of F(m, 2) whose T GEMMs cover the fewest 8-column panels for N outputs, or 0 where that is
 * more than 0.9 of the direct GEMM's 2 · ceil(Nd / 8) (Nd: its columns), or where the tiles fill
 * fewer than two panels: U, (m + 1)/2 times w's size, is then read for too few columns (Mimi's
 * stride-6 conv at 16 outputs: F(2,2) no faster than the direct GEMM). */
static int wino2_m(int64_t N, int64_t Nd) {
  int best = 0;
  int64_t best_cost = 0;
  for (int m = 2; m <= 3; m++) {
    const int64_t tiles = (N + m - 1) / m, cost = (m + 1) * ((tiles + TDM_PANEL - 1) / TDM_PANEL);
    if (tiles >= 2 * TDM_PANEL && (!best || cost < best_cost)) best = m, best_cost = cost;
  }
  return best && best_cost * 10 <= 9 * 2 * ((Nd + TDM_PANEL - 1) / TDM_PANEL) ? best : 0;
}

/* An op that may take this path: a conv with a workspace, or a transposed conv, 1-d, one group, no
 * padding, dilation 1, whose weights are a whole float32 constant and whose input has at least
 * TDM_CONV_WINO_MIN_C channels in the view, at more than TDM_CONV_DOT_MAX_N positions (its
 * largest shape): k3 convs with stride 1 (r = 3), convs and transposed convs with kernel 2s, stride
 * s >= 2 (r = 2). Its m (0: none), and r and s. */
static int wino_plan(const tdm_method *md, const tdm_op *op, int *r, int64_t *s) {
  const int64_t *a = op->iattr;
  const tdm_value *w = TDM_VAL(md, op, 1), *x = TDM_VAL(md, op, 0), *y = TDM_OUTVAL(md, op, 0);
  if (op->n_out != 2 || op->n_iattr < 3 || a[0] != 1 || a[2] != 1 || w->region != TDM_REGION_CONST || w->dtype != TDM_F32 ||
      w->shape.rank != 3 || w->nbytes != (size_t)w->numel * sizeof(float) || x->shape.rank != 3 || y->shape.rank != 3)
    return 0;
  if (op->def == &tdm__conv_ops[0]) { /* [r, has_bias, groups, stride, padding, dilation[, act]] */
    const int64_t K = w->shape.dims[2], C = w->shape.dims[1], N = y->shape.dims[2];
    if (op->n_iattr < 6 || a[4] != 0 || a[5] != 1 || N <= TDM_CONV_DOT_MAX_N) return 0;
    *s = a[3];
    if (K == 3 && a[3] == 1 && C >= TDM_CONV_WINO_MIN_C) return *r = 3, N >= TDM_CONV_WINO4_MIN_N ? 4 : 2;
    if (a[3] >= 2 && K == 2 * a[3] && C * a[3] >= TDM_CONV_WINO_MIN_C) return *r = 2, wino2_m(N, N);
    return 0;
  }
  if (op->def == &tdm__conv_ops[3]) { /* [r, has_bias, groups, kernel, stride, padding, dilation, output_padding] */
    const int64_t T = x->shape.dims[2];
    if (op->n_iattr != 8 || a[4] < 2 || a[3] != 2 * a[4] || a[5] != 0 || a[6] != 1 || a[7] != 0 || T <= TDM_CONV_DOT_MAX_N ||
        w->shape.dims[2] < TDM_CONV_WINO_MIN_C)
      return 0;
    return *r = 2, *s = a[4], wino2_m(T + 1, T);
  }
  return 0;
}

/* w2 [O', C', 2] = the 2-tap view's taps of op's weights (variants.h, tdm_wino). */
static void wino2_taps(const tdm_op *op, const tdm_value *w, const float *wd, int64_t s, float *w2) {
  if (op->def == &tdm__conv_ops[0]) { /* w [O, C, 2s] → w2 [O, C·s, 2] */
    const int64_t O = w->shape.dims[0], C = w->shape.dims[1];
    for (int64_t o = 0; o < O; o++)
      for (int64_t c = 0; c < C; c++)
        for (int64_t p = 0; p < s; p++)
          for (int k = 0; k < 2; k++) w2[((o * C + c) * s + p) * 2 + k] = wd[(o * C + c) * 2 * s + s * k + p];
    return;
  }
  const int64_t O = w->shape.dims[1] / (2 * s), C = w->shape.dims[2]; /* wt [1, O·2s, C] → w2 [O·s, C, 2] */
  for (int64_t o = 0; o < O; o++)
    for (int64_t p = 0; p < s; p++)
      for (int64_t c = 0; c < C; c++) {
        w2[((o * s + p) * C + c) * 2] = wd[(o * 2 * s + p + s) * C + c];
        w2[((o * s + p) * C + c) * 2 + 1] = wd[(o * 2 * s + p) * C + c];
      }
}

void tdm__conv_wino_prepare(tdm_program *p) {
  size_t total = 0, most = 0;
  for (uint32_t i = 0; i < p->n_methods; i++)
    for (uint32_t k = 0; k < p->methods[i].n_ops; k++) {
      int r = 0;
      int64_t s = 1;
      const int m = wino_plan(&p->methods[i], &p->methods[i].ops[k], &r, &s);
      const size_t n = (size_t)TDM_VAL(&p->methods[i], &p->methods[i].ops[k], 1)->numel;
      if (m) total += n / (size_t)r * (size_t)(m + r - 1), most = r == 2 && n > most ? n : most;
    }
  if (!total || total > SIZE_MAX / sizeof(float)) return;
  p->wino = tdm__alloc(total * sizeof(float));
  float *w2 = most ? tdm__alloc(most * sizeof(float)) : NULL;
  if (!p->wino || (most && !w2)) { /* out of memory: the convs keep the direct path */
    tdm__free(p->wino), tdm__free(w2);
    p->wino = NULL;
    return;
  }
  float *u = p->wino;
  for (uint32_t i = 0; i < p->n_methods; i++)
    for (uint32_t k = 0; k < p->methods[i].n_ops; k++) {
      tdm_op *op = &p->methods[i].ops[k];
      int r = 0;
      int64_t s = 1;
      const int m = wino_plan(&p->methods[i], op, &r, &s);
      if (!m) continue;
      const tdm_value *w = TDM_VAL(&p->methods[i], op, 1);
      const float *wd = (const float *)(const void *)(p->data + w->offset);
      if (r == 3) tdm_conv_wino_weights(m, 3, w->shape.dims[0], w->shape.dims[1], wd, u);
      else {
        const bool conv = op->def == &tdm__conv_ops[0];
        const int64_t O2 = conv ? w->shape.dims[0] : w->shape.dims[1] / 2, C2 = conv ? w->shape.dims[1] * s : w->shape.dims[2];
        wino2_taps(op, w, wd, s, w2);
        tdm_conv_wino_weights(m, 2, O2, C2, w2, u);
      }
      op->wino_u = u, op->wino_m = m;
      u += w->numel / r * (m + r - 1);
    }
  tdm__free(w2);
}
