// runtime.js — the runtime builds (which file for which SIMD level and thread count) and Runtime,
// the wasm instance's exports with helpers for strings and memory.
import { TandemError } from './errors.js';
import { UNSIGNED_RESULTS } from './schema.js';
import { byteView } from './tensor.js';

// The four builds beside this module: [one thread, threads] for each SIMD level (CMakeLists.txt).
export const BUILDS = { simd128: ['tandem.wasm', 'tandem-mt.wasm'], relaxed: ['tandem-relaxed.wasm', 'tandem-mt-relaxed.wasm'] };

// Each build's URL as one literal `new URL('./file', import.meta.url)`: the form bundlers (Vite,
// webpack, Parcel) find, emit the file for and rewrite; a name in a template or a variable they
// cannot follow.
const BESIDE = {
  'tandem.wasm': () => new URL('./tandem.wasm', import.meta.url),
  'tandem-mt.wasm': () => new URL('./tandem-mt.wasm', import.meta.url),
  'tandem-relaxed.wasm': () => new URL('./tandem-relaxed.wasm', import.meta.url),
  'tandem-mt-relaxed.wasm': () => new URL('./tandem-mt-relaxed.wasm', import.meta.url),
};

/** The URL of build `name` (a BUILDS entry): under `base` (options.wasmPaths) when given, else beside this module. */
export const runtimeFile = (name, base) => (base ? new URL(name, base) : BESIDE[name]());

/** What to do about a runtime file (a build, web/worker.js, web/thread.js) that did not load from
 * beside this module, or from under `base` (options.wasmPaths). */
export function runtimeFileHint(base) {
  return base ? `options.wasmPaths (${base}) must be a folder serving the package's web/ files`
    : "serve the package's web/ files beside the module that loads them (a bundler that copies files referenced with " +
      "new URL('./file', import.meta.url) does), or set options.wasmPaths to a folder serving them (docs/guide/deploying.md)";
}

/** The bytes of the build at `url`. A fetch that fails or a file that is not WebAssembly (a server's
 * fallback page) rejects with TDM_ERR_NOT_FOUND naming the URL and `hint`. */
export async function fetchBuild(url, hint) {
  const missing = (why) => new TandemError('TDM_ERR_NOT_FOUND', `the runtime build ${url} ${why}; ${hint}`);
  let res;
  try {
    res = await fetch(url);
  } catch (e) {
    throw missing(`could not be fetched (${e.message})`);
  }
  if (!res.ok) throw missing(`was not found (HTTP ${res.status})`);
  const bytes = new Uint8Array(await res.arrayBuffer());
  if (bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) {
    throw missing(`is not WebAssembly (Content-Type ${res.headers.get('content-type') ?? 'none'})`);
  }
  return bytes;
}

/** The runtime's exports with helpers for strings and memory. */
export class Runtime {
  constructor(exports) {
    this.x = { ...exports };
    for (const name of UNSIGNED_RESULTS) {
      const f = exports[name];
      // UNSIGNED_RESULTS (web/schema.js): pointers, C strings and size_t, unsigned in C.
      this.x[name] = f.length <= 4 ? (a, b, c, d) => f(a, b, c, d) >>> 0 : (...args) => f(...args) >>> 0;
    }
    this.dtypeNames = {};
    // Dtype codes are append-only but not contiguous (4 and 5 are weight-only dtypes a build may
    // lack): every code below 64 that the runtime knows.
    for (let code = 1; code < 64; code++) {
      if (exports.tdm_dtype_size(code) > 0) this.dtypeNames[code] = this.str(exports.tdm_dtype_name(code));
    }
  }
  /** Threads the runtime's methods run on (the pool, web/threads.js, when more than one). */
  get threads() { return this.pool?.threads ?? 1; }
  /** 'relaxed' when the build's kernels use relaxed SIMD (fused multiply-add), else 'simd128'. */
  get simd() { return this.x.tdm_build_features() & 2 ? 'relaxed' : 'simd128'; }
  bytes(ptr, n) { return new Uint8Array(this.x.memory.buffer, ptr, n); }
  /** A view of all of linear memory as Arr (cached, renewed when memory grows): copies in and out
   * of the heap then need no new view per call. */
  heap(Arr) {
    const buf = this.x.memory.buffer;
    if (this.heapBuffer !== buf) {
      this.heapBuffer = buf;
      this.heaps = new Map();
    }
    let h = this.heaps.get(Arr);
    if (!h) this.heaps.set(Arr, (h = new Arr(buf)));
    return h;
  }
  /** Copies typed array `a` into linear memory at ptr. */
  write(ptr, a) {
    const size = a.BYTES_PER_ELEMENT;
    if (ptr % size === 0) this.heap(a.constructor).set(a, ptr / size);
    else this.bytes(ptr, a.byteLength).set(byteView(a));
  }
  /** A new Arr holding the n elements at ptr. */
  read(ptr, Arr, n) {
    const size = Arr.BYTES_PER_ELEMENT;
    if (ptr % size === 0) return this.heap(Arr).slice(ptr / size, ptr / size + n);
    const a = new Arr(n);
    byteView(a).set(this.bytes(ptr, n * size));
    return a;
  }
  str(ptr) {
    if (!ptr) return '';
    const mem = new Uint8Array(this.x.memory.buffer);
    let end = ptr;
    while (mem[end] !== 0) end++;
    return new TextDecoder().decode(mem.slice(ptr, end)); // a copy: TextDecoder refuses shared memory
  }
  error(status) { return new TandemError(this.str(this.x.tdm_status_string(status)), this.str(this.x.tdm_last_error())); }
  check(status) { if (status !== 0) throw this.error(status); }
  malloc(n) {
    // wasm32 addresses 4 GiB; a larger size would wrap in the i32 argument
    const p = n < 2 ** 32 ? this.x.tdm_malloc(n) : 0;
    if (!p) throw new TandemError('TDM_ERR_OUT_OF_MEMORY', `out of memory allocating ${n} bytes in the wasm heap`);
    return p;
  }
  /** Runs fn(ptr) with a temporary u32 out-parameter; returns [fn's result, the u32]. */
  withOut(fn) {
    const out = this.malloc(8);
    try {
      const r = fn(out);
      return [r, new Uint32Array(this.x.memory.buffer, out, 1)[0]];
    } finally {
      this.x.tdm_free(out);
    }
  }
}
