/* quant_relaxed.c — the quantized kernels on the relaxed integer dot product
 * (i16x8.relaxed_dot_i8x16_i7x16_s), compiled where the build has it (TDM_RELAXED_DOT, simd.h: both
 * relaxed wasm builds): the int4 integer-dot GEMV, bit for bit its scalar reference in
 * quant.c (operands kept in the range where every engine computes the dot exactly). Declared in
 * variants.h; config.c picks it; tests/c/kernel_selftest.c checks it. An int8 GEMV on the relaxed
 * dot is no faster than the SIMD128 one (it needs two relaxed dots per 16 weights), so int8 has none. */
#include "variants.h"
#include "vec.h"

#include <string.h>

#if TDM_RELAXED_DOT
/* Byte rows r, r + 1 of an int4 panel (k = 2r .. 2r + 3 of 8 columns) -> the codes biased to q + 8,
 * in the relaxed dot's pair layout: *a = [u(k, c), u(k + 1, c)] for c = 0..7, *b the same for k + 2,
 * k + 3 (the xor with 0x88 flips bit 3 of each nibble: q + 8; then a mask, a 16-bit shift, and two
 * byte interleaves). */
static inline void q4_codes4(v128_t bytes, v128_t *a, v128_t *b) {
  const v128_t m = wasm_i8x16_splat(0x0F), x = wasm_v128_xor(bytes, wasm_i8x16_splat((int8_t)0x88));
  const v128_t lo = wasm_v128_and(x, m), hi = wasm_v128_and(wasm_u16x8_shr(x, 4), m);
  *a = wasm_i8x16_shuffle(lo, hi, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  *b = wasm_i8x16_shuffle(lo, hi, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
}

/* One row (the decode step's GEMV, kept apart from the rows' kernel below, which is slower with one
 * row): np (1, 2 or 4) whole panels from p (PS bytes apart), scales sc (SS floats
 * apart), into y (8 columns per panel, YS floats apart). The float totals live in y (the loads and stores per group cost
 * little; in registers they pushed V8's allocation past its 15 xmm registers), and the pair loop
 * walks pointers (the int64 index and its k / 2 cost V8 about ten scalar instructions per step).
 * Per group: 16-bit sums of xq·(q + 8) over at most 16 k (each term at most 127·15 in magnitude:
 * 16 of them fit), widened into 32-bit sums, minus 8·xsum[g]; then the group's total as the scalar
 * reference adds it (the integer sums are exact in any order, the float steps are the reference's). */
static inline __attribute__((always_inline)) void q4_dot_panels1(int np, int64_t K, int64_t G, size_t PS, int64_t NG, const int8_t *xq,
                                                                 const float *xs, const int32_t *xsum, const uint8_t *p, const float *sc,
                                                                 size_t SS, float *y, size_t YS) {
  for (int i = 0; i < 2 * np; i++) wasm_v128_store(y + (i / 2) * YS + (i % 2) * 4, wasm_f32x4_splat(0));
  for (int64_t g = 0; g < NG; g++) {
    const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
    v128_t s[8];
    for (int i = 0; i < 2 * np; i++) s[i] = wasm_i32x4_splat(0);
    for (int64_t k = g * G; k < k1; k += 16) { /* g·G and k are multiples of 4: k / 2 is a whole byte row pair */
      const int64_t kend = k + 16 < k1 ? k + 16 : k1;
      const int8_t *xk = xq + k, *x4 = xq + k + ((kend - k) & ~(int64_t)3);
      const uint8_t *pk = p + (size_t)k * 4;
      v128_t h[4];
      for (int i = 0; i < np; i++) h[i] = wasm_i16x8_splat(0);
#pragma clang loop unroll(disable) /* unrolled, V8 issues every load first and spills */
      for (; xk < x4; xk += 4, pk += 16) {
        const v128_t x0 = wasm_v128_load16_splat(xk), x1 = wasm_v128_load16_splat(xk + 2);
        for (int i = 0; i < np; i++) {
          v128_t a, b;
          q4_codes4(wasm_v128_load(pk + i * PS), &a, &b);
          h[i] = wasm_i16x8_add(h[i], wasm_i16x8_add(tdm_relaxed_dot(x0, a), tdm_relaxed_dot(x1, b)));
        }
      }
      for (; xk < xq + kend; xk += 2, pk += 8) { /* one byte row at a time; past an odd K its high nibble meets the pad 0 of xq */
        const v128_t x0 = wasm_v128_load16_splat(xk);
        for (int i = 0; i < np; i++) {
          v128_t a, b;
          q4_codes4(wasm_v128_load64_zero(pk + i * PS), &a, &b);
          h[i] = wasm_i16x8_add(h[i], tdm_relaxed_dot(x0, a));
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
      const v128_t w = wasm_v128_load(sc + (i / 2) * SS + g * 8 + (i % 2) * 4);
      float *yi = y + (i / 2) * YS + (i % 2) * 4;
      wasm_v128_store(yi, wasm_f32x4_add(wasm_v128_load(yi), wasm_f32x4_mul(f, w)));
    }
  }
}

/* R rows (1 to 4; row r's xq at r·(K + 1), its xs and xsum at r·NG, its results at y + r·ldy) by np
 * (1 or 2) panels from p (KB byte rows apart), scales sc (NG·8 apart), n columns of each row
 * written. Per group: 16-bit sums of xq·(q + 8) over at most 16 k (each term at most 127·15 in
 * magnitude: 16 of them fit), widened into 32-bit sums, minus 8·xsum[g]; then the group's total as
 * the scalar reference adds it. Each byte row's codes are unpacked once for all R rows. */
static inline __attribute__((always_inline)) void q4_dot_panels(int R, int np, int64_t K, int64_t G, int64_t KB, int64_t NG,
                                                                const int8_t *xq, const float *xs, const int32_t *xsum, const uint8_t *p,
                                                                const float *sc, float *y, int64_t ldy, int64_t n) {
  const int64_t XP = K + 1;
  v128_t t[4][4];
  for (int r = 0; r < R; r++)
    for (int i = 0; i < 2 * np; i++) t[r][i] = wasm_f32x4_splat(0);
  for (int64_t g = 0; g < NG; g++) {
    const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
    v128_t s[4][4];
    for (int r = 0; r < R; r++)
      for (int i = 0; i < 2 * np; i++) s[r][i] = wasm_i32x4_splat(0);
    for (int64_t k = g * G; k < k1;) {
      const int64_t kend = k + 16 < k1 ? k + 16 : k1;
      v128_t h[4][2];
      for (int r = 0; r < R; r++) h[r][0] = h[r][1] = wasm_i16x8_splat(0);
      for (; k + 4 <= kend; k += 4) {
        v128_t x0[4], x1[4];
        for (int r = 0; r < R; r++) x0[r] = wasm_v128_load16_splat(xq + r * XP + k), x1[r] = wasm_v128_load16_splat(xq + r * XP + k + 2);
        for (int i = 0; i < np; i++) {
          v128_t a, b;
          q4_codes4(wasm_v128_load(p + i * KB * 8 + (k / 2) * 8), &a, &b);
          for (int r = 0; r < R; r++)
            h[r][i] = wasm_i16x8_add(h[r][i], wasm_i16x8_add(tdm_relaxed_dot(x0[r], a), tdm_relaxed_dot(x1[r], b)));
        }
      }
      for (; k < kend; k += 2) /* one byte row; past an odd K its high nibble meets the pad 0 of xq */
        for (int i = 0; i < np; i++) {
          v128_t a, b;
          q4_codes4(wasm_v128_load64_zero(p + i * KB * 8 + (k / 2) * 8), &a, &b);
          for (int r = 0; r < R; r++) h[r][i] = wasm_i16x8_add(h[r][i], tdm_relaxed_dot(wasm_v128_load16_splat(xq + r * XP + k), a));
        }
      for (int r = 0; r < R; r++)
        for (int i = 0; i < np; i++) {
          s[r][2 * i] = wasm_i32x4_add(s[r][2 * i], wasm_i32x4_extend_low_i16x8(h[r][i]));
          s[r][2 * i + 1] = wasm_i32x4_add(s[r][2 * i + 1], wasm_i32x4_extend_high_i16x8(h[r][i]));
        }
    }
    for (int r = 0; r < R; r++) {
      const v128_t bias = wasm_i32x4_splat(8 * xsum[r * NG + g]), d = wasm_f32x4_splat(xs[r * NG + g]);
      for (int i = 0; i < 2 * np; i++) {
        const v128_t f = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_sub(s[r][i], bias)), d);
        t[r][i] = wasm_f32x4_add(t[r][i], wasm_f32x4_mul(f, wasm_v128_load(sc + (i / 2) * NG * 8 + g * 8 + (i % 2) * 4)));
      }
    }
  }
  for (int r = 0; r < R; r++) {
    tdm_store8(y + r * ldy, t[r][0], t[r][1], n);
    if (np > 1) tdm_store8(y + r * ldy + 8, t[r][2], t[r][3], n - 8);
  }
}

/* Two panels side by side for up to two rows, one for three or four, then a last single panel. */
#define Q4_DOT_COLUMNS(R, NP) \
  do { \
    for (; j + 8 * (NP - 1) < N; j += 8 * NP) \
      q4_dot_panels(R, NP, K, G, KB, NG, xq, xs, xsum, qp + (j / 8) * KB * 8, scale + (j / 8) * NG * 8, y + j, ldy, N - j); \
  } while (0)

static void q4_dot_4rows(int64_t M, int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum,
                         const uint8_t *qp, const float *scale, float *y, int64_t ldy) {
  const int64_t KB = (K + 1) / 2, NG = K / G + (K % G != 0);
  int64_t j = 0;
  switch (M) {
    case 1: tdm_q4_gemv_dot__relaxed(N, K, G, xq, xs, xsum, qp, scale, y); break;
    case 2:
      Q4_DOT_COLUMNS(2, 2);
      Q4_DOT_COLUMNS(2, 1);
      break;
    case 3: Q4_DOT_COLUMNS(3, 1); break;
    case 4: Q4_DOT_COLUMNS(4, 1); break;
    default: tdm_q4_gemm_dot__scalar(M, N, K, G, xq, xs, xsum, qp, scale, y, ldy);
  }
}

/* Any number of rows, four at a time. */
void tdm_q4_gemm_dot__relaxed(int64_t M, int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum,
                              const uint8_t *qp, const float *scale, float *y, int64_t ldy) {
  const int64_t NG = K / G + (K % G != 0);
  for (int64_t r = 0; r < M; r += 4)
    q4_dot_4rows(M - r < 4 ? M - r : 4, N, K, G, xq + r * (K + 1), xs + r * NG, xsum + r * NG, qp, scale, y + r * ldy, ldy);
}

void tdm_q4_gemv_dot__relaxed(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum, const uint8_t *qp,
                              const float *scale, float *y) {
  const int64_t KB = (K + 1) / 2, NG = K / G + (K % G != 0);
  const size_t PS = (size_t)KB * 8, SS = (size_t)NG * 8;
  /* Four panels at a time, from four streams H columns apart (the columns in four runs): each stream
   * reads whole runs of panels one after the other, which from memory is faster than four adjacent
   * panels; then two, one and a partial panel side by side. Each column's sums are the same either way. */
  const int64_t H = N / 32 * 8;
  for (int64_t j = 0; j < H; j += 8)
    q4_dot_panels1(4, K, G, (size_t)(H / 8) * PS, NG, xq, xs, xsum, qp + (j / 8) * PS, scale + (j / 8) * SS, (size_t)(H / 8) * SS, y + j,
                   (size_t)H);
  int64_t j = 4 * H;
  for (; j + 16 <= N; j += 16) q4_dot_panels1(2, K, G, PS, NG, xq, xs, xsum, qp + (j / 8) * PS, scale + (j / 8) * SS, SS, y + j, 8);
  for (; j + 8 <= N; j += 8) q4_dot_panels1(1, K, G, PS, NG, xq, xs, xsum, qp + (j / 8) * PS, scale + (j / 8) * SS, SS, y + j, 8);
  if (j < N) {
    float t[8];
    q4_dot_panels1(1, K, G, PS, NG, xq, xs, xsum, qp + (j / 8) * PS, scale + (j / 8) * SS, SS, t, 8);
    memcpy(y + j, t, sizeof(float) * (size_t)(N - j));
  }
}
#endif
