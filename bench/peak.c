/* peak.c — the machine's reference numbers, measured by the same command as the benchmarks:
 * the rate of independent SIMD128 multiply-adds, and the copy bandwidth of linear memory. */
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
