/* conv_q8.c — conv_q8 and conv_transpose_q8: convolutions whose weights are stored int8 per output
 * channel (`quantize="int8", quantize_convs=True` at export, python/tandem/quantize_conv.py), and
 * conv_bf16 / conv_transpose_bf16, the same convolutions with bfloat16 weights (quantize_convs="bf16"),
 * for streaming steps where a call reads many weight bytes per output (a few output positions of a
 * big kernel): the weight bytes, not the multiply-adds, bound them, and int8 reads a quarter of
 * float32's, bfloat16 half.
 *
 * Both are GEMVs over int8 columns in matmul_q8's packed layout (qp [ceil(M/8), K, 8], scale
 * [ceil(M/8), 8]: docs/ops.md, "Quantized weights"), one per row of activations:
 *  - conv_q8: the rows are x's patches (im2row, k = (c·KH + kh)·KW + kw), the columns the output
 *    channels: y[o, p] = bias[o] + patch[p] · w[o] (then the fused activation);
 *  - conv_transpose_q8: the rows are x's positions (x transposed), the columns the Og·KH·KW taps
 *    of each output channel: z[m, p] = x[:, p] · wt[m], added where each tap lands (col2im).
 * Each row is quantized to int16 per block of 32 (tdm_conv_q8_quantize_row: matmul_q8's rows are
 * int8; int16 ones cost the GEMV nothing and remove the activations' share of the error, below)
 * and multiplied with the integer-dot rows kernel (tdm_q8_gemm_dot, each row tdm_q8_gemv_dot's bits); a row with a NaN or ±inf takes the
 * float-lane GEMV (tdm_q8_gemm), the other rows keep theirs. Threads split the columns; each thread walks its columns a panel
 * (or four) at a time and runs every row over it while it is in cache, so each weight byte is read
 * from memory once per call. The kernels are matmul_q8's (variants.h, config.c, the selftest).
 *
 * The bfloat16 ops run the same steps with tdm_bf16_gemv (variants.h) instead of the int8 GEMV: each
 * row of activations is split once per call into its even and odd k per block of 8 (bf16_split), and
 * the weights, 2-row panels [ceil(M/2), ceil(K/8), 2, 8], are widened to float32 in registers (a
 * shift or a mask: bfloat16 is float32's top half) and multiplied in float32; no row is quantized,
 * so a NaN or ±inf needs no path of its own. */
#include "../ops.h"
#include "../threads.h"
#include "../util.h"
#include "conv.h"
#include "gemm.h"

#include <string.h>

typedef tdm_conv_geom geom;

/* The workspace (floats) for `rows` activation rows of K and M columns: the rows [rows·K], the
 * result [rows·M], the int8 rows as int16 pairs [rows·(K + K % 2) int16 used], their block scales
 * [rows·ceil(K/32)] and whether each row could be quantized [rows]; false if it overflows. python/tandem/quantize_conv.py computes the same. */
bool tdm__conv_q8_workspace(size_t rows, size_t K, size_t M, size_t *need) {
  size_t a, b, c, d;
  if (K > SIZE_MAX / 4 || !tdm__mul_size(rows, K, &a) || !tdm__mul_size(rows, M, &b) || !tdm__mul_size(rows, (K + 3) / 2, &c) ||
      !tdm__mul_size(rows, (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK + 1, &d))
    return false;
  return tdm__add_size(a, b, need) && tdm__add_size(*need, c, need) && tdm__add_size(*need, d, need);
}

typedef struct {
  int64_t rows, K, M;
  const float *a;     /* rows [rows, K] */
  const int16_t *xq;  /* rows quantized, K rounded up to even int16 each (tdm_q8_gemm_dot's stride) */
  const float *xs;    /* their block scales, ceil(K/32) each */
  const float *dot;   /* per row: 1 if quantized, 0 for the float-lane path (a NaN or ±inf in it) */
  const int8_t *qp;   /* [ceil(M/8), K, 8] */
  const float *scale; /* [ceil(M/8), 8] */
  float *yt;          /* [rows, M] */
} rows_job;

static void rows_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const rows_job *j = c;
  (void)t, (void)ws;
  /* four panels at once (the GEMV's widest step) while they stay in L2, else one */
  const int64_t cb = j->K <= 16384 ? 32 : 8, xql = j->K + j->K % 2, xsl = (j->K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK;
  for (int64_t c0 = lo; c0 < hi; c0 += cb) {
    const int64_t n = hi - c0 < cb ? hi - c0 : cb;
    const int8_t *q = j->qp + c0 / TDM_PANEL * j->K * TDM_PANEL;
    for (int64_t r = 0; r < j->rows;) {
      if (j->dot[r] == 0.0f) { /* a NaN or ±inf in this row: the float lanes, as alone */
        tdm_q8_gemm(1, n, j->K, j->a + r * j->K, q, j->scale + c0, j->yt + r * j->M + c0);
        r++;
        continue;
      }
      int64_t e = r + 1; /* a run of quantized rows, each weight block loaded once for all */
      while (e < j->rows && e - r < TDM_Q8_DOT_MAX_ROWS && j->dot[e] != 0.0f) e++;
      tdm_q8_gemm_dot(e - r, n, j->K, j->xq + r * xql, j->xs + r * xsl, q, j->scale + c0, j->yt + r * j->M + c0, j->M);
      r = e;
    }
  }
}

/* The rows are quantized to int16 (tdm_conv_q8_quantize_row, quant.c), where matmul_q8's are int8:
 * the GEMV takes them as they are (its pairs are int16 already) and sums them exactly, so the
 * activations cost no accuracy to speak of (2^-16 of a block's largest value; int8 rows alone changed
 * 2 of 128 of a full-size Mimi's codes) and no time. The weights' int8 rounding is
 * the larger share (8 of 128; two int8 levels would remove it but ran no faster than float32 convs). */

/* yt [rows, M] = a [rows, K] @ (q · scale), the workspace after a's rows: ws = a + rows·K. */
static float *q8_rows(int64_t rows, int64_t K, int64_t M, const float *a, const int8_t *qp, const float *scale, float *ws) {
  float *yt = ws;
  int16_t *xq = (int16_t *)(yt + rows * M);
  float *xs = (float *)(xq + rows * ((K + 3) / 2 * 2));
  const int64_t xsl = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK;
  float *dot = xs + rows * xsl;
  for (int64_t r = 0; r < rows; r++) dot[r] = tdm_conv_q8_quantize_row(K, a + r * K, xq + r * (K + K % 2), xs + r * xsl) ? 1.0f : 0.0f;
  rows_job j = {rows, K, M, a, xq, xs, dot, qp, scale, yt};
  tdm__parallel(M, 32, rows_part, &j);
  return yt;
}

void tdm_bf16_gemv__scalar(int64_t R, int64_t M, int64_t K8, const float *eo, const uint16_t *w, int64_t p0, int64_t p1, float *yt,
                           int64_t ldy) {
  for (int64_t p = p0; p < p1; p++)
    for (int h = 0; h < 2 && 2 * p + h < M; h++) {
      const uint16_t *wr = w + p * K8 * 16 + h * 8;
      for (int64_t r = 0; r < R; r++) {
        const float *x = eo + r * K8 * 8;
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int64_t b = 0; b < K8; b++)
          for (int l = 0; l < 4; l++) { /* two statements a product: no contraction into a fused multiply-add */
            const float pe = tdm_bf16_to_f32(wr[b * 16 + 2 * l]) * x[b * 8 + l];
            s[l] = s[l] + pe;
            const float po = tdm_bf16_to_f32(wr[b * 16 + 2 * l + 1]) * x[b * 8 + 4 + l];
            s[l] = s[l] + po;
          }
        yt[r * ldy + 2 * p + h] = (s[0] + s[1]) + (s[2] + s[3]);
      }
    }
}

/* The workspace (floats) of conv_bf16's `rows` rows of K against M columns: the rows [rows·K], the
 * result [rows·M] and the rows split [rows·8·ceil(K/8)]; false if it overflows.
 * python/tandem/quantize_conv.py computes the same. */
bool tdm__conv_bf16_workspace(size_t rows, size_t K, size_t M, size_t *need) {
  size_t a, b, c;
  if (K > SIZE_MAX / 4 || !tdm__mul_size(rows, K, &a) || !tdm__mul_size(rows, M, &b) || !tdm__mul_size(rows, (K + 7) / 8 * 8, &c))
    return false;
  return tdm__add_size(a, b, need) && tdm__add_size(*need, c, need);
}

/* eo [rows, 8·K8] = each row of a [rows, K] by blocks of 8 k: its 4 even k, then its 4 odd k (the
 * lanes the widened bfloat16 halves meet in tdm_bf16_gemv), zeros past K. */
static void bf16_split(int64_t rows, int64_t K, const float *a, float *eo) {
  const int64_t K8 = (K + 7) / 8;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t b = 0; b < K8; b++)
      for (int l = 0; l < 8; l++) {
        const int64_t k = 8 * b + (l < 4 ? 2 * l : 2 * (l - 4) + 1);
        eo[(r * K8 + b) * 8 + l] = k < K ? a[r * K + k] : 0.0f;
      }
}

typedef struct {
  int64_t rows, M, K8;
  const float *eo;
  const uint16_t *w;
  float *yt; /* [rows, M] */
} bf16_job;

static void bf16_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const bf16_job *j = c;
  (void)t, (void)ws;
  tdm_bf16_gemv(j->rows, j->M, j->K8, j->eo, j->w, lo, hi, j->yt, j->M);
}

/* yt [rows, M] = a [rows, K] @ the bfloat16 panels w, the workspace after a's rows: ws = a + rows·K.
 * Threads split the panels (each row's sums are those it has alone: the same bits for any split). */
static float *bf16_rows(int64_t rows, int64_t K, int64_t M, const float *a, const uint16_t *w, float *ws) {
  float *yt = ws, *eo = yt + rows * M;
  bf16_split(rows, K, a, eo);
  bf16_job j = {rows, M, (K + 7) / 8, eo, w, yt};
  tdm__parallel((M + 1) / 2, 2, bf16_part, &j);
  return yt;
}

/* The GEMV of an op of this family: yt [rows, M] = a [rows, K] @ its weights (in[1], and in[2]: the
 * int8 ones' scales). */
static float *narrow_rows(const tdm_op *op, const tdm_tensor *in, int64_t rows, int64_t K, int64_t M, const float *a, float *ws) {
  if (op->def->code) return bf16_rows(rows, K, M, a, in[1].data, ws);
  return q8_rows(rows, K, M, a, in[1].data, in[2].data, ws);
}

/* conv_q8: x [N, C, (H,) W], qp int8 [ceil(O/8), C·KH·KW, 8], scale [ceil(O/8), 8][, bias [O]] →
 * y [N, O, (OH,) OW], workspace; conv_bf16: x, w bfloat16 [ceil(O/2), ceil(C·KH·KW/8), 2, 8][, bias]
 * → the same. iattr = [r, has_bias, groups = 1, kernel(r), stride(r), padding(r), dilation(r)[,
 * activation]]. */
tdm_status tdm__conv_q8_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int r = (int)op->iattr[0];
  geom g;
  tdm__conv_geom(&g, r, in[0].shape, out->shape, op->iattr + 3, op->iattr + 3 + r);
  const int64_t O = out->shape->dims[1], K = g.C * g.KH * g.KW, P = g.OH * g.OW;
  const float *bias = op->iattr[1] ? in[op->def->code ? 2 : 3].data : NULL;
  const int act = op->n_iattr == 4 + 4 * (uint32_t)r ? (int)op->iattr[3 + 4 * r] : TDM_CONV_ACT_NONE;
  float *colt = out[1].data;
  for (int64_t n = 0; n < g.N; n++) {
    float *y = (float *)out->data + n * O * P;
    if (K == 0) {
      memset(y, 0, sizeof(float) * (size_t)(O * P));
    } else {
      tdm_f32_im2row(&g, (const float *)in[0].data + n * g.C * g.H * g.W, g.C, 0, P, colt);
      const float *yt = narrow_rows(op, in, P, K, O, colt, colt + P * K);
      for (int64_t o = 0; o < O; o++)
        for (int64_t p = 0; p < P; p++) y[o * P + p] = yt[p * O + o];
    }
    if (bias)
      for (int64_t o = 0; o < O; o++)
        for (int64_t p = 0; p < P; p++) y[o * P + p] += bias[o];
    tdm__conv_activate(act, y, O * P);
  }
  return TDM_OK;
}

/* The weights of an op of this family for K rows of M columns: int8 [ceil(M/8), K, 8] with scales
 * float32 [ceil(M/8), 8], or bfloat16 [ceil(M/2), ceil(K/8), 2, 8]. */
static bool weights_ok(const tdm_method *m, const tdm_op *op, int64_t K, int64_t M) {
  const tdm_value *q = TDM_VAL(m, op, 1);
  if (op->def->code)
    return q->dtype == TDM_BF16 && q->shape.rank == 4 && q->shape.dims[0] == M / 2 + M % 2 && q->shape.dims[1] == K / 8 + (K % 8 != 0) &&
        q->shape.dims[2] == 2 && q->shape.dims[3] == 8;
  const tdm_value *s = TDM_VAL(m, op, 2);
  const int64_t P = M / TDM_PANEL + (M % TDM_PANEL != 0);
  return q->dtype == TDM_I8 && q->shape.rank == 3 && q->shape.dims[0] == P && q->shape.dims[1] == K && q->shape.dims[2] == TDM_PANEL &&
      s->dtype == TDM_F32 && s->shape.rank == 2 && s->shape.dims[0] == P && s->shape.dims[1] == TDM_PANEL;
}

/* Its workspace's floats for `rows` rows of K against M columns (false on overflow). */
static bool workspace_of(const tdm_op *op, size_t rows, size_t K, size_t M, size_t *need) {
  return op->def->code ? tdm__conv_bf16_workspace(rows, K, M, need) : tdm__conv_q8_workspace(rows, K, M, need);
}

/* The checks every convolution with quantized weights (conv_q8, conv_bf16, conv_i16) starts with:
 * 2 outputs, the attributes (`usage` names them), x and nw - 1 weight operands then the bias, groups
 * 1, the activation, x, y and the workspace float32 of rank r + 2, each spatial output size, the bias
 * float32 [O]; sets K = C·kernel and P = the output positions. */
tdm_status tdm__conv_quant_geometry(const tdm_method *m, const tdm_op *op, uint32_t nw, const char *usage, size_t *K, size_t *P) {
  if (op->n_out != 2 || op->n_iattr < 3) return tdm__rule(op, "%s", usage);
  const int64_t r = op->iattr[0], hb = op->iattr[1];
  if ((r != 1 && r != 2) || (hb != 0 && hb != 1) || (op->n_iattr != 3 + 4 * (uint32_t)r && op->n_iattr != 4 + 4 * (uint32_t)r) ||
      op->n_in != nw + hb)
    return tdm__rule(op, "bad spatial rank, has_bias or attribute count");
  if (op->iattr[2] != 1) return tdm__rule(op, "groups must be 1 (grouped convolutions keep float32 weights)");
  if (op->n_iattr == 4 + 4 * (uint32_t)r && (op->iattr[3 + 4 * r] < 0 || op->iattr[3 + 4 * r] >= TDM_CONV_ACT_COUNT))
    return tdm__rule(op, "activation must be 0 (none), 1 (relu), 2 (hardswish) or 3 (elu)");
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0), *ws = TDM_OUTVAL(m, op, 1);
  if (x->dtype != TDM_F32 || y->dtype != TDM_F32 || ws->dtype != TDM_F32) return tdm__rule(op, "x, y and the workspace must be float32");
  if (x->shape.rank != r + 2 || y->shape.rank != r + 2) return tdm__rule(op, "x and y must have rank %d", (int)r + 2);
  if (y->shape.dims[0] != x->shape.dims[0]) return tdm__rule(op, "output must be [N, O, ...]");
  const int64_t *k = op->iattr + 3, *a = op->iattr + 3 + r;
  *K = (size_t)x->shape.dims[1], *P = 1;
  for (int i = 0; i < r; i++) {
    if (k[i] > INT64_MAX / 4 || !tdm__conv_out_size_ok(x->shape.dims[2 + i], k[i], a[i], a[r + i], a[2 * r + i], y->shape.dims[2 + i]))
      return tdm__rule(op, "spatial dim %d: output size does not follow from kernel, stride, padding and dilation", i);
    if (!tdm__mul_size(*K, (size_t)k[i], K) || !tdm__mul_size(*P, (size_t)y->shape.dims[2 + i], P))
      return tdm__rule(op, "kernel or output too large");
  }
  if ((uint64_t)*K > INT64_MAX / 64) return tdm__rule(op, "kernel too large");
  if (hb) {
    const tdm_value *b = TDM_VAL(m, op, nw);
    if (b->dtype != TDM_F32 || b->shape.rank != 1 || b->shape.dims[0] != y->shape.dims[1]) return tdm__rule(op, "bias must be float32 [O]");
  }
  return TDM_OK;
}

tdm_status tdm__conv_q8_check(const tdm_method *m, const tdm_op *op) {
  const bool bf = op->def->code != 0;
  size_t K = 0, P = 0, need;
  const tdm_status st = tdm__conv_quant_geometry(
      m, op, bf ? 2 : 3,
      bf ? "takes x, w[, bias], outputs y and a workspace, [r, has_bias, 1, kernel, stride, padding, dilation[, act]]"
         : "takes x, q, scale[, bias], outputs y and a workspace, [r, has_bias, 1, kernel, stride, padding, dilation[, act]]",
      &K, &P);
  if (st != TDM_OK) return st;
  const int64_t O = TDM_OUTVAL(m, op, 0)->shape.dims[1];
  if (!weights_ok(m, op, (int64_t)K, O))
    return tdm__rule(op,
                     bf ? "weights must be bfloat16 [ceil(O/2), ceil(C·kernel/8), 2, 8]"
                        : "weights must be int8 [ceil(O/8), C·kernel, 8] and scales float32 [ceil(O/8), 8]");
  if (!workspace_of(op, P, K, (size_t)O, &need) || (size_t)TDM_OUTVAL(m, op, 1)->numel < need)
    return tdm__rule(op,
                     bf ? "workspace must hold P·K + P·O + P·8·ceil(K/8) floats (P output positions, K = C·kernel, docs/ops.md)"
                        : "workspace must hold P·K + P·O + P·ceil((K+1)/2) + P·(ceil(K/32) + 1) floats (P output positions, "
                          "docs/ops.md)");
  return TDM_OK;
}

/* conv_transpose_q8: x [N, C, (H,) W], qp int8 [ceil(M/8), C, 8] (M = O·KH·KW), scale [ceil(M/8), 8]
 * [, bias [O]] → y [N, O, (OH,) OW], workspace; conv_transpose_bf16: x, w bfloat16 [ceil(M/2),
 * ceil(C/8), 2, 8][, bias] → the same. iattr = conv_transpose's with groups = 1. */
tdm_status tdm__conv_transpose_q8_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int r = (int)op->iattr[0];
  geom g;
  tdm__conv_geom(&g, r, in[0].shape, out->shape, op->iattr + 3, op->iattr + 3 + r);
  const int64_t O = out->shape->dims[1], M = O * g.KH * g.KW, HW = g.H * g.W, OHW = g.OH * g.OW;
  const float *bias = op->iattr[1] ? in[op->def->code ? 2 : 3].data : NULL;
  float *xt = out[1].data, *z = xt + HW * g.C, *ws = z + M * HW;
  for (int64_t n = 0; n < g.N; n++) {
    float *y = (float *)out->data + n * O * OHW;
    for (int64_t o = 0; o < O; o++)
      for (int64_t i = 0; i < OHW; i++) y[o * OHW + i] = bias ? bias[o] : 0.0f;
    if (g.C == 0) continue;
    const float *x = (const float *)in[0].data + n * g.C * HW;
    for (int64_t c = 0; c < g.C; c++)
      for (int64_t p = 0; p < HW; p++) xt[p * g.C + c] = x[c * HW + p];
    const float *zt = narrow_rows(op, in, HW, g.C, M, xt, ws);
    for (int64_t i = 0; i < M; i++)
      for (int64_t p = 0; p < HW; p++) z[i * HW + p] = zt[p * M + i];
    tdm_f32_col2im_add(&g, O, z, y);
  }
  return TDM_OK;
}

/* tdm__conv_quant_geometry's checks for the transposed ones (conv_transpose_q8, _bf16, _i16), their
 * attributes conv_transpose's; sets C, M = O·kernel and HW = the input positions. */
tdm_status tdm__conv_transpose_quant_geometry(const tdm_method *m, const tdm_op *op, uint32_t nw, const char *usage, int64_t *C, size_t *M,
                                              size_t *HW) {
  if (op->n_out != 2 || op->n_iattr < 3) return tdm__rule(op, "%s", usage);
  const int64_t r = op->iattr[0], hb = op->iattr[1];
  if ((r != 1 && r != 2) || (hb != 0 && hb != 1) || op->n_iattr != 3 + 5 * (uint32_t)r || op->n_in != nw + hb)
    return tdm__rule(op, "bad spatial rank, has_bias or attribute count");
  if (op->iattr[2] != 1) return tdm__rule(op, "groups must be 1 (grouped transposed convolutions keep float32 weights)");
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0), *ws = TDM_OUTVAL(m, op, 1);
  if (x->dtype != TDM_F32 || y->dtype != TDM_F32 || ws->dtype != TDM_F32) return tdm__rule(op, "x, y and the workspace must be float32");
  if (x->shape.rank != r + 2 || y->shape.rank != r + 2) return tdm__rule(op, "x and y must have rank %d", (int)r + 2);
  if (y->shape.dims[0] != x->shape.dims[0]) return tdm__rule(op, "output must be [N, O, ...]");
  const int64_t *a = op->iattr + 3;
  *C = x->shape.dims[1], *M = (size_t)y->shape.dims[1], *HW = 1;
  for (int i = 0; i < r; i++) {
    if (!tdm__conv_t_out_size_ok(x->shape.dims[2 + i], a[i], a[r + i], a[2 * r + i], a[3 * r + i], a[4 * r + i], y->shape.dims[2 + i]))
      return tdm__rule(op, "spatial dim %d: output size does not follow from kernel, stride, padding, dilation and output padding", i);
    if (!tdm__mul_size(*M, (size_t)a[i], M) || !tdm__mul_size(*HW, (size_t)x->shape.dims[2 + i], HW))
      return tdm__rule(op, "kernel or input too large");
  }
  if ((uint64_t)*M > INT64_MAX / 4 || (uint64_t)*C > INT64_MAX / 64) return tdm__rule(op, "kernel or channels too large");
  if (hb) {
    const tdm_value *b = TDM_VAL(m, op, nw);
    if (b->dtype != TDM_F32 || b->shape.rank != 1 || b->shape.dims[0] != y->shape.dims[1]) return tdm__rule(op, "bias must be float32 [O]");
  }
  return TDM_OK;
}

tdm_status tdm__conv_transpose_q8_check(const tdm_method *m, const tdm_op *op) {
  const bool bf = op->def->code != 0;
  int64_t C = 0;
  size_t M = 0, HW = 0, need, more;
  const tdm_status st = tdm__conv_transpose_quant_geometry(
      m, op, bf ? 2 : 3,
      bf ? "takes x, w[, bias], outputs y and a workspace, [r, has_bias, 1, kernel, stride, padding, dilation, output_padding]"
         : "takes x, q, scale[, bias], outputs y and a workspace, [r, has_bias, 1, kernel, stride, padding, dilation, output_padding]",
      &C, &M, &HW);
  if (st != TDM_OK) return st;
  if (!weights_ok(m, op, C, (int64_t)M))
    return tdm__rule(op,
                     bf ? "weights must be bfloat16 [ceil(O·kernel/2), ceil(C/8), 2, 8]"
                        : "weights must be int8 [ceil(O·kernel/8), C, 8] and scales float32 [ceil(O·kernel/8), 8]");
  /* x transposed [HW·C] and z [M·HW] before the rows' workspace */
  if (!workspace_of(op, HW, (size_t)C, M, &need) || !tdm__mul_size(HW, (size_t)C + M, &more) || !tdm__add_size(need, more, &need) ||
      (size_t)TDM_OUTVAL(m, op, 1)->numel < need)
    return tdm__rule(op,
                     bf ? "workspace must hold H·W·(2·C + 2·M) + H·W·8·ceil(C/8) floats (docs/ops.md)"
                        : "workspace must hold H·W·(2·C + 2·M) + H·W·ceil((C+1)/2) + H·W·(ceil(C/32) + 1) floats (docs/ops.md)");
  return TDM_OK;
}
