/* conv_wino.c — Winograd minimal filtering F(m,3), m = 2 or 4, for 1-d k3 convolutions (stride 1,
 * dilation 1, no padding, one group: the SEANet residual units' convs in Mimi's streaming step,
 * whose state holds the left context). A tile of m outputs from the m + 2 inputs d0.. and the taps
 * w0..w2 takes m + 2 products instead of 3m (y = Aᵀ[(G w) ⊙ (Bᵀ d)], Lavin & Gray's matrices):
 *   F(2,3): V = [d0 - d2, d1 + d2, d2 - d1, d1 - d3],  U = [w0, (w0 + w1 + w2)/2, (w0 - w1 + w2)/2, w2],
 *           y0 = M0 + M1 + M2,  y1 = M1 - M2 - M3;
 *   F(4,3): V = [4d0 - 5d2 + d4, (d4 - 4d2) ± (d3 - 4d1), (d4 - d2) ± 2(d3 - d1), 4d1 - 5d3 + d5],
 *           U = [w0/4, -(w0 ± w1 + w2)/6, w0/24 ± w1/12 + w2/6, w2],
 *           y0 = M0 + (M1 + M2) + (M3 + M4), y1 = (M1 - M2) + 2(M3 - M4), y2 = (M1 + M2) + 4(M3 + M4),
 *           y3 = (M1 - M2) + 8(M3 - M4) + M5;
 * with M_i = the sum over channels of U_i V_i: m + 2 GEMMs U_i [O, C] @ V_i [C, tiles] on the packed
 * conv GEMM (tdm_f32_conv_gemm, any ISA), V_i packed straight into its 8-column panels (the input
 * transform is the packing), the bias as M1's accumulators' start (M1 enters every output once),
 * the output transform and the fused activation by each thread on its own rows. U is computed once
 * at load into memory the runtime owns (tdm__conv_wino_prepare: never the file's data, never
 * state), F(4,3) for convs with at least TDM_CONV_WINO4_MIN_N outputs. Multiplies per output: 3 direct,
 * 2 for F(2,3), 1.5 for F(4,3); the rounding differs from the direct sum by a few ulps of the terms
 * (more for F(4,3), whose transforms scale by up to 8: tests/c/kernel_selftest.c bounds both). */
#include "../threads.h"
#include "../util.h"
#include "conv.h"
#include "gemm.h"
#include "simd.h"

#ifndef WINO_CHUNK_FLOATS
#define WINO_CHUNK_FLOATS 32768 /* V + M of a chunk of tiles stay in L2 (at least U's size) */
#endif

void tdm_conv_wino_weights(int m, int64_t O, int64_t C, const float *w, float *u) {
  const int64_t OC = O * C;
  for (int64_t i = 0; i < OC; i++) {
    const double w0 = w[3 * i], w1 = w[3 * i + 1], w2 = w[3 * i + 2];
    if (m == 2) {
      u[i] = (float)w0, u[OC + i] = (float)(0.5 * (w0 + w1 + w2)), u[2 * OC + i] = (float)(0.5 * (w0 - w1 + w2)), u[3 * OC + i] = (float)w2;
      continue;
    }
    u[i] = (float)(w0 / 4), u[OC + i] = (float)(-(w0 + w1 + w2) / 6), u[2 * OC + i] = (float)(-(w0 - w1 + w2) / 6);
    u[3 * OC + i] = (float)(w0 / 24 + w1 / 12 + w2 / 6), u[4 * OC + i] = (float)(w0 / 24 - w1 / 12 + w2 / 6), u[5 * OC + i] = (float)w2;
  }
}

int64_t tdm_conv_wino_tiles(int m, int64_t O, int64_t C, int64_t N, int64_t wsn) {
  const int64_t T = m + 2, all = ((N + m - 1) / m + TDM_PANEL - 1) / TDM_PANEL * TDM_PANEL;
  const int64_t want = T * O * C > WINO_CHUNK_FLOATS ? T * O * C : WINO_CHUNK_FLOATS, cap = wsn < want ? wsn : want;
  const int64_t fit = (O + C > 0 ? cap / (T * (O + C)) : 0) / TDM_PANEL * TDM_PANEL;
  return fit < all ? fit : all;
}

typedef struct {
  int m;
  int64_t O, C, W, N, q0, nt, P; /* tiles [q0, q0 + nt) of this chunk, P (a multiple of 8) per transformed point */
  const float *x, *u, *bias;
  float *v, *mm, *y; /* v [m + 2][P/8][C][8], mm [m + 2][O][P] (in the workspace), y [O, N] */
  int act;
} wino_job;

/* The transformed points of one tile from its inputs d (scalar: the SIMD128 lanes' operations). */
static void wino_point(int m, const float *d, float *v, int64_t stride) {
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
 * for inputs past x's row: those outputs are never stored). */
static void wino_pack(void *ctx, int64_t lo, int64_t hi, int t, void *ws) {
  const wino_job *j = ctx;
  (void)t, (void)ws;
  const int m = j->m, T = m + 2;
  const int64_t C = j->C, W = j->W, stride = C * j->P; /* floats between the transformed points' blocks */
  for (int64_t ch = lo; ch < hi; ch++) {
    const float *xc = j->x + ch * W;
    for (int64_t p = 0; p * TDM_PANEL < j->nt; p++) {
      float *v = j->v + (p * C + ch) * TDM_PANEL;
      const int64_t qb = j->q0 + p * TDM_PANEL;
      if (p * TDM_PANEL + TDM_PANEL <= j->nt && m * qb + (m == 2 ? 17 : 35) < W) { /* the SIMD128 loads' reach: x[m·qb + 17 or 35] */
        const float *s = xc + m * qb;
#if TDM_SIMD128
        wino_point4(m, s, v, stride), wino_point4(m, s + 4 * m, v + 4, stride);
#else
        for (int l = 0; l < TDM_PANEL; l++) wino_point(m, s + m * l, v + l, stride);
#endif
        continue;
      }
      for (int l = 0; l < TDM_PANEL; l++) {
        float d[6] = {0, 0, 0, 0, 0, 0};
        if (p * TDM_PANEL + l < j->nt)
          for (int k = 0; k < T; k++) d[k] = m * (qb + l) + k < W ? xc[m * (qb + l) + k] : 0.0f;
        wino_point(m, d, v + l, stride);
      }
    }
  }
}

/* Rows [lo, hi) of y: the m + 2 GEMMs, then the output transform (M1 holds the bias), then the
 * activation, while the rows are in this thread's cache. */
static void wino_rows(void *ctx, int64_t lo, int64_t hi, int t, void *ws) {
  const wino_job *j = ctx;
  (void)t, (void)ws;
  const int m = j->m;
  const int64_t O = j->O, C = j->C, P = j->P, OC = O * C, OP = O * P;
  for (int i = 0; i < m + 2; i++)
    tdm_f32_conv_gemm(hi - lo, j->nt, C, j->u + i * OC + lo * C, j->v + i * C * P, i == 1 && j->bias ? j->bias + lo : NULL,
                      j->mm + i * OP + lo * P, P);
  const int64_t y0 = m * j->q0, n = j->N - y0 < m * j->nt ? j->N - y0 : m * j->nt;
  for (int64_t o = lo; o < hi; o++) {
    const float *m0 = j->mm + o * P, *m1 = m0 + OP, *m2 = m1 + OP, *m3 = m2 + OP;
    float *yo = j->y + o * j->N + y0;
    if (m == 2) {
      for (int64_t q = 0; q < n / 2; q++) yo[2 * q] = m0[q] + m1[q] + m2[q], yo[2 * q + 1] = m1[q] - m2[q] - m3[q];
      if (n % 2) yo[n - 1] = m0[n / 2] + m1[n / 2] + m2[n / 2];
    } else {
      const float *m4 = m3 + OP, *m5 = m4 + OP;
      for (int64_t q = 0; q * 4 < n; q++) {
        const float s12 = m1[q] + m2[q], d12 = m1[q] - m2[q], s34 = m3[q] + m4[q], d34 = m3[q] - m4[q];
        const float r[4] = {m0[q] + s12 + s34, d12 + 2.0f * d34, s12 + 4.0f * s34, d12 + 8.0f * d34 + m5[q]};
        for (int k = 0; k < 4 && 4 * q + k < n; k++) yo[4 * q + k] = r[k];
      }
    }
    tdm__conv_activate(j->act, yo, n);
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

/* The chunks of tiles, each region run by `par` (tdm__parallel, or serial_run: the same floats). */
static bool wino_run(int m, int64_t O, int64_t C, int64_t N, const float *x, const float *u, const float *bias, float *y, float *ws,
                     int64_t wsn, int act, void (*par)(int64_t, int64_t, tdm_part_fn, void *)) {
  const int64_t P = tdm_conv_wino_tiles(m, O, C, N, wsn), tiles = (N + m - 1) / m;
  /* A NaN or infinity in x would reach every output of its tiles (inf - inf in the transforms),
   * where the direct sum keeps it to the outputs whose taps read it: the direct path takes such x. */
  if ((m != 2 && m != 4) || P < TDM_PANEL || O < 1 || C < 1 || any_nonfinite(x, C * (N + 2))) return false;
  wino_job j = {m, O, C, N + 2, N, 0, 0, P, x, u, bias, ws, ws + (m + 2) * C * P, y, act};
  for (int64_t q0 = 0; q0 < tiles; q0 += P) {
    j.q0 = q0, j.nt = tiles - q0 < P ? tiles - q0 : P;
    if (C * j.nt * (m + 2) < 16384) wino_pack(&j, 0, C, 0, NULL); /* below, a thread's share costs less than handing it out */
    else par(C, 1, wino_pack, &j);
    par(O, 4, wino_rows, &j);
  }
  return true;
}

static void serial_run(int64_t n, int64_t align, tdm_part_fn fn, void *ctx) {
  (void)align;
  fn(ctx, 0, n, 0, NULL);
}

bool tdm_f32_conv_wino(int m, int64_t O, int64_t C, int64_t N, const float *x, const float *u, const float *bias, float *y, float *ws,
                       int64_t wsn, int act) {
  return wino_run(m, O, C, N, x, u, bias, y, ws, wsn, act, serial_run);
}

bool tdm__conv_wino(int m, int64_t O, int64_t C, int64_t N, const float *x, const float *u, const float *bias, float *y, float *ws,
                    int64_t wsn, int act) {
  return wino_run(m, O, C, N, x, u, bias, y, ws, wsn, act, tdm__parallel);
}

/* ---- at load: U for every conv that may take this path ---------------------------------------- */

/* A conv whose weights are a whole float32 constant [O, C, 3], 1-d, one group, stride 1, no
 * padding, dilation 1, with a workspace, more than TDM_CONV_DOT_MAX_N outputs at its largest and
 * wide enough to pay (TDM_CONV_WINO_MIN_C): 0, else its m (4 from TDM_CONV_WINO4_MIN_N outputs). */
static int wino_m(const tdm_method *md, const tdm_op *op) {
  if (op->def != &tdm__conv_ops[0] || op->n_out != 2 || op->n_iattr < 6 || op->iattr[0] != 1 || op->iattr[2] != 1 || op->iattr[3] != 1 ||
      op->iattr[4] != 0 || op->iattr[5] != 1)
    return 0;
  const tdm_value *w = TDM_VAL(md, op, 1), *y = TDM_OUTVAL(md, op, 0);
  if (w->region != TDM_REGION_CONST || w->dtype != TDM_F32 || w->shape.rank != 3 || w->shape.dims[2] != 3 ||
      w->shape.dims[1] < TDM_CONV_WINO_MIN_C || w->nbytes != (size_t)w->numel * sizeof(float) || y->shape.rank != 3 ||
      y->shape.dims[2] <= TDM_CONV_DOT_MAX_N)
    return 0;
  return y->shape.dims[2] >= TDM_CONV_WINO4_MIN_N ? 4 : 2;
}

void tdm__conv_wino_prepare(tdm_program *p) {
  size_t total = 0;
  for (uint32_t i = 0; i < p->n_methods; i++)
    for (uint32_t k = 0; k < p->methods[i].n_ops; k++) {
      const int m = wino_m(&p->methods[i], &p->methods[i].ops[k]);
      if (m) total += (size_t)TDM_VAL(&p->methods[i], &p->methods[i].ops[k], 1)->numel / 3 * (size_t)(m + 2);
    }
  if (!total || total > SIZE_MAX / sizeof(float)) return;
  p->wino = tdm__alloc(total * sizeof(float));
  if (!p->wino) return; /* out of memory: the convs keep the direct path */
  float *u = p->wino;
  for (uint32_t i = 0; i < p->n_methods; i++)
    for (uint32_t k = 0; k < p->methods[i].n_ops; k++) {
      tdm_op *op = &p->methods[i].ops[k];
      const int m = wino_m(&p->methods[i], op);
      if (!m) continue;
      const tdm_value *w = TDM_VAL(&p->methods[i], op, 1);
      tdm_conv_wino_weights(m, w->shape.dims[0], w->shape.dims[1], (const float *)(const void *)(p->data + w->offset), u);
      op->wino_u = u, op->wino_m = m;
      u += w->numel / 3 * (m + 2);
    }
}
