/* dram_threads.c — issue #23: how much of the memory bandwidth one core takes on this machine. Reads
 * 256 MB (more than any L3) with 256-bit loads on 1 and on 2 pthreads, each thread its own half, three
 * rounds; prints GB/s. Where two threads read no faster than one, a second wasm thread cannot speed up
 * the ops bound by reading weights (docs/benchmarks.md, thirteenth session).
 * Usage: gcc -O2 -mavx2 -pthread bench/probes/dram_threads.c -o /tmp/dram_threads && /tmp/dram_threads */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BYTES ((size_t)256 << 20)

static char *buf;
static volatile int sink[2];

typedef struct {
  size_t lo, hi;
  int id;
} part;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *read_part(void *p) {
  const part *a = p;
  __m256i s0 = _mm256_setzero_si256(), s1 = s0;
  for (size_t i = a->lo; i < a->hi; i += 64) {
    s0 = _mm256_add_epi32(s0, _mm256_load_si256((const __m256i *)(buf + i)));
    s1 = _mm256_add_epi32(s1, _mm256_load_si256((const __m256i *)(buf + i + 32)));
  }
  int lanes[8];
  _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi32(s0, s1));
  sink[a->id] = lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
  return NULL;
}

int main(void) {
  buf = aligned_alloc(64, BYTES);
  if (!buf) return 1;
  memset(buf, 1, BYTES);
  for (int round = 0; round < 3; round++)
    for (int n = 1; n <= 2; n++) {
      pthread_t t[2];
      part a[2];
      const double t0 = now();
      for (int i = 0; i < n; i++) {
        a[i] = (part){BYTES / (size_t)n * (size_t)i, BYTES / (size_t)n * (size_t)(i + 1), i};
        pthread_create(&t[i], NULL, read_part, &a[i]);
      }
      for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
      printf("%d thread%s: %.1f GB/s\n", n, n > 1 ? "s" : "", (double)BYTES / (now() - t0) / 1e9);
    }
  free(buf);
  return 0;
}
