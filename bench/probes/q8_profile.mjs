// q8_profile.mjs — where an int8 / int4 decode step's time goes besides the weight bytes (issue #24):
// the SmolLM-shaped exports of bench/models/llm.py (DIR/smollm.tandem, smollm_int8.tandem,
// smollm_int4.tandem) at cache fill 32, one thread, each step profiled op by op (model.profile);
// per width each op's fastest of 7 profiled calls: the time per op kind, and the quantized matmuls' share.
//
//   node --expose-gc --experimental-wasm-relaxed-simd bench/probes/q8_profile.mjs [DIR = build/bench4] [wasm]
import { existsSync, readFileSync } from 'node:fs';
import { load } from '../../node/index.js';

const DIR = process.argv[2] ?? 'build/bench4', WASM = process.argv[3];
const info = JSON.parse(readFileSync(`${DIR}/smollm.json`, 'utf8'));
const FILL = 32;
for (const [width, file] of [['float32', 'smollm'], ['int8', 'smollm_int8'], ['int4', 'smollm_int4']]) {
  if (!existsSync(`${DIR}/${file}.tandem`)) continue;
  const model = await load(`${DIR}/${file}.tandem`, { threads: 1, ...(WASM ? { wasm: WASM } : {}) });
  await model.resetState();
  const lengths = model.state.filter((s) => info.positions.includes(s.name));
  const tok = new BigInt64Array([7n]);
  const runs = [];
  for (let r = 0; r < Number(process.env.ROUNDS ?? 9); r++) {
    for (const s of lengths) await model.writeState(s.name, BigInt(FILL));
    const p = await model.profile('decode', tok);
    if (r >= 2) runs.push(p);
  }
  // each op's fastest of the runs: on a shared machine a time slice lost to another process lands on
  // whichever op runs then, so the minimum per op is the estimate of the step on a quiet machine
  const ops = runs[0].ops.map((o, i) => ({ ...o, ms: Math.min(...runs.map((r) => r.ops[i].ms)) }));
  const total = ops.reduce((a, o) => a + o.ms, 0), median = runs.map((r) => r.totalMs).sort((x, y) => x - y)[runs.length >> 1];
  const byName = new Map();
  for (const o of ops) {
    const e = byName.get(o.name) ?? { n: 0, ms: 0 };
    byName.set(o.name, { n: e.n + 1, ms: e.ms + o.ms });
  }
  console.log(`\n${width}: ${total.toFixed(2)} ms per step, the sum of each op's fastest of ${runs.length} runs ` +
    `(the median run ${median.toFixed(2)} ms; ${ops.length} ops)`);
  for (const [name, e] of [...byName].sort((x, y) => y[1].ms - x[1].ms).slice(0, 8))
    console.log(`  ${name} x${e.n}: ${e.ms.toFixed(3)} ms (${((100 * e.ms) / total).toFixed(1)}%)`);
  const top = [...ops].sort((x, y) => y.ms - x.ms).slice(0, 4);
  const line = (o) => `${o.name} ${o.ms.toFixed(3)} ms (${(o.bytesWritten / 4).toFixed(0)} outputs)`;
  console.log('  largest ops: ' + top.map(line).join(', '));
  model.dispose?.();
}
