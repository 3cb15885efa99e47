// npm run bench:profile: decode steps op by op, with each op's time and the bytes it writes.
// 1. The transformer family at KV-cache capacity 256 and 2048 with the same fill: the cache update
//    (index_put, in place) must cost the same at both, since it writes only the new row.
// 2. The SmolLM-135M-shaped Llama (bench/models/smollm.py) at cache fill 32 and 480: per op kind, time and
//    bytes written; any op writing more than --flag-fraction (default 0.05) of the state is flagged.
// Usage: node bench/suite/decode_profile.mjs DIR [--flag-fraction=F]
//   (DIR holds lm_256.tandem, lm_2048.tandem and, for part 2, smollm.tandem + smollm.json)
import { existsSync, readFileSync } from 'node:fs';
import { load } from '../../node/index.js';

const args = process.argv.slice(2);
const dir = args.find((a) => !a.startsWith('--')) ?? 'build/bench';
const flagFraction = Number(args.find((a) => a.startsWith('--flag-fraction='))?.split('=')[1] ?? 0.05);
const FILL = 32, REPS = 200;
const sum = (a) => a.reduce((x, y) => x + y, 0);
const kb = (b) => (b / 1024).toFixed(1);

async function profileAt(cap) {
  const model = await load(`${dir}/lm_${cap}.tandem`, { profileFlagFraction: flagFraction });
  const chunk = model.methods.find((m) => m.name === 'prefill').inputs[0].shape[1];
  const tok = (t) => new BigInt64Array([BigInt(t % 40)]);
  await model.prefill(new BigInt64Array(chunk));
  for (let i = chunk; i < FILL; i++) await model.decode(tok(i));
  const byOp = new Map(), bytes = new Map();
  let total = 0, flagged = 0;
  for (let r = 0; r < REPS; r++) {
    const p = await model.profile('decode', tok(r));
    await model.reset(); // keep the fill constant: reset, refill
    await model.prefill(new BigInt64Array(chunk));
    for (let i = chunk; i < FILL; i++) await model.decode(tok(i));
    total += p.totalMs;
    flagged = Math.max(flagged, p.flagged.length);
    for (const o of p.ops) {
      byOp.set(o.name, (byOp.get(o.name) ?? []).concat(o.ms));
      if (r === 0) bytes.set(o.name, (bytes.get(o.name) ?? 0) + o.bytesWritten);
    }
  }
  model.dispose();
  return { cap, total: total / REPS, flagged, bytes, ops: new Map([...byOp].map(([k, v]) => [k, sum(v) / REPS])) };
}

const a = await profileAt(256), b = await profileAt(2048);
console.log(`transformer family, decode step at fill ${FILL}: mean of ${REPS} profiled calls (ms per call, summed over ops of a kind)`);
console.log('op'.padEnd(14), 'cap 256'.padStart(10), 'cap 2048'.padStart(10), 'ratio'.padStart(8), 'KB written'.padStart(11));
for (const name of [...a.ops.keys()].sort((x, y) => b.ops.get(y) - b.ops.get(x))) {
  const x = a.ops.get(name), y = b.ops.get(name);
  console.log(name.padEnd(14), x.toFixed(4).padStart(10), y.toFixed(4).padStart(10), (y / x).toFixed(2).padStart(8),
    kb(b.bytes.get(name)).padStart(11));
}
console.log('total'.padEnd(14), a.total.toFixed(4).padStart(10), b.total.toFixed(4).padStart(10),
  (b.total / a.total).toFixed(2).padStart(8));
console.log(`cache update (index_put) 2048/256 ratio: ${(b.ops.get('index_put') / a.ops.get('index_put')).toFixed(2)}; ops flagged (> ` +
  `${flagFraction} of the state): ${a.flagged} / ${b.flagged}`);

if (existsSync(`${dir}/smollm.tandem`)) {
  const info = JSON.parse(readFileSync(`${dir}/smollm.json`, 'utf8'));
  const model = await load(`${dir}/smollm.tandem`, { profileFlagFraction: flagFraction });
  const chunks = model.methods.map((m) => /^prefill_(\d+)$/.exec(m.name)).filter(Boolean).map((r) => Number(r[1])).sort((x, y) => y - x);
  const lengths = model.state.filter((s) => info.positions.includes(s.name));
  const tok = new BigInt64Array([7n]);
  for (const fill of [32, 480]) {
    await model.resetState();
    let left = fill;
    for (const c of chunks) while (left >= c) { await model.call(`prefill_${c}`, new BigInt64Array(c).fill(5n)); left -= c; }
    while (left-- > 0) await model.decode(tok);
    const runs = [];
    for (let r = 0; r < 5; r++) { // the cache's length written back each time: the same fill
      for (const s of lengths) await model.writeState(s.name, BigInt(fill));
      runs.push(await model.profile('decode', tok));
    }
    runs.sort((x, y) => x.totalMs - y.totalMs);
    const p = runs[2]; // the median call
    const byName = new Map();
    for (const o of p.ops) {
      const e = byName.get(o.name) ?? { n: 0, ms: 0, bytes: 0, state: 0 };
      byName.set(o.name, { n: e.n + 1, ms: e.ms + o.ms, bytes: e.bytes + o.bytesWritten, state: e.state + o.stateBytesWritten });
    }
    console.log(`\nSmolLM-135M-shaped decode step at cache fill ${fill} (the median of 5 profiled calls): ${p.totalMs.toFixed(1)} ms, ` +
      `${p.ops.length} ops, ${kb(p.bytesWritten)} KB written, ${kb(p.stateBytesWritten)} KB of it into the ` +
      `${(p.stateBytes / 2 ** 20).toFixed(1)} MiB state ` +
      `(new K/V rows: ${kb(info.new_kv_bytes_per_token)} KB)`);
    console.log('| op | count | ms | % of the step | KB written | of which state |');
    console.log('|---|---|---|---|---|---|');
    for (const [name, e] of [...byName].sort((x, y) => y[1].ms - x[1].ms)) {
      console.log(`| ${name} | ${e.n} | ${e.ms.toFixed(3)} | ${(100 * e.ms / p.totalMs).toFixed(1)} | ${kb(e.bytes)} | ${kb(e.state)} |`);
    }
    console.log(p.flagged.length ? `flagged (> ${flagFraction} of the state): ${p.flagged.map((o) => `op ${o.index} ${o.name} ` +
      `${kb(o.bytesWritten)} KB`).join(', ')}`
      : `no op writes more than ${flagFraction} of the state`);
  }
  model.dispose();
}
