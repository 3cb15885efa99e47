/* conv.h — what the convolution files share (src/kernels/ only): reading an op's geometry, the
 * threaded GEMM / dot-product drivers, and the run/check functions of the ops in tdm__conv_ops
 * (conv.c holds the table). The files: conv.c (the conv op), conv_gemm.c (im2col / im2row, the conv
 * GEMM and dot products, the fused activation, the drivers over threads), conv_rows.c (direct
 * convolution and pooling per output plane: the scalar references), conv_simd128.c (the SIMD128
 * variants of both), conv_transpose.c, pool.c. */
#ifndef TDM_CONV_H
#define TDM_CONV_H

#include "../ops.h"
#include "variants.h"

/* g from x [N, C, (H,) W], y [N, O, (OH,) OW] (r = 1 or 2 spatial dims), the kernel's r sizes k
 * and a = [stride(r), padding(r), dilation(r)]. */
void tdm__conv_geom(tdm_conv_geom *g, int r, const tdm_shape *x, const tdm_shape *y, const int64_t *k, const int64_t *a);
/* in + 2p covers the kernel's span and out is the floor-mode output size. */
bool tdm__conv_out_size_ok(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t out);

/* The activation fused into a conv's output (its optional last attribute; python/tandem/fuse.py):
 * 0 none, 1 relu, 2 hardswish, 3 elu (alpha 1): TDM_CONV_ACT_* in schema.h. */
/* y[0 .. n) = act(y), in place, by the elementwise kernels (so the values of the separate ops;
 * ELU: see conv_gemm.c). */
void tdm__conv_activate(int act, float *y, int64_t n);

/* The conv GEMM (tdm_f32_conv_gemm, rows in blocks of 4) or the dot products (tdm_f32_conv_dot,
 * rows in blocks of 8) over threads, each thread then applying the activation to the N columns of
 * its own rows while they are in its cache; any split gives the same values. */
void tdm__conv_gemm_parallel(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y, int64_t ldy,
                             int act);
void tdm__conv_dot_parallel(int64_t M, int64_t N, int64_t K, const float *a, const float *colt, const float *bias, float *y, int64_t ldy,
                            int act);
/* tdm_f32_conv1d_gemm_no_im2col (fn, from tdm_f32_conv1d_gemm_no_im2col()) over threads, rows in blocks of 4, each
 * thread then applying the activation to its own rows: the same values whatever the split. */
void tdm__conv1d_gemm_no_im2col_parallel(tdm_conv1d_gemm_no_im2col_fn fn, int64_t M, int64_t N, const tdm_conv_x *b, const float *a,
                                         const float *bias, float *y, int64_t ldy, int act);
/* A 1x1 convolution's GEMM (tdm_f32_gemm_rows, rows in blocks of 4) over threads, each thread then
 * adding the bias to its own rows and applying the activation: the floats of the serial GEMM then
 * bias pass, whatever the split. */
void tdm__conv_rows_parallel(int64_t M, int64_t N, int64_t K, const float *a, const float *b, const float *bias, float *y, int act);
/* tdm_f32_col2im_phases over threads, whole output channels per part (each channel is computed
 * alone, so the same floats). */
void tdm__col2im_phases_parallel(const tdm_conv_geom *g, int64_t Og, const float *z, const float *bias, float *yg);
/* tdm_f32_im2col_packed over threads, whole panels per thread (the same floats). */
void tdm__im2col_parallel(const tdm_conv_geom *g, const float *xg, int64_t Cg, int64_t n0, int64_t nc, float *colp);

/* conv_wino.c: tdm_f32_conv_wino (variants.h) with the input transform split over threads by
 * channels and the GEMMs and output transform by rows in blocks of 4 (the same floats). */
bool tdm__conv_wino(const tdm_wino *g, const float *x, const float *u, const float *bias, float *y, float *ws, int64_t wsn, int act);
/* conv_wino.c: the prepare and release hooks of conv and conv_transpose (ops.h): for an op that may
 * take the Winograd path, its weights' transform U = G w [T, O, C] for F(m, r), u 64 bytes into
 * the one allocation (TDM_WINO_U_OFFSET); NULL for any other op, or out of memory (the direct path). */
typedef struct tdm_wino_u {
  const float *u; /* [T, O, C] */
  int m;          /* F(m, 3) for k3 convs (2 or 4), F(m, 2) for kernel 2s stride s (2 or 3) */
} tdm_wino_u;
#define TDM_WINO_U_OFFSET 64
void *tdm__conv_wino_prepare(tdm_prepare_cx *cx, const tdm_method *m, const tdm_op *op);
void tdm__conv_wino_release(void *prepared);

/* in is the input size, out the transposed convolution's output size for kernel k, stride s, padding p,
 * dilation d and output padding op. */
bool tdm__conv_t_out_size_ok(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t op, int64_t out);
/* conv_q8.c: the workspace of `rows` activation rows of K against M int8 columns (floats). */
bool tdm__conv_q8_workspace(size_t rows, size_t K, size_t M, size_t *need);
/* ... and of `rows` rows of K against M bfloat16 columns (conv_bf16, conv_transpose_bf16). */
bool tdm__conv_bf16_workspace(size_t rows, size_t K, size_t M, size_t *need);

tdm_status tdm__pool_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out);
tdm_status tdm__pool_check(const tdm_method *m, const tdm_op *op);
tdm_status tdm__conv_transpose_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out);
tdm_status tdm__conv_transpose_check(const tdm_method *m, const tdm_op *op);
tdm_status tdm__conv_q8_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out);
/* conv_q8.c: the checks every quantized convolution starts with (attributes, dtypes, ranks, output
 * sizes, bias); K = C·kernel, P = output positions / C, M = O·kernel, HW = input positions. */
tdm_status tdm__conv_quant_geometry(const tdm_method *m, const tdm_op *op, uint32_t nw, const char *usage, size_t *K, size_t *P);
tdm_status tdm__conv_transpose_quant_geometry(const tdm_method *m, const tdm_op *op, uint32_t nw, const char *usage, int64_t *C, size_t *M,
                                              size_t *HW);
/* conv_i16.c: conv_i16 and conv_transpose_i16. */
tdm_status tdm__conv_i16_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out);
tdm_status tdm__conv_i16_check(const tdm_method *m, const tdm_op *op);
tdm_status tdm__conv_transpose_i16_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out);
tdm_status tdm__conv_transpose_i16_check(const tdm_method *m, const tdm_op *op);
tdm_status tdm__conv_q8_check(const tdm_method *m, const tdm_op *op);
tdm_status tdm__conv_transpose_q8_run(const tdm_op *op, const tdm_tensor *in, const tdm_tensor *out);
tdm_status tdm__conv_transpose_q8_check(const tdm_method *m, const tdm_op *op);

#endif
