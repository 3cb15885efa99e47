/* elementwise_simd128.c — the SIMD128 variants of the elementwise kernels (declared in variants.h
 * beside their scalar references in elementwise.c, which also run their tails). config.c picks
 * them where the build has SIMD128; tests/c/kernel_selftest.c compares them with the references. */
#include "variants.h"

#if TDM_SIMD128
#include "vec.h"

static inline v128_t f32x4_binary(int code, v128_t a, v128_t b) {
  switch (code) {
    case TDM_B_ADD: return wasm_f32x4_add(a, b);
    case TDM_B_SUB: return wasm_f32x4_sub(a, b);
    case TDM_B_MUL: return wasm_f32x4_mul(a, b);
    case TDM_B_DIV: return wasm_f32x4_div(a, b);
    /* a > b ? a : b (pmax(b, a)), and NaN where either is NaN: the scalar results bit for bit up
     * to the NaN's payload, signed zeros included (f32x4.max would give +0 for max(+0, -0) and
     * max(-0, +0); the scalar kernel and PyTorch give the second operand) */
    case TDM_B_MAX: return wasm_v128_or(wasm_f32x4_pmax(b, a), wasm_v128_or(wasm_f32x4_ne(a, a), wasm_f32x4_ne(b, b)));
    default: return wasm_v128_or(wasm_f32x4_pmin(b, a), wasm_v128_or(wasm_f32x4_ne(a, a), wasm_f32x4_ne(b, b)));
  }
}

/* The arithmetic ops four lanes at a time; pow and remainder (and the tail) stay scalar. */
void tdm_f32_binary_row__simd128(int code, const float *x0, int64_t sa, const float *x1, int64_t sb, float *y, int64_t n) {
  int64_t i = 0;
  if (code <= TDM_B_MIN) {
    const v128_t ba = wasm_f32x4_splat(x0[0]), bb = wasm_f32x4_splat(x1[0]);
    for (; i + 4 <= n; i += 4) {
      const v128_t a = sa ? wasm_v128_load(x0 + i) : ba, b = sb ? wasm_v128_load(x1 + i) : bb;
      wasm_v128_store(y + i, f32x4_binary(code, a, b));
    }
  }
  tdm_f32_binary_row__scalar(code, x0 + i * sa, sa, x1 + i * sb, sb, y + i, n - i);
}

/* Four lanes at a time: the exact ops (neg, abs, relu, sqrt, rsqrt, reciprocal, floor, ceil,
 * hardswish, hardsigmoid give the scalar results bit for bit) and the exp family and erf (tdm_f32x4_exp, tdm_f32x4_erf, within
 * their documented error; gelu_tanh as x / (1 + e^-2u), which is 0.5 x (1 + tanh u)). Other codes return false (scalar: log, sin, cos, log1p). */
bool tdm_f32_unary__simd128(int code, const float *x, float *y, int64_t n) {
  const v128_t one = wasm_f32x4_splat(1.0f), two = wasm_f32x4_splat(2.0f), zero = wasm_f32x4_splat(0.0f);
  const v128_t three = wasm_f32x4_splat(3.0f), six = wasm_f32x4_splat(6.0f);
  int64_t i = 0;
#define UNARY_LOOP(EXPR) \
  for (; i + 4 <= n; i += 4) { \
    const v128_t v = wasm_v128_load(x + i); \
    wasm_v128_store(y + i, (EXPR)); \
  } \
  break
  switch (code) {
    case TDM_U_NEG: UNARY_LOOP(wasm_f32x4_neg(v));
    case TDM_U_ABS: UNARY_LOOP(wasm_f32x4_abs(v));
    case TDM_U_RELU: /* x > 0 or NaN: x; else 0 */ UNARY_LOOP(wasm_v128_and(v, wasm_v128_or(wasm_f32x4_gt(v, zero), wasm_f32x4_ne(v, v))));
    case TDM_U_SQRT: UNARY_LOOP(wasm_f32x4_sqrt(v));
    case TDM_U_RSQRT: UNARY_LOOP(wasm_f32x4_div(one, wasm_f32x4_sqrt(v)));
    case TDM_U_RECIP: UNARY_LOOP(wasm_f32x4_div(one, v));
    case TDM_U_FLOOR: UNARY_LOOP(wasm_f32x4_floor(v));
    case TDM_U_CEIL: UNARY_LOOP(wasm_f32x4_ceil(v));
    case TDM_U_EXP: UNARY_LOOP(tdm_f32x4_exp(v));
    case TDM_U_ERF: UNARY_LOOP(tdm_f32x4_erf(v));
    case TDM_U_GELU: /* 0.5 x (1 + erf(x / sqrt 2)) */
      UNARY_LOOP(wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_splat(0.5f), v),
                                wasm_f32x4_add(one, tdm_f32x4_erf(wasm_f32x4_mul(v, wasm_f32x4_splat(0.70710678118654752f))))));
    case TDM_U_TANH: /* 1 - 2 / (e^2x + 1); x itself where |x| < 4e-4 (tanh x = x (1 - x²/3 ...): keeps -0 and tiny x) */
      UNARY_LOOP(wasm_v128_bitselect(v,
                                     wasm_f32x4_sub(one, wasm_f32x4_div(two, wasm_f32x4_add(tdm_f32x4_exp(wasm_f32x4_mul(v, two)), one))),
                                     wasm_f32x4_lt(wasm_f32x4_abs(v), wasm_f32x4_splat(4e-4f))));
    case TDM_U_GELU_TANH: /* 0.5 x (1 + tanh u) = x / (1 + e^-2u), u = sqrt(2/pi) (x + 0.044715 x^3) as the scalar kernel's u */
      UNARY_LOOP(wasm_f32x4_div(
          v,
          wasm_f32x4_add(
              one,
              tdm_f32x4_exp(wasm_f32x4_mul(
                  wasm_f32x4_splat(-2.0f),
                  wasm_f32x4_mul(
                      wasm_f32x4_splat(0.7978845608028654f),
                      wasm_f32x4_add(v, wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_splat(0.044715f), v), v), v))))))));
    case TDM_U_SIGMOID: UNARY_LOOP(wasm_f32x4_div(one, wasm_f32x4_add(one, tdm_f32x4_exp(wasm_f32x4_neg(v)))));
    case TDM_U_SILU: UNARY_LOOP(wasm_f32x4_div(v, wasm_f32x4_add(one, tdm_f32x4_exp(wasm_f32x4_neg(v)))));
    /* pmax(t, 0) = t < 0 ? 0 : t and pmin(t, 6) = 6 < t ? 6 : t: the scalar clamp, NaN kept; exact */
    case TDM_U_HARDSWISH:
      UNARY_LOOP(wasm_f32x4_div(wasm_f32x4_mul(v, wasm_f32x4_pmin(wasm_f32x4_pmax(wasm_f32x4_add(v, three), zero), six)), six));
    case TDM_U_HARDSIGMOID: UNARY_LOOP(wasm_f32x4_div(wasm_f32x4_pmin(wasm_f32x4_pmax(wasm_f32x4_add(v, three), zero), six), six));
    default: return false;
  }
#undef UNARY_LOOP
  tdm_f32_unary__scalar(code, x + i, y + i, n - i);
  return true;
}

/* ELU in one pass, 4 lanes in registers: minimum (f32x4 pmin with NaN passed, as
 * tdm_f32_binary_row's), exp (tdm_f32x4_exp_nonpos: tdm_f32x4_exp's floats for the x that can
 * change the result), minus 1, maximum (as binary_row's): the chain's floats; the last n % 4 by the
 * chain itself. */
void tdm_f32_elu__simd128(const float *x, float *y, int64_t n) {
  const v128_t zero = wasm_f32x4_splat(0.0f), one = wasm_f32x4_splat(1.0f);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const v128_t v = wasm_v128_load(x + i);
    const v128_t nan = wasm_f32x4_ne(v, v);
    const v128_t mn = wasm_v128_or(wasm_f32x4_pmin(zero, v), nan);
    const v128_t e = wasm_f32x4_sub(tdm_f32x4_exp_nonpos(mn), one);
    wasm_v128_store(y + i, wasm_v128_or(wasm_f32x4_pmax(e, v), wasm_v128_or(nan, wasm_f32x4_ne(e, e))));
  }
  if (i < n) tdm_f32_elu__chain(x + i, y + i, n - i);
}

#endif
