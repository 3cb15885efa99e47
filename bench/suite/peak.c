/* peak.c — the machine's reference numbers, measured by the same command as the benchmarks:
 * the rate of independent SIMD128 multiply-adds, and the copy and read bandwidths of linear
 * memory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wasm_simd128.h>

/* 8 independent chains of f32x4 mul + add: 64 flops per iteration. */
float tdm_bench_peak(int iters) {
  v128_t a0 = wasm_f32x4_splat(1.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  const v128_t m = wasm_f32x4_splat(0.999999f), c = wasm_f32x4_splat(1e-7f);
  for (int i = 0; i < iters; i++) {
    a0 = wasm_f32x4_add(wasm_f32x4_mul(a0, m), c);
    a1 = wasm_f32x4_add(wasm_f32x4_mul(a1, m), c);
    a2 = wasm_f32x4_add(wasm_f32x4_mul(a2, m), c);
    a3 = wasm_f32x4_add(wasm_f32x4_mul(a3, m), c);
    a4 = wasm_f32x4_add(wasm_f32x4_mul(a4, m), c);
    a5 = wasm_f32x4_add(wasm_f32x4_mul(a5, m), c);
    a6 = wasm_f32x4_add(wasm_f32x4_mul(a6, m), c);
    a7 = wasm_f32x4_add(wasm_f32x4_mul(a7, m), c);
  }
  v128_t s = wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_add(a0, a1), wasm_f32x4_add(a2, a3)),
                            wasm_f32x4_add(wasm_f32x4_add(a4, a5), wasm_f32x4_add(a6, a7)));
  return wasm_f32x4_extract_lane(s, 0);
}

void *tdm_bench_alloc(size_t n) { return malloc(n); }

/* memcpy (memory.copy with bulk memory) of n bytes, reps times. */
void tdm_bench_copy(void *dst, const void *src, size_t n, int reps) {
  for (int i = 0; i < reps; i++) memcpy(dst, src, n);
}

/* S streams of `part` floats side by side, reps times. S is a constant, so the compiler keeps each
 * stream's pointer and sum in registers; with S a run-time count they live in memory, and the loop
 * reads well below what a plain loop (or native AVX2) reads in the same minute. Integer adds: their
 * one-cycle chains never limit a stream. */
#define READ_STREAMS(S)                                                                                                \
  static int32_t read_##S(const float *p, size_t part, int reps) {                                                    \
    v128_t s[S];                                                                                                       \
    for (int i = 0; i < S; i++) s[i] = wasm_i32x4_splat(0);                                                            \
    for (int r = 0; r < reps; r++)                                                                                     \
      for (size_t k = 0; k < part; k += 8)                                                                             \
        for (int i = 0; i < S; i++) {                                                                                  \
          const float *f = p + (size_t)i * part + k;                                                                   \
          s[i] = wasm_i32x4_add(s[i], wasm_i32x4_add(wasm_v128_load(f), wasm_v128_load(f + 4)));                       \
        }                                                                                                              \
    v128_t t = s[0];                                                                                                   \
    for (int i = 1; i < S; i++) t = wasm_i32x4_add(t, s[i]);                                                           \
    return wasm_i32x4_extract_lane(t, 0);                                                                              \
  }
READ_STREAMS(1)
READ_STREAMS(2)
READ_STREAMS(4)
READ_STREAMS(8)
READ_STREAMS(16)

/* Reads n bytes at p with SIMD128 loads, reps times, as `streams` parts side by side (1, 2, 4, 8 or
 * 16; another count takes the largest of those below it): the bandwidth a GEMV streaming its weights
 * can reach. The hardware prefetchers track each stream, so the benchmarks take the best over several
 * counts. Returns a sum so the loads are not optimized away. */
float tdm_bench_read(const void *p, size_t n, int reps, int streams) {
  const int S = streams >= 16 ? 16 : streams >= 8 ? 8 : streams >= 4 ? 4 : streams >= 2 ? 2 : 1;
  const size_t part = n / 4 / (size_t)S / 8 * 8; /* floats per stream, whole pairs of vectors */
  const float *f = p;
  switch (S) {
    case 1: return (float)read_1(f, part, reps);
    case 2: return (float)read_2(f, part, reps);
    case 4: return (float)read_4(f, part, reps);
    case 8: return (float)read_8(f, part, reps);
    default: return (float)read_16(f, part, reps);
  }
}
