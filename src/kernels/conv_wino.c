/* conv_wino.c — Winograd minimal filtering F(2,3) for 1-d k3 convolutions (stride 1, dilation 1,
 * no padding, one group: the SEANet residual units' convs in Mimi's streaming step, whose state
 * holds the left context). Two outputs from four inputs d0..d3 and the taps w0..w2 take four
 * products instead of six:
 *   V = B^T d = [d0 - d2, d1 + d2, d2 - d1, d1 - d3],   U = G w = [w0, (w0 + w1 + w2)/2, (w0 - w1 + w2)/2, w2],
 *   M_i = sum over channels of U_i V_i,                  y0 = M0 + M1 + M2,  y1 = M1 - M2 - M3,
 * i.e. four GEMMs U_i [O, C] @ V_i [C, tiles] on the packed conv GEMM (tdm_f32_conv_gemm, any ISA),
 * V_i packed straight into its 8-column panels (the input transform is the packing), the bias as
 * M1's accumulators' start (both outputs of a tile take M1 once), the output transform and the
 * fused activation by each thread on its own rows. U is computed once at load into memory the
 * runtime owns (tdm__conv_wino_prepare: never the file's data, never state). 2 × 4 = 8 products
 * per tile of 2 outputs against 2 × 3 = 6 per output: 1.5× fewer multiplies; the rounding differs
 * from the direct sum by a few ulps of the terms (tests/c/kernel_selftest.c bounds it). */
#include "../threads.h"
#include "../util.h"
#include "conv.h"
#include "gemm.h"
#include "simd.h"


#define WINO_T 4 /* the transformed points per tile (m + r - 1 = 2 + 3 - 1) */
#ifndef WINO_CHUNK_FLOATS
#define WINO_CHUNK_FLOATS 32768
#endif

void tdm_conv_wino_weights(int64_t O, int64_t C, const float *w, float *u) {
  const int64_t OC = O * C;
  for (int64_t i = 0; i < OC; i++) {
    const double w0 = w[3 * i], w1 = w[3 * i + 1], w2 = w[3 * i + 2];
    u[i] = (float)w0;
    u[OC + i] = (float)(0.5 * (w0 + w1 + w2));
    u[2 * OC + i] = (float)(0.5 * (w0 - w1 + w2));
    u[3 * OC + i] = (float)w2;
  }
}

int64_t tdm_conv_wino_tiles(int64_t O, int64_t C, int64_t N, int64_t wsn) {
  const int64_t all = ((N + 1) / 2 + TDM_PANEL - 1) / TDM_PANEL * TDM_PANEL, want = WINO_T * O * C > WINO_CHUNK_FLOATS ? WINO_T * O * C : WINO_CHUNK_FLOATS;
  const int64_t cap = wsn < want ? wsn : want;
  const int64_t per = O + C > 0 ? cap / (WINO_T * (O + C)) : 0;
  const int64_t fit = per / TDM_PANEL * TDM_PANEL;
  return fit < all ? fit : all;
}

typedef struct {
  int64_t O, C, W, N, q0, nt, P; /* tiles [q0, q0 + nt) of this chunk, P (a multiple of 8) per transformed point */
  const float *x, *u, *bias;
  float *v, *m, *y; /* v [4][P/8][C][8], m [4][O][P] (in the workspace), y [O, N] */
  int act;
} wino_job;

/* V's panels of channels [lo, hi): lane l of panel p is tile q0 + 8p + l (zeros past the chunk and
 * for inputs past x's row: those outputs are never stored). */
static void wino_pack(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const wino_job *j = c;
  (void)t, (void)ws;
  const int64_t C = j->C, W = j->W, stride = C * j->P; /* floats between the transformed points' blocks */
  for (int64_t ch = lo; ch < hi; ch++) {
    const float *xc = j->x + ch * W;
    for (int64_t p = 0; p * TDM_PANEL < j->nt; p++) {
      float *v0 = j->v + (p * C + ch) * TDM_PANEL, *v1 = v0 + stride, *v2 = v1 + stride, *v3 = v2 + stride;
      const int64_t qb = j->q0 + p * TDM_PANEL;
      if (p * TDM_PANEL + TDM_PANEL <= j->nt && 2 * (qb + TDM_PANEL - 1) + 3 < W) {
        const float *s = xc + 2 * qb;
#if TDM_SIMD128 /* lanes of 4 tiles: d0, d1 the even and odd of s[8h ..], d2, d3 of s[8h + 2 ..] (the same floats) */
        for (int h = 0; h < 2; h++, s += 8) {
          const v128_t a = wasm_v128_load(s), b = wasm_v128_load(s + 4), c2 = wasm_v128_load(s + 2), e = wasm_v128_load(s + 6);
          const v128_t d0 = wasm_i32x4_shuffle(a, b, 0, 2, 4, 6), d1 = wasm_i32x4_shuffle(a, b, 1, 3, 5, 7);
          const v128_t d2 = wasm_i32x4_shuffle(c2, e, 0, 2, 4, 6), d3 = wasm_i32x4_shuffle(c2, e, 1, 3, 5, 7);
          wasm_v128_store(v0 + 4 * h, wasm_f32x4_sub(d0, d2)), wasm_v128_store(v1 + 4 * h, wasm_f32x4_add(d1, d2));
          wasm_v128_store(v2 + 4 * h, wasm_f32x4_sub(d2, d1)), wasm_v128_store(v3 + 4 * h, wasm_f32x4_sub(d1, d3));
        }
#else
        for (int l = 0; l < TDM_PANEL; l++) {
          const float d0 = s[2 * l], d1 = s[2 * l + 1], d2 = s[2 * l + 2], d3 = s[2 * l + 3];
          v0[l] = d0 - d2, v1[l] = d1 + d2, v2[l] = d2 - d1, v3[l] = d1 - d3;
        }
#endif
        continue;
      }
      for (int l = 0; l < TDM_PANEL; l++) {
        float d[4] = {0, 0, 0, 0};
        if (p * TDM_PANEL + l < j->nt)
          for (int k = 0; k < 4; k++) d[k] = 2 * (qb + l) + k < W ? xc[2 * (qb + l) + k] : 0.0f;
        v0[l] = d[0] - d[2], v1[l] = d[1] + d[2], v2[l] = d[2] - d[1], v3[l] = d[1] - d[3];
      }
    }
  }
}

/* Rows [lo, hi) of y: the four GEMMs, then y0 = M0 + M1 + M2, y1 = M1 - M2 - M3 (M1 holds the
 * bias), then the activation, while the rows are in this thread's cache. */
static void wino_rows(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const wino_job *j = c;
  (void)t, (void)ws;
  const int64_t O = j->O, C = j->C, P = j->P, OC = O * C;
  for (int i = 0; i < WINO_T; i++)
    tdm_f32_conv_gemm(hi - lo, j->nt, C, j->u + i * OC + lo * C, j->v + i * C * P, i == 1 && j->bias ? j->bias + lo : NULL,
                      j->m + (i * O + lo) * P, P);
  const int64_t y0 = 2 * j->q0, n = j->N - y0 < 2 * j->nt ? j->N - y0 : 2 * j->nt;
  for (int64_t o = lo; o < hi; o++) {
    const float *m0 = j->m + o * P, *m1 = m0 + O * P, *m2 = m1 + O * P, *m3 = m2 + O * P;
    float *yo = j->y + o * j->N + y0;
    const int64_t pairs = n / 2;
    for (int64_t q = 0; q < pairs; q++) {
      yo[2 * q] = m0[q] + m1[q] + m2[q];
      yo[2 * q + 1] = m1[q] - m2[q] - m3[q];
    }
    if (n % 2) yo[n - 1] = m0[pairs] + m1[pairs] + m2[pairs];
    tdm__conv_activate(j->act, yo, n);
  }
}

/* The chunks of tiles, each region run by `par` (tdm__parallel, or serial_run: the same floats). */
static bool wino_run(int64_t O, int64_t C, int64_t N, const float *x, const float *u, const float *bias, float *y, float *ws, int64_t wsn,
                     int act, void (*par)(int64_t, int64_t, tdm_part_fn, void *)) {
  const int64_t P = tdm_conv_wino_tiles(O, C, N, wsn), tiles = (N + 1) / 2;
  if (P < TDM_PANEL || O < 1 || C < 1) return false;
  wino_job j = {O, C, N + 2, N, 0, 0, P, x, u, bias, ws, ws + WINO_T * C * P, y, act};
  for (int64_t q0 = 0; q0 < tiles; q0 += P) {
    j.q0 = q0, j.nt = tiles - q0 < P ? tiles - q0 : P;
    if (C * j.nt * WINO_T < 16384) wino_pack(&j, 0, C, 0, NULL); /* below, a thread's share costs less than handing it out */
    else par(C, 1, wino_pack, &j);
    par(O, 4, wino_rows, &j);
  }
  return true;
}

static void serial_run(int64_t n, int64_t align, tdm_part_fn fn, void *ctx) {
  (void)align;
  fn(ctx, 0, n, 0, NULL);
}

bool tdm_f32_conv_wino(int64_t O, int64_t C, int64_t N, const float *x, const float *u, const float *bias, float *y, float *ws, int64_t wsn,
                       int act) {
  return wino_run(O, C, N, x, u, bias, y, ws, wsn, act, serial_run);
}

bool tdm__conv_wino(int64_t O, int64_t C, int64_t N, const float *x, const float *u, const float *bias, float *y, float *ws, int64_t wsn,
                    int act) {
  return wino_run(O, C, N, x, u, bias, y, ws, wsn, act, tdm__parallel);
}

/* ---- at load: U for every conv that may take this path ---------------------------------------- */

/* A conv whose weights are a whole float32 constant [O, C, 3], 1-d, one group, stride 1, no
 * padding, dilation 1, with a workspace, more than TDM_CONV_DOT_MAX_N outputs at its largest and
 * wide enough to pay (TDM_CONV_WINO_MIN_C). */
static bool wino_eligible(const tdm_method *m, const tdm_op *op) {
  if (op->def != &tdm__conv_ops[0] || op->n_out != 2 || op->n_iattr < 6 || op->iattr[0] != 1 || op->iattr[2] != 1 || op->iattr[3] != 1 ||
      op->iattr[4] != 0 || op->iattr[5] != 1)
    return false;
  const tdm_value *w = TDM_VAL(m, op, 1), *y = TDM_OUTVAL(m, op, 0);
  return w->region == TDM_REGION_CONST && w->dtype == TDM_F32 && w->shape.rank == 3 && w->shape.dims[2] == 3 &&
      w->shape.dims[1] >= TDM_CONV_WINO_MIN_C && w->nbytes == (size_t)w->numel * sizeof(float) && y->shape.rank == 3 &&
      y->shape.dims[2] > TDM_CONV_DOT_MAX_N;
}

void tdm__conv_wino_prepare(tdm_program *p) {
  size_t total = 0;
  for (uint32_t i = 0; i < p->n_methods; i++)
    for (uint32_t k = 0; k < p->methods[i].n_ops; k++)
      if (wino_eligible(&p->methods[i], &p->methods[i].ops[k])) total += (size_t)TDM_VAL(&p->methods[i], &p->methods[i].ops[k], 1)->numel;
  if (!total || total > SIZE_MAX / sizeof(float) / 2) return;
  p->wino = tdm__alloc(total / 3 * WINO_T * sizeof(float));
  if (!p->wino) return; /* out of memory: the convs keep the direct path */
  float *u = p->wino;
  for (uint32_t i = 0; i < p->n_methods; i++)
    for (uint32_t k = 0; k < p->methods[i].n_ops; k++) {
      tdm_op *op = &p->methods[i].ops[k];
      if (!wino_eligible(&p->methods[i], op)) continue;
      const tdm_value *w = TDM_VAL(&p->methods[i], op, 1);
      tdm_conv_wino_weights(w->shape.dims[0], w->shape.dims[1], (const float *)(const void *)(p->data + w->offset), u);
      op->wino_u = u;
      u += w->numel / 3 * WINO_T;
    }
}
