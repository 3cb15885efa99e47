/* conv_i16.c — the convolution GEMM on 16-bit integers (branch int16conv, issue #23: not yet used by
 * an op). `i32x4.dot_i16x8_s` does 8 multiply-adds per instruction where `f32x4.relaxed_madd` does
 * 4; at Mimi's and pocket-tts' conv GEMM shapes the integer tile took 0.54-0.88x the float32 tile's
 * time (bench/probes/i16_gemm.mjs, docs/benchmarks.md, "16-bit integer conv GEMMs").
 *
 * The operands (variants.h, tdm_i16_conv_gemm): the weights a [M, K32] int16, row-major, K32 = K
 * rounded up to 32 (zeros past K), with a float scale per row sa [M]; the GEMM's B (the patches or
 * positions of x) in 8-column panels quantized by tdm_i16_quantize_panel: per block of 32 k and
 * column, scale = max |x| / 4095 and codes round(x · 4095 / max |x|) in [-4095, 4095], stored with
 * each column's k pair adjacent ([K32/2, 8, 2] a panel) for `i32x4.dot_i16x8_s`. With both operands
 * within 13 bits a block's 32 products sum exactly in int32 (32 · 4095² < 2^31), in any order; the
 * float steps are fixed: per output t = 0, then per block in order t = isum · sb + t (tdm_madd's
 * rounding: fused in the relaxed builds), then y = t · sa + bias (the same); the scalar reference
 * rounds twice, so the SIMD128 build's variant gives its bits and the relaxed ones are within a
 * rounding per step of them. */
#include "variants.h"

#include <math.h>

void tdm_i16_quantize_panel__scalar(int64_t K, const float *panel, int16_t *q, float *s) {
  const int64_t K32 = (K + 31) / 32 * 32;
  for (int64_t b = 0; b < K32 / 32; b++)
    for (int c = 0; c < 8; c++) {
      float mx = 0;
      for (int64_t k = 32 * b; k < 32 * b + 32 && k < K; k++) mx = fmaxf(mx, fabsf(panel[k * 8 + c]));
      const float inv = mx > 0 ? 4095.0f / mx : 0.0f;
      s[b * 8 + c] = mx / 4095.0f;
      for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
        const float v = k < K ? nearbyintf(panel[k * 8 + c] * inv) : 0.0f;
        q[(k / 2) * 16 + c * 2 + k % 2] = (int16_t)fminf(fmaxf(v, -4095.0f), 4095.0f);
      }
    }
}

void tdm_i16_conv_gemm__scalar(int64_t M, int64_t N, int64_t K32, const int16_t *a, const float *sa, const int16_t *bq, const float *sb,
                               const float *bias, float *y, int64_t ldy) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      const int16_t *ar = a + i * K32, *p = bq + (j / 8) * K32 * 8;
      const float *sp = sb + (j / 8) * (K32 / 32) * 8;
      float t = 0;
      for (int64_t b = 0; b < K32 / 32; b++) {
        int32_t acc = 0;
        for (int64_t k = 32 * b; k < 32 * b + 32; k++) acc += (int32_t)ar[k] * p[(k / 2) * 16 + (j % 8) * 2 + k % 2];
        const float m = (float)acc * sp[b * 8 + j % 8];
        t = t + m;
      }
      const float m = t * sa[i];
      y[i * ldy + j] = m + (bias ? bias[i] : 0.0f);
    }
}
