/* quant_q4_simd128.c — the SIMD128 int4 integer-dot GEMVs (declared in variants.h beside their scalar
 * references in quant.c; quant_simd128.c holds the float-lane int4 kernels): every build without the
 * relaxed dot runs them (config.c picks them; natively on x86-64 the AVX2 twin in quant_x86.c where
 * the CPU has it). tests/c/kernel_selftest.c checks them bit for bit against the references. */
#include "variants.h"

#include <string.h>

#if TDM_SIMD128
#include "vec.h"

/* One block of 8 k of four columns (16 bytes, variants.h's int4 block): as 16-bit lanes, column c's
 * codes u = q + 8 of k0 + p (lane 2c) and k0 + 4 + p (lane 2c + 1) sit in bits 4p..4p + 3. A mask
 * leaves each position's codes times 16^p (the last, a shift right by 12: times 1), and i32x4.dot_i16x8_s
 * by activations scaled to match (xv[p] = tdm_q4_block_x16's pair p in every 32-bit lane) adds 256·u·xq of column c's eight k into lane c: one mask and one dot product
 * per 8 weights, no shuffle. Each lane gains at most 8·15·127·256 < 2^22.9 a block. */
static inline v128_t q4_block_dot(v128_t v, const v128_t *xv, v128_t acc) {
  const v128_t d0 = wasm_i32x4_dot_i16x8(wasm_v128_and(v, wasm_i16x8_splat(0x000F)), xv[0]);
  const v128_t d1 = wasm_i32x4_dot_i16x8(wasm_v128_and(v, wasm_i16x8_splat(0x00F0)), xv[1]);
  const v128_t d2 = wasm_i32x4_dot_i16x8(wasm_v128_and(v, wasm_i16x8_splat(0x0F00)), xv[2]);
  const v128_t d3 = wasm_i32x4_dot_i16x8(wasm_u16x8_shr(v, 12), xv[3]);
  return wasm_i32x4_add(acc, wasm_i32x4_add(wasm_i32x4_add(d0, d1), wasm_i32x4_add(d2, d3)));
}

/* The one-row GEMV's np (1 or 2) whole panels from p (PS bytes apart), scales sc (SS floats apart),
 * into y (8 columns per panel, YS floats apart): per group (whole blocks: G % 8 == 0) the exact sum
 * Σ xq·q per column (times 256 where whole: tdm_q4_whole), then the group's total as the scalar
 * reference adds it.
 * Two panels at most: V8 issues a step's loads first, and the step's 4 blocks, 4 sums, 4 activation
 * pairs and 3 masks are what its 15 vector registers hold without spilling. */
static inline __attribute__((always_inline)) void q4_dot_panels(int whole, int np, int64_t K, int64_t G, size_t PS, int64_t NG,
                                                                const int16_t *x16, const float *xs, const int32_t *xsum, const uint8_t *p,
                                                                const float *sc, size_t SS, float *y, size_t YS) {
  v128_t t[4], pf = wasm_f32x4_splat(0);
  for (int i = 0; i < 2 * np; i++) t[i] = wasm_f32x4_splat(0);
  const int16_t *xk = x16;
  const uint8_t *pk = p;
  for (int64_t g = 0; g < NG; g++) {
    const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
    for (int i = 0; i < np; i++) pf = tdm_touch_ahead(pf, p + i * PS, (size_t)(pk - p), TDM_Q4_BLOCK_BYTES(K)); /* vec.h */
    const int16_t *xe = x16 + k1 + (-k1 & 7);
    v128_t s[4], h[4];
    for (int i = 0; i < 2 * np; i++) s[i] = wasm_i32x4_splat(-8 * xsum[g]), h[i] = wasm_i32x4_splat(whole ? -2048 * xsum[g] : 0);
    while (xk < xe) { /* the pointers walk: an int64 k costs V8 scalar work */
      const int16_t *xc = whole || xe - xk <= TDM_Q4_WHOLE ? xe : xk + TDM_Q4_WHOLE;
      TDM_NO_UNROLL
      for (; xk < xc; xk += 8, pk += 32) {
        const v128_t xv[4] = {wasm_v128_load32_splat(xk), wasm_v128_load32_splat(xk + 2), wasm_v128_load32_splat(xk + 4),
                              wasm_v128_load32_splat(xk + 6)};
        for (int i = 0; i < np; i++) {
          h[2 * i] = q4_block_dot(wasm_v128_load(pk + i * PS), xv, h[2 * i]);
          h[2 * i + 1] = q4_block_dot(wasm_v128_load(pk + i * PS + 16), xv, h[2 * i + 1]);
        }
      }
      if (!whole)
        for (int i = 0; i < 2 * np; i++) s[i] = wasm_i32x4_add(s[i], wasm_i32x4_shr(h[i], 8)), h[i] = wasm_i32x4_splat(0);
    }
    const v128_t d = wasm_f32x4_splat(whole ? xs[g] * 0x1p-8f : xs[g]);
    for (int i = 0; i < 2 * np; i++) {
      const v128_t f = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(whole ? h[i] : s[i]), d);
      t[i] = wasm_f32x4_add(t[i], wasm_f32x4_mul(f, wasm_v128_load(sc + (i / 2) * SS + g * 8 + (i % 2) * 4)));
    }
  }
  tdm_touch_end(pf);
  for (int i = 0; i < 2 * np; i++) wasm_v128_store(y + (i / 2) * YS + (i % 2) * 4, t[i]);
}

/* The GEMV's columns: two panels at a time from two runs of columns H = ⌊N / 16⌋·8 apart (two
 * sequential streams), then one and a partial panel; each column's sums are the same either way. */
static inline __attribute__((always_inline)) void q4_gemv_columns(int whole, int64_t N, int64_t K, int64_t G, int64_t NG,
                                                                  const int16_t *x16, const float *xs, const int32_t *xsum,
                                                                  const uint8_t *qp, const float *scale, float *y) {
  const size_t PS = TDM_Q4_BLOCK_BYTES(K), SS = (size_t)NG * 8;
  const int64_t H = N / 16 * 8;
  for (int64_t j = 0; j < H; j += 8)
    q4_dot_panels(whole, 2, K, G, (size_t)(H / 8) * PS, NG, x16, xs, xsum, qp + (j / 8) * PS, scale + (j / 8) * SS, (size_t)(H / 8) * SS,
                  y + j, (size_t)H);
  int64_t j = 2 * H;
  for (; j + 8 <= N; j += 8) q4_dot_panels(whole, 1, K, G, PS, NG, x16, xs, xsum, qp + (j / 8) * PS, scale + (j / 8) * SS, SS, y + j, 8);
  if (j < N) {
    float t[8];
    q4_dot_panels(whole, 1, K, G, PS, NG, x16, xs, xsum, qp + (j / 8) * PS, scale + (j / 8) * SS, SS, t, 8);
    memcpy(y + j, t, sizeof(float) * (size_t)(N - j));
  }
}

void tdm_q4_gemv_dot__simd128(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum, const uint8_t *qp,
                              const float *scale, float *y) {
  const int64_t NG = K / G + (K % G != 0);
  int16_t x16[TDM_Q8_DOT_MAX_K];
  tdm_q4_block_x16(K, xq, x16);
  if (tdm_q4_whole(G, NG, xs)) q4_gemv_columns(1, N, K, G, NG, x16, xs, xsum, qp, scale, y);
  else q4_gemv_columns(0, N, K, G, NG, x16, xs, xsum, qp, scale, y);
}

/* R rows (2 to 4; row r's activations of q4_block_dot at x16 + r·K8, its xs and xsum at r·NG) of one
 * panel, n of its columns written at y + r·ldy: as the GEMV (whole as there), each block's codes
 * masked once for all rows. */
static inline __attribute__((always_inline)) void q4_dot_rows_panel(int whole, int R, int64_t K, int64_t K8, int64_t G, int64_t NG,
                                                                    const int16_t *x16, const float *xs, const int32_t *xsum,
                                                                    const uint8_t *p, const float *sc, float *y, int64_t ldy, int64_t n) {
  v128_t t[4][2], pf = wasm_f32x4_splat(0);
  for (int r = 0; r < R; r++) t[r][0] = t[r][1] = wasm_f32x4_splat(0);
  for (int64_t g = 0; g < NG; g++) {
    const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
    pf = tdm_touch_ahead(pf, p, (size_t)(g * G) * 4, TDM_Q4_BLOCK_BYTES(K)); /* vec.h */
    v128_t s[4][2], h[4][2];
    for (int r = 0; r < R; r++) {
      s[r][0] = s[r][1] = wasm_i32x4_splat(-8 * xsum[r * NG + g]);
      h[r][0] = h[r][1] = wasm_i32x4_splat(whole ? -2048 * xsum[r * NG + g] : 0);
    }
    for (int64_t k = g * G; k < k1;) {
      const int64_t kend = whole || k1 - k <= TDM_Q4_WHOLE ? k1 : k + TDM_Q4_WHOLE;
      for (; k < kend; k += 8)
        for (int c = 0; c < 2; c++) {
          const v128_t v = wasm_v128_load(p + (size_t)k * 4 + 16 * c);
          const v128_t w0 = wasm_v128_and(v, wasm_i16x8_splat(0x000F)), w1 = wasm_v128_and(v, wasm_i16x8_splat(0x00F0));
          const v128_t w2 = wasm_v128_and(v, wasm_i16x8_splat(0x0F00)), w3 = wasm_u16x8_shr(v, 12);
          for (int r = 0; r < R; r++) {
            const int16_t *xr = x16 + r * K8 + k;
            const v128_t d0 = wasm_i32x4_dot_i16x8(w0, wasm_v128_load32_splat(xr)),
                         d1 = wasm_i32x4_dot_i16x8(w1, wasm_v128_load32_splat(xr + 2));
            const v128_t d2 = wasm_i32x4_dot_i16x8(w2, wasm_v128_load32_splat(xr + 4)),
                         d3 = wasm_i32x4_dot_i16x8(w3, wasm_v128_load32_splat(xr + 6));
            h[r][c] = wasm_i32x4_add(h[r][c], wasm_i32x4_add(wasm_i32x4_add(d0, d1), wasm_i32x4_add(d2, d3)));
          }
        }
      if (!whole)
        for (int r = 0; r < R; r++)
          for (int c = 0; c < 2; c++) s[r][c] = wasm_i32x4_add(s[r][c], wasm_i32x4_shr(h[r][c], 8)), h[r][c] = wasm_i32x4_splat(0);
    }
    for (int r = 0; r < R; r++) {
      const v128_t d = wasm_f32x4_splat(whole ? xs[r * NG + g] * 0x1p-8f : xs[r * NG + g]);
      for (int c = 0; c < 2; c++)
        t[r][c] = wasm_f32x4_add(
            t[r][c],
            wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_convert_i32x4(whole ? h[r][c] : s[r][c]), d), wasm_v128_load(sc + g * 8 + 4 * c)));
    }
  }
  tdm_touch_end(pf);
  for (int r = 0; r < R; r++) tdm_store8(y + r * ldy, t[r][0], t[r][1], n);
}

/* 2 to 4 rows' panels one after another. */
static inline __attribute__((always_inline)) void q4_rows_panels(int whole, int64_t M, int64_t N, int64_t K, int64_t K8, int64_t G,
                                                                 int64_t NG, const int16_t *x16, const float *xs, const int32_t *xsum,
                                                                 const uint8_t *qp, const float *scale, float *y, int64_t ldy) {
  const int64_t PB = TDM_Q4_BLOCK_BYTES(K);
  for (int64_t j = 0; j < N; j += 8) {
    const uint8_t *p = qp + (j / 8) * PB;
    const float *sc = scale + (j / 8) * NG * 8;
    switch (M) {
      case 2: q4_dot_rows_panel(whole, 2, K, K8, G, NG, x16, xs, xsum, p, sc, y + j, ldy, N - j); break;
      case 3: q4_dot_rows_panel(whole, 3, K, K8, G, NG, x16, xs, xsum, p, sc, y + j, ldy, N - j); break;
      default: q4_dot_rows_panel(whole, 4, K, K8, G, NG, x16, xs, xsum, p, sc, y + j, ldy, N - j); break;
    }
  }
}

/* 1 to 4 rows (row r's xq at r·(K + 1)); one row goes to the GEMV above. */
static void q4_dot_4rows(int64_t M, int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum,
                         const uint8_t *qp, const float *scale, float *y, int64_t ldy) {
  const int64_t NG = K / G + (K % G != 0), K8 = (K + 7) / 8 * 8;
  if (M == 1) {
    tdm_q4_gemv_dot__simd128(N, K, G, xq, xs, xsum, qp, scale, y);
    return;
  }
  if (M < 1 || M > 4 || M * K8 > TDM_Q8_DOT_MAX_K + 64) {
    tdm_q4_gemm_dot__scalar(M, N, K, G, xq, xs, xsum, qp, scale, y, ldy);
    return;
  }
  int16_t x16[TDM_Q8_DOT_MAX_K + 64];
  for (int64_t r = 0; r < M; r++) tdm_q4_block_x16(K, xq + r * (K + 1), x16 + r * K8);
  if (tdm_q4_whole(G, M * NG, xs)) q4_rows_panels(1, M, N, K, K8, G, NG, x16, xs, xsum, qp, scale, y, ldy);
  else q4_rows_panels(0, M, N, K, K8, G, NG, x16, xs, xsum, qp, scale, y, ldy);
}

/* Any number of rows, four at a time. */
void tdm_q4_gemm_dot__simd128(int64_t M, int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum,
                              const uint8_t *qp, const float *scale, float *y, int64_t ldy) {
  const int64_t NG = K / G + (K % G != 0);
  for (int64_t r = 0; r < M; r += 4)
    q4_dot_4rows(M - r < 4 ? M - r : 4, N, K, G, xq + r * (K + 1), xs + r * NG, xsum + r * NG, qp, scale, y + r * ldy, ldy);
}

#endif
