// q8_dot.mjs — the quick check for issue #17: one int8 GEMV with float activations (the kernel
// tandem used before) against the integer-dot GEMV (activations quantized to int8 per block of 32,
// the quantization timed too), same process, same weights, one thread. Builds bench/probes/q8_dot.c with
// emcc into build/q8_dot[-relaxed].wasm first. Run: node bench/probes/q8_dot.mjs [--relaxed]
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { compare } from '../suite/compare.mjs';

const root = new URL('../..', import.meta.url).pathname;
const relaxed = process.argv.includes('--relaxed');
const out = `${root}build/q8_dot${relaxed ? '-relaxed' : ''}.wasm`;
execFileSync('emcc', ['-O3', '-msimd128', ...(relaxed ? ['-mrelaxed-simd'] : []), '-sSTANDALONE_WASM', '--no-entry',
  '-sALLOW_MEMORY_GROWTH=1', `-I${root}include`, `-I${root}src`, '-sEXPORTED_FUNCTIONS=_setup,_run_float,_run_dot,_malloc',
  `${root}bench/probes/q8_dot.c`, `${root}src/kernels/quant.c`, `${root}src/ops.c`, `${root}src/util.c`, `${root}src/threads.c`,
  '-o', out]);
const wasi = { proc_exit() {}, fd_write() { return 0; }, fd_close() { return 0; }, fd_seek() { return 0; },
  environ_get() { return 0; }, environ_sizes_get() { return 0; }, clock_time_get() { return 0; } };
for (const [n, k] of [[49152, 576], [576, 1536], [1536, 576]]) {
  const { instance } = await WebAssembly.instantiate(readFileSync(out),
    { wasi_snapshot_preview1: wasi, env: { emscripten_notify_memory_growth() {} } });
  const x = instance.exports;
  x._initialize?.();
  if (!x.setup(n, k)) throw new Error('out of memory');
  const reps = Math.max(1, Math.round(2e7 / (n * k)));
  const t = await compare({ float: async () => x.run_float(reps), dot: async () => x.run_dot(reps) });
  const ns = (ms) => ((ms * 1e6) / reps / (n * k)).toFixed(3);
  console.log(`K=${k} N=${n}: float activations ${ns(t.float)} ns/weight, int8 dot ${ns(t.dot)} ns/weight, ` +
    `${(t.float / t.dot).toFixed(2)}x`);
}
