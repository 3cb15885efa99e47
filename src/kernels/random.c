/* random.c — random sampling from a counter-based generator whose key and counter are program state
 * (the `__rng__` slot, int64 [2] = [seed, calls]): Philox4x32-10 (Salmon et al., "Parallel random
 * numbers: as easy as 1, 2, 3", SC 2011), written from the paper's round function. Every draw is a
 * pure function of (seed, calls, stream, block): the ops read the slot and never write it; the
 * exporter advances `calls` by one per call of a method that draws, in the state write-back at the
 * end of the method. docs/ops.md ("Random sampling") specifies the stream bit for bit, so another
 * implementation reproduces it; the float math is done in double with +, -, *, / and sqrt only
 * (correctly rounded in IEEE 754, the same in C, wasm and Python), never libm's log/sin/cos, whose
 * last bits differ between libraries. */
#include "../ops.h"
#include "../util.h"
#include "random.h"

#include <math.h>
#include <string.h>

/* No fused multiply-add anywhere in this file: the stream must round every product. */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u /* golden ratio */
#define PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

void tdm__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++) {
    if (round > 0) {
      k0 += PHILOX_W0;
      k1 += PHILOX_W1;
    }
    const uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1;
    const uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* Block `block` of stream `stream` for the rng state [seed, calls]. */
static void draw_block(const int64_t *rng, uint32_t stream, uint64_t block, uint32_t out[4]) {
  const uint64_t seed = (uint64_t)rng[0], calls = (uint64_t)rng[1];
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  const uint32_t ctr[4] = {(uint32_t)block, stream, (uint32_t)calls, (uint32_t)(calls >> 32)};
  tdm__philox4x32_10(ctr, key, out);
}

/* U in [0, 1): the top 24 bits of x over 2^24 (exact in float32 and double). */
static double unit24(uint32_t x) { return (double)(x >> 8) * (1.0 / 16777216.0); }

/* ln(k * 2^-24) for an integer k in [1, 2^24]: k = m * 2^e with m in [sqrt(1/2), sqrt(2)],
 * ln m = 2 atanh(s) with s = (m - 1) / (m + 1), its series to s^13, Horner from the inside. */
static double ln_unit(uint32_t k) {
  int e = 0;
  while ((k >> (e + 1)) != 0) e++; /* e = floor(log2 k) */
  double m = (double)k / (double)(1u << e);
  if (m > 1.4142135623730951) {
    m = m / 2.0;
    e++;
  }
  const double s = (m - 1.0) / (m + 1.0), s2 = s * s;
  const double t = 1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0 + s2 * (1.0 / 11.0 + s2 * (1.0 / 13.0)))));
  const double ln_m = 2.0 * s + 2.0 * s * (s2 * t);
  return (double)(e - 24) * 0.6931471805599453 + ln_m;
}

/* cos and sin of 2 pi j / 2^24 for j in [0, 2^24): quadrant q = j >> 22, x = (j mod 2^22) / 2^22 * pi/2
 * in [0, pi/2), Taylor series to x^15 (sin) and x^16 (cos), then rotated by q quarter turns. */
static void cos_sin_turn(uint32_t j, double *c_out, double *s_out) {
  const uint32_t q = j >> 22;
  const double x = (double)(j & 0x3fffffu) * (1.0 / 4194304.0) * 1.5707963267948966, x2 = x * x;
  const double s = x *
      (1.0 +
       x2 *
           (-1.0 / 6.0 +
            x2 *
                (1.0 / 120.0 +
                 x2 *
                     (-1.0 / 5040.0 +
                      x2 * (1.0 / 362880.0 + x2 * (-1.0 / 39916800.0 + x2 * (1.0 / 6227020800.0 + x2 * (-1.0 / 1307674368000.0))))))));
  const double c = 1.0 +
      x2 *
          (-1.0 / 2.0 +
           x2 *
               (1.0 / 24.0 +
                x2 *
                    (-1.0 / 720.0 +
                     x2 *
                         (1.0 / 40320.0 +
                          x2 *
                              (-1.0 / 3628800.0 +
                               x2 * (1.0 / 479001600.0 + x2 * (-1.0 / 87178291200.0 + x2 * (1.0 / 20922789888000.0))))))));
  switch (q) {
    case 0:
      *c_out = c;
      *s_out = s;
      break;
    case 1:
      *c_out = -s;
      *s_out = c;
      break;
    case 2:
      *c_out = -c;
      *s_out = -s;
      break;
    default:
      *c_out = s;
      *s_out = -c;
      break;
  }
}

/* Two standard normals from two words (Box-Muller): U1 = ((a >> 8) + 1) / 2^24 in (0, 1],
 * r = sqrt(-2 ln U1), theta = 2 pi (b >> 8) / 2^24; z0 = r cos theta, z1 = r sin theta. */
static void box_muller(uint32_t a, uint32_t b, double *z0, double *z1) {
  const double r = sqrt(-2.0 * ln_unit((a >> 8) + 1u));
  double c, s;
  cos_sin_turn(b >> 8, &c, &s);
  *z0 = r * c;
  *z1 = r * s;
}

/* random: rng int64 [2] → y; iattr = [kind, stream, lo, hi], fattr = [a, b]. kind 0 (uniform):
 * y float32 = a + (b - a) U; kind 1 (normal): y float32 = a + b Z; kind 2 (integers): y int64 or
 * int32 = lo + (64 random bits mod (hi - lo)), hi > lo. Element i of y uses block i / 4 (word i % 4;
 * normal: the Box-Muller pair of words 2 ((i % 4) / 2), cos for even i, sin for odd) or, for kind
 * 2, block i / 2 (words 2 (i % 2) low, 2 (i % 2) + 1 high). */
enum { RANDOM_UNIFORM = 0, RANDOM_NORMAL = 1, RANDOM_INTEGERS = 2 };

static tdm_status random_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t *rng = (const int64_t *)in[0].data, n = out->numel;
  const int64_t kind = op->iattr[0];
  const uint32_t stream = (uint32_t)op->iattr[1];
  uint32_t w[4];
  if (kind == RANDOM_INTEGERS) {
    const int64_t lo = op->iattr[2];
    const uint64_t range = (uint64_t)op->iattr[3] - (uint64_t)lo;
    for (int64_t i = 0; i < n; i++) {
      if (i % 2 == 0) draw_block(rng, stream, (uint64_t)(i / 2), w);
      const int h = (int)(i % 2) * 2;
      const uint64_t bits = (uint64_t)w[h] | (uint64_t)w[h + 1] << 32;
      const int64_t v = (int64_t)((uint64_t)lo + bits % range);
      if (out->dtype == TDM_I64) ((int64_t *)out->data)[i] = v;
      else ((int32_t *)out->data)[i] = (int32_t)v;
    }
    return TDM_OK;
  }
  const double a = op->fattr[0], b = op->fattr[1];
  float *y = (float *)out->data;
  for (int64_t blk = 0; blk * 4 < n; blk++) {
    draw_block(rng, stream, (uint64_t)blk, w);
    double v[4];
    if (kind == RANDOM_UNIFORM) {
      for (int k = 0; k < 4; k++) v[k] = a + (b - a) * unit24(w[k]);
    } else {
      double z[4];
      box_muller(w[0], w[1], &z[0], &z[1]);
      box_muller(w[2], w[3], &z[2], &z[3]);
      for (int k = 0; k < 4; k++) v[k] = a + b * z[k];
    }
    for (int k = 0; k < 4 && blk * 4 + k < n; k++) y[blk * 4 + k] = (float)v[k];
  }
  return TDM_OK;
}

static tdm_status rng_input_check(const tdm_method *m, const tdm_op *op) {
  const tdm_value *r = TDM_VAL(m, op, 0);
  if (r->dtype != TDM_I64 || r->shape.rank != 1 || r->shape.dims[0] != 2) return tdm__rule(op, "rng must be int64 [2] (seed, calls)");
  return TDM_OK;
}

static tdm_status random_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 1 || op->n_out != 1 || op->n_iattr != 4 || op->n_fattr != 2)
    return tdm__rule(op, "takes rng, 1 output, [kind, stream, lo, hi], [a, b]");
  tdm_status s = rng_input_check(m, op);
  if (s != TDM_OK) return s;
  const tdm_value *y = TDM_OUTVAL(m, op, 0);
  const int64_t kind = op->iattr[0];
  if (op->iattr[1] < 0 || op->iattr[1] > (int64_t)UINT32_MAX) return tdm__rule(op, "stream must be in [0, 2^32)");
  if (y->numel > ((int64_t)1 << 33)) return tdm__rule(op, "at most 2^33 elements per op");
  if (kind == RANDOM_UNIFORM || kind == RANDOM_NORMAL) {
    if (y->dtype != TDM_F32) return tdm__rule(op, "uniform and normal give float32");
    if (!isfinite(op->fattr[0]) || !isfinite(op->fattr[1])) return tdm__rule(op, "a and b must be finite");
  } else if (kind == RANDOM_INTEGERS) {
    if (y->dtype != TDM_I64 && y->dtype != TDM_I32) return tdm__rule(op, "integers give int64 or int32");
    if (op->iattr[3] <= op->iattr[2]) return tdm__rule(op, "hi must be above lo");
    if (y->dtype == TDM_I32 && (op->iattr[2] < INT32_MIN || op->iattr[3] - 1 > INT32_MAX)) return tdm__rule(op, "[lo, hi) must fit int32");
  } else {
    return tdm__rule(op, "kind must be 0 (uniform), 1 (normal) or 2 (integers)");
  }
  return TDM_OK;
}

/* multinomial: rng int64 [2], w float32 [n] or [B, n] → idx int64 [k] or [B, k]; iattr = [stream,
 * replacement]. Sample s of row r draws U = unit24 of word e % 4 of block e / 4, e = r k + s, and
 * takes the first index i (among those not yet taken, without replacement) whose running sum of
 * weights (double, in index order) exceeds U times their total; the last such index with a positive
 * weight when rounding leaves none. Fails (TDM_ERR_INVALID_ARGUMENT, nothing written) when a weight
 * is negative or not finite, a row sums to 0, or, without replacement, a row has fewer than k
 * positive weights. */
static tdm_status multinomial_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out) {
  const int64_t *rng = (const int64_t *)in[0].data;
  const float *w = (const float *)in[1].data;
  const tdm_shape *ws = in[1].shape;
  const int64_t n = ws->dims[ws->rank - 1], rows = ws->rank == 2 ? ws->dims[0] : 1, k = out->shape->dims[out->shape->rank - 1];
  const bool replace = op->iattr[1] != 0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t positive = 0;
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
      const float x = w[r * n + i];
      if (!(x >= 0.0f) || isinf(x))
        return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "multinomial: weight %lld of row %lld is %g; weights must be finite and >= 0",
                         (long long)i, (long long)r, (double)x);
      positive += x > 0.0f;
      total += x;
    }
    if (!(total > 0)) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "multinomial: the weights of row %lld sum to 0", (long long)r);
    if (!replace && positive < k)
      return tdm__fail(TDM_ERR_INVALID_ARGUMENT,
                       "multinomial: row %lld has %lld positive weights, fewer than the %lld samples "
                       "drawn without replacement",
                       (long long)r, (long long)positive, (long long)k);
  }
  int64_t *idx = (int64_t *)out->data;
  uint32_t blk[4];
  int64_t have = -1; /* the block in blk */
  for (int64_t r = 0; r < rows; r++) {
    const float *wr = w + r * n;
    int64_t *ir = idx + r * k;
    for (int64_t s = 0; s < k; s++) {
      const int64_t e = r * k + s;
      if (e / 4 != have) {
        have = e / 4;
        draw_block(rng, (uint32_t)op->iattr[0], (uint64_t)have, blk);
      }
      double total = 0;
      for (int64_t i = 0; i < n; i++) {
        bool taken = false;
        for (int64_t t = 0; t < s && !replace && !taken; t++) taken = ir[t] == i;
        if (!taken) total += wr[i];
      }
      const double u = unit24(blk[e % 4]) * total;
      double acc = 0;
      int64_t pick = -1, last = -1;
      for (int64_t i = 0; i < n && pick < 0; i++) {
        bool taken = false;
        for (int64_t t = 0; t < s && !replace && !taken; t++) taken = ir[t] == i;
        if (taken || !(wr[i] > 0.0f)) continue;
        last = i;
        acc += wr[i];
        if (acc > u) pick = i;
      }
      ir[s] = pick >= 0 ? pick : last;
    }
  }
  return TDM_OK;
}

static tdm_status multinomial_check(const tdm_method *m, const tdm_op *op) {
  if (op->n_in != 2 || op->n_out != 1 || op->n_iattr != 2 || op->n_fattr != 0)
    return tdm__rule(op, "takes rng, weights, 1 output, [stream, replacement]");
  tdm_status s = rng_input_check(m, op);
  if (s != TDM_OK) return s;
  const tdm_value *w = TDM_VAL(m, op, 1), *y = TDM_OUTVAL(m, op, 0);
  if (op->iattr[0] < 0 || op->iattr[0] > (int64_t)UINT32_MAX) return tdm__rule(op, "stream must be in [0, 2^32)");
  if (op->iattr[1] != 0 && op->iattr[1] != 1) return tdm__rule(op, "replacement must be 0 or 1");
  if (w->dtype != TDM_F32 || w->shape.rank < 1 || w->shape.rank > 2 || w->shape.dims[w->shape.rank - 1] < 1)
    return tdm__rule(op, "weights must be float32 [n] or [B, n], n >= 1");
  if (y->dtype != TDM_I64 || y->shape.rank != w->shape.rank || (w->shape.rank == 2 && y->shape.dims[0] != w->shape.dims[0]))
    return tdm__rule(op, "indices must be int64 [k] or [B, k] (the weights' rows)");
  const int64_t k = y->shape.dims[y->shape.rank - 1];
  if (op->iattr[1] == 0 && k > w->shape.dims[w->shape.rank - 1]) return tdm__rule(op, "without replacement k must be at most n");
  if (y->numel > ((int64_t)1 << 33)) return tdm__rule(op, "at most 2^33 samples per op");
  return TDM_OK;
}

const tdm_opdef tdm__random_ops[] = {
    TDM_OP(random, 0, random_check, random_run),
    TDM_OP(multinomial, 0, multinomial_check, multinomial_run),
    TDM_OP_END,
};
