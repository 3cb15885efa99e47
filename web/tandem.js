// tandem.js — the JS API: `const model = await load(source)`, then `await model.<method>(...inputs)`.
// One ESM code path for browsers and Node (node/index.js adds file paths and worker_threads).
// Calls on a model run in FIFO order; inputs are read when the call is made and written straight
// into their planned place in linear memory; outputs are copied out (views into the heap would go
// stale when memory grows). Every pointer and size from wasm is read as unsigned: linear memory
// may grow to 4 GiB, and wasm returns i32.
import { compileRuntime } from './loader.js';
import { threadsAvailable, defaultThreads } from './threads.js';
import { TandemError } from './errors.js';
import { checkThreads, checkFlagFraction } from './options.js';
import { sourceOf, bodyForWorker, bytesOf } from './source.js';
import { BUILDS, besideThisModule, simdLevel } from './runtime.js';
import { ARRAY_OF, Tensor, numelOf, toTensor, checkTensor, checkBytes } from './tensor.js';
import { PREPARE, TOKENIZER_TEXT, INTERNALS, DEVICE_REASON, createModel } from './model.js';
import { loadInWorker, browserWorker, browserThread } from './remote.js';

// The public API (docs/api.md, web/tandem.d.ts); each name lives in the module named for what it holds.
export { TandemError } from './errors.js';
export { Tensor } from './tensor.js';
export { bytesOf } from './source.js';
export { Model, createModel } from './model.js';
export { WorkerModel, serveWorker } from './remote.js';
export { prefill, generate, sample, splitPrompt, position } from './lm.js';
export { streamAudio, Resampler } from './audio.js';

const DEVICES = ['wasm', 'webgpu', 'auto'];

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
 * - `worker: true`: run the runtime in a worker, behind the same API (its thread pool, if any, is
 *   started by that worker);
 * - `onProgress({ loaded, total })`: called while a URL source downloads;
 * - `gpuWeights: 'float16'`: on WebGPU, the float32 weight matrices (matmul_packed, embedding_packed)
 *   are kept as float16 in GPU memory and read back to float32 in the kernels (default 'float32');
 * - `profileFlagFraction`: `model.profile()` flags the ops writing more than this fraction of the
 *   state's bytes (default 0.05: in a decode step, a KV-cache update should write only new rows).
 */
export async function load(source, options = {}) {
  const device = options.device ?? 'wasm';
  if (!DEVICES.includes(device)) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `device must be 'wasm', 'webgpu' or 'auto', given ${String(device)}`);
  }
  const gpuWeights = options.gpuWeights ?? 'float32';
  if (gpuWeights !== 'float32' && gpuWeights !== 'float16') {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `gpuWeights must be 'float32' or 'float16', given ${String(gpuWeights)}`);
  }
  if (device === 'webgpu' && options.worker) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
      "device: 'webgpu' runs on the calling thread; leave worker unset (or use device: 'auto', which runs a worker model on wasm)");
  }
  const asked = checkThreads(options.threads);
  // A wasm given without wasmThreads: where the threaded build is, is unknown; one thread.
  const threadedBuild = options.wasm === undefined || options.wasmThreads !== undefined;
  if (asked > 1 && !threadedBuild) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
      `threads: ${asked} needs options.wasmThreads (where tandem-mt.wasm is) when options.wasm is given`);
  }
  // device 'webgpu' runs its methods on the GPU (model.threads is 1 there): no pool unless asked for
  const threads = threadsAvailable() && threadedBuild ? asked ?? (device === 'webgpu' ? 1 : defaultThreads(options._cores)) : 1;
  const level = simdLevel(options.simd);
  const wasm = await ((threads > 1 ? options.wasmThreads : options.wasm)
    ?? (options._wasmFile ?? besideThisModule)(BUILDS[level][threads > 1 ? 1 : 0]));
  const key = wasm instanceof URL || typeof wasm === 'string' ? String(wasm) : wasm;
  const module = await compileRuntime(key, () => bytesOf(wasm));
  const flagFraction = checkFlagFraction(options.profileFlagFraction);
  const src = await sourceOf(source);
  const pool = { threads, strict: asked !== undefined };
  if (options.worker) {
    // The caller keeps its bytes: a copy is transferred to the worker. A Response's body is
    // transferred as a stream, and the worker streams it into its memory.
    const program = src instanceof Uint8Array ? src.slice() : bodyForWorker(src, options.onProgress)
      ?? await bytesOf(src, options.onProgress);
    const wm = await loadInWorker(module, program, options._spawnWorker ?? browserWorker, flagFraction, pool, options.tokenizer !== false);
    if (device === 'auto') wm[DEVICE_REASON] = 'worker: true runs on wasm (the WebGPU backend runs on the calling thread only)';
    return wm;
  }
  // A Response streams into the runtime's memory (no full copy in JS); bytes are copied there.
  let model = await createModel(module, src, flagFraction,
    { ...pool, spawnThread: options._spawnThread ?? browserThread, onProgress: options.onProgress });
  if (device !== 'wasm') {
    const { onDevice } = await import('./webgpu/model.js');
    model = await onDevice(model, device,
      { Tensor, TandemError, INTERNALS, DEVICE_REASON, toTensor, checkTensor, checkBytes, numelOf, ARRAY_OF, PREPARE, TOKENIZER_TEXT },
      gpuWeights);
  }
  if (options.tokenizer !== false) {
    try {
      await model[PREPARE]();
    } catch (e) {
      model.dispose();
      throw e;
    }
  }
  return model;
}
