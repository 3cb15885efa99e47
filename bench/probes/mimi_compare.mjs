// Two exports of Mimi side by side in one run (bench/models/mimi.py's output directories, each optionally
// with its own runtime build in DIR/web/tandem.wasm and tandem-mt.wasm): frames alternate between
// them, so a busy machine slows both alike; ratios are what to read. Codes and pcm are checked
// against moshi's as in bench/suite/mimi.mjs. Usage: node bench/probes/mimi_compare.mjs BEFORE_DIR AFTER_DIR [rounds = 3].
import { existsSync, readFileSync } from 'node:fs';
import { load } from '../../node/index.js';

const [dirA, dirB] = [process.argv[2], process.argv[3]];
const rounds = Number(process.argv[4] ?? 3);
const f = (x, d = 1) => x.toFixed(d);

async function open(dir, threads) {
  const opts = { threads };
  if (existsSync(`${dir}/web/tandem.wasm`)) opts.wasm = `${dir}/web/tandem.wasm`;
  if (existsSync(`${dir}/web/tandem-mt.wasm`)) opts.wasmThreads = `${dir}/web/tandem-mt.wasm`;
  const m = await load(`${dir}/mimi.tandem`, opts);
  await m.resetState();
  return m;
}

async function step(m, frames, i, acc) {
  const x = Float32Array.from(frames.inputs[i]);
  const t0 = performance.now();
  const c = await m.encode_step(x);
  const t1 = performance.now();
  const y = await m.decode_step(BigInt64Array.from(frames.codes[i].map(BigInt)));
  const t2 = performance.now();
  if (i >= (frames.warmup ?? 2)) { acc.enc += t1 - t0; acc.dec += t2 - t1; acc.n++; }
  c.data.forEach((v, j) => { if (Number(v) !== frames.codes[i][j]) acc.miss++; });
  y.data.forEach((v, j) => { acc.pcm = Math.max(acc.pcm, Math.abs(v - frames.pcm[i][j])); });
}

const frames = JSON.parse(readFileSync(`${dirB}/mimi_frames.json`, 'utf8'));
const eager = JSON.parse(readFileSync(`${dirB}/mimi_eager.json`, 'utf8'));
const eagerMs = `${f(eager.encode_ms)} + ${f(eager.decode_ms)} = ${f(eager.encode_ms + eager.decode_ms)} ms`;
console.log(`moshi eager torch 1 thread (bench/models/mimi.py, ${dirB}): ${eagerMs}`);
for (const threads of [1, 2]) {
  const [a, b] = [await open(dirA, threads), await open(dirB, threads)];
  const acc = [a, b].map(() => ({ enc: 0, dec: 0, n: 0, miss: 0, pcm: 0 }));
  for (let r = 0; r < rounds; r++) {
    await a.resetState();
    await b.resetState();
    for (let i = 0; i < frames.inputs.length; i++) {
      await step(a, frames, i, acc[0]);
      await step(b, frames, i, acc[1]);
    }
  }
  [dirA, dirB].forEach((d, k) => {
    const s = acc[k], t = (s.enc + s.dec) / s.n;
    console.log(`${d}, ${threads} thread${threads > 1 ? 's' : ''}: ${f(s.enc / s.n)} + ${f(s.dec / s.n)} = ${f(t)} ms per frame; ` +
      `codes differing ${s.miss}, pcm max |diff| ${s.pcm.toExponential(1)}`);
  });
  a.dispose(); b.dispose();
}
