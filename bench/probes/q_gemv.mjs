// q_gemv.mjs — the decode step's int8 and int4 integer-dot GEMVs alone (bench/probes/q_gemv.c), built
// with clang-19 for wasm32-wasi from one or more trees (as tandem-relaxed.wasm is), every build's
// kernels timed in interleaved rounds in one process: ns per weight (CPU time, the 3rd fastest of
// ROUNDS, 25), and a plain read of the int8 bytes in ns per byte (the memory this process gets now); also
// the int8 GEMV on the paired layout (variants.h) and both layouts with 2 rows (ns per weight and row).
//
//   node --experimental-wasm-relaxed-simd bench/probes/q_gemv.mjs [TREE ...]   (default: this tree; SHAPES=KxN,... for others)
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpuMs } from '../suite/compare.mjs';

const root = new URL('../..', import.meta.url).pathname;
const trees = process.argv.length > 2 ? process.argv.slice(2) : [root];
const modules = trees.map((tree, i) => {
  const out = `${root}build/q_gemv_${i}.wasm`;
  const src = ['kernels/quant.c', 'kernels/quant_simd128.c', 'kernels/quant_relaxed.c', 'ops.c', 'util.c', 'threads.c'];
  execFileSync('clang-19', ['--target=wasm32-wasi', '-O3', '-msimd128', '-mrelaxed-simd', '-DTDM_RELAXED_SIMD=1',
    `-I${tree}/include`, `-I${tree}/src`, '-mexec-model=reactor', '-Wl,--export=setup', '-Wl,--export=run',
    '-Wl,--export=check', '-Wl,-z,stack-size=262144', '-Wl,--max-memory=4294967296', `${root}bench/probes/q_gemv.c`,
    ...src.map((s) => `${tree}/src/${s}`), '-o', out]);
  return WebAssembly.compile(readFileSync(out));
});
const wasi = new Proxy({}, { get: () => () => 0 });
const ROUNDS = Number(process.env.ROUNDS ?? 25);
const shapes = process.env.SHAPES?.split(',').map((s) => s.split('x').map(Number).reverse()); // K x N
for (const [n, k] of shapes ?? [[49152, 576], [1536, 576], [576, 1536]]) {
  const xs = [];
  for (const m of await Promise.all(modules)) {
    const { exports: x } = await WebAssembly.instantiate(m, { wasi_snapshot_preview1: wasi, env: wasi });
    x._initialize?.();
    if (!x.setup(n, k)) throw new Error('out of memory');
    if (x.check() !== 0) throw new Error(`a GEMV differs from its scalar reference (check ${x.check()})`);
    xs.push(x);
  }
  const reps = Math.max(1, Math.round(1.5e7 / (n * k)));
  const W = [0, 1, 2, 3, 4, 5];
  const t = xs.map(() => W.map(() => []));
  for (let r = 0; r < ROUNDS; r++)
    for (const [i, x] of xs.entries())
      for (const w of W) {
        const c0 = cpuMs();
        x.run(w, reps);
        t[i][w].push(((cpuMs() - c0) * 1e6) / reps / (n * k) / (w >= 4 ? 2 : 1));
      }
  const q = (v) => v.sort((p, r) => p - r)[2].toFixed(4);
  console.log(`K=${k} N=${n}: ` + trees.map((tr, i) => `[${tr}] int8 ${q(t[i][0])}, int4 ${q(t[i][1])} ns/weight, ` +
    `read ${q(t[i][2])} ns/byte, int8 paired ${q(t[i][3])}, 2 rows ${q(t[i][4])} / paired ${q(t[i][5])} ns/weight·row`).join('; '));
}
