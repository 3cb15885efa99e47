// gemv.mjs — the transformer GEMVs of a streaming step: Mimi's d512 layers with
// 2 rows per step and pocket-tts' flow LM d1024 with 1 row (bench/models/make_models.py,
// TANDEM_BENCH=gemv), each layer alone and a whole stack of one model's layers in one call, one
// thread, float32. Prints ns per weight and GB/s of weights read, against the best SIMD128 read
// bandwidth of as many bytes (bench/suite/peak.c, 1 to 16 streams) timed in the same rounds.
//
//   node --expose-gc --experimental-wasm-relaxed-simd bench/suite/gemv.mjs [build/bench] [NAME=path.wasm ...]
//
// Without runtimes: web/tandem-relaxed.wasm and web/tandem.wasm. CPU time (TANDEM_WALL=1: wall
// clock), interleaved rounds (ROUNDS, default 9), bench/suite/compare.mjs.
import { existsSync, readFileSync } from 'node:fs';
import { load } from '../../node/index.js';
import { instantiateRuntime } from '../../web/loader.js';
import { compare as timeCalls, cpuMs } from './compare.mjs';

const compare = (fns, opts = {}) => timeCalls(fns, process.env.TANDEM_WALL === '1' ? opts : { ...opts, clock: cpuMs });
const DIR = process.argv[2] ?? 'build/bench';
const given = process.argv.slice(3).map((a) => a.split('='));
const RUNTIMES = Object.fromEntries(given.length ? given : [
  ['relaxed', 'web/tandem-relaxed.wasm'],
  ['SIMD128', 'web/tandem.wasm'],
].filter(([, p]) => existsSync(p)));
const ROUNDS = Number(process.env.ROUNDS ?? 9);
const f = (x, d = 2) => x.toFixed(d);

const CASES = [
  ['Mimi', 2, [[512, 1536], [512, 512], [512, 2048], [2048, 512]], 'gemv_stack_mimi', 8 * (512 * 1536 + 512 * 512 + 2 * 512 * 2048)],
  ['pocket', 1, [[1024, 3072], [1024, 1024], [1024, 4096], [4096, 1024]], 'gemv_stack_pocket',
    6 * (1024 * 3072 + 1024 * 1024 + 2 * 1024 * 4096)],
];

const peak = await instantiateRuntime(await WebAssembly.compile(readFileSync(`${DIR}/peak.wasm`)));
/** Reads of `bytes` bytes (peak.c) over 1 to 16 streams, timed in the same rounds as the GEMVs so
 * that the machine's noise hits the bound and the kernels alike: { name: fn } and the bytes per call. */
function reads(bytes) {
  const src = peak.tdm_bench_alloc(bytes);
  new Uint8Array(peak.memory.buffer, src >>> 0, bytes).fill(1);
  return Object.fromEntries([1, 4, 8, 16].map((s) => [`read ${s}`, async () => peak.tdm_bench_read(src, bytes, 1, s)]));
}

console.log(`runtimes: ${Object.entries(RUNTIMES).map(([n, p]) => `${n} (${p})`).join('; ')}`);
const heads = Object.keys(RUNTIMES).map((r) => `${r} ns/weight | ${r} GB/s | ${r} of bound`);
console.log(`\n| shape | weights MiB | read bound GB/s | ${heads.join(' | ')} |`);
console.log('|---|---|---|' + Object.keys(RUNTIMES).map(() => '---|---|---|').join(''));
for (const [model, rows, shapes, stack, stackWeights] of CASES) {
  const items = shapes.map(([K, N]) => [`${model} [${rows},${K}]×[${K},${N}]`, `gemv${rows}_${K}x${N}.tandem`, K, K * N]);
  items.push([`${model} stack (all layers)`, `${stack}.tandem`, shapes[0][0], stackWeights]);
  for (const [label, file, K, weights] of items) {
    const x = Float32Array.from({ length: rows * K }, () => Math.random() - 0.5);
    const fns = {}, models = [];
    for (const [rn, p] of Object.entries(RUNTIMES)) {
      const m = await load(`${DIR}/${file}`, { threads: 1, wasm: p, simd: p.includes('relaxed') ? 'relaxed' : 'simd128' });
      models.push(m);
      fns[rn] = () => m.forward(x);
    }
    Object.assign(fns, reads(4 * weights));
    const ms = await compare(fns, { rounds: ROUNDS });
    const bound = Math.max(...[1, 4, 8, 16].map((s) => (4 * weights) / ms[`read ${s}`] / 1e6));
    console.log(`| ${label} | ${f((4 * weights) / 2 ** 20, 1)} | ${f(bound, 1)} | ` + Object.keys(RUNTIMES).map((rn) => {
      const gbs = (4 * weights) / ms[rn] / 1e6;
      return `${f((ms[rn] * 1e6) / weights, 3)} | ${f(gbs, 1)} | ${f((100 * gbs) / bound, 0)}%`;
    }).join(' | ') + ' |');
    for (const m of models) m.dispose();
  }
}
