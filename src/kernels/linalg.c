/* linalg.c — matrix multiply: batched with broadcast batch dims (matmul), against weights packed at
 * export time (matmul_packed), and against one of several experts' packed weights per group of rows
 * (matmul_grouped, a mixture-of-experts layer). The kernels are in gemm.c. */
#include "../ops.h"
#include "../util.h"
#include "../threads.h"
#include "gemm.h"

#include <string.h>

/* ---- the GEMM kernels over threads (src/threads.h): rows in blocks of 4, or for a GEMV (M = 1, a
 * decode step) output columns in blocks of 32 (the GEMV's four panels). A row's result does not
 * depend on the register tile it falls in (4 or 6 rows, or 1: gemm.c), so every output value is
 * computed by the same instructions for any thread count. */

typedef struct {
  int64_t N, K;
  const float *a, *b;
  float *y;
} gemm_job;

static void rows_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const gemm_job *j = c;
  (void)t, (void)ws;
  tdm_f32_gemm_rows(hi - lo, j->N, j->K, j->a + lo * j->K, j->b, j->y + lo * j->N);
}

static void packed_rows_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const gemm_job *j = c;
  (void)t, (void)ws;
  tdm_f32_gemm_packed_tiles(hi - lo, j->N, j->K, j->a + lo * j->K, j->b, j->y + lo * j->N);
}

static void packed_cols_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const gemm_job *j = c;
  (void)t, (void)ws;
  tdm_f32_gemm_packed(1, hi - lo, j->K, j->a, j->b + lo / TDM_PANEL * j->K * TDM_PANEL, j->y + lo);
}

/* A GEMM of few rows (2 to TDM_GEMM_FEW_MAX: a streaming step's positions), or of more rows and
 * wide, split by output columns in blocks of 32, each part all M rows of its columns: rows in blocks
 * of 4 would leave threads idle, and each part would read all of the weights (on machine E, two
 * threads, [M, 512] x [512, 2048] with the weights from DRAM, by columns against by rows: 1.3 against
 * 1.7 ms at M = 48, 3.1 against 3.8 at 128, 5.9 against 6.4 at 256). */
typedef struct {
  int64_t M, N, K;
  const float *a, *b;
  float *y;
  tdm_gemm_ld_fn few;
} gemm_cols_job;

static void packed_few_rows_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const gemm_cols_job *j = c;
  (void)t, (void)ws;
  j->few(j->M, hi - lo, j->K, j->a, j->b + lo / TDM_PANEL * j->K * TDM_PANEL, j->y + lo, j->N);
}

/* K = 0 (an empty inner dim) makes y all zeros: the tile kernels assume K >= 1. */
static bool empty_inner(int64_t M, int64_t N, int64_t K, float *y) {
  if (K > 0) return false;
  if (M > 0 && N > 0) memset(y, 0, (size_t)(M * N) * sizeof(float));
  return true;
}

void tdm_f32_gemm_rows_parallel(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y) {
  if (empty_inner(M, N, K, y)) return;
  gemm_job j = {N, K, a, b, y};
  tdm__parallel(M, 4, rows_part, &j);
}

void tdm_f32_gemm_packed_parallel(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y) {
  if (empty_inner(M, N, K, y)) return;
  gemm_job j = {N, K, a, bp, y};
  /* by columns where there are enough blocks of them for every thread (a wide GEMM: each thread
   * reads only its part of the weights), else by rows */
  const tdm_gemm_ld_fn few = M > 1 && (M <= TDM_GEMM_FEW_MAX || N >= 4 * 4 * TDM_PANEL * tdm__threads()) ? tdm_f32_gemm_few_rows() : NULL;
  if (M == 1) {
    tdm__parallel(N, 4 * TDM_PANEL, packed_cols_part, &j);
  } else if (few) {
    gemm_cols_job c = {M, N, K, a, bp, y, few};
    tdm__parallel(N, 4 * TDM_PANEL, packed_few_rows_part, &c);
  } else {
    tdm__parallel(M, 4, packed_rows_part, &j);
  }
}

static void batch_shape(const tdm_shape *s, tdm_shape *out) {
  out->rank = s->rank - 2;
  for (int i = 0; i < out->rank; i++) out->dims[i] = s->dims[i];
}

/* One matmul's batches: batch t of y reads a and b at their broadcast offsets. */
typedef struct {
  int64_t M, N, K;
  tdm_shape yb;
  int64_t sa[TDM_MAX_RANK], sb[TDM_MAX_RANK];
  const float *a, *b;
  float *y;
} batch_job;

static void batches_part(void *c, int64_t lo, int64_t hi, int t, void *ws) {
  const batch_job *j = c;
  (void)t, (void)ws;
  for (int64_t bt = lo; bt < hi; bt++) {
    int64_t oa = 0, ob = 0, rest = bt;
    for (int i = j->yb.rank - 1; i >= 0; i--) {
      const int64_t d = rest % j->yb.dims[i];
      rest /= j->yb.dims[i];
      oa += d * j->sa[i];
      ob += d * j->sb[i];
    }
    tdm_f32_gemm_rows(j->M, j->N, j->K, j->a + oa * j->M * j->K, j->b + ob * j->K * j->N, j->y + bt * j->M * j->N);
  }
}

static tdm_status matmul_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  (void)op;
  const tdm_shape *as = in[0].shape, *bs = in[1].shape, *ys = out->shape;
  batch_job j = {.M = as->dims[as->rank - 2],
                 .K = as->dims[as->rank - 1],
                 .N = bs->dims[bs->rank - 1],
                 .a = in[0].data,
                 .b = in[1].data,
                 .y = out->data};
  tdm_shape ab, bb;
  batch_shape(as, &ab);
  batch_shape(bs, &bb);
  batch_shape(ys, &j.yb);
  tdm__broadcast_strides(&ab, &j.yb, j.sa);
  tdm__broadcast_strides(&bb, &j.yb, j.sb);
  const int64_t batches = tdm__numel(&j.yb);
  if (j.K == 0) {
    memset(out->data, 0, (size_t)out->numel * sizeof(float));
    return TDM_OK;
  }
  if (batches == 1) tdm_f32_gemm_rows_parallel(j.M, j.N, j.K, j.a, j.b, j.y);
  else if (batches > 1) tdm__parallel(batches, 1, batches_part, &j);
  return TDM_OK;
}

static tdm_status matmul_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 2 || op->n_out != 1) return tdm__rule(op, "takes 2 inputs and 1 output");
  const tdm_value *a = TDM_VAL(m, op, 0), *b = TDM_VAL(m, op, 1), *y = TDM_OUTVAL(m, op, 0);
  if (a->dtype != TDM_F32 || b->dtype != TDM_F32 || y->dtype != TDM_F32) return tdm__rule(op, "operands must be float32");
  if (a->shape.rank < 2 || b->shape.rank < 2) return tdm__rule(op, "operands must have rank >= 2");
  const int64_t K = a->shape.dims[a->shape.rank - 1];
  if (b->shape.dims[b->shape.rank - 2] != K) return tdm__rule(op, "inner dimensions differ");
  tdm_shape ab, bb, yb;
  batch_shape(&a->shape, &ab);
  batch_shape(&b->shape, &bb);
  if (!tdm__broadcast(&ab, &bb, &yb)) return tdm__rule(op, "batch dimensions do not broadcast");
  tdm_shape want = yb;
  want.rank += 2;
  want.dims[want.rank - 2] = a->shape.dims[a->shape.rank - 2];
  want.dims[want.rank - 1] = b->shape.dims[b->shape.rank - 1];
  if (!tdm__shape_eq(&want, &y->shape)) return tdm__rule(op, "output shape is not [..., M, N]");
  return TDM_OK;
}

/* matmul_packed: a [..., M, K], bp [ceil(N/8), K, 8] (B packed in 8-column panels, zero past N)
 * → y [..., M, N]. iattr = [N]. All leading dims of a are rows. */
static tdm_status matmul_packed_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t N = op->iattr[0], K = in[1].shape->dims[1];
  const int64_t M = out->numel / N; /* a's rows, also when K = 0 */
  tdm_f32_gemm_packed_parallel(M, N, K, in[0].data, in[1].data, out->data);
  return TDM_OK;
}

static tdm_status matmul_packed_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 2 || op->n_out != 1 || op->n_iattr != 1) return tdm__rule(op, "takes a, packed b, 1 output, [N]");
  const tdm_value *a = TDM_VAL(m, op, 0), *b = TDM_VAL(m, op, 1), *y = TDM_OUTVAL(m, op, 0);
  if (a->dtype != TDM_F32 || b->dtype != TDM_F32 || y->dtype != TDM_F32) return tdm__rule(op, "operands must be float32");
  const int64_t N = op->iattr[0];
  if (a->shape.rank < 1 || b->shape.rank != 3 || b->shape.dims[2] != TDM_PANEL || N < 1 || N > INT64_MAX - TDM_PANEL ||
      b->shape.dims[0] != (N + TDM_PANEL - 1) / TDM_PANEL)
    return tdm__rule(op, "b must be packed as [ceil(N/8), K, 8]");
  const int64_t K = b->shape.dims[1];
  if (a->shape.dims[a->shape.rank - 1] != K) return tdm__rule(op, "inner dimensions differ");
  tdm_shape want = a->shape;
  want.dims[want.rank - 1] = N;
  if (!tdm__shape_eq(&want, &y->shape)) return tdm__rule(op, "output must be a's shape with N columns");
  return TDM_OK;
}

/* embedding_packed: bp [ceil(N/8), K, 8] (a table [N, K] stored as the packed weight of a tied
 * output layer), idx int64 or int32 [...] → y [..., K] = rows idx of the table. iattr = [N]. Indices count
 * from the end when negative; out of range (never reached after check_index) gives zeros. */
static tdm_status embedding_packed_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t N = op->iattr[0], K = in[0].shape->dims[1];
  const float *bp = in[0].data;
  float *y = out->data;
  for (int64_t t = 0; t < in[1].numel; t++, y += K) {
    const int64_t it = tdm__index_at(&in[1], t), v = it < 0 ? it + N : it;
    if (v < 0 || v >= N) {
      memset(y, 0, (size_t)K * sizeof(float));
      continue;
    }
    const float *col = bp + (v / TDM_PANEL) * K * TDM_PANEL + v % TDM_PANEL;
    for (int64_t k = 0; k < K; k++) y[k] = col[k * TDM_PANEL];
  }
  return TDM_OK;
}

static tdm_status embedding_packed_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 2 || op->n_out != 1 || op->n_iattr != 1) return tdm__rule(op, "takes packed table, index, 1 output, [N]");
  const tdm_value *b = TDM_VAL(m, op, 0), *ix = TDM_VAL(m, op, 1), *y = TDM_OUTVAL(m, op, 0);
  const int64_t N = op->iattr[0];
  if (b->dtype != TDM_F32 || y->dtype != TDM_F32 || (ix->dtype != TDM_I64 && ix->dtype != TDM_I32))
    return tdm__rule(op, "table and output float32, index int64 or int32");
  if (b->shape.rank != 3 || b->shape.dims[2] != TDM_PANEL || N < 0 || b->shape.dims[0] != N / TDM_PANEL + (N % TDM_PANEL != 0))
    return tdm__rule(op, "table must be [ceil(N/8), K, 8]");
  if (N == 0 && ix->numel > 0) return tdm__rule(op, "indexing an empty table");
  if (ix->shape.rank + 1 > TDM_MAX_RANK) return tdm__rule(op, "result rank too large");
  tdm_shape want = ix->shape;
  want.dims[want.rank++] = b->shape.dims[1];
  if (!tdm__shape_eq(&want, &y->shape)) return tdm__rule(op, "output must be index.shape + [K]");
  return TDM_OK;
}

/* matmul_grouped: a [S, K], bp [E, ceil(N/8), K, 8] (expert e's B packed as matmul_packed's),
 * offs int32 or int64 [E] (each expert's end row, counted from 0) → y [S, N]. iattr = [N]. Rows
 * offs[e-1]..offs[e] (offs[-1] = 0) are a @ B_e; only the experts with rows are read. An offset is
 * clamped between the previous one and S, and rows past the last offset are zeros. */
static tdm_status matmul_grouped_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t N = op->iattr[0], E = in[1].shape->dims[0], K = in[1].shape->dims[2];
  const int64_t S = in[0].shape->dims[0];
  const int64_t panels = in[1].shape->dims[1] * K * TDM_PANEL; /* floats per expert */
  const float *a = in[0].data, *bp = in[1].data;
  float *y = out->data;
  int64_t lo = 0;
  for (int64_t e = 0; e < E; e++) {
    const int64_t hi = tdm__expert_end(&in[2], e, lo, S);
    if (hi > lo) tdm_f32_gemm_packed_parallel(hi - lo, N, K, a + lo * K, bp + e * panels, y + lo * N);
    lo = hi;
  }
  if (S > lo) memset(y + lo * N, 0, (size_t)((S - lo) * N) * sizeof(float));
  return TDM_OK;
}

static tdm_status matmul_grouped_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 3 || op->n_out != 1 || op->n_iattr != 1) return tdm__rule(op, "takes a, packed b, offsets, 1 output, [N]");
  const tdm_value *a = TDM_VAL(m, op, 0), *b = TDM_VAL(m, op, 1), *offs = TDM_VAL(m, op, 2), *y = TDM_OUTVAL(m, op, 0);
  if (a->dtype != TDM_F32 || b->dtype != TDM_F32 || y->dtype != TDM_F32) return tdm__rule(op, "a, b and y must be float32");
  if (offs->dtype != TDM_I32 && offs->dtype != TDM_I64) return tdm__rule(op, "offsets must be int32 or int64");
  const int64_t N = op->iattr[0];
  if (a->shape.rank != 2 || b->shape.rank != 4 || b->shape.dims[3] != TDM_PANEL || N < 1 || N > INT64_MAX - TDM_PANEL ||
      b->shape.dims[1] != (N + TDM_PANEL - 1) / TDM_PANEL)
    return tdm__rule(op, "a must be [S, K] and b packed as [E, ceil(N/8), K, 8]");
  if (a->shape.dims[1] != b->shape.dims[2]) return tdm__rule(op, "inner dimensions differ");
  if (offs->shape.rank != 1 || offs->shape.dims[0] != b->shape.dims[0]) return tdm__rule(op, "offsets must be [E]");
  if (y->shape.rank != 2 || y->shape.dims[0] != a->shape.dims[0] || y->shape.dims[1] != N) return tdm__rule(op, "output must be [S, N]");
  return TDM_OK;
}

const tdm_opdef tdm__linalg_ops[] = {
    TDM_OP(matmul, 0, matmul_check, matmul_run),
    TDM_OP(matmul_packed, 0, matmul_packed_check, matmul_packed_run),
    TDM_OP(embedding_packed, 0, embedding_packed_check, embedding_packed_run),
    TDM_OP(matmul_grouped, 0, matmul_grouped_check, matmul_grouped_run),
    TDM_OP_END,
};
