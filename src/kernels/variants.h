/* variants.h — the kernels that have a SIMD128 variant, each beside its scalar reference (src/
 * only). Both are non-static so that tests/c/kernel_selftest.c, built into a test-only wasm module,
 * and the native ctest of the same name can run the two on the same inputs (tail sizes, NaN, ±inf,
 * ±0) and compare. The runtime picks the variant once, in config.c: the SIMD128 one where
 * TDM_SIMD128 (wasm, and native through SIMDe: simd.h), else the scalar one; the function pointers
 * below are set there. A SIMD128 variant lives in its family's <family>_simd128.c (conv_simd128.c for
 * the convolution family, quant_simd128.c for the quantized one), a relaxed-SIMD one in
 * <family>_relaxed.c (quant_relaxed.c). Shared small vector helpers (dot, axpy, exp, erf) are in
 * vec.h; GEMM in gemm.h. */
#ifndef TDM_VARIANTS_H
#define TDM_VARIANTS_H

#include <stdbool.h>
#include <stdint.h>

#include "simd.h"

/* Sub-operation codes (tdm_opdef.code), one enum per family: binary and unary elementwise ops, the
 * reductions over dims, softmax, argmax / argmin. */
enum {
  TDM_B_ADD,
  TDM_B_SUB,
  TDM_B_MUL,
  TDM_B_DIV,
  TDM_B_MAX,
  TDM_B_MIN,
  TDM_B_POW,
  TDM_B_REM,
  TDM_B_EQ,
  TDM_B_NE,
  TDM_B_LT,
  TDM_B_LE,
  TDM_B_GT,
  TDM_B_GE,
  TDM_B_AND,
  TDM_B_OR,
  TDM_B_FLOORDIV,
  TDM_B_TRUNCDIV
};
enum {
  TDM_U_NEG,
  TDM_U_ABS,
  TDM_U_EXP,
  TDM_U_LOG,
  TDM_U_SQRT,
  TDM_U_RSQRT,
  TDM_U_SIN,
  TDM_U_COS,
  TDM_U_TANH,
  TDM_U_SIGMOID,
  TDM_U_RELU,
  TDM_U_GELU,
  TDM_U_GELU_TANH,
  TDM_U_SILU,
  TDM_U_ERF,
  TDM_U_RECIP,
  TDM_U_FLOOR,
  TDM_U_CEIL,
  TDM_U_NOT,
  TDM_U_LOG1P,
  TDM_U_HARDSWISH,
  TDM_U_HARDSIGMOID
};
enum { TDM_R_SUM, TDM_R_MEAN, TDM_R_AMAX, TDM_R_AMIN, TDM_R_ANY, TDM_R_ALL };
enum { TDM_SM_SOFTMAX, TDM_SM_LOG_SOFTMAX };
enum { TDM_ARG_MAX, TDM_ARG_MIN };

/* The variants the runtime calls, picked once in config.c (SIMD128 where the build has it, else the
 * scalar reference); the ops call through these and test no instruction set themselves. */
typedef void (*tdm_f32_binary_row_fn)(int code, const float *x0, int64_t sa, const float *x1, int64_t sb, float *y, int64_t n);
typedef void (*tdm_f32_unary_fn)(int code, const float *x, float *y, int64_t n);
typedef float (*tdm_f32_sum_row_fn)(const float *x, int64_t n);
typedef void (*tdm_f32_softmax_row_fn)(const float *x, float *y, int64_t n, bool logp);
typedef void (*tdm_f32_layer_norm_row_fn)(const float *x, float *y, int64_t n, const float *w, const float *b, float eps);
typedef void (*tdm_f32_layer_norm_4groups_fn)(const float *x, float *y, int64_t n, int64_t stride, const float *w, const float *b,
                                              float eps);
typedef void (*tdm_f32_rms_norm_row_fn)(const float *x, float *y, int64_t n, const float *w, float eps);
struct tdm_attn_rows;
typedef void (*tdm_f32_attention_rows_fn)(const struct tdm_attn_rows *a, float *ws);
extern const tdm_f32_binary_row_fn tdm_f32_binary_row;
extern const tdm_f32_unary_fn tdm_f32_unary;
/* Sum or mean of contiguous rows; NULL where the build has none (the reduction's generic order). */
extern const tdm_f32_sum_row_fn tdm_f32_sum_trailing;
extern const tdm_f32_softmax_row_fn tdm_f32_softmax_row;
/* Layer and RMS norm of groups of at most NORM_SIMD_MAX (reduce.c) values. */
extern const tdm_f32_layer_norm_row_fn tdm_f32_layer_norm_row;
extern const tdm_f32_layer_norm_4groups_fn tdm_f32_layer_norm_4groups;
extern const tdm_f32_rms_norm_row_fn tdm_f32_rms_norm_row;
extern const tdm_f32_attention_rows_fn tdm_f32_attention_rows;

/* y[i] = x0[i*sa] op x1[i*sb] for one row of a float32 binary op; sa, sb are 0 (broadcast) or 1. */
void tdm_f32_binary_row__scalar(int code, const float *x0, int64_t sa, const float *x1, int64_t sb, float *y, int64_t n);
/* y[i] = op(x[i]) for a float32 unary op. */
void tdm_f32_unary__scalar(int code, const float *x, float *y, int64_t n);

/* Sum of a contiguous row in float32, left to right (the generic reduction's order). */
float tdm_f32_sum_row__scalar(const float *x, int64_t n);
/* softmax / log_softmax over n values `stride` apart (statistics in double). */
void tdm_f32_softmax_group__scalar(const float *x, float *y, int64_t n, int64_t stride, bool logp);
/* Layer norm and RMS norm over n values `stride` apart (statistics in double); w, b may be NULL. */
void tdm_f32_layer_norm_group__scalar(const float *x, float *y, int64_t n, int64_t stride, const float *w, const float *b, float eps);
void tdm_f32_rms_norm_group__scalar(const float *x, float *y, int64_t n, int64_t stride, const float *w, float eps);
/* The row and four-group forms of the references (the group kernels at stride 1, four groups in turn). */
void tdm_f32_softmax_row__scalar(const float *x, float *y, int64_t n, bool logp);
void tdm_f32_layer_norm_row__scalar(const float *x, float *y, int64_t n, const float *w, const float *b, float eps);
void tdm_f32_layer_norm_4groups__scalar(const float *x, float *y, int64_t n, int64_t stride, const float *w, const float *b, float eps);
void tdm_f32_rms_norm_row__scalar(const float *x, float *y, int64_t n, const float *w, float eps);

/* The geometry of a convolution: x [N, C, H, W], y [N, O, OH, OW], kernel KH × KW. */
typedef struct tdm_conv_geom {
  int64_t N, C, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw;
} tdm_conv_geom;
/* One output value: acc + the sum over the group's Cg channels (xg [Cg, H, W], wo [Cg, KH, KW])
 * of the taps that land inside x. */
float tdm_f32_conv_point__scalar(const tdm_conv_geom *g, const float *xg, const float *wo, int64_t Cg, int64_t oh, int64_t ow, float acc);

/* Convolution as a GEMM: x's patches for output positions [n0, n0 + nc) of one group (xg [Cg, H, W])
 * packed in 8-column panels, colp[p][k][t] = patch value k of position n0 + 8p + t, zero past nc
 * (k = (c·KH + kh)·KW + kw; K = Cg·KH·KW). A convolution's workspace holds K × chunk floats,
 * chunk = tdm_conv_gemm_chunk(K, OH·OW): whole panels, about TDM_CONV_CHUNK_FLOATS in all (at least
 * one panel, at most every position). python/tandem/lowering/conv.py computes the same. */
#define TDM_CONV_CHUNK_FLOATS 262144
int64_t tdm_conv_gemm_chunk(int64_t K, int64_t N);
void tdm_f32_im2col_packed(const tdm_conv_geom *g, const float *xg, int64_t Cg, int64_t n0, int64_t nc, float *colp);
/* y[i·ldy + j] = bias[i] (or 0) + a[i, :] · column j of the packed panels bp [ceil(N/8), K, 8], for
 * i < M, j < N. */
void tdm_f32_conv_gemm__scalar(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y, int64_t ldy);
/* Convolution at few output positions (a streaming step: N = OH·OW <= TDM_CONV_DOT_MAX_N), where
 * 8-column panels would be mostly zeros: x's patches as rows, colt[j][k] = patch value k of
 * position n0 + j (tdm_f32_im2row, j < nc), then y[i·ldy + j] = bias[i] (or 0) + a[i, :] · colt[j, :]
 * as dot products along k over contiguous rows (tdm_f32_conv_dot_*): each weight is read once per
 * call in vector loads, several rows of a at once. A row's result does not depend on how many rows
 * run with it (any split over threads gives the same bits). */
#define TDM_CONV_DOT_MAX_N 4
void tdm_f32_im2row(const tdm_conv_geom *g, const float *xg, int64_t Cg, int64_t n0, int64_t nc, float *colt);
void tdm_f32_conv_dot__scalar(int64_t M, int64_t N, int64_t K, const float *a, const float *colt, const float *bias, float *y, int64_t ldy);
/* convrate: convolution as a GEMM without im2col's buffer (1-d, column stride 1, no padding: Mimi's
 * SEANet): B's row k = c·KW + kw is x's channel row at an offset, B(k, j) = xb[c·cs + koff[kw] + j]
 * (xb = x, cs = W, koff[kw] = kw·dw), for the full 8-column panels j < N8 = N / 8 · 8; the columns
 * [N8, N) come from tail, that panel packed as tdm_f32_im2col_packed packs it (tdm_f32_conv_x_tail;
 * NULL when N8 == N). y[i·ldy + j] = bias[i] (or 0) + a[i, :] · B(:, j), each output's products
 * added in the order k = 0, 1, ...: the bits of tdm_f32_conv_gemm on im2col's panels. */
#define TDM_CONV_X_MAX_KW 32
typedef struct tdm_conv_x {
  int64_t Cg, KW, cs, koff[TDM_CONV_X_MAX_KW];
  const float *xb, *tail;
} tdm_conv_x;
/* B's row k (of the full panels) in x. */
static inline const float *tdm_conv_x_row(const tdm_conv_x *b, int64_t k) { return b->xb + (k / b->KW) * b->cs + b->koff[k % b->KW]; }
void tdm_f32_conv1d_gemm_no_im2col__scalar(int64_t M, int64_t N, const tdm_conv_x *b, const float *a, const float *bias, float *y,
                                           int64_t ldy);
/* tail [Cg·KW, 8] = B's columns N8 .. N - 1 (zeros after): the panel tdm_f32_im2col_packed makes. */
void tdm_f32_conv_x_tail(const tdm_conv_x *b, int64_t N, float *tail);
typedef void (*tdm_conv1d_gemm_no_im2col_fn)(int64_t M, int64_t N, const tdm_conv_x *b, const float *a, const float *bias, float *y,
                                             int64_t ldy);
/* The variant for the runtime (config.c), or NULL where the packed GEMM is another ISA's (native
 * AVX2: its bits differ, so conv.c keeps im2col there). */
tdm_conv1d_gemm_no_im2col_fn tdm_f32_conv1d_gemm_no_im2col(void);
/* winograd: 1-d convolutions by Winograd minimal filtering F(m, r) (conv_wino.c, whose top gives the
 * transforms), as the correlation y[o, j] = Σ_c Σ_k w[o, c, k] · d_c(j + k), k < r, of r taps over
 * a view of x:
 *  - r = 3, m = 2 or 4: k3 convs (stride 1, no padding, dilation 1), d_c = x's channel row;
 *  - r = 2, m = 2 or 3: convs with kernel 2s and stride s (SEANet's downsampling), split by input
 *    phase into C·s channels of a 2-tap conv, d_(c·s + p)(i) = x[c, s·i + p], w'[o, c·s + p, k] =
 *    w[o, c, s·k + p]; and transposed convs with kernel 2s and stride s (its upsampling), split by
 *    output phase into O·s rows, output t = s·j + p of channel o from row o·s + p, d_c(i) =
 *    x[c, i - 1] (zero outside x), w'[o·s + p, c, 0] = wt[o, p + s, c], w'[o·s + p, c, 1] = wt[o, p, c].
 * tdm_wino describes the view: F(m, r) has T = m + r - 1 transformed points, and the GEMMs run U_i
 * [O, C] (O rows, C channels of the view) @ V_i [C, tiles]. */
#define TDM_CONV_WINO_MIN_C 32
#ifndef TDM_CONV_WINO4_MIN_N
#define TDM_CONV_WINO4_MIN_N 64
#endif
typedef struct tdm_wino {
  int m, r;              /* F(m, r) */
  int64_t O, C, N;       /* the view's rows, channels and outputs per row */
  int64_t xs, xw, L, lp; /* channel c reads xb = x + (c / xs)·xw + c % xs: d_c(i) = xb[(i - lp)·xs] for 0 <= i - lp < L, else 0 */
  int64_t ys, yw;        /* row o writes yb = y + (o / ys)·yw + o % ys: output j at yb[j·ys], plus bias[o / ys] */
} tdm_wino;
/* The views above: a k3 conv y [O, N] of x [C, N + 2]; a kernel-2s stride-s conv y [O, N] of x
 * [C, W] (W >= s·(N + 1)); a kernel-2s stride-s transposed conv y [O, s·(T + 1)] of x [C, T]. */
tdm_wino tdm_wino_k3(int m, int64_t O, int64_t C, int64_t N);
tdm_wino tdm_wino_strided(int m, int64_t O, int64_t C, int64_t s, int64_t W, int64_t N);
tdm_wino tdm_wino_transposed(int m, int64_t O, int64_t C, int64_t s, int64_t T);
/* u [T, O, C] = G w for the view's taps w [O, C, r], each value rounded once from double. */
void tdm_conv_wino_weights(int m, int r, int64_t O, int64_t C, const float *w, float *u);
/* The tiles (m outputs each) per chunk that a workspace of wsn floats holds, a multiple of 8, at
 * most every tile of the N outputs rounded up to 8: V [T, C, tiles] and M [T, O, tiles]. */
int64_t tdm_conv_wino_tiles(const tdm_wino *g, int64_t wsn);
/* y = the view's correlation from u, plus bias (or none), then the activation act (TDM_CONV_ACT_*;
 * only with ys = 1), on one thread: the floats of the threaded form the ops run (conv.h,
 * tdm__conv_wino). false, nothing written, when ws [wsn] holds less than a panel of tiles, F(m, r)
 * is not one of the four, or x holds a NaN or an infinity (which the transforms would spread to the
 * other outputs of its tiles: the direct path keeps torch's pattern). */
bool tdm_f32_conv_wino(const tdm_wino *g, const float *x, const float *u, const float *bias, float *y, float *ws, int64_t wsn, int act);
/* ELU (alpha 1) of n floats, maximum(x, exp(minimum(x, 0)) - 1): the reference is the four
 * elementwise ops in turn (tdm_f32_elu__chain, elementwise.c, with the elu op); the SIMD128 form does the four in
 * registers, the last n % 4 through the chain (the same floats). */
void tdm_f32_elu__chain(const float *x, float *y, int64_t n);
typedef void (*tdm_f32_elu_fn)(const float *x, float *y, int64_t n);
extern const tdm_f32_elu_fn tdm_f32_elu;
/* b [K, N] row-major as 8-column panels bp [ceil(N/8), K, 8], zero past N. */
void tdm_f32_pack_panels(int64_t K, int64_t N, const float *b, float *bp);
/* Transposed convolution, the reference: every input value times every tap added where it lands.
 * g: x [N, C, H, W] the input, [OH, OW] the output's size; wt [groups, Og·KH·KW, Cg] (torch's
 * [C, Og, KH, KW] weight rearranged at export), y [N, O, OH, OW]. */
void tdm_f32_conv_transpose__scalar(const tdm_conv_geom *g, int64_t groups, int64_t O, const float *x, const float *wt, const float *bias,
                                    float *y);
/* One output value of max_pool / avg_pool over xc [H, W] (the reference). */
float tdm_f32_pool_point__scalar(const tdm_conv_geom *g, bool is_max, bool include_pad, const float *xc, int64_t oh, int64_t ow);
/* Direct convolution of one output channel's plane yc [OH, OW] (depthwise, tiny kernels: conv.c's
 * path without a workspace): xg [Cg, H, W] the group's input, wo [Cg, KH, KW], bias b. The scalar
 * reference is tdm_f32_conv_point__scalar at every position. */
void tdm_f32_conv_plane__scalar(const tdm_conv_geom *g, const float *xg, const float *wo, int64_t Cg, float b, float *yc);
/* Pooling of one channel's plane xc [H, W] into yc [OH, OW]: tdm_f32_pool_point__scalar at every position. */
void tdm_f32_pool_plane__scalar(const tdm_conv_geom *g, bool is_max, bool include_pad, const float *xc, float *yc);
typedef void (*tdm_conv_plane_fn)(const tdm_conv_geom *g, const float *xg, const float *wo, int64_t Cg, float b, float *yc);
typedef void (*tdm_pool_plane_fn)(const tdm_conv_geom *g, bool is_max, bool include_pad, const float *xc, float *yc);
typedef void (*tdm_conv_dot_fn)(int64_t M, int64_t N, int64_t K, const float *a, const float *colt, const float *bias, float *y,
                                int64_t ldy);
/* conv_bf16's GEMV (conv_q8.c): yt[r·ldy + i] = Σ_k a_r[k] · w(i, k) for the rows of activations
 * r < R and the weight rows i = 2p, 2p + 1 (those below M) of the panels p in [p0, p1). w bfloat16
 * in 2-row panels [ceil(M/2), K8, 2, 8]: w(i, k) at ((i/2)·K8 + k/8)·16 + (i%2)·8 + k%8, a float32's
 * top half, zeros past K; eo the rows split into blocks of 8 k, a_r's 4 even k then its 4 odd k
 * (block b of row r at eo + (r·K8 + b)·8, zeros past K). Each sum is 4 lane sums, lane l adding
 * block by block the products of k = 8b + 2l, then 8b + 2l + 1, then (s0 + s1) + (s2 + s3): the same
 * bits in both variants where tdm_madd rounds twice (not the relaxed builds), and a row's value
 * does not depend on the panels or rows run with it. */
static inline float tdm_bf16_to_f32(uint16_t h) {
  const union {
    uint32_t u;
    float f;
  } v = {(uint32_t)h << 16};
  return v.f;
}
void tdm_bf16_gemv__scalar(int64_t R, int64_t M, int64_t K8, const float *eo, const uint16_t *w, int64_t p0, int64_t p1, float *yt,
                           int64_t ldy);
typedef void (*tdm_bf16_gemv_fn)(int64_t R, int64_t M, int64_t K8, const float *eo, const uint16_t *w, int64_t p0, int64_t p1, float *yt,
                                 int64_t ldy);
extern const tdm_bf16_gemv_fn tdm_bf16_gemv;
/* The convolution GEMM on 16-bit integers (conv_i16.c: conv_i16 and conv_transpose_i16):
 * y[i·ldy + j] = sa[i] · Σ_b sb(b, j) · Σ_{k in block b} a[i·K32 + k] · q(k, j) + bias[i] for i < M,
 * j < N, a int16 [M, K32] (K32 a multiple of 32, zeros past K), q and sb the 8-column panels of
 * tdm_i16_quantize_panel (panel j/8 at bq + (j/8)·K32·8 and sb + (j/8)·(K32/32)·8). Per output:
 * t = 0, per block in order t = isum · sb + t, then y = t · sa + bias, the scalar reference rounding
 * each step twice (the SIMD128 variant's bits; the relaxed builds fuse them). */
void tdm_i16_conv_gemm__scalar(int64_t M, int64_t N, int64_t K32, const int16_t *a, const float *sa, const int16_t *bq, const float *sb,
                               const float *bias, float *y, int64_t ldy);
/* An 8-column panel [K, 8] of finite floats -> codes q [K32/2, 8, 2] (column c's k pair at
 * (k/2)·16 + 2c) and scales s [K32/32, 8]: per block of 32 k and column, s = max |x| / 4095 and
 * q = nearest-even(x / s) clamped to ±4095 (0 where s is 0). Returns false (q and s then undefined)
 * if the panel holds a NaN or ±inf. */
bool tdm_i16_quantize_panel__scalar(int64_t K, const float *panel, int16_t *q, float *s);
typedef void (*tdm_i16_conv_gemm_fn)(int64_t M, int64_t N, int64_t K32, const int16_t *a, const float *sa, const int16_t *bq,
                                     const float *sb, const float *bias, float *y, int64_t ldy);
typedef bool (*tdm_i16_quantize_panel_fn)(int64_t K, const float *panel, int16_t *q, float *s);
extern const tdm_i16_conv_gemm_fn tdm_i16_conv_gemm;
extern const tdm_i16_quantize_panel_fn tdm_i16_quantize_panel;
/* The variants the runtime uses (config.c). */
extern const tdm_conv_plane_fn tdm_f32_conv_plane;
extern const tdm_pool_plane_fn tdm_f32_pool_plane;
extern const tdm_conv_dot_fn tdm_f32_conv_dot;
/* The runtime's second step: y_g [Og, OH, OW] += col2im(z [Og·KH·KW, H·W]). */
void tdm_f32_col2im_add(const tdm_conv_geom *g, int64_t Og, const float *z, float *yg);
/* The same for 1-d without padding or dilation (tdm__col2im_phases_fit), y written whole: output
 * t = q·sw + r is bias + z[r][q] + z[r + sw][q - 1] + ... (the taps that land on it, in order of
 * kw, as bias then tdm_f32_col2im_add give: the same bits), one output phase r at a time, so the
 * z rows are read in order (SIMD128: 4 outputs of a phase at once). */
bool tdm__col2im_phases_fit(const tdm_conv_geom *g);
void tdm_f32_col2im_phases__scalar(const tdm_conv_geom *g, int64_t Og, const float *z, const float *bias, float *yg);
typedef void (*tdm_col2im_phases_fn)(const tdm_conv_geom *g, int64_t Og, const float *z, const float *bias, float *yg);
extern const tdm_col2im_phases_fn tdm_f32_col2im_phases;

/* Quantized weights (quant.c, the references; quant_simd128.c, quant_relaxed.c; layouts in docs/ops.md): y [M, N] = a [M, K] @ the dequantized
 * weights. int8: qp [ceil(N/8), K, 8], scale [ceil(N/8), 8]. int4: qp [ceil(N/8), 4·ceil(K/8), 8]
 * bytes in blocks of 8 k (tdm_q4_code), scale [ceil(N/8), ceil(K/G), 8], G even. */
/* The int4 block: a panel's k in [8b, 8b + 8) are its 32 bytes from 32·b, column j's four at 4j + r
 * (r = 0..3), byte 4j + r holding k = 8b + 2r in its low nibble and 8b + 2r + 1 in its high one, each
 * as q + 8 in [0, 15]. Read as 16-bit lanes, column j's 16 codes of a block sit in two adjacent
 * lanes (the integer-dot kernels multiply them without a shuffle); codes past K are 8 (q = 0). */
#define TDM_Q4_BLOCK_BYTES(K) ((((K) + 7) / 8) * 32) /* one panel's bytes */
static inline int tdm_q4_code(const uint8_t *panel, int64_t k, int64_t j) {
  const uint8_t b = panel[(k / 8) * 32 + (j % 8) * 4 + (k % 8) / 2];
  return (k % 2 ? b >> 4 : b & 15) - 8;
}
void tdm_q8_gemm__scalar(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y);
void tdm_q4_gemm__scalar(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale, float *y);
typedef void (*tdm_q8_gemm_fn)(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y);
typedef void (*tdm_q4_gemm_fn)(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale, float *y);
extern const tdm_q8_gemm_fn tdm_q8_gemm; /* the variant the runtime uses (config.c) */
extern const tdm_q4_gemm_fn tdm_q4_gemm;
/* int8 weights times int8 activations, for M = 1 (docs/ops.md, "Integer dot products"): the
 * activation row a [K] is quantized once per call in blocks of TDM_Q8_ABLOCK along K (symmetric,
 * xs[b] = max|a| / 127 over block b, xq[k] = round-half-even(a[k] / xs[b]) in [-127, 127], like
 * llama.cpp's Q8_0) into xq [K rounded up to even] int16 (the pad 0) and xs [ceil(K/32)]; returns
 * false, writing part of them, when a holds a NaN or ±inf (the caller then takes the float path,
 * which propagates them). The GEMV sums xq·q exactly in int32 per block, adds each block's sum
 * times xs[b] to a float total in block order and multiplies by the column scale at the end, so
 * every variant gives the same bits. */
#define TDM_Q8_ABLOCK 32
#define TDM_Q8_DOT_MAX_K 8192 /* the runtime quantizes into a stack buffer up to this K */
bool tdm_q8_quantize_row(int64_t K, const float *a, int16_t *xq, float *xs);
/* The quantizer of tdm_q8_quantize_row (qmax 127) and tdm_conv_q8_quantize_row (TDM_Q8_A16_MAX): the
 * scalar reference and (TDM_SIMD128) four k per step, the same floats (one division and
 * round-half-even per k); config.c picks the one those two call (tdm_q8_quantize_rows). */
bool tdm_q8_quantize_row__scalar(int64_t K, const float *a, int16_t *xq, float *xs, float qmax);
bool tdm_q8_quantize_row__simd128(int64_t K, const float *a, int16_t *xq, float *xs, float qmax);
typedef bool (*tdm_q8_quantize_rows_fn)(int64_t K, const float *a, int16_t *xq, float *xs, float qmax);
extern const tdm_q8_quantize_rows_fn tdm_q8_quantize_rows; /* config.c: SIMD128 in wasm, natively the scalar loop */
void tdm_q8_gemv_dot__scalar(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale, float *y);
typedef void (*tdm_q8_gemv_dot_fn)(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                                   float *y);
extern const tdm_q8_gemv_dot_fn tdm_q8_gemv_dot;
/* The same for 2 to TDM_Q8_DOT_MAX_ROWS rows (a Mimi step's two frames, a short prefill chunk; the
 * SIMD variants take any M, four rows at a time):
 * row r's activations quantized by tdm_q8_quantize_row at xq + r·KP and xs + r·NB (KP = K rounded up
 * to even, NB = ceil(K/32)), its results at y + r·ldy; each weight block is loaded once for every
 * row, and each row's values are tdm_q8_gemv_dot's bits (also with M = 1). */
#define TDM_Q8_DOT_MAX_ROWS 8 /* per call; matmul_q8 runs more rows in blocks of up to 8 (measured faster than the tiles at 16-256) */
void tdm_q8_gemm_dot__scalar(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                             float *y, int64_t ldy);
typedef void (*tdm_q8_gemm_dot_fn)(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp,
                                   const float *scale, float *y, int64_t ldy);
extern const tdm_q8_gemm_dot_fn tdm_q8_gemm_dot;
/* The paired int8 layout (docs/ops.md, "Quantized weights"; written by the exporter,
 * python/tandem/layout.py, for matmul_q8 / embedding_q8 with the layout attribute 1): K even, each
 * panel's rows k, k + 1 (16 bytes) reordered so that each column's two weights are adjacent,
 * qp[((j / 8)·K + k - k % 2)·8 + (j % 8)·2 + k % 2]. The same bytes in the same places per 16, so
 * tdm_q8_pair_panels repacks plain panels in place (to_pairs) and back (!to_pairs) (the selftest's
 * inputs). The GEMVs over it give tdm_q8_gemv_dot's / tdm_q8_gemm_dot's bits on plain panels (the
 * same integer sums and float steps); they save the SIMD kernels' interleave per pair of rows.
 * Rows r of xq at r·K (K is even). */
void tdm_q8_pair_panels(int64_t N, int64_t K, int8_t *qp, bool to_pairs);
/* The float path over the paired layout (tdm_q8_gemm__scalar's sums; matmul_q8's rows holding a NaN
 * or ±inf when its weights are paired). */
void tdm_q8_gemm_paired__scalar(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y);
void tdm_q8_gemv_dot_paired__scalar(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                                    float *y);
void tdm_q8_gemm_dot_paired__scalar(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp,
                                    const float *scale, float *y, int64_t ldy);
extern const tdm_q8_gemv_dot_fn tdm_q8_gemv_dot_paired; /* the variants the runtime uses (config.c) */
extern const tdm_q8_gemm_dot_fn tdm_q8_gemm_dot_paired;
/* conv_q8's rows (conv_q8.c, branch dotconv): as tdm_q8_quantize_row but to int16, xs[b] = max|a| /
 * 32767 and xq in [-32767, 32767]. tdm_q8_gemv_dot / tdm_q8_gemm_dot take such rows too: every
 * variant sums int16 × int8 pairs exactly in int32 (|a block's sum| <= 32·32767·127 < 2^31) and
 * gives the same bits (kernel_selftest, check_q8_rows with int16 rows). A variant that assumes
 * int8 activations (a relaxed i8 dot) must not serve conv_q8. */
#define TDM_Q8_A16_MAX 32767
bool tdm_conv_q8_quantize_row(int64_t K, const float *a, int16_t *xq, float *xs);
/* int4 weights times int8 activations (docs/ops.md, "Integer dot products for int4"), every build: the
 * row a [K] quantized per weight group of G (G % 8 == 0, TDM_Q4_DOT_MIN_G <= G: whole blocks) to int8 xq [K + 1]
 * (the pad 0) with scales xs [ceil(K/G)] as tdm_q8_quantize_row does per block, and xsum [ceil(K/G)]
 * the sum of each group's xq (the bias correction of kernels that read the codes biased to q + 8);
 * false on a NaN or ±inf (the float path then). The GEMV sums xq·q exactly in int32 per group, then
 * total = total + (float(sum)·xs[g])·scale[g][j], unfused, group by group: every variant gives the
 * same bits. */
#define TDM_Q4_DOT_MIN_G 16
/* The activations of the SIMD128 and AVX2 int4 dot kernels for K values of xq (its pad 0 at K,
 * zeros past it), x16 [K rounded up to 8]: per block of 8 k the pairs [x[k0 + p]·s_p, x[k0 + 4 + p]·s_p]
 * for p = 0..3, s = 256, 16, 1, 256, as int16 (|x·256| <= 32512): each pair multiplies the codes a
 * block holds in bits 4p..4p + 3 of a column's two 16-bit lanes, masked in place (times 16^p) or,
 * the last, shifted down, so that every product is 256·xq·(q + 8). */
static inline void tdm_q4_block_x16(int64_t K, const int8_t *xq, int16_t *x16) {
  static const int16_t s[4] = {256, 16, 1, 256};
  for (int64_t k0 = 0; k0 < K; k0 += 8)
    for (int p = 0; p < 4; p++) {
      x16[k0 + 2 * p] = (int16_t)(k0 + p <= K ? xq[k0 + p] * s[p] : 0);
      x16[k0 + 2 * p + 1] = (int16_t)(k0 + 4 + p <= K ? xq[k0 + 4 + p] * s[p] : 0);
    }
}
/* Where the SIMD128 and AVX2 int4 dot kernels sum a group in one pass (groups of at most
 * TDM_Q4_WHOLE k): each lane starts at 256·(−8·xsum[g]) and ends at 256·s, s the group's exact sum
 * Σ xq·q, at most G·(8·15·127·256 / 8 + 2048·127) < 2^31 in between; the float conversion of 256·s is
 * 256 times s's, so scaled by xs[g] / 256 it rounds as the reference's s·xs[g] wherever xs[g] / 256
 * is exact: true where every group scale is 0 or at least 2^-100. Else (larger groups, tiny scales)
 * they flush the 256-times sums into int32 sums every TDM_Q4_WHOLE k. */
#define TDM_Q4_WHOLE 2048
static inline bool tdm_q4_whole(int64_t G, int64_t NG, const float *xs) {
  if (G > TDM_Q4_WHOLE) return false;
  for (int64_t g = 0; g < NG; g++)
    if (xs[g] != 0 && !(xs[g] >= 0x1p-100f)) return false;
  return true;
}
bool tdm_q4_quantize_row(int64_t K, int64_t G, const float *a, int8_t *xq, float *xs, int32_t *xsum);
/* Its loop, as tdm_q8_quantize_rows: config.c picks SIMD128's in wasm, natively the scalar one (the same codes, kernel_selftest). */
bool tdm_q4_quantize_row__scalar(int64_t K, int64_t G, const float *a, int8_t *xq, float *xs, int32_t *xsum);
bool tdm_q4_quantize_row__simd128(int64_t K, int64_t G, const float *a, int8_t *xq, float *xs, int32_t *xsum);
typedef bool (*tdm_q4_quantize_rows_fn)(int64_t K, int64_t G, const float *a, int8_t *xq, float *xs, int32_t *xsum);
extern const tdm_q4_quantize_rows_fn tdm_q4_quantize_rows;
void tdm_q4_gemv_dot__scalar(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum, const uint8_t *qp,
                             const float *scale, float *y);
typedef void (*tdm_q4_gemv_dot_fn)(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum,
                                   const uint8_t *qp, const float *scale, float *y);
/* The variant matmul_q4 calls for one row (config.c): the relaxed dot's where the build has it, else
 * the SIMD128 one (natively on x86-64 the AVX2 one where the CPU has it), else the scalar reference. */
extern const tdm_q4_gemv_dot_fn tdm_q4_gemv_dot;
/* The same for 1 to TDM_Q8_DOT_MAX_ROWS rows (as tdm_q8_gemm_dot): row r's xq at r·(K + 1), its xs
 * and xsum at r·ceil(K/G), its results at y + r·ldy, each row the one-row GEMV's bits. */
void tdm_q4_gemm_dot__scalar(int64_t M, int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum,
                             const uint8_t *qp, const float *scale, float *y, int64_t ldy);
typedef void (*tdm_q4_gemm_dot_fn)(int64_t M, int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum,
                                   const uint8_t *qp, const float *scale, float *y, int64_t ldy);
extern const tdm_q4_gemm_dot_fn tdm_q4_gemm_dot;
#if TDM_RELAXED_DOT
/* Codes biased to q + 8 in [0, 15] (the relaxed dot's 7-bit operand, exact on every engine), 16-bit
 * partial sums flushed to 32 bits every 32 k (4 blocks), the bias removed per group as 8·xsum[g]. */
void tdm_q4_gemv_dot__relaxed(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum, const uint8_t *qp,
                              const float *scale, float *y);
void tdm_q4_gemm_dot__relaxed(int64_t M, int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum,
                              const uint8_t *qp, const float *scale, float *y, int64_t ldy);
#endif
#if TDM_SIMD128
/* The same on SIMD128 alone: each block's codes masked in place in their 16-bit lanes and
 * i32x4.dot_i16x8_s with tdm_q4_block_x16's activations (no byte shuffle), one row or 2 to 4. */
void tdm_q4_gemv_dot__simd128(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum, const uint8_t *qp,
                              const float *scale, float *y);
void tdm_q4_gemm_dot__simd128(int64_t M, int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum,
                              const uint8_t *qp, const float *scale, float *y, int64_t ldy);
#endif
/* The register tiles alone, also for M = 1 (what a GEMM split by rows runs: see gemm.h). */
extern const tdm_q8_gemm_fn tdm_q8_gemm_tiles;
extern const tdm_q4_gemm_fn tdm_q4_gemm_tiles;
#if TDM_X86_AVX2
/* quant_x86.c: AVX2 (no FMA), the bits of the SIMD128 variants they replace (call only where
 * tdm_cpu_avx2_fma, gemm.h): the integer-dot GEMV (so also the scalar reference's bits), the float
 * GEMM over int8 weights (M = 1 a GEMV over four panels) and its register tiles alone; the same
 * two for int4. */
void tdm_q8_gemv_dot__avx2(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale, float *y);
void tdm_q8_gemm_dot__avx2(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                           float *y, int64_t ldy);
/* The same two over the paired layout (no byte shuffle: each pair of rows sign-extended as it is). */
void tdm_q8_gemv_dot_paired__avx2(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale, float *y);
void tdm_q8_gemm_dot_paired__avx2(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                                  float *y, int64_t ldy);
void tdm_q8_gemm__avx2(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y);
void tdm_q8_gemm_tiles__avx2(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y);
/* AVX-512F (call only where tdm_cpu_avx512): the int8 tiles 6 rows by two panels, the same bits. */
void tdm_q8_gemm_tiles__avx512(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y);
/* The float GEMM over int4 weights (M = 1 the group-sum GEMV over two panels) and its tiles alone. */
void tdm_q4_gemm__avx2(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale, float *y);
void tdm_q4_gemm_tiles__avx2(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale, float *y);
/* The int4 integer-dot GEMV (tdm_q4_gemv_dot__simd128's steps on a whole block of 8 columns per vector). */
void tdm_q4_gemv_dot__avx2(int64_t N, int64_t K, int64_t G, const int8_t *xq, const float *xs, const int32_t *xsum, const uint8_t *qp,
                           const float *scale, float *y);
#endif

/* One query row of G query heads that read one K/V head (grouped-query attention). Head g's query
 * is q + g·qstride [D], its output y + g·ystride [Dv]; key j is k + j·kstride [D], value j is
 * v + j·vstride [Dv] (kstride = D, vstride = Dv for rows one after another; larger for a time-first
 * cache [T, H, D] read in place, H·D). Head g's score for key j is (q · k_j)·scale, plus
 * mf[g·mhead + j·mstep] with a float mask, or
 * -inf where a bool mask mb[g·mhead + j·mstep] is 0; y is the softmax-weighted sum of the value
 * rows (zeros where every key is masked). mb and mf may be NULL. */
typedef struct tdm_attn_rows {
  const float *q, *k, *v; /* q [G][qstride], k [jend][kstride], v [jend][vstride] */
  float *y;               /* [G][ystride] */
  int64_t G, qstride, ystride, jend, D, Dv, kstride, vstride;
  float scale;
  const uint8_t *mb; /* bool mask or NULL */
  const float *mf;   /* float mask or NULL */
  int64_t mhead, mstep;
} tdm_attn_rows;
/* Head g's query, output and mask in a tdm_attn_rows. */
#define TDM_ATTN_Q(a, g) ((a)->q + (g) * (a)->qstride)
#define TDM_ATTN_Y(a, g) ((a)->y + (g) * (a)->ystride)
#define TDM_ATTN_MB(a, g) ((a)->mb ? (a)->mb + (g) * (a)->mhead : NULL)
#define TDM_ATTN_MF(a, g) ((a)->mf ? (a)->mf + (g) * (a)->mhead : NULL)
/* The reference: one head after another. ws: jend floats. */
void tdm_f32_attention_rows__scalar(const tdm_attn_rows *a, float *ws);

#if TDM_SIMD128
void tdm_f32_conv_gemm_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, const float *bias, float *y,
                                    int64_t ldy);
void tdm_f32_conv1d_gemm_no_im2col__simd128(int64_t M, int64_t N, const tdm_conv_x *b, const float *a, const float *bias, float *y,
                                            int64_t ldy);
void tdm_f32_elu__simd128(const float *x, float *y, int64_t n);
/* N <= TDM_CONV_DOT_MAX_N: 8 rows of a for one position, 4 for two, 2 for three or four (8 vector
 * accumulators), k 4 at a time, the last K % 4 products added after the lanes are summed. The R
 * rows of a tile come from R runs M / R rows apart (R sequential weight streams), the rows from
 * R·(M / R) on one at a time; a row's sums are those it has alone. */
void tdm_f32_conv_dot__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *colt, const float *bias, float *y,
                               int64_t ldy);
/* The same tiles and runs (4 rows for one position), each row read from its first and second half at once
 * (twice the weight streams in flight: the weights of a streaming step come from memory); lane sums
 * in another order than tdm_f32_conv_dot__simd128's (within rounding of the reference), a row's
 * value independent of the rows beside it. The one config.c picks. */
void tdm_f32_conv_dot_2s__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *colt, const float *bias, float *y,
                                  int64_t ldy);
/* The 16-bit integer conv GEMM's 4-row x 8-column tiles (`i32x4.dot_i16x8_s` a k pair), each tile
 * over all of K and every panel in turn (no blocking: a's rows, the weights, stream from memory once),
 * and its panel quantizer: the scalar references' integers and float steps. */
void tdm_i16_conv_gemm__simd128(int64_t M, int64_t N, int64_t K32, const int16_t *a, const float *sa, const int16_t *bq, const float *sb,
                                const float *bias, float *y, int64_t ldy);
bool tdm_i16_quantize_panel__simd128(int64_t K, const float *panel, int16_t *q, float *s);
/* Two panels at once, p and p + h (the chunk's two halves: two sequential weight streams), two rows
 * of activations at a time, 8 k a step: one 16-byte load of a row's 8 weights widened by
 * i32x4.shl(v, 16) (the even k) and v128.and(v, 0xFFFF0000) (the odd k). */
void tdm_bf16_gemv__simd128(int64_t R, int64_t M, int64_t K8, const float *eo, const uint16_t *w, int64_t p0, int64_t p1, float *yt,
                            int64_t ldy);
/* tdm_f32_col2im_phases__scalar's sums, 4 outputs of a phase at once where every tap lands inside z. */
void tdm_f32_col2im_phases__simd128(const tdm_conv_geom *g, int64_t Og, const float *z, const float *bias, float *yg);
/* Pooling: output columns [lo, hi) of row oh of one channel xc [H, W] (column stride 1 or 2, every
 * tap of the row inside x), in the scalar reference's order (exact); returns the first column not
 * written. */
int64_t tdm_f32_pool_row__simd128(const tdm_conv_geom *g, bool is_max, bool include_pad, const float *xc, int64_t oh, float *yr, int64_t lo,
                                  int64_t hi);
/* int8: M = 1 takes a GEMV path (four panels side by side), M > 1 4x8 register tiles; int4: the tiles for every M. */
void tdm_q8_gemm_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y);
void tdm_q4_gemm_4x8__simd128(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale, float *y);
/* Two panels at a time from two runs of columns N / 2 apart, then two side by side, then one panel
 * (quant_simd128.c; on the paired layout one 16-byte load per pair of k, widened in registers).
 * tdm_q8_gemv_dot__avx2 walks four runs N / 4 apart; every column's sums are the same either way. */
void tdm_q8_gemv_dot__simd128(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale, float *y);
void tdm_q8_gemv_dot_paired__simd128(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                                     float *y);
void tdm_q8_gemm_dot_paired__simd128(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp,
                                     const float *scale, float *y, int64_t ldy);
void tdm_q8_gemm_dot__simd128(int64_t M, int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale,
                              float *y, int64_t ldy);
void tdm_q8_gemm_tiles_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const int8_t *qp, const float *scale, float *y);
void tdm_q4_gemm_tiles_4x8__simd128(int64_t M, int64_t N, int64_t K, int64_t G, const float *a, const uint8_t *qp, const float *scale,
                                    float *y);
void tdm_f32_binary_row__simd128(int code, const float *x0, int64_t sa, const float *x1, int64_t sb, float *y, int64_t n);
/* false (nothing written) for the codes without a SIMD128 variant (log, sin, cos, log1p). */
bool tdm_f32_unary__simd128(int code, const float *x, float *y, int64_t n);
float tdm_f32_sum_row__simd128(const float *x, int64_t n);
void tdm_f32_softmax_row__simd128(const float *x, float *y, int64_t n, bool logp);
void tdm_f32_layer_norm_row__simd128(const float *x, float *y, int64_t n, const float *w, const float *b, float eps);
/* Four groups at x, x+1, x+2, x+3, each n values `stride` apart. */
void tdm_f32_layer_norm_4groups__simd128(const float *x, float *y, int64_t n, int64_t stride, const float *w, const float *b, float eps);
void tdm_f32_rms_norm_row__simd128(const float *x, float *y, int64_t n, const float *w, float eps);
/* Output columns [lo, hi) of row oh (column stride 1 or 2, every tap inside x, and for stride 2
 * the value after the last tap too), bias b; returns the first column not written (hi minus fewer
 * than 4), left for tdm_f32_conv_point__scalar. */
int64_t tdm_f32_conv_row__simd128(const tdm_conv_geom *g, const float *xg, const float *wo, int64_t Cg, int64_t oh, float b, float *yr,
                                  int64_t lo, int64_t hi);
/* All of one output channel's plane yc [OH, OW] (column stride 1 or 2), bias b: the group's rows
 * of xg [Cg, H, W] copied a band at a time into buf (cap floats) with zero columns on both sides,
 * then every column 16 / 4 at a time (the last, partial block through a temporary). Returns false,
 * writing nothing, when the rows of one output row do not fit in buf (the geometry alone decides).
 * Bit for bit the scalar reference when every weight is finite and b is not −0 (zero padding adds
 * 0·w where the reference adds nothing). */
#define TDM_CONV_PAD_FLOATS 4096
bool tdm_f32_conv_plane_padded__simd128(const tdm_conv_geom *g, const float *xg, const float *wo, int64_t Cg, float b, float *yc,
                                        float *buf, int64_t cap);
/* A plane as tdm_f32_conv_plane__scalar: over zero-padded rows where the row kernel would leave more
 * than 1/8 of the columns to the scalar one and the padded path is exact for this channel (every
 * weight finite, b not −0), else the row kernel between the scalar border columns. */
void tdm_f32_conv_plane__simd128(const tdm_conv_geom *g, const float *xg, const float *wo, int64_t Cg, float b, float *yc);
/* A plane as tdm_f32_pool_plane__scalar, the row kernel between the scalar border columns (exact). */
void tdm_f32_pool_plane__simd128(const tdm_conv_geom *g, bool is_max, bool include_pad, const float *xc, float *yc);
/* Each K and V row loaded once for the G heads. ws: G·jend floats; a head's values do not depend
 * on G (the heads of a group may run together or one by one: the same bits). */
void tdm_f32_attention_rows__simd128(const tdm_attn_rows *a, float *ws);
#endif

#endif
