// q8_walk.mjs — the int8 one-row GEMV on the paired layout (tdm_q8_gemv_dot_paired__simd128, 4 streams)
// against candidate steps and walks (bench/probes/q8_walk.c: 8 streams; 8- or 16-byte loads per pair step),
// a plain read of the same bytes in 1 and 4 streams and the activation's quantization alone, built with
// clang-19 for wasm32-wasi as tandem-relaxed.wasm is; bits checked first.
// Per shape from DRAM (copies spanning ≥ MB, 256) in ns per weight, then one token's 30-layer SmolLM-135M
// GEMVs in the decode's order (134 MiB of int8) in ms; CPU time, 3rd fastest of ROUNDS (15), interleaved.
//
//   node --experimental-wasm-relaxed-simd bench/probes/q8_walk.mjs   (SHAPES=KxN,... ROUNDS=15 MB=256 MODES=shapes,decode)
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { cpuMs } from '../suite/compare.mjs';

const root = new URL('../..', import.meta.url).pathname;
const out = `${root}build/q8_walk.wasm`;
const src = ['kernels/quant.c', 'kernels/quant_relaxed.c', 'ops.c', 'util.c', 'threads.c']; // quant_simd128.c: included
mkdirSync(`${root}build`, { recursive: true });
execFileSync('clang-19', ['--target=wasm32-wasi', '-O3', '-msimd128', '-mrelaxed-simd', '-DTDM_RELAXED_SIMD=1',
  `-I${root}include`, `-I${root}src`, `-I${root}src/kernels`, '-mexec-model=reactor', '-Wl,--export=setup',
  '-Wl,--export=run', '-Wl,--export=check', '-Wl,-z,stack-size=262144', '-Wl,--max-memory=4294967296',
  `${root}bench/probes/q8_walk.c`, ...src.map((s) => `${root}src/${s}`), '-o', out]);
const module = await WebAssembly.compile(readFileSync(out));
const wasi = new Proxy({}, { get: () => () => 0 });
const ROUNDS = Number(process.env.ROUNDS ?? 15), MB = Number(process.env.MB ?? 256);
const names = ['runtime (4 streams)', 'runtime step, 8 streams', '8-byte loads', '16-byte loads in 2 of 4', '16-byte loads',
  '16-byte loads in 3 of 4', 'plain read', 'plain read, 4 streams', 'quantization alone'];
const MODES = (process.env.MODES ?? 'shapes,decode').split(',');
const q3 = (v) => v.sort((p, r) => p - r)[2];
const make = async (k, n, copies) => {
  const { exports: x } = await WebAssembly.instantiate(module, { wasi_snapshot_preview1: wasi, env: wasi });
  x._initialize?.();
  if (x.setup(n, k, copies) !== copies) throw new Error('out of memory or a shape not a multiple of 64');
  if (x.check() !== 0) throw new Error(`K=${k} N=${n}: a kernel differs from the reference (check ${x.check()})`);
  return x;
};
const shapes = (process.env.SHAPES ?? '576x1536,1536x576,576x576,576x192,576x49152').split(',').map((s) => s.split('x').map(Number));
for (const [k, n] of MODES.includes('shapes') ? shapes : []) {
  const x = await make(k, n, Math.ceil((MB << 20) / (n * k)) + 1);
  const reps = Math.max(4, Math.round(1.5e7 / (n * k)));
  const t = names.map(() => []);
  let start = 0;
  for (let r = 0; r < ROUNDS; r++)
    for (const w of names.keys()) {
      const c0 = cpuMs();
      x.run(w, reps, start);
      t[w].push(((cpuMs() - c0) * 1e6) / reps / (n * k));
      start += reps;
    }
  const base = q3(t[0]);
  console.log(`K=${k} N=${n} dram: ` + names.map((nm, w) => `${nm} ${q3(t[w]).toFixed(4)}` +
    (w ? ` (${(q3(t[w]) / base).toFixed(2)}x)` : '')).join(', ') + ' ns/weight');
}
if (!MODES.includes('decode')) process.exit(0);
const per = { '576x576': 60, '576x192': 60, '576x1536': 60, '1536x576': 30, '576x49152': 1 };
const inst = {};
for (const [key, c] of Object.entries(per)) inst[key] = await make(...key.split('x').map(Number), c);
const token = (w) => {
  for (let l = 0; l < 30; l++) {
    inst['576x576'].run(w, 1, 2 * l), inst['576x192'].run(w, 2, 2 * l), inst['576x576'].run(w, 1, 2 * l + 1);
    inst['576x1536'].run(w, 2, 2 * l), inst['1536x576'].run(w, 1, l);
  }
  inst['576x49152'].run(w, 1, 0);
};
const t = names.map(() => []);
for (let r = 0; r < ROUNDS; r++)
  for (const w of names.keys()) {
    const c0 = cpuMs();
    token(w);
    t[w].push(cpuMs() - c0);
  }
console.log('decode, one token\'s GEMVs: ' + names.map((nm, w) => `${nm} ${q3(t[w]).toFixed(2)} ms` +
  (w ? ` (${(q3(t[w]) / q3(t[0])).toFixed(2)}x)` : '')).join(', '));
