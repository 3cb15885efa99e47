/* threads.h — the one parallel loop the ops use (src/ only; the host's side is in tandem.h).
 *
 * tdm__parallel(n, align, fn, ctx) splits items [0, n) into contiguous chunks (4 per thread, see
 * threads.c), each but the last a multiple of `align` items; the chunk boundaries depend only on
 * (n, align, the thread count), and the threads take chunks as they come free, so which thread
 * runs which chunk depends on timing. An op passes an `align` at which its kernel computes each
 * item by the same instructions whatever chunk it is in (GEMM: 4 rows; GEMV: 32 columns), and fn
 * may be called several times per thread, so results are bit-identical for every thread count,
 * never dependent on timing. Thread 0 is the caller. */
#ifndef TDM_THREADS_H
#define TDM_THREADS_H

#include <stdint.h>

#include "tandem.h" /* TDM_THREAD_WS_BYTES: each worker's own workspace; thread 0 (the caller)
                       * uses the op's planned workspace instead */

/* Items [lo, hi) of a parallel loop, run on thread t with its workspace ws [TDM_THREAD_WS_BYTES]
 * (NULL for t = 0). Never fails, never allocates. */
typedef void (*tdm_part_fn)(void *ctx, int64_t lo, int64_t hi, int t, void *ws);

/* Runs fn over [0, n) as above and returns when every chunk is done. One thread (or n <= align):
 * fn(ctx, 0, n, 0, NULL). */
void tdm__parallel(int64_t n, int64_t align, tdm_part_fn fn, void *ctx);

/* The thread count parallel loops use now (1 until tdm_threads_start). */
int tdm__threads(void);

#endif
