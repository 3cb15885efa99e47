/* peak_fma.c — the rate of independent fused multiply-adds (f32x4.relaxed_madd: one FMA instruction
 * on x86 with FMA3 and on arm64), the instruction the relaxed builds' GEMMs and convs are made of: 12
 * chains, enough to cover the FMA latency on two pipes, 96 flops per iteration. Freestanding (no
 * libc), built by clang-19 in bench/suite/run.sh; bench/suite/machine.mjs times it. */
#include <wasm_simd128.h>

__attribute__((export_name("tdm_bench_fma"))) float tdm_bench_fma(int iters) {
  v128_t a[12];
  for (int j = 0; j < 12; j++) a[j] = wasm_f32x4_splat(1.0f + (float)j * 1e-7f);
  const v128_t m = wasm_f32x4_splat(0.999999f), c = wasm_f32x4_splat(1e-7f);
  for (int i = 0; i < iters; i++)
#pragma unroll
    for (int j = 0; j < 12; j++) a[j] = wasm_f32x4_relaxed_madd(a[j], m, c);
  float r = 0;
  for (int j = 0; j < 12; j++) r += wasm_f32x4_extract_lane(a[j], 0);
  return r;
}
