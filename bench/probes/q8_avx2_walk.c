/* q8_avx2_walk.c — the native int8 one-row GEMV (tdm_q8_gemv_dot__avx2) as of this tree against an
 * older tree's (linked in as old_q8_gemv_dot__avx2: bench/probes/q8_avx2_walk.sh builds both), one
 * token's 30-layer SmolLM-135M GEMVs in the decode's order from DRAM (each layer's weights its own
 * copy, 129 MiB per token), and a plain AVX2 read of the same bytes; bits of both checked against the
 * scalar reference first. CPU time, ms per token, 3rd fastest of ROUNDS (argv[1], default 15). */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../src/kernels/gemm.h"
#include "../../src/kernels/variants.h"

void old_q8_gemv_dot__avx2(int64_t N, int64_t K, const int16_t *xq, const float *xs, const int8_t *qp, const float *scale, float *y);

typedef struct {
  int64_t n, k, copies;
  int8_t *q;
  float *s;
} shape;

static uint32_t rng = 5;
static uint32_t next(void) { return rng = rng * 1664525u + 1013904223u; }

static void make(shape *sh, int64_t n, int64_t k, int64_t copies) {
  sh->n = n, sh->k = k, sh->copies = copies;
  sh->q = aligned_alloc(64, (size_t)(n * k * copies));
  sh->s = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n * k * copies; i++) sh->q[i] = (int8_t)((int)(next() >> 24) % 127);
  for (int64_t i = 0; i < n; i++) sh->s[i] = 0.001f + (float)(next() >> 8) / 16777216.0f * 0.02f;
}

static float a[1536], xs[64], y[49152], y2[49152];
static int16_t xq[1538];
static volatile int sink;

static void gemv(int which, shape *sh, int64_t c) {
  const int8_t *q = sh->q + c * sh->n * sh->k;
  tdm_q8_quantize_row(sh->k, a, xq, xs);
  if (which == 0) old_q8_gemv_dot__avx2(sh->n, sh->k, xq, xs, q, sh->s, y);
  else if (which == 1) tdm_q8_gemv_dot__avx2(sh->n, sh->k, xq, xs, q, sh->s, y);
  else {
    __m256i t = _mm256_setzero_si256();
    for (int64_t o = 0; o < sh->n * sh->k; o += 32) t = _mm256_add_epi32(t, _mm256_load_si256((const __m256i *)(q + o)));
    sink = _mm256_extract_epi32(t, 0);
  }
}

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static int cmp(const void *p, const void *q) { return *(const double *)p < *(const double *)q ? -1 : 1; }

int main(int argc, char **argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 15;
  if (!tdm_cpu_avx2_fma()) return puts("no AVX2"), 0;
  for (int i = 0; i < 1536; i++) a[i] = (float)(next() >> 8) / 16777216.0f - 0.5f;
  shape qo, kv, up, down, head; /* 576x576 (q, o), 576x192 (k, v), 576x1536 (gate, up), 1536x576 (down), the head */
  make(&qo, 576, 576, 60), make(&kv, 192, 576, 60), make(&up, 1536, 576, 60), make(&down, 576, 1536, 30), make(&head, 49152, 576, 1);
  shape *all[] = {&qo, &kv, &up, &down, &head};
  for (int i = 0; i < 5; i++) { /* bits: both against the scalar reference */
    shape *sh = all[i];
    tdm_q8_quantize_row(sh->k, a, xq, xs);
    tdm_q8_gemv_dot__scalar(sh->n, sh->k, xq, xs, sh->q, sh->s, y2);
    for (int w = 0; w < 2; w++) {
      gemv(w, sh, 0);
      if (memcmp(y, y2, sizeof(float) * (size_t)sh->n)) return printf("%s differs from the reference at N=%lld K=%lld\n", w ? "now" : "old", (long long)sh->n, (long long)sh->k), 1;
    }
  }
  const char *names[] = {"old", "now (4 streams)", "plain read"};
  double t[3][64];
  for (int r = 0; r < rounds && r < 64; r++)
    for (int w = 0; w < 3; w++) {
      const double t0 = cpu_ms();
      for (int l = 0; l < 30; l++) {
        gemv(w, &qo, 2 * l), gemv(w, &kv, 2 * l), gemv(w, &kv, 2 * l + 1), gemv(w, &qo, 2 * l + 1);
        gemv(w, &up, 2 * l), gemv(w, &up, 2 * l + 1), gemv(w, &down, l);
      }
      gemv(w, &head, 0);
      t[w][r] = cpu_ms() - t0;
    }
  for (int w = 0; w < 3; w++) {
    qsort(t[w], (size_t)rounds, sizeof(double), cmp);
    printf("%s %.2f ms (%.2fx)%s", names[w], t[w][2], t[w][2] / t[0][2], w < 2 ? ", " : "\n");
  }
  return 0;
}
