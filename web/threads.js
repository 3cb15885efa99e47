// threads.js — the worker pool behind load(source, { threads }). A model with n threads runs the
// threaded runtime (tandem-mt.wasm) over one shared memory; n - 1 workers each instantiate the same
// compiled module over that memory, take a stack and a workspace of their own, and wait inside
// tdm_thread_worker (in the engine's Atomics.wait: an idle pool uses no CPU) until a method's
// parallel part wakes them. The split of every part is fixed (src/threads.h), so outputs are
// bit-identical to one thread. See include/tandem.h, "Threads".
import { instantiateRuntime } from './loader.js';

const STACK_BYTES = 256 * 1024; // as the main thread's (-sTOTAL_STACK)
const WS_BYTES = 256 * 1024; // TDM_THREAD_WS_BYTES in include/tandem.h
const THREAD_BLOCK = 1024; // zeroed, libc's per-thread record (errno and the like; far smaller)
export const MAX_THREADS = 64; // src/threads.c

/** Whether this engine and context can share a memory between workers: { available, reason }.
 * SharedArrayBuffer must exist, and in a page, the page must be cross-origin isolated (COOP/COEP
 * headers); `reason` says which is missing (null when available). */
export function threadSupport() {
  // undefined in Node: shared memory always works there
  if (globalThis.crossOriginIsolated === false) {
    return {
      available: false,
      reason: 'not cross-origin isolated: serve with COOP/COEP headers (Cross-Origin-Opener-Policy: same-origin, ' +
        'Cross-Origin-Embedder-Policy: require-corp)',
    };
  }
  if (typeof SharedArrayBuffer === 'undefined' || typeof Atomics === 'undefined') {
    return { available: false, reason: 'this engine has no SharedArrayBuffer (or Atomics)' };
  }
  return { available: true, reason: null };
}

/** Whether threads are available (threadSupport). */
export const threadsAvailable = () => threadSupport().available;

/** The default thread count: the available cores up to 4 (beyond 4, a decode step is bound by
 * memory bandwidth and gains little; a page keeps cores for itself). 1 where threads are not
 * available. */
export function defaultThreads(cores = globalThis.navigator?.hardwareConcurrency ?? 1) {
  if (!threadsAvailable()) return 1;
  return Math.max(1, Math.min(4, cores));
}

/** Whether the calling thread may block in Atomics.wait (not a page's main thread). */
export function canBlock() {
  return typeof document === 'undefined' || typeof WorkerGlobalScope !== 'undefined';
}

/**
 * Starts n - 1 workers for the main instance `x` (its exports, with `memory`) of `module`;
 * `spawn()` makes one worker port ({ post, onMessage, onError, terminate }; onError's callback
 * gets why and, for a script that was not found, the code 'TDM_ERR_NOT_FOUND'). Resolves to
 * { threads, stop() } once every worker waits in tdm_thread_worker and the runtime uses them;
 * rejects (ending every worker it started) if one fails.
 */
export async function startPool(x, module, n, spawn, check) {
  const ports = [];
  const blocks = [];
  try {
    const ready = [];
    for (let i = 1; i < n; i++) {
      const block = x.tdm_malloc(STACK_BYTES + WS_BYTES + THREAD_BLOCK) >>> 0;
      if (!block) throw Object.assign(new Error(`no memory for thread ${i}'s stack`), { code: 'TDM_ERR_OUT_OF_MEMORY' });
      blocks.push(block);
      new Uint8Array(x.memory.buffer, block + STACK_BYTES + WS_BYTES, THREAD_BLOCK).fill(0);
      const port = spawn();
      ports.push(port);
      port.busy?.(true); // Node: keep the process alive until the worker is ready
      ready.push(new Promise((resolve, reject) => {
        port.onMessage((m) => (m === 'ready' ? resolve() : m?.error && reject(new Error(`thread ${i}: ${m.error}`))));
        port.onError((why, code) => reject(Object.assign(new Error(`thread ${i} ${why}`), { code })));
      }));
      port.post({
        module, memory: x.memory, index: i, stackTop: block + STACK_BYTES, ws: block + STACK_BYTES, self: block + STACK_BYTES + WS_BYTES,
      });
    }
    await Promise.all(ready);
    ports.forEach((p) => p.busy?.(false)); // an idle pool does not keep a Node process alive
    check(x.tdm_threads_start(n, canBlock() ? 1 : 0));
  } catch (e) {
    ports.forEach((p) => p.terminate());
    blocks.forEach((b) => x.tdm_free(b));
    throw e;
  }
  let stopped = false;
  return {
    threads: n,
    stop() {
      if (stopped) return;
      stopped = true;
      x.tdm_threads_stop(); // each worker returns from tdm_thread_worker and closes
      ports.forEach((p) => p.terminate());
    },
  };
}

/** The worker's side (web/thread.js, node/thread.js): `msg` is startPool's message. */
export async function serveThread(msg, post) {
  try {
    const x = await instantiateRuntime(msg.module, { memory: msg.memory, thread: true });
    // Its own stack (the stack pointer is a global of each instance; the module's initial value is
    // the main thread's stack), libc's thread record, and its thread-local storage.
    x.stackRestore(msg.stackTop);
    x._emscripten_thread_init(msg.self, 0, 0, 1, 0);
    x.emscripten_tls_init();
    post('ready');
    x.tdm_thread_worker(msg.index, msg.ws);
  } catch (e) {
    post({ error: e?.message ?? String(e) });
  }
}
