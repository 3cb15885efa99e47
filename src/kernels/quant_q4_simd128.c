/* quant_q4_simd128.c — the SIMD128 int4 integer-dot GEMVs (declared in variants.h beside their scalar
 * references in quant.c; quant_simd128.c holds the float-lane int4 kernels): every build without the
 * relaxed dot runs them (config.c picks them; natively on x86-64 the one-row AVX2 twin in quant_x86.c
 * where the CPU has it). tests/c/kernel_selftest.c checks them bit for bit against the references. */
#include "variants.h"

#include <string.h>

#if TDM_SIMD128
#include "vec.h"

#ifdef __clang__
#define Q4_NO_UNROLL _Pragma("clang loop unroll(disable)")
#else
#define Q4_NO_UNROLL
#endif

/* One byte row (8 columns, k even in the low nibbles, k + 1 in the high) -> two u16x8 of q + 8. */
static inline void q4_unpack8(const uint8_t *p, v128_t *w0, v128_t *w1) {
  const v128_t m = wasm_i8x16_splat(0x0F), x = wasm_v128_xor(wasm_v128_load64_zero(p), wasm_i8x16_splat((int8_t)0x88));
  *w0 = wasm_u16x8_extend_low_u8x16(wasm_v128_and(x, m));
  *w1 = wasm_u16x8_extend_low_u8x16(wasm_v128_and(wasm_u16x8_shr(x, 4), m));
}

/* The int4 integer-dot GEMVs on SIMD128 alone (every build without the relaxed dot; variants.h):
 * exact int32 sums per group of the codes times the int8 activations, then the group totals added
 * as the scalar reference adds them, so the same bits. */

/* One step of 4 k (byte rows k/2 and k/2 + 1 of a panel, 16 bytes) for one panel, with no byte
 * shuffle: each 16-bit lane i < 4 of v holds columns 2i and 2i + 1 at k (bits 0-3, 8-11) and k + 1
 * (bits 4-7, 12-15), lane i + 4 the same at k + 2 and k + 3. A shift left and an arithmetic shift
 * right by 12 leave each nibble's signed code in its lane; i16x8.mul by the activations (xa: x[k] in
 * lanes 0-3, x[k + 2] in 4-7; xb: x[k + 1], x[k + 3]) and the adds give 16-bit sums for the even
 * columns 0, 2, 4, 6 (*he) and the odd ones (*ho), lanes i and i + 4 both column 2i (+ 1). Each step
 * adds at most 2·8·127 = 2032 in magnitude to a lane: 16 steps (64 k) fit in 16 bits. */
static inline void q4_mul_step(v128_t v, v128_t xa, v128_t xb, v128_t *he, v128_t *ho) {
  const v128_t a = wasm_i16x8_shr(wasm_i16x8_shl(v, 12), 12), b = wasm_i16x8_shr(wasm_i16x8_shl(v, 8), 12);
  const v128_t c = wasm_i16x8_shr(wasm_i16x8_shl(v, 4), 12), d = wasm_i16x8_shr(v, 12);
  *he = wasm_i16x8_add(*he, wasm_i16x8_add(wasm_i16x8_mul(a, xa), wasm_i16x8_mul(b, xb)));
  *ho = wasm_i16x8_add(*ho, wasm_i16x8_add(wasm_i16x8_mul(c, xa), wasm_i16x8_mul(d, xb)));
}

/* The activation vectors of q4_mul_step from e = [x[k], x[k + 1], x[k + 2], x[k + 3], ...] as i16:
 * the pairs spread by an i32 shuffle (pshufd), then each 32-bit lane's low or high half copied into
 * both halves by shifts (an i16 shuffle of that pattern becomes pshufb with a mask V8 builds in
 * every step). */
static inline void q4_mul_x(v128_t e, v128_t *xa, v128_t *xb) {
  const v128_t t = wasm_i32x4_shuffle(e, e, 0, 0, 1, 1), lo = wasm_i32x4_shl(t, 16), hi = wasm_u32x4_shr(t, 16);
  *xa = wasm_v128_or(lo, wasm_u32x4_shr(lo, 16));
  *xb = wasm_v128_or(hi, wasm_i32x4_shl(hi, 16));
}

/* The one-row GEMV's np (1, 2 or 4) whole panels from p (PS bytes apart), scales sc (SS floats
 * apart), into y (8 columns per panel, YS floats apart; the float totals live there, as in
 * quant_relaxed.c's, so that V8 keeps the step's values in registers). Per group, in chunks of at
 * most 64 k: q4_mul_step's 16-bit sums, widened into the group's int32 sums (lanes i and i + 4
 * together); then the group's total in column order, as the scalar reference adds it. With pre (a
 * constant at every call), each step's activation vectors are read from xv (q4_mul_xv), else made
 * from xq in the step. */
static inline __attribute__((always_inline)) void q4_mul_panels(int pre, const v128_t *xv, int np, int64_t K, int64_t G, size_t PS,
                                                                int64_t NG, const int8_t *xq, const float *xs, const uint8_t *p,
                                                                const float *sc, size_t SS, float *y, size_t YS) {
  for (int i = 0; i < 2 * np; i++) wasm_v128_store(y + (i / 2) * YS + (i % 2) * 4, wasm_f32x4_splat(0));
  for (int64_t g = 0; g < NG; g++) {
    const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
    v128_t s[8];
    for (int i = 0; i < 2 * np; i++) s[i] = wasm_i32x4_splat(0);
    for (int64_t k = g * G; k < k1;) { /* g·G and k are multiples of 4: k / 2 is a whole byte row pair */
      const int64_t kend = k + 64 < k1 ? k + 64 : k1;
      const int8_t *xk = xq + k, *x4 = xq + k + ((kend - k) & ~(int64_t)3);
      const uint8_t *pk = p + (size_t)k * 4;
      const v128_t *xp = pre ? xv + k / 2 : NULL;
      v128_t h[8];
      for (int i = 0; i < 2 * np; i++) h[i] = wasm_i16x8_splat(0);
      Q4_NO_UNROLL /* unrolled, V8 issues every load first and spills */
          for (; xk < x4; xk += 4, pk += 16) {
        v128_t xa, xb;
        if (pre) xa = xp[0], xb = xp[1], xp += 2;
        else q4_mul_x(wasm_i16x8_extend_low_i8x16(wasm_v128_load32_zero(xk)), &xa, &xb);
        for (int i = 0; i < np; i++) q4_mul_step(wasm_v128_load(pk + i * PS), xa, xb, &h[2 * i], &h[2 * i + 1]);
      }
      if (xk + 3 == xq + kend) { /* 3 k left, the end of an odd K: its last high nibble meets the pad 0 of xq */
        v128_t xa, xb;
        if (pre) xa = xp[0], xb = xp[1];
        else q4_mul_x(wasm_i16x8_extend_low_i8x16(wasm_v128_load32_zero(xk)), &xa, &xb);
        for (int i = 0; i < np; i++) q4_mul_step(wasm_v128_load(pk + i * PS), xa, xb, &h[2 * i], &h[2 * i + 1]);
      } else if (xk < xq + kend) { /* 1 or 2 k left: one byte row (lanes 4-7 zero), x[k + 1] the pad 0 past an odd K */
        v128_t xa, xb;
        if (pre) xa = xp[0], xb = xp[1];
        else q4_mul_x(wasm_i16x8_extend_low_i8x16(wasm_v128_load16_splat(xk)), &xa, &xb);
        for (int i = 0; i < np; i++) q4_mul_step(wasm_v128_load64_zero(pk + i * PS), xa, xb, &h[2 * i], &h[2 * i + 1]);
      }
      k = kend;
      for (int i = 0; i < 2 * np; i++)
        s[i] = wasm_i32x4_add(s[i], wasm_i32x4_add(wasm_i32x4_extend_low_i16x8(h[i]), wasm_i32x4_extend_high_i16x8(h[i])));
    }
    const v128_t d = wasm_f32x4_splat(xs[g]);
    for (int i = 0; i < np; i++) {
      const v128_t fe = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s[2 * i]), d),
                   fo = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s[2 * i + 1]), d);
      const float *w = sc + i * SS + g * 8;
      float *yi = y + i * YS;
      wasm_v128_store(yi, wasm_f32x4_add(wasm_v128_load(yi), wasm_f32x4_mul(wasm_i32x4_shuffle(fe, fo, 0, 4, 1, 5), wasm_v128_load(w))));
      wasm_v128_store(
          yi + 4, wasm_f32x4_add(wasm_v128_load(yi + 4), wasm_f32x4_mul(wasm_i32x4_shuffle(fe, fo, 2, 6, 3, 7), wasm_v128_load(w + 4))));
    }
  }
}

/* The GEMV's column walk (pre and xv as q4_mul_panels'): four panels at a time from four runs of
 * columns H = ⌊N / 32⌋·8 apart (four sequential streams, as the int8 GEMV's), then two, one and a
 * partial panel side by side; each column's sums are the same either way. */
static inline __attribute__((always_inline)) void q4_mul_columns(int pre, const v128_t *xv, int64_t N, int64_t K, int64_t G,
                                                                 const int8_t *xq, const float *xs, const uint8_t *qp, const float *scale,
                                                                 float *y) {
  const int64_t KB = (K + 1) / 2, NG = K / G + (K % G != 0);
  const size_t PS = (size_t)KB * 8, SS = (size_t)NG * 8;
  const int64_t H = N / 32 * 8;
  for (int64_t j = 0; j < H; j += 8)
    q4_mul_panels(pre, xv, 4, K, G, (size_t)(H / 8) * PS, NG, xq, xs, qp + (j / 8) * PS, scale + (j / 8) * SS, (size_t)(H / 8) * SS, y + j,
                  (size_t)H);
  int64_t j = 4 * H;
  for (; j + 16 <= N; j += 16) q4_mul_panels(pre, xv, 2, K, G, PS, NG, xq, xs, qp + (j / 8) * PS, scale + (j / 8) * SS, SS, y + j, 8);
  for (; j + 8 <= N; j += 8) q4_mul_panels(pre, xv, 1, K, G, PS, NG, xq, xs, qp + (j / 8) * PS, scale + (j / 8) * SS, SS, y + j, 8);
  if (j < N) {
    float t[8];
    q4_mul_panels(pre, xv, 1, K, G, PS, NG, xq, xs, qp + (j / 8) * PS, scale + (j / 8) * SS, SS, t, 8);
    memcpy(y + j, t, sizeof(float) * (size_t)(N - j));
  }
}

/* Up to this K the GEMV makes every step's activation vectors once, before the walk, in a 16 KiB
 * stack buffer (two vectors per 4 k): the steps then load them instead of spreading x in each. */
#define Q4_XV_MAX_K 2048

void tdm_q4_gemv_dot__simd128(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum, const uint8_t *qp,
                              const float *scale, float *y) {
  (void)xsum;
  if (K > Q4_XV_MAX_K) {
    q4_mul_columns(0, NULL, N, K, G, xq, xs, qp, scale, y);
    return;
  }
  v128_t xv[Q4_XV_MAX_K / 2];
  for (int64_t k = 0; k < K; k += 4) { /* past K: the pad 0 of xq, then zeros */
    int8_t x4[4] = {0, 0, 0, 0};
    memcpy(x4, xq + k, (size_t)(K + 1 - k < 4 ? K + 1 - k : 4));
    q4_mul_x(wasm_i16x8_extend_low_i8x16(wasm_v128_load32_zero(x4)), &xv[k / 2], &xv[k / 2 + 1]);
  }
  q4_mul_columns(1, xv, N, K, G, xq, xs, qp, scale, y);
}

/* The rows' kernel (2 to 4 rows at once): per pair of k the codes q + 8 of both k interleaved as
 * 16-bit lanes (column c's two codes adjacent) and dotted with each row's activation pair by
 * i32x4.dot_i16x8_s, exact int32 sums per group, minus 8·xsum[g], then the group total added as the
 * scalar reference does; one row goes to the GEMV above. */
/* R rows (1 to 4, row r's xq at r·(K + 1), xs and xsum at r·NG, results at y + r·ldy) of one panel:
 * each byte row's codes unpacked and interleaved once for all rows. */
static inline __attribute__((always_inline)) void q4_dot_i16_panel(int R, int64_t K, int64_t G, int64_t NG, const int8_t *xq,
                                                                   const float *xs, const int32_t *xsum, const uint8_t *p, const float *sc,
                                                                   float *y, int64_t ldy, int64_t n) {
  const int64_t XP = K + 1;
  v128_t t[4][2];
  for (int r = 0; r < R; r++) t[r][0] = t[r][1] = wasm_f32x4_splat(0);
  for (int64_t g = 0; g < NG; g++) {
    const int64_t k1 = (g + 1) * G < K ? (g + 1) * G : K;
    v128_t s[4][2];
    for (int r = 0; r < R; r++) s[r][0] = s[r][1] = wasm_i32x4_splat(0);
    for (int64_t k = g * G; k < k1; k += 2) { /* past an odd K the high nibble meets the pad 0 of xq */
      v128_t w0, w1;
      q4_unpack8(p + (k / 2) * 8, &w0, &w1);
      const v128_t lo = wasm_i16x8_shuffle(w0, w1, 0, 8, 1, 9, 2, 10, 3, 11), hi = wasm_i16x8_shuffle(w0, w1, 4, 12, 5, 13, 6, 14, 7, 15);
      for (int r = 0; r < R; r++) {
        const int8_t *xr = xq + r * XP;
        const v128_t x = wasm_i32x4_splat((int32_t)(uint16_t)(int16_t)xr[k] | (int32_t)((uint32_t)(uint16_t)(int16_t)xr[k + 1] << 16));
        s[r][0] = wasm_i32x4_add(s[r][0], wasm_i32x4_dot_i16x8(lo, x));
        s[r][1] = wasm_i32x4_add(s[r][1], wasm_i32x4_dot_i16x8(hi, x));
      }
    }
    for (int r = 0; r < R; r++) {
      const v128_t bias = wasm_i32x4_splat(8 * xsum[r * NG + g]), d = wasm_f32x4_splat(xs[r * NG + g]);
      t[r][0] = wasm_f32x4_add(
          t[r][0], wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_sub(s[r][0], bias)), d), wasm_v128_load(sc + g * 8)));
      t[r][1] = wasm_f32x4_add(
          t[r][1],
          wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_sub(s[r][1], bias)), d), wasm_v128_load(sc + g * 8 + 4)));
    }
  }
  for (int r = 0; r < R; r++) tdm_store8(y + r * ldy, t[r][0], t[r][1], n);
}

static void q4_dot_i16_4rows(int64_t M, int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum,
                             const uint8_t *qp, const float *scale, float *y, int64_t ldy) {
  const int64_t KB = (K + 1) / 2, NG = K / G + (K % G != 0);
  if (M == 1) {
    tdm_q4_gemv_dot__simd128(N, K, G, xq, xs, xsum, qp, scale, y);
    return;
  }
  if (M < 1 || M > 4) {
    tdm_q4_gemm_dot__scalar(M, N, K, G, xq, xs, xsum, qp, scale, y, ldy);
    return;
  }
  for (int64_t j = 0; j < N; j += 8) {
    const uint8_t *p = qp + (j / 8) * KB * 8;
    const float *sc = scale + (j / 8) * NG * 8;
    switch (M) {
      case 2: q4_dot_i16_panel(2, K, G, NG, xq, xs, xsum, p, sc, y + j, ldy, N - j); break;
      case 3: q4_dot_i16_panel(3, K, G, NG, xq, xs, xsum, p, sc, y + j, ldy, N - j); break;
      default: q4_dot_i16_panel(4, K, G, NG, xq, xs, xsum, p, sc, y + j, ldy, N - j); break;
    }
  }
}

/* Any number of rows, four at a time. */
void tdm_q4_gemm_dot__simd128(int64_t M, int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum,
                              const uint8_t *qp, const float *scale, float *y, int64_t ldy) {
  const int64_t NG = K / G + (K % G != 0);
  for (int64_t r = 0; r < M; r += 4)
    q4_dot_i16_4rows(M - r < 4 ? M - r : 4, N, K, G, xq + r * (K + 1), xs + r * NG, xsum + r * NG, qp, scale, y + r * ldy, ldy);
}

#endif
