// q8_rows.mjs — one Linear (bench/probes/q8_rows.py's exports) at float32 and int8 for 1 to 4 rows,
// in Node, one thread, every runtime timed in turn by compare(): this tree's web/tandem.wasm and
// web/tandem-relaxed.wasm, and with a second directory (e.g. a copy of main's web/) the same two
// builds from there, for before/after. CPU time (compare.mjs's cpuMs), median of ROUNDS (9).
//
//   [K=512 ROWS=1,2,3,4] node --expose-gc --experimental-wasm-relaxed-simd bench/probes/q8_rows.mjs [build/q8rows] [before/]
import { existsSync, readFileSync } from 'node:fs';
import { load, Tensor } from '../../node/index.js';
import { compare, cpuMs } from '../suite/compare.mjs';

const DIR = process.argv[2] ?? 'build/q8rows', BEFORE = process.argv[3];
const root = new URL('../..', import.meta.url).pathname;
const builds = { simd128: `${root}web/tandem.wasm`, relaxed: `${root}web/tandem-relaxed.wasm` };
if (BEFORE) for (const b of ['simd128', 'relaxed'])
  builds[`${b} before`] = `${BEFORE}/${b === 'simd128' ? 'tandem.wasm' : 'tandem-relaxed.wasm'}`;
for (const m of (process.env.ROWS ?? '1,2,3,4').split(',').map(Number)) {
  const fns = {};
  for (const [b, wasm] of Object.entries(builds)) {
    if (!existsSync(wasm)) continue;
    for (const mode of ['float32', 'int8']) {
      const model = await load(readFileSync(`${DIR}/linear_${mode}_m${m}.tandem`), { threads: 1, wasm });
      const K = Number(process.env.K ?? 512);
      const x = new Tensor('float32', new Float32Array(m * K).map((_, i) => Math.sin(i)), [m, K]);
      fns[`${b} ${mode}`] = async () => model.forward(x);
    }
  }
  const ms = await compare(fns, { rounds: Number(process.env.ROUNDS ?? 9), clock: cpuMs });
  console.log(`rows ${m}: ` + Object.entries(ms).map(([n, t]) => `${n} ${t.toFixed(3)} ms`).join(', '));
}
