/* q8_tiles.c — the int8 rows kernel (tdm_q8_gemm_dot_paired__simd128, and the one-row
 * tdm_q8_gemv_dot_paired__simd128 beside it) at Mimi's and pocket-tts' transformer shapes, for
 * bench/probes/q8_tiles.mjs (which builds this with clang-19 for wasm32-wasi from each tree given, as
 * tandem-relaxed.wasm is built). A "layer" is the four linears 512 -> 1536, 512 -> 512, 512 -> 2048,
 * 2048 -> 512; setup(L) allocates L layers of distinct paired weights, so L = 8 reads 25 MB per pass
 * (more than the 4 MiB L2: Mimi's 8 layers per step), L = 1 runs from L2. run(M, reps) runs M rows
 * through every linear of every layer as matmul_q8 does (blocks of min(8, 8192 / K) rows, each row
 * quantized first); check() compares every M from 1 to 16 with the scalar reference bit for bit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wasm_simd128.h>

#include "../../src/kernels/variants.h"

static const int64_t SK[4] = {512, 512, 512, 2048}, SN[4] = {1536, 512, 2048, 512};
static int L;
static int8_t *w[64][4];
static float *sc[4], *a, *y, *y2, *xs;
static int16_t *xq;

int setup(int layers) {
  L = layers;
  uint32_t r = 1;
  for (int s = 0; s < 4; s++) {
    sc[s] = malloc(4 * (size_t)SN[s]);
    if (!sc[s]) return 0;
    for (int64_t j = 0; j < SN[s]; j++) sc[s][j] = 0.01f + (float)j * 1e-6f;
  }
  for (int l = 0; l < L; l++)
    for (int s = 0; s < 4; s++) {
      const size_t B = (size_t)(SK[s] * SN[s]);
      if (!(w[l][s] = malloc(B))) return 0;
      for (size_t i = 0; i < B; i++) r = r * 1664525u + 1013904223u, w[l][s][i] = (int8_t)((int)(r >> 24) % 127);
      tdm_q8_pair_panels(SN[s], SK[s], w[l][s], true);
    }
  a = malloc(4 * 16 * 2048), y = malloc(4 * 16 * 2048), y2 = malloc(4 * 16 * 2048);
  xq = malloc(2 * 8192), xs = malloc(4 * (8192 / 32 + 8));
  if (!a || !y || !y2 || !xq || !xs) return 0;
  for (int i = 0; i < 16 * 2048; i++) r = r * 1664525u + 1013904223u, a[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
  return 1;
}

/* M rows through linear s of layer l into out, as matmul_q8_run blocks them */
static void linear(int l, int s, int64_t M, float *out, int ref) {
  const int64_t K = SK[s], N = SN[s], NB = K / 32, B = 8192 / K < 8 ? 8192 / K : 8;
  if (M == 1 && !ref) {
    tdm_q8_quantize_row(K, a, xq, xs);
    tdm_q8_gemv_dot_paired__simd128(N, K, xq, xs, w[l][s], sc[s], out);
    return;
  }
  for (int64_t r0 = 0; r0 < M; r0 += B) {
    const int64_t R = M - r0 < B ? M - r0 : B;
    for (int64_t r = 0; r < R; r++) tdm_q8_quantize_row(K, a + (r0 + r) * K, xq + r * K, xs + r * NB);
    (ref ? tdm_q8_gemm_dot_paired__scalar : tdm_q8_gemm_dot_paired__simd128)(R, N, K, xq, xs, w[l][s], sc[s], out + r0 * N, N);
  }
}

/* M = 0: a plain SIMD read of every layer's weight bytes (what the memory gives this process now) */
static float read_all(void) {
  v128_t t0 = wasm_i32x4_splat(0), t1 = t0, t2 = t0, t3 = t0;
  for (int l = 0; l < L; l++)
    for (int s = 0; s < 4; s++)
      for (const int8_t *p = w[l][s], *e = p + SK[s] * SN[s]; p + 64 <= e; p += 64) {
        t0 = wasm_i32x4_add(t0, wasm_v128_load(p)), t1 = wasm_i32x4_add(t1, wasm_v128_load(p + 16));
        t2 = wasm_i32x4_add(t2, wasm_v128_load(p + 32)), t3 = wasm_i32x4_add(t3, wasm_v128_load(p + 48));
      }
  return (float)wasm_i32x4_extract_lane(wasm_i32x4_add(wasm_i32x4_add(t0, t1), wasm_i32x4_add(t2, t3)), 0);
}

float run(int M, int reps) {
  if (M == 0) {
    float v = 0;
    for (int i = 0; i < reps; i++) v += read_all();
    return v;
  }
  for (int i = 0; i < reps; i++)
    for (int l = 0; l < L; l++)
      for (int s = 0; s < 4; s++) linear(l, s, M, y, 0);
  return y[0];
}

/* 0 when every M in 1..16 gives the scalar reference's bits on every shape, else 100·M + shape + 1 */
int check(void) {
  for (int M = 1; M <= 16; M++)
    for (int s = 0; s < 4; s++) {
      linear(0, s, M, y, 0), linear(0, s, M, y2, 1);
      if (memcmp(y, y2, 4 * (size_t)(M * SN[s]))) return 100 * M + s + 1;
    }
  return 0;
}
