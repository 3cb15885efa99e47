/* linalg.c — batched matrix multiply with broadcast batch dimensions. Scalar reference. */
#include "../ops.h"
#include "../util.h"

#include <string.h>

/* y[M,N] = a[M,K] @ b[K,N], all row-major and contiguous. */
static void f32_gemm__scalar(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y) {
  for (int64_t i = 0; i < M; i++) {
    float *yr = y + i * N;
    memset(yr, 0, (size_t)N * sizeof(float));
    for (int64_t k = 0; k < K; k++) {
      const float av = a[i * K + k];
      const float *br = b + k * N;
      for (int64_t j = 0; j < N; j++) yr[j] += av * br[j];
    }
  }
}

static void batch_shape(const tdm_shape *s, tdm_shape *out) {
  out->rank = s->rank - 2;
  for (int i = 0; i < out->rank; i++) out->dims[i] = s->dims[i];
}

static tdm_status matmul_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  (void)op;
  const tdm_shape *as = in[0].shape, *bs = in[1].shape, *ys = out->shape;
  const int64_t M = as->dims[as->rank - 2], K = as->dims[as->rank - 1], N = bs->dims[bs->rank - 1];
  tdm_shape ab, bb, yb;
  batch_shape(as, &ab);
  batch_shape(bs, &bb);
  batch_shape(ys, &yb);
  int64_t sa[TDM_MAX_RANK], sb[TDM_MAX_RANK], idx[TDM_MAX_RANK] = {0};
  tdm__broadcast_strides(&ab, &yb, sa);
  tdm__broadcast_strides(&bb, &yb, sb);
  const int64_t batches = tdm__numel(&yb);
  int64_t oa = 0, ob = 0;
  for (int64_t t = 0; t < batches; t++) {
    f32_gemm__scalar(M, N, K, (const float *)in[0].data + oa * M * K, (const float *)in[1].data + ob * K * N,
                     (float *)out->data + t * M * N);
    for (int i = yb.rank - 1; i >= 0; i--) {
      if (++idx[i] < yb.dims[i]) {
        oa += sa[i];
        ob += sb[i];
        break;
      }
      oa -= sa[i] * (yb.dims[i] - 1);
      ob -= sb[i] * (yb.dims[i] - 1);
      idx[i] = 0;
    }
  }
  return TDM_OK;
}

static tdm_status matmul_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 2 || op->n_out != 1) return tdm__rule(op, "takes 2 inputs and 1 output");
  const tdm_value *a = TDM_VAL(m, op, 0), *b = TDM_VAL(m, op, 1), *y = TDM_OUTVAL(m, op, 0);
  if (a->dtype != TDM_F32 || b->dtype != TDM_F32 || y->dtype != TDM_F32)
    return tdm__rule(op, "operands must be float32");
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

const tdm_opdef tdm__linalg_ops[] = {
    {"matmul", 0, false, false, matmul_check, matmul_run},
    {NULL, 0, false, false, NULL, NULL},
};
