// npm run bench, pocket-tts rows (TANDEM_BENCH=pocket): the full-size pocket-tts exported by
// bench/models/pocket.py (float32, and its quantize="int8" twin when DIR/pocket_int8.tandem exists), run in
// wasm (Node) on 1 and 2 threads over the frames the package's eager torch generated (the prompt,
// then per frame: step, decode of the de-normalized latent, advance). The two exports run
// interleaved frame by frame, so a busy machine slows both alike: their ratio is what to read. Each
// is checked against the package's latents (max |diff|, SNR) and audio (max |diff|, SNR), and printed
// beside the package's eager torch on one thread (timed by bench/models/pocket.py in the same run).
// Each row ends with the minute's FMA and DRAM read rates (bench/suite/machine.mjs).
// Usage: node bench/suite/pocket.mjs build/bench.
import { existsSync, readFileSync } from 'node:fs';
import { load, Tensor } from '../../node/index.js';
import { machine } from './machine.mjs';

const DIR = process.argv[2] ?? 'build/bench';
const frames = JSON.parse(readFileSync(`${DIR}/pocket_frames.json`, 'utf8'));
const eager = JSON.parse(readFileSync(`${DIR}/pocket_eager.json`, 'utf8'));
const f = (x, d = 1) => x.toFixed(d);
const eagerMs = eager.step_ms + eager.decode_ms;
const ldim = frames.emb_std.length;
const variants = ['float32', 'int8', 'int8i16'].filter((v) => v === 'float32' || existsSync(`${DIR}/pocket_${v}.tandem`));
const minute = await machine(DIR);
const file = (v) => `${DIR}/pocket${v === 'float32' ? '' : '_' + v}.tandem`;

async function frame(m, i, x, acc) {
  const t0 = performance.now();
  const [latent, eos] = await m.step(x);
  const t1 = performance.now();
  const scaled = frames.latents[i].map((v, j) => v * frames.emb_std[j] + frames.emb_mean[j]); // the package's latent
  const audio = await m.decode(Float32Array.from(scaled));
  await m.advance();
  const t2 = performance.now();
  if (i >= 2) { acc.lm += t1 - t0; acc.dec += t2 - t1; acc.n++; }
  latent.data.forEach((v, j) => {
    const w = frames.latents[i][j];
    acc.lat = Math.max(acc.lat, Math.abs(v - w));
    acc.latSig += w * w;
    acc.latErr += (v - w) * (v - w);
  });
  audio.data.forEach((v, j) => {
    const w = frames.audio[i][j];
    acc.audio = Math.max(acc.audio, Math.abs(v - w));
    acc.sig += w * w;
    acc.err += (v - w) * (v - w);
  });
  if (Boolean(eos.data[0]) !== frames.eos[i]) acc.eos++;
}

for (const threads of [1, 2]) {
  const limits = await minute(threads);
  const models = [];
  for (const v of variants) {
    const m = await load(file(v), { threads });
    await m.resetState();
    await m.prompt(new Tensor('int64', frames.prompt, [1, frames.prompt.length]));
    models.push(m);
  }
  const acc = models.map(() => ({ lm: 0, dec: 0, n: 0, lat: 0, latSig: 0, latErr: 0, audio: 0, sig: 0, err: 0, eos: 0 }));
  const n = frames.latents.length;
  let x = new Float32Array(ldim).fill(NaN);
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < models.length; k++) await frame(models[k], i, x, acc[k]);
    x = Float32Array.from(frames.latents[i]); // the package's latent: every run sees the same input
  }
  const total = acc.map((s) => (s.lm + s.dec) / s.n);
  variants.forEach((v, k) => {
    const s = acc[k];
    const snr = 10 * Math.log10(s.sig / Math.max(s.err, 1e-30));
    const latSnr = 10 * Math.log10(s.latSig / Math.max(s.latErr, 1e-30));
    const vs = k > 0 ? `, ${f(total[k] / total[0], 2)}× float32's time in the same run` : '';
    console.log(`| pocket-tts 4.0.1 (english.yaml, full size, temperature 0), ${v} | step + decode + advance of one 80 ms frame, ` +
      `${threads} thread${threads > 1 ? 's' : ''}, ${models[k].simd} (ms) | ${f(s.lm / s.n)} + ${f(s.dec / s.n)} = ${f(total[k])} | ` +
      `pocket-tts eager torch 1 thread ${f(eager.step_ms)} + ${f(eager.decode_ms)} = ${f(eagerMs)} | ` +
      `${f(total[k] / eagerMs, 2)}× eager's time${vs}, ${f(80 / total[k], 2)}× real time | ` +
      `latent max |diff| ${s.lat.toExponential(1)}, SNR ${f(latSnr)} dB, ` +
      `audio max |diff| ${s.audio.toExponential(1)}, SNR ${f(snr)} dB, is_eos differing ${s.eos}/${n}; ${limits} |`);
  });
  models.forEach((m) => m.dispose());
}
