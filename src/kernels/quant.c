/* quant.c — matrix multiply and row gather on weights quantized at export (docs/ops.md, "Quantized
 * weights"): matmul_q8 / embedding_q8 (int8, one float32 scale per output column) and matmul_q4 /
 * embedding_q4 (signed 4-bit, one float32 scale per column and group of G consecutive k). Weights
 * are packed in 8-column panels like matmul_packed's:
 *   int8:  qp [P, K, 8]            qp[p][k][j] = q[k][8p + j], or with the op's layout attribute 1
 *                                  the paired layout (K even, variants.h): q[k][8p + j] at byte
 *                                  (p·K + k - k % 2)·8 + 2j + k % 2
 *   int4:  qp [P, 4·ceil(K/8), 8]  q[k][8p + j] + 8 in the nibble tdm_q4_code reads (variants.h: blocks
 *                                  of 8 k, each column's codes of a block in 4 adjacent bytes)
 *   scale: [P, 8] (int8) or [P, ceil(K/G), 8] (int4), zero past N; P = ceil(N/8).
 * Activations and results stay float32: the kernels turn the weights into float lanes in registers
 * (no dequantized copy), so y equals (q · scale) @ a up to float32 rounding. Except matmul_q8 with
 * one row (a decode step): that row is quantized to int8 per block of 32 and multiplied with
 * integer dot products (tdm_q8_gemv_dot, docs/ops.md "Integer dot products"), fewer instructions
 * per weight; matmul_q4's rows likewise, quantized to int8 per weight group (tdm_q4_gemv_dot). The kernels read the weights in place, in the layout the file has them (the
 * exporter pairs int8 weights: python/tandem/layout.py). This file holds the ops and the scalar
 * references; the SIMD128 variants are in quant_simd128.c (the int4 integer-dot ones in quant_q4_simd128.c), the relaxed-dot ones in quant_relaxed.c,
 * the AVX2 ones in quant_x86.c, all declared in variants.h, picked once in config.c (the ops call
 * through its pointers) and compared by tests/c/kernel_selftest.c. */
#include "../ops.h"
#include "../threads.h"
#include "../util.h"
#include "variants.h"

#include <float.h>
#include <math.h>
#include <string.h>

void tdm_q8_gemm__scalar(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      const int8_t *col = qp + (j / TDM_PANEL) * K * TDM_PANEL + j % TDM_PANEL;
      float acc = 0;
      for (int64_t k = 0; k < K; k++) acc += a[i * K + k] * (float)col[k * TDM_PANEL];
      y[i * N + j] = acc * scale[j];
    }
}

void tdm_q4_gemm__scalar(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale, float *y) {
  const int64_t PB = TDM_Q4_BLOCK_BYTES(K), NG = K / G + (K % G != 0);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      const uint8_t *panel = qp + (j / TDM_PANEL) * PB;
      const float *sc = scale + (j / TDM_PANEL) * NG * TDM_PANEL + j % TDM_PANEL;
      float acc = 0;
      for (int64_t g = 0; g < NG; g++) {
        float s = 0;
        const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
        for (int64_t k = g * G; k < k1; k++) s += a[i * K + k] * (float)tdm_q4_code(panel, k, j);
        acc += s * sc[g * TDM_PANEL];
      }
      y[i * N + j] = acc;
    }
}

/* ---- int8 activations (variants.h: tdm_q8_quantize_row) ----------------------------------------- */

/* Per block of 32: d = max|a| / qmax, xq = round-half-even(a / d) clamped to ±qmax (0 where d is 0,
 * also when m is denormal and d underflows); false on a NaN or ±inf. qmax 127: matmul_q8's int8
 * rows; TDM_Q8_A16_MAX: conv_q8's int16 rows (variants.h). */
bool tdm_q8_quantize_row__scalar(int64_t K, const float *a, int16_t *xq, float *xs, float qmax) {
  for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
    const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
    float m = 0;
    for (int64_t k = k0; k < k1; k++) {
      const float v = fabsf(a[k]);
      if (!(v <= FLT_MAX)) return false; /* NaN or ±inf */
      m = v > m ? v : m;
    }
    const float d = m / qmax;
    xs[b] = d;
    for (int64_t k = k0; k < k1; k++) {
      float q = d > 0 ? rintf(a[k] / d) : 0.0f;
      q = q > qmax ? qmax : q < -qmax ? -qmax : q;
      xq[k] = (int16_t)q;
    }
  }
  if (K % 2) xq[K] = 0;
  return true;
}

bool tdm_q8_quantize_row(int64_t K, const float *a, int16_t *xq, float *xs) { return tdm_q8_quantize_rows(K, a, xq, xs, 127.0f); }
bool tdm_conv_q8_quantize_row(int64_t K, const float *a, int16_t *xq, float *xs) {
  return tdm_q8_quantize_rows(K, a, xq, xs, (float)TDM_Q8_A16_MAX);
}

void tdm_q8_gemv_dot__scalar(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale, float *y) {
  for (int64_t j = 0; j < N; j++) {
    const int8_t *col = qp + (j / TDM_PANEL) * K * TDM_PANEL + j % TDM_PANEL;
    float acc = 0;
    for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
      const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
      int32_t s = 0;
      for (int64_t k = k0; k < k1; k++) s += (int32_t)xq[k] * col[k * TDM_PANEL];
      acc = acc + (float)s * xs[b];
    }
    y[j] = acc * scale[j];
  }
}

void tdm_q8_gemm_dot__scalar(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                             float *y, int64_t ldy) {
  const int64_t KP = K + K % 2, NB = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK;
  for (int64_t r = 0; r < M; r++) tdm_q8_gemv_dot__scalar(N, K, xq + r * KP, xs + r * NB, qp, scale, y + r * ldy);
}

/* ---- int8 weights in the paired layout (variants.h) ---------------------------------------------- */

void tdm_q8_pair_panels(int64_t N, int64_t K, int8_t *qp, bool to_pairs) {
  const int64_t P = (N + TDM_PANEL - 1) / TDM_PANEL;
  for (int64_t i = 0; i < P * (K / 2); i++) { /* every 16 bytes (two rows of a panel) stay in place */
    int8_t *b = qp + i * 2 * TDM_PANEL, t[2 * TDM_PANEL];
    for (int c = 0; c < TDM_PANEL; c++)
      for (int h = 0; h < 2; h++) {
        if (to_pairs) t[2 * c + h] = b[h * TDM_PANEL + c];
        else t[h * TDM_PANEL + c] = b[2 * c + h];
      }
    memcpy(b, t, sizeof t);
  }
}

void tdm_q8_gemm_paired__scalar(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      const int8_t *col = qp + (j / TDM_PANEL) * K * TDM_PANEL + (j % TDM_PANEL) * 2;
      float acc = 0;
      for (int64_t k = 0; k < K; k++) acc += a[i * K + k] * (float)col[(k / 2) * 2 * TDM_PANEL + k % 2];
      y[i * N + j] = acc * scale[j];
    }
}

void tdm_q8_gemv_dot_paired__scalar(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                                    float *y) {
  for (int64_t j = 0; j < N; j++) {
    const int8_t *col = qp + (j / TDM_PANEL) * K * TDM_PANEL + (j % TDM_PANEL) * 2; /* k at (k / 2)·16 + k % 2 */
    float acc = 0;
    for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
      const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
      int32_t s = 0;
      for (int64_t k = k0; k < k1; k++) s += (int32_t)xq[k] * col[(k / 2) * 2 * TDM_PANEL + k % 2];
      acc = acc + (float)s * xs[b];
    }
    y[j] = acc * scale[j];
  }
}

void tdm_q8_gemm_dot_paired__scalar(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp,
                                    const float *scale, float *y, int64_t ldy) {
  const int64_t NB = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK;
  for (int64_t r = 0; r < M; r++) tdm_q8_gemv_dot_paired__scalar(N, K, xq + r * K, xs + r * NB, qp, scale, y + r * ldy);
}

/* ---- int4 weights, int8 activations (variants.h: tdm_q4_quantize_row) --------------------------- */

bool tdm_q4_quantize_row(int64_t K, int64_t G, const float *a, int8_t *xq, float *xs, int32_t *xsum) {
  return tdm_q4_quantize_rows(K, G, a, xq, xs, xsum);
}

bool tdm_q4_quantize_row__scalar(int64_t K, int64_t G, const float *a, int8_t *xq, float *xs, int32_t *xsum) {
  for (int64_t k0 = 0, g = 0; k0 < K; k0 += G, g++) {
    const int64_t k1 = k0 + G < K ? k0 + G : K;
    float m = 0;
    for (int64_t k = k0; k < k1; k++) {
      const float v = fabsf(a[k]);
      if (!(v <= FLT_MAX)) return false; /* NaN or ±inf */
      m = v > m ? v : m;
    }
    const float d = m / 127.0f;
    int32_t sum = 0;
    xs[g] = d;
    for (int64_t k = k0; k < k1; k++) {
      float q = d > 0 ? rintf(a[k] / d) : 0.0f;
      q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
      xq[k] = (int8_t)q;
      sum += xq[k];
    }
    xsum[g] = sum;
  }
  xq[K] = 0;
  return true;
}

void tdm_q4_gemv_dot__scalar(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum, const uint8_t *qp,
                             const float *scale, float *y) {
  const int64_t PB = TDM_Q4_BLOCK_BYTES(K), NG = K / G + (K % G != 0);
  (void)xsum;
  for (int64_t j = 0; j < N; j++) {
    const uint8_t *panel = qp + (j / TDM_PANEL) * PB;
    const float *sc = scale + (j / TDM_PANEL) * NG * TDM_PANEL + j % TDM_PANEL;
    float acc = 0;
    for (int64_t g = 0; g < NG; g++) {
      const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
      int32_t s = 0;
      for (int64_t k = g * G; k < k1; k++) s += (int32_t)xq[k] * tdm_q4_code(panel, k, j);
      acc = acc + ((float)s * xs[g]) * sc[g * TDM_PANEL];
    }
    y[j] = acc;
  }
}

void tdm_q4_gemm_dot__scalar(int64_t M, int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum,
                             const uint8_t *qp, const float *scale, float *y, int64_t ldy) {
  const int64_t NG = K / G + (K % G != 0);
  for (int64_t r = 0; r < M; r++) tdm_q4_gemv_dot__scalar(N, K, G, xq + r * (K + 1), xs + r * NG, xsum + r * NG, qp, scale, y + r * ldy);
}

/* ---- ops --------------------------------------------------------------------------------------- */

static bool packed_n(int64_t N, int64_t panels) {
  return N >= 1 && N <= INT64_MAX - TDM_PANEL && panels == (N + TDM_PANEL - 1) / TDM_PANEL;
}

/* The int4 geometry: K values in ceil(K/8) blocks of 4 byte rows, groups of G (even), ceil(K/G)
 * scales per column. */
static bool q4_geometry_dims(const int64_t *q, const int64_t *s, int64_t N, int64_t K, int64_t G) {
  if (G < 2 || G % 2 || K < 0 || q[2] != TDM_PANEL || s[2] != TDM_PANEL || !packed_n(N, q[0]) || s[0] != q[0]) return false;
  return q[1] == (K + 7) / 8 * 4 && s[1] == K / G + (K % G != 0);
}

static bool q4_geometry(const tdm_value *q, const tdm_value *s, int64_t N, int64_t K, int64_t G) {
  return q->shape.rank == 3 && s->shape.rank == 3 && q4_geometry_dims(q->shape.dims, s->shape.dims, N, K, G);
}

/* int8 weights' layout attribute (iattr [N] or [N, layout]): true where q is in the paired layout. */
static bool q8_paired(const tdm_op *op) { return op->n_iattr == 2 && op->iattr[1] == 1; }

/* The int8 layout attribute: absent or 0 (plain panels), or 1 (paired, whose K must be even). */
static tdm_status q8_layout_check(const tdm_op *op, int64_t K) {
  if (op->n_iattr == 2 && op->iattr[1] != 0 && op->iattr[1] != 1) return tdm__rule(op, "layout must be 0 (plain panels) or 1 (paired)");
  if (q8_paired(op) && K % 2) return tdm__rule(op, "paired weights (layout 1) need an even K");
  return TDM_OK;
}

/* a [..., K], qp, scale -> y [..., N]: a's shape with N columns. */
static tdm_status matmul_q_check(const tdm_method *m, const tdm_op *op, bool q4) {
  if (op->n_in != 3 || op->n_out != 1 || (q4 ? op->n_iattr != 2 : op->n_iattr != 1 && op->n_iattr != 2))
    return tdm__rule(op, q4 ? "takes a, packed q, scales, 1 output, [N, G]" : "takes a, packed q, scales, 1 output, [N(, layout)]");
  const tdm_value *a = TDM_VAL(m, op, 0), *q = TDM_VAL(m, op, 1), *s = TDM_VAL(m, op, 2), *y = TDM_OUTVAL(m, op, 0);
  if (a->dtype != TDM_F32 || s->dtype != TDM_F32 || y->dtype != TDM_F32 || q->dtype != (q4 ? TDM_I4X2 : TDM_I8))
    return tdm__rule(op, q4 ? "a, scales and output float32, weights int4x2" : "a, scales and output float32, weights int8");
  if (a->shape.rank < 1) return tdm__rule(op, "a must have rank >= 1");
  const int64_t N = op->iattr[0], K = a->shape.dims[a->shape.rank - 1];
  if (q4) {
    if (!q4_geometry(q, s, N, K, op->iattr[1]))
      return tdm__rule(op, "weights must be [ceil(N/8), 4·ceil(K/8), 8] and scales [ceil(N/8), ceil(K/G), 8] with G even");
  } else if (q->shape.rank != 3 || q->shape.dims[2] != TDM_PANEL || !packed_n(N, q->shape.dims[0]) || q->shape.dims[1] != K ||
             s->shape.rank != 2 || s->shape.dims[0] != q->shape.dims[0] || s->shape.dims[1] != TDM_PANEL) {
    return tdm__rule(op, "weights must be [ceil(N/8), K, 8] and scales [ceil(N/8), 8]");
  } else {
    const tdm_status st = q8_layout_check(op, K);
    if (st != TDM_OK) return st;
  }
  tdm_shape want = a->shape;
  want.dims[want.rank - 1] = N;
  if (!tdm__shape_eq(&want, &y->shape)) return tdm__rule(op, "output must be a's shape with N columns");
  return TDM_OK;
}

static tdm_status matmul_q8_check(const tdm_method *m, const tdm_op *op) { return matmul_q_check(m, op, false); }
static tdm_status matmul_q4_check(const tdm_method *m, const tdm_op *op) { return matmul_q_check(m, op, true); }

/* The quantized GEMMs over threads (src/threads.h): rows in blocks of 4, or for a GEMV output
 * columns in blocks of 32 (four panels), as tdm_f32_gemm_packed_parallel. */
typedef struct {
  int64_t N, K, G;
  const float *a, *scale;
  const void *qp;
  float *y;
  bool paired; /* int8 weights in the paired layout (the float path of a row with a NaN or ±inf) */
} q_job;

static void q8_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const q_job *j = c;
  (void)t, (void)ws;
  const int8_t *qp = j->qp;
  if (j->G < 0) /* columns of a GEMV */
    (j->paired ? tdm_q8_gemm_paired__scalar : tdm_q8_gemm)(1, hi - lo, j->K, j->a, qp + lo / 8 * j->K * 8, j->scale + lo, j->y + lo);
  else (j->paired ? tdm_q8_gemm_paired__scalar : tdm_q8_gemm_tiles)(hi - lo, j->N, j->K, j->a + lo * j->K, qp, j->scale, j->y + lo * j->N);
}

static void q4_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const q_job *j = c;
  (void)t, (void)ws;
  const uint8_t *qp = j->qp;
  const int64_t G = j->G < 0 ? -j->G : j->G, PB = TDM_Q4_BLOCK_BYTES(j->K), NG = j->K / G + (j->K % G != 0);
  if (j->G < 0) tdm_q4_gemm(1, hi - lo, j->K, G, j->a, qp + lo / 8 * PB, j->scale + lo / 8 * NG * 8, j->y + lo);
  else tdm_q4_gemm_tiles(hi - lo, j->N, j->K, G, j->a + lo * j->K, qp, j->scale, j->y + lo * j->N);
}

/* G < 0 in the job marks a GEMV split by columns (and carries -G for int4). */
static void q_parallel(int64_t M, q_job *j, tdm_part_fn part) {
  if (M == 1) {
    j->G = -j->G;
    tdm__parallel(j->N, 32, part, j);
  } else {
    tdm__parallel(M, 4, part, j);
  }
}

/* A block of 1 to TDM_Q8_DOT_MAX_ROWS rows, quantized once before the split (so every thread count
 * gives the same bits): columns [lo, hi) of every row, one row by the GEMV (a decode step), more
 * by the rows kernel (which keeps each row at the GEMV's bits). */
typedef struct {
  int64_t M, N, K;
  const int16_t *xq;
  const float *xs, *scale;
  const int8_t *qp;
  float *y;
  bool paired; /* qp in the paired layout: the kernels' paired-layout twins */
} q8_rows_job;

static void q8_rows_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const q8_rows_job *j = c;
  (void)t, (void)ws;
  const int8_t *qp = j->qp + lo / 8 * j->K * 8;
  if (j->M == 1) (j->paired ? tdm_q8_gemv_dot_paired : tdm_q8_gemv_dot)(hi - lo, j->K, j->xq, j->xs, qp, j->scale + lo, j->y + lo);
  else (j->paired ? tdm_q8_gemm_dot_paired : tdm_q8_gemm_dot)(j->M, hi - lo, j->K, j->xq, j->xs, qp, j->scale + lo, j->y + lo, j->N);
}

/* y [M, N] = a [M, K] @ (qp · scale): matmul_q8's product (qp, scale as its operands; paired: qp in
 * the paired layout, K even). */
static void q8_matmul(int64_t M, int64_t N, int64_t K, const float *a0, const int8_t *qp, const float *scale, float *y0, bool paired) {
  if (K == 0) {
    memset(y0, 0, (size_t)(M * N) * sizeof(float));
    return;
  }
  const int64_t KP = K + K % 2, NB = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK;
  /* rows to int8 per block of 32 and integer dot products (docs/ops.md), in blocks of up to
   * TDM_Q8_DOT_MAX_ROWS whose int8 copies fit the stack buffer (min(8, 8192 / KP) rows): one row (a
   * decode step) by the GEMV, more by the rows kernel, which keeps every row at the GEMV's bits, so
   * the blocking and the row count change no value (row r of an M-row call equals a one-row call on
   * row r), every weight block loaded once per block of rows; a row holding a NaN or ±inf is zeroed
   * there and redone afterwards on the float path, as it would be alone */
  if (KP <= TDM_Q8_DOT_MAX_K) {
    int16_t xq[TDM_Q8_DOT_MAX_K];
    float xs[TDM_Q8_DOT_MAX_K / TDM_Q8_ABLOCK + TDM_Q8_DOT_MAX_ROWS];
    bool finite[TDM_Q8_DOT_MAX_ROWS];
    const int64_t B = TDM_Q8_DOT_MAX_K / KP < TDM_Q8_DOT_MAX_ROWS ? TDM_Q8_DOT_MAX_K / KP : TDM_Q8_DOT_MAX_ROWS;
    for (int64_t r0 = 0; r0 < M; r0 += B) {
      const int64_t R = M - r0 < B ? M - r0 : B;
      const float *a = a0 + r0 * K;
      float *y = y0 + r0 * N;
      bool any = false;
      for (int64_t r = 0; r < R; r++) {
        finite[r] = tdm_q8_quantize_row(K, a + r * K, xq + r * KP, xs + r * NB);
        if (!finite[r]) memset(xq + r * KP, 0, (size_t)KP * sizeof(int16_t)), memset(xs + r * NB, 0, (size_t)NB * sizeof(float));
        any |= finite[r];
      }
      q8_rows_job d = {R, N, K, xq, xs, scale, qp, y, paired};
      if (any) tdm__parallel(N, 32, q8_rows_part, &d);
      for (int64_t r = 0; r < R; r++)
        if (!finite[r]) {
          q_job j = {N, K, 1, a + r * K, scale, qp, y + r * N, paired};
          q_parallel(1, &j, q8_part);
        }
    }
    return;
  }
  q_job j = {N, K, 1, a0, scale, qp, y0, paired};
  q_parallel(M, &j, q8_part);
}

static tdm_status matmul_q8_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t N = op->iattr[0], K = in[1].shape->dims[1];
  q8_matmul(out->numel / N, N, K, in[0].data, in[1].data, in[2].data, out->data, q8_paired(op)); /* then K is even (matmul_q8_check) */
  return TDM_OK;
}

/* matmul_grouped_q8: a [S, K], q int8 [E, ceil(N/8), K, 8], scale [E, ceil(N/8), 8] (expert e's as
 * matmul_q8's), offs int32 or int64 [E] → y [S, N]: matmul_grouped's groups of rows, each by
 * matmul_q8's product against its expert's codes. iattr = [N(, layout)]. */
static tdm_status matmul_grouped_q8_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t N = op->iattr[0], E = in[1].shape->dims[0], K = in[1].shape->dims[2], S = in[0].shape->dims[0];
  const int64_t codes = in[1].shape->dims[1] * K * TDM_PANEL, scales = in[1].shape->dims[1] * TDM_PANEL; /* per expert */
  const float *a = in[0].data, *sc = in[2].data;
  const int8_t *qp = in[1].data;
  float *y = out->data;
  int64_t lo = 0;
  for (int64_t e = 0; e < E; e++) {
    const int64_t hi = tdm__expert_end(&in[3], e, lo, S);
    if (hi > lo) q8_matmul(hi - lo, N, K, a + lo * K, qp + e * codes, sc + e * scales, y + lo * N, q8_paired(op));
    lo = hi;
  }
  if (S > lo) memset(y + lo * N, 0, (size_t)((S - lo) * N) * sizeof(float));
  return TDM_OK;
}

static tdm_status matmul_grouped_q8_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 4 || op->n_out != 1 || (op->n_iattr != 1 && op->n_iattr != 2))
    return tdm__rule(op, "takes a, packed q, scales, offsets, 1 output, [N(, layout)]");
  const tdm_value *a = TDM_VAL(m, op, 0), *q = TDM_VAL(m, op, 1), *s = TDM_VAL(m, op, 2), *offs = TDM_VAL(m, op, 3),
                  *y = TDM_OUTVAL(m, op, 0);
  if (a->dtype != TDM_F32 || s->dtype != TDM_F32 || y->dtype != TDM_F32 || q->dtype != TDM_I8)
    return tdm__rule(op, "a, scales and output float32, weights int8");
  if (offs->dtype != TDM_I32 && offs->dtype != TDM_I64) return tdm__rule(op, "offsets must be int32 or int64");
  if (a->shape.rank != 2) return tdm__rule(op, "a must be [S, K]");
  const int64_t N = op->iattr[0], K = a->shape.dims[1];
  if (q->shape.rank != 4 || q->shape.dims[3] != TDM_PANEL || !packed_n(N, q->shape.dims[1]) || q->shape.dims[2] != K ||
      s->shape.rank != 3 || s->shape.dims[0] != q->shape.dims[0] || s->shape.dims[1] != q->shape.dims[1] || s->shape.dims[2] != TDM_PANEL)
    return tdm__rule(op, "weights must be [E, ceil(N/8), K, 8] and scales [E, ceil(N/8), 8]");
  const tdm_status st = q8_layout_check(op, K);
  if (st != TDM_OK) return st;
  if (offs->shape.rank != 1 || offs->shape.dims[0] != q->shape.dims[0]) return tdm__rule(op, "offsets must be [E]");
  if (y->shape.rank != 2 || y->shape.dims[0] != a->shape.dims[0] || y->shape.dims[1] != N) return tdm__rule(op, "output must be [S, N]");
  return TDM_OK;
}

/* The int4 integer-dot GEMV's columns [lo, hi) (whole panels: lo is a multiple of 32). */
typedef struct {
  int64_t M, N, K, G;
  const int8_t *xq;
  const float *xs, *scale;
  const int32_t *xsum;
  const uint8_t *qp;
  float *y;
} q4_dot_job;

static void q4_dot_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const q4_dot_job *j = c;
  (void)t, (void)ws;
  const int64_t PB = TDM_Q4_BLOCK_BYTES(j->K), NG = j->K / j->G + (j->K % j->G != 0);
  if (j->M == 1) tdm_q4_gemv_dot(hi - lo, j->K, j->G, j->xq, j->xs, j->xsum, j->qp + lo / 8 * PB, j->scale + lo / 8 * NG * 8, j->y + lo);
  else tdm_q4_gemm_dot(j->M, hi - lo, j->K, j->G, j->xq, j->xs, j->xsum, j->qp + lo / 8 * PB, j->scale + lo / 8 * NG * 8, j->y + lo, j->N);
}

/* y [M, N] = a [M, K] @ (qp · scale): matmul_q4's product (qp, scale as its operands, groups of G). */
static void q4_matmul(int64_t M, int64_t N, int64_t K, int64_t G, const float *a0, const uint8_t *qp, const float *scale, float *y0) {
  if (K == 0) {
    memset(y0, 0, (size_t)(M * N) * sizeof(float));
    return;
  }
  /* one row (a decode step): int8 activations per group, integer dot products over the codes (the
   * same integers, so the same bits, in every build and at every thread count) */
  const int64_t NG = K / G + (K % G != 0);
  if (M == 1 && K <= TDM_Q8_DOT_MAX_K && G >= TDM_Q4_DOT_MIN_G && G % 8 == 0) {
    int8_t xq[TDM_Q8_DOT_MAX_K + 1];
    float xs[TDM_Q8_DOT_MAX_K / TDM_Q4_DOT_MIN_G];
    int32_t xsum[TDM_Q8_DOT_MAX_K / TDM_Q4_DOT_MIN_G];
    if (tdm_q4_quantize_row(K, G, a0, xq, xs, xsum)) {
      q4_dot_job d = {1, N, K, G, xq, xs, scale, xsum, qp, y0};
      tdm__parallel(N, 32, q4_dot_part, &d);
      return;
    }
  }
  /* more rows likewise, in blocks of up to TDM_Q8_DOT_MAX_ROWS whose int8 copies fit the same buffer
   * (min(8, 8193 / (K + 1)) rows), each row the one-row GEMV's bits whatever the block (row r of an
   * M-row call equals a one-row call on row r); a row with a NaN or ±inf zeroed there and redone on
   * the float path after */
  if (M > 1 && K <= TDM_Q8_DOT_MAX_K && G >= TDM_Q4_DOT_MIN_G && G % 8 == 0) {
    int8_t xq[TDM_Q8_DOT_MAX_K + 1];
    float xs[TDM_Q8_DOT_MAX_K / TDM_Q4_DOT_MIN_G + TDM_Q8_DOT_MAX_ROWS];
    int32_t xsum[TDM_Q8_DOT_MAX_K / TDM_Q4_DOT_MIN_G + TDM_Q8_DOT_MAX_ROWS];
    bool finite[TDM_Q8_DOT_MAX_ROWS];
    const int64_t B = (TDM_Q8_DOT_MAX_K + 1) / (K + 1) < TDM_Q8_DOT_MAX_ROWS ? (TDM_Q8_DOT_MAX_K + 1) / (K + 1) : TDM_Q8_DOT_MAX_ROWS;
    for (int64_t r0 = 0; r0 < M; r0 += B) {
      const int64_t R = M - r0 < B ? M - r0 : B;
      const float *a = a0 + r0 * K;
      float *y = y0 + r0 * N;
      for (int64_t r = 0; r < R; r++) {
        finite[r] = tdm_q4_quantize_row(K, G, a + r * K, xq + r * (K + 1), xs + r * NG, xsum + r * NG);
        if (!finite[r]) {
          memset(xq + r * (K + 1), 0, (size_t)(K + 1));
          memset(xs + r * NG, 0, (size_t)NG * sizeof(float)), memset(xsum + r * NG, 0, (size_t)NG * sizeof(int32_t));
        }
      }
      q4_dot_job d = {R, N, K, G, xq, xs, scale, xsum, qp, y};
      tdm__parallel(N, 32, q4_dot_part, &d);
      for (int64_t r = 0; r < R; r++)
        if (!finite[r]) {
          q_job j = {N, K, G, a + r * K, scale, qp, y + r * N, false};
          q_parallel(1, &j, q4_part);
        }
    }
    return;
  }
  q_job j = {N, K, G, a0, scale, qp, y0, false};
  q_parallel(M, &j, q4_part);
}

static tdm_status matmul_q4_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t N = op->iattr[0], K = in[0].shape->dims[in[0].shape->rank - 1];
  q4_matmul(K ? in[0].numel / K : out->numel / N, N, K, op->iattr[1], in[0].data, in[1].data, in[2].data, out->data);
  return TDM_OK;
}

/* matmul_grouped_q4: a [S, K], q int4x2 [E, ceil(N/8), 4·ceil(K/8), 8], scale [E, ceil(N/8), ceil(K/G), 8]
 * (expert e's as matmul_q4's), offs int32 or int64 [E] → y [S, N]: matmul_grouped's groups of rows,
 * each by matmul_q4's product against its expert's codes. iattr = [N, G]. */
static tdm_status matmul_grouped_q4_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t N = op->iattr[0], G = op->iattr[1], E = in[1].shape->dims[0], S = in[0].shape->dims[0], K = in[0].shape->dims[1];
  const int64_t codes = in[1].shape->dims[1] * in[1].shape->dims[2] * TDM_PANEL; /* per expert */
  const int64_t scales = in[2].shape->dims[1] * in[2].shape->dims[2] * TDM_PANEL;
  const float *a = in[0].data, *sc = in[2].data;
  const uint8_t *qp = in[1].data;
  float *y = out->data;
  int64_t lo = 0;
  for (int64_t e = 0; e < E; e++) {
    const int64_t hi = tdm__expert_end(&in[3], e, lo, S);
    if (hi > lo) q4_matmul(hi - lo, N, K, G, a + lo * K, qp + e * codes, sc + e * scales, y + lo * N);
    lo = hi;
  }
  if (S > lo) memset(y + lo * N, 0, (size_t)((S - lo) * N) * sizeof(float));
  return TDM_OK;
}

static tdm_status matmul_grouped_q4_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 4 || op->n_out != 1 || op->n_iattr != 2) return tdm__rule(op, "takes a, packed q, scales, offsets, 1 output, [N, G]");
  const tdm_value *a = TDM_VAL(m, op, 0), *q = TDM_VAL(m, op, 1), *s = TDM_VAL(m, op, 2), *offs = TDM_VAL(m, op, 3),
                  *y = TDM_OUTVAL(m, op, 0);
  if (a->dtype != TDM_F32 || s->dtype != TDM_F32 || y->dtype != TDM_F32 || q->dtype != TDM_I4X2)
    return tdm__rule(op, "a, scales and output float32, weights int4x2");
  if (offs->dtype != TDM_I32 && offs->dtype != TDM_I64) return tdm__rule(op, "offsets must be int32 or int64");
  if (a->shape.rank != 2) return tdm__rule(op, "a must be [S, K]");
  const int64_t N = op->iattr[0], K = a->shape.dims[1];
  if (q->shape.rank != 4 || s->shape.rank != 4 || s->shape.dims[0] != q->shape.dims[0] ||
      !q4_geometry_dims(q->shape.dims + 1, s->shape.dims + 1, N, K, op->iattr[1]))
    return tdm__rule(op, "weights must be [E, ceil(N/8), 4·ceil(K/8), 8] and scales [E, ceil(N/8), ceil(K/G), 8] with G even");
  if (offs->shape.rank != 1 || offs->shape.dims[0] != q->shape.dims[0]) return tdm__rule(op, "offsets must be [E]");
  if (y->shape.rank != 2 || y->shape.dims[0] != a->shape.dims[0] || y->shape.dims[1] != N) return tdm__rule(op, "output must be [S, N]");
  return TDM_OK;
}

/* qp, scale, idx i64 [...] -> y [..., K], rows idx of the table [N, K] the weights hold. */
static tdm_status embedding_q_check(const tdm_method *m, const tdm_op *op, bool q4) {
  if (op->n_in != 3 || op->n_out != 1 || (q4 ? op->n_iattr != 2 : op->n_iattr != 1 && op->n_iattr != 2))
    return tdm__rule(op, q4 ? "takes packed q, scales, index, 1 output, [N, G]" : "takes packed q, scales, index, 1 output, [N(, layout)]");
  const tdm_value *q = TDM_VAL(m, op, 0), *s = TDM_VAL(m, op, 1), *ix = TDM_VAL(m, op, 2), *y = TDM_OUTVAL(m, op, 0);
  if (s->dtype != TDM_F32 || y->dtype != TDM_F32 || ix->dtype != TDM_I64 || q->dtype != (q4 ? TDM_I4X2 : TDM_I8))
    return tdm__rule(
        op, q4 ? "scales and output float32, index int64, weights int4x2" : "scales and output float32, index int64, weights int8");
  if (ix->shape.rank + 1 > TDM_MAX_RANK || y->shape.rank != ix->shape.rank + 1) return tdm__rule(op, "output must be index.shape + [K]");
  const int64_t N = op->iattr[0], K = y->shape.dims[y->shape.rank - 1];
  if (q4) {
    if (!q4_geometry(q, s, N, K, op->iattr[1]))
      return tdm__rule(op, "weights must be [ceil(N/8), 4·ceil(K/8), 8] and scales [ceil(N/8), ceil(K/G), 8] with G even");
  } else if (q->shape.rank != 3 || q->shape.dims[2] != TDM_PANEL || !packed_n(N, q->shape.dims[0]) || q->shape.dims[1] != K ||
             s->shape.rank != 2 || s->shape.dims[0] != q->shape.dims[0] || s->shape.dims[1] != TDM_PANEL) {
    return tdm__rule(op, "weights must be [ceil(N/8), K, 8] and scales [ceil(N/8), 8]");
  } else {
    const tdm_status st = q8_layout_check(op, K);
    if (st != TDM_OK) return st;
  }
  tdm_shape want = ix->shape;
  want.dims[want.rank++] = K;
  if (!tdm__shape_eq(&want, &y->shape)) return tdm__rule(op, "output must be index.shape + [K]");
  return TDM_OK;
}

static tdm_status embedding_q8_check(const tdm_method *m, const tdm_op *op) { return embedding_q_check(m, op, false); }
static tdm_status embedding_q4_check(const tdm_method *m, const tdm_op *op) { return embedding_q_check(m, op, true); }

/* Row v of the table, or -1 (zeros) out of range (never reached after check_index). */
static int64_t row_of(int64_t i, int64_t N) {
  const int64_t v = i < 0 ? i + N : i;
  return v < 0 || v >= N ? -1 : v;
}

static tdm_status embedding_q8_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t N = op->iattr[0], K = in[0].shape->dims[1];
  const int8_t *qp = in[0].data;
  const float *scale = in[1].data;
  const int64_t *idx = in[2].data;
  const bool paired = q8_paired(op);
  float *y = out->data;
  for (int64_t t = 0; t < in[2].numel; t++, y += K) {
    const int64_t v = row_of(idx[t], N);
    if (v < 0) {
      memset(y, 0, (size_t)K * sizeof(float));
      continue;
    }
    const float s = scale[v];
    const int8_t *panel = qp + (v / TDM_PANEL) * K * TDM_PANEL;
    if (paired) /* k at (k - k % 2)·8 + 2·(v % 8) + k % 2 */
      for (int64_t k = 0; k < K; k++) y[k] = (float)panel[(k - k % 2) * TDM_PANEL + 2 * (v % TDM_PANEL) + k % 2] * s;
    else
      for (int64_t k = 0; k < K; k++) y[k] = (float)panel[k * TDM_PANEL + v % TDM_PANEL] * s;
  }
  return TDM_OK;
}

static tdm_status embedding_q4_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t N = op->iattr[0], G = op->iattr[1], K = out->shape->dims[out->shape->rank - 1];
  const int64_t PB = TDM_Q4_BLOCK_BYTES(K), NG = K / G + (K % G != 0);
  const uint8_t *qp = in[0].data;
  const float *scale = in[1].data;
  const int64_t *idx = in[2].data;
  float *y = out->data;
  for (int64_t t = 0; t < in[2].numel; t++, y += K) {
    const int64_t v = row_of(idx[t], N);
    if (v < 0) {
      memset(y, 0, (size_t)K * sizeof(float));
      continue;
    }
    const uint8_t *panel = qp + (v / TDM_PANEL) * PB;
    const float *sc = scale + (v / TDM_PANEL) * NG * TDM_PANEL + v % TDM_PANEL;
    for (int64_t k = 0; k < K; k++) y[k] = (float)tdm_q4_code(panel, k, v) * sc[(k / G) * TDM_PANEL];
  }
  return TDM_OK;
}

const tdm_opdef tdm__quant_ops[] = {
    TDM_OP(matmul_q8, 0, matmul_q8_check, matmul_q8_run),
    TDM_OP(matmul_q4, 0, matmul_q4_check, matmul_q4_run),
    TDM_OP(embedding_q8, 0, embedding_q8_check, embedding_q8_run),
    TDM_OP(embedding_q4, 0, embedding_q4_check, embedding_q4_run),
    TDM_OP(matmul_grouped_q8, 0, matmul_grouped_q8_check, matmul_grouped_q8_run),
    TDM_OP(matmul_grouped_q4, 0, matmul_grouped_q4_check, matmul_grouped_q4_run),
    TDM_OP_END,
};