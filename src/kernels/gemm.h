/* gemm.h — matrix-multiply kernels: a scalar reference and, in the wasm build, SIMD128 variants
 * beside it. y[M,N] = a[M,K] @ B. B is either row-major [K,N] ("rows") or packed at export time
 * in panels of 8 columns: bp[p][k][j] = B[k][8p + j], zero past N ("packed", [ceil(N/8), K, 8]).
 * Kernels assert nothing at run time (shapes are verified at load), never allocate, never fail. */
#ifndef TDM_GEMM_H
#define TDM_GEMM_H

#include <stdint.h>

#include "simd.h"

#include "../schema.h" /* TDM_PANEL, from python/tandem/schema.py */

void tdm_f32_gemm_rows__scalar(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y);
void tdm_f32_gemm_packed__scalar(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y);
#if TDM_SIMD128
void tdm_f32_gemm_rows_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y);
void tdm_f32_gemm_packed_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y);
/* The register tiles alone, also for M = 1 (tdm_f32_gemm_packed_4x8__simd128 takes the GEMV path
 * then): what a GEMM split by rows runs, so a part holding only the last row computes it as the
 * whole GEMM does. */
void tdm_f32_gemm_packed_tiles_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y);
#endif

/* The variants the runtime uses, picked once at build time. */
typedef void (*tdm_gemm_fn)(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y);
extern const tdm_gemm_fn tdm_f32_gemm_rows, tdm_f32_gemm_packed, tdm_f32_gemm_packed_tiles;

/* The same over the runtime's threads (src/threads.h; linalg.c): results identical to the kernels
 * above for any thread count. */
void tdm_f32_gemm_rows_parallel(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y);
void tdm_f32_gemm_packed_parallel(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y);

#endif
