/* q4_layout.c — int4 one-row GEMV layouts that a load-time repack could produce, against the current
 * kernel (tdm_q4_gemv_dot__relaxed on the file's layout), for bench/probes/q4_layout.mjs (which builds
 * this with clang-19 for wasm32-wasi and -mrelaxed-simd, as tandem-relaxed.wasm is built). Probe only:
 * K and N multiples of 32, G = 32 (the exporter's default group); nothing here is in the runtime.
 *
 * The file's layout: panel p of 8 columns, byte row r holds k = 2r (low nibble) and 2r + 1 (high) of
 * each column, two's complement; the kernel xors 0x88 (code + 8, in 0..15, the relaxed dot's 7-bit
 * operand), masks, shifts and interleaves two byte rows into [u(k, c), u(k + 1, c)] pairs.
 * Every repacked layout below stores u = q + 8 (pre-biased), and the scales of four panels (32
 * columns) side by side per group (sc4[block][g][32]).
 *
 * "pairs" (layout 1): the current block order (16 bytes per 4 k of a panel), nibbles pre-arranged so
 *   that bytes & 0x0F is the current kernel's a = [u(k, c), u(k + 1, c)] c = 0..7 and (bytes >> 4) &
 *   0x0F its b (k + 2, k + 3): no xor, no interleaves. Same 16-bit sums per 16 k, widened per 16 k.
 * "quads" (layout 2): 32 bytes per 8 k of a panel, one vector per 4 columns; byte 4c + j holds u(k + j,
 *   c) low and u(k + 4 + j, c) high. Activation splats of 4 bytes (x[k..k + 3], x[k + 4..k + 7]); the
 *   16-bit lane 2c + m of a dot sums k + 2m, k + 2m + 1 of column c, so a lane gets 16 terms per 32 k
 *   (each at most 127·15 in magnitude: fits) and one i32x4.extadd_pairwise_i16x8_s per 4 columns per
 *   group gives the column sums: no widening per 16 k.
 * "quads + dot_add" (kernel 3, layout 2): i32x4.relaxed_dot_i8x16_i7x16_add_s accumulates the 4-byte
 *   dots in 32 bits directly (one vpdpbusd on AVX-VNNI if V8 emits it). check() says whether this
 *   engine computes it right. Only with -DQ4_DOTADD (Node 20's V8 does not compile the opcode: "not
 *   enough arguments on the stack for i32x4.dot_i8x16_i7x16_add_s"); without, kernel 3 is absent.
 * Integer sums are exact in any order and the float steps per group are the reference's
 * (acc + ((float)s · xs[g]) · sc[g]), so every kernel must give the current kernel's bits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wasm_simd128.h>

#include "../../src/kernels/variants.h"

#define G 32
static int64_t N, K, NG, KB, C;     /* C copies of each layout, cycled through for the DRAM case */
static size_t CB4, CBS;             /* bytes of one copy's codes, floats of one copy's scales */
static uint8_t *q4, *qpair, *qquad; /* C copies each, codes */
static uint8_t *qs1, *qs2;          /* C copies each, the streamed layouts (1 and 2 panels a step), codes and scales */
static size_t CBST1, CBST2;         /* bytes of one copy of each streamed layout */
static float *s4, *s4i;             /* C copies: the file's scales, the interleaved ones */
static float *a, *xs, *y, *y2;
static int8_t *xq;
static int32_t *xsum;

static int ucode(const uint8_t *q, int64_t k, int64_t c) { /* u = q + 8 of column c (0..N), row k */
  const uint8_t b = q[(c / 8) * KB * 8 + (k / 2) * 8 + c % 8];
  return ((k & 1 ? b >> 4 : b) & 15) ^ 8;
}

static void repack(const uint8_t *q, const float *s, uint8_t *pr, uint8_t *qd, float *si) {
  for (int64_t p = 0; p < N / 8; p++) {
    for (int64_t t = 0; t < K / 4; t++) /* pairs: 16 bytes per 4 k */
      for (int c = 0; c < 8; c++) {
        const int64_t k = 4 * t, col = 8 * p + c;
        uint8_t *o = pr + p * KB * 8 + t * 16 + 2 * c;
        o[0] = (uint8_t)(ucode(q, k, col) | ucode(q, k + 2, col) << 4);
        o[1] = (uint8_t)(ucode(q, k + 1, col) | ucode(q, k + 3, col) << 4);
      }
    for (int64_t t = 0; t < K / 8; t++) /* quads: 32 bytes per 8 k */
      for (int c = 0; c < 8; c++)
        for (int j = 0; j < 4; j++) {
          const int64_t k = 8 * t, col = 8 * p + c;
          qd[p * KB * 8 + t * 32 + (c / 4) * 16 + (c % 4) * 4 + j] = (uint8_t)(ucode(q, k + j, col) | ucode(q, k + 4 + j, col) << 4);
        }
  }
  for (int64_t b = 0; b < N / 32; b++)
    for (int64_t g = 0; g < NG; g++)
      for (int c = 0; c < 32; c++) si[b * NG * 32 + g * 32 + c] = s[(b * 4 + c / 8) * NG * 8 + g * 8 + c % 8];
}

/* The streamed layouts: blocks of np panels; per block, per group, one chunk of np·128 bytes of codes
 * (per 8 k: np·2 vectors of 4 columns, the quads' byte order) then the np·8 columns' scales, so a
 * GEMV reads the whole matrix as one sequential stream. */
static void repack_stream(int np, const uint8_t *q, const float *s, uint8_t *o) {
  const size_t chunk = (size_t)np * 160;
  for (int64_t b = 0; b < N / (8 * np); b++)
    for (int64_t g = 0; g < NG; g++) {
      uint8_t *ck = o + ((size_t)b * NG + g) * chunk;
      for (int t = 0; t < G / 8; t++)
        for (int i = 0; i < 2 * np; i++)
          for (int c = 0; c < 4; c++)
            for (int j = 0; j < 4; j++) {
              const int64_t col = b * 8 * np + i * 4 + c, k = g * G + 8 * t;
              ck[t * np * 32 + i * 16 + c * 4 + j] = (uint8_t)(ucode(q, k + j, col) | ucode(q, k + 4 + j, col) << 4);
            }
      float sc[32];
      for (int c = 0; c < 8 * np; c++) {
        const int64_t col = b * 8 * np + c;
        sc[c] = s[(col / 8) * NG * 8 + g * 8 + col % 8];
      }
      memcpy(ck + np * 128, sc, (size_t)np * 32);
    }
}

/* n, k: the shape; mb: the megabytes each layout's copies should span (1 copy if 0: from cache; -mb copies if
 * negative: the decode sequence's) */
int setup(int n, int k, int mb) {
  N = n, K = k, NG = K / G, KB = K / 2;
  if (N % 32 || K % 32 || N < 32 || K < 32) return 0;
  CB4 = (size_t)N * (size_t)KB, CBS = (size_t)N * (size_t)NG;
  const size_t per = CB4 + 4 * CBS;
  C = mb > 0 ? (int64_t)(((size_t)mb << 20) / per + 1) : mb < 0 ? -(int64_t)mb : 1;
  CBST1 = (size_t)(N / 8) * NG * 160, CBST2 = CBST1;
  qs1 = malloc(CBST1 * C), qs2 = malloc(CBST2 * C);
  if (!qs1 || !qs2) return 0;
  q4 = malloc(CB4 * C), qpair = malloc(CB4 * C), qquad = malloc(CB4 * C), s4 = malloc(4 * CBS * C), s4i = malloc(4 * CBS * C);
  a = malloc(4 * K), xq = malloc(K + 1), xs = malloc(4 * NG), xsum = malloc(4 * NG), y = malloc(4 * N), y2 = malloc(4 * N);
  if (!q4 || !qpair || !qquad || !s4 || !s4i || !a || !xq || !xs || !xsum || !y || !y2) return 0;
  uint32_t r = 7;
  for (size_t i = 0; i < CB4; i++) r = r * 1664525u + 1013904223u, q4[i] = (uint8_t)(r >> 24);
  for (size_t i = 0; i < CBS; i++) r = r * 1664525u + 1013904223u, s4[i] = 0.001f + (float)(r >> 8) / 16777216.0f * 0.02f;
  for (int64_t i = 0; i < K; i++) r = r * 1664525u + 1013904223u, a[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
  repack(q4, s4, qpair, qquad, s4i);
  repack_stream(1, q4, s4, qs1), repack_stream(2, q4, s4, qs2);
  for (int64_t i = 1; i < C; i++) { /* the copies: the same values, other addresses */
    memcpy(q4 + i * CB4, q4, CB4), memcpy(qpair + i * CB4, qpair, CB4), memcpy(qquad + i * CB4, qquad, CB4);
    memcpy(s4 + i * CBS, s4, 4 * CBS), memcpy(s4i + i * CBS, s4i, 4 * CBS);
    memcpy(qs1 + i * CBST1, qs1, CBST1), memcpy(qs2 + i * CBST2, qs2, CBST2);
  }
  return (int)C;
}

/* The pairs kernel: np panels from p (PS bytes apart), interleaved scales si (block of 32 columns). */
static inline __attribute__((always_inline)) void pairs_panels(int np, size_t PS, const uint8_t *p, const float *si, float *yo) {
  const v128_t m = wasm_i8x16_splat(0x0F);
  for (int i = 0; i < 2 * np; i++) wasm_v128_store(yo + 4 * i, wasm_f32x4_splat(0));
  for (int64_t g = 0; g < NG; g++) {
    v128_t s[8];
    for (int i = 0; i < 2 * np; i++) s[i] = wasm_i32x4_splat(0);
    for (int64_t k = g * G; k < (g + 1) * G; k += 16) {
      const int8_t *xk = xq + k, *xe = xq + k + 16;
      const uint8_t *pk = p + (size_t)k * 4;
      v128_t h[4];
      for (int i = 0; i < np; i++) h[i] = wasm_i16x8_splat(0);
#pragma clang loop unroll(disable)
      for (; xk < xe; xk += 4, pk += 16) {
        const v128_t x0 = wasm_v128_load16_splat(xk), x1 = wasm_v128_load16_splat(xk + 2);
        for (int i = 0; i < np; i++) {
          const v128_t v = wasm_v128_load(pk + i * PS);
          const v128_t lo = wasm_v128_and(v, m), hi = wasm_v128_and(wasm_u16x8_shr(v, 4), m);
          h[i] =
              wasm_i16x8_add(h[i], wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(x0, lo), wasm_i16x8_relaxed_dot_i8x16_i7x16(x1, hi)));
        }
      }
      for (int i = 0; i < np; i++) {
        s[2 * i] = wasm_i32x4_add(s[2 * i], wasm_i32x4_extend_low_i16x8(h[i]));
        s[2 * i + 1] = wasm_i32x4_add(s[2 * i + 1], wasm_i32x4_extend_high_i16x8(h[i]));
      }
    }
    const v128_t bias = wasm_i32x4_splat(8 * xsum[g]), d = wasm_f32x4_splat(xs[g]);
    for (int i = 0; i < 2 * np; i++) {
      const v128_t f = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_sub(s[i], bias)), d);
      wasm_v128_store(yo + 4 * i, wasm_f32x4_add(wasm_v128_load(yo + 4 * i), wasm_f32x4_mul(f, wasm_v128_load(si + g * 32 + 4 * i))));
    }
  }
}

/* The quads kernels: np panels from p (PS bytes apart), steps of 8 k per loop iteration (1 or 2); dotadd: 32-bit accumulation by the relaxed dot_add. */
static inline __attribute__((always_inline)) void quads_panels(int np, int steps, int dotadd, size_t PS, const uint8_t *p, const float *si,
                                                               float *yo) {
  const v128_t m = wasm_i8x16_splat(0x0F);
  for (int i = 0; i < 2 * np; i++) wasm_v128_store(yo + 4 * i, wasm_f32x4_splat(0));
  for (int64_t g = 0; g < NG; g++) {
    const int8_t *xk = xq + g * G, *xe = xk + G;
    const uint8_t *pk = p + (size_t)g * G * 4;
    v128_t h[8];
    for (int i = 0; i < 2 * np; i++) h[i] = wasm_i32x4_splat(0);
#pragma clang loop unroll(disable)
    for (; xk < xe; xk += 8 * steps, pk += 32 * steps)
      for (int st = 0; st < steps; st++) {
        const v128_t x0 = wasm_v128_load32_splat(xk + 8 * st), x1 = wasm_v128_load32_splat(xk + 8 * st + 4);
        for (int i = 0; i < 2 * np; i++) {
          const v128_t v = wasm_v128_load(pk + 32 * st + (i / 2) * PS + (i % 2) * 16);
          const v128_t lo = wasm_v128_and(v, m), hi = wasm_v128_and(wasm_u16x8_shr(v, 4), m);
#ifdef Q4_DOTADD
          if (dotadd) h[i] = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(x1, hi, wasm_i32x4_relaxed_dot_i8x16_i7x16_add(x0, lo, h[i]));
          else
#endif
            h[i] = wasm_i16x8_add(h[i],
                                  wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(x0, lo), wasm_i16x8_relaxed_dot_i8x16_i7x16(x1, hi)));
        }
      }
    const v128_t bias = wasm_i32x4_splat(8 * xsum[g]), d = wasm_f32x4_splat(xs[g]);
    for (int i = 0; i < 2 * np; i++) {
      const v128_t s = dotadd ? h[i] : wasm_i32x4_extadd_pairwise_i16x8(h[i]);
      const v128_t f = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_sub(s, bias)), d);
      wasm_v128_store(yo + 4 * i, wasm_f32x4_add(wasm_v128_load(yo + 4 * i), wasm_f32x4_mul(f, wasm_v128_load(si + g * 32 + 4 * i))));
    }
  }
}

/* The streamed kernel: one block of np panels at p (its NG chunks), 16-bit dots as the quads'. */
static inline __attribute__((always_inline)) void stream_panels(int np, const uint8_t *p, float *yo) {
  const v128_t m = wasm_i8x16_splat(0x0F);
  const size_t chunk = (size_t)np * 160;
  for (int i = 0; i < 2 * np; i++) wasm_v128_store(yo + 4 * i, wasm_f32x4_splat(0));
  for (int64_t g = 0; g < NG; g++, p += chunk) {
    const int8_t *xk = xq + g * G, *xe = xk + G;
    const uint8_t *pk = p;
    v128_t h[4];
    for (int i = 0; i < 2 * np; i++) h[i] = wasm_i16x8_splat(0);
#pragma clang loop unroll(disable)
    for (; xk < xe; xk += 8, pk += 32 * np) {
      const v128_t x0 = wasm_v128_load32_splat(xk), x1 = wasm_v128_load32_splat(xk + 4);
      for (int i = 0; i < 2 * np; i++) {
        const v128_t v = wasm_v128_load(pk + 16 * i);
        const v128_t lo = wasm_v128_and(v, m), hi = wasm_v128_and(wasm_u16x8_shr(v, 4), m);
        h[i] = wasm_i16x8_add(h[i], wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(x0, lo), wasm_i16x8_relaxed_dot_i8x16_i7x16(x1, hi)));
      }
    }
    const v128_t bias = wasm_i32x4_splat(8 * xsum[g]), d = wasm_f32x4_splat(xs[g]);
    const float *sc = (const float *)(p + np * 128);
    for (int i = 0; i < 2 * np; i++) {
      const v128_t f = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_sub(wasm_i32x4_extadd_pairwise_i16x8(h[i]), bias)), d);
      wasm_v128_store(yo + 4 * i, wasm_f32x4_add(wasm_v128_load(yo + 4 * i), wasm_f32x4_mul(f, wasm_v128_load(sc + 4 * i))));
    }
  }
}

/* Two panels far apart (two sequential streams, the quads' layout and kernel step): panel 0 at p0 with
 * its block's interleaved scales at s0 and results at y0, panel 1 likewise. */
static void quads_far2(const uint8_t *p0, const uint8_t *p1, const float *s0, const float *s1, float *y0, float *y1) {
  const v128_t m = wasm_i8x16_splat(0x0F);
  for (int i = 0; i < 2; i++) wasm_v128_store(y0 + 4 * i, wasm_f32x4_splat(0)), wasm_v128_store(y1 + 4 * i, wasm_f32x4_splat(0));
  for (int64_t g = 0; g < NG; g++) {
    const int8_t *xk = xq + g * G, *xe = xk + G;
    const uint8_t *a0 = p0 + (size_t)g * G * 4, *a1 = p1 + (size_t)g * G * 4;
    v128_t h[4];
    for (int i = 0; i < 4; i++) h[i] = wasm_i16x8_splat(0);
#pragma clang loop unroll(disable)
    for (; xk < xe; xk += 8, a0 += 32, a1 += 32) {
      const v128_t x0 = wasm_v128_load32_splat(xk), x1 = wasm_v128_load32_splat(xk + 4);
      for (int i = 0; i < 4; i++) {
        const v128_t v = wasm_v128_load((i < 2 ? a0 : a1) + (i % 2) * 16);
        const v128_t lo = wasm_v128_and(v, m), hi = wasm_v128_and(wasm_u16x8_shr(v, 4), m);
        h[i] = wasm_i16x8_add(h[i], wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(x0, lo), wasm_i16x8_relaxed_dot_i8x16_i7x16(x1, hi)));
      }
    }
    const v128_t bias = wasm_i32x4_splat(8 * xsum[g]), d = wasm_f32x4_splat(xs[g]);
    for (int i = 0; i < 4; i++) {
      float *yo = (i < 2 ? y0 : y1) + 4 * (i % 2);
      const float *sc = (i < 2 ? s0 : s1) + g * 32 + 4 * (i % 2);
      const v128_t f = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_sub(wasm_i32x4_extadd_pairwise_i16x8(h[i]), bias)), d);
      wasm_v128_store(yo, wasm_f32x4_add(wasm_v128_load(yo), wasm_f32x4_mul(f, wasm_v128_load(sc))));
    }
  }
}

/* S streams (2 or 4) of one panel each, far apart: panel i's codes at pp[i] (the quads' layout, or the
 * file's with file = 1), its scales at ss[i] (interleaved: group stride 32; the file's: 8), results at yy[i]. */
static inline __attribute__((always_inline)) void far_panels(int S, int file, const uint8_t *const *pp, const float *const *ss,
                                                             float *const *yy) {
  const v128_t m = wasm_i8x16_splat(0x0F), x88 = wasm_i8x16_splat((int8_t)0x88);
  const uint8_t *p[4];
  for (int i = 0; i < S; i++) p[i] = pp[i], wasm_v128_store(yy[i], wasm_f32x4_splat(0)), wasm_v128_store(yy[i] + 4, wasm_f32x4_splat(0));
  for (int64_t g = 0; g < NG; g++) {
    const int8_t *xk = xq + g * G, *xe = xk + G;
    v128_t h[8];
    for (int i = 0; i < 2 * S; i++) h[i] = wasm_i32x4_splat(0);
    if (file) { /* the current kernel's step: 4 k of a panel per 16 bytes, 16-bit sums widened per 16 k */
      v128_t t[8];
      for (int i = 0; i < 2 * S; i++) t[i] = wasm_i32x4_splat(0);
      for (int half = 0; half < 2; half++) {
        v128_t u[4];
        for (int i = 0; i < S; i++) u[i] = wasm_i16x8_splat(0);
        const int8_t *he = xk + 16;
#pragma clang loop unroll(disable)
        for (; xk < he; xk += 4) {
          const v128_t x0 = wasm_v128_load16_splat(xk), x1 = wasm_v128_load16_splat(xk + 2);
          for (int i = 0; i < S; i++) {
            const v128_t x = wasm_v128_xor(wasm_v128_load(p[i]), x88);
            const v128_t lo = wasm_v128_and(x, m), hi = wasm_v128_and(wasm_u16x8_shr(x, 4), m);
            const v128_t a = wasm_i8x16_shuffle(lo, hi, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
            const v128_t b = wasm_i8x16_shuffle(lo, hi, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
            u[i] =
                wasm_i16x8_add(u[i], wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(x0, a), wasm_i16x8_relaxed_dot_i8x16_i7x16(x1, b)));
            p[i] += 16;
          }
        }
        for (int i = 0; i < S; i++)
          t[2 * i] = wasm_i32x4_add(t[2 * i], wasm_i32x4_extend_low_i16x8(u[i])),
                t[2 * i + 1] = wasm_i32x4_add(t[2 * i + 1], wasm_i32x4_extend_high_i16x8(u[i]));
      }
      for (int i = 0; i < 2 * S; i++) h[i] = t[i];
    } else {
#pragma clang loop unroll(disable)
      for (; xk < xe; xk += 8) {
        const v128_t x0 = wasm_v128_load32_splat(xk), x1 = wasm_v128_load32_splat(xk + 4);
        for (int i = 0; i < 2 * S; i++) {
          const v128_t v = wasm_v128_load(p[i / 2] + (i % 2) * 16);
          const v128_t lo = wasm_v128_and(v, m), hi = wasm_v128_and(wasm_u16x8_shr(v, 4), m);
          h[i] =
              wasm_i16x8_add(h[i], wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(x0, lo), wasm_i16x8_relaxed_dot_i8x16_i7x16(x1, hi)));
        }
        for (int i = 0; i < S; i++) p[i] += 32;
      }
      for (int i = 0; i < 2 * S; i++) h[i] = wasm_i32x4_extadd_pairwise_i16x8(h[i]);
    }
    const v128_t bias = wasm_i32x4_splat(8 * xsum[g]), d = wasm_f32x4_splat(xs[g]);
    for (int i = 0; i < 2 * S; i++) {
      float *yo = yy[i / 2] + 4 * (i % 2);
      const float *sc = ss[i / 2] + g * (file ? 8 : 32) + 4 * (i % 2);
      const v128_t f = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_sub(h[i], bias)), d);
      wasm_v128_store(yo, wasm_f32x4_add(wasm_v128_load(yo), wasm_f32x4_mul(f, wasm_v128_load(sc))));
    }
  }
}

/* The GEMV as S streams: column j of stream i is i·N/S + j (N/S a multiple of 8). */
static void far_gemv(int S, int file, const uint8_t *q, const float *si) {
  const size_t PS = (size_t)KB * 8;
  const int64_t H = N / S;
  for (int64_t j = 0; j < H; j += 8) {
    const uint8_t *pp[4];
    const float *ss[4];
    float *yy[4];
    for (int i = 0; i < S; i++) {
      const int64_t c = i * H + j;
      pp[i] = q + (c / 8) * PS, yy[i] = y + c;
      ss[i] = file ? si + (c / 8) * NG * 8 : si + (c / 32) * NG * 32 + (c % 32);
    }
    if (S == 2) far_panels(2, file, pp, ss, yy);
    else far_panels(4, file, pp, ss, yy);
  }
}

/* which: 0 current (file layout), 1 pairs, 2 quads (16-bit dots), 3 quads (dot_add), 4 quads with 2
 * panels a step, 5 quads with 1 panel a step, 6 / 7 streamed with 1 / 2 panels a step, 8 a plain read of
 * the file layout's codes and scales (not a GEMV; after the activation quantization too), 9 quads with 1 panel
 * and 16 k a step, 10 quads with 2 panels N / 2 columns apart, 11 / 12 the file's layout and
 * the current kernel's step in 2 / 4 streams N / S columns apart, 13 / 14 the quads so, 15 a plain read in 4
 * streams (the codes in 4 quarters side by side, then the scales); copy: which of the C copies. The activation quantization is in every one. */
static void gemv(int which, int64_t copy) {
  const size_t PS = (size_t)KB * 8;
  tdm_q4_quantize_row(K, G, a, xq, xs, xsum);
  if (which == 0) {
    tdm_q4_gemv_dot__relaxed(N, K, G, xq, xs, xsum, q4 + copy * CB4, s4 + copy * CBS, y);
    return;
  }
  if (which == 8) { /* a plain read of the copy's codes and scales (4 accumulators, 64 bytes a step) */
    v128_t t0 = wasm_i32x4_splat(0), t1 = t0, t2 = t0, t3 = t0;
    for (int part = 0; part < 2; part++) {
      const uint8_t *b = part ? (const uint8_t *)(s4 + copy * CBS) : q4 + copy * CB4, *e = b + (part ? 4 * CBS : CB4);
      for (; b + 64 <= e; b += 64) {
        t0 = wasm_i32x4_add(t0, wasm_v128_load(b)), t1 = wasm_i32x4_add(t1, wasm_v128_load(b + 16));
        t2 = wasm_i32x4_add(t2, wasm_v128_load(b + 32)), t3 = wasm_i32x4_add(t3, wasm_v128_load(b + 48));
      }
    }
    y[0] = (float)wasm_i32x4_extract_lane(wasm_i32x4_add(wasm_i32x4_add(t0, t1), wasm_i32x4_add(t2, t3)), 0);
    return;
  }
  if (which == 6 || which == 7) {
    const int np = which == 6 ? 1 : 2;
    const uint8_t *q = (which == 6 ? qs1 : qs2) + copy * CBST1;
    for (int64_t j = 0; j < N; j += 8 * np)
      if (np == 1) stream_panels(1, q + (size_t)(j / 8) * NG * 160, y + j);
      else stream_panels(2, q + (size_t)(j / 8) * NG * 160, y + j);
    return;
  }
  if (which >= 11 && which <= 14) { /* 11 / 12 the file's layout in 2 / 4 streams, 13 / 14 the quads' */
    const int file = which <= 12, S = which % 2 ? 2 : 4;
    far_gemv(S, file, file ? q4 + copy * CB4 : qquad + copy * CB4, file ? s4 + copy * CBS : s4i + copy * CBS);
    return;
  }
  if (which == 15) { /* the plain read in 4 streams */
    v128_t t0 = wasm_i32x4_splat(0), t1 = t0, t2 = t0, t3 = t0;
    const size_t Q = CB4 / 4;
    for (size_t o = 0; o + 16 <= Q; o += 16) {
      const uint8_t *b = q4 + copy * CB4 + o;
      t0 = wasm_i32x4_add(t0, wasm_v128_load(b)), t1 = wasm_i32x4_add(t1, wasm_v128_load(b + Q));
      t2 = wasm_i32x4_add(t2, wasm_v128_load(b + 2 * Q)), t3 = wasm_i32x4_add(t3, wasm_v128_load(b + 3 * Q));
    }
    const uint8_t *b = (const uint8_t *)(s4 + copy * CBS), *e = b + 4 * CBS;
    for (; b + 64 <= e; b += 64) t0 = wasm_i32x4_add(t0, wasm_v128_load(b)), t1 = wasm_i32x4_add(t1, wasm_v128_load(b + 16));
    y[0] = (float)wasm_i32x4_extract_lane(wasm_i32x4_add(wasm_i32x4_add(t0, t1), wasm_i32x4_add(t2, t3)), 0);
    return;
  }
  const uint8_t *q = (which == 1 ? qpair : qquad) + copy * CB4;
  const float *si = s4i + copy * CBS;
  if (which == 10) { /* N / 2 is a multiple of 16 here (N a multiple of 32) */
    for (int64_t j = 0, H = N / 2; j < H; j += 8) {
      const int64_t j1 = j + H;
      quads_far2(q + (j / 8) * PS, q + (j1 / 8) * PS, si + (j / 32) * NG * 32 + (j % 32), si + (j1 / 32) * NG * 32 + (j1 % 32), y + j,
                 y + j1);
    }
    return;
  }
  for (int64_t j = 0; j < N; j += 32) {
    const uint8_t *p = q + (j / 8) * PS;
    const float *sj = si + (j / 32) * NG * 32;
    if (which == 1) pairs_panels(4, PS, p, sj, y + j);
    else if (which == 2) quads_panels(4, 1, 0, PS, p, sj, y + j);
    else if (which == 3) quads_panels(4, 1, 1, PS, p, sj, y + j);
    else if (which == 4) quads_panels(2, 1, 0, PS, p, sj, y + j), quads_panels(2, 1, 0, PS, p + 2 * PS, sj + 16, y + j + 16);
    else if (which == 5)
      for (int i = 0; i < 4; i++) quads_panels(1, 1, 0, PS, p + i * PS, sj + 8 * i, y + j + 8 * i);
    else
      for (int i = 0; i < 4; i++) quads_panels(1, 2, 0, PS, p + i * PS, sj + 8 * i, y + j + 8 * i);
  }
}

int has_dotadd(void) {
#ifdef Q4_DOTADD
  return 1;
#else
  return 0;
#endif
}

float run(int which, int reps, int start) {
  for (int i = 0; i < reps; i++) gemv(which, (start + i) % C);
  return y[N - 1];
}

/* bit i set when kernel i (1..7, 9..14) differs from the current kernel's bits, on copy 0 and the last; 1 when the
 * current kernel differs from its scalar reference */
int check(void) {
  int bad = 0;
  tdm_q4_quantize_row(K, G, a, xq, xs, xsum);
  tdm_q4_gemv_dot__scalar(N, K, G, xq, xs, xsum, q4, s4, y2);
  gemv(0, 0);
  bad |= memcmp(y, y2, 4 * (size_t)N) != 0;
  for (int w = 1; w <= 14; w++) {
    if (w == 8) continue;
#ifndef Q4_DOTADD
    if (w == 3) continue;
#endif
    for (int64_t c = 0; c < C; c += C - 1 > 0 ? C - 1 : 1) {
      gemv(w, c);
      bad |= (memcmp(y, y2, 4 * (size_t)N) != 0) << w;
    }
  }
  return bad;
}
