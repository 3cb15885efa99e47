/* conv_gemm.c — the conv GEMM, im2col and col2im at Mimi's shapes against the packed GEMM at the
 * same M, N, K, for bench/probes/conv_gemm.mjs (which builds this with emcc, SIMD128, and with
 * clang-19 + wasm-opt, relaxed SIMD, as the shipped runtimes are built). One thread. */
#include <stdint.h>
#include <stdlib.h>

#include "../../src/kernels/gemm.h"
#include "../../src/kernels/variants.h"

static int64_t M, N, K;
static float *a, *bp, *bias, *y, *x, *z, *yt;
static tdm_conv_geom g;
static int64_t Og;

static void fill(float *p, int64_t n, uint32_t r) {
  for (int64_t i = 0; i < n; i++) r = r * 1664525u + 1013904223u, p[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
}

/* A GEMM [M, K] x [K, N] (N in panels). */
int setup(int m, int n, int k) {
  M = m, N = n, K = k;
  const int64_t NP = (N + 7) / 8 * 8;
  a = malloc(sizeof(float) * (size_t)(M * K)), bp = malloc(sizeof(float) * (size_t)(NP * K));
  bias = malloc(sizeof(float) * (size_t)M), y = malloc(sizeof(float) * (size_t)(M * N));
  if (!a || !bp || !bias || !y) return 0;
  fill(a, M * K, 1), fill(bp, NP * K, 2), fill(bias, M, 3);
  return 1;
}

/* 0: the conv GEMM (tdm_f32_conv_gemm_4x8__simd128), 2: gemm.c's packed tiles, 3: gemm.c's row-major GEMM (the
 * 1×1 convs' path; bp read as [K, N]). */
float run_gemm(int which, int reps) {
  for (int i = 0; i < reps; i++) {
    if (which == 0) tdm_f32_conv_gemm_4x8__simd128(M, N, K, a, bp, bias, y, N);
    else if (which == 2) tdm_f32_gemm_packed_ld_4x8__simd128(M, N, K, a, bp, y, N);
    else tdm_f32_gemm_rows_4x8__simd128(M, N, K, a, bp, y); /* bp read as a row-major [K, N] */
  }
  return y[M * N - 1];
}

/* 1-d conv C -> (im2col K = C·k) at `out` positions, stride s, the input holding (out-1)·s + k values. */
int setup_im2col(int C, int k, int s, int out) {
  g = (tdm_conv_geom){1, C, 1, (out - 1) * s + k, 1, out, 1, k, 1, s, 0, 0, 1, 1};
  x = malloc(sizeof(float) * (size_t)(C * g.W));
  if (!x) return 0;
  fill(x, C * g.W, 4);
  return 1;
}

/* im2col of every position, in the runtime's chunks, into bp (setup's K must be C·k, N = out). */
float run_im2col(int reps) {
  const int64_t chunk = tdm_conv_gemm_chunk(K, N);
  for (int i = 0; i < reps; i++)
    for (int64_t n0 = 0; n0 < N; n0 += chunk) tdm_f32_im2col_packed(&g, x, g.C, n0, N - n0 < chunk ? N - n0 : chunk, bp);
  return bp[0];
}

/* A transposed 1-d conv: Cg -> og channels, kernel k, stride s, `in` input positions (setup's
 * M = og·k, N = in, K = Cg). */
int setup_col2im(int og, int k, int s, int in) {
  Og = og;
  g = (tdm_conv_geom){1, (int)K, 1, in, 1, (in - 1) * s + k, 1, k, 1, s, 0, 0, 1, 1};
  z = malloc(sizeof(float) * (size_t)(M * N)), yt = malloc(sizeof(float) * (size_t)(Og * g.OW));
  if (!z || !yt) return 0;
  fill(z, M * N, 5);
  return 1;
}

float run_col2im(int reps) {
  for (int i = 0; i < reps; i++) {
    for (int64_t t = 0; t < Og * g.OW; t++) yt[t] = bias[t % M];
    tdm_f32_col2im_add(&g, Og, z, yt);
  }
  return yt[0];
}

/* The direct path (no workspace: K < 16, or one output channel): O planes of a 1-d conv C -> O,
 * kernel k, stride 1, at `out` positions, through the configured plane kernel. */
static float *xd, *wd, *yd;
static int64_t dO;
int setup_plane(int C, int O, int k, int out) {
  g = (tdm_conv_geom){1, C, 1, out + k - 1, 1, out, 1, k, 1, 1, 0, 0, 1, 1};
  dO = O;
  xd = malloc(sizeof(float) * (size_t)(C * g.W)), wd = malloc(sizeof(float) * (size_t)(O * C * k)), yd = malloc(sizeof(float) * (size_t)(O * out));
  if (!xd || !wd || !yd) return 0;
  fill(xd, C * g.W, 6), fill(wd, O * C * k, 7);
  return 1;
}

float run_plane(int reps) {
  for (int i = 0; i < reps; i++)
    for (int64_t o = 0; o < dO; o++) tdm_f32_conv_plane(&g, xd, wd + o * g.C * g.KW, g.C, 0.5f, yd + o * g.OW);
  return yd[0];
}

/* Few positions (the dot products): `copies` weight matrices [M, K] used in turn, so that each call
 * reads its weights from memory as a streaming step does (Mimi's 32 MB convs), colt [N, K]. */
static float *dw[8], *dcol, *dy;
static int64_t dM, dN, dK, dcopies, dturn;
int setup_dot(int m, int n, int k, int copies) {
  dM = m, dN = n, dK = k, dcopies = copies;
  for (int c = 0; c < copies; c++) {
    if (!(dw[c] = malloc(sizeof(float) * (size_t)(dM * dK)))) return 0;
    fill(dw[c], dM * dK, 8 + (uint32_t)c);
  }
  dcol = malloc(sizeof(float) * (size_t)(dN * dK)), dy = malloc(sizeof(float) * (size_t)(dM * dN));
  if (!dcol || !dy) return 0;
  fill(dcol, dN * dK, 9);
  return 1;
}

/* 0: the dot kernel before (tdm_f32_conv_dot__simd128), 1: two streams per row. */
float run_dot(int which, int reps) {
  for (int i = 0; i < reps; i++, dturn = (dturn + 1) % dcopies) {
    if (which == 0) tdm_f32_conv_dot__simd128(dM, dN, dK, dw[dturn], dcol, bias, dy, dN);
    else tdm_f32_conv_dot_2s__simd128(dM, dN, dK, dw[dturn], dcol, bias, dy, dN);
  }
  return dy[0];
}

/* The same output by phase, bias included (tdm_f32_col2im_phases). */
float run_col2im_phases(int reps) {
  for (int i = 0; i < reps; i++) tdm_f32_col2im_phases(&g, Og, z, bias, yt);
  return yt[0];
}
