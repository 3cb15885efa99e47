// loader.js — instantiates the standalone tandem.wasm without generated glue, the same way in
// browsers and in Node. Compiled modules are memoized per source so loading twice compiles once.

const compiled = new Map(); // key -> Promise<WebAssembly.Module>

// What the runtime may import: the clock for profiles, and a growth notice it needs no action on
// (views are recreated from memory.buffer on every access).
const HOST = {
  tdm_now_ms: () => performance.now(),
  emscripten_notify_memory_growth: () => {},
};

/** Compile (once per key) and instantiate the runtime. `getBytes` is called only on a miss. */
export async function instantiateRuntime(key, getBytes) {
  let mod = compiled.get(key);
  if (!mod) {
    mod = (async () => WebAssembly.compile(await getBytes()))();
    compiled.set(key, mod);
    mod.catch(() => compiled.delete(key));
  }
  const module = await mod;
  // The runtime does no I/O: any other import is a build mistake and throws if ever called.
  const imports = {};
  for (const imp of WebAssembly.Module.imports(module)) {
    if (imp.kind !== 'function') continue;
    imports[imp.module] ??= {};
    imports[imp.module][imp.name] = HOST[imp.name]
      ?? (() => { throw new Error(`tandem.wasm called the unexpected import ${imp.module}.${imp.name}`); });
  }
  const instance = await WebAssembly.instantiate(module, imports);
  if (instance.exports._initialize) instance.exports._initialize();
  return instance.exports;
}
