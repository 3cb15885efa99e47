/* config.c — the one place that picks which variant of a kernel the runtime calls (the ops call
 * through these pointers; gemm.h, variants.h), and the one that detects the CPU's features and
 * reports the build's (tdm_build_features). At build time: the SIMD128 variant where the build
 * has SIMD128 (wasm, and native through SIMDe: simd.h), else the scalar reference. At run time,
 * native x86-64 only: the AVX2+FMA GEMM/GEMV variants (gemm_x86.c) where the CPU has AVX2 and FMA,
 * and the AVX-512 GEMM tiles where it also has AVX-512F (the same bits as the AVX2 ones), checked
 * once; TANDEM_NATIVE_ISA=simd128 in the environment keeps the SIMD128 ones (to compare, or to get
 * the SIMD128 build's bits on such a CPU), TANDEM_NATIVE_ISA=avx2 stops at AVX2.
 * The elementwise, reduction, attention and convolution-family kernels are picked at build time,
 * at the end of this file. */
#include "tandem.h" /* tdm_build_features */

#include "gemm.h"
#include "variants.h"

#include <stddef.h>

#if TDM_X86_AVX2
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* 0 none, 1 AVX2+FMA, 2 AVX2+FMA and AVX-512F; -1 until the first call */
static atomic_int x86_level = -1;

static int level(void) {
  int v = atomic_load_explicit(&x86_level, memory_order_relaxed);
  if (v < 0) { /* every thread that gets here computes the same value */
    __builtin_cpu_init();
    const char *isa = getenv("TANDEM_NATIVE_ISA");
    const int cap = isa && strcmp(isa, "simd128") == 0 ? 0 : isa && strcmp(isa, "avx2") == 0 ? 1 : 2;
    v = !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ? 0 : __builtin_cpu_supports("avx512f") ? 2 : 1;
    v = v < cap ? v : cap;
    atomic_store_explicit(&x86_level, v, memory_order_relaxed);
  }
  return v;
}
int tdm_cpu_avx2_fma(void) { return level() >= 1; }
int tdm_cpu_avx512(void) { return level() >= 2; }

static void gemm_rows_x86(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y) {
  (tdm_cpu_avx2_fma() ? tdm_f32_gemm_rows__avx2 : tdm_f32_gemm_rows_4x8__simd128)(M, N, K, a, b, y);
}
static void gemm_packed_x86(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y) {
  const int l = level();
  (l == 2 ? tdm_f32_gemm_packed__avx512 : l ? tdm_f32_gemm_packed__avx2 : tdm_f32_gemm_packed_4x8__simd128)(M, N, K, a, bp, y);
}
static void gemm_packed_tiles_x86(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y) {
  const int l = level();
  (l == 2  ? tdm_f32_gemm_packed_tiles__avx512
       : l ? tdm_f32_gemm_packed_tiles__avx2
           : tdm_f32_gemm_packed_tiles_4x8__simd128)(M, N, K, a, bp, y);
}
static void conv_gemm_x86(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y, int64_t ldy) {
  const int l = level();
  (l == 2 ? tdm_f32_conv_gemm__avx512 : l ? tdm_f32_conv_gemm__avx2 : tdm_f32_conv_gemm_4x8__simd128)(M, N, K, a, bp, bias, y, ldy);
}
const tdm_gemm_fn tdm_f32_gemm_rows = gemm_rows_x86;
const tdm_gemm_fn tdm_f32_gemm_packed = gemm_packed_x86;
const tdm_gemm_fn tdm_f32_gemm_packed_tiles = gemm_packed_tiles_x86;
const tdm_conv_gemm_fn tdm_f32_conv_gemm = conv_gemm_x86;
/* few rows split by columns: the SIMD128 kernels' strided form, only where they are the GEMM */
tdm_gemm_ld_fn tdm_f32_gemm_few_rows(void) { return tdm_cpu_avx2_fma() ? NULL : tdm_f32_gemm_packed_few_4x8__simd128; }
tdm_conv1d_gemm_no_im2col_fn tdm_f32_conv1d_gemm_no_im2col(void) {
  return tdm_cpu_avx2_fma() ? NULL : tdm_f32_conv1d_gemm_no_im2col__simd128;
}
#elif TDM_SIMD128
int tdm_cpu_avx2_fma(void) { return 0; }
int tdm_cpu_avx512(void) { return 0; }
const tdm_gemm_fn tdm_f32_gemm_rows = tdm_f32_gemm_rows_4x8__simd128;
const tdm_gemm_fn tdm_f32_gemm_packed = tdm_f32_gemm_packed_4x8__simd128;
const tdm_gemm_fn tdm_f32_gemm_packed_tiles = tdm_f32_gemm_packed_tiles_4x8__simd128;
const tdm_conv_gemm_fn tdm_f32_conv_gemm = tdm_f32_conv_gemm_4x8__simd128;
tdm_gemm_ld_fn tdm_f32_gemm_few_rows(void) { return tdm_f32_gemm_packed_few_4x8__simd128; }
tdm_conv1d_gemm_no_im2col_fn tdm_f32_conv1d_gemm_no_im2col(void) { return tdm_f32_conv1d_gemm_no_im2col__simd128; }
#else
int tdm_cpu_avx2_fma(void) { return 0; }
int tdm_cpu_avx512(void) { return 0; }
const tdm_gemm_fn tdm_f32_gemm_rows = tdm_f32_gemm_rows__scalar;
const tdm_gemm_fn tdm_f32_gemm_packed = tdm_f32_gemm_packed__scalar;
const tdm_gemm_fn tdm_f32_gemm_packed_tiles = tdm_f32_gemm_packed__scalar;
const tdm_conv_gemm_fn tdm_f32_conv_gemm = tdm_f32_conv_gemm__scalar;
tdm_gemm_ld_fn tdm_f32_gemm_few_rows(void) { return tdm_f32_gemm_packed_ld__scalar; }
tdm_conv1d_gemm_no_im2col_fn tdm_f32_conv1d_gemm_no_im2col(void) { return tdm_f32_conv1d_gemm_no_im2col__scalar; }
#endif

/* Quantized weights (quant.c; SIMD128: quant_simd128.c, relaxed dot: quant_relaxed.c; AVX2:
 * quant_x86.c): SIMD128 or scalar, and natively on x86-64 the int8 ones in AVX2 where the CPU has
 * it (picked at run time as the float GEMM's; the int4 float path too). The int8 GEMV has no relaxed-dot variant: its exact scheme needs two relaxed dots per 16
 * weights, and a SmolLM-shaped decode ran slower on one than on the SIMD128 kernel. The int4
 * integer-dot GEMVs (matmul_q4's rows) in every build, the same bits in each (below). */
/* What this build has and what this CPU gives it (tandem.h, TDM_BUILD_*): the features this file's
 * picks are made from (the CPU's, detected once above). */
int32_t tdm_build_features(void) {
  int32_t f = 0;
#if defined(TDM_THREADS)
  f |= TDM_BUILD_THREADS;
#endif
#if defined(TDM_RELAXED_SIMD)
  f |= TDM_BUILD_RELAXED_SIMD;
#endif
#if TDM_SIMD128 && !defined(__wasm__)
  f |= TDM_BUILD_NATIVE_SIMD;
#endif
  if (tdm_cpu_avx2_fma()) f |= TDM_BUILD_AVX2_FMA;
  if (tdm_cpu_avx512()) f |= TDM_BUILD_AVX512;
  return f;
}

#if TDM_X86_AVX2
/* native x86-64: the int8 and int4 kernels' AVX2 variants (quant_x86.c, the same bits) where the
 * CPU has them, as the float GEMM's */
static void q8_gemv_dot_x86(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale, float *y) {
  (tdm_cpu_avx2_fma() ? tdm_q8_gemv_dot__avx2 : tdm_q8_gemv_dot__simd128)(N, K, xq, xs, qp, scale, y);
}
static void q8_gemm_dot_x86(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                            float *y, int64_t ldy) {
  (tdm_cpu_avx2_fma() ? tdm_q8_gemm_dot__avx2 : tdm_q8_gemm_dot__simd128)(M, N, K, xq, xs, qp, scale, y, ldy);
}
static void q8_gemm_tiles_x86(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y) {
  const int l = level();
  (l == 2 ? tdm_q8_gemm_tiles__avx512 : l ? tdm_q8_gemm_tiles__avx2 : tdm_q8_gemm_tiles_4x8__simd128)(M, N, K, a, qp, scale, y);
}
static void q8_gemm_x86(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y) {
  if (M > 1 && tdm_cpu_avx512()) tdm_q8_gemm_tiles__avx512(M, N, K, a, qp, scale, y);
  else (tdm_cpu_avx2_fma() ? tdm_q8_gemm__avx2 : tdm_q8_gemm_4x8__simd128)(M, N, K, a, qp, scale, y);
}
static void q4_gemm_x86(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale, float *y) {
  (tdm_cpu_avx2_fma() ? tdm_q4_gemm__avx2 : tdm_q4_gemm_4x8__simd128)(M, N, K, G, a, qp, scale, y);
}
static void q4_gemm_tiles_x86(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale, float *y) {
  (tdm_cpu_avx2_fma() ? tdm_q4_gemm_tiles__avx2 : tdm_q4_gemm_tiles_4x8__simd128)(M, N, K, G, a, qp, scale, y);
}
const tdm_q8_gemv_dot_fn tdm_q8_gemv_dot = q8_gemv_dot_x86;
const tdm_q8_gemm_dot_fn tdm_q8_gemm_dot = q8_gemm_dot_x86;
const tdm_q8_gemm_fn tdm_q8_gemm = q8_gemm_x86;
const tdm_q4_gemm_fn tdm_q4_gemm = q4_gemm_x86;
const tdm_q8_gemm_fn tdm_q8_gemm_tiles = q8_gemm_tiles_x86;
const tdm_q4_gemm_fn tdm_q4_gemm_tiles = q4_gemm_tiles_x86;
#elif TDM_SIMD128
const tdm_q8_gemv_dot_fn tdm_q8_gemv_dot = tdm_q8_gemv_dot__simd128;
const tdm_q8_gemm_dot_fn tdm_q8_gemm_dot = tdm_q8_gemm_dot__simd128;
const tdm_q8_gemm_fn tdm_q8_gemm = tdm_q8_gemm_4x8__simd128;
const tdm_q4_gemm_fn tdm_q4_gemm = tdm_q4_gemm_4x8__simd128;
const tdm_q8_gemm_fn tdm_q8_gemm_tiles = tdm_q8_gemm_tiles_4x8__simd128;
const tdm_q4_gemm_fn tdm_q4_gemm_tiles = tdm_q4_gemm_tiles_4x8__simd128;
#else
const tdm_q8_gemv_dot_fn tdm_q8_gemv_dot = tdm_q8_gemv_dot__scalar;
const tdm_q8_gemm_dot_fn tdm_q8_gemm_dot = tdm_q8_gemm_dot__scalar;
const tdm_q8_gemm_fn tdm_q8_gemm = tdm_q8_gemm__scalar;
const tdm_q4_gemm_fn tdm_q4_gemm = tdm_q4_gemm__scalar;
const tdm_q8_gemm_fn tdm_q8_gemm_tiles = tdm_q8_gemm__scalar;
const tdm_q4_gemm_fn tdm_q4_gemm_tiles = tdm_q4_gemm__scalar;
#endif
/* The activation row's int8/int16 quantizers (quant.c's tdm_q8_quantize_row, tdm_conv_q8_quantize_row, tdm_q4_quantize_row):
 * the SIMD128 loop in the wasm builds; natively the scalar one (the compiler's own vectors; SIMDe's
 * rounding may not be the same). Both give the same codes (kernel_selftest). */
#if TDM_SIMD128 && defined(__wasm__)
const tdm_q8_quantize_rows_fn tdm_q8_quantize_rows = tdm_q8_quantize_row__simd128;
const tdm_q4_quantize_rows_fn tdm_q4_quantize_rows = tdm_q4_quantize_row__simd128;
#else
const tdm_q8_quantize_rows_fn tdm_q8_quantize_rows = tdm_q8_quantize_row__scalar;
const tdm_q4_quantize_rows_fn tdm_q4_quantize_rows = tdm_q4_quantize_row__scalar;
#endif
/* The int8 integer-dot GEMVs over the paired layout (variants.h; the exporter writes int8 weights so,
 * python/tandem/layout.py): natively on x86-64 the AVX2 ones where the CPU has them, as above. */
#if TDM_X86_AVX2
static void q8_gemv_dot_paired_x86(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                                   float *y) {
  (tdm_cpu_avx2_fma() ? tdm_q8_gemv_dot_paired__avx2 : tdm_q8_gemv_dot_paired__simd128)(N, K, xq, xs, qp, scale, y);
}
static void q8_gemm_dot_paired_x86(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp,
                                   const float *scale, float *y, int64_t ldy) {
  (tdm_cpu_avx2_fma() ? tdm_q8_gemm_dot_paired__avx2 : tdm_q8_gemm_dot_paired__simd128)(M, N, K, xq, xs, qp, scale, y, ldy);
}
const tdm_q8_gemv_dot_fn tdm_q8_gemv_dot_paired = q8_gemv_dot_paired_x86;
const tdm_q8_gemm_dot_fn tdm_q8_gemm_dot_paired = q8_gemm_dot_paired_x86;
#elif TDM_SIMD128
const tdm_q8_gemv_dot_fn tdm_q8_gemv_dot_paired = tdm_q8_gemv_dot_paired__simd128;
const tdm_q8_gemm_dot_fn tdm_q8_gemm_dot_paired = tdm_q8_gemm_dot_paired__simd128;
#else
const tdm_q8_gemv_dot_fn tdm_q8_gemv_dot_paired = tdm_q8_gemv_dot_paired__scalar;
const tdm_q8_gemm_dot_fn tdm_q8_gemm_dot_paired = tdm_q8_gemm_dot_paired__scalar;
#endif
/* The int4 integer-dot GEMVs (variants.h): the relaxed dot's where the build has it, else SIMD128's
 * (natively on x86-64 the one-row AVX2 one where the CPU has it; the same bits), else the scalar
 * references. */
#if TDM_RELAXED_DOT
const tdm_q4_gemv_dot_fn tdm_q4_gemv_dot = tdm_q4_gemv_dot__relaxed;
const tdm_q4_gemm_dot_fn tdm_q4_gemm_dot = tdm_q4_gemm_dot__relaxed;
#elif TDM_X86_AVX2
static void q4_gemv_dot_x86(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum, const uint8_t *qp,
                            const float *scale, float *y) {
  (tdm_cpu_avx2_fma() ? tdm_q4_gemv_dot__avx2 : tdm_q4_gemv_dot__simd128)(N, K, G, xq, xs, xsum, qp, scale, y);
}
const tdm_q4_gemv_dot_fn tdm_q4_gemv_dot = q4_gemv_dot_x86;
const tdm_q4_gemm_dot_fn tdm_q4_gemm_dot = tdm_q4_gemm_dot__simd128;
#elif TDM_SIMD128
const tdm_q4_gemv_dot_fn tdm_q4_gemv_dot = tdm_q4_gemv_dot__simd128;
const tdm_q4_gemm_dot_fn tdm_q4_gemm_dot = tdm_q4_gemm_dot__simd128;
#else
const tdm_q4_gemv_dot_fn tdm_q4_gemv_dot = tdm_q4_gemv_dot__scalar;
const tdm_q4_gemm_dot_fn tdm_q4_gemm_dot = tdm_q4_gemm_dot__scalar;
#endif

/* Convolution and pooling planes, the conv's dot products at few positions and conv_bf16's GEMV
 * (conv_rows.c, conv_gemm.c, conv_q8.c; SIMD128: conv_simd128.c). */
#if TDM_SIMD128
/* Rows of 2048 or more k (each row's halves far apart): two weight streams per row, faster at Mimi's
 * K = 3072, 3584, 8192 in V8 with the weights coming from memory; at K = 1024 ([8192, 1024], the
 * transposed conv) slower, hence the threshold. */
static void conv_dot_simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *colt, const float *bias, float *y, int64_t ldy) {
  (K >= 2048 ? tdm_f32_conv_dot_2s__simd128 : tdm_f32_conv_dot__simd128)(M, N, K, a, colt, bias, y, ldy);
}
const tdm_conv_plane_fn tdm_f32_conv_plane = tdm_f32_conv_plane__simd128;
const tdm_pool_plane_fn tdm_f32_pool_plane = tdm_f32_pool_plane__simd128;
const tdm_conv_dot_fn tdm_f32_conv_dot = conv_dot_simd128;
const tdm_bf16_gemv_fn tdm_bf16_gemv = tdm_bf16_gemv__simd128;
const tdm_i16_conv_gemm_fn tdm_i16_conv_gemm = tdm_i16_conv_gemm__simd128;
const tdm_i16_quantize_panel_fn tdm_i16_quantize_panel = tdm_i16_quantize_panel__simd128;
const tdm_col2im_phases_fn tdm_f32_col2im_phases = tdm_f32_col2im_phases__simd128;
#else
const tdm_conv_plane_fn tdm_f32_conv_plane = tdm_f32_conv_plane__scalar;
const tdm_pool_plane_fn tdm_f32_pool_plane = tdm_f32_pool_plane__scalar;
const tdm_conv_dot_fn tdm_f32_conv_dot = tdm_f32_conv_dot__scalar;
const tdm_bf16_gemv_fn tdm_bf16_gemv = tdm_bf16_gemv__scalar;
const tdm_i16_conv_gemm_fn tdm_i16_conv_gemm = tdm_i16_conv_gemm__scalar;
const tdm_i16_quantize_panel_fn tdm_i16_quantize_panel = tdm_i16_quantize_panel__scalar;
const tdm_col2im_phases_fn tdm_f32_col2im_phases = tdm_f32_col2im_phases__scalar;
#endif

/* Elementwise, reductions and normalization, attention: SIMD128 (elementwise_simd128.c,
 * reduce_simd128.c, attention_simd128.c) or the scalar references. */
#if TDM_SIMD128
/* The SIMD128 unary kernel covers most codes; the rest (log, sin, cos, ...) run the reference. */
static void unary__simd128_or_scalar(int code, const float *x, float *y, int64_t n) {
  if (!tdm_f32_unary__simd128(code, x, y, n)) tdm_f32_unary__scalar(code, x, y, n);
}
const tdm_f32_binary_row_fn tdm_f32_binary_row = tdm_f32_binary_row__simd128;
const tdm_f32_unary_fn tdm_f32_unary = unary__simd128_or_scalar;
const tdm_f32_elu_fn tdm_f32_elu = tdm_f32_elu__simd128;
const tdm_f32_sum_row_fn tdm_f32_sum_trailing = tdm_f32_sum_row__simd128;
const tdm_f32_softmax_row_fn tdm_f32_softmax_row = tdm_f32_softmax_row__simd128;
const tdm_f32_layer_norm_row_fn tdm_f32_layer_norm_row = tdm_f32_layer_norm_row__simd128;
const tdm_f32_layer_norm_4groups_fn tdm_f32_layer_norm_4groups = tdm_f32_layer_norm_4groups__simd128;
const tdm_f32_rms_norm_row_fn tdm_f32_rms_norm_row = tdm_f32_rms_norm_row__simd128;
const tdm_f32_attention_rows_fn tdm_f32_attention_rows = tdm_f32_attention_rows__simd128;
#else
const tdm_f32_binary_row_fn tdm_f32_binary_row = tdm_f32_binary_row__scalar;
const tdm_f32_unary_fn tdm_f32_unary = tdm_f32_unary__scalar;
const tdm_f32_elu_fn tdm_f32_elu = tdm_f32_elu__chain;
const tdm_f32_sum_row_fn tdm_f32_sum_trailing = NULL;
const tdm_f32_softmax_row_fn tdm_f32_softmax_row = tdm_f32_softmax_row__scalar;
const tdm_f32_layer_norm_row_fn tdm_f32_layer_norm_row = tdm_f32_layer_norm_row__scalar;
const tdm_f32_layer_norm_4groups_fn tdm_f32_layer_norm_4groups = tdm_f32_layer_norm_4groups__scalar;
const tdm_f32_rms_norm_row_fn tdm_f32_rms_norm_row = tdm_f32_rms_norm_row__scalar;
const tdm_f32_attention_rows_fn tdm_f32_attention_rows = tdm_f32_attention_rows__scalar;
#endif
