/* gemm.c — see gemm.h. The SIMD128 kernels compute 4 rows x 8 columns per step with 8 vector
 * accumulators; their tails (rows % 4, columns % 8) run the same code on 1 row / masked columns,
 * and tests/c/kernel_selftest.c checks them against the scalar reference on every tail size. */
#include "gemm.h"
#include "vec.h"

#include <string.h>

void tdm_f32_gemm_rows__scalar(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y) {
  for (int64_t i = 0; i < M; i++) {
    float *yr = y + i * N;
    memset(yr, 0, (size_t)N * sizeof(float));
    for (int64_t k = 0; k < K; k++) {
      const float av = a[i * K + k];
      const float *br = b + k * N;
      for (int64_t j = 0; j < N; j++) yr[j] += av * br[j];
    }
  }
}

void tdm_f32_gemm_packed_ld__scalar(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y, int64_t ldy) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      const float *col = bp + (j / TDM_PANEL) * K * TDM_PANEL + j % TDM_PANEL;
      float acc = 0;
      for (int64_t k = 0; k < K; k++) acc += a[i * K + k] * col[k * TDM_PANEL];
      y[i * ldy + j] = acc;
    }
}

void tdm_f32_gemm_packed__scalar(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y) {
  tdm_f32_gemm_packed_ld__scalar(M, N, K, a, bp, y, N);
}

#if TDM_SIMD128

/* Rows i..i+R-1 (R = 1 to 6) of y, columns j..j+7: B's 8 columns at step k are loaded by LOADB
 * from pb, which starts at PB0 and moves PBSTEP floats per step. The loop bumps pointers with a
 * 32-bit counter (indexing with the 64-bit k costs about 6 more integer instructions per step
 * under V8). Each row's accumulators see the same products in the same
 * order whatever R is, so a row's result does not depend on the tile it falls in. */
#define GEMM_ROW(R, r) \
  if (R > r) { \
    x = wasm_f32x4_splat(*a##r); \
    c##r##0 = tdm_madd(x, b0, c##r##0); \
    c##r##1 = tdm_madd(x, b1, c##r##1); \
  }
#define GEMM_TILE(R, PB0, PBSTEP, LOADB) \
  do { \
    v128_t c00 = wasm_f32x4_splat(0), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, \
           c50 = c00, c51 = c00; \
    const float *a0 = a + i * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K, *a4 = a3 + K, *a5 = a4 + K, *pb = (PB0); \
    for (size_t kk = (size_t)K; kk > 0; kk--, a0++, a1++, a2++, a3++, a4++, a5++, pb += (PBSTEP)) { \
      v128_t b0, b1, x; \
      LOADB; \
      GEMM_ROW(R, 0) GEMM_ROW(R, 1) GEMM_ROW(R, 2) GEMM_ROW(R, 3) GEMM_ROW(R, 4) GEMM_ROW(R, 5) \
    } \
    const int64_t n = N - j; \
    tdm_store8(y + i * ldy + j, c00, c01, n); \
    if (R > 1) tdm_store8(y + (i + 1) * ldy + j, c10, c11, n); \
    if (R > 2) tdm_store8(y + (i + 2) * ldy + j, c20, c21, n); \
    if (R > 3) tdm_store8(y + (i + 3) * ldy + j, c30, c31, n); \
    if (R > 4) tdm_store8(y + (i + 4) * ldy + j, c40, c41, n); \
    if (R > 5) tdm_store8(y + (i + 5) * ldy + j, c50, c51, n); \
  } while (0)

/* The tall tile's rows (the last 1 to 3 rows of M in one tile of that height, so a 2-row GEMM
 * loads each weight vector once for both rows, not once per row). With fused multiply-adds, 6 rows (12 accumulators + 2 B vectors + a splat:
 * 15 of the 16 vector registers V8 allocates on x86-64) are faster than 4 at 256-1024; without FMA
 * each multiply needs a temporary register too, and 6 rows are slower than 4. */
#if defined(TDM_RELAXED_SIMD)
#define GEMM_TALL 6
#else
#define GEMM_TALL 4
#endif
#define GEMM_ROWS(PB0, PBSTEP, LOADB) \
  do { \
    int64_t i = 0; \
    for (; i + GEMM_TALL <= M; i += GEMM_TALL) GEMM_TILE(GEMM_TALL, PB0, PBSTEP, LOADB); \
    for (; i + 4 <= M; i += 4) GEMM_TILE(4, PB0, PBSTEP, LOADB); \
    if (M - i == 3) GEMM_TILE(3, PB0, PBSTEP, LOADB); \
    else if (M - i == 2) GEMM_TILE(2, PB0, PBSTEP, LOADB); \
    else if (M - i == 1) GEMM_TILE(1, PB0, PBSTEP, LOADB); \
  } while (0)

#define GEMM_TAIL_K 1024 /* the partial panel's stack copy: at most 32 KiB */
void tdm_f32_gemm_rows_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y) {
  const int64_t ldy = N;
  int64_t j = 0;
  for (; j + 8 <= N; j += 8) { /* full panels: plain loads, no tail test in the k loop */
    GEMM_ROWS(b + j, N, (b0 = wasm_v128_load(pb), b1 = wasm_v128_load(pb + 4)));
  }
  if (j < N && K <= GEMM_TAIL_K) {
    /* The last, partial panel copied once into a zero-padded 8-column panel on the stack, so its
     * tiles load it as the full ones do (a zero-padded copy per step cost as much as several full
     * panels: N = 49, a 1×1 convolution on a 7×7 map). The same products in the same order. */
    float tail[GEMM_TAIL_K * 8];
    const int64_t cols = N - j;
    for (int64_t k = 0; k < K; k++)
      for (int64_t t = 0; t < 8; t++) tail[k * 8 + t] = t < cols ? b[k * N + j + t] : 0.0f;
    GEMM_ROWS(tail, 8, (b0 = wasm_v128_load(pb), b1 = wasm_v128_load(pb + 4)));
  } else if (j < N) {
    GEMM_ROWS(b + j, N, tdm_load8(pb, N - j, &b0, &b1));
  }
}

/* M = 1 (a decode step's GEMV): four panels at a time from four runs of columns H = ⌊N / 32⌋·8
 * apart, so each a[k] splat serves 32 columns and the weights are read as four long sequential
 * streams (each run's panels one after the other, as the int8 and int4 GEMVs walk them). On the
 * weights of a 30-layer, width-576 decoder this reads 1.3x faster than four adjacent panels each
 * walked from its start and its middle of K (eight streams of one panel's length each; at 40 GB/s
 * of DRAM read that walk reached half of it), and faster than two, three, five, six or eight runs.
 * Then the last panels one at a time. Every column sums its K products in order into one
 * accumulator wherever it falls (a run, the last panels, any split by columns): the same bits. */
static inline __attribute__((always_inline)) void gemv_panel__simd128(const float *a, const float *ae, const float *p, float *y,
                                                                      int64_t n) {
  v128_t s0 = wasm_f32x4_splat(0), s1 = s0;
  for (const float *ak = a; ak < ae; ak++, p += 8) {
    const v128_t x = wasm_f32x4_splat(*ak);
    s0 = tdm_madd(x, wasm_v128_load(p), s0);
    s1 = tdm_madd(x, wasm_v128_load(p + 4), s1);
  }
  tdm_store8(y, s0, s1, n);
}

static void gemv_packed__simd128(int64_t N, int64_t K, const float *a, const float *bp, float *y) {
  const int64_t H = N / 32 * 8;
  const size_t RS = (size_t)(H / 8) * (size_t)K * 8; /* floats from one run's panel to the next run's */
  const float *ae = a + K;
  for (int64_t j = 0; j < H; j += 8) {
    const float *p = bp + (j / 8) * K * 8;
    v128_t s0 = wasm_f32x4_splat(0), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    TDM_NO_UNROLL
    for (const float *ak = a; ak < ae; ak++, p += 8) {
      const v128_t x = wasm_f32x4_splat(*ak);
      s0 = tdm_madd(x, wasm_v128_load(p), s0);
      s1 = tdm_madd(x, wasm_v128_load(p + 4), s1);
      s2 = tdm_madd(x, wasm_v128_load(p + RS), s2);
      s3 = tdm_madd(x, wasm_v128_load(p + RS + 4), s3);
      s4 = tdm_madd(x, wasm_v128_load(p + 2 * RS), s4);
      s5 = tdm_madd(x, wasm_v128_load(p + 2 * RS + 4), s5);
      s6 = tdm_madd(x, wasm_v128_load(p + 3 * RS), s6);
      s7 = tdm_madd(x, wasm_v128_load(p + 3 * RS + 4), s7);
    }
    tdm_store8(y + j, s0, s1, 8);
    tdm_store8(y + j + H, s2, s3, 8);
    tdm_store8(y + j + 2 * H, s4, s5, 8);
    tdm_store8(y + j + 3 * H, s6, s7, 8);
  }
  for (int64_t j = 4 * H; j < N; j += 8) gemv_panel__simd128(a, ae, bp + (j / 8) * K * 8, y + j, N - j);
}

/* M = 2 (a streaming step of two frames), rows ldy apart in y: each panel walked from its start
 * and from the middle of K at once, both halves adding into the same accumulators, two panels side
 * by side so each splat of a row's a[k] serves 16 columns: four weight streams in flight instead of
 * the tiles' one. A panel's arithmetic is the same whether it runs
 * with a neighbour or alone (the last, odd panel), so any split by columns gives the same bits. */
#define GEMV2_PANELS(NP) \
  do { \
    const float *p0 = bp + (j / 8) * K * 8, *p1 = p0 + K * 8, *q0 = p0 + half * 8, *q1 = p1 + half * 8; \
    const float *ak = a, *bk = a + half; \
    v128_t s00 = wasm_f32x4_splat(0), s01 = s00, s10 = s00, s11 = s00, t00 = s00, t01 = s00, t10 = s00, t11 = s00; \
    for (size_t kk = half; kk > 0; kk--, ak++, bk++, p0 += 8, p1 += 8, q0 += 8, q1 += 8) { \
      const v128_t x0 = wasm_f32x4_splat(ak[0]), x1 = wasm_f32x4_splat(ak[K]); \
      const v128_t z0 = wasm_f32x4_splat(bk[0]), z1 = wasm_f32x4_splat(bk[K]); \
      const v128_t P0 = wasm_v128_load(p0), P1 = wasm_v128_load(p0 + 4), Q0 = wasm_v128_load(q0), Q1 = wasm_v128_load(q0 + 4); \
      s00 = tdm_madd2(s00, x0, P0, z0, Q0); \
      s01 = tdm_madd2(s01, x0, P1, z0, Q1); \
      t00 = tdm_madd2(t00, x1, P0, z1, Q0); \
      t01 = tdm_madd2(t01, x1, P1, z1, Q1); \
      if (NP > 1) { \
        const v128_t R0 = wasm_v128_load(p1), R1 = wasm_v128_load(p1 + 4), S0 = wasm_v128_load(q1), S1 = wasm_v128_load(q1 + 4); \
        s10 = tdm_madd2(s10, x0, R0, z0, S0); \
        s11 = tdm_madd2(s11, x0, R1, z0, S1); \
        t10 = tdm_madd2(t10, x1, R0, z1, S0); \
        t11 = tdm_madd2(t11, x1, R1, z1, S1); \
      } \
    } \
    if (K & 1) { /* the last k of an odd K: q0, q1 point at it */ \
      const v128_t x0 = wasm_f32x4_splat(a[K - 1]), x1 = wasm_f32x4_splat(a[2 * K - 1]); \
      s00 = tdm_madd(x0, wasm_v128_load(q0), s00); \
      s01 = tdm_madd(x0, wasm_v128_load(q0 + 4), s01); \
      t00 = tdm_madd(x1, wasm_v128_load(q0), t00); \
      t01 = tdm_madd(x1, wasm_v128_load(q0 + 4), t01); \
      if (NP > 1) { \
        s10 = tdm_madd(x0, wasm_v128_load(q1), s10); \
        s11 = tdm_madd(x0, wasm_v128_load(q1 + 4), s11); \
        t10 = tdm_madd(x1, wasm_v128_load(q1), t10); \
        t11 = tdm_madd(x1, wasm_v128_load(q1 + 4), t11); \
      } \
    } \
    const int64_t n0 = N - j < 8 ? N - j : 8; \
    tdm_store8(y + j, s00, s01, n0); \
    tdm_store8(y + ldy + j, t00, t01, n0); \
    if (NP > 1) { \
      tdm_store8(y + j + 8, s10, s11, N - j - 8); \
      tdm_store8(y + ldy + j + 8, t10, t11, N - j - 8); \
    } \
  } while (0)

static void gemv2_packed__simd128(int64_t N, int64_t K, const float *a, const float *bp, float *y, int64_t ldy) {
  const size_t half = (size_t)K / 2;
  int64_t j = 0;
  for (; j + 8 < N; j += 16) GEMV2_PANELS(2); /* panels j/8 and j/8 + 1 (the second may be partial) */
  for (; j < N; j += 8) GEMV2_PANELS(1);
}

/* The packed tiles in blocks of K (GEMM_KC steps) and of columns (GEMM_NC): for each block, each
 * tile of rows copies its rows' block of a once into at (interleaved: at[k * R + r] =
 * a[i + r][k0 + k], one pointer with constant offsets instead of R row pointers) and walks the
 * block's panels with it, so the copy stays in L1 and the B block (GEMM_KC x GEMM_NC floats,
 * 512 KiB) in L2. The accumulators of a later K block start from what the earlier one stored in y:
 * a float32 stored and loaded back is the same value, so each output is still one chain over k in
 * order from 0, the bits of the unblocked tiles whatever the tile, block or thread part.
 * At 1024³ K blocks of 256 over all columns (a 1 MiB B block) are slower than 512 x 256 or
 * 1024 x 128; 128 or 512 over all columns no better than 256.
 * Tiles of 4 rows (GEMM_PTALL), not the row-major kernel's 6: V8 keeps a step's loads in program
 * order but computes the multiply-adds after all of them, so every row's splat is live at once;
 * 6 rows need 12 accumulators + 2 B vectors + 6 splats, more than the 15 vector registers V8
 * allocates on x86-64, and its code for them spilled 4 accumulators to the stack in every step
 * (node --print-wasm-code). 4 rows fit (8 + 2 + 4) and are faster; unrolling k by 2 (twice
 * the loads in flight) is slower.
 * With fused multiply-adds (the relaxed builds) the tiles take 5 rows and make each row's splat
 * as a lane shuffle of one load of at[k * 5 .. k * 5 + 3] (the fifth row: of the next 4 floats):
 * shuffles are pure, so V8 computes each just before its multiply-adds instead of hoisting it
 * with the loads, and 10 accumulators + 2 B vectors + 2 loads of at + 1 splat fit the 15
 * registers; 10 independent chains of multiply-adds instead of 8 hide the FMA latency better.
 * Faster at 256-1024 than 4 rows of splat loads; 6 rows this way spill again. Without FMA
 * (SIMD128: a multiply and an add, the add on the shuffle's port) the shuffles are slower, so
 * SIMD128 keeps 4 rows of splat loads.
 * Either way each row's products and their order are the same as in every other tile. */
#ifndef GEMM_KC
#define GEMM_KC 512
#endif
#ifndef GEMM_NC
#define GEMM_NC 256 /* a multiple of 8 */
#endif
#if defined(TDM_RELAXED_SIMD)
#define GEMM_PTALL 5
#define GEMM_SHUF 1
#define GEMM_FEW_MIN 11 /* packed_few_rows from 11 rows: 6 to 8 ran 10-20% faster in Chromium the other way */
#else
#define GEMM_PTALL 4
#define GEMM_SHUF 0
#define GEMM_FEW_MIN 5 /* packed_few_rows from two tiles */
#endif
#if GEMM_SHUF
#define PSPLAT(r) (r < 4 ? wasm_i32x4_shuffle(va, va, r & 3, r & 3, r & 3, r & 3) : wasm_i32x4_shuffle(vb, vb, r & 3, r & 3, r & 3, r & 3))
#else
#define PSPLAT(r) wasm_f32x4_splat(pa[r])
#endif
#define PTILE_ROW(R, r) \
  if (R > r) { \
    x = PSPLAT(r); \
    c##r##0 = tdm_madd(x, b0, c##r##0); \
    c##r##1 = tdm_madd(x, b1, c##r##1); \
  }
#define PTILE_INIT(R, r) \
  if (R > r && k0) tdm_load8(y + r * ldy, n, &c##r##0, &c##r##1)
#define PTILE_STORE(R, r) \
  if (R > r) tdm_store8(y + r * ldy, c##r##0, c##r##1, n)
static inline __attribute__((always_inline)) void ptile(int R, size_t kc, int64_t k0, const float *at, const float *pb, float *y,
                                                        int64_t ldy, int64_t n) {
  v128_t c00 = wasm_f32x4_splat(0), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00,
         c50 = c00, c51 = c00;
  PTILE_INIT(R, 0);
  PTILE_INIT(R, 1);
  PTILE_INIT(R, 2);
  PTILE_INIT(R, 3);
  PTILE_INIT(R, 4);
  PTILE_INIT(R, 5);
  const float *pa = at;
  for (size_t kk = kc; kk > 0; kk--, pa += R, pb += 8) {
    const v128_t b0 = wasm_v128_load(pb), b1 = wasm_v128_load(pb + 4);
#if GEMM_SHUF /* at holds 8 floats past its last row: these loads stay inside it */
    const v128_t va = wasm_v128_load(pa), vb = R > 4 ? wasm_v128_load(pa + 4) : va;
#endif
    v128_t x;
    PTILE_ROW(R, 0) PTILE_ROW(R, 1) PTILE_ROW(R, 2) PTILE_ROW(R, 3) PTILE_ROW(R, 4) PTILE_ROW(R, 5)
  }
  PTILE_STORE(R, 0);
  PTILE_STORE(R, 1);
  PTILE_STORE(R, 2);
  PTILE_STORE(R, 3);
  PTILE_STORE(R, 4);
  PTILE_STORE(R, 5);
}

/* Rows 0..R-1 of a (and y) over the block k0 .. k0 + kc of every panel. */
static inline __attribute__((always_inline)) void ptile_rows(int R, int64_t N, int64_t K, int64_t k0, int64_t kc, const float *a,
                                                             const float *bp, float *y, int64_t ldy, float *at) {
  for (int64_t k = 0; k < kc; k++)
    for (int r = 0; r < R; r++) at[k * R + r] = a[r * K + k0 + k];
  if (GEMM_SHUF) /* what the last step's 4-float loads read past the block: defined, never used */
    for (int t = 0; t < 8; t++) at[kc * R + t] = 0;
  for (int64_t j = 0; j < N; j += 8) ptile(R, (size_t)kc, k0, at, bp + (j / 8) * K * 8 + k0 * 8, y + j, ldy, N - j);
}

void tdm_f32_gemm_packed_ld_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y, int64_t ldy) {
  float at[GEMM_PTALL * GEMM_KC + 8]; /* + 8: the shuffled tiles load 4 floats at a time */
  int64_t k0 = 0;
  do { /* K = 0 still takes one (empty) block: y is zeros */
    const int64_t kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
    for (int64_t j0 = 0; j0 < N; j0 += GEMM_NC) { /* columns j0 .. j0 + nc: whole panels */
      const int64_t nc = N - j0 < GEMM_NC ? N - j0 : GEMM_NC;
      const float *pj = bp + j0 * K; /* panel j0 / 8 */
      float *yj = y + j0;
      int64_t i = 0;
      for (; i + GEMM_PTALL <= M; i += GEMM_PTALL) ptile_rows(GEMM_PTALL, nc, K, k0, kc, a + i * K, pj, yj + i * ldy, ldy, at);
      for (; i + 4 <= M; i += 4) ptile_rows(4, nc, K, k0, kc, a + i * K, pj, yj + i * ldy, ldy, at); /* GEMM_PTALL 5 */
      if (M - i == 3) ptile_rows(3, nc, K, k0, kc, a + i * K, pj, yj + i * ldy, ldy, at);
      else if (M - i == 2) ptile_rows(2, nc, K, k0, kc, a + i * K, pj, yj + i * ldy, ldy, at);
      else if (M - i == 1) ptile_rows(1, nc, K, k0, kc, a + i * K, pj, yj + i * ldy, ldy, at);
    }
    k0 += kc;
  } while (k0 < K);
}

/* Few rows (a streaming step's positions; GEMM_FEW_MIN or more): for each block of GEMM_FEW_KC steps
 * every row's block of a is copied into at once, in tiles of nearly equal height (16 rows: four of
 * 4, not 5 + 5 + 5 + 1, whose one-row tile waits on its two chains), then panel by panel every tile
 * walks the panel's block from L1: each weight is read from memory once a call, not once for the
 * first tile and again from L2 for the others. Before a panel's tiles, one 4-byte load from each
 * cache line of the next panel's block (tdm_touch_lines): a streaming step's weights come from DRAM
 * (a Mimi decoder's 40 MB, read once a frame), and a tile's own loads of new lines, among ~100
 * instructions of multiply-adds a line, keep few misses in flight; the touches, back to back, keep
 * many. The same touches spread over the tiles (one every few steps) gain nothing: each miss then
 * stalls alone. On machine E, ten [16, 512] x [512, 2048] GEMMs in turn (40 MB of weights): 1.0 ms
 * each this way, 1.2 in the B-block order (0.8 with the weights in cache). The same products in the same order as
 * every other tile: the same bits. */
#define GEMM_FEW_KC 256 /* at: 40 KiB on the stack */
static void packed_few_rows(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y, int64_t ldy) {
  float at[TDM_GEMM_FEW_MAX * GEMM_FEW_KC + 8]; /* + 8: the shuffled tiles load 4 floats at a time */
  const int64_t tiles = (M + GEMM_PTALL - 1) / GEMM_PTALL, base = M / tiles, taller = M % tiles; /* the first `taller`: base + 1 rows */
  int64_t k0 = 0;
  do {
    const int64_t kc = K - k0 < GEMM_FEW_KC ? K - k0 : GEMM_FEW_KC;
    float *d = at;
    for (int64_t t = 0, i = 0; t < tiles; t++) {
      const int64_t R = base + (t < taller);
      for (int64_t k = 0; k < kc; k++)
        for (int64_t r = 0; r < R; r++) d[k * R + r] = a[(i + r) * K + k0 + k];
      d += R * kc, i += R;
    }
    for (int t = 0; t < 8; t++) d[t] = 0; /* what the last step's 4-float loads read past the block: defined, never used */
    for (int64_t j = 0; j < N; j += 8) {
      const float *pb = bp + (j / 8) * K * 8 + k0 * 8, *at_t = at;
      if (j + 8 < N) tdm_touch_lines(pb + K * 8, (size_t)kc * 8 * sizeof(float));
      for (int64_t t = 0, i = 0; t < tiles; t++) {
        const int64_t R = base + (t < taller);
        float *yt = y + i * ldy + j;
        switch (R) { /* 2 to GEMM_PTALL: M > GEMM_PTALL rows in ceil(M / GEMM_PTALL) tiles */
          case 5: ptile(5, (size_t)kc, k0, at_t, pb, yt, ldy, N - j); break;
          case 4: ptile(4, (size_t)kc, k0, at_t, pb, yt, ldy, N - j); break;
          case 3: ptile(3, (size_t)kc, k0, at_t, pb, yt, ldy, N - j); break;
          default: ptile(2, (size_t)kc, k0, at_t, pb, yt, ldy, N - j); break;
        }
        at_t += R * kc, i += R;
      }
    }
    k0 += kc;
  } while (k0 < K);
}

void tdm_f32_gemm_packed_tiles_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y) {
  tdm_f32_gemm_packed_ld_4x8__simd128(M, N, K, a, bp, y, N);
}

void tdm_f32_gemm_packed_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y) {
  if (M == 1) gemv_packed__simd128(N, K, a, bp, y);
  else if (M == 2) gemv2_packed__simd128(N, K, a, bp, y, N);
  else tdm_f32_gemm_packed_tiles_4x8__simd128(M, N, K, a, bp, y);
}

void tdm_f32_gemm_packed_few_4x8__simd128(int64_t M, int64_t N, int64_t K, const float *a, const float *bp, float *y, int64_t ldy) {
  if (M == 2) gemv2_packed__simd128(N, K, a, bp, y, ldy);
  else if (M >= GEMM_FEW_MIN && M <= TDM_GEMM_FEW_MAX) packed_few_rows(M, N, K, a, bp, y, ldy);
  else tdm_f32_gemm_packed_ld_4x8__simd128(M, N, K, a, bp, y, ldy);
}

#endif
