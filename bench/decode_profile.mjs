// Decode-step profile of the transformer family at two KV-cache capacities with the same fill:
// the cache update (index_put, in place) must cost the same at both, since it writes only the new
// row. Usage: node bench/decode_profile.mjs DIR (with DIR/lm_256.tandem and DIR/lm_2048.tandem).
import { load } from '../node/index.js';

const dir = process.argv[2] ?? 'build/bench';
const FILL = 32, REPS = 200;

async function profileAt(cap) {
  const model = await load(`${dir}/lm_${cap}.tandem`);
  const chunk = model.methods.find((m) => m.name === 'prefill').inputs[0].shape[1];
  const tok = (t) => new BigInt64Array([BigInt(t % 40)]);
  await model.prefill(new BigInt64Array(chunk));
  for (let i = chunk; i < FILL; i++) await model.decode(tok(i));
  const byOp = new Map();
  let total = 0;
  for (let r = 0; r < REPS; r++) {
    const { ops, totalMs } = await model.profile('decode', tok(r));
    await model.reset();  // keep the fill constant: reset, refill
    await model.prefill(new BigInt64Array(chunk));
    for (let i = chunk; i < FILL; i++) await model.decode(tok(i));
    total += totalMs;
    for (const o of ops) byOp.set(o.name, (byOp.get(o.name) ?? []).concat(o.ms));
  }
  model.dispose();
  const sum = (a) => a.reduce((x, y) => x + y, 0);
  return { cap, total: total / REPS, ops: new Map([...byOp].map(([k, v]) => [k, sum(v) / REPS])) };
}

const a = await profileAt(256), b = await profileAt(2048);
console.log(`decode step at fill ${FILL}: mean of ${REPS} profiled calls (ms per call, summed over ops of a kind)`);
console.log('op'.padEnd(14), 'cap 256'.padStart(10), 'cap 2048'.padStart(10), 'ratio'.padStart(8));
for (const name of [...a.ops.keys()].sort((x, y) => b.ops.get(y) - b.ops.get(x))) {
  const x = a.ops.get(name), y = b.ops.get(name);
  console.log(name.padEnd(14), x.toFixed(4).padStart(10), y.toFixed(4).padStart(10), (y / x).toFixed(2).padStart(8));
}
console.log('total'.padEnd(14), a.total.toFixed(4).padStart(10), b.total.toFixed(4).padStart(10), (b.total / a.total).toFixed(2).padStart(8));
console.log(`cache update (index_put) 2048/256 ratio: ${(b.ops.get('index_put') / a.ops.get('index_put')).toFixed(2)}`);
