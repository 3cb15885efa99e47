// npm run bench, pocket-tts rows (TANDEM_BENCH=pocket): the full-size pocket-tts exported by
// bench/models/pocket.py, run in wasm (Node) on 1 and 2 threads over the frames the package's eager torch
// generated (the prompt, then per frame: step, decode of the de-normalized latent, advance), its
// latents and audio checked against the package's, printed beside the package's eager torch on one
// thread (timed by bench/models/pocket.py in the same run). Usage: node bench/suite/pocket.mjs build/bench.
import { readFileSync } from 'node:fs';
import { load, Tensor } from '../../node/index.js';

const DIR = process.argv[2] ?? 'build/bench';
const frames = JSON.parse(readFileSync(`${DIR}/pocket_frames.json`, 'utf8'));
const eager = JSON.parse(readFileSync(`${DIR}/pocket_eager.json`, 'utf8'));
const f = (x, d = 1) => x.toFixed(d);
const eagerMs = eager.step_ms + eager.decode_ms;
const ldim = frames.emb_std.length;

for (const threads of [1, 2]) {
  const m = await load(`${DIR}/pocket.tandem`, { threads });
  await m.resetState();
  await m.prompt(new Tensor('int64', frames.prompt, [1, frames.prompt.length]));
  let x = new Float32Array(ldim).fill(NaN);
  let lmMs = 0, decMs = 0, latDiff = 0, audioDiff = 0, eosMiss = 0;
  const n = frames.latents.length;
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const [latent, eos] = await m.step(x);
    const t1 = performance.now();
    const scaled = latent.data.map((v, j) => v * frames.emb_std[j] + frames.emb_mean[j]);
    const audio = await m.decode(scaled);
    await m.advance();
    const t2 = performance.now();
    if (i >= 2) { lmMs += t1 - t0; decMs += t2 - t1; }
    latent.data.forEach((v, j) => { latDiff = Math.max(latDiff, Math.abs(v - frames.latents[i][j])); });
    audio.data.forEach((v, j) => { audioDiff = Math.max(audioDiff, Math.abs(v - frames.audio[i][j])); });
    if (Boolean(eos.data[0]) !== frames.eos[i]) eosMiss++;
    x = Float32Array.from(frames.latents[i]); // the package's latent: both runs see the same input
  }
  const k = n - 2, total = (lmMs + decMs) / k;
  console.log(`| pocket-tts 4.0.1 (english.yaml, full size, temperature 0) | step + decode + advance of one 80 ms frame, ` +
    `${threads} thread${threads > 1 ? 's' : ''} (ms) | ${f(lmMs / k)} + ${f(decMs / k)} = ${f(total)} | ` +
    `pocket-tts eager torch 1 thread ${f(eager.step_ms)} + ${f(eager.decode_ms)} = ${f(eagerMs)} | ` +
    `${f(total / eagerMs, 2)}× eager's time, ${f(80 / total, 2)}× real time | latent max |diff| ${latDiff.toExponential(1)}, ` +
    `audio max |diff| ${audioDiff.toExponential(1)}, is_eos differing ${eosMiss}/${n} |`);
  m.dispose();
}
