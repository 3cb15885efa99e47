// mimi_node_profile.mjs — issue #23: Mimi's encode_step + decode_step op by op in V8 (Node), one
// thread, with two runtime builds side by side (frames alternate between them, so a busy spell of
// this shared machine hits both alike): each convolution-family op with its shapes, its median ms
// over the frames (a mean of few frames picks up other work's spikes) in each build and the ratio,
// and the GFLOP/s of the second. The op list comes from DIR/mimi_ops.json (bench/models/mimi.py).
// Usage: [THREADS=2] node --experimental-wasm-relaxed-simd bench/probes/mimi_node_profile.mjs DIR WASM_A WASM_B [frames]
import { readFileSync } from 'node:fs';
import { load } from '../../node/index.js';

const [dir, wasmA, wasmB] = process.argv.slice(2, 5);
const nframes = Number(process.argv[5] ?? 12);
const frames = JSON.parse(readFileSync(`${dir}/mimi_frames.json`, 'utf8'));
const opsList = JSON.parse(readFileSync(`${dir}/mimi_ops.json`, 'utf8'));
const models = [];
const threads = Number(process.env.THREADS ?? 1); // THREADS=2: WASM_A / WASM_B are threaded builds (tandem-mt*.wasm)
for (const wasm of [wasmA, wasmB])
  models.push(await load(`${dir}/mimi.tandem`, threads > 1 ? { wasmThreads: wasm, threads } : { wasm, threads: 1 }));
const per = [new Map(), new Map()];
for (const m of models) await m.resetState();
for (let i = 0; i < Math.min(nframes, frames.inputs.length); i++)
  for (let b = 0; b < 2; b++) {
    const e = await models[b].profile('encode_step', Float32Array.from(frames.inputs[i]));
    const d = await models[b].profile('decode_step', BigInt64Array.from(frames.codes[i].map(BigInt)));
    if (i < 2) continue; // warm-up, as mimi_compare.mjs
    for (const [meth, p] of [['encode_step', e], ['decode_step', d]])
      for (const op of p.ops) {
        const listed = opsList[meth][op.index]?.name, key = `${meth}:${op.index}`;
        if (listed !== op.name) throw new Error(`${meth} op ${op.index}: ${op.name}, not ${listed} in mimi_ops.json`);
        if (op.name.startsWith('conv')) per[b].set(key, [...(per[b].get(key) ?? []), op.ms]);
      }
  }
models.forEach((m) => m.dispose());
const median = (v) => [...v].sort((p, q) => p - q)[v.length >> 1];
console.log(`A ${wasmA}\nB ${wasmB}\nconv ops: method op x w -> y | median ms A | B | B/A | GFLOP/s B`);
const sum = [0, 0];
for (const [key, vA] of per[0]) {
  const [meth, idx] = key.split(':');
  const op = opsList[meth][Number(idx)];
  const [x, w] = op.ins, y = op.outs[0], a = median(vA), b = median(per[1].get(key));
  sum[0] += a, sum[1] += b;
  // transposed: w [groups, Og·k, Cg] times the input positions; otherwise O·positions·(C/groups·k)
  const prod = (v) => v.reduce((p, q) => p * q, 1);
  const flop = op.name === 'conv_transpose' ? 2 * w[1] * w[2] * x[2] * w[0] : 2 * y[1] * prod(y.slice(2)) * prod(w.slice(1));
  const shapes = `${JSON.stringify(x)} ${JSON.stringify(w)} -> ${JSON.stringify(y)}`;
  const gf = (flop / b / 1e6).toFixed(1);
  console.log(`  ${meth} ${op.name} ${shapes} | ${a.toFixed(3)} | ${b.toFixed(3)} | ${(b / a).toFixed(2)} | ${gf}`);
}
const ratio = (sum[1] / sum[0]).toFixed(2);
console.log(`conv family, sum of the medians: A ${sum[0].toFixed(2)} ms, B ${sum[1].toFixed(2)} ms per frame (${ratio}x)`);
