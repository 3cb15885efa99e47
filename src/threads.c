/* threads.c — the thread pool behind tdm__parallel (see threads.h and tandem.h's Threads).
 *
 * In the threaded wasm build (TDM_THREADS, tandem-mt.wasm over a shared memory) the workers are
 * other instances of the same module, each blocked in tdm_thread_worker on memory.atomic.wait32
 * until the caller bumps `gen`. A job's items are cut into CHUNKS_PER_THREAD chunks per thread
 * (whole units of `align`, boundaries fixed by n, align and the thread count), and every thread,
 * the caller included, takes the next chunk from one atomic ticket until none is left: on a
 * shared machine a worker that the OS has not scheduled yet (or one still waking from
 * memory.atomic.wait) costs nothing, the others take its chunks, where a fixed range per thread
 * made the caller wait for it (a time slice, milliseconds, on a busy two-core machine). The caller
 * waits only for chunks taken, never for a worker that took none. An idle pool waits in the
 * engine, never spinning. Every other build runs the same chunks one after another on the caller
 * (tdm_threads_start then only chooses the split), which lets native tests check that a split
 * never changes a result. */
#include "threads.h"
#include "util.h"

#if defined(TDM_THREADS)
extern double tdm_now_ms(void); /* the host's clock (web/loader.js) */
#endif

#define MAX_THREADS 64
/* Loads of a flag before waiting in the engine (a few hundred microseconds): a decode step runs a
 * few hundred parallel ops, between them runs of small serial ops (a rotary embedding, the KV-cache
 * writes and masks: ~50 µs in the STT LM), and a wake-up from memory.atomic.wait costs tens of
 * microseconds on each side, as much as a small op's whole part (a spin of 20000 loads let the
 * workers fall asleep before each attention: the STT 1B frame on two threads 1.07× slower). Past
 * the spin, a thread sleeps: an idle pool uses no CPU. */
#define SPIN 200000
/* Chunks per thread: enough that a late thread's share goes to the others in small pieces, few
 * enough that a chunk is still many units (a kernel call and one atomic operation each). */
#define CHUNKS_PER_THREAD 4

static struct {
  int32_t gen;   /* bumped for each job and for stop (atomic; workers wait on it) */
  int32_t done;  /* chunks of the current job finished (atomic; the caller waits on it) */
  int32_t ready; /* workers inside tdm_thread_worker (atomic) */
  int32_t quit;  /* set by tdm_threads_stop (atomic) */
  int32_t n;     /* threads the loops use, 1 to MAX_THREADS */
  int32_t can_block;
  uint64_t ticket; /* (job number << 32) | (chunks << 16) | next chunk (atomic): taken by compare-exchange */
  tdm_part_fn fn;  /* the current job: valid while one of its chunks is unfinished */
  void *ctx;
  int64_t count, align;
  uint8_t *sim_ws; /* builds without workers: threads 1..n-1's workspaces [n - 1][TDM_THREAD_WS_BYTES] */
} pool = {.n = 1};

/* Part t of [0, n) split in `parts`: units of `align` items dealt out in contiguous runs, the
 * first (units % parts) parts one unit more. */
static void range_of(int64_t n, int64_t align, int64_t parts, int64_t t, int64_t *lo, int64_t *hi) {
  const int64_t units = n / align + (n % align != 0), base = units / parts, extra = units % parts;
  const int64_t u0 = t * base + (t < extra ? t : extra), u1 = u0 + base + (t < extra);
  *lo = u0 * align < n ? u0 * align : n;
  *hi = u1 * align < n ? u1 * align : n;
}

/* A job's chunk count: CHUNKS_PER_THREAD per thread, at most one per unit (below 1 << 16). */
static int64_t chunks_of(int64_t n, int64_t align, int threads) {
  const int64_t units = n / align + (n % align != 0), c = (int64_t)threads * CHUNKS_PER_THREAD;
  return units < c ? units : c;
}

int tdm__threads(void) { return pool.n; }
int32_t tdm_threads_count(void) { return pool.n; }

#if defined(TDM_THREADS)
/* Takes and runs chunks of the current job until none is left. The compare-exchange includes the
 * job number, so a thread late enough to hold an old job's ticket takes nothing; fn/ctx/count/align
 * are read after a chunk is taken, and the caller starts no other job before that chunk is done. */
static void take_chunks(int t, void *ws) {
  uint64_t tk = __atomic_load_n(&pool.ticket, __ATOMIC_SEQ_CST);
  for (;;) {
    const int64_t chunks = (int64_t)(tk >> 16 & 0xffff), c = (int64_t)(tk & 0xffff);
    if (c >= chunks) return;
    if (!__atomic_compare_exchange_n(&pool.ticket, &tk, tk + 1, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) continue;
    int64_t lo, hi;
    range_of(pool.count, pool.align, chunks, c, &lo, &hi);
    if (lo < hi) pool.fn(pool.ctx, lo, hi, t, ws);
    if (__atomic_add_fetch(&pool.done, 1, __ATOMIC_SEQ_CST) == chunks) __builtin_wasm_memory_atomic_notify(&pool.done, 1);
    tk = __atomic_load_n(&pool.ticket, __ATOMIC_SEQ_CST);
  }
}
#endif

void tdm__parallel(int64_t n, int64_t align, tdm_part_fn fn, void *ctx) {
  if (align < 1) align = 1;
  const int threads = pool.n;
  if (threads <= 1 || n <= align) {
    fn(ctx, 0, n, 0, NULL);
    return;
  }
  const int64_t chunks = chunks_of(n, align, threads);
#if defined(TDM_THREADS)
  pool.fn = fn;
  pool.ctx = ctx;
  pool.count = n;
  pool.align = align;
  __atomic_store_n(&pool.done, 0, __ATOMIC_SEQ_CST);
  /* The ticket before the bump: a worker woken by the bump finds this job's chunks. Only the caller
   * (and tdm_threads_stop) change gen. */
  const uint32_t g = (uint32_t)__atomic_load_n(&pool.gen, __ATOMIC_SEQ_CST) + 1;
  __atomic_store_n(&pool.ticket, (uint64_t)g << 32 | (uint64_t)chunks << 16, __ATOMIC_SEQ_CST);
  __atomic_store_n(&pool.gen, (int32_t)g, __ATOMIC_SEQ_CST);
  __builtin_wasm_memory_atomic_notify(&pool.gen, (uint32_t)(threads - 1));
  take_chunks(0, NULL);
  int32_t d;
  for (int spin = 0; (d = __atomic_load_n(&pool.done, __ATOMIC_SEQ_CST)) != (int32_t)chunks; spin++)
    if (pool.can_block && spin >= SPIN) __builtin_wasm_memory_atomic_wait32(&pool.done, d, -1);
#else
  for (int64_t c = 0; c < chunks; c++) { /* chunk c on thread c % threads, as a pool might deal them */
    const int t = (int)(c % threads);
    int64_t lo, hi;
    range_of(n, align, chunks, c, &lo, &hi);
    if (lo < hi) fn(ctx, lo, hi, t, t ? pool.sim_ws + (size_t)(t - 1) * TDM_THREAD_WS_BYTES : NULL);
  }
#endif
}

tdm_status tdm_threads_start(int32_t n, int32_t can_block) {
  if (n < 1 || n > MAX_THREADS) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "threads: %d is not between 1 and %d", (int)n, MAX_THREADS);
  if (pool.n != 1) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "threads: already started (%d); stop first", (int)pool.n);
#if defined(TDM_THREADS)
  /* The host starts the workers before this call; each counts itself in on entry (the host saw
   * each about to enter, so this waits microseconds; 10 s means a worker is missing). */
  if (__atomic_load_n(&pool.quit, __ATOMIC_SEQ_CST)) return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "threads: stopped for good");
  const double t0 = tdm_now_ms();
  while (__atomic_load_n(&pool.ready, __ATOMIC_SEQ_CST) < n - 1)
    if (tdm_now_ms() - t0 > 10000)
      return tdm__fail(TDM_ERR_INVALID_ARGUMENT, "threads: %d of %d workers entered tdm_thread_worker", (int)pool.ready, (int)n - 1);
#else
  if (n > 1) {
    uint8_t *ws = tdm__alloc((size_t)(n - 1) * TDM_THREAD_WS_BYTES);
    if (!ws) return tdm__fail(TDM_ERR_OUT_OF_MEMORY, "threads: no memory for %d workspaces", (int)n - 1);
    pool.sim_ws = ws;
  }
#endif
  pool.can_block = can_block != 0;
  __atomic_store_n(&pool.n, n, __ATOMIC_SEQ_CST);
  return TDM_OK;
}

void tdm_thread_worker(int32_t index, void *ws) {
#if defined(TDM_THREADS)
  int32_t seen = __atomic_load_n(&pool.gen, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&pool.ready, 1, __ATOMIC_SEQ_CST);
  for (;;) {
    int32_t g;
    /* Waits of at most 100 ms: between two, the engine may end the worker (Node's worker.terminate(),
     * as at process exit, does not interrupt a wait already begun); ten wakeups a second are free. */
    for (int spin = 0; (g = __atomic_load_n(&pool.gen, __ATOMIC_SEQ_CST)) == seen; spin++)
      if (spin >= SPIN) __builtin_wasm_memory_atomic_wait32(&pool.gen, seen, 100 * 1000 * 1000);
    seen = g;
    if (__atomic_load_n(&pool.quit, __ATOMIC_SEQ_CST)) break;
    const int threads = __atomic_load_n(&pool.n, __ATOMIC_SEQ_CST);
    if (index < 1 || index >= threads) continue;
    take_chunks(index, ws);
  }
  __atomic_sub_fetch(&pool.ready, 1, __ATOMIC_SEQ_CST);
#else
  (void)index;
  (void)ws;
#endif
}

void tdm_threads_stop(void) {
  __atomic_store_n(&pool.n, 1, __ATOMIC_SEQ_CST);
#if defined(TDM_THREADS)
  __atomic_store_n(&pool.quit, 1, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&pool.gen, 1, __ATOMIC_SEQ_CST);
  __builtin_wasm_memory_atomic_notify(&pool.gen, UINT32_MAX);
#else
  tdm__free(pool.sim_ws);
  pool.sim_ws = NULL;
#endif
}
