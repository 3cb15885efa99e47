/* q8_walk.c — candidate steps and walks for the int8 one-row GEMV on the paired layout
 * (tdm_q8_gemv_dot_paired__simd128), for bench/probes/q8_walk.mjs (clang-19, wasm32-wasi, as
 * tandem-relaxed.wasm is built): the runtime's step over 8 streams (columns N / 8 apart, four panels
 * at a time: streams 0-3, then 4-7), and over 4 streams a pair step of two 8-byte sign-extending
 * loads or one 16-byte load widened in registers, in all four panels or some. Every variant is
 * checked bit for bit against the scalar reference. Includes src/kernels/quant_simd128.c for its
 * static helpers. Probe only: N a multiple of 64, K even. (Tried and dropped: one byte of each
 * panel read a line ahead per step, as wasm has no prefetch: 1.10-1.3x slower; a miss blocks
 * retirement.) */
#include "../../src/kernels/quant_simd128.c"

#include <stdlib.h>
#include <string.h>

static int64_t N, K, NB, C;
static size_t CB;
static int8_t *q; /* C copies of the paired weights */
static float *s, *a, *xs, *y, *y2;
static int16_t *xq;

int setup(int n, int k, int copies) {
  N = n, K = k, NB = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK, C = copies, CB = (size_t)N * (size_t)K;
  if (N % 64 || K % 2 || C < 1) return 0;
  q = aligned_alloc(64, CB * C + 64), s = malloc(4 * N), a = malloc(4 * K), xq = malloc(2 * (K + 2)), xs = malloc(4 * (NB + 1)),
  y = malloc(4 * N), y2 = malloc(4 * N);
  if (!q || !s || !a || !xq || !xs || !y || !y2) return 0;
  uint32_t r = 3;
  for (size_t i = 0; i < CB; i++) r = r * 1664525u + 1013904223u, q[i] = (int8_t)((int)(r >> 24) % 127);
  for (int64_t i = 0; i < N; i++) r = r * 1664525u + 1013904223u, s[i] = 0.001f + (float)(r >> 8) / 16777216.0f * 0.02f;
  for (int64_t i = 0; i < K; i++) r = r * 1664525u + 1013904223u, a[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
  tdm_q8_pair_panels(N, K, q, true);
  for (int64_t i = 1; i < C; i++) memcpy(q + i * CB, q, CB);
  return (int)C;
}


/* One pair step of a panel: ext 0 two sign-extending 8-byte loads (as the runtime), ext 1 one 16-byte
 * load widened in registers (fewer loads in flight per step for V8's register allocator). */
static inline __attribute__((always_inline)) void step(int ext, const int8_t *p, v128_t x, v128_t *lo, v128_t *hi) {
  v128_t a, b;
  if (ext) {
    const v128_t v = wasm_v128_load(p);
    a = wasm_i16x8_extend_low_i8x16(v), b = wasm_i16x8_extend_high_i8x16(v);
  } else a = wasm_i16x8_load8x8(p), b = wasm_i16x8_load8x8(p + 8);
  *lo = wasm_i32x4_add(*lo, wasm_i32x4_dot_i16x8(a, x));
  *hi = wasm_i32x4_add(*hi, wasm_i32x4_dot_i16x8(b, x));
}

/* Four panels at p0 + i·PST, results at y + i·YS, the runtime's sums and totals; the pair loop not
 * unrolled (clang's unroll by 2 puts 16 loads before their dots: V8 keeps that order and spills). */
static inline __attribute__((always_inline)) void panels4(int ext, const int8_t *p0, size_t PST, const float *sc, float *y, size_t YS) {
  const int8_t *p1 = p0 + PST, *p2 = p1 + PST, *p3 = p2 + PST;
  v128_t t0 = wasm_f32x4_splat(0), t1 = t0, t2 = t0, t3 = t0, t4 = t0, t5 = t0, t6 = t0, t7 = t0;
  for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
    const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
    v128_t s0 = wasm_i32x4_splat(0), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
#pragma clang loop unroll(disable)
    for (int64_t k = k0; k < k1; k += 2) {
      const v128_t x = wasm_v128_load32_splat(xq + k);
      step(ext != 0, p0 + k * 8, x, &s0, &s1), step(ext != 0, p1 + k * 8, x, &s2, &s3);
      step(ext == 1 || ext == 3, p2 + k * 8, x, &s4, &s5), step(ext == 1, p3 + k * 8, x, &s6, &s7);
    }
    const v128_t d = wasm_f32x4_splat(xs[b]);
    t0 = q8_dot_total(t0, s0, d), t1 = q8_dot_total(t1, s1, d), t2 = q8_dot_total(t2, s2, d), t3 = q8_dot_total(t3, s3, d);
    t4 = q8_dot_total(t4, s4, d), t5 = q8_dot_total(t5, s5, d), t6 = q8_dot_total(t6, s6, d), t7 = q8_dot_total(t7, s7, d);
  }
  const v128_t tt[8] = {t0, t1, t2, t3, t4, t5, t6, t7};
  for (int i = 0; i < 4; i++) {
    wasm_v128_store(y + i * YS, wasm_f32x4_mul(tt[2 * i], wasm_v128_load(sc + i * YS)));
    wasm_v128_store(y + i * YS + 4, wasm_f32x4_mul(tt[2 * i + 1], wasm_v128_load(sc + i * YS + 4)));
  }
}

/* the runtime's four-panel step (q8_gemv_4panels, paired) over S streams */
static void walk_rt(const int8_t *qp, int S) {
  const int64_t H = N / S;
  const size_t PS = (size_t)K * 8, PST = (size_t)(H / 8) * PS;
  for (int64_t j = 0; j < H; j += 8)
    for (int g = 0; g < S; g += 4) {
      const int64_t c = g * H + j;
      q8_gemv_4panels(1, K, xq, xs, qp + (c / 8) * PS, PST, s + c, y + c, (size_t)H, 32);
    }
}

/* S streams of columns N / S apart, four panels at a time */
static void walk(const int8_t *qp, int S, int ext) {
  const int64_t H = N / S;
  const size_t PS = (size_t)K * 8, PST = (size_t)(H / 8) * PS;
  for (int64_t j = 0; j < H; j += 8)
    for (int g = 0; g < S; g += 4) {
      const int64_t c = g * H + j;
      if (ext == 1) panels4(1, qp + (c / 8) * PS, PST, s + c, y + c, (size_t)H);
      else if (ext == 2) panels4(2, qp + (c / 8) * PS, PST, s + c, y + c, (size_t)H);
      else if (ext == 3) panels4(3, qp + (c / 8) * PS, PST, s + c, y + c, (size_t)H);
      else panels4(0, qp + (c / 8) * PS, PST, s + c, y + c, (size_t)H);
    }
}

/* which: 0 the paired kernel (4 streams), 1 its step over 8 streams, then over 4 streams not unrolled:
 * 2 two 8-byte loads per step, 3 panels 0-1 one 16-byte load and 2-3 two 8-byte, 4 all one 16-byte
 * load, 5 panels 0-2 one 16-byte load; 6 / 7 a plain read in 1 / 4 streams; 8 the quantization alone */
static void gemv(int which, int64_t copy) {
  const int8_t *qp = q + copy * CB;
  tdm_q8_quantize_row(K, a, xq, xs);
  if (which == 8) return; /* the activation's quantization alone */
  if (which == 0) tdm_q8_gemv_dot_paired__simd128(N, K, xq, xs, qp, s, y);
  else if (which == 1) walk_rt(qp, 8);
  else if (which <= 5) walk(qp, 4, (int[]){0, 0, 0, 2, 1, 3}[which]);
  else {
    v128_t t0 = wasm_i32x4_splat(0), t1 = t0, t2 = t0, t3 = t0;
    const size_t Q = which == 6 ? CB : CB / 4;
    for (size_t o = 0; o + 64 <= Q; o += 64)
      for (int u = 0; u < 4; u++) {
        const int8_t *b = which == 6 ? qp + o + 16 * u : qp + u * Q + o;
        if (which == 6) t0 = wasm_i32x4_add(t0, wasm_v128_load(b));
        else
          t0 = wasm_i32x4_add(t0, wasm_v128_load(b)), t1 = wasm_i32x4_add(t1, wasm_v128_load(b + 16)),
          t2 = wasm_i32x4_add(t2, wasm_v128_load(b + 32)), t3 = wasm_i32x4_add(t3, wasm_v128_load(b + 48));
      }
    y[0] = (float)wasm_i32x4_extract_lane(wasm_i32x4_add(wasm_i32x4_add(t0, t1), wasm_i32x4_add(t2, t3)), 0);
  }
}

float run(int which, int reps, int start) {
  for (int i = 0; i < reps; i++) gemv(which, (start + i) % C);
  return y[N - 1];
}

/* 0 when every kernel gives the scalar reference's bits (on the file's layout); else a bit per variant */
int check(void) {
  int8_t *f = malloc(CB);
  if (!f) return 64;
  memcpy(f, q, CB);
  tdm_q8_pair_panels(N, K, f, false);
  tdm_q8_quantize_row(K, a, xq, xs);
  tdm_q8_gemv_dot__scalar(N, K, xq, xs, f, s, y2);
  free(f);
  int bad = 0;
  for (int w = 0; w <= 5; w++) {
    memset(y, 0, 4 * (size_t)N);
    gemv(w, C - 1);
    bad |= (memcmp(y, y2, 4 * (size_t)N) != 0) << w;
  }
  return bad;
}
