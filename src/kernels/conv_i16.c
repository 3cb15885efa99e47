/* conv_i16.c — conv_i16 and conv_transpose_i16 (quantize_convs="int16" at export,
 * python/tandem/quantize_conv.py): convolutions over 3-128 positions with 256+ outputs per position,
 * bound by their multiply-adds, run as a GEMM on 16-bit integers. `i32x4.dot_i16x8_s` does 8
 * multiply-adds per instruction where `f32x4.relaxed_madd` does 4, so at Mimi's and pocket-tts' conv
 * GEMM shapes the integer tile takes less time than the float32 one.
 *
 * The operands (variants.h, tdm_i16_conv_gemm): the weights a [M, K32] int16, row-major, K32 = K
 * rounded up to 32 (zeros past K), with a float scale per row sa [M]; the GEMM's B (the patches or
 * positions of x) in 8-column panels quantized by tdm_i16_quantize_panel: per block of 32 k and
 * column, scale s = max |x| / 4095 and codes round(x / s) in [-4095, 4095] (0 where s is 0), stored with
 * each column's k pair adjacent ([K32/2, 8, 2] a panel) for `i32x4.dot_i16x8_s`. With both operands
 * within 13 bits a block's 32 products sum exactly in int32 (32 · 4095² < 2^31), in any order; the
 * float steps are fixed: per output t = 0, then per block in order t = isum · sb + t (tdm_madd's
 * rounding: fused in the relaxed builds), then y = t · sa + bias (the same); the scalar reference
 * rounds twice, so the SIMD128 build's variant gives its bits and the relaxed ones are within a
 * rounding per step of them. */
#include "../ops.h"
#include "../threads.h"
#include "../util.h"
#include "conv.h"
#include "variants.h"

#include <math.h>
#include <string.h>

bool tdm_i16_quantize_panel__scalar(int64_t K, const float *panel, int16_t *q, float *s) {
  const int64_t K32 = (K + 31) / 32 * 32;
  for (int64_t k = 0; k < K * 8; k++)
    if (!isfinite(panel[k])) return false;
  for (int64_t b = 0; b < K32 / 32; b++)
    for (int c = 0; c < 8; c++) {
      float mx = 0;
      for (int64_t k = 32 * b; k < 32 * b + 32 && k < K; k++) mx = fmaxf(mx, fabsf(panel[k * 8 + c]));
      const float sc = mx / 4095.0f;
      s[b * 8 + c] = sc;
      for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
        const float v = k < K && sc > 0 ? nearbyintf(panel[k * 8 + c] / sc) : 0.0f;
        q[(k / 2) * 16 + c * 2 + k % 2] = (int16_t)fminf(fmaxf(v, -4095.0f), 4095.0f);
      }
    }
  return true;
}

void tdm_i16_conv_gemm__scalar(int64_t M, int64_t N, int64_t K32, const int16_t *a, const float *sa, const int16_t *bq, const float *sb,
                               const float *bias, float *y, int64_t ldy) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      const int16_t *ar = a + i * K32, *p = bq + (j / 8) * K32 * 8;
      const float *sp = sb + (j / 8) * (K32 / 32) * 8;
      float t = 0;
      for (int64_t b = 0; b < K32 / 32; b++) {
        uint32_t acc = 0; /* exact for the exporter's codes (within ±4095); others wrap as i32x4.add does, never UB */
        for (int64_t k = 32 * b; k < 32 * b + 32; k++) acc += (uint32_t)((int32_t)ar[k] * p[(k / 2) * 16 + (j % 8) * 2 + k % 2]);
        const float m = (float)(int32_t)acc * sp[b * 8 + j % 8];
        t = t + m;
      }
      const float m = t * sa[i];
      y[i * ldy + j] = m + (bias ? bias[i] : 0.0f);
    }
}

/* ---- the ops ------------------------------------------------------------------------------------
 * conv_i16: x [N, C, (H,) W], w int16 [O, K32] (K = C·KH·KW, K32 = K rounded up to 32, zeros past K),
 * scale [O][, bias [O]] -> y [N, O, (OH,) OW], workspace; iattr as conv_q8's. Per image: x's patches
 * in 8-position panels (tdm_f32_im2col_packed, P output positions), each quantized
 * (tdm_i16_quantize_panel) right after it is packed, the panels split over threads, then the GEMM
 * y [O, P] = w @ panels with the row scales and the bias, the rows split over threads, then the
 * activation. conv_transpose_i16: w int16 [M, C32] (M =
 * O·KH·KW taps), scale [M]: the GEMM z [M, HW] = w @ x's positions, added where each tap lands
 * (tdm_f32_col2im_add) onto the bias. A panel holding a NaN or ±inf is computed in float32 instead
 * (its 8 columns: each weight dequantized, w · scale, then the products summed in k order, times
 * nothing more; a weight rounded to 0 then gives 0 · inf = NaN where the float weight would give
 * ±inf). Workspace floats (i16_workspace, python/tandem/quantize_conv.py the same): z (transposed),
 * the float panels [ceil(P/8)·K·8], their codes [ceil(P/8)·K32·4], scales [ceil(P/8)·K32/4] and a flag
 * per panel. */

typedef tdm_conv_geom geom;

static int64_t k32_of(int64_t K) { return (K + 31) / 32 * 32; }

/* The workspace's GEMM part for `cols` columns of K: the float panels [ceil(cols/8), K, 8], their
 * codes [.., K32/2, 8, 2] int16 (K32·4 floats a panel), their scales [.., K32/32, 8] and a flag per
 * panel (floats); false on overflow. */
static bool i16_parts(size_t cols, size_t K, size_t *need) {
  const size_t P = (cols + 7) / 8, K32 = (K + 31) / 32 * 32;
  if (K > SIZE_MAX / 64) return false;
  return tdm__mul_size(P, K * 8 + K32 * 4 + K32 / 4 + 1, need);
}

typedef struct {
  int64_t N, K32, ldy;
  const int16_t *w, *q;
  const float *sa, *sb, *bias;
  float *y;
} gemm_job;

static void gemm_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const gemm_job *j = c;
  (void)t, (void)ws;
  tdm_i16_conv_gemm(hi - lo, j->N, j->K32, j->w + lo * j->K32, j->sa + lo, j->q, j->sb, j->bias ? j->bias + lo : NULL, j->y + lo * j->ldy,
                    j->ldy);
}

/* The GEMM's B in the workspace (i16_parts): per 8 columns the float panel [K, 8] (from x: the
 * conv's patches, tdm_f32_im2col_packed, or the transpose's positions x[:, p]), then its codes and
 * block scales, each panel packed and quantized in one pass while it is in cache, the panels split
 * between threads; a panel with a NaN or ±inf gets zero codes (the GEMM's sums stay finite) and its
 * flag. */
typedef struct {
  const geom *g; /* NULL: the transpose's positions */
  const float *x;
  int64_t N, K, K32;
  float *fp, *sb, *flag;
  int16_t *q;
} panels_job;

static void panels_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const panels_job *j = c;
  (void)t, (void)ws;
  for (int64_t p = lo; p < hi; p++) {
    float *fp = j->fp + p * j->K * 8;
    int16_t *q = j->q + p * j->K32 * 8;
    float *sb = j->sb + p * (j->K32 / 4);
    const int64_t m = j->N - 8 * p < 8 ? j->N - 8 * p : 8;
    if (j->g) tdm_f32_im2col_packed(j->g, j->x, j->g->C, 8 * p, m, fp);
    else
      for (int64_t k = 0; k < j->K; k++) { /* B's column 8p + t is x[:, 8p + t], k = c */
        memcpy(fp + k * 8, j->x + k * j->N + 8 * p, sizeof(float) * (size_t)m);
        if (m < 8) memset(fp + k * 8 + m, 0, sizeof(float) * (size_t)(8 - m));
      }
    const bool ok = tdm_i16_quantize_panel(j->K, fp, q, sb);
    if (!ok) memset(q, 0, sizeof(int16_t) * (size_t)(j->K32 * 8)), memset(sb, 0, sizeof(float) * (size_t)(j->K32 / 4));
    j->flag[p] = ok ? 0.0f : 1.0f;
  }
}

/* y [M, N] (row stride N) = w [M, K] · B + bias, B's N columns packed from x as above into the
 * workspace ws: the GEMM over the rows split between threads, then the columns of a panel with a
 * NaN or ±inf in float32. Below about 16 K floats of panels one thread packs them (a parallel region
 * costs more than packing so few, conv_gemm.c's tdm__im2col_parallel). */
static void i16_gemm(const geom *g, const float *x, int64_t M, int64_t N, int64_t K, const int16_t *w, const float *sa, const float *bias,
                     float *y, float *ws) {
  const int64_t K32 = k32_of(K), P = (N + 7) / 8;
  float *fp = ws, *sb = ws + P * K * 8, *flag = sb + P * (K32 / 4);
  int16_t *q = (int16_t *)(flag + P);
  panels_job pj = {g, x, N, K, K32, fp, sb, flag, q};
  if (K * N < 16384) panels_part(&pj, 0, P, 0, NULL);
  else tdm__parallel(P, 1, panels_part, &pj);
  gemm_job j = {N, K32, N, w, q, sa, sb, bias, y};
  tdm__parallel(M, 4, gemm_part, &j);
  for (int64_t p = 0; p < P; p++)
    if (flag[p] != 0.0f)
      for (int64_t i = 0; i < M; i++)
        for (int64_t col = 8 * p; col < N && col < 8 * p + 8; col++) {
          float t = 0;
          for (int64_t k = 0; k < K; k++) t += (float)w[i * K32 + k] * sa[i] * fp[(p * K + k) * 8 + col % 8];
          y[i * N + col] = t + (bias ? bias[i] : 0.0f);
        }
}

tdm_status tdm__conv_i16_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int r = (int)op->iattr[0];
  geom g;
  tdm__conv_geom(&g, r, in[0].shape, out->shape, op->iattr + 3, op->iattr + 3 + r);
  const int64_t O = out->shape->dims[1], K = g.C * g.KH * g.KW, P = g.OH * g.OW;
  const float *bias = op->iattr[1] ? in[3].data : NULL;
  const int act = op->n_iattr == 4 + 4 * (uint32_t)r ? (int)op->iattr[3 + 4 * r] : TDM_CONV_ACT_NONE;
  float *ws = out[1].data;
  for (int64_t n = 0; n < g.N; n++) {
    float *y = (float *)out->data + n * O * P;
    i16_gemm(&g, (const float *)in[0].data + n * g.C * g.H * g.W, O, P, K, in[1].data, in[2].data, bias, y, ws);
    tdm__conv_activate(act, y, O * P);
  }
  return TDM_OK;
}

tdm_status tdm__conv_transpose_i16_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int r = (int)op->iattr[0];
  geom g;
  tdm__conv_geom(&g, r, in[0].shape, out->shape, op->iattr + 3, op->iattr + 3 + r);
  const int64_t O = out->shape->dims[1], M = O * g.KH * g.KW, HW = g.H * g.W, OHW = g.OH * g.OW;
  const float *bias = op->iattr[1] ? in[3].data : NULL;
  float *z = out[1].data;
  for (int64_t n = 0; n < g.N; n++) {
    float *y = (float *)out->data + n * O * OHW;
    for (int64_t o = 0; o < O; o++)
      for (int64_t i = 0; i < OHW; i++) y[o * OHW + i] = bias ? bias[o] : 0.0f;
    if (g.C == 0) continue;
    i16_gemm(NULL, (const float *)in[0].data + n * g.C * HW, M, HW, g.C, in[1].data, in[2].data, NULL, z, z + M * HW);
    tdm_f32_col2im_add(&g, O, z, y);
  }
  return TDM_OK;
}

/* w int16 [M, K32] and scale float32 [M]. */
static bool i16_weights_ok(const tdm_method *m, const tdm_op *op, int64_t K, int64_t M) {
  const tdm_value *w = TDM_VAL(m, op, 1), *s = TDM_VAL(m, op, 2);
  return w->dtype == TDM_I16 && w->shape.rank == 2 && w->shape.dims[0] == M && w->shape.dims[1] == k32_of(K) && s->dtype == TDM_F32 &&
      s->shape.rank == 1 && s->shape.dims[0] == M;
}

tdm_status tdm__conv_i16_check(const tdm_method *m, const tdm_op *op) {
  size_t K = 0, P = 0, need;
  const tdm_status st = tdm__conv_quant_geometry(
      m, op, 3, "takes x, w, scale[, bias], outputs y and a workspace, [r, has_bias, 1, kernel, stride, padding, dilation[, act]]", &K, &P);
  if (st != TDM_OK) return st;
  if (!i16_weights_ok(m, op, (int64_t)K, TDM_OUTVAL(m, op, 0)->shape.dims[1]))
    return tdm__rule(op, "weights must be int16 [O, C·kernel rounded up to 32] and scales float32 [O]");
  if (!i16_parts(P, K, &need) || (size_t)TDM_OUTVAL(m, op, 1)->numel < need)
    return tdm__rule(op,
                     "workspace must hold ceil(P/8)·(8·K + 4·K32 + K32/4 + 1) floats (P output positions, K = C·kernel, K32 = K "
                     "rounded up to 32, docs/ops.md)");
  return TDM_OK;
}

tdm_status tdm__conv_transpose_i16_check(const tdm_method *m, const tdm_op *op) {
  int64_t C = 0;
  size_t M = 0, HW = 0, need, z;
  const tdm_status st = tdm__conv_transpose_quant_geometry(
      m, op, 3, "takes x, w, scale[, bias], outputs y and a workspace, [r, has_bias, 1, kernel, stride, padding, dilation, output_padding]",
      &C, &M, &HW);
  if (st != TDM_OK) return st;
  if (!i16_weights_ok(m, op, C, (int64_t)M))
    return tdm__rule(op, "weights must be int16 [O·kernel, C rounded up to 32] and scales float32 [O·kernel]");
  if (!tdm__mul_size(M, HW, &z) || !i16_parts(HW, (size_t)C, &need) || !tdm__add_size(need, z, &need) ||
      (size_t)TDM_OUTVAL(m, op, 1)->numel < need)
    return tdm__rule(op,
                     "workspace must hold M·H·W + ceil(H·W/8)·(8·C + 4·C32 + C32/4 + 1) floats (M = O·kernel, C32 = C rounded up "
                     "to 32, docs/ops.md)");
  return TDM_OK;
}
