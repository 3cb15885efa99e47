/* q8_streams.c — the int8 one-row GEMV (tdm_q8_gemv_dot_paired__simd128, the wasm builds' paired
 * layout) against the same kernel's step walking its columns as 4 streams of panels N / 4 columns
 * apart, for bench/probes/q8_streams.mjs (clang-19, wasm32-wasi, as tandem-relaxed.wasm is built).
 * The probe includes src/kernels/quant_simd128.c itself to use its static pair step and block totals
 * (q8_dot_pair_at, q8_dot_total), so it is built without that file. Probe only: N a multiple of 32, K even. */
#include "../../src/kernels/quant_simd128.c"

#include <stdlib.h>
#include <string.h>

static int64_t N, K, NB, C;
static size_t CB;
static int8_t *q; /* C copies of the paired weights */
static float *s, *a, *xs, *y, *y2;
static int16_t *xq;

/* n, k: the shape; copies: how many copies of the weights (cycled through: from DRAM when they span more than the caches) */
int setup(int n, int k, int copies) {
  N = n, K = k, NB = (K + TDM_Q8_ABLOCK - 1) / TDM_Q8_ABLOCK, C = copies, CB = (size_t)N * (size_t)K;
  if (N % 32 || K % 2 || C < 1) return 0;
  q = malloc(CB * C), s = malloc(4 * N), a = malloc(4 * K), xq = malloc(2 * (K + 2)), xs = malloc(4 * (NB + 1)), y = malloc(4 * N),
  y2 = malloc(4 * N);
  if (!q || !s || !a || !xq || !xs || !y || !y2) return 0;
  uint32_t r = 3;
  for (size_t i = 0; i < CB; i++) r = r * 1664525u + 1013904223u, q[i] = (int8_t)((int)(r >> 24) % 127);
  for (int64_t i = 0; i < N; i++) r = r * 1664525u + 1013904223u, s[i] = 0.001f + (float)(r >> 8) / 16777216.0f * 0.02f;
  for (int64_t i = 0; i < K; i++) r = r * 1664525u + 1013904223u, a[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
  tdm_q8_pair_panels(N, K, q, true);
  for (int64_t i = 1; i < C; i++) memcpy(q + i * CB, q, CB);
  return (int)C;
}

/* The paired kernel's step over 4 streams: stream i's column j is i·N/4 + j (N / 4 a multiple of 8). */
static void q8_streams(const int8_t *qp) {
  const int64_t H = N / 4;
  for (int64_t j = 0; j < H; j += 8) {
    const int8_t *p0 = qp + (j / 8) * K * 8, *p1 = qp + ((H + j) / 8) * K * 8, *p2 = qp + ((2 * H + j) / 8) * K * 8,
                 *p3 = qp + ((3 * H + j) / 8) * K * 8;
    v128_t t0 = wasm_f32x4_splat(0), t1 = t0, t2 = t0, t3 = t0, t4 = t0, t5 = t0, t6 = t0, t7 = t0;
    for (int64_t k0 = 0, b = 0; k0 < K; k0 += TDM_Q8_ABLOCK, b++) {
      const int64_t k1 = k0 + TDM_Q8_ABLOCK < K ? k0 + TDM_Q8_ABLOCK : K;
      v128_t s0 = wasm_i32x4_splat(0), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
      for (int64_t k = k0; k < k1; k += 2) {
        const v128_t x = wasm_v128_load32_splat(xq + k);
        q8_dot_pair_at(p0 + k * 8, 1, x, &s0, &s1), q8_dot_pair_at(p1 + k * 8, 1, x, &s2, &s3);
        q8_dot_pair_at(p2 + k * 8, 1, x, &s4, &s5), q8_dot_pair_at(p3 + k * 8, 1, x, &s6, &s7);
      }
      const v128_t d = wasm_f32x4_splat(xs[b]);
      t0 = q8_dot_total(t0, s0, d), t1 = q8_dot_total(t1, s1, d), t2 = q8_dot_total(t2, s2, d), t3 = q8_dot_total(t3, s3, d);
      t4 = q8_dot_total(t4, s4, d), t5 = q8_dot_total(t5, s5, d), t6 = q8_dot_total(t6, s6, d), t7 = q8_dot_total(t7, s7, d);
    }
    const v128_t tt[8] = {t0, t1, t2, t3, t4, t5, t6, t7};
    for (int i = 0; i < 4; i++) {
      const int64_t c = i * H + j;
      wasm_v128_store(y + c, wasm_f32x4_mul(tt[2 * i], wasm_v128_load(s + c)));
      wasm_v128_store(y + c + 4, wasm_f32x4_mul(tt[2 * i + 1], wasm_v128_load(s + c + 4)));
    }
  }
}

/* which: 0 the paired kernel, 1 its step in 4 streams, 2 / 3 a plain read of the copy in 1 / 4 streams */
static void gemv(int which, int64_t copy) {
  const int8_t *qp = q + copy * CB;
  tdm_q8_quantize_row(K, a, xq, xs);
  if (which == 0) tdm_q8_gemv_dot_paired__simd128(N, K, xq, xs, qp, s, y);
  else if (which == 1) q8_streams(qp);
  else {
    v128_t t0 = wasm_i32x4_splat(0), t1 = t0, t2 = t0, t3 = t0;
    const size_t Q = which == 2 ? CB : CB / 4;
    for (size_t o = 0; o + 64 <= Q; o += 64)
      for (int u = 0; u < 4; u++) {
        const int8_t *b = which == 2 ? qp + o + 16 * u : qp + u * Q + o;
        if (which == 2) t0 = wasm_i32x4_add(t0, wasm_v128_load(b));
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

/* 0 when the 4-stream kernel gives the paired kernel's bits and that kernel the scalar reference's (on the file's layout) */
int check(void) {
  int8_t *f = malloc(CB);
  if (!f) return 4;
  memcpy(f, q, CB);
  tdm_q8_pair_panels(N, K, f, false);
  tdm_q8_quantize_row(K, a, xq, xs);
  tdm_q8_gemv_dot__scalar(N, K, xq, xs, f, s, y2);
  free(f);
  gemv(0, 0);
  int bad = memcmp(y, y2, 4 * (size_t)N) != 0;
  gemv(1, C - 1);
  return bad | (memcmp(y, y2, 4 * (size_t)N) != 0) << 1;
}
