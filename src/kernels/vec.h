/* vec.h — small vector kernels shared by ops (attention, conv): a scalar reference and, where
 * TDM_SIMD128 (simd.h: wasm, and native through SIMDe), a SIMD128 variant, both inline. Checked by
 * the ops' parity tests and the kernel self-test. */
#ifndef TDM_VEC_H
#define TDM_VEC_H

#include <stdint.h>

#include "simd.h"

/* Before a kernel's inner loop: clang does not unroll it. V8 issues a loop body's loads before the
 * arithmetic that uses them, so an unrolled body holds every step's loads at once and spills. */
#ifdef __clang__
#define TDM_NO_UNROLL _Pragma("clang loop unroll(disable)")
#else
#define TDM_NO_UNROLL
#endif

static inline float tdm_f32_dot__scalar(const float *a, const float *b, int64_t n) {
  float r = 0;
  for (int64_t i = 0; i < n; i++) r += a[i] * b[i];
  return r;
}

/* y += p * x */
static inline void tdm_f32_axpy__scalar(float p, const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += p * x[i];
}

#if TDM_SIMD128
#include <string.h>

/* a * b + c for four lanes. The relaxed-SIMD build (TDM_RELAXED_SIMD, web/tandem-relaxed.wasm)
 * makes it one f32x4.relaxed_madd, which engines run as a fused multiply-add where the CPU has one
 * (one rounding; an unfused multiply and add elsewhere: results may differ between machines in the
 * last bits, never between runs or thread counts on one machine). clang-19 (tandem-relaxed.wasm)
 * emits the standard instruction; LLVM 14 (Emscripten's, tandem-mt-relaxed.wasm) only has the
 * prototype builtin, whose opcode scripts/relaxed_simd.py rewrites to the standard one after
 * linking. The SIMD128 build multiplies, then adds. */
#if defined(TDM_RELAXED_SIMD) && defined(__wasm_relaxed_simd__) && __has_builtin(__builtin_wasm_relaxed_madd_f32x4)
/* LLVM 15+ (tandem-relaxed.wasm, clang-19): the standard instruction from the compiler */
#define tdm_madd(a, b, c) wasm_f32x4_relaxed_madd((a), (b), (c))
#elif defined(TDM_RELAXED_SIMD)
typedef float tdm__f32x4 __attribute__((vector_size(16)));
#define tdm_madd(a, b, c) ((v128_t)__builtin_wasm_fma_f32x4((tdm__f32x4)(a), (tdm__f32x4)(b), (tdm__f32x4)(c)))
#else
#define tdm_madd(a, b, c) wasm_f32x4_add(wasm_f32x4_mul((a), (b)), (c))
#endif

/* s + (x * p + z * q): two products into one accumulator. SIMD128: both products, their sum, then
 * the add (the order the GEMVs were tuned with); relaxed SIMD: two fused steps. */
#if defined(TDM_RELAXED_SIMD)
#define tdm_madd2(s, x, p, z, q) tdm_madd((z), (q), tdm_madd((x), (p), (s)))
#else
#define tdm_madd2(s, x, p, z, q) wasm_f32x4_add((s), wasm_f32x4_add(wasm_f32x4_mul((x), (p)), wasm_f32x4_mul((z), (q))))
#endif

/* A weight stream's early load: the 16 bytes at p, read once per block of a GEMV ahead of the block's
 * loop and folded into a value nothing uses until tdm_touch_end stores it (volatile, so neither clang
 * nor V8 drops the loads). The SIMD128 integer GEMVs spend many instructions on each 16 weight bytes,
 * so their own loads of a new line enter the core late and stall it; a load a line or two ahead,
 * issued at the block's start, has the line on its way. On machine E (docs/performance.md) the
 * SmolLM-shaped decode gains 1.2x (int8) and 1.5x (int4) in Node, 1.5x in Chromium (whose V8 emits
 * the same loop but stalled longer on those loads: perf over V8's --perf-prof code dump), Mimi's
 * int8 two-row steps 1.25x; the relaxed int4 kernel and the float32 two-row GEMV, fewer instructions
 * per byte, gain nothing from it. */
static inline v128_t tdm_touch(v128_t acc, const void *p) { return wasm_v128_or(acc, wasm_v128_load(p)); }
/* tdm_touch in a panel of `bytes` bytes: its 16 bytes 128 on from byte `at` (a line or two ahead of
 * a block starting there), at most its last 16; none in a panel under 16 bytes. */
static inline v128_t tdm_touch_ahead(v128_t acc, const void *panel, size_t at, size_t bytes) {
  if (bytes < 16) return acc;
  return tdm_touch(acc, (const uint8_t *)panel + (at + 128 < bytes - 16 ? at + 128 : bytes - 16));
}
static inline void tdm_touch_end(v128_t acc) {
  volatile v128_t sink = acc;
  (void)sink;
}

/* One 4-byte load from each 64-byte cache line of [p, p + bytes), back to back, folded into a value
 * only a volatile store uses: lines a kernel is about to read from memory, asked for all at once so
 * that their misses overlap (a kernel's own loads among its arithmetic leave few in flight). */
static inline void tdm_touch_lines(const void *p, size_t bytes) {
  uint32_t seen = 0;
  for (size_t at = 0; at < bytes; at += 64) {
    uint32_t v;
    __builtin_memcpy(&v, (const uint8_t *)p + at, sizeof v);
    seen |= v;
  }
  volatile uint32_t sink = seen;
  (void)sink;
}

/* Stores the 8 lanes of v0|v1 at y, or only the first n < 8 of them. */
static inline void tdm_store8(float *y, v128_t v0, v128_t v1, int64_t n) {
  if (n >= 8) {
    wasm_v128_store(y, v0);
    wasm_v128_store(y + 4, v1);
    return;
  }
  float t[8];
  wasm_v128_store(t, v0);
  wasm_v128_store(t + 4, v1);
  memcpy(y, t, (size_t)n * sizeof(float));
}

/* Loads the 8 floats at p into v0|v1, or only the first n < 8 of them with zeros after. */
static inline void tdm_load8(const float *p, int64_t n, v128_t *v0, v128_t *v1) {
  if (n >= 8) {
    *v0 = wasm_v128_load(p);
    *v1 = wasm_v128_load(p + 4);
    return;
  }
  float t[8] = {0};
  memcpy(t, p, (size_t)n * sizeof(float));
  *v0 = wasm_v128_load(t);
  *v1 = wasm_v128_load(t + 4);
}

static inline float tdm_f32_dot__simd128(const float *a, const float *b, int64_t n) {
  v128_t s = wasm_f32x4_splat(0);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) s = tdm_madd(wasm_v128_load(a + i), wasm_v128_load(b + i), s);
  float r = wasm_f32x4_extract_lane(s, 0) + wasm_f32x4_extract_lane(s, 1) + wasm_f32x4_extract_lane(s, 2) + wasm_f32x4_extract_lane(s, 3);
  return r + tdm_f32_dot__scalar(a + i, b + i, n - i);
}

static inline void tdm_f32_axpy__simd128(float p, const float *x, float *y, int64_t n) {
  const v128_t pv = wasm_f32x4_splat(p);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) wasm_v128_store(y + i, tdm_madd(pv, wasm_v128_load(x + i), wasm_v128_load(y + i)));
  tdm_f32_axpy__scalar(p, x + i, y + i, n - i);
}
#define tdm_f32_dot tdm_f32_dot__simd128
#define tdm_f32_axpy tdm_f32_axpy__simd128

/* e^x for four lanes: x = n ln2 + r with |r| <= ln2/2, e^r by a degree-6 polynomial, 2^n by
 * building the exponent bits. Matches expf over the whole float32 range: x is clamped to
 * [-104, 89], where e^-104 rounds to 0 and e^89 overflows to inf, so ±inf, overflow (x above
 * 88.7228) and full underflow come out of the same arithmetic; 2^n is applied in two halves, so
 * n from -150 to 128 stays representable and the gradual-underflow (denormal) results round once,
 * at the last multiply. NaN stays NaN. Measured maximum relative error against expf on normal
 * results: 2.4e-7 (tests/c/kernel_selftest.c checks < 5e-7, denormal results within one unit of
 * 2^-149, and ±inf, NaN, 0, the overflow threshold and every float in [-104, -80] and [80, 89]).
 * Written for how V8 lowers SIMD128 on x86: pmin/pmax are one instruction each (min/max with NaN
 * semantics are several), and n is rounded by adding 1.5·2^23, which leaves n in the low mantissa
 * bits (no float→int conversion, which is a long sequence there). */
/* The shared steps of the two below: x = n ln2 + r, e^r by the degree-6 polynomial (returned), and
 * the integer n in *ni (nm's bits minus magic's bits). */
static inline v128_t tdm__f32x4_exp_poly(v128_t x, v128_t *ni) {
  const v128_t magic = wasm_f32x4_splat(12582912.0f); /* 1.5 * 2^23 */
  const v128_t nm = wasm_f32x4_add(wasm_f32x4_mul(x, wasm_f32x4_splat(1.44269504f)), magic);
  const v128_t n = wasm_f32x4_sub(nm, magic); /* round-to-nearest of x / ln 2, as a float */
  v128_t r = wasm_f32x4_sub(x, wasm_f32x4_mul(n, wasm_f32x4_splat(0.693145752f)));
  r = wasm_f32x4_sub(r, wasm_f32x4_mul(n, wasm_f32x4_splat(1.42860677e-6f)));
  v128_t p = wasm_f32x4_splat(1.0f / 720);
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f / 120));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f / 24));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f / 6));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(0.5f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.0f));
  *ni = wasm_i32x4_sub(nm, magic);
  return p;
}

static inline v128_t tdm_f32x4_exp(v128_t x) {
  /* pmax(a, b) = a < b ? b : a and pmin(a, b) = b < a ? b : a keep a NaN in a */
  x = wasm_f32x4_pmin(wasm_f32x4_pmax(x, wasm_f32x4_splat(-104.0f)), wasm_f32x4_splat(89.0f));
  v128_t ni;
  const v128_t p = tdm__f32x4_exp_poly(x, &ni);
  /* the integer n is in [-150, 129]; 2^n = 2^h · 2^(n-h) with h = floor(n / 2): both halves are
   * normal floats, so the product rounds only once */
  const v128_t h = wasm_i32x4_shr(ni, 1);
  const v128_t s1 = wasm_i32x4_shl(wasm_i32x4_add(h, wasm_i32x4_splat(127)), 23);
  const v128_t s2 = wasm_i32x4_shl(wasm_i32x4_add(wasm_i32x4_sub(ni, h), wasm_i32x4_splat(127)), 23);
  return wasm_f32x4_mul(wasm_f32x4_mul(p, s1), s2);
}

/* e^x for four lanes whose x is at most 0 or NaN, as ELU needs it (exp(minimum(y, 0)) - 1): the
 * steps of tdm_f32x4_exp without its upper clamp, and with x clamped below at -87 instead of -104,
 * so n >= -126 and 2^n is one normal float (one multiply, rounding once as the two halves do). The
 * same floats as tdm_f32x4_exp for x in [-87, 0] and NaN; below -87 both are under 2^-125, so
 * e^x - 1 is exactly -1 from either (tests/c/kernel_selftest.c, check_elu, sweeps [-110, 0]). */
static inline v128_t tdm_f32x4_exp_nonpos(v128_t x) {
  v128_t ni;
  const v128_t p = tdm__f32x4_exp_poly(wasm_f32x4_pmax(x, wasm_f32x4_splat(-87.0f)), &ni);
  return wasm_f32x4_mul(p, wasm_i32x4_shl(wasm_i32x4_add(ni, wasm_i32x4_splat(127)), 23));
}

/* erf(x) for four lanes as a rational function, x·P(x²)/Q(x²) with P of degree 6 and Q of degree
 * 4 in x², on x clamped to [-4, 4] (erf(4) = 1 - 1.5e-8, so past that erf is ±1 in float32): one
 * division and no exp. The coefficients are the minimax fit Eigen uses for float erf. Absolute
 * error against erff below 5e-7 over [-6, 6] (tests/c/kernel_selftest.c). NaN propagates. */
static inline v128_t tdm_f32x4_erf(v128_t x) {
  x = wasm_f32x4_pmin(wasm_f32x4_pmax(x, wasm_f32x4_splat(-4.0f)), wasm_f32x4_splat(4.0f));
  const v128_t x2 = wasm_f32x4_mul(x, x);
  v128_t p = wasm_f32x4_splat(-2.72614225801306e-10f);
  p = wasm_f32x4_add(wasm_f32x4_mul(p, x2), wasm_f32x4_splat(2.77068142495902e-08f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, x2), wasm_f32x4_splat(-2.10102402082508e-06f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, x2), wasm_f32x4_splat(-5.69250639462346e-05f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, x2), wasm_f32x4_splat(-7.34990630326855e-04f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, x2), wasm_f32x4_splat(-2.95459980854025e-03f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, x2), wasm_f32x4_splat(-1.60960333262415e-02f));
  p = wasm_f32x4_mul(p, x);
  v128_t q = wasm_f32x4_splat(-1.45660718464996e-05f);
  q = wasm_f32x4_add(wasm_f32x4_mul(q, x2), wasm_f32x4_splat(-2.13374055278905e-04f));
  q = wasm_f32x4_add(wasm_f32x4_mul(q, x2), wasm_f32x4_splat(-1.68282697438203e-03f));
  q = wasm_f32x4_add(wasm_f32x4_mul(q, x2), wasm_f32x4_splat(-7.37332916720468e-03f));
  q = wasm_f32x4_add(wasm_f32x4_mul(q, x2), wasm_f32x4_splat(-1.42647390514189e-02f));
  return wasm_f32x4_div(p, q);
}
#else
#define tdm_f32_dot tdm_f32_dot__scalar
#define tdm_f32_axpy tdm_f32_axpy__scalar
#endif

#endif
