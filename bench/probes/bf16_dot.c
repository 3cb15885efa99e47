/* bf16_dot.c — issue #23: would bfloat16 weights halve the time of Mimi's memory-bound dot convs
 * (1-2 output positions per streaming step, ~90 MB of float32 weights a frame)? For
 * bench/probes/bf16_dot.mjs, which builds this with emcc -O3 -msimd128 (as tandem.wasm) and with
 * clang-19 -O3 -mrelaxed-simd (as tandem-relaxed.wasm). M output rows of K weights against N = 2
 * positions (rows of activations), y [M, 2]:
 *  - the float32 dots exactly as the runtime runs them (conv_simd128.c's tdm_f32_conv_dot__simd128
 *    and tdm_f32_conv_dot_2s__simd128, linked from src/);
 *  - the same dots on bfloat16 weights (the top 16 bits of each float32, rounded to nearest even
 *    when stored; K a multiple of 8, the same [M, K] order as the float32 ones): 8 weights a 16-byte
 *    load, widened with i32x4.shl(v, 16) (the even k) and v128.and(v, 0xFFFF0000) (the odd k), the
 *    activations split once per call into their even and odd k so that both halves meet them in
 *    lanes; R rows at a time, each read in S places (S = 2: its two halves, as the _2s kernel does);
 *  - a plain SIMD read of the float32 weights' bytes (what memory gives this process now).
 * The weights are cycled through >= 256 MB of copies (each format), so every call reads them from
 * DRAM. check() compares every kernel with a scalar float64 reference on the weights it reads. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wasm_simd128.h>

#include "../../src/kernels/variants.h"
#include "../../src/kernels/vec.h"

#define NPOS 2

static int64_t M, K, n32, n16, next32, next16;
static float *w32, *f2, *colt, *y, *ev, *od; /* f32 [M, K] and in 2-row panels */
static uint16_t *w16, *h16, *p4, *p2;        /* bf16 [M, K], fp16 [M, K], bf16 in 4-row and 2-row panels */

/* float32 -> bfloat16, round to nearest even (the values here are finite). */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* float32 -> IEEE float16, round to nearest even (|f| < 65520 here): subnormal halves by adding 0.5
 * (whose ulp is the half's smallest step, so the float add rounds), normal ones by rounding the 13
 * dropped bits to even in the integer. */
static uint16_t to_fp16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  u &= 0x7FFFFFFFu;
  if (u < 0x38800000u) { /* below 2^-14 */
    float t;
    memcpy(&t, &u, 4);
    t += 0.5f;
    memcpy(&u, &t, 4);
    return (uint16_t)(sign | (u - 0x3F000000u));
  }
  u += 0xC8000000u + 0xFFFu + ((u >> 13) & 1u); /* exponent 127 -> 15 bias, then round */
  return (uint16_t)(sign | (u >> 13));
}

static float from_fp16(uint16_t h) {
  const uint32_t m = (uint32_t)(h & 0x7FFFu) << 13, s = (uint32_t)(h & 0x8000u) << 16;
  float f;
  memcpy(&f, &m, 4);
  f *= 0x1p112f; /* exponent 15 -> 127 bias; subnormal halves land exact */
  uint32_t u;
  memcpy(&u, &f, 4);
  u |= s;
  memcpy(&f, &u, 4);
  return f;
}

/* M outputs of K weights; each format's copies fill at least mb MB (0: one copy, read from cache
 * when small). */
int setup(int m, int k, int mb) {
  M = m, K = k;
  if (K % 8) return 0;
  const int64_t W = M * K, B = (int64_t)mb << 20;
  n32 = B > 0 ? (B + 4 * W - 1) / (4 * W) : 1, n16 = B > 0 ? (B + 2 * W - 1) / (2 * W) : 1;
  w32 = malloc((size_t)(4 * W * n32)), f2 = malloc((size_t)(4 * W * n32)), w16 = malloc((size_t)(2 * W * n16)),
  h16 = malloc((size_t)(2 * W * n16));
  p4 = malloc((size_t)(2 * W * n16)), p2 = malloc((size_t)(2 * W * n16));
  colt = malloc((size_t)(4 * NPOS * K)), y = malloc((size_t)(4 * NPOS * M));
  ev = malloc((size_t)(4 * NPOS * K / 2)), od = malloc((size_t)(4 * NPOS * K / 2));
  if (M % 4 || !w32 || !f2 || !w16 || !h16 || !p4 || !p2 || !colt || !y || !ev || !od) return 0;
  uint32_t r = 1;
  /* weights ~ N(0, 1/K)-sized (uniform, a conv's scale), activations in [-1, 1) */
  const float sc = 2.0f / sqrtf((float)K);
  for (int64_t i = 0; i < W; i++) r = r * 1664525u + 1013904223u, w32[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * sc;
  for (int64_t i = 0; i < NPOS * K; i++) r = r * 1664525u + 1013904223u, colt[i] = (float)(r >> 8) / 8388608.0f - 1.0f;
  for (int64_t i = 0; i < W; i++) w16[i] = to_bf16(w32[i]), h16[i] = to_fp16(w32[i]);
  for (int64_t c = 1; c < n32; c++) memcpy(w32 + c * W, w32, (size_t)(4 * W));
  for (int64_t i = 0; i < M; i++)
    for (int64_t k = 0; k < K; k++) {
      p4[((i / 4) * (K / 8) + k / 8) * 32 + (i % 4) * 8 + k % 8] = w16[i * K + k];
      p2[((i / 2) * (K / 8) + k / 8) * 16 + (i % 2) * 8 + k % 8] = w16[i * K + k];
      f2[((i / 2) * (K / 4) + k / 4) * 8 + (i % 2) * 4 + k % 4] = w32[i * K + k];
    }
  for (int64_t c = 1; c < n32; c++) memcpy(f2 + c * W, f2, (size_t)(4 * W));
  for (int64_t c = 1; c < n16; c++) {
    memcpy(w16 + c * W, w16, (size_t)(2 * W)), memcpy(h16 + c * W, h16, (size_t)(2 * W));
    memcpy(p4 + c * W, p4, (size_t)(2 * W)), memcpy(p2 + c * W, p2, (size_t)(2 * W));
  }
  return 1;
}

/* The activations' even and odd k, each position's K/2 of them contiguous. */
static void split(const float *x) {
  for (int q = 0; q < NPOS; q++) {
    const float *s = x + q * K;
    float *e = ev + q * (K / 2), *o = od + q * (K / 2);
    for (int64_t k = 0; k < K; k += 8) {
      const v128_t a = wasm_v128_load(s + k), b = wasm_v128_load(s + k + 4);
      wasm_v128_store(e + k / 2, wasm_i32x4_shuffle(a, b, 0, 2, 4, 6));
      wasm_v128_store(o + k / 2, wasm_i32x4_shuffle(a, b, 1, 3, 5, 7));
    }
  }
}

/* Rows i .. i+R-1, each read at S places h apart (h = K/S), against the NPOS positions. Lane l of
 * an accumulator sums the products of k ≡ 2l, 2l+1 (mod 8). */
#define BF16_TILE(R, S) \
  do { \
    v128_t s[R][NPOS]; \
    for (int r = 0; r < R; r++) \
      for (int q = 0; q < NPOS; q++) s[r][q] = wasm_f32x4_splat(0.0f); \
    const uint16_t *wr = w + i * K; \
    for (int64_t k = 0; k < h; k += 8) \
      for (int t = 0; t < S; t++) { \
        v128_t e[NPOS], o[NPOS]; \
        for (int q = 0; q < NPOS; q++) \
          e[q] = wasm_v128_load(ev + q * (K / 2) + (t * h + k) / 2), o[q] = wasm_v128_load(od + q * (K / 2) + (t * h + k) / 2); \
        for (int r = 0; r < R; r++) { \
          const v128_t v = wasm_v128_load(wr + r * K + t * h + k); \
          const v128_t we = wasm_i32x4_shl(v, 16), wo = wasm_v128_and(v, hi); \
          for (int q = 0; q < NPOS; q++) s[r][q] = tdm_madd(wo, o[q], tdm_madd(we, e[q], s[r][q])); \
        } \
      } \
    for (int r = 0; r < R; r++) \
      for (int q = 0; q < NPOS; q++) \
        y[(i + r) * NPOS + q] = (wasm_f32x4_extract_lane(s[r][q], 0) + wasm_f32x4_extract_lane(s[r][q], 1)) + \
            (wasm_f32x4_extract_lane(s[r][q], 2) + wasm_f32x4_extract_lane(s[r][q], 3)); \
  } while (0)

#define BF16_KERNEL(name, R, S) \
  static void name(const uint16_t *w, const float *x) { \
    const v128_t hi = wasm_i32x4_splat((int32_t)0xFFFF0000u); \
    const int64_t h = K / S; \
    split(x); \
    int64_t i = 0; \
    for (; i + R <= M; i += R) BF16_TILE(R, S); \
    for (; i < M; i++) BF16_TILE(1, S); \
  }

/* As BF16_TILE on IEEE halves: each lane's half moved to the top (t = h << 16: shl for the even k,
 * and for the odd), its magnitude shifted to float32's exponent field and scaled by 2^112 (the
 * biases' difference, exact for subnormal halves too), its sign or-ed back. */
#define FP16_WIDEN(t) wasm_v128_or(wasm_f32x4_mul(wasm_u32x4_shr(wasm_v128_and((t), mag), 3), scale), wasm_v128_and((t), sgn))
#define FP16_TILE(R) \
  do { \
    v128_t s[R][NPOS]; \
    for (int r = 0; r < R; r++) \
      for (int q = 0; q < NPOS; q++) s[r][q] = wasm_f32x4_splat(0.0f); \
    const uint16_t *wr = w + i * K; \
    for (int64_t k = 0; k < K; k += 8) { \
      v128_t e[NPOS], o[NPOS]; \
      for (int q = 0; q < NPOS; q++) e[q] = wasm_v128_load(ev + q * (K / 2) + k / 2), o[q] = wasm_v128_load(od + q * (K / 2) + k / 2); \
      for (int r = 0; r < R; r++) { \
        const v128_t v = wasm_v128_load(wr + r * K + k); \
        const v128_t we = FP16_WIDEN(wasm_i32x4_shl(v, 16)), wo = FP16_WIDEN(v); \
        for (int q = 0; q < NPOS; q++) s[r][q] = tdm_madd(wo, o[q], tdm_madd(we, e[q], s[r][q])); \
      } \
    } \
    for (int r = 0; r < R; r++) \
      for (int q = 0; q < NPOS; q++) \
        y[(i + r) * NPOS + q] = (wasm_f32x4_extract_lane(s[r][q], 0) + wasm_f32x4_extract_lane(s[r][q], 1)) + \
            (wasm_f32x4_extract_lane(s[r][q], 2) + wasm_f32x4_extract_lane(s[r][q], 3)); \
  } while (0)

static void fp16_r4(const uint16_t *w, const float *x) {
  const v128_t mag = wasm_i32x4_splat(0x7FFF0000), sgn = wasm_i32x4_splat((int32_t)0x80000000u), scale = wasm_f32x4_splat(0x1p112f);
  split(x);
  int64_t i = 0;
  for (; i + 4 <= M; i += 4) FP16_TILE(4);
  for (; i < M; i++) FP16_TILE(1);
}

BF16_KERNEL(bf16_r4s1, 4, 1)
BF16_KERNEL(bf16_r2s2, 2, 2)
BF16_KERNEL(bf16_r4s2, 4, 2)
BF16_KERNEL(bf16_r8s1, 8, 1)

/* On panels: rows i .. i+3 (a panel of 4 rows: their 8 weights of each k-block side by side, one
 * 64-byte line a block, the whole matrix one sequential stream), or (G = 2) rows i, i+1 of 2-row
 * panels together with rows i + M/2, i + M/2 + 1 (two streams half the matrix apart). Each row's
 * accumulators sum as BF16_TILE's do. */
#define BF16_PANEL(NR, G) \
  do { \
    v128_t s[NR * G][NPOS]; \
    for (int r = 0; r < NR * G; r++) \
      for (int q = 0; q < NPOS; q++) s[r][q] = wasm_f32x4_splat(0.0f); \
    const uint16_t *pa = w + i * K, *pb = w + (i + M / 2) * K; \
    for (int64_t k = 0; k < K; k += 8, pa += 8 * NR, pb += 8 * NR) { \
      v128_t e[NPOS], o[NPOS]; \
      for (int q = 0; q < NPOS; q++) e[q] = wasm_v128_load(ev + q * (K / 2) + k / 2), o[q] = wasm_v128_load(od + q * (K / 2) + k / 2); \
      for (int r = 0; r < NR * G; r++) { \
        const v128_t v = wasm_v128_load((r < NR ? pa : pb) + (r % NR) * 8); \
        const v128_t we = wasm_i32x4_shl(v, 16), wo = wasm_v128_and(v, hi); \
        for (int q = 0; q < NPOS; q++) s[r][q] = tdm_madd(wo, o[q], tdm_madd(we, e[q], s[r][q])); \
      } \
    } \
    for (int r = 0; r < NR * G; r++) \
      for (int q = 0; q < NPOS; q++) \
        y[(i + (r < NR ? r : M / 2 + r - NR)) * NPOS + q] = (wasm_f32x4_extract_lane(s[r][q], 0) + wasm_f32x4_extract_lane(s[r][q], 1)) + \
            (wasm_f32x4_extract_lane(s[r][q], 2) + wasm_f32x4_extract_lane(s[r][q], 3)); \
  } while (0)

/* The float32 dots on 2-row panels (4 weights of each row side by side), rows i, i+1 with
 * i + M/2, i + M/2 + 1: the layout of bf16_panel2x2 without the 16-bit weights. */
static void f32_panel2x2(const float *w, const float *x) {
  for (int64_t i = 0; i < M / 2; i += 2) {
    v128_t s[4][NPOS];
    for (int r = 0; r < 4; r++)
      for (int q = 0; q < NPOS; q++) s[r][q] = wasm_f32x4_splat(0.0f);
    const float *pa = w + i * K, *pb = w + (i + M / 2) * K;
    for (int64_t k = 0; k < K; k += 4, pa += 8, pb += 8) {
      v128_t c[NPOS];
      for (int q = 0; q < NPOS; q++) c[q] = wasm_v128_load(x + q * K + k);
      for (int r = 0; r < 4; r++) {
        const v128_t v = wasm_v128_load((r < 2 ? pa : pb) + (r % 2) * 4);
        for (int q = 0; q < NPOS; q++) s[r][q] = tdm_madd(v, c[q], s[r][q]);
      }
    }
    for (int r = 0; r < 4; r++)
      for (int q = 0; q < NPOS; q++)
        y[(i + (r < 2 ? r : M / 2 + r - 2)) * NPOS + q] = (wasm_f32x4_extract_lane(s[r][q], 0) + wasm_f32x4_extract_lane(s[r][q], 1)) +
            (wasm_f32x4_extract_lane(s[r][q], 2) + wasm_f32x4_extract_lane(s[r][q], 3));
  }
}

static void bf16_panel4(const uint16_t *w, const float *x) {
  const v128_t hi = wasm_i32x4_splat((int32_t)0xFFFF0000u);
  split(x);
  for (int64_t i = 0; i < M; i += 4) BF16_PANEL(4, 1);
}

static void bf16_panel2x2(const uint16_t *w, const float *x) {
  const v128_t hi = wasm_i32x4_splat((int32_t)0xFFFF0000u);
  split(x);
  for (int64_t i = 0; i < M / 2; i += 2) BF16_PANEL(2, 2);
}

/* which: 0 f32 dot (1 stream a row), 1 f32 dot_2s, 2 bf16 4 rows x 1, 3 bf16 2 rows x 2 halves,
 * 4 bf16 4 rows x 2 halves, 5 bf16 8 rows x 1, 6 the plain read of one float32 copy (4 accumulators),
 * 7 fp16 4 rows x 1, 8 bf16 on 4-row panels, 9 bf16 on 2-row panels, two streams M/2 rows apart, 10 the same
 * on float32 panels. */
float run(int which, int reps) {
  const int64_t W = M * K;
  for (int i = 0; i < reps; i++) {
    const int64_t c32 = (next32 % n32) * W, c16 = (next16 % n16) * W;
    const float *a = w32 + c32;
    const uint16_t *b = w16 + c16;
    if (which <= 1 || which == 6 || which == 10) next32++;
    else next16++;
    if (which == 0) tdm_f32_conv_dot__simd128(M, NPOS, K, a, colt, NULL, y, NPOS);
    else if (which == 1) tdm_f32_conv_dot_2s__simd128(M, NPOS, K, a, colt, NULL, y, NPOS);
    else if (which == 2) bf16_r4s1(b, colt);
    else if (which == 3) bf16_r2s2(b, colt);
    else if (which == 4) bf16_r4s2(b, colt);
    else if (which == 5) bf16_r8s1(b, colt);
    else if (which == 7) fp16_r4(h16 + c16, colt);
    else if (which == 8) bf16_panel4(p4 + c16, colt);
    else if (which == 9) bf16_panel2x2(p2 + c16, colt);
    else if (which == 10) f32_panel2x2(f2 + c32, colt);
    else {
      v128_t t0 = wasm_i32x4_splat(0), t1 = t0, t2 = t0, t3 = t0;
      for (const float *p = a; p + 16 <= a + W; p += 16) {
        t0 = wasm_i32x4_add(t0, wasm_v128_load(p)), t1 = wasm_i32x4_add(t1, wasm_v128_load(p + 4));
        t2 = wasm_i32x4_add(t2, wasm_v128_load(p + 8)), t3 = wasm_i32x4_add(t3, wasm_v128_load(p + 12));
      }
      y[0] = (float)wasm_i32x4_extract_lane(wasm_i32x4_add(wasm_i32x4_add(t0, t1), wasm_i32x4_add(t2, t3)), 0);
    }
  }
  return y[0];
}

/* 0 if every kernel is within 1e-5 of sum |w·x| of the float64 reference on its own weights (the
 * float32 ones, or the 16-bit ones widened by the scalar from_*), and the roundings to bfloat16 and
 * float16 are to nearest even (hand-computed cases); else 1 + the kernel's number (or 100-107 for
 * the conversions). */
int check(void) {
  static const uint32_t in[] = {0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F807FFFu, 0xBF818000u, 0x3F7F8000u};
  static const uint16_t out[] = {0x3F80u, 0x3F82u, 0x3F81u, 0x3F80u, 0xBF82u, 0x3F80u};
  for (int i = 0; i < 6; i++) {
    float f;
    memcpy(&f, &in[i], 4);
    if (to_bf16(f) != out[i]) return 100;
  }
  for (int i = 0; i < 6; i++) { /* and to float16: 1 + 2^-11 (a tie, to even), 1 + 3·2^-11, 1.5·2^-24 (a subnormal tie), 2^-14, ... */
    static const uint32_t hin[] = {0x3F801000u, 0x3F803000u, 0x33C00000u, 0x38800000u, 0xB3A00000u, 0x387FF000u};
    static const uint16_t hout[] = {0x3C00u, 0x3C02u, 0x0002u, 0x0400u, 0x8001u, 0x0400u};
    float f;
    memcpy(&f, &hin[i], 4);
    if (to_fp16(f) != hout[i]) return 101 + i;
  }
  if (from_fp16(0x3C00u) != 1.0f || from_fp16(0x0001u) != 0x1p-24f || from_fp16(0x8400u) != -0x1p-14f || from_fp16(0x7BFFu) != 65504.0f)
    return 107;
  for (int which = 0; which <= 10; which++) {
    if (which == 6) continue;
    const float *a = w32 + (next32 % n32) * M * K;
    const uint16_t *b = w16 + (next16 % n16) * M * K, *hh = h16 + (next16 % n16) * M * K;
    run(which, 1);
    for (int64_t i = 0; i < M; i++)
      for (int q = 0; q < NPOS; q++) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; k++) {
          const double w = which <= 1 || which == 10 ? (double)a[i * K + k]
              : which == 7                           ? (double)from_fp16(hh[i * K + k])
                                                     : (double)from_bf16(b[i * K + k]);
          ref += w * colt[q * K + k], mag += fabs(w * colt[q * K + k]);
        }
        if (fabs((double)y[i * NPOS + q] - ref) > 1e-5 * mag + 1e-30) return 1 + which;
      }
  }
  return 0;
}

/* The largest |bf16 result - float32 result| over sum |w·x| (the weights' rounding alone). */
double bf16_error(void) {
  const float *a = w32 + (next32 % n32) * M * K;
  double worst = 0;
  run(2, 1);
  for (int64_t i = 0; i < M; i++)
    for (int q = 0; q < NPOS; q++) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; k++) ref += (double)a[i * K + k] * colt[q * K + k], mag += fabs((double)a[i * K + k] * colt[q * K + k]);
      const double e = fabs((double)y[i * NPOS + q] - ref) / mag;
      if (e > worst) worst = e;
    }
  return worst;
}
