/* i16_gemm.c — issue #23: the conv GEMM's 4 x 8 tile in float32 (relaxed_madd, as conv_simd128.c's
 * CONV_TILE in the relaxed build) against the same tile on 16-bit integers (i32x4.dot_i16x8_s: 8
 * multiply-adds per instruction pair where f32x4 FMAs do 4 per instruction), at Mimi's and
 * pocket-tts' conv GEMM shapes. The integer tile: weights rounded to 13 bits per row, x to 13 bits
 * per block of 32 k and column (so a block's int32 sum of 32 products stays exact: 32 · 4095 · 4095
 * < 2^31), each block's sums converted and scaled into float totals kept in y, the row scale at the
 * end. Freestanding (static buffers), built by bench/probes/i16_gemm.mjs with clang-19 twice: relaxed
 * SIMD (fused multiply-adds, as tandem-relaxed.wasm) and SIMD128 (a multiply and an add, as tandem.wasm). */
#include <stdint.h>
#include <wasm_simd128.h>

#ifdef __wasm_relaxed_simd__
#define MADD(a, b, c) wasm_f32x4_relaxed_madd(a, b, c)
#else
#define MADD(a, b, c) wasm_f32x4_add(wasm_f32x4_mul(a, b), c)
#endif

#define MAXA (512 * 3584)
#define MAXB (3072 * 1920)
#define KB 32
#define QMAX 4095.0f
static float a[MAXA], bp[MAXB], y[512 * 1920], sw[512], sx[(MAXB / KB)];
static int16_t a16[MAXA], b16[MAXB];
static int M, N, K;

static float absf(float v) { return v < 0 ? -v : v; }
static int16_t round16(float v) { return (int16_t)(v < 0 ? v - 0.5f : v + 0.5f); }

/* a [M, K] row-major, bp [N/8][K][8]; the integer copies: a16 [M, K] with a scale per row, b16
 * [N/8][K/2][8][2] (each column's k pair adjacent) with a scale per (panel, block, column). */
int setup(int m, int n, int k) {
  if (m * k > MAXA || n * k > MAXB || n % 8 || k % KB || m % 4) return 0;
  M = m, N = n, K = k;
  uint32_t r = 1;
  for (int i = 0; i < M * K; i++) r = r * 1664525u + 1013904223u, a[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
  for (int i = 0; i < N * K; i++) r = r * 1664525u + 1013904223u, bp[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
  for (int i = 0; i < M; i++) {
    float mx = 0;
    for (int j = 0; j < K; j++) mx = absf(a[i * K + j]) > mx ? absf(a[i * K + j]) : mx;
    sw[i] = mx / QMAX;
    for (int j = 0; j < K; j++) a16[i * K + j] = round16(a[i * K + j] / sw[i]);
  }
  for (int p = 0; p < N / 8; p++)
    for (int b = 0; b < K / KB; b++)
      for (int c = 0; c < 8; c++) {
        float mx = 0;
        for (int j = b * KB; j < (b + 1) * KB; j++) mx = absf(bp[(p * K + j) * 8 + c]) > mx ? absf(bp[(p * K + j) * 8 + c]) : mx;
        const float s = mx > 0 ? mx / QMAX : 1;
        sx[(p * (K / KB) + b) * 8 + c] = s;
        for (int j = b * KB; j < (b + 1) * KB; j++) b16[((p * K + (j & ~1)) * 8) + c * 2 + (j & 1)] = round16(bp[(p * K + j) * 8 + c] / s);
      }
  return 1;
}

#define KC 256
#define MC 64
static void f32_gemm(void) {
  for (int k0 = 0; k0 < K; k0 += KC) {
    const int kc = K - k0 < KC ? K - k0 : KC;
    for (int i0 = 0; i0 < M; i0 += MC) {
      const int i1 = M - i0 < MC ? M : i0 + MC;
      for (int j = 0; j < N; j += 8) {
        const float *panel = bp + (j / 8) * K * 8 + k0 * 8;
        for (int i = i0; i < i1; i += 4) {
          v128_t c[4][2];
          for (int r = 0; r < 4; r++)
            if (k0 == 0) c[r][0] = c[r][1] = wasm_f32x4_splat(0);
            else c[r][0] = wasm_v128_load(y + (i + r) * N + j), c[r][1] = wasm_v128_load(y + (i + r) * N + j + 4);
          const float *a0 = a + i * K + k0, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K, *pb = panel;
          for (int kk = kc; kk > 0; kk--, a0++, a1++, a2++, a3++, pb += 8) {
            const v128_t b0 = wasm_v128_load(pb), b1 = wasm_v128_load(pb + 4);
            v128_t x = wasm_f32x4_splat(*a0);
            c[0][0] = MADD(x, b0, c[0][0]), c[0][1] = MADD(x, b1, c[0][1]);
            x = wasm_f32x4_splat(*a1);
            c[1][0] = MADD(x, b0, c[1][0]), c[1][1] = MADD(x, b1, c[1][1]);
            x = wasm_f32x4_splat(*a2);
            c[2][0] = MADD(x, b0, c[2][0]), c[2][1] = MADD(x, b1, c[2][1]);
            x = wasm_f32x4_splat(*a3);
            c[3][0] = MADD(x, b0, c[3][0]), c[3][1] = MADD(x, b1, c[3][1]);
          }
          for (int r = 0; r < 4; r++) wasm_v128_store(y + (i + r) * N + j, c[r][0]), wasm_v128_store(y + (i + r) * N + j + 4, c[r][1]);
        }
      }
    }
  }
}

static void i16_gemm(void) {
  for (int i = 0; i < M * N; i++) y[i] = 0;
  for (int k0 = 0; k0 < K; k0 += KC) {
    const int kc = K - k0 < KC ? K - k0 : KC;
    for (int i0 = 0; i0 < M; i0 += MC) {
      const int i1 = M - i0 < MC ? M : i0 + MC;
      for (int j = 0; j < N; j += 8) {
        for (int i = i0; i < i1; i += 4) {
          float *y0 = y + i * N + j;
          for (int kb = k0; kb < k0 + kc; kb += KB) {
            v128_t c[4][2];
            for (int r = 0; r < 4; r++) c[r][0] = c[r][1] = wasm_i32x4_splat(0);
            const int16_t *a0 = a16 + i * K + kb, *pb = b16 + ((j / 8) * K + kb) * 8;
            for (int kk = 0; kk < KB; kk += 2, a0 += 2, pb += 16) {
              const v128_t b0 = wasm_v128_load(pb), b1 = wasm_v128_load(pb + 8);
              v128_t x = wasm_v128_load32_splat(a0);
              c[0][0] = wasm_i32x4_add(c[0][0], wasm_i32x4_dot_i16x8(x, b0)), c[0][1] = wasm_i32x4_add(c[0][1], wasm_i32x4_dot_i16x8(x, b1));
              x = wasm_v128_load32_splat(a0 + K);
              c[1][0] = wasm_i32x4_add(c[1][0], wasm_i32x4_dot_i16x8(x, b0)), c[1][1] = wasm_i32x4_add(c[1][1], wasm_i32x4_dot_i16x8(x, b1));
              x = wasm_v128_load32_splat(a0 + 2 * K);
              c[2][0] = wasm_i32x4_add(c[2][0], wasm_i32x4_dot_i16x8(x, b0)), c[2][1] = wasm_i32x4_add(c[2][1], wasm_i32x4_dot_i16x8(x, b1));
              x = wasm_v128_load32_splat(a0 + 3 * K);
              c[3][0] = wasm_i32x4_add(c[3][0], wasm_i32x4_dot_i16x8(x, b0)), c[3][1] = wasm_i32x4_add(c[3][1], wasm_i32x4_dot_i16x8(x, b1));
            }
            const float *s = sx + ((j / 8) * (K / KB) + kb / KB) * 8;
            const v128_t s0 = wasm_v128_load(s), s1 = wasm_v128_load(s + 4);
            for (int r = 0; r < 4; r++) {
              float *yr = y0 + r * N;
              wasm_v128_store(yr, MADD(wasm_f32x4_convert_i32x4(c[r][0]), s0, wasm_v128_load(yr)));
              wasm_v128_store(yr + 4, MADD(wasm_f32x4_convert_i32x4(c[r][1]), s1, wasm_v128_load(yr + 4)));
            }
          }
        }
      }
    }
  }
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) y[i * N + j] *= sw[i];
}

/* which 0: float32, 1: int16; returns y's last value (so nothing is optimized away). */
float run(int which, int reps) {
  for (int t = 0; t < reps; t++) which ? i16_gemm() : f32_gemm();
  return y[M * N - 1];
}

/* The largest |y - exact| over y's rows, relative to the largest |exact| (float64 sums of a·b). */
double error(void) {
  double worst = 0, big = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int k = 0; k < K; k++) s += (double)a[i * K + k] * bp[((j / 8) * K + k) * 8 + j % 8];
      const double d = y[i * N + j] - s;
      worst = d < 0 ? (-d > worst ? -d : worst) : (d > worst ? d : worst);
      big = s < 0 ? (-s > big ? -s : big) : (s > big ? s : big);
    }
  return worst / big;
}
