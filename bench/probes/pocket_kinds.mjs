// pocket_kinds.mjs — pocket-tts' `step` and `decode` (bench/models/pocket.py's DIR/NAME.tandem) op by op on
// one wasm thread (the default runtime, or WASM): after the prompt and two frames, `rounds` frames are
// profiled (model.profile) and each op's minimum over them kept (a preempted op only makes one round
// slower); printed per method: ms summed by op kind, its share, and the bytes written by that kind per
// call, then the slowest single ops with their shapes (from DIR/NAME_ops.json when present); and each
// call's unprofiled wall time over the same frames (median, min) beside the sum of its ops' minima.
//
//   node --experimental-wasm-relaxed-simd bench/probes/pocket_kinds.mjs DIR [NAME = pocket_int8] [rounds = 6] [wasm]
import { existsSync, readFileSync } from 'node:fs';
import { load, Tensor } from '../../node/index.js';

const [DIR] = process.argv.slice(2, 3);
const NAME = process.argv[3] ?? 'pocket_int8', ROUNDS = Number(process.argv[4] ?? 6), WASM = process.argv[5];
const frames = JSON.parse(readFileSync(`${DIR}/pocket_frames.json`, 'utf8'));
const listing = existsSync(`${DIR}/${NAME}_ops.json`) ? JSON.parse(readFileSync(`${DIR}/${NAME}_ops.json`, 'utf8')) : null;
const m = await load(`${DIR}/${NAME}.tandem`, { threads: 1, ...(WASM ? { wasm: WASM } : {}) });
const ldim = frames.emb_std.length;
await m.resetState();
await m.prompt(new Tensor('int64', frames.prompt, [1, frames.prompt.length]));
const best = { step: null, decode: null };
let x = new Float32Array(ldim).fill(NaN);
for (let i = 0; i < ROUNDS + 2; i++) {
  const scaled = Float32Array.from(frames.latents[i].map((v, j) => v * frames.emb_std[j] + frames.emb_mean[j]));
  const calls = { step: await m.profile('step', x), decode: await m.profile('decode', scaled) };
  await m.advance();
  x = Float32Array.from(frames.latents[i]);
  if (i < 2) continue;
  for (const [meth, p] of Object.entries(calls)) {
    if (!best[meth]) best[meth] = p.ops.map((o) => ({ ...o }));
    else p.ops.forEach((o, k) => { best[meth][k].ms = Math.min(best[meth][k].ms, o.ms); });
  }
}
// then the same frames unprofiled: each call's wall time (median), against the sum of its ops' minima
// above: what a call costs beyond its ops (binding the call's shapes at the new offset, inputs, outputs)
await m.resetState();
await m.prompt(new Tensor('int64', frames.prompt, [1, frames.prompt.length]));
const wall = { step: [], decode: [], advance: [] };
x = new Float32Array(ldim).fill(NaN);
for (let i = 0; i < ROUNDS + 2; i++) {
  const scaled = Float32Array.from(frames.latents[i].map((v, j) => v * frames.emb_std[j] + frames.emb_mean[j]));
  const t0 = performance.now();
  await m.step(x);
  const t1 = performance.now();
  await m.decode(scaled);
  const t2 = performance.now();
  await m.advance();
  const t3 = performance.now();
  x = Float32Array.from(frames.latents[i]);
  if (i < 2) continue;
  wall.step.push(t1 - t0); wall.decode.push(t2 - t1); wall.advance.push(t3 - t2);
}
const median = (a) => [...a].sort((u, v) => u - v)[a.length >> 1];
for (const [meth, ops] of Object.entries(best)) {
  const total = ops.reduce((a, o) => a + o.ms, 0);
  const kinds = {};
  for (const o of ops) {
    const k = (kinds[o.name] ??= { ms: 0, n: 0, bytes: 0 });
    k.ms += o.ms; k.n++; k.bytes += o.bytesWritten;
  }
  console.log(`${meth}: ${total.toFixed(2)} ms (sum of per-op minima over ${ROUNDS} frames), ${ops.length} ops; ` +
    `unprofiled call median ${median(wall[meth]).toFixed(2)} ms (min ${Math.min(...wall[meth]).toFixed(2)})` +
    (meth === 'decode' ? `, then advance ${median(wall.advance).toFixed(3)} ms` : ''));
  for (const [name, k] of Object.entries(kinds).sort((a, b) => b[1].ms - a[1].ms)) {
    const share = (100 * k.ms / total).toFixed(1).padStart(5);
    console.log(`  ${name.padEnd(26)} ${k.ms.toFixed(3).padStart(8)} ms ${share}%  ${String(k.n).padStart(4)} ops  ` +
      `${(k.bytes / 1024).toFixed(0).padStart(7)} KiB`);
  }
  console.log('  slowest ops:');
  for (const o of [...ops].sort((a, b) => b.ms - a.ms).slice(0, 14)) {
    const shapes = listing?.[meth]?.[o.index];
    const io = shapes ? `${JSON.stringify(shapes.ins)} -> ${JSON.stringify(shapes.outs)}` : '';
    console.log(`    #${o.index} ${o.name} ${o.ms.toFixed(3)} ms ${io}`);
  }
}
