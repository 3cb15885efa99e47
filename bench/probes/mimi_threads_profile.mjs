// mimi_threads_profile.mjs — issue #23: which of Mimi's ops do not scale on 2 wasm threads. One
// runtime build loaded twice, on 1 thread (WEB/tandem.wasm) and on 2 (WEB/tandem-mt.wasm); frames
// alternate between the two, so a busy spell of this shared machine hits both alike. Prints each op
// kind's sum of per-op medians (1 thread, 2 threads, ratio) and the ops that lose the most against a
// perfect split (2-thread median - 1-thread median / 2).
// Usage: node bench/probes/mimi_threads_profile.mjs DIR WEB [frames = 12] [top = 25] [file = mimi.tandem]
import { readFileSync } from 'node:fs';
import { load } from '../../node/index.js';

const [dir, web] = process.argv.slice(2, 4);
const nframes = Number(process.argv[4] ?? 12), top = Number(process.argv[5] ?? 25);
const file = process.argv[6] ?? 'mimi.tandem';
const frames = JSON.parse(readFileSync(`${dir}/mimi_frames.json`, 'utf8'));
const opsList = JSON.parse(readFileSync(`${dir}/mimi_ops.json`, 'utf8'));
const models = [
  await load(`${dir}/${file}`, { wasm: `${web}/tandem.wasm`, threads: 1 }),
  await load(`${dir}/${file}`, { wasmThreads: `${web}/tandem-mt.wasm`, threads: 2 }),
];
const per = [new Map(), new Map()], totals = [[], []];
for (const m of models) await m.resetState();
const warmup = frames.warmup ?? 2; // frames that fill the attention context (bench/models/mimi.py), run unprofiled
for (let i = 0; i < Math.min(warmup + nframes, frames.inputs.length); i++)
  for (let b = 0; b < 2; b++) {
    const x = Float32Array.from(frames.inputs[i]), codes = BigInt64Array.from(frames.codes[i].map(BigInt));
    if (i < warmup) {
      await models[b].encode_step(x);
      await models[b].decode_step(codes);
      continue;
    }
    const e = await models[b].profile('encode_step', x);
    const d = await models[b].profile('decode_step', codes);
    let t = 0;
    for (const [meth, p] of [['encode_step', e], ['decode_step', d]])
      for (const op of p.ops) {
        const key = `${meth}:${op.index}`;
        per[b].set(key, [...(per[b].get(key) ?? []), op.ms]);
        t += op.ms;
      }
    totals[b].push(t);
  }
models.forEach((m) => m.dispose());
const median = (v) => [...v].sort((p, q) => p - q)[v.length >> 1];
const kinds = new Map(), rows = [];
for (const [key, v1] of per[0]) {
  const [meth, idx] = key.split(':');
  const op = opsList[meth][Number(idx)];
  const a = median(v1), b = median(per[1].get(key));
  const k = kinds.get(op.name) ?? { a: 0, b: 0, n: 0 };
  k.a += a, k.b += b, k.n++;
  kinds.set(op.name, k);
  rows.push({ meth, idx, op, a, b, loss: b - a / 2 });
}
const f = (x) => x.toFixed(3);
console.log(`ops' ms sum per frame, median: 1 thread ${f(median(totals[0]))}, 2 threads ${f(median(totals[1]))}`);
console.log('kind (count) | 1 thread ms | 2 threads ms | 1t/2t | loss vs perfect split');
for (const [name, k] of [...kinds].sort((p, q) => (q[1].b - q[1].a / 2) - (p[1].b - p[1].a / 2)))
  if (k.a > 0.05) console.log(`  ${name} (${k.n}) | ${f(k.a)} | ${f(k.b)} | ${(k.a / k.b).toFixed(2)} | ${f(k.b - k.a / 2)}`);
console.log('worst ops: method index name ins -> outs | 1t | 2t | loss');
for (const r of rows.sort((p, q) => q.loss - p.loss).slice(0, top)) {
  const shapes = `${JSON.stringify(r.op.ins)} -> ${JSON.stringify(r.op.outs)}`;
  console.log(`  ${r.meth} ${r.idx} ${r.op.name} ${shapes} | ${f(r.a)} | ${f(r.b)} | ${f(r.loss)}`);
}
