/* peak.c — the machine's reference numbers, measured by the same command as the benchmarks:
 * the rate of independent SIMD128 multiply-adds, and the copy and read bandwidths of linear
 * memory. */
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

/* Reads n bytes at p with SIMD128 loads, reps times, as `streams` (1 to 16) parts side by side:
 * the bandwidth a GEMV streaming its weights can reach. From DRAM, one stream is far from what
 * the memory system gives (the hardware prefetchers track each stream; more in flight, more
 * bandwidth), so the benchmark takes the best over 1 to 16 streams. Returns a sum so the loads are
 * not optimized away. */
float tdm_bench_read(const void *p, size_t n, int reps, int streams) {
  enum { MAXS = 16 };
  if (streams < 1) streams = 1;
  if (streams > MAXS) streams = MAXS;
  const size_t part = n / 4 / (size_t)streams / 8 * 8; /* floats per stream, whole pairs of vectors */
  v128_t s[MAXS];
  for (int i = 0; i < MAXS; i++) s[i] = wasm_f32x4_splat(0);
  for (int r = 0; r < reps; r++) {
    const float *f[MAXS];
    for (int i = 0; i < streams; i++) f[i] = (const float *)p + (size_t)i * part;
    for (size_t k = 0; k < part; k += 8)
      for (int i = 0; i < streams; i++) s[i] = wasm_f32x4_add(s[i], wasm_f32x4_add(wasm_v128_load(f[i] + k), wasm_v128_load(f[i] + k + 4)));
  }
  v128_t t = s[0];
  for (int i = 1; i < MAXS; i++) t = wasm_f32x4_add(t, s[i]);
  return wasm_f32x4_extract_lane(t, 0);
}
