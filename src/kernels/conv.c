/* conv.c — the convolution op (1-d and 2-d, groups, stride, padding, dilation, a fused activation)
 * and the table of the convolution family's ops (pooling: pool.c; transposed: conv_transpose.c).
 * 1-d runs as 2-d with a height of 1.
 *
 * Convolution takes one of three paths, the exporter choosing by giving the op a workspace or not:
 *  - 1×1 without groups, stride or padding: the GEMM kernel on x itself (y[n] = w @ x[n]);
 *  - with a workspace (docs/ops.md: the exporter gives one when each output sums over 16 or more
 *    products, Cg·KH·KW >= 16): im2col into the workspace in 8-column panels, a chunk of output
 *    positions at a time, then a packed GEMM with register tiles (tdm_f32_conv_gemm), the bias as
 *    the accumulators' start; at few output positions (a streaming step) im2row and dot products
 *    (tdm_f32_conv_dot) instead (conv_gemm.c); 1-d k3 convs with stride 1 and no padding whose
 *    weights the runtime transformed at load (op->wino_u) by Winograd F(4,3) or F(2,3), and 1-d
 *    convs with kernel 2s and stride s by F(3,2) or F(2,2) over x split by phase (conv_wino.c);
 *  - otherwise (depthwise, tiny kernels) directly, one output channel's plane at a time
 *    (tdm_f32_conv_plane: conv_rows.c).
 * Every kernel is called through the pointer config.c sets. */
#include "../ops.h"
#include "../util.h"
#include "conv.h"
#include "gemm.h"

void tdm__conv_geom(tdm_conv_geom *g, int r, const tdm_shape *x, const tdm_shape *y, const int64_t *k, const int64_t *a) {
  const int64_t *st = a, *pd = a + r, *dl = a + 2 * r;
  g->N = x->dims[0];
  g->C = x->dims[1];
  g->H = r == 2 ? x->dims[2] : 1;
  g->W = x->dims[1 + r];
  g->OH = r == 2 ? y->dims[2] : 1;
  g->OW = y->dims[1 + r];
  g->KH = r == 2 ? k[0] : 1;
  g->KW = k[r - 1];
  g->sh = r == 2 ? st[0] : 1;
  g->sw = st[r - 1];
  g->ph = r == 2 ? pd[0] : 0;
  g->pw = pd[r - 1];
  g->dh = r == 2 ? dl[0] : 1;
  g->dw = dl[r - 1];
}

bool tdm__conv_out_size_ok(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t out) {
  if (s < 1 || p < 0 || d < 1 || k < 1 || in > INT64_MAX / 4 || k > INT64_MAX / 4 / d || p > INT64_MAX / 4) return false;
  const int64_t span = d * (k - 1) + 1;
  if (in + 2 * p < span) return false;
  return out == (in + 2 * p - span) / s + 1;
}


/* convrate: one image's group through tdm_f32_conv_gemm_x, B's rows read from x, the last partial
 * panel packed into ws: 1-d (or a height of 1), column stride 1, no padding, at most
 * TDM_CONV_X_MAX_KW taps, more than TDM_CONV_DOT_MAX_N positions (Mimi's k3 convs). false (nothing
 * written) where that does not apply: the caller takes im2col's path. The same bits as im2col +
 * tdm_f32_conv_gemm. (Strided convs through a phase-split copy of x are no faster than im2col:
 * their time is the GEMM's.) */
static bool conv_x(const tdm_conv_geom *g, int64_t Og, int64_t Cg, const float *xg, const float *w, const float *bias, float *yg, float *ws,
                   int64_t wsn, int act) {
  const tdm_conv_gemm_x_fn fn = tdm_f32_conv_gemm_x();
  const int64_t N = g->OW, K = Cg * g->KW;
  if (!fn || Cg < 1 || g->H != 1 || g->OH != 1 || g->KH != 1 || g->pw != 0 || g->sw != 1 || g->KW > TDM_CONV_X_MAX_KW ||
      N <= TDM_CONV_DOT_MAX_N)
    return false;
  const int64_t tail_n = N % TDM_PANEL ? K * TDM_PANEL : 0;
  if (tail_n > wsn) return false;
  tdm_conv_x b = {.Cg = Cg, .KW = g->KW, .cs = g->W, .xb = xg, .tail = NULL};
  for (int64_t kw = 0; kw < g->KW; kw++) b.koff[kw] = kw * g->dw;
  if (tail_n) {
    tdm_f32_conv_x_tail(&b, N, ws);
    b.tail = ws;
  }
  tdm__conv_gemm_x_parallel(fn, Og, N, &b, w, bias, yg, N, act);
  return true;
}

/* conv: x [N, C, (H,) W], w [O, C/groups, (KH,) KW][, bias [O]] → y [N, O, (OH,) OW][, workspace].
 * iattr = [r, has_bias, groups, stride(r), padding(r), dilation(r)[, activation]]. See the top of
 * the file for the three paths. */
static tdm_status conv_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int r = (int)op->iattr[0];
  const int64_t groups = op->iattr[2];
  const tdm_shape *ws = in[1].shape;
  tdm_conv_geom g;
  tdm__conv_geom(&g, r, in[0].shape, out->shape, ws->dims + 2, op->iattr + 3);
  const int64_t O = ws->dims[0], Cg = ws->dims[1], Og = O / groups;
  const float *x = in[0].data, *w = in[1].data, *bias = op->iattr[1] ? in[2].data : NULL;
  const int act = op->n_iattr == 4 + 3 * (uint32_t)r ? (int)op->iattr[3 + 3 * r] : TDM_CONV_ACT_NONE;
  float *y = out->data;
  if (g.KH == 1 && g.KW == 1 && groups == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0) {
    const int64_t HW = g.H * g.W;
    for (int64_t n = 0; n < g.N; n++) {
      float *yn = y + n * O * HW;
      if (HW == 1) /* a GEMV (squeeze-excite's layers on a 1×1 map, a streaming step): dot products, 8 rows of w at once */
        tdm__conv_dot_parallel(O, 1, g.C, w, x + n * g.C, bias, yn, 1, act);
      else if (HW % TDM_PANEL || g.C < 1 || !tdm_f32_conv_gemm_x()) /* bias and activation by each thread on its rows */
        tdm__conv_rows_parallel(O, HW, g.C, w, x + n * g.C * HW, bias, yn, act);
      else { /* x's rows as B, packed panel by panel, the bias as the accumulators' start */
        tdm_conv_x b = {.Cg = g.C, .KW = 1, .cs = HW, .koff = {0}, .xb = x + n * g.C * HW, .tail = NULL};
        tdm__conv_gemm_x_parallel(tdm_f32_conv_gemm_x(), O, HW, &b, w, bias, yn, HW, act);
      }
    }
    return TDM_OK;
  }
  if (op->n_out == 2) { /* im2col + GEMM */
    const int64_t K = Cg * g.KH * g.KW, N = g.OH * g.OW, chunk = tdm_conv_gemm_chunk(K, N);
    float *colp = out[1].data;
    for (int64_t n = 0; n < g.N; n++)
      for (int64_t gi = 0; gi < groups; gi++) {
        const float *xg = x + (n * g.C + gi * Cg) * g.H * g.W;
        float *yg = y + (n * O + gi * Og) * N;
        if (N <= TDM_CONV_DOT_MAX_N) { /* few output positions (a streaming step): patches as rows, dot products */
          tdm_f32_im2row(&g, xg, Cg, 0, N, colp);
          tdm__conv_dot_parallel(Og, N, K, w + gi * Og * K, colp, bias ? bias + gi * Og : NULL, yg, N, act);
          continue;
        }
        if (op->wino_u && groups == 1 && g.H == 1 && g.KH == 1 && g.pw == 0 && g.dw == 1 && (g.sw == 1 ? g.KW == 3 : g.KW == 2 * g.sw)) {
          const tdm_wino wg = g.sw == 1 ? tdm_wino_k3(op->wino_m, Og, Cg, N) : tdm_wino_strided(op->wino_m, Og, Cg, g.sw, g.W, N);
          if (tdm__conv_wino(&wg, xg, op->wino_u, bias, yg, colp, out[1].numel, act)) continue;
        }
        if (conv_x(&g, Og, Cg, xg, w + gi * Og * K, bias ? bias + gi * Og : NULL, yg, colp, out[1].numel, act)) continue;
        for (int64_t n0 = 0; n0 < N; n0 += chunk) {
          const int64_t nc = N - n0 < chunk ? N - n0 : chunk;
          tdm__im2col_parallel(&g, xg, Cg, n0, nc, colp);
          tdm__conv_gemm_parallel(Og, nc, K, w + gi * Og * K, colp, bias ? bias + gi * Og : NULL, yg + n0, N, act);
        }
      }
    return TDM_OK;
  }
  const int64_t KK = Cg * g.KH * g.KW, OHW = g.OH * g.OW;
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t o = 0; o < O; o++) {
      float *yc = y + (n * O + o) * OHW;
      tdm_f32_conv_plane(&g, x + (n * g.C + (o / Og) * Cg) * g.H * g.W, w + o * KK, Cg, bias ? bias[o] : 0.0f, yc);
      tdm__conv_activate(act, yc, OHW);
    }
  return TDM_OK;
}

static tdm_status conv_check(const tdm_method *m, const tdm_op *op) {
  if ((op->n_out != 1 && op->n_out != 2) || op->n_iattr < 3)
    return tdm__rule(op, "takes x, w[, bias], outputs y[, workspace], [r, has_bias, groups, stride, padding, dilation[, activation]]");
  const int64_t r = op->iattr[0], hb = op->iattr[1], groups = op->iattr[2];
  if ((r != 1 && r != 2) || (hb != 0 && hb != 1) || (op->n_iattr != 3 + 3 * (uint32_t)r && op->n_iattr != 4 + 3 * (uint32_t)r) ||
      op->n_in != 2 + hb)
    return tdm__rule(op, "bad spatial rank, has_bias or attribute count");
  if (op->n_iattr == 4 + 3 * (uint32_t)r && (op->iattr[3 + 3 * r] < 0 || op->iattr[3 + 3 * r] >= TDM_CONV_ACT_COUNT))
    return tdm__rule(op, "activation must be 0 (none), 1 (relu), 2 (hardswish) or 3 (elu)");
  const tdm_value *x = TDM_VAL(m, op, 0), *w = TDM_VAL(m, op, 1), *y = TDM_OUTVAL(m, op, 0);
  if (x->dtype != TDM_F32 || w->dtype != TDM_F32 || y->dtype != TDM_F32) return tdm__rule(op, "operands must be float32");
  if (x->shape.rank != r + 2 || w->shape.rank != r + 2 || y->shape.rank != r + 2)
    return tdm__rule(op, "x, w and y must have rank %d", (int)r + 2);
  const int64_t C = x->shape.dims[1], O = w->shape.dims[0], Cg = w->shape.dims[1];
  if (groups < 1 || C % groups || O % groups || Cg != C / groups) return tdm__rule(op, "channels do not match groups");
  if (y->shape.dims[0] != x->shape.dims[0] || y->shape.dims[1] != O) return tdm__rule(op, "output must be [N, O, ...]");
  if (hb) {
    const tdm_value *b = TDM_VAL(m, op, 2);
    if (b->dtype != TDM_F32 || b->shape.rank != 1 || b->shape.dims[0] != O) return tdm__rule(op, "bias must be float32 [O]");
  }
  const int64_t *a = op->iattr + 3;
  for (int i = 0; i < r; i++)
    if (!tdm__conv_out_size_ok(x->shape.dims[2 + i], w->shape.dims[2 + i], a[i], a[r + i], a[2 * r + i], y->shape.dims[2 + i]))
      return tdm__rule(op, "spatial dim %d: output size does not follow from kernel, stride, padding and dilation", i);
  if (op->n_out == 2) { /* im2col + GEMM: the workspace holds K x chunk floats (w's and y's sizes bound both) */
    const tdm_value *ws = TDM_OUTVAL(m, op, 1);
    size_t no = 0; /* rows of y per channel: N·O, checked (y may have no elements while N and O are large) */
    if (!tdm__mul_size((size_t)y->shape.dims[0], (size_t)O, &no)) return tdm__rule(op, "batch times channels too large");
    const int64_t K = w->numel / (O > 0 ? O : 1), N = no > 0 && no <= (size_t)y->numel ? y->numel / (int64_t)no : 0;
    if (ws->dtype != TDM_F32 || ws->numel / (K > 0 ? K : 1) < tdm_conv_gemm_chunk(K, N))
      return tdm__rule(op, "workspace must be float32 of Cg·KH·KW × chunk floats (docs/ops.md)");
  }
  return TDM_OK;
}


const tdm_opdef tdm__conv_ops[] = {
    TDM_OP(conv, 0, conv_check, conv_run),
    TDM_OP(max_pool, 0, tdm__pool_check, tdm__pool_run),
    TDM_OP(avg_pool, 1, tdm__pool_check, tdm__pool_run),
    TDM_OP(conv_transpose, 0, tdm__conv_transpose_check, tdm__conv_transpose_run),
    TDM_OP(elu, 0, tdm__elu_check, tdm__elu_run),
    TDM_OP_END,
};

/* The convolutions with int8 (code 0) or bfloat16 (code 1) weights (conv_q8.c), and with int16 ones
 * (code 2, conv_i16.c): a family of their own, so the verifier lets them read the constant-only
 * dtypes (ops.c, tdm__reads_const_only). */
const tdm_opdef tdm__conv_q8_ops[] = {
    TDM_OP(conv_q8, 0, tdm__conv_q8_check, tdm__conv_q8_run),
    TDM_OP(conv_transpose_q8, 0, tdm__conv_transpose_q8_check, tdm__conv_transpose_q8_run),
    TDM_OP(conv_bf16, 1, tdm__conv_q8_check, tdm__conv_q8_run),
    TDM_OP(conv_transpose_bf16, 1, tdm__conv_transpose_q8_check, tdm__conv_transpose_q8_run),
    TDM_OP(conv_i16, 2, tdm__conv_i16_check, tdm__conv_i16_run),
    TDM_OP(conv_transpose_i16, 2, tdm__conv_transpose_i16_check, tdm__conv_transpose_i16_run),
    TDM_OP_END,
};
