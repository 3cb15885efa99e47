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

/** A fresh instance of a compiled runtime: its exports (functions and memory). */
export async function instantiateRuntime(module) {
  const imports = {};
  for (const imp of WebAssembly.Module.imports(module)) {
    if (imp.kind !== 'function') continue;
    imports[imp.module] ??= {};
    // The runtime does no I/O: any other import is a build mistake and throws if ever called.
    imports[imp.module][imp.name] = HOST[imp.name]
      ?? (() => { throw new Error(`tandem.wasm called the unexpected import ${imp.module}.${imp.name}`); });
  }
  const instance = await WebAssembly.instantiate(module, imports);
  if (instance.exports._initialize) instance.exports._initialize();
  return instance.exports;
}
