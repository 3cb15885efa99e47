/* select.c — ops along one dim that pick or order elements: gather, sort, topk, and cumsum.
 * Scalar reference kernels, dtype generic over float32, int64 and int32. They never allocate:
 * sort and topk order the elements in their own outputs (a heap over the output slots). */
#include "../ops.h"
#include "../util.h"

#include <string.h>

static bool is_index_dtype(int dtype) { return dtype == TDM_I64 || dtype == TDM_I32; }


/* ---- gather ------------------------------------------------------------------------------- */

/* gather: x, index (int64 or int32, x's rank) → y (index's shape, x's dtype); iattr = [dim].
 * y[i0.., ik, ..] = x[i0.., index[i0.., ik, ..], ..]. Negative indices count from the end; an index
 * outside [-n, n) (rejected before by check_index) gives 0. */
static tdm_status gather_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t d = op->iattr[0];
  const size_t es = tdm_dtype_size(out->dtype);
  const int64_t n = in[0].shape->dims[d];
  tdm_index_walk w;
  tdm__index_walk_start(&w, in[0].shape, in[1].shape, d);
  for (int64_t t = 0; t < out->numel; t++, tdm__index_walk_next(&w)) {
    int64_t j = tdm__index_at(&in[1], t);
    if (j < 0) j += n;
    uint8_t *y = (uint8_t *)out->data + (size_t)t * es;
    if (j < 0 || j >= n) memset(y, 0, es);
    else memcpy(y, (const uint8_t *)in[0].data + (size_t)(w.off + j * w.st[d]) * es, es);
  }
  return TDM_OK;
}

static tdm_status gather_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 2 || op->n_out != 1 || op->n_iattr != 1) return tdm__rule(op, "takes x, index, 1 output, [dim]");
  const tdm_value *x = TDM_VAL(m, op, 0), *ix = TDM_VAL(m, op, 1), *y = TDM_OUTVAL(m, op, 0);
  const int64_t d = op->iattr[0];
  if (!is_index_dtype(ix->dtype) || x->dtype != y->dtype) return tdm__rule(op, "index must be int64 or int32, x and output of one dtype");
  if (x->shape.rank < 1 || ix->shape.rank != x->shape.rank || d < 0 || d >= x->shape.rank)
    return tdm__rule(op, "x and index need one rank (>= 1) and dim in range");
  if (!tdm__shape_eq(&ix->shape, &y->shape)) return tdm__rule(op, "output shape is not the index's shape");
  for (int i = 0; i < x->shape.rank; i++)
    if (i != d && ix->shape.dims[i] > x->shape.dims[i]) return tdm__rule(op, "index is larger than x outside dim");
  return TDM_OK;
}

/* ---- sort and topk ------------------------------------------------------------------------ */

/* The k best elements of a row of n (x[i * sx]), best first, into vals/ids (slot p at p * so).
 * "Best": the largest (or smallest) value; equal values by the lower index, so the order is total
 * and equals a stable sort's; NaN is above every number (PyTorch's order). A heap over the output
 * slots keeps the worst kept element at the root: O(n log k), no memory beyond the outputs. */
#define DEFINE_SELECT(NAME, T, ISNAN) \
  static inline bool NAME##_better(bool largest, T a, int64_t ia, T b, int64_t ib) { \
    const bool an = ISNAN(a), bn = ISNAN(b); \
    if (an || bn) { \
      if (an && bn) return ia < ib; \
      return largest ? an : bn; /* NaN is the largest */ \
    } \
    if (a != b) return largest ? a > b : a < b; \
    return ia < ib; \
  } \
  static void NAME##_sift_down(bool largest, T *v, int64_t *id, int64_t so, int64_t size, int64_t p) { \
    for (;;) { \
      int64_t w = p, c = 2 * p + 1; \
      if (c < size && NAME##_better(largest, v[w * so], id[w * so], v[c * so], id[c * so])) w = c; \
      if (c + 1 < size && NAME##_better(largest, v[w * so], id[w * so], v[(c + 1) * so], id[(c + 1) * so])) w = c + 1; \
      if (w == p) return; \
      const T tv = v[p * so]; \
      const int64_t ti = id[p * so]; \
      v[p * so] = v[w * so]; \
      id[p * so] = id[w * so]; \
      v[w * so] = tv; \
      id[w * so] = ti; \
      p = w; \
    } \
  } \
  static void NAME##_select(bool largest, const T *x, int64_t sx, int64_t n, T *v, int64_t *id, int64_t so, int64_t k) { \
    if (k <= 0) return; \
    int64_t size = 0; \
    for (int64_t i = 0; i < n; i++) { \
      const T xv = x[i * sx]; \
      if (size < k) { /* push, sift up: a worse element moves toward the root */ \
        int64_t p = size++; \
        while (p > 0) { \
          const int64_t q = (p - 1) / 2; \
          if (!NAME##_better(largest, v[q * so], id[q * so], xv, i)) break; \
          v[p * so] = v[q * so]; \
          id[p * so] = id[q * so]; \
          p = q; \
        } \
        v[p * so] = xv; \
        id[p * so] = i; \
      } else if (NAME##_better(largest, xv, i, v[0], id[0])) { \
        v[0] = xv; \
        id[0] = i; \
        NAME##_sift_down(largest, v, id, so, size, 0); \
      } \
    } \
    for (int64_t end = size - 1; end > 0; end--) { /* the worst goes last */ \
      const T tv = v[0]; \
      const int64_t ti = id[0]; \
      v[0] = v[end * so]; \
      id[0] = id[end * so]; \
      v[end * so] = tv; \
      id[end * so] = ti; \
      NAME##_sift_down(largest, v, id, so, end, 0); \
    } \
  }

#define F32_ISNAN(a) ((a) != (a))
#define INT_ISNAN(a) false
DEFINE_SELECT(f32, float, F32_ISNAN)
DEFINE_SELECT(i64, int64_t, INT_ISNAN)
DEFINE_SELECT(i32, int32_t, INT_ISNAN)

/* Runs the selection of the k best along dim d of in, into values out[0] and indices out[1]. */
static void select_rows(const tdm_tensor *in, const tdm_tensor *out, int64_t d, int64_t k, bool largest) {
  int64_t outer, inner;
  tdm__outer_inner(in->shape, d, &outer, &inner);
  const int64_t n = in->shape->dims[d];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      const int64_t xo = o * n * inner + j, yo = o * k * inner + j;
      int64_t *id = (int64_t *)out[1].data + yo;
      switch (in->dtype) {
        case TDM_F32: f32_select(largest, (const float *)in->data + xo, inner, n, (float *)out[0].data + yo, id, inner, k); break;
        case TDM_I64: i64_select(largest, (const int64_t *)in->data + xo, inner, n, (int64_t *)out[0].data + yo, id, inner, k); break;
        default: i32_select(largest, (const int32_t *)in->data + xo, inner, n, (int32_t *)out[0].data + yo, id, inner, k); break;
      }
    }
}

/* sort: x → values (x's dtype), indices int64, both x's shape; iattr = [dim, descending]. Stable:
 * equal values keep their order; NaN sorts above every number. */
static tdm_status sort_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t d = op->iattr[0];
  select_rows(&in[0], out, d, in[0].shape->dims[d], op->iattr[1] != 0);
  return TDM_OK;
}

/* topk: x → values, indices int64 (x's shape with dim of size k); iattr = [dim, k, largest]. The k
 * largest (smallest) along dim, best first; ties by the lower index. */
static tdm_status topk_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  select_rows(&in[0], out, op->iattr[0], op->iattr[1], op->iattr[2] != 0);
  return TDM_OK;
}

/* Shared rule: x of rank >= 1 (float32, int64 or int32), dim in range, values and indices of x's
 * shape with dim of size k. */
static tdm_status select_check_shapes(const tdm_method *m, const tdm_op *op, int64_t d, int64_t k) {
  const tdm_value *x = TDM_VAL(m, op, 0), *v = TDM_OUTVAL(m, op, 0), *ix = TDM_OUTVAL(m, op, 1);
  if (x->dtype != TDM_F32 && x->dtype != TDM_I64 && x->dtype != TDM_I32)
    return tdm__rule(op, "unsupported dtype %s", tdm_dtype_name(x->dtype));
  if (v->dtype != x->dtype || ix->dtype != TDM_I64) return tdm__rule(op, "values have x's dtype, indices are int64");
  if (x->shape.rank < 1 || d < 0 || d >= x->shape.rank) return tdm__rule(op, "dim out of range");
  if (k < 0 || k > x->shape.dims[d]) return tdm__rule(op, "k out of range");
  tdm_shape want = x->shape;
  want.dims[d] = k;
  if (!tdm__shape_eq(&want, &v->shape) || !tdm__shape_eq(&want, &ix->shape))
    return tdm__rule(op, "outputs must have x's shape with dim of size k");
  return TDM_OK;
}

static tdm_status sort_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 2 || op->n_iattr != 2) return tdm__rule(op, "takes x, 2 outputs, [dim, descending]");
  if (op->iattr[1] != 0 && op->iattr[1] != 1) return tdm__rule(op, "descending must be 0 or 1");
  const tdm_value *x = TDM_VAL(m, op, 0);
  const int64_t d = op->iattr[0];
  return select_check_shapes(m, op, d, d >= 0 && d < x->shape.rank ? x->shape.dims[d] : 0);
}

static tdm_status topk_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 2 || op->n_iattr != 3) return tdm__rule(op, "takes x, 2 outputs, [dim, k, largest]");
  if (op->iattr[2] != 0 && op->iattr[2] != 1) return tdm__rule(op, "largest must be 0 or 1");
  return select_check_shapes(m, op, op->iattr[0], op->iattr[1]);
}

/* ---- cumsum ------------------------------------------------------------------------------- */

/* cumsum: x → y of x's shape and dtype; iattr = [dim]. float32 sums in double (like PyTorch's CPU
 * kernel); integers wrap. */
static tdm_status cumsum_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t d = op->iattr[0], n = in[0].shape->dims[d];
  int64_t outer, inner;
  tdm__outer_inner(in[0].shape, d, &outer, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      const int64_t base = o * n * inner + j;
      if (out->dtype == TDM_F32) {
        const float *x = (const float *)in[0].data + base;
        float *y = (float *)out->data + base;
        double acc = 0;
        for (int64_t i = 0; i < n; i++) y[i * inner] = (float)(acc += x[i * inner]);
      } else if (out->dtype == TDM_I64) {
        const int64_t *x = (const int64_t *)in[0].data + base;
        int64_t *y = (int64_t *)out->data + base;
        uint64_t acc = 0;
        for (int64_t i = 0; i < n; i++) y[i * inner] = (int64_t)(acc += (uint64_t)x[i * inner]);
      } else {
        const int32_t *x = (const int32_t *)in[0].data + base;
        int32_t *y = (int32_t *)out->data + base;
        uint32_t acc = 0;
        for (int64_t i = 0; i < n; i++) y[i * inner] = (int32_t)(acc += (uint32_t)x[i * inner]);
      }
    }
  return TDM_OK;
}

static tdm_status cumsum_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 1 || op->n_iattr != 1) return tdm__rule(op, "takes x, 1 output, [dim]");
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  if (x->dtype != TDM_F32 && x->dtype != TDM_I64 && x->dtype != TDM_I32)
    return tdm__rule(op, "unsupported dtype %s", tdm_dtype_name(x->dtype));
  if (y->dtype != x->dtype || !tdm__shape_eq(&x->shape, &y->shape)) return tdm__rule(op, "output must have x's dtype and shape");
  if (op->iattr[0] < 0 || op->iattr[0] >= x->shape.rank) return tdm__rule(op, "dim out of range");
  return TDM_OK;
}

const tdm_opdef tdm__select_ops[] = {
    TDM_OP(cumsum, 0, cumsum_check, cumsum_run),
    TDM_OP(gather, 0, gather_check, gather_run),
    TDM_OP(sort, 0, sort_check, sort_run),
    TDM_OP(topk, 0, topk_check, topk_run),
    TDM_OP_END,
};
