/* shape.c — ops that move elements without arithmetic: permute, slice, cat, expand,
 * index_select. Element-size generic (1, 4 or 8 bytes). */
#include "../ops.h"
#include "../threads.h"
#include "../util.h"

#include <string.h>

static void contiguous_strides(const tdm_shape *s, int64_t *st) {
  int64_t k = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    st[i] = k;
    k *= s->dims[i];
  }
}

/* A copy of 256 KB or more is split over threads (Mimi's streaming buffers: [64, 1922] floats a
 * step); each element is copied alone, so any split gives the same bytes. */
#define PARALLEL_COPY_BYTES (256 * 1024)

typedef struct {
  const tdm_tensor *out;
  const void *src;
  const int64_t *st;
  int64_t base, n;
} gather_job;

/* Rows [lo, hi) of the last dimension of `out` (n elements each) from src. */
static void gather_rows(void *ctx, int64_t lo, int64_t hi, int t, void *ws) {
  const gather_job *j = ctx;
  (void)t, (void)ws;
  const size_t es = tdm_dtype_size(j->out->dtype);
  const tdm_shape *s = j->out->shape;
  const int r = s->rank;
  const int64_t n = j->n, inner = r ? j->st[r - 1] : 0;
  int64_t idx[TDM_MAX_RANK] = {0}, off = j->base;
  for (int64_t i = r - 2, q = lo; i >= 0; i--) { /* row lo's index, last dims fastest */
    idx[i] = q % s->dims[i], q /= s->dims[i];
    off += idx[i] * j->st[i];
  }
  for (int64_t row = lo; row < hi; row++) {
    uint8_t *y = (uint8_t *)j->out->data + row * n * (int64_t)es;
    if (es == 4) {
      const uint32_t *x = (const uint32_t *)j->src + off;
      for (int64_t k = 0; k < n; k++) ((uint32_t *)y)[k] = x[k * inner];
    } else if (es == 8) {
      const uint64_t *x = (const uint64_t *)j->src + off;
      for (int64_t k = 0; k < n; k++) ((uint64_t *)y)[k] = x[k * inner];
    } else {
      const uint8_t *x = (const uint8_t *)j->src + off;
      for (int64_t k = 0; k < n; k++) y[k] = x[k * inner];
    }
    for (int i = r - 2; i >= 0; i--) {
      if (++idx[i] < s->dims[i]) {
        off += j->st[i];
        break;
      }
      off -= j->st[i] * (s->dims[i] - 1);
      idx[i] = 0;
    }
  }
}

/* Copy `out` elements from `src`, where out index (i0..ir) reads src at sum(i_d * st[d]) + base:
 * rows of the last dimension at a time, with a typed inner loop per element size. */
static void strided_gather(const tdm_tensor *out, const void *src, const int64_t *st, int64_t base) {
  if (out->numel == 0) return;
  const int r = out->shape->rank;
  const int64_t n = r ? out->shape->dims[r - 1] : 1, rows = out->numel / n;
  gather_job j = {out, src, st, base, n};
  if (rows >= 2 && (size_t)out->numel * tdm_dtype_size(out->dtype) >= PARALLEL_COPY_BYTES) tdm__parallel(rows, 1, gather_rows, &j);
  else gather_rows(&j, 0, rows, 0, NULL);
}

/* permute: iattr = perm. */
static tdm_status permute_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  int64_t ist[TDM_MAX_RANK], st[TDM_MAX_RANK];
  contiguous_strides(in[0].shape, ist);
  for (int i = 0; i < out->shape->rank; i++) st[i] = ist[op->iattr[i]];
  strided_gather(out, in[0].data, st, 0);
  return TDM_OK;
}

static tdm_status permute_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 1) return tdm__rule(op, "takes 1 input and 1 output");
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  if (x->dtype != y->dtype || x->shape.rank != y->shape.rank || op->n_iattr != (uint32_t)x->shape.rank)
    return tdm__rule(op, "needs one permutation entry per dimension and matching dtypes");
  bool seen[TDM_MAX_RANK] = {false};
  for (int i = 0; i < x->shape.rank; i++) {
    int64_t p = op->iattr[i];
    if (p < 0 || p >= x->shape.rank || seen[p]) return tdm__rule(op, "attribute is not a permutation");
    seen[p] = true;
    if (y->shape.dims[i] != x->shape.dims[p]) return tdm__rule(op, "output shape is not the permuted shape");
  }
  return TDM_OK;
}

/* slice: iattr = [dim, start, step]; the output's size along dim gives the count. */
static tdm_status slice_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  int64_t st[TDM_MAX_RANK];
  contiguous_strides(in[0].shape, st);
  const int64_t d = op->iattr[0];
  const int64_t base = op->iattr[1] * st[d];
  st[d] *= op->iattr[2];
  strided_gather(out, in[0].data, st, base);
  return TDM_OK;
}

static tdm_status slice_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 1 || op->n_iattr != 3) return tdm__rule(op, "takes 1 input, 1 output and [dim, start, step]");
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  const int64_t d = op->iattr[0], start = op->iattr[1], step = op->iattr[2];
  if (x->dtype != y->dtype || x->shape.rank != y->shape.rank) return tdm__rule(op, "dtype or rank differs");
  if (d < 0 || d >= x->shape.rank) return tdm__rule(op, "dim out of range");
  for (int i = 0; i < x->shape.rank; i++)
    if (i != d && x->shape.dims[i] != y->shape.dims[i]) return tdm__rule(op, "non-sliced dims differ");
  const int64_t n = y->shape.dims[d], size = x->shape.dims[d];
  if (step < 1 || start < 0 || start > size) return tdm__rule(op, "start or step out of range");
  /* last index read: start + (n-1)*step < size, without overflow */
  if (n > 0 && (n - 1 > (size - 1 - start) / step || start >= size))
    return tdm__rule(op, "slice reads past the end of dim %lld", (long long)d);
  return TDM_OK;
}

/* cat: iattr = [dim]. Rows of the dims before `dim` ([lo, hi) of `outer`), each the inputs' pieces
 * side by side. */
typedef struct {
  const tdm_op *op;
  const tdm_tensor *in, *out;
  int64_t inner;
} cat_job;

static void cat_rows(void *ctx, int64_t lo, int64_t hi, int t, void *ws) {
  const cat_job *j = ctx;
  (void)t, (void)ws;
  const int64_t d = j->op->iattr[0];
  const size_t es = tdm_dtype_size(j->out->dtype), row = (size_t)(j->out->shape->dims[d] * j->inner) * es;
  size_t col = 0;
  for (uint32_t k = 0; k < j->op->n_in; k++) {
    const size_t chunk = (size_t)(j->in[k].shape->dims[d] * j->inner) * es;
    for (int64_t o = lo; o < hi; o++) memcpy((uint8_t *)j->out->data + o * row + col, (const uint8_t *)j->in[k].data + o * chunk, chunk);
    col += chunk;
  }
}

static tdm_status cat_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t d = op->iattr[0];
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < d; i++) outer *= out->shape->dims[i];
  for (int i = (int)d + 1; i < out->shape->rank; i++) inner *= out->shape->dims[i];
  cat_job j = {op, in, out, inner};
  if (outer >= 2 && (size_t)out->numel * tdm_dtype_size(out->dtype) >= PARALLEL_COPY_BYTES) tdm__parallel(outer, 1, cat_rows, &j);
  else cat_rows(&j, 0, outer, 0, NULL);
  return TDM_OK;
}

static tdm_status cat_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in < 1 || op->n_out != 1 || op->n_iattr != 1) return tdm__rule(op, "takes >= 1 inputs, 1 output, [dim]");
  const tdm_value *y = TDM_OUTVAL(m, op, 0);
  const int64_t d = op->iattr[0];
  if (d < 0 || d >= y->shape.rank) return tdm__rule(op, "dim out of range");
  int64_t total = 0;
  for (uint32_t k = 0; k < op->n_in; k++) {
    const tdm_value *x = TDM_VAL(m, op, k);
    if (x->dtype != y->dtype || x->shape.rank != y->shape.rank) return tdm__rule(op, "input %u: dtype or rank differs", k);
    for (int i = 0; i < y->shape.rank; i++)
      if (i != d && x->shape.dims[i] != y->shape.dims[i]) return tdm__rule(op, "input %u: dims differ", k);
    total += x->shape.dims[d]; /* each <= output numel bound, cannot overflow for rank <= 8 */
  }
  if (total != y->shape.dims[d]) return tdm__rule(op, "sizes along dim do not add up to the output");
  return TDM_OK;
}

/* expand: broadcast the input to the output's shape. */
static tdm_status expand_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  (void)op;
  int64_t st[TDM_MAX_RANK];
  tdm__broadcast_strides(in[0].shape, out->shape, st);
  strided_gather(out, in[0].data, st, 0);
  return TDM_OK;
}

static tdm_status expand_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 1) return tdm__rule(op, "takes 1 input and 1 output");
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  tdm_shape b;
  if (x->dtype != y->dtype || x->shape.rank > y->shape.rank || !tdm__broadcast(&x->shape, &y->shape, &b) || !tdm__shape_eq(&b, &y->shape))
    return tdm__rule(op, "input does not broadcast to the output shape");
  return TDM_OK;
}

/* index_select: iattr = [dim]; out = x[..., idx, ...] with idx of any shape replacing dim.
 * Indices in [-n, n) count from the end when negative. The exporter validates indices with a
 * check_index op before the state is written; should one still be out of range here, its rows are
 * zeros (never a read outside x). */
static tdm_status index_select_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t d = op->iattr[0];
  const tdm_shape *xs = in[0].shape;
  const int64_t n = xs->dims[d];
  const size_t es = tdm_dtype_size(out->dtype);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < d; i++) outer *= xs->dims[i];
  for (int i = (int)d + 1; i < xs->rank; i++) inner *= xs->dims[i];
  const size_t chunk = (size_t)inner * es;
  uint8_t *y = out->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < in[1].numel; i++) {
      const int64_t ji = tdm__index_at(&in[1], i), j = ji < 0 ? ji + n : ji;
      if (j < 0 || j >= n) memset(y, 0, chunk);
      else memcpy(y, (const uint8_t *)in[0].data + ((o * n + j) * inner) * es, chunk);
      y += chunk;
    }
  return TDM_OK;
}

static tdm_status index_select_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 2 || op->n_out != 1 || op->n_iattr != 1) return tdm__rule(op, "takes x, index, 1 output, [dim]");
  const tdm_value *x = TDM_VAL(m, op, 0), *ix = TDM_VAL(m, op, 1), *y = TDM_OUTVAL(m, op, 0);
  const int64_t d = op->iattr[0];
  if (d < 0 || d >= x->shape.rank) return tdm__rule(op, "dim out of range");
  if ((ix->dtype != TDM_I64 && ix->dtype != TDM_I32) || x->dtype != y->dtype)
    return tdm__rule(op, "index must be int64 or int32, dtypes must match");
  if (x->shape.rank - 1 + ix->shape.rank > TDM_MAX_RANK) return tdm__rule(op, "result rank too large");
  tdm_shape want = {0};
  for (int i = 0; i < d; i++) want.dims[want.rank++] = x->shape.dims[i];
  for (int i = 0; i < ix->shape.rank; i++) want.dims[want.rank++] = ix->shape.dims[i];
  for (int i = (int)d + 1; i < x->shape.rank; i++) want.dims[want.rank++] = x->shape.dims[i];
  if (!tdm__shape_eq(&want, &y->shape)) return tdm__rule(op, "output shape is not x.shape with dim replaced by index.shape");
  if (x->shape.dims[d] == 0 && ix->numel > 0) return tdm__rule(op, "indexing an empty dimension");
  return TDM_OK;
}

const tdm_opdef tdm__shape_ops[] = {
    TDM_OP(permute, 0, permute_check, permute_run),
    TDM_OP(slice, 0, slice_check, slice_run),
    TDM_OP(cat, 0, cat_check, cat_run),
    TDM_OP(expand, 0, expand_check, expand_run),
    TDM_OP(index_select, 0, index_select_check, index_select_run),
    TDM_OP_END,
};
