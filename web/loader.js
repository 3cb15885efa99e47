// loader.js — compiles and instantiates the standalone tandem.wasm without generated glue, the
// same way in browsers, in Node and inside workers. Compiled modules are memoized per source, so
// loading the same wasm twice compiles it once (and a compiled module can be posted to a worker).

const compiled = new Map(); // key -> Promise<WebAssembly.Module>

// What the runtime may import: the clock for profiles, and a growth notice it needs no action on
// (views are recreated from memory.buffer on every access).
const HOST = {
  tdm_now_ms: () => performance.now(),
  emscripten_notify_memory_growth: () => {},
};

/** The compiled runtime for `key`; `getBytes` is called only on a miss. */
export function compileRuntime(key, getBytes) {
  let mod = compiled.get(key);
  if (!mod) {
    mod = (async () => WebAssembly.compile(await getBytes()))();
    compiled.set(key, mod);
    mod.catch(() => compiled.delete(key));
  }
  return mod;
}

// Modules of one function each, which validate only where the engine has the instruction set:
// (func (result v128) i32.const 0 i8x16.splat), and
// (func (param v128 v128 v128) (result v128) local.get 0 local.get 1 local.get 2 f32x4.relaxed_madd).
const SIMD128_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15,
  253, 98, 11]);
const RELAXED_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 8, 1, 96, 3, 123, 123, 123, 1, 123, 3, 2, 1, 0,
  10, 13, 1, 11, 0, 32, 0, 32, 1, 32, 2, 253, 133, 2, 11]);
let simd;
/** The engine's SIMD: { simd128, relaxed }. Every build needs SIMD128; the relaxed builds need
 * relaxed SIMD (Chrome 114+, Firefox 145+, Node 22+; Node 20 with --experimental-wasm-relaxed-simd). */
export function simdSupport() {
  simd ??= { simd128: WebAssembly.validate(SIMD128_PROBE), relaxed: WebAssembly.validate(RELAXED_PROBE) };
  return simd;
}

const PAGE = 65536;
const MAX_PAGES = 65536; // 4 GiB, the most wasm32 addresses (and -sMAXIMUM_MEMORY in CMakeLists.txt)
/** The most linear memory a runtime instance may grow to, in bytes. */
export const MAX_MEMORY_BYTES = PAGE * MAX_PAGES;

/** Whether a compiled runtime is the threaded build: it imports its memory (a shared one). */
export function importsMemory(module) {
  return WebAssembly.Module.imports(module).some((i) => i.kind === 'memory');
}

/** A memory for the threaded build: shared, 1 MiB at first (its -sINITIAL_MEMORY), up to 4 GiB. */
export function sharedMemory() {
  return new WebAssembly.Memory({ initial: 16, maximum: MAX_PAGES, shared: true });
}

/**
 * A fresh instance of a compiled runtime: its exports (functions, and `memory`).
 * The standalone build (tandem.wasm) exports its memory. The threaded build (tandem-mt.wasm)
 * imports `memory` (a sharedMemory()), and is instantiated once as the main thread (`thread`
 * false: its constructors run) and once per pool worker over the same memory (`thread` true:
 * web/threads.js then gives it its own stack). `canBlock`: whether this thread may wait
 * (Atomics.wait; not on a browser page's main thread).
 */
export async function instantiateRuntime(module, { memory, thread = false, canBlock = true } = {}) {
  let x; // the exports, for the imports called back during construction
  const host = {
    ...HOST,
    // The threaded build is not standalone: libc asks the host for these.
    emscripten_get_now: () => performance.now(),
    emscripten_memcpy_big: (dest, src, n) => { new Uint8Array(memory.buffer).copyWithin(dest >>> 0, src >>> 0, (src >>> 0) + (n >>> 0)); },
    emscripten_resize_heap: (requested) => {
      // Exactly the pages asked for, as the standalone build's own resize_heap: malloc asks in
      // large steps already. 0 tells malloc it failed.
      const pages = Math.ceil(((requested >>> 0) - memory.buffer.byteLength) / PAGE);
      try {
        memory.grow(pages);
        return 1;
      } catch {
        return 0;
      }
    },
    // The main thread's record and its thread-local storage (tdm_last_error's message lives there):
    // what Emscripten's glue does at startup.
    __emscripten_init_main_thread_js: (tb) => {
      x._emscripten_thread_init(tb, canBlock ? 0 : 1, 1, canBlock ? 1 : 0, 0);
      x.emscripten_tls_init();
    },
    _emscripten_notify_thread_queue: () => {},
  };
  const imports = {};
  for (const imp of WebAssembly.Module.imports(module)) {
    imports[imp.module] ??= {};
    if (imp.kind === 'memory') {
      imports[imp.module][imp.name] = memory;
      continue;
    }
    if (imp.kind !== 'function') continue;
    // The runtime does no I/O: any other import is a build mistake and throws if ever called.
    imports[imp.module][imp.name] = host[imp.name]
      ?? (() => { throw new Error(`tandem.wasm called the unexpected import ${imp.module}.${imp.name}`); });
  }
  const instance = await WebAssembly.instantiate(module, imports);
  x = instance.exports;
  if (x._initialize) x._initialize();
  else if (x.__wasm_call_ctors && !thread) x.__wasm_call_ctors();
  return memory ? { ...x, memory } : x;
}
