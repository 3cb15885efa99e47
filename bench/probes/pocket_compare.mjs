// pocket_compare.mjs — one pocket-tts export (bench/models/pocket.py's DIR/NAME.tandem, default
// pocket_int8) on two runtimes side by side, one thread, frames alternating between them so that a
// busy machine slows both alike (the ratios are what to read; which goes first alternates); step (the flow LM) and decode +
// advance (the Mimi decoder) timed apart, the latents and audio checked against the package's.
//
//   node bench/probes/pocket_compare.mjs DIR BEFORE.wasm AFTER.wasm [NAME = pocket_int8] [rounds = 2]
import { readFileSync } from 'node:fs';
import { load, Tensor } from '../../node/index.js';

const [DIR, A, B] = process.argv.slice(2, 5);
const NAME = process.argv[5] ?? 'pocket_int8', ROUNDS = Number(process.argv[6] ?? 2);
const frames = JSON.parse(readFileSync(`${DIR}/pocket_frames.json`, 'utf8'));
const ldim = frames.emb_std.length;
const runtimes = [A, B];
const models = [];
for (const wasm of runtimes) models.push(await load(`${DIR}/${NAME}.tandem`, { threads: 1, wasm }));
const acc = runtimes.map(() => ({ lm: 0, dec: 0, n: 0, lat: 0, audio: 0, frames: [] }));
for (let r = 0; r < ROUNDS; r++) {
  for (const m of models) {
    await m.resetState();
    await m.prompt(new Tensor('int64', frames.prompt, [1, frames.prompt.length]));
  }
  let x = new Float32Array(ldim).fill(NaN);
  for (let i = 0; i < frames.latents.length; i++) {
    for (const k of i % 2 ? [1, 0] : [0, 1]) { // either order every other frame
      const m = models[k], s = acc[k];
      const t0 = performance.now();
      const [latent] = await m.step(x);
      const t1 = performance.now();
      const audio = await m.decode(Float32Array.from(frames.latents[i].map((v, j) => v * frames.emb_std[j] + frames.emb_mean[j])));
      await m.advance();
      const t2 = performance.now();
      if (i >= 2) { s.lm += t1 - t0; s.dec += t2 - t1; s.n++; s.frames.push([t1 - t0, t2 - t1]); }
      latent.data.forEach((v, j) => { s.lat = Math.max(s.lat, Math.abs(v - frames.latents[i][j])); });
      audio.data.forEach((v, j) => { s.audio = Math.max(s.audio, Math.abs(v - frames.audio[i][j])); });
    }
    x = Float32Array.from(frames.latents[i]);
  }
}
runtimes.forEach((w, k) => {
  const s = acc[k];
  const ms = (t) => (t / s.n).toFixed(1);
  console.log(`${w}: step ${ms(s.lm)} + decode ${ms(s.dec)} = ${ms(s.lm + s.dec)} ms per frame; ` +
    `latent max |diff| ${s.lat.toExponential(1)}, audio max |diff| ${s.audio.toExponential(1)}`);
  const q = (j, f) => f(s.frames.map((t) => t[j])).toFixed(1);
  const median = (v) => v.sort((a, b) => a - b)[v.length >> 1], min = (v) => Math.min(...v);
  console.log(`  median step ${q(0, median)} + decode ${q(1, median)}; fastest step ${q(0, min)} + decode ${q(1, min)} ms`);
});
models.forEach((m) => m.dispose());
