// node/index.js — the package's Node entry: the web API plus file paths, file: URLs and
// worker_threads for { worker: true } and for thread pools.
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodePort, nodeThread } from './spawn.js';
import { fileStore } from './cache.js';
import { probeCapabilities } from '../web/capabilities.js';
import { load as webLoad, Tensor, TandemError, Model, WorkerModel } from '../web/tandem.js';
import { HOOKS, isPlainObject } from '../web/options.js';

export { Tensor, TandemError, Model, WorkerModel };
export { Chat } from '../web/chat.js';
export { prefill, generate, sample, splitPrompt, position } from '../web/lm.js';
export { streamAudio, Resampler } from '../web/audio.js';

/** capabilities() as in the browser, with Node's core count. */
export const capabilities = () => probeCapabilities({ cores: availableParallelism() });

/** Empties tandem's cache folder (node/cache.js: $TANDEM_CACHE_DIR or the user's cache folder's
 * tandem/), or the folder given; only the cache's own files are removed. */
export const clearCache = (dir) => fileStore(dir).clear();

/** Build `name` of web/: read from the package, or from under `base` (options.wasmPaths: a folder's
 * path or file: URL, read; an http(s) URL, fetched). */
function wasmFile(name, base) {
  if (base === undefined) return wasmBytes(fileURLToPath(new URL(`../web/${name}`, import.meta.url)));
  if (!isLocal(base)) return new URL(name, base);
  return wasmBytes(base.startsWith('file://') ? new URL(name, base) : join(base, name)).catch((e) => {
    const why = e.message.slice(e.code.length + 2);
    throw new TandemError(e.code, `${why}; options.wasmPaths (${base}) must be a folder holding the package's web/ files`);
  });
}

function isLocal(source) {
  if (source instanceof URL) return source.protocol === 'file:';
  return typeof source === 'string' && (source.startsWith('file://') || !/^[a-z][a-z0-9+.-]*:\/\//i.test(source));
}

async function readLocal(source) {
  if (!isLocal(source)) return source;
  try {
    return await readFile(typeof source === 'string' && source.startsWith('file://') ? new URL(source) : source);
  } catch (e) {
    throw new TandemError('TDM_ERR_NOT_FOUND', `cannot read ${source}: ${e.message}`);
  }
}

// The same bytes object per wasm path, so the loader compiles each path once.
const wasmCache = new Map();
function wasmBytes(wasm) {
  if (!isLocal(wasm)) return wasm;
  const key = String(wasm);
  if (!wasmCache.has(key)) wasmCache.set(key, readLocal(wasm));
  return wasmCache.get(key);
}

/** load(source, options) as in the browser; `source` may also be a file path or file: URL. Node's
 * hooks (web/options.js HOOKS: the wasm files, worker_threads, the cores) go with the options; a
 * test's own hooks (`spawnThread`, `onWorker(worker)`: the worker_threads Worker of { worker: true })
 * are kept. */
export async function load(source, options = {}) {
  if (!isPlainObject(options)) return webLoad(source, options); // rejected there, naming what was given
  const hooks = options[HOOKS] ?? {};
  const spawn = () => nodePort(new URL('./worker.js', import.meta.url), hooks.onWorker);
  return webLoad(await readLocal(source), {
    ...options,
    ...(options.wasm === undefined ? {} : { wasm: await wasmBytes(options.wasm) }),
    ...(options.wasmThreads === undefined ? {} : { wasmThreads: await wasmBytes(options.wasmThreads) }),
    [HOOKS]: {
      wasmFile, // the package's builds, read from web/ when one is first used
      cacheStore: fileStore, // load's cache: a folder
      spawnWorker: spawn, cores: availableParallelism(), ...hooks, spawnThread: hooks.spawnThread ?? nodeThread,
    },
  });
}
