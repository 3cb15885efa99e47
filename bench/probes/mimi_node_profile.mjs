// mimi_node_profile.mjs — issue #23: Mimi's encode_step + decode_step op by op in V8 (Node), one
// thread: time per op kind (means), and each convolution-family op with its shapes, its median ms over
// the frames (this machine is shared: a mean of few frames picks up other work's spikes) and GFLOP/s (the op list
// from DIR/mimi_ops.json, bench/models/mimi.py's output). The wasm runtime is WASM (default
// web/tandem-relaxed.wasm: run node with --experimental-wasm-relaxed-simd).
// Usage: node --experimental-wasm-relaxed-simd bench/probes/mimi_node_profile.mjs DIR [WASM] [frames = 8]
import { readFileSync } from 'node:fs';
import { load } from '../../node/index.js';

const dir = process.argv[2] ?? '/work/main/build/mimi';
const wasm = process.argv[3] ?? new URL('../../web/tandem-relaxed.wasm', import.meta.url).pathname;
const nframes = Number(process.argv[4] ?? 8);
const frames = JSON.parse(readFileSync(`${dir}/mimi_frames.json`, 'utf8'));
const opsList = JSON.parse(readFileSync(`${dir}/mimi_ops.json`, 'utf8'));
const m = await load(`${dir}/mimi.tandem`, { wasm, threads: 1 });
await m.resetState();
const kinds = new Map(), per = new Map();
let counted = 0;
for (let i = 0; i < Math.min(nframes, frames.inputs.length); i++) {
  const e = await m.profile('encode_step', Float32Array.from(frames.inputs[i]));
  const d = await m.profile('decode_step', BigInt64Array.from(frames.codes[i].map(BigInt)));
  if (i < 2) continue; // warm-up, as mimi_compare.mjs
  counted++;
  for (const [meth, p] of [['encode_step', e], ['decode_step', d]])
    for (const op of p.ops) {
      if (opsList[meth][op.index]?.name !== op.name) throw new Error(`${meth} op ${op.index}: ${op.name} in the runtime, not ${opsList[meth][op.index]?.name} in mimi_ops.json`);
      const k = `${meth} ${op.name}`;
      kinds.set(k, (kinds.get(k) ?? 0) + op.ms);
      if (op.name.startsWith('conv')) per.set(`${meth}:${op.index}`, [...(per.get(`${meth}:${op.index}`) ?? []), op.ms]);
    }
}
m.dispose();
console.log(`${wasm}, ${counted} frames: ms per frame by op kind (top 14)`);
[...kinds].sort((a, b) => b[1] - a[1]).slice(0, 14).forEach(([k, v]) => console.log(`  ${k}: ${(v / counted).toFixed(2)}`));
console.log('conv ops: method op x w -> y | median ms | GFLOP/s');
let convSum = 0;
for (const [key, v] of per) {
  const [meth, idx] = key.split(':');
  const op = opsList[meth][Number(idx)];
  const [x, w] = op.ins, y = op.outs[0], ms = v.sort((p, q) => p - q)[v.length >> 1];
  let flop;
  if (op.name === 'conv_transpose') flop = 2 * w[1] * w[2] * x[2] * w[0]; // [groups, Og·k, Cg] x positions
  else flop = 2 * y[1] * y.slice(2).reduce((a, b) => a * b, 1) * w.slice(1).reduce((a, b) => a * b, 1);
  convSum += ms;
  console.log(`  ${meth} ${op.name} ${JSON.stringify(x)} ${JSON.stringify(w)} -> ${JSON.stringify(y)} | ${ms.toFixed(3)} | ${(flop / ms / 1e6).toFixed(1)}`);
}
console.log(`conv family, sum of the medians: ${convSum.toFixed(2)} ms per frame`);
