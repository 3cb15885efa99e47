/* gemm.h — matrix-multiply kernels: a scalar reference and, where TDM_SIMD128 (simd.h), SIMD128
 * variants beside it; natively on x86-64 also AVX2+FMA and AVX-512 ones (gemm_x86.c). y[M,N] = a[M,K] @ B. B is either row-major [K,N] ("rows") or packed at export time
 * in panels of 8 columns: bp[p][k][j] = B[k][8p + j], zero past N ("packed", [ceil(N/8), K, 8]).
 * Kernels assert nothing at run time (shapes are verified at load), never allocate, never fail. */
#ifndef TDM_GEMM_H
#define TDM_GEMM_H

#include <stdint.h>

#include "simd.h"

#include "../schema.h" /* TDM_PANEL, from python/tandem/schema.py */

void tdm_f32_gemm_rows__scalar(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y);
void tdm_f32_gemm_packed__scalar(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y);
/* The packed GEMM's register tiles (also for M = 1) with rows of y ldy floats apart: columns of a
 * wider y, so a GEMM of few rows can be split by columns over threads. */
void tdm_f32_gemm_packed_ld__scalar(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y, int64_t ldy);
#if TDM_SIMD128
void tdm_f32_gemm_rows_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y);
void tdm_f32_gemm_packed_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y);
/* The register tiles alone, also for M = 1 (tdm_f32_gemm_packed_4x8__simd128 takes the GEMV path
 * then): what a GEMM split by rows runs, so a part holding only the last row computes it as the
 * whole GEMM does. */
void tdm_f32_gemm_packed_tiles_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y);
void tdm_f32_gemm_packed_ld_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y, int64_t ldy);
/* 2 to TDM_GEMM_FEW_MAX rows, rows of y ldy apart (a streaming step's few positions; the GEMM split
 * by columns over threads): M = 2 walks two panels at once, each from its start and its middle (four
 * weight streams); from GEMM_FEW_MIN rows (gemm.c) every row's tiles panel by panel, each weight read
 * once; other M the tiles. Also what tdm_f32_gemm_packed_4x8__simd128 runs for M = 2. */
void tdm_f32_gemm_packed_few_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y, int64_t ldy);
#endif

#if TDM_X86_AVX2
/* gemm_x86.c: AVX2+FMA, 6x16 register tiles, fused multiply-adds (call only where the CPU has
 * AVX2 and FMA: tdm_cpu_avx2_fma). */
void tdm_f32_gemm_rows__avx2(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y);
void tdm_f32_gemm_packed__avx2(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y);
void tdm_f32_gemm_packed_tiles__avx2(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y);
void tdm_f32_conv_gemm__avx2(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y, int64_t ldy);
/* AVX-512F (and AVX2, FMA): 8x32 tiles over whole groups of four panels, the AVX2 kernel for the
 * rest, the same bits as the AVX2 variants (call only where tdm_cpu_avx512). M = 1 is the AVX2 GEMV. */
void tdm_f32_gemm_packed__avx512(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y);
void tdm_f32_gemm_packed_tiles__avx512(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y);
void tdm_f32_conv_gemm__avx512(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y, int64_t ldy);
#endif

/* The variants the runtime uses (src/kernels/config.c). */
typedef void (*tdm_gemm_fn)(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y);
extern const tdm_gemm_fn tdm_f32_gemm_rows, tdm_f32_gemm_packed, tdm_f32_gemm_packed_tiles;
/* A GEMM of 2 to TDM_GEMM_FEW_MAX rows into columns of a wider y (rows ldy apart), for the split by
 * columns over threads (each thread streams its share of the weights once, not all of them); NULL
 * where the runtime keeps the row split for few rows (native AVX2+FMA / AVX-512, whose tiles have no
 * strided form: config.c decides, and linalg.c asks tdm_f32_gemm_few_rows). */
#define TDM_GEMM_FEW_MAX 40
typedef void (*tdm_gemm_ld_fn)(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y, int64_t ldy);
tdm_gemm_ld_fn tdm_f32_gemm_few_rows(void);
typedef void (*tdm_conv_gemm_fn)(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y,
                                 int64_t ldy);
extern const tdm_conv_gemm_fn tdm_f32_conv_gemm;
/* Whether this process runs the AVX2+FMA variants: the CPU has AVX2 and FMA and the environment
 * does not set TANDEM_NATIVE_ISA=simd128 (read once). Always false outside native x86-64. */
int tdm_cpu_avx2_fma(void);
/* Whether it also runs the AVX-512 ones: tdm_cpu_avx2_fma and AVX-512F, TANDEM_NATIVE_ISA not
 * avx2 (nor simd128). */
int tdm_cpu_avx512(void);

/* The same over the runtime's threads (src/threads.h; linalg.c): results identical to the kernels
 * above for any thread count. */
void tdm_f32_gemm_rows_parallel(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y);
void tdm_f32_gemm_packed_parallel(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y);

#endif
