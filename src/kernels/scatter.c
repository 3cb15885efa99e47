/* scatter.c — updates of part of a tensor: index_put, slice_scatter, scatter, and check_index, the op
 * that validates runtime indices before anything is written. The updates may run in place (output =
 * input 0), which is how a KV-cache update writes only its new rows; their `writes` hooks name those
 * rows for the session's undo journal (session.c). */
#include "../ops.h"
#include "../util.h"

#include <string.h>

static void copy_base(const tdm_tensor *base, const tdm_tensor *out) {
  if (out->data != base->data) memcpy(out->data, base->data, (size_t)out->numel * tdm_dtype_size(out->dtype));
}

/* check_index: index int64 or int32 (any shape); iattr = [n]. Fails the call unless every index is in
 * [-n, n). No output. */
static tdm_status check_index_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  (void)out;
  const int64_t n = op->iattr[0];
  for (int64_t i = 0; i < in[0].numel; i++) {
    const int64_t j = tdm__index_at(&in[0], i);
    if (j < -n || j >= n)
      return tdm__fail(TDM_ERR_INDEX, "index %lld is out of range for a dimension of size %lld", (long long)j, (long long)n);
  }
  return TDM_OK;
}

static tdm_status check_index_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 0 || op->n_iattr != 1) return tdm__rule(op, "takes 1 input, no output, [n]");
  if (TDM_VAL(m, op, 0)->dtype != TDM_I64 && TDM_VAL(m, op, 0)->dtype != TDM_I32) return tdm__rule(op, "index must be int64 or int32");
  if (op->iattr[0] < 0) return tdm__rule(op, "n must be >= 0");
  return TDM_OK;
}

/* guard: cond bool (one element) → (nothing); iattr = [line]. Fails the call (TDM_ERR_GUARD) unless
 * cond is true: the exporter specialized a Python branch on a tensor value (`if (pad > 0).any():`)
 * and cond says the branch goes the traced way in this call, or the method calls torch._check. `line` is the user's source line of the
 * branch (0 when unknown), for the message. Like check_index it runs before any state write. */
static tdm_status guard_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  (void)out;
  if (!((const uint8_t *)in[0].data)[0])
    return tdm__fail(TDM_ERR_GUARD,
                     "a condition on a tensor value (the method's line %lld) does not hold in this call: a torch._check "
                     "failed, or a branch the export specialized goes the other way than when it was exported (export "
                     "again with inputs and state that take this branch, or write it with torch.where)",
                     (long long)op->iattr[0]);
  return TDM_OK;
}

/* when: a state value (one int64) → (nothing); iattr = [value, line]. The method is a version
 * specialized at export for the state holding `value` there (a Python bool or int that steers the
 * program); session.c picks the version whose `when` ops hold before the call, and the op itself
 * fails the call (TDM_ERR_GUARD) when no version fits. `line` is the user's source line (0 if unknown). */
static tdm_status when_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  (void)out;
  int64_t v;
  memcpy(&v, in[0].data, 8);
  if (v != op->iattr[0])
    return tdm__fail(TDM_ERR_GUARD,
                     "the method was exported in versions for the values that a Python value it branches on (the method's line "
                     "%lld) took at export, and this call finds %lld, which no version was traced for; export again with "
                     "state that reaches that value, or write the branch with torch.where",
                     (long long)op->iattr[1], (long long)v);
  return TDM_OK;
}

static tdm_status when_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 0 || op->n_iattr != 2 || op->n_fattr != 0)
    return tdm__rule(op, "takes 1 input, no output, [value, line]");
  const tdm_value *c = TDM_VAL(m, op, 0);
  if (c->dtype != TDM_I64 || c->numel != 1 || c->region != TDM_REGION_STATE) return tdm__rule(op, "input must be one int64 of the state");
  return TDM_OK;
}

/* when_in: a state value (one int64) → (nothing); iattr = [lo, hi, line]. Like `when`, for the run of
 * values lo..hi (inclusive) of a Python int the method branches on, which took one path through the
 * method at export (its comparisons with the int give the same answers over the run). */
static tdm_status when_in_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  (void)out;
  int64_t v;
  memcpy(&v, in[0].data, 8);
  if (v < op->iattr[0] || v > op->iattr[1])
    return tdm__fail(TDM_ERR_GUARD,
                     "the method was exported in versions for the runs of values of a Python int it branches on (the "
                     "method's line %lld) that its calls reach, and this call finds %lld, which no version was traced for "
                     "(state written by hand?); export again with state that reaches that value, or write the branch with torch.where",
                     (long long)op->iattr[2], (long long)v);
  return TDM_OK;
}

static tdm_status when_in_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 0 || op->n_iattr != 3 || op->n_fattr != 0)
    return tdm__rule(op, "takes 1 input, no output, [lo, hi, line]");
  const tdm_value *c = TDM_VAL(m, op, 0);
  if (c->dtype != TDM_I64 || c->numel != 1 || c->region != TDM_REGION_STATE) return tdm__rule(op, "input must be one int64 of the state");
  if (op->iattr[0] > op->iattr[1]) return tdm__rule(op, "lo must not exceed hi");
  return TDM_OK;
}

static tdm_status guard_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 0 || op->n_iattr != 1 || op->n_fattr != 0) return tdm__rule(op, "takes 1 input, no output, [line]");
  const tdm_value *c = TDM_VAL(m, op, 0);
  if (c->dtype != TDM_BOOL || c->numel != 1) return tdm__rule(op, "cond must be one bool");
  return TDM_OK;
}

/* cond: pred bool (one element) → outputs (any number); iattr = [then ops, else ops]. A branch in the
 * program (torch.cond): the `then` ops that follow it run when pred holds, else the `else` ops after
 * those; each branch writes every output. The session loop branches (session.c, tdm__is_cond), so the
 * kernel itself does nothing; verify.c checks that the branches nest and that both define the
 * outputs before anything after the op reads them. */
tdm_status tdm__cond_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  (void)op, (void)in, (void)out;
  return TDM_OK;
}

static tdm_status cond_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_iattr != 2 || op->n_fattr != 0) return tdm__rule(op, "takes pred, any outputs, [then ops, else ops]");
  const tdm_value *c = TDM_VAL(m, op, 0);
  if (c->dtype != TDM_BOOL || c->numel != 1) return tdm__rule(op, "pred must be one bool");
  const int64_t after = (int64_t)m->n_ops - (int64_t)(op - m->ops) - 1; /* ops after this one */
  if (op->iattr[0] < 0 || op->iattr[1] < 0 || op->iattr[0] > after || op->iattr[1] > after - op->iattr[0])
    return tdm__rule(op, "its branches (%lld and %lld ops) do not fit in the %lld ops after it", (long long)op->iattr[0],
                     (long long)op->iattr[1], (long long)after);
  return TDM_OK;
}

/* index_put: base, index i64 [k], values → out (base's shape); iattr = [dim, accumulate].
 * values has base's shape with dim of size k. out[..., index[i], ...] = values[..., i, ...]
 * (+= when accumulating). Out-of-range indices (already rejected by check_index) are skipped. */
static tdm_status index_put_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  copy_base(&in[0], out);
  const int64_t d = op->iattr[0], acc = op->iattr[1];
  const tdm_shape *s = out->shape;
  const int64_t n = s->dims[d], k = in[1].numel;
  int64_t outer, inner;
  tdm__outer_inner(s, d, &outer, &inner);
  const size_t es = tdm_dtype_size(out->dtype), chunk = (size_t)inner * es;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < k; i++) {
      const int64_t ji = tdm__index_at(&in[1], i), j = ji < 0 ? ji + n : ji;
      if (j < 0 || j >= n) continue;
      uint8_t *dst = (uint8_t *)out->data + (size_t)(o * n + j) * chunk;
      const uint8_t *src = (const uint8_t *)in[2].data + (size_t)(o * k + i) * chunk;
      if (!acc) {
        memcpy(dst, src, chunk);
      } else if (out->dtype == TDM_F32) {
        for (int64_t e = 0; e < inner; e++) ((float *)dst)[e] += ((const float *)src)[e];
      } else if (out->dtype == TDM_I64) {
        for (int64_t e = 0; e < inner; e++)
          ((int64_t *)dst)[e] = (int64_t)((uint64_t)((int64_t *)dst)[e] + (uint64_t)((const int64_t *)src)[e]);
      } else if (out->dtype == TDM_I32) {
        for (int64_t e = 0; e < inner; e++)
          ((int32_t *)dst)[e] = (int32_t)((uint32_t)((int32_t *)dst)[e] + (uint32_t)((const int32_t *)src)[e]);
      } else {
        for (int64_t e = 0; e < inner; e++) dst[e] |= src[e];
      }
    }
  return TDM_OK;
}

/* The rows index_put writes (ops.h, tdm_op_writes_fn): one per index and outer position. */
static size_t index_put_writes(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out, size_t *len, tdm_range_fn fn, void *cx) {
  const int64_t d = op->iattr[0], n = out->shape->dims[d], k = in[1].numel;
  int64_t outer, inner;
  tdm__outer_inner(out->shape, d, &outer, &inner);
  *len = (size_t)inner * tdm_dtype_size(out->dtype);
  if (fn)
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < k; i++) {
        const int64_t ji = tdm__index_at(&in[1], i), j = ji < 0 ? ji + n : ji;
        if (j >= 0 && j < n) fn(cx, (uint8_t *)out->data + (size_t)(o * n + j) * *len, *len);
      }
  return (size_t)(outer * k);
}

static tdm_status index_put_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 3 || op->n_out != 1 || op->n_iattr != 2) return tdm__rule(op, "takes base, index, values, 1 output, [dim, accumulate]");
  const tdm_value *b = TDM_VAL(m, op, 0), *ix = TDM_VAL(m, op, 1), *v = TDM_VAL(m, op, 2), *y = TDM_OUTVAL(m, op, 0);
  const int64_t d = op->iattr[0];
  if (d < 0 || d >= b->shape.rank) return tdm__rule(op, "dim out of range");
  if (op->iattr[1] != 0 && op->iattr[1] != 1) return tdm__rule(op, "accumulate must be 0 or 1");
  if ((ix->dtype != TDM_I64 && ix->dtype != TDM_I32) || ix->shape.rank != 1)
    return tdm__rule(op, "index must be a 1-d int64 or int32 tensor");
  if (b->dtype != v->dtype || b->dtype != y->dtype || !tdm__shape_eq(&b->shape, &y->shape))
    return tdm__rule(op, "base, values and output must match");
  tdm_shape want = b->shape;
  want.dims[d] = ix->shape.dims[0];
  if (!tdm__shape_eq(&want, &v->shape)) return tdm__rule(op, "values must have base's shape with dim of the index's length");
  return TDM_OK;
}

/* slice_scatter: base, src → out; iattr = [dim, start, step]. out = base with
 * out[..., start + i*step, ...] = src[..., i, ...]. */
static tdm_status slice_scatter_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  copy_base(&in[0], out);
  const int64_t d = op->iattr[0], start = op->iattr[1], step = op->iattr[2];
  const tdm_shape *s = out->shape;
  const int64_t n = s->dims[d], k = in[1].shape->dims[d];
  int64_t outer, inner;
  tdm__outer_inner(s, d, &outer, &inner);
  const size_t chunk = (size_t)inner * tdm_dtype_size(out->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < k; i++)
      memcpy((uint8_t *)out->data + (size_t)(o * n + start + i * step) * chunk, (const uint8_t *)in[1].data + (size_t)(o * k + i) * chunk,
             chunk);
  return TDM_OK;
}

/* The rows slice_scatter writes: per outer position, one range (step 1) or one per row. */
static size_t slice_scatter_writes(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out, size_t *len, tdm_range_fn fn, void *cx) {
  const int64_t d = op->iattr[0], start = op->iattr[1], step = op->iattr[2];
  const int64_t n = out->shape->dims[d], k = in[1].shape->dims[d], rows = step == 1 ? 1 : k;
  int64_t outer, inner;
  tdm__outer_inner(out->shape, d, &outer, &inner);
  const size_t chunk = (size_t)inner * tdm_dtype_size(out->dtype);
  *len = step == 1 ? (size_t)k * chunk : chunk;
  if (fn && k > 0)
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < rows; i++) fn(cx, (uint8_t *)out->data + (size_t)(o * n + start + i * step) * chunk, *len);
  return (size_t)(outer * rows);
}

static tdm_status slice_scatter_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 2 || op->n_out != 1 || op->n_iattr != 3) return tdm__rule(op, "takes base, src, 1 output, [dim, start, step]");
  const tdm_value *b = TDM_VAL(m, op, 0), *v = TDM_VAL(m, op, 1), *y = TDM_OUTVAL(m, op, 0);
  const int64_t d = op->iattr[0], start = op->iattr[1], step = op->iattr[2];
  if (d < 0 || d >= b->shape.rank) return tdm__rule(op, "dim out of range");
  if (b->dtype != v->dtype || b->dtype != y->dtype || !tdm__shape_eq(&b->shape, &y->shape) || v->shape.rank != b->shape.rank)
    return tdm__rule(op, "base, src and output must match");
  for (int i = 0; i < b->shape.rank; i++)
    if (i != d && b->shape.dims[i] != v->shape.dims[i]) return tdm__rule(op, "src dims differ from base outside dim");
  const int64_t k = v->shape.dims[d], size = b->shape.dims[d];
  if (step < 1 || start < 0 || start > size) return tdm__rule(op, "start or step out of range");
  if (k > 0 && (start >= size || k - 1 > (size - 1 - start) / step)) return tdm__rule(op, "the slice runs past the end of dim");
  return TDM_OK;
}

/* scatter: x, index (int64 or int32, x's rank), src (index's shape) → y (x's shape); iattr = [dim].
 * y = x, then y[i0.., index[i0.., ik, ..], ..] = src[i0.., ik, ..] for every element of index (the
 * last write wins where indices repeat). Negative indices count from the end; out of range (rejected
 * before by check_index) is skipped. In place when y is x: only the indexed elements are written. */
static tdm_status scatter_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  copy_base(&in[0], out);
  const int64_t d = op->iattr[0];
  const size_t es = tdm_dtype_size(out->dtype);
  const int64_t n = out->shape->dims[d];
  tdm_index_walk w;
  tdm__index_walk_start(&w, out->shape, in[1].shape, d);
  for (int64_t t = 0; t < in[1].numel; t++, tdm__index_walk_next(&w)) {
    int64_t j = tdm__index_at(&in[1], t);
    if (j < 0) j += n;
    if (j >= 0 && j < n)
      memcpy((uint8_t *)out->data + (size_t)(w.off + j * w.st[d]) * es, (const uint8_t *)in[2].data + (size_t)t * es, es);
  }
  return TDM_OK;
}

/* The elements scatter writes: one per element of index. */
static size_t scatter_writes(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out, size_t *len, tdm_range_fn fn, void *cx) {
  const int64_t d = op->iattr[0], n = out->shape->dims[d];
  const size_t es = tdm_dtype_size(out->dtype);
  *len = es;
  if (fn) {
    tdm_index_walk w;
    tdm__index_walk_start(&w, out->shape, in[1].shape, d);
    for (int64_t t = 0; t < in[1].numel; t++, tdm__index_walk_next(&w)) {
      int64_t j = tdm__index_at(&in[1], t);
      if (j < 0) j += n;
      if (j >= 0 && j < n) fn(cx, (uint8_t *)out->data + (size_t)(w.off + j * w.st[d]) * es, es);
    }
  }
  return (size_t)in[1].numel;
}

static tdm_status scatter_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 3 || op->n_out != 1 || op->n_iattr != 1) return tdm__rule(op, "takes x, index, src, 1 output, [dim]");
  const tdm_value *x = TDM_VAL(m, op, 0), *ix = TDM_VAL(m, op, 1), *v = TDM_VAL(m, op, 2), *y = TDM_OUTVAL(m, op, 0);
  const int64_t d = op->iattr[0];
  if ((ix->dtype != TDM_I64 && ix->dtype != TDM_I32)) return tdm__rule(op, "index must be int64 or int32");
  if (x->dtype != v->dtype || x->dtype != y->dtype || !tdm__shape_eq(&x->shape, &y->shape))
    return tdm__rule(op, "x, src and output must have one dtype, x and output one shape");
  if (x->shape.rank < 1 || ix->shape.rank != x->shape.rank || d < 0 || d >= x->shape.rank)
    return tdm__rule(op, "x and index need one rank (>= 1) and dim in range");
  if (!tdm__shape_eq(&ix->shape, &v->shape)) return tdm__rule(op, "src must have index's shape");
  for (int i = 0; i < x->shape.rank; i++)
    if (i != d && ix->shape.dims[i] > x->shape.dims[i]) return tdm__rule(op, "index is larger than x outside dim");
  return TDM_OK;
}

const tdm_opdef tdm__scatter_ops[] = {
    TDM_OP(check_index, 0, check_index_check, check_index_run),
    TDM_OP(guard, 0, guard_check, guard_run),
    TDM_OP(when, 0, when_check, when_run),
    TDM_OP(when_in, 0, when_in_check, when_in_run),
    TDM_OP(cond, 0, cond_check, tdm__cond_run),
    TDM_OP_UPDATE(index_put, 0, index_put_check, index_put_run, index_put_writes),
    TDM_OP_UPDATE(slice_scatter, 0, slice_scatter_check, slice_scatter_run, slice_scatter_writes),
    TDM_OP_UPDATE(scatter, 0, scatter_check, scatter_run, scatter_writes),
    TDM_OP_END,
};
