// tandem.js — the JS API: `const model = await load(source)`, then `await model.<method>(...inputs)`.
// One ESM code path for browsers and Node (node/index.js adds file paths and worker_threads).
// Calls on a model run in FIFO order; inputs are read when the call is made and written straight
// into their planned place in linear memory; outputs are copied out (views into the heap would go
// stale when memory grows). Every pointer and size from wasm is read as unsigned: linear memory
// may grow to 4 GiB, and wasm returns i32.
import { compileRuntime } from './loader.js';
import { threadsAvailable, defaultThreads } from './threads.js';
import { parseLoadOptions } from './options.js';
import { openSource, bodyForWorker, bytesOf } from './source.js';
import { cacheApiStore, clearCacheApi } from './cache.js';
import { TandemError } from './errors.js';
import { BUILDS, runtimeFile, runtimeFileHint, fetchBuild } from './runtime.js';
import { Model, WorkerModel, BUILD_TOKENIZER } from './model.js';
import { createWasmBackend } from './wasm-backend.js';
import { loadInWorker, browserWorker, browserThread } from './worker-backend.js';

// The public API (docs/api.md, web/tandem.d.ts); each name lives in the module named for what it holds.
export { TandemError } from './errors.js';
export { Tensor } from './tensor.js';
export { bytesOf } from './source.js';
export { Model, WorkerModel } from './model.js';
export { serveWorker } from './worker-backend.js';
export { Chat } from './chat.js';
export { prefill, generate, sample, splitPrompt, position } from './lm.js';
export { streamAudio, Resampler } from './audio.js';
export { capabilities } from './capabilities.js';

/** Empties tandem's cache of programs (load's `cache`): the Cache API cache 'tandem-models', or
 * the one named. */
export const clearCache = (name) => clearCacheApi(name);

/** Instantiates a compiled runtime (a WebAssembly.Module of tandem.wasm) and loads program bytes into it. */
export async function createModel(module, bytes) {
  return new Model(await createWasmBackend(module, bytes));
}

/**
 * Load a .tandem program. `source`: a URL, bytes (ArrayBuffer / typed array), or a Response (and a
 * file path in Node). Options:
 * - `threads`: how many threads a method's parallel parts run on (GEMM/GEMV panels, attention
 *   rows, convolution channels); outputs are bit-identical for every count. Default: the cores
 *   up to 4 (navigator.hardwareConcurrency). Needs shared memory: in a page that is not
 *   cross-origin isolated (COOP/COEP headers) the model runs on one thread, and `model.threads`
 *   says so. An explicit count whose workers cannot start rejects the load;
 * - `simd`: 'relaxed' or 'simd128', the build's SIMD level. Default: 'relaxed' where the engine
 *   has relaxed SIMD (its fused multiply-add: faster matrix products, results that may differ in
 *   the last bits between machines), else 'simd128'. `model.simd` says which runs;
 * - `wasm`: a runtime build to use instead of the files beside this module (URL or bytes:
 *   tandem.wasm or tandem-relaxed.wasm);
 * - `wasmThreads`: the same for the threaded build used when threads > 1 (tandem-mt.wasm or
 *   tandem-mt-relaxed.wasm);
 * - `wasmPaths`: the URL of a folder serving the package's web/ files (a CDN, a copy of web/ beside
 *   a bundle), where the builds, worker.js, thread.js (and audio-worklet.js for streamAudio on the
 *   model) are loaded from instead of beside this module;
 * - `worker: true`: run the runtime in a worker, behind the same API (its thread pool, if any, is
 *   started by that worker);
 * - `onProgress({ loaded, total })`: called while a URL source downloads (or is read from the cache);
 * - `cache`: where a URL's program is kept between loads and revalidated on each (ETag /
 *   Last-Modified: a 304 reads the kept copy). Default true: the Cache API cache 'tandem-models'
 *   (Node: a folder, node/cache.js); a string names another cache (Node: folder); false fetches
 *   as is. A response without ETag or Last-Modified is not kept;
 * - `signal`: an AbortSignal that aborts the load (TDM_ERR_ABORTED); a download it stops is not cached;
 * - `sha256`: the program's SHA-256 (hex): the bytes are read whole and checked before they load
 *   (TDM_ERR_INTEGRITY when they differ; a file that differs is never cached);
 * - `gpuWeights: 'float16'`: on WebGPU, the float32 weight matrices (matmul_packed, embedding_packed)
 *   are kept as float16 in GPU memory and read back to float32 in the kernels (default 'float32');
 * - `profileFlagFraction`: `model.profile()` flags the ops writing more than this fraction of the
 *   state's bytes (default 0.05: in a decode step, a KV-cache update should write only new rows);
 * - `tokenizer: false`: leave the tokenizer the file carries unbuilt.
 * web/options.js checks every option: an unknown key or a bad value is TDM_ERR_INVALID_ARGUMENT.
 * The model is a Model over the backend the options pick (a WorkerModel with worker: true).
 */
export async function load(source, options = {}) {
  const o = parseLoadOptions(options), hooks = o.hooks;
  const aborted = () => {
    const e = new TandemError('TDM_ERR_ABORTED', 'load(): aborted by its signal; nothing was loaded or cached');
    if (o.signal.reason !== undefined) e.cause = o.signal.reason;
    return e;
  };
  if (o.signal?.aborted) throw aborted();
  // Aborted by the caller's signal, or by a load that fails: the download (and its cache write) stops.
  const stop = new AbortController();
  const onAbort = () => stop.abort(o.signal.reason);
  o.signal?.addEventListener('abort', onAbort, { once: true });
  let opened, model;
  try {
    model = await loadModel(source, o, hooks, (src) => (opened = src), stop.signal);
    await opened.written; // the program is in the cache when load() resolves
    if (o.signal?.aborted) throw aborted();
    return model;
  } catch (e) {
    model?.dispose();
    stop.abort();
    if (opened?.written) { // a program that did not load is not kept, even where its download finished
      await opened.written;
      await opened.drop();
    }
    if (o.signal?.aborted) throw aborted();
    throw e;
  } finally {
    o.signal?.removeEventListener('abort', onAbort);
  }
}

async function loadModel(source, o, hooks, onOpen, signal) {
  // device 'webgpu' runs its methods on the GPU (model.threads is 1 there): no pool unless asked for
  const threads = threadsAvailable() && o.threadedBuild
    ? o.threads ?? (o.device === 'webgpu' ? 1 : defaultThreads(hooks.cores)) : 1;
  // wasmPaths: a page's relative folder is resolved against the page, so its workers get the same one
  const base = o.wasmPaths === undefined || hooks.wasmFile ? o.wasmPaths
    : new URL(o.wasmPaths, globalThis.document?.baseURI ?? globalThis.location?.href).href;
  const given = threads > 1 ? o.wasmThreads : o.wasm;
  const wasm = await (given ?? (hooks.wasmFile ?? runtimeFile)(BUILDS[o.simd][threads > 1 ? 1 : 0], base));
  const isUrl = wasm instanceof URL || typeof wasm === 'string';
  const hint = given === undefined ? runtimeFileHint(base) : `check options.${threads > 1 ? 'wasmThreads' : 'wasm'}`;
  const module = await compileRuntime(isUrl ? String(wasm) : wasm, () => (isUrl ? fetchBuild(wasm, hint) : bytesOf(wasm)));
  const store = o.cache === false ? null : (hooks.cacheStore ?? cacheApiStore)(o.cache === true ? undefined : o.cache);
  const { src, owned } = onOpen(await openSource(source, { store, signal, sha256: o.sha256, onProgress: o.onProgress }));
  const pool = { threads, strict: o.threads !== undefined, base };
  const kept = { flagFraction: o.profileFlagFraction, wasmPaths: base };
  let model;
  if (o.worker) {
    // The caller keeps its bytes: a copy is transferred to the worker. A Response's body is
    // transferred as a stream, and the worker streams it into its memory.
    const program = src instanceof Uint8Array ? (owned ? src : src.slice())
      : bodyForWorker(src, o.onProgress) ?? await bytesOf(src, o.onProgress);
    const backend = await loadInWorker(module, program, () => (hooks.spawnWorker ?? browserWorker)(base), pool);
    if (o.device === 'auto') kept.deviceReason = 'worker: true runs on wasm (the WebGPU backend runs on the calling thread only)';
    model = new WorkerModel(backend, kept);
  } else {
    // A Response streams into the runtime's memory (no full copy in JS); bytes are copied there.
    const spawnThread = hooks.spawnThread ?? browserThread;
    let backend = await createWasmBackend(module, src, { ...pool, spawnThread, onProgress: o.onProgress });
    if (o.device !== 'wasm') {
      const { onWebGpu } = await import('./webgpu/backend.js');
      const gpu = await onWebGpu(backend, o.device, o.gpuWeights);
      if (gpu.reason) kept.deviceReason = gpu.reason;
      backend = gpu.backend;
    }
    model = new Model(backend, kept);
  }
  if (o.tokenizer) {
    try {
      await model[BUILD_TOKENIZER]();
    } catch (e) {
      model.dispose();
      throw e;
    }
  }
  return model;
}
