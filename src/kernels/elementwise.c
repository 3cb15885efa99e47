/* elementwise.c — binary ops with PyTorch broadcasting, unary ops, where, cast, fill, copy.
 * Scalar reference kernels. */
#include "../ops.h"
#include "../threads.h"
#include "../util.h"
#include "variants.h"

#include <math.h>
#include <string.h>

/* Comparisons and logical ops give bool. */
static bool is_compare(int code) { return code >= TDM_B_EQ && code <= TDM_B_OR; }

/* ---- broadcasting row iteration ------------------------------------------------------------ */

/* Calls row(k, offsets..., n) for each run of the last dimension of `out`: for input j the row
 * starts at element offs[j] and advances by inner[j] (0 or 1). */
typedef struct bcast {
  int rank;
  int64_t dims[TDM_MAX_RANK];
  int64_t strides[3][TDM_MAX_RANK];
  int n_in;
} bcast;

/* Dims of size 1 are dropped, and a dim is merged into the one after it when every input walks the
 * two as one (its stride over the outer dim is its stride over the inner one times the inner's
 * size, broadcast dims included), so rows are as long as the layouts allow: x [1, C, H, W] times
 * s [1, C, 1, 1] runs C rows of H·W against one value each, not C·H rows of W. */
static void bcast_init(bcast *b, const tdm_shape *out, const tdm_tensor *in, int n_in) {
  int64_t st[3][TDM_MAX_RANK];
  for (int j = 0; j < n_in; j++) tdm__broadcast_strides(in[j].shape, out, st[j]);
  b->rank = 0;
  b->n_in = n_in;
  for (int i = 0; i < out->rank; i++) {
    const int64_t n = out->dims[i];
    if (n == 1) continue;
    const int k = b->rank;
    bool merge = k > 0;
    for (int j = 0; j < n_in && merge; j++) merge = b->strides[j][k - 1] == st[j][i] * n;
    if (merge) {
      b->dims[k - 1] *= n;
      for (int j = 0; j < n_in; j++) b->strides[j][k - 1] = st[j][i];
    } else {
      b->dims[k] = n;
      for (int j = 0; j < n_in; j++) b->strides[j][k] = st[j][i];
      b->rank++;
    }
  }
}

/* Iterates rows: sets offs[j] for each row; returns false when done. */
typedef struct bcast_it {
  int64_t idx[TDM_MAX_RANK];
  int64_t offs[3];
  int64_t row; /* index of the current row */
  int64_t n_rows;
} bcast_it;

static int64_t bcast_rowlen(const bcast *b) { return b->rank ? b->dims[b->rank - 1] : 1; }
static int64_t bcast_inner(const bcast *b, int j) { return b->rank ? b->strides[j][b->rank - 1] : 0; }

static void bcast_begin(const bcast *b, bcast_it *it) {
  memset(it, 0, sizeof *it);
  int64_t rows = 1;
  for (int i = 0; i + 1 < b->rank; i++) rows *= b->dims[i];
  it->n_rows = bcast_rowlen(b) == 0 ? 0 : rows;
}

static void bcast_next(const bcast *b, bcast_it *it) {
  it->row++;
  for (int i = b->rank - 2; i >= 0; i--) {
    if (++it->idx[i] < b->dims[i]) {
      for (int j = 0; j < b->n_in; j++) it->offs[j] += b->strides[j][i];
      return;
    }
    for (int j = 0; j < b->n_in; j++) it->offs[j] -= b->strides[j][i] * (b->dims[i] - 1);
    it->idx[i] = 0;
  }
}

/* ---- binary ------------------------------------------------------------------------------- */

static float f32_binary(int code, float a, float b) {
  switch (code) {
    case TDM_B_ADD: return a + b;
    case TDM_B_SUB: return a - b;
    case TDM_B_MUL: return a * b;
    case TDM_B_DIV: return a / b;
    case TDM_B_MAX: return (a != a || b != b) ? NAN : (a > b ? a : b);
    case TDM_B_MIN: return (a != a || b != b) ? NAN : (a < b ? a : b);
    case TDM_B_POW: return powf(a, b);
    case TDM_B_REM: {
      float r = fmodf(a, b);
      return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    }
  }
  return 0;
}

/* y[i] = x0[i*sa] op x1[i*sb] for one row; sa, sb are 0 (broadcast) or 1. */
void tdm_f32_binary_row__scalar(int code, const float *x0, int64_t sa, const float *x1, int64_t sb, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = f32_binary(code, x0[i * sa], x1[i * sb]);
}


/* Integer division, exact over the whole int64 range. C's `/` and `%` are undefined (and trap in
 * wasm) for a zero divisor and for INT64_MIN / -1, so both are defined here and never reach the
 * hardware: x / 0 gives 0 (PyTorch raises ZeroDivisionError; NumPy also gives 0), x % 0 gives 0,
 * INT64_MIN / -1 wraps to INT64_MIN (like every other int64 op) and INT64_MIN % -1 is 0. */
static int64_t i64_trunc_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  return a / b;
}
static int64_t i64_floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
/* Remainder with the sign of the divisor (Python's and PyTorch's rule). */
static int64_t i64_remainder(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
/* a ** b by squaring, wrapping like PyTorch's int64 pow. A negative exponent gives the integer
 * part of 1 / a^|b| (PyTorch's CPU kernel): 1 for a = 1, ±1 for a = -1, else 0 (also for a = 0). */
static int64_t i64_pow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)a;
  for (uint64_t e = (uint64_t)b; e; e >>= 1) {
    if (e & 1) r *= x;
    x *= x;
  }
  return (int64_t)r;
}

static int64_t i64_binary(int code, int64_t a, int64_t b) {
  switch (code) {
    case TDM_B_ADD: return (int64_t)((uint64_t)a + (uint64_t)b); /* wraps like PyTorch */
    case TDM_B_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
    case TDM_B_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case TDM_B_MAX: return a > b ? a : b;
    case TDM_B_MIN: return a < b ? a : b;
    case TDM_B_REM: return i64_remainder(a, b);
    case TDM_B_POW: return i64_pow(a, b);
    case TDM_B_FLOORDIV: return i64_floor_div(a, b);
    case TDM_B_TRUNCDIV: return i64_trunc_div(a, b);
  }
  return 0;
}

static bool compare(int code, double a, double b) {
  switch (code) {
    case TDM_B_EQ: return a == b;
    case TDM_B_NE: return a != b;
    case TDM_B_LT: return a < b;
    case TDM_B_LE: return a <= b;
    case TDM_B_GT: return a > b;
    case TDM_B_GE: return a >= b;
    case TDM_B_AND: return a != 0 && b != 0;
    case TDM_B_OR: return a != 0 || b != 0;
  }
  return false;
}

static double load_as_double(const tdm_tensor *t, int64_t i) {
  switch (t->dtype) {
    case TDM_F32: return ((const float *)t->data)[i];
    case TDM_I64: return (double)((const int64_t *)t->data)[i];
    case TDM_I32: return ((const int32_t *)t->data)[i];
    default: return ((const uint8_t *)t->data)[i];
  }
}

static bool i64_compare(int code, int64_t a, int64_t b) {
  switch (code) {
    case TDM_B_EQ: return a == b;
    case TDM_B_NE: return a != b;
    case TDM_B_LT: return a < b;
    case TDM_B_LE: return a <= b;
    case TDM_B_GT: return a > b;
    case TDM_B_GE: return a >= b;
    case TDM_B_AND: return a != 0 && b != 0;
    case TDM_B_OR: return a != 0 || b != 0;
  }
  return false;
}

/* A float32 result of one row of BINARY_PARALLEL_MIN elements or more (SEANet's residual adds, [64,
 * 1920] a step) is split over threads; each element is computed alone, so any split gives the same
 * bits. */
#define BINARY_PARALLEL_MIN 65536

typedef struct {
  int code;
  const float *x0, *x1;
  int64_t sa, sb;
  float *y;
} binary_job;

static void binary_part(void *ctx, int64_t lo, int64_t hi, int t, void *ws) {
  const binary_job *j = ctx;
  (void)t, (void)ws;
  tdm_f32_binary_row(j->code, j->x0 + lo * j->sa, j->sa, j->x1 + lo * j->sb, j->sb, j->y + lo, hi - lo);
}

static tdm_status binary_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int code = op->def->code;
  bcast b;
  bcast_init(&b, out->shape, in, 2);
  bcast_it it;
  const int64_t n = bcast_rowlen(&b), sa = bcast_inner(&b, 0), sb = bcast_inner(&b, 1);
  bcast_begin(&b, &it);
  if (it.n_rows == 1 && n >= BINARY_PARALLEL_MIN && !is_compare(code) && out->dtype == TDM_F32) {
    binary_job j = {code, (const float *)in[0].data + it.offs[0], (const float *)in[1].data + it.offs[1], sa, sb, out->data};
    tdm__parallel(n, 64, binary_part, &j);
    return TDM_OK;
  }
  for (; it.row < it.n_rows; bcast_next(&b, &it)) {
    const int64_t o = it.row * n, oa = it.offs[0], ob = it.offs[1];
    if (is_compare(code)) {
      uint8_t *y = (uint8_t *)out->data + o;
      if (in[0].dtype == TDM_I64) {
        const int64_t *x0 = (const int64_t *)in[0].data + oa, *x1 = (const int64_t *)in[1].data + ob;
        for (int64_t i = 0; i < n; i++) y[i] = i64_compare(code, x0[i * sa], x1[i * sb]);
      } else if (in[0].dtype == TDM_I32) {
        const int32_t *x0 = (const int32_t *)in[0].data + oa, *x1 = (const int32_t *)in[1].data + ob;
        for (int64_t i = 0; i < n; i++) y[i] = i64_compare(code, x0[i * sa], x1[i * sb]);
      } else {
        for (int64_t i = 0; i < n; i++) y[i] = compare(code, load_as_double(&in[0], oa + i * sa), load_as_double(&in[1], ob + i * sb));
      }
    } else if (out->dtype == TDM_F32) {
      const float *x0 = (const float *)in[0].data + oa, *x1 = (const float *)in[1].data + ob;
      float *y = (float *)out->data + o;
      tdm_f32_binary_row(code, x0, sa, x1, sb, y, n);
    } else if (out->dtype == TDM_I32) {
      /* int32 through the exact int64 arithmetic, wrapped back to 32 bits like PyTorch (the
       * product of two int32 fits in int64; pow wraps mod 2^64, so mod 2^32 too) */
      const int32_t *x0 = (const int32_t *)in[0].data + oa, *x1 = (const int32_t *)in[1].data + ob;
      int32_t *y = (int32_t *)out->data + o;
      for (int64_t i = 0; i < n; i++) y[i] = (int32_t)(uint32_t)(uint64_t)i64_binary(code, x0[i * sa], x1[i * sb]);
    } else {
      const int64_t *x0 = (const int64_t *)in[0].data + oa, *x1 = (const int64_t *)in[1].data + ob;
      int64_t *y = (int64_t *)out->data + o;
      for (int64_t i = 0; i < n; i++) y[i] = i64_binary(code, x0[i * sa], x1[i * sb]);
    }
  }
  return TDM_OK;
}

static tdm_status check_arity(const tdm_op *op, uint32_t n_in, uint32_t n_out) {
  if (op->n_in != n_in || op->n_out != n_out)
    return tdm__rule(op, "takes %u inputs and %u outputs, the file gives %u and %u", n_in, n_out, op->n_in, op->n_out);
  return TDM_OK;
}

static tdm_status binary_check(const tdm_method *m, const tdm_op *op) {
  tdm_status s = check_arity(op, 2, 1);
  if (s) return s;
  const tdm_value *a = TDM_VAL(m, op, 0), *b = TDM_VAL(m, op, 1), *y = TDM_OUTVAL(m, op, 0);
  const int code = op->def->code;
  if (a->dtype != b->dtype)
    return tdm__rule(op, "inputs have dtypes %s and %s; they must match", tdm_dtype_name(a->dtype), tdm_dtype_name(b->dtype));
  if (is_compare(code)) {
    if (y->dtype != TDM_BOOL) return tdm__rule(op, "output must be bool");
  } else {
    /* true division is float32 only; floor and trunc division are integer only */
    const bool int_div = code == TDM_B_FLOORDIV || code == TDM_B_TRUNCDIV;
    const bool is_int = a->dtype == TDM_I64 || a->dtype == TDM_I32;
    bool ok = y->dtype == a->dtype && ((a->dtype == TDM_F32 && !int_div) || (is_int && code != TDM_B_DIV));
    if (!ok) return tdm__rule(op, "unsupported dtype %s", tdm_dtype_name(a->dtype));
  }
  tdm_shape bs;
  if (!tdm__broadcast(&a->shape, &b->shape, &bs)) return tdm__rule(op, "input shapes do not broadcast");
  if (!tdm__shape_eq(&bs, &y->shape)) return tdm__rule(op, "output shape is not the broadcast shape");
  return TDM_OK;
}

/* ---- unary -------------------------------------------------------------------------------- */

/* min(max(x + 3, 0), 6), NaN kept (std::max / std::min's order, as PyTorch's CPU kernels). */
static inline float hard_clamp(float x) {
  float t = x + 3.0f;
  t = t < 0.0f ? 0.0f : t;
  return 6.0f < t ? 6.0f : t;
}

static float f32_unary(int code, float x) {
  switch (code) {
    case TDM_U_NEG: return -x;
    case TDM_U_ABS: return fabsf(x);
    case TDM_U_EXP: return expf(x);
    case TDM_U_LOG: return logf(x);
    case TDM_U_SQRT: return sqrtf(x);
    case TDM_U_RSQRT: return 1.0f / sqrtf(x);
    case TDM_U_SIN: return sinf(x);
    case TDM_U_COS: return cosf(x);
    case TDM_U_TANH: return tanhf(x);
    case TDM_U_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case TDM_U_RELU: return x > 0 ? x : (x != x ? x : 0.0f);
    case TDM_U_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case TDM_U_GELU_TANH: {
      float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + tanhf(u));
    }
    case TDM_U_SILU: return x / (1.0f + expf(-x));
    case TDM_U_ERF: return erff(x);
    case TDM_U_RECIP: return 1.0f / x;
    case TDM_U_FLOOR: return floorf(x);
    case TDM_U_CEIL: return ceilf(x);
    case TDM_U_LOG1P: return log1pf(x);
    /* PyTorch's formulas, in its order: x · min(max(x + 3, 0), 6) / 6 and min(max(x + 3, 0), 6) / 6
     * (NaN propagates through the clamp) */
    case TDM_U_HARDSWISH: return x * hard_clamp(x) / 6.0f;
    case TDM_U_HARDSIGMOID: return hard_clamp(x) / 6.0f;
  }
  return 0;
}

void tdm_f32_unary__scalar(int code, const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = f32_unary(code, x[i]);
}


static tdm_status unary_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int code = op->def->code;
  const int64_t n = out->numel;
  if (code == TDM_U_NOT) {
    uint8_t *y = out->data;
    for (int64_t i = 0; i < n; i++) y[i] = load_as_double(&in[0], i) == 0;
  } else if (out->dtype == TDM_F32) {
    const float *x = in[0].data;
    float *y = out->data;
    tdm_f32_unary(code, x, y, n);
  } else if (out->dtype == TDM_I32) {
    const int32_t *x = in[0].data;
    int32_t *y = out->data;
    for (int64_t i = 0; i < n; i++) {
      const int32_t v = x[i];
      y[i] = code == TDM_U_NEG ? (int32_t)(0 - (uint32_t)v)
          : code == TDM_U_ABS  ? (v < 0 ? (int32_t)(0 - (uint32_t)v) : v)
          : code == TDM_U_RELU ? (v > 0 ? v : 0)
                               : v; /* floor, ceil of integers */
    }
  } else {
    const int64_t *x = in[0].data;
    int64_t *y = out->data;
    for (int64_t i = 0; i < n; i++) {
      int64_t v = x[i];
      y[i] = code == TDM_U_NEG ? (int64_t)(0 - (uint64_t)v)
          : code == TDM_U_ABS  ? (v < 0 ? (int64_t)(0 - (uint64_t)v) : v)
          : code == TDM_U_RELU ? (v > 0 ? v : 0)
                               : v; /* floor, ceil of integers */
    }
  }
  return TDM_OK;
}

static tdm_status unary_check(const tdm_method *m, const tdm_op *op) {
  tdm_status s = check_arity(op, 1, 1);
  if (s) return s;
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  const int code = op->def->code;
  if (!tdm__shape_eq(&x->shape, &y->shape)) return tdm__rule(op, "output shape differs from input shape");
  if (code == TDM_U_NOT) return y->dtype == TDM_BOOL ? TDM_OK : tdm__rule(op, "output must be bool");
  if (x->dtype != y->dtype) return tdm__rule(op, "output dtype differs from input dtype");
  bool int_ok = code == TDM_U_NEG || code == TDM_U_ABS || code == TDM_U_RELU || code == TDM_U_FLOOR || code == TDM_U_CEIL;
  if (x->dtype == TDM_F32 || ((x->dtype == TDM_I64 || x->dtype == TDM_I32) && int_ok)) return TDM_OK;
  return tdm__rule(op, "unsupported dtype %s", tdm_dtype_name(x->dtype));
}

/* ---- where -------------------------------------------------------------------------------- */

/* A row of 4-byte elements (float32, int32) without a memcpy call per element (memcpy of a size
 * known only at run time is a call in wasm, which costs more than the element's copy). */
static void where_row32(int64_t n, const uint8_t *c, int64_t sc, const uint32_t *x, int64_t sa, const uint32_t *z, int64_t sb,
                        uint32_t *y) {
  for (int64_t i = 0; i < n; i++) y[i] = c[i * sc] ? x[i * sa] : z[i * sb];
}

static tdm_status where_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  (void)op;
  bcast b;
  bcast_init(&b, out->shape, in, 3);
  bcast_it it;
  const int64_t n = bcast_rowlen(&b), sc = bcast_inner(&b, 0), sa = bcast_inner(&b, 1), sb = bcast_inner(&b, 2);
  const size_t es = tdm_dtype_size(out->dtype);
  for (bcast_begin(&b, &it); it.row < it.n_rows; bcast_next(&b, &it)) {
    const uint8_t *c = (const uint8_t *)in[0].data + it.offs[0];
    const uint8_t *x = (const uint8_t *)in[1].data + it.offs[1] * es;
    const uint8_t *z = (const uint8_t *)in[2].data + it.offs[2] * es;
    uint8_t *y = (uint8_t *)out->data + it.row * n * es;
    if (sc == 0 && (c[0] ? sa : sb) == 1) memmove(y, c[0] ? x : z, (size_t)n * es); /* one condition for the row, a whole row chosen */
    else if (es == 4)
      where_row32(n, c, sc, (const uint32_t *)(const void *)x, sa, (const uint32_t *)(const void *)z, sb, (uint32_t *)(void *)y);
    else
      for (int64_t i = 0; i < n; i++) memcpy(y + i * es, c[i * sc] ? x + i * sa * es : z + i * sb * es, es);
  }
  return TDM_OK;
}

static tdm_status where_check(const tdm_method *m, const tdm_op *op) {
  tdm_status s = check_arity(op, 3, 1);
  if (s) return s;
  const tdm_value *c = TDM_VAL(m, op, 0), *a = TDM_VAL(m, op, 1), *b = TDM_VAL(m, op, 2), *y = TDM_OUTVAL(m, op, 0);
  if (c->dtype != TDM_BOOL) return tdm__rule(op, "condition must be bool");
  if (a->dtype != b->dtype || a->dtype != y->dtype) return tdm__rule(op, "value dtypes must match");
  tdm_shape t, u;
  if (!tdm__broadcast(&c->shape, &a->shape, &t) || !tdm__broadcast(&t, &b->shape, &u) || !tdm__shape_eq(&u, &y->shape))
    return tdm__rule(op, "shapes do not broadcast to the output shape");
  return TDM_OK;
}

/* ---- cast, fill, copy --------------------------------------------------------------------- */

static int64_t f32_to_i64(float x) {
  /* Truncates toward zero like PyTorch; NaN and out-of-range values give INT64_MIN (x86's
   * answer) instead of undefined behaviour. */
  if (!(x > -9.2233720368547758e18f && x < 9.2233720368547758e18f)) return INT64_MIN;
  return (int64_t)x;
}

static int32_t f32_to_i32(float x) {
  /* The same rule for int32: NaN and values outside the int32 range give INT32_MIN. */
  if (!(x > -2147483904.0f && x < 2147483648.0f)) return INT32_MIN;
  return (int32_t)x;
}

/* Element i of an integer or bool tensor (float32: truncated as f32_to_i64). */
static int64_t load_as_i64(const tdm_tensor *t, int64_t i) {
  switch (t->dtype) {
    case TDM_F32: return f32_to_i64(((const float *)t->data)[i]);
    case TDM_I64: return ((const int64_t *)t->data)[i];
    case TDM_I32: return ((const int32_t *)t->data)[i];
    default: return ((const uint8_t *)t->data)[i];
  }
}

/* Any dtype to any other: float32 → integers truncates (out of range and NaN: the type's minimum),
 * int64 → int32 wraps (keeps the low 32 bits, like PyTorch), anything → bool is x != 0. */
static tdm_status cast_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  (void)op;
  const int64_t n = out->numel;
  const bool from_float = in[0].dtype == TDM_F32;
  for (int64_t i = 0; i < n; i++) {
    switch (out->dtype) {
      case TDM_F32: ((float *)out->data)[i] = from_float ? ((const float *)in[0].data)[i] : (float)load_as_i64(&in[0], i); break;
      case TDM_I64: ((int64_t *)out->data)[i] = load_as_i64(&in[0], i); break;
      case TDM_I32:
        ((int32_t *)out->data)[i] =
            from_float ? f32_to_i32(((const float *)in[0].data)[i]) : (int32_t)(uint32_t)(uint64_t)load_as_i64(&in[0], i);
        break;
      default: ((uint8_t *)out->data)[i] = from_float ? ((const float *)in[0].data)[i] != 0 : load_as_i64(&in[0], i) != 0;
    }
  }
  return TDM_OK;
}

static tdm_status cast_check(const tdm_method *m, const tdm_op *op) {
  tdm_status s = check_arity(op, 1, 1);
  if (s) return s;
  if (!tdm__shape_eq(&TDM_VAL(m, op, 0)->shape, &TDM_OUTVAL(m, op, 0)->shape))
    return tdm__rule(op, "output shape differs from input shape");
  return TDM_OK;
}

/* fill: out[...] = fattr[0] (float32) or iattr[0] (int64, int32, bool). */
static tdm_status fill_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  (void)in;
  const int64_t n = out->numel;
  if (out->dtype == TDM_F32) {
    float v = (float)op->fattr[0], *y = out->data;
    for (int64_t i = 0; i < n; i++) y[i] = v;
  } else if (out->dtype == TDM_I64) {
    int64_t v = op->iattr[0], *y = out->data;
    for (int64_t i = 0; i < n; i++) y[i] = v;
  } else if (out->dtype == TDM_I32) {
    int32_t v = (int32_t)op->iattr[0], *y = out->data;
    for (int64_t i = 0; i < n; i++) y[i] = v;
  } else {
    memset(out->data, op->iattr[0] != 0, (size_t)n);
  }
  return TDM_OK;
}

static tdm_status fill_check(const tdm_method *m, const tdm_op *op) {
  tdm_status s = check_arity(op, 0, 1);
  if (s) return s;
  const bool f = TDM_OUTVAL(m, op, 0)->dtype == TDM_F32;
  if (f ? op->n_fattr != 1 || op->n_iattr != 0 : op->n_iattr != 1 || op->n_fattr != 0)
    return tdm__rule(op, "takes one value attribute of the output's dtype");
  if (TDM_OUTVAL(m, op, 0)->dtype == TDM_I32 && (op->iattr[0] < INT32_MIN || op->iattr[0] > INT32_MAX))
    return tdm__rule(op, "value out of the int32 range");
  return TDM_OK;
}

/* copy: same dtype and element count; the shape may differ (a reshape). */
static tdm_status copy_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  (void)op;
  memcpy(out->data, in[0].data, (size_t)out->numel * tdm_dtype_size(out->dtype));
  return TDM_OK;
}

static tdm_status copy_check(const tdm_method *m, const tdm_op *op) {
  tdm_status s = check_arity(op, 1, 1);
  if (s) return s;
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  if (x->dtype != y->dtype || x->numel != y->numel) return tdm__rule(op, "input and output must have the same dtype and element count");
  return TDM_OK;
}

/* isnan, isinf, isfinite: x f32 → y bool, x's shape (code 0, 1, 2). */
static tdm_status classify_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const float *x = in[0].data;
  uint8_t *y = out->data;
  const int code = op->def->code;
  for (int64_t i = 0; i < out->numel; i++) {
    const float v = x[i];
    y[i] = code == 0 ? v != v : code == 1 ? (v == INFINITY || v == -INFINITY) : (v == v && v != INFINITY && v != -INFINITY);
  }
  return TDM_OK;
}

static tdm_status classify_check(const tdm_method *m, const tdm_op *op) {
  tdm_status s = check_arity(op, 1, 1);
  if (s) return s;
  const tdm_value *x = TDM_VAL(m, op, 0), *y = TDM_OUTVAL(m, op, 0);
  if (x->dtype != TDM_F32 || y->dtype != TDM_BOOL) return tdm__rule(op, "takes float32, gives bool");
  if (!tdm__shape_eq(&x->shape, &y->shape)) return tdm__rule(op, "output shape differs from input shape");
  return TDM_OK;
}

#define BIN(name, code) TDM_OP(name, code, binary_check, binary_run)
#define UN(name, code) TDM_OP(name, code, unary_check, unary_run)

const tdm_opdef tdm__elementwise_ops[] = {
    BIN(add, TDM_B_ADD),
    BIN(sub, TDM_B_SUB),
    BIN(mul, TDM_B_MUL),
    BIN(div, TDM_B_DIV),
    BIN(maximum, TDM_B_MAX),
    BIN(minimum, TDM_B_MIN),
    BIN(pow, TDM_B_POW),
    BIN(remainder, TDM_B_REM),
    BIN(eq, TDM_B_EQ),
    BIN(ne, TDM_B_NE),
    BIN(lt, TDM_B_LT),
    BIN(le, TDM_B_LE),
    BIN(gt, TDM_B_GT),
    BIN(ge, TDM_B_GE),
    BIN(logical_and, TDM_B_AND),
    BIN(logical_or, TDM_B_OR),
    BIN(floor_divide, TDM_B_FLOORDIV),
    BIN(trunc_divide, TDM_B_TRUNCDIV),
    UN(neg, TDM_U_NEG),
    UN(abs, TDM_U_ABS),
    UN(exp, TDM_U_EXP),
    UN(log, TDM_U_LOG),
    UN(sqrt, TDM_U_SQRT),
    UN(rsqrt, TDM_U_RSQRT),
    UN(sin, TDM_U_SIN),
    UN(cos, TDM_U_COS),
    UN(tanh, TDM_U_TANH),
    UN(sigmoid, TDM_U_SIGMOID),
    UN(relu, TDM_U_RELU),
    UN(gelu, TDM_U_GELU),
    UN(gelu_tanh, TDM_U_GELU_TANH),
    UN(silu, TDM_U_SILU),
    UN(erf, TDM_U_ERF),
    UN(reciprocal, TDM_U_RECIP),
    UN(floor, TDM_U_FLOOR),
    UN(ceil, TDM_U_CEIL),
    UN(logical_not, TDM_U_NOT),
    UN(log1p, TDM_U_LOG1P),
    UN(hardswish, TDM_U_HARDSWISH),
    UN(hardsigmoid, TDM_U_HARDSIGMOID),
    TDM_OP(where, 0, where_check, where_run),
    TDM_OP(cast, 0, cast_check, cast_run),
    TDM_OP(fill, 0, fill_check, fill_run),
    TDM_OP(copy, 0, copy_check, copy_run),
    TDM_OP(isnan, 0, classify_check, classify_run),
    TDM_OP(isinf, 1, classify_check, classify_run),
    TDM_OP(isfinite, 2, classify_check, classify_run),
    TDM_OP_END,
};
