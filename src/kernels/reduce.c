/* reduce.c — reductions over a set of dims, softmax, log_softmax, layer_norm, rms_norm. Scalar
 * reference; float32 statistics accumulate in double. */
#include "../ops.h"
#include "../util.h"
#include "variants.h"

#include <math.h>
#include <string.h>


float tdm_f32_sum_row__scalar(const float *x, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; i++) sum += x[i];
  return sum;
}


/* x viewed as [outer, n, inner] around the dims [axis, axis + ndim): the layout of softmax, argmax
 * and argmin (one dim) and of the norms (the normalized dims). */
static void norm_layout(const tdm_shape *s, int64_t axis, int64_t ndim, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = *n = *inner = 1;
  for (int i = 0; i < s->rank; i++) {
    int64_t *p = i < axis ? outer : i < axis + ndim ? n : inner;
    *p *= s->dims[i];
  }
}

/* Strides into the output (keepdim layout) for every input dim; 0 on reduced dims. */
static void reduce_strides(const tdm_shape *xs, const int64_t *dims, uint32_t nd, int64_t *st) {
  bool red[TDM_MAX_RANK] = {false};
  for (uint32_t i = 0; i < nd; i++) red[dims[i]] = true;
  int64_t k = 1;
  for (int i = xs->rank - 1; i >= 0; i--) {
    st[i] = red[i] ? 0 : k;
    if (!red[i]) k *= xs->dims[i];
  }
}

/* The output offset of the next input element in row-major order: idx (the input index) steps by
 * one, off (its output offset, strides st) follows. */
static inline int64_t next_offset(const tdm_shape *xs, const int64_t *st, int64_t *idx, int64_t off) {
  for (int i = xs->rank - 1; i >= 0; i--) {
    if (++idx[i] < xs->dims[i]) return off + st[i];
    off -= st[i] * (xs->dims[i] - 1);
    idx[i] = 0;
  }
  return off;
}

static tdm_status reduce_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int code = op->def->code;
  const tdm_shape *xs = in[0].shape;
  int64_t st[TDM_MAX_RANK], idx[TDM_MAX_RANK] = {0}, off = 0;
  reduce_strides(xs, op->iattr, op->n_iattr, st);
  const int64_t count = out->numel ? in[0].numel / out->numel : 0;
  /* Sum or mean over trailing dims, so each output sums one contiguous row of `count` values (RMS
   * norm's mean of squares over the last dim, squeeze-excite's mean over H·W): rows at a time,
   * where the build has a row-sum variant (config.c; without one, the generic order below). */
  bool trailing = true;
  for (uint32_t i = 0; i < op->n_iattr; i++) trailing &= op->iattr[i] == xs->rank - (int64_t)op->n_iattr + (int64_t)i;
  if (tdm_f32_sum_trailing && out->dtype == TDM_F32 && (code == TDM_R_SUM || code == TDM_R_MEAN) && trailing && count > 0) {
    const float *x = in[0].data;
    float *y = out->data;
    for (int64_t r = 0; r < out->numel; r++) {
      const float sum = tdm_f32_sum_trailing(x + r * count, count);
      y[r] = code == TDM_R_MEAN ? sum / (float)count : sum;
    }
    return TDM_OK;
  }
  if (out->dtype == TDM_BOOL) {
    uint8_t *y = out->data;
    const uint8_t *x = in[0].data;
    const bool all = code == TDM_R_ALL;
    memset(y, all, (size_t)out->numel);
    for (int64_t t = 0; t < in[0].numel; t++) {
      if (all) y[off] &= x[t] != 0;
      else y[off] |= x[t] != 0;
      off = next_offset(xs, st, idx, off);
    }
  } else if (out->dtype == TDM_F32) {
    float *y = out->data;
    const float *x = in[0].data;
    const float init = code == TDM_R_AMAX ? -INFINITY : code == TDM_R_AMIN ? INFINITY : 0.0f;
    for (int64_t i = 0; i < out->numel; i++) y[i] = init;
    for (int64_t t = 0; t < in[0].numel; t++) {
      const float v = x[t];
      float *a = &y[off];
      if (code == TDM_R_AMAX) *a = (v > *a || v != v) ? v : *a;
      else if (code == TDM_R_AMIN) *a = (v < *a || v != v) ? v : *a;
      else *a += v;
      off = next_offset(xs, st, idx, off);
    }
    if (code == TDM_R_MEAN)
      for (int64_t i = 0; i < out->numel; i++) y[i] = count ? y[i] / (float)count : NAN;
  } else {
    int64_t *y = out->data;
    const int64_t *x = in[0].data;
    const int64_t init = code == TDM_R_AMAX ? INT64_MIN : code == TDM_R_AMIN ? INT64_MAX : 0;
    for (int64_t i = 0; i < out->numel; i++) y[i] = init;
    for (int64_t t = 0; t < in[0].numel; t++) {
      const int64_t v = x[t];
      int64_t *a = &y[off];
      if (code == TDM_R_AMAX) *a = v > *a ? v : *a;
      else if (code == TDM_R_AMIN) *a = v < *a ? v : *a;
      else *a = (int64_t)((uint64_t)*a + (uint64_t)v);
      off = next_offset(xs, st, idx, off);
    }
  }
  return TDM_OK;
}

/* iattr = reduced dims (distinct, ascending); output shape is the input's with them set to 1
 * (keepdim) or removed. */
static tdm_status reduce_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 1 || op->n_iattr < 1) return tdm__rule(op, "takes 1 input, 1 output, dims");
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  if (x->dtype != y->dtype) return tdm__rule(op, "output dtype differs");
  const bool logical = op->def->code == TDM_R_ANY || op->def->code == TDM_R_ALL;
  if (logical ? x->dtype != TDM_BOOL : (x->dtype != TDM_F32 && !(x->dtype == TDM_I64 && op->def->code != TDM_R_MEAN)))
    return tdm__rule(op, "unsupported dtype %s", tdm_dtype_name(x->dtype));
  bool red[TDM_MAX_RANK] = {false};
  for (uint32_t i = 0; i < op->n_iattr; i++) {
    int64_t d = op->iattr[i];
    if (d < 0 || d >= x->shape.rank || (i > 0 && d <= op->iattr[i - 1])) return tdm__rule(op, "dims must be ascending and in range");
    red[d] = true;
  }
  if ((op->def->code == TDM_R_AMAX || op->def->code == TDM_R_AMIN) && x->numel == 0) return tdm__rule(op, "cannot reduce an empty tensor");
  tdm_shape keep = x->shape, drop = {0};
  for (int i = 0; i < x->shape.rank; i++) {
    if (red[i]) keep.dims[i] = 1;
    else drop.dims[drop.rank++] = x->shape.dims[i];
  }
  if (!tdm__shape_eq(&keep, &y->shape) && !tdm__shape_eq(&drop, &y->shape)) return tdm__rule(op, "output shape is not the reduced shape");
  return TDM_OK;
}


void tdm_f32_softmax_group__scalar(const float *x, float *y, int64_t n, int64_t stride, bool logp) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    const float v = x[i * stride];
    mx = (v > mx || v != v) ? v : mx;
  }
  if (mx == -INFINITY) mx = 0; /* all -inf: exp gives 0s and PyTorch's NaN below */
  double sum = 0;
  for (int64_t i = 0; i < n; i++) {
    const float v = x[i * stride];
    const float e = v == -INFINITY ? 0.0f : expf(v - mx); /* masked scores: skip expf's slow underflow path */
    if (!logp) y[i * stride] = e;
    sum += e;
  }
  if (logp) {
    const float ls = (float)log(sum);
    for (int64_t i = 0; i < n; i++) y[i * stride] = x[i * stride] - mx - ls;
  } else {
    const float r = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) y[i * stride] *= r;
  }
}

/* softmax / log_softmax: iattr = [dim]. */
static tdm_status softmax_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  int64_t outer, n, inner;
  norm_layout(in[0].shape, op->iattr[0], 1, &outer, &n, &inner);
  const float *x = in[0].data;
  float *y = out->data;
  const bool logp = op->def->code == TDM_SM_LOG_SOFTMAX;
  if (inner == 1) {
    for (int64_t o = 0; o < outer; o++) tdm_f32_softmax_row(x + o * n, y + o * n, n, logp);
    return TDM_OK;
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) tdm_f32_softmax_group__scalar(x + o * n * inner + j, y + o * n * inner + j, n, inner, logp);
  return TDM_OK;
}

static tdm_status softmax_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 1 || op->n_iattr != 1) return tdm__rule(op, "takes 1 input, 1 output, [dim]");
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  if (x->dtype != TDM_F32 || y->dtype != TDM_F32 || !tdm__shape_eq(&x->shape, &y->shape))
    return tdm__rule(op, "input and output must be float32 of one shape");
  if (op->iattr[0] < 0 || op->iattr[0] >= x->shape.rank) return tdm__rule(op, "dim out of range");
  return TDM_OK;
}

/* Layer norm and RMS norm over groups of n values `stride` apart: the scalar reference (statistics
 * in double), and SIMD128 paths for contiguous rows (one group) and for four groups side by side
 * (stride > 1: e.g. the channels of [N, C, T], where four consecutive t are four groups). The SIMD
 * paths keep the statistics in float lanes, two passes, for n up to 4096; longer groups use the
 * scalar path. */
#define NORM_SIMD_MAX 4096

void tdm_f32_layer_norm_group__scalar(const float *x, float *y, int64_t n, int64_t stride, const float *w, const float *b, float eps) {
  double mean = 0, var = 0;
  for (int64_t i = 0; i < n; i++) mean += x[i * stride];
  mean /= (double)n;
  for (int64_t i = 0; i < n; i++) var += (x[i * stride] - mean) * (x[i * stride] - mean);
  var /= (double)n;
  const float rstd = (float)(1.0 / sqrt(var + eps)), mu = (float)mean;
  for (int64_t i = 0; i < n; i++) {
    float v = (x[i * stride] - mu) * rstd;
    if (w) v *= w[i];
    if (b) v += b[i];
    y[i * stride] = v;
  }
}

/* y = x / sqrt(mean(x²) + eps) [* w], computed as (x * rstd) * w like x * rsqrt(...) * w. */
void tdm_f32_rms_norm_group__scalar(const float *x, float *y, int64_t n, int64_t stride, const float *w, float eps) {
  double q = 0;
  for (int64_t i = 0; i < n; i++) q += (double)x[i * stride] * x[i * stride];
  const float rstd = 1.0f / sqrtf((float)(q / (double)n) + eps);
  for (int64_t i = 0; i < n; i++) {
    float v = x[i * stride] * rstd;
    if (w) v *= w[i];
    y[i * stride] = v;
  }
}


/* The row and four-group forms of the references, which config.c picks where the build has no
 * SIMD128: the group kernels at stride 1, and four groups one after another (the same bits as the
 * op's scalar loop over groups). */
void tdm_f32_softmax_row__scalar(const float *x, float *y, int64_t n, bool logp) { tdm_f32_softmax_group__scalar(x, y, n, 1, logp); }
void tdm_f32_layer_norm_row__scalar(const float *x, float *y, int64_t n, const float *w, const float *b, float eps) {
  tdm_f32_layer_norm_group__scalar(x, y, n, 1, w, b, eps);
}
void tdm_f32_layer_norm_4groups__scalar(const float *x, float *y, int64_t n, int64_t stride, const float *w, const float *b, float eps) {
  for (int i = 0; i < 4; i++) tdm_f32_layer_norm_group__scalar(x + i, y + i, n, stride, w, b, eps);
}
void tdm_f32_rms_norm_row__scalar(const float *x, float *y, int64_t n, const float *w, float eps) {
  tdm_f32_rms_norm_group__scalar(x, y, n, 1, w, eps);
}

/* layer_norm: inputs x[, weight][, bias]; iattr = [ndim, has_weight, has_bias(, axis)];
 * fattr = [eps]. The normalized dims are [axis, axis + ndim) of x, by default x's last ndim dims;
 * weight and bias have their shape. */
static tdm_status layer_norm_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const tdm_shape *s = in[0].shape;
  const int64_t ndim = op->iattr[0], axis = op->n_iattr > 3 ? op->iattr[3] : s->rank - ndim;
  int64_t outer, n, inner;
  norm_layout(s, axis, ndim, &outer, &n, &inner);
  if (n == 0 || inner == 0) return TDM_OK;
  const float *w = op->iattr[1] ? in[1].data : NULL;
  const float *b = op->iattr[2] ? in[1 + (op->iattr[1] != 0)].data : NULL;
  const float eps = (float)op->fattr[0];
  for (int64_t o = 0; o < outer; o++) {
    const float *x = (const float *)in[0].data + o * n * inner;
    float *y = (float *)out->data + o * n * inner;
    int64_t j = 0;
    if (n <= NORM_SIMD_MAX) {
      if (inner == 1) {
        tdm_f32_layer_norm_row(x, y, n, w, b, eps);
        continue;
      }
      for (; j + 4 <= inner; j += 4) tdm_f32_layer_norm_4groups(x + j, y + j, n, inner, w, b, eps);
    }
    for (; j < inner; j++) tdm_f32_layer_norm_group__scalar(x + j, y + j, n, inner, w, b, eps);
  }
  return TDM_OK;
}

/* Checks x, output and the per-element parameters (inputs 1..) of a norm over [axis, axis + nd). */
static tdm_status norm_check_shapes(const tdm_method *m, const tdm_op *op, int64_t axis, int64_t nd) {
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  if (nd < 1 || axis < 0 || axis > x->shape.rank - nd) return tdm__rule(op, "normalized dims out of range");
  if (x->dtype != TDM_F32 || y->dtype != TDM_F32 || !tdm__shape_eq(&x->shape, &y->shape))
    return tdm__rule(op, "x and output must be float32 of one shape");
  for (uint32_t k = 1; k < op->n_in; k++) {
    const tdm_value *p = TDM_VAL(m, op, k);
    if (p->dtype != TDM_F32 || p->shape.rank != nd) return tdm__rule(op, "weight/bias must be float32 of the normalized shape");
    for (int i = 0; i < nd; i++)
      if (p->shape.dims[i] != x->shape.dims[axis + i]) return tdm__rule(op, "weight/bias shape differs from the normalized dims");
  }
  return TDM_OK;
}

static tdm_status layer_norm_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_out != 1 || (op->n_iattr != 3 && op->n_iattr != 4) || op->n_fattr != 1 || op->n_in < 1)
    return tdm__rule(op, "takes x[, weight][, bias], 1 output, [ndim, has_weight, has_bias(, axis)], [eps]");
  const int64_t nd = op->iattr[0], hw = op->iattr[1], hb = op->iattr[2];
  if ((hw != 0 && hw != 1) || (hb != 0 && hb != 1) || op->n_in != 1 + hw + hb)
    return tdm__rule(op, "input count does not match has_weight/has_bias");
  const int rank = TDM_VAL(m, op, 0)->shape.rank;
  if (nd < 1 || nd > rank) return tdm__rule(op, "normalized ndim out of range");
  return norm_check_shapes(m, op, op->n_iattr == 4 ? op->iattr[3] : rank - nd, nd);
}

/* rms_norm: inputs x[, weight]; iattr = [has_weight]; fattr = [eps]. Over x's last dim:
 * y = x * (1 / sqrt(mean(x²) + eps)) [* weight], weight [D]. The exporter recognizes the pattern
 * x * rsqrt(mean(x * x, -1, keepdim) + eps) [* weight] (how RMSNorm modules decompose). */
static tdm_status rms_norm_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const tdm_shape *s = in[0].shape;
  const int64_t n = s->dims[s->rank - 1], rows = n ? in[0].numel / n : 0;
  const float *w = op->iattr[0] ? in[1].data : NULL;
  const float eps = (float)op->fattr[0];
  for (int64_t r = 0; r < rows; r++) {
    const float *x = (const float *)in[0].data + r * n;
    float *y = (float *)out->data + r * n;
    if (n <= NORM_SIMD_MAX) {
      tdm_f32_rms_norm_row(x, y, n, w, eps);
      continue;
    }
    tdm_f32_rms_norm_group__scalar(x, y, n, 1, w, eps);
  }
  return TDM_OK;
}

static tdm_status rms_norm_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_out != 1 || op->n_iattr != 1 || op->n_fattr != 1 || op->n_in < 1)
    return tdm__rule(op, "takes x[, weight], 1 output, [has_weight], [eps]");
  const int64_t hw = op->iattr[0];
  if ((hw != 0 && hw != 1) || op->n_in != 1 + hw) return tdm__rule(op, "input count does not match has_weight");
  const int rank = TDM_VAL(m, op, 0)->shape.rank;
  if (rank < 1) return tdm__rule(op, "x must have rank 1 or more");
  return norm_check_shapes(m, op, rank - 1, 1);
}

/* argmax / argmin: iattr = [dim]; output i64, keepdim or not. First index wins ties; NaN is the
 * maximum (and minimum), like PyTorch. */
static tdm_status arg_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  int64_t outer, n, inner;
  norm_layout(in[0].shape, op->iattr[0], 1, &outer, &n, &inner);
  const bool mx = op->def->code == TDM_ARG_MAX;
  int64_t *y = out->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      const int64_t base = o * n * inner + j;
      int64_t best = 0;
      if (in[0].dtype == TDM_F32) {
        const float *x = in[0].data;
        float bv = x[base];
        for (int64_t i = 1; i < n && bv == bv; i++) {
          const float v = x[base + i * inner];
          if (v != v || (mx ? v > bv : v < bv)) {
            bv = v;
            best = i;
          }
        }
      } else {
        const int64_t *x = in[0].data;
        int64_t bv = x[base];
        for (int64_t i = 1; i < n; i++) {
          const int64_t v = x[base + i * inner];
          if (mx ? v > bv : v < bv) {
            bv = v;
            best = i;
          }
        }
      }
      y[o * inner + j] = best;
    }
  return TDM_OK;
}

static tdm_status arg_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 1 || op->n_iattr != 1) return tdm__rule(op, "takes 1 input, 1 output, [dim]");
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  const int64_t d = op->iattr[0];
  if ((x->dtype != TDM_F32 && x->dtype != TDM_I64) || y->dtype != TDM_I64) return tdm__rule(op, "input float32 or int64, output int64");
  if (d < 0 || d >= x->shape.rank || x->shape.dims[d] == 0) return tdm__rule(op, "dim out of range or empty");
  tdm_shape keep = x->shape, drop = {0};
  keep.dims[d] = 1;
  for (int i = 0; i < x->shape.rank; i++)
    if (i != d) drop.dims[drop.rank++] = x->shape.dims[i];
  if (!tdm__shape_eq(&keep, &y->shape) && !tdm__shape_eq(&drop, &y->shape)) return tdm__rule(op, "output shape is not the reduced shape");
  return TDM_OK;
}

const tdm_opdef tdm__reduce_ops[] = {
    TDM_OP(any, TDM_R_ANY, reduce_check, reduce_run),
    TDM_OP(all, TDM_R_ALL, reduce_check, reduce_run),
    TDM_OP(argmax, TDM_ARG_MAX, arg_check, arg_run),
    TDM_OP(argmin, TDM_ARG_MIN, arg_check, arg_run),
    TDM_OP(sum, TDM_R_SUM, reduce_check, reduce_run),
    TDM_OP(mean, TDM_R_MEAN, reduce_check, reduce_run),
    TDM_OP(amax, TDM_R_AMAX, reduce_check, reduce_run),
    TDM_OP(amin, TDM_R_AMIN, reduce_check, reduce_run),
    TDM_OP(softmax, TDM_SM_SOFTMAX, softmax_check, softmax_run),
    TDM_OP(log_softmax, TDM_SM_LOG_SOFTMAX, softmax_check, softmax_run),
    TDM_OP(layer_norm, 0, layer_norm_check, layer_norm_run),
    TDM_OP(rms_norm, 0, rms_norm_check, rms_norm_run),
    TDM_OP_END,
};
