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
/* One block of 8 k of four columns (16 bytes, variants.h's int4 block: column c's codes of the block
 * in bytes 4c..4c + 3) into 16-bit sums: the low nibbles (k0, k0 + 2 | k0 + 4, k0 + 6 of column c in
 * byte pairs 2c | 2c + 1) dotted with xv[0] = [x[k0], x[k0 + 2], x[k0 + 4], x[k0 + 6]] in every 32-bit
 * lane, the high nibbles (k + 1) with xv[1]: lanes 2c and 2c + 1 both column c, each gaining at most
 * 4·127·15 = 7620 a block (4 blocks fit in 16 bits). The codes u = q + 8 are the dot's 7-bit operand. */
static inline v128_t q4_block_dot(v128_t v, v128_t x0, v128_t x1, v128_t h) {
  const v128_t m = wasm_i8x16_splat(0x0F);
  const v128_t lo = wasm_v128_and(v, m), hi = wasm_v128_and(wasm_u16x8_shr(v, 4), m);
  return wasm_i16x8_add(h, wasm_i16x8_add(tdm_relaxed_dot(x0, lo), tdm_relaxed_dot(x1, hi)));
}

/* The activations of q4_block_dot for K values of xq (its pad 0 at K, zeros past it): per block the
 * even k's four bytes, then the odd k's. */
static void q4_block_x8(int64_t K, const int8_t *xq, int8_t *x8) {
  for (int64_t k0 = 0; k0 < K; k0 += 8)
    for (int i = 0; i < 8; i++) {
      const int64_t k = k0 + (i < 4 ? 2 * i : 2 * (i - 4) + 1);
      x8[k0 + i] = k <= K ? xq[k] : 0;
    }
}

/* 16-bit sums widened every Q4_CHUNK k (4 blocks): column c's two lanes added (extadd_pairwise). */
#define Q4_CHUNK 32

/* R rows (1 to 4; row r's activations of q4_block_dot at x8 + r·K8, its xs and xsum at r·NG) by np
 * (1 or 2) whole panels from p (PS bytes apart), scales sc (SS floats apart), into y (8 columns
 * per panel, YS floats apart; row r's at r·ldy; the float totals live there: in registers they pushed
 * V8's allocation past its 15 xmm registers). Per group (whole blocks: G % 8 == 0) the exact int32
 * sum Σ xq·(q + 8) per column from −8·xsum[g]; then the group's total as the scalar reference adds
 * it (the integer sums are exact in any order, the float steps are the reference's). */
static inline __attribute__((always_inline)) void q4_dot_panels(int R, int np, int64_t K, int64_t K8, int64_t G, size_t PS, int64_t NG,
                                                                const int8_t *x8, const float *xs, const int32_t *xsum, const uint8_t *p,
                                                                const float *sc, size_t SS, float *y, size_t YS, int64_t ldy) {
  for (int r = 0; r < R; r++)
    for (int i = 0; i < 2 * np; i++) wasm_v128_store(y + r * ldy + (i / 2) * YS + (i % 2) * 4, wasm_f32x4_splat(0));
  for (int64_t g = 0; g < NG; g++) {
    const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
    v128_t s[4][4];
    for (int r = 0; r < R; r++)
      for (int i = 0; i < 2 * np; i++) s[r][i] = wasm_i32x4_splat(-8 * xsum[r * NG + g]);
    for (int64_t k = g * G; k < k1;) {
      const int64_t kend = k + Q4_CHUNK < k1 ? k + Q4_CHUNK : k1;
      const uint8_t *pk = p + (size_t)k * 4;
      v128_t h[4][4];
      for (int r = 0; r < R; r++)
        for (int i = 0; i < 2 * np; i++) h[r][i] = wasm_i16x8_splat(0);
      TDM_NO_UNROLL
      for (; k < kend; k += 8, pk += 32)
        for (int r = 0; r < R; r++) {
          const v128_t x0 = wasm_v128_load32_splat(x8 + r * K8 + k), x1 = wasm_v128_load32_splat(x8 + r * K8 + k + 4);
          for (int i = 0; i < 2 * np; i++) h[r][i] = q4_block_dot(wasm_v128_load(pk + (i / 2) * PS + (i % 2) * 16), x0, x1, h[r][i]);
        }
      for (int r = 0; r < R; r++)
        for (int i = 0; i < 2 * np; i++) s[r][i] = wasm_i32x4_add(s[r][i], wasm_i32x4_extadd_pairwise_i16x8(h[r][i]));
    }
    for (int r = 0; r < R; r++) {
      const v128_t d = wasm_f32x4_splat(xs[r * NG + g]);
      for (int i = 0; i < 2 * np; i++) {
        const v128_t f = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s[r][i]), d);
        float *yi = y + r * ldy + (i / 2) * YS + (i % 2) * 4;
        wasm_v128_store(yi, wasm_f32x4_add(wasm_v128_load(yi), wasm_f32x4_mul(f, wasm_v128_load(sc + (i / 2) * SS + g * 8 + (i % 2) * 4))));
      }
    }
  }
}

/* R rows' column walk: for one row two panels at a time from two runs of columns H = ⌊N / 16⌋·8
 * apart (each stream reads whole runs of panels one after the other; with four panels the step's
 * loads, which V8 issues first, and sums spill past its 15 vector registers), then every R one panel
 * at a time, a partial last one through a buffer. Each column's sums are the same either way. */
static inline __attribute__((always_inline)) void q4_dot_columns(int R, int64_t N, int64_t K, int64_t G, const int8_t *x8, const float *xs,
                                                                 const int32_t *xsum, const uint8_t *qp, const float *scale, float *y,
                                                                 int64_t ldy) {
  const int64_t NG = K / G + (K % G != 0), K8 = (K + 7) / 8 * 8;
  const size_t PS = TDM_Q4_BLOCK_BYTES(K), SS = (size_t)NG * 8;
  int64_t j = 0;
  if (R == 1) {
    const int64_t H = N / 16 * 8;
    for (; j < H; j += 8)
      q4_dot_panels(1, 2, K, K8, G, (size_t)(H / 8) * PS, NG, x8, xs, xsum, qp + (j / 8) * PS, scale + (j / 8) * SS, (size_t)(H / 8) * SS,
                    y + j, (size_t)H, ldy);
    j = 2 * H;
  }
  for (; j + 8 <= N; j += 8)
    q4_dot_panels(R, 1, K, K8, G, PS, NG, x8, xs, xsum, qp + (j / 8) * PS, scale + (j / 8) * SS, SS, y + j, 8, ldy);
  if (j < N) {
    float t[4 * 8];
    q4_dot_panels(R, 1, K, K8, G, PS, NG, x8, xs, xsum, qp + (j / 8) * PS, scale + (j / 8) * SS, SS, t, 8, 8);
    for (int r = 0; r < R; r++) memcpy(y + r * ldy + j, t + 8 * r, sizeof(float) * (size_t)(N - j));
  }
}

void tdm_q4_gemv_dot__relaxed(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum, const uint8_t *qp,
                              const float *scale, float *y) {
  int8_t x8[TDM_Q8_DOT_MAX_K];
  q4_block_x8(K, xq, x8);
  q4_dot_columns(1, N, K, G, x8, xs, xsum, qp, scale, y, 0);
}

/* Any number of rows, up to four at a time (row r's xq at r·(K + 1), its xs and xsum at r·NG). */
void tdm_q4_gemm_dot__relaxed(int64_t M, int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum,
                              const uint8_t *qp, const float *scale, float *y, int64_t ldy) {
  const int64_t NG = K / G + (K % G != 0), K8 = (K + 7) / 8 * 8;
  for (int64_t r0 = 0; r0 < M; r0 += 4) {
    const int64_t R = M - r0 < 4 ? M - r0 : 4;
    if (R * K8 > TDM_Q8_DOT_MAX_K + 64) {
      tdm_q4_gemm_dot__scalar(R, N, K, G, xq + r0 * (K + 1), xs + r0 * NG, xsum + r0 * NG, qp, scale, y + r0 * ldy, ldy);
      continue;
    }
    int8_t x8[TDM_Q8_DOT_MAX_K + 64];
    for (int64_t r = 0; r < R; r++) q4_block_x8(K, xq + (r0 + r) * (K + 1), x8 + r * K8);
    const int8_t *x = x8;
    const float *s = xs + r0 * NG;
    const int32_t *b = xsum + r0 * NG;
    float *yr = y + r0 * ldy;
    switch (R) {
      case 1: q4_dot_columns(1, N, K, G, x, s, b, qp, scale, yr, ldy); break;
      case 2: q4_dot_columns(2, N, K, G, x, s, b, qp, scale, yr, ldy); break;
      case 3: q4_dot_columns(3, N, K, G, x, s, b, qp, scale, yr, ldy); break;
      default: q4_dot_columns(4, N, K, G, x, s, b, qp, scale, yr, ldy); break;
    }
  }
}
#endif
