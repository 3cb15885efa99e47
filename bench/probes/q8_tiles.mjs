// q8_tiles.mjs — the int8 rows kernel at Mimi's / pocket-tts' transformer shapes (bench/probes/q8_tiles.c),
// built with clang-19 for wasm32-wasi from each tree given (as tandem-relaxed.wasm is), all trees'
// builds timed in interleaved rounds in one process: ns per weight and row (CPU time, the 3rd fastest
// of ROUNDS), for M rows (ROWS, default 0,1,2,16; 0 is a plain read of the bytes, ns per byte) over
// LAYERS layers of the four linears (default 8: 25 MB
// of weights, from L3 as in a Mimi step; LAYERS=1 runs from L2).
//
//   node bench/probes/q8_tiles.mjs TREE ...   (e.g. /work/main .)
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpuMs } from '../suite/compare.mjs';

const root = new URL('../..', import.meta.url).pathname;
const trees = process.argv.length > 2 ? process.argv.slice(2) : [root];
const modules = trees.map((tree, i) => {
  const out = `${root}build/q8_tiles_${i}.wasm`;
  const src = ['kernels/quant.c', 'kernels/quant_simd128.c', 'ops.c', 'util.c', 'threads.c'];
  execFileSync('clang-19', ['--target=wasm32-wasi', '-O3', '-msimd128', '-mrelaxed-simd', '-DTDM_RELAXED_SIMD=1',
    `-I${tree}/include`, `-I${tree}/src`, '-mexec-model=reactor', '-Wl,--export=setup', '-Wl,--export=run',
    '-Wl,--export=check', '-Wl,-z,stack-size=262144', '-Wl,--max-memory=4294967296', `${root}bench/probes/q8_tiles.c`,
    ...src.map((s) => `${tree}/src/${s}`), '-o', out]);
  return WebAssembly.compile(readFileSync(out));
});
const wasi = new Proxy({}, { get: () => () => 0 });
const ROUNDS = Number(process.env.ROUNDS ?? 15);
const LAYERS = Number(process.env.LAYERS ?? 8);
const rows = (process.env.ROWS ?? '0,1,2,16').split(',').map(Number);
const xs = [];
for (const m of await Promise.all(modules)) {
  const { exports: x } = await WebAssembly.instantiate(m, { wasi_snapshot_preview1: wasi, env: wasi });
  x._initialize?.();
  if (!x.setup(LAYERS)) throw new Error('out of memory');
  const bad = x.check();
  if (bad !== 0) throw new Error(`rows kernel differs from its scalar reference (M ${Math.floor(bad / 100)}, shape ${bad % 100})`);
  xs.push(x);
}
const W = LAYERS * 3.1457e6; // weights per pass
for (const M of rows) {
  const reps = Math.max(1, Math.round(2e8 / (W * Math.max(M, 2))));
  const t = xs.map(() => []);
  for (let r = 0; r < ROUNDS; r++)
    for (const [i, x] of xs.entries()) {
      const c0 = cpuMs();
      x.run(M, reps);
      t[i].push(((cpuMs() - c0) * 1e6) / reps / W / Math.max(M, 1));
    }
  const q = (v) => v.sort((p, r) => p - r)[2];
  const base = q(t[0]);
  console.log(`M=${M} LAYERS=${LAYERS}: ` + trees.map((tr, i) => `[${tr}] ${q(t[i]).toFixed(4)} ns/weight·row` +
    (i ? ` (${(q(t[i]) / base).toFixed(2)}x)` : '')).join('; '));
}
