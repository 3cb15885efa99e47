// npm run bench, field-peers rows (TANDEM_BENCH=field-peers): tandem against onnxruntime-web (wasm EP), the
// route the community ports of Kyutai's models take, in one Node process on the same weights, frame by frame
// interleaved (the two alternate which runs first), on THREADS threads (onnxruntime-web's count is fixed per
// process: bench/suite/run.sh runs this once per count). The rows: Mimi's encode and decode steps of an 80 ms
// frame (bench/models/mimi.py: mimi[_int8].tandem, mimi_{encode,decode}[_int8].onnx, timed after the frames
// that fill the attention context), pocket-tts' LM step + decode (bench/models/pocket.py: pocket[_int8].tandem,
// pocket_{step,decode}[_int8].onnx from the state after the prompt) and the Kyutai STT step, Mimi encode +
// LMGen.step (bench/models/stt.py: stt_{float32,int8}.tandem, stt_step[_int8].onnx). Each ONNX file holds one
// step with its state as inputs and outputs (bench/models/onnx_state.py; its float32 export is checked against
// eager before this runs), int8 by onnxruntime's quantize_dynamic of the MatMuls; tandem's int8 is
// quantize="int8" (linear layers). Each side's outputs are checked against eager's frames here too.
// Prints a table row per model, precision and runtime (mean and median frame, real-time factor, check),
// then one line per row: `field-peers ROW: tandem A ms, onnxruntime-web B ms (THREADS, PRECISION), ratio R`.
// Usage: node bench/suite/peers.mjs DIR [THREADS = 1] [PRECISIONS = float32,int8].
import { existsSync, readFileSync } from 'node:fs';
import * as ort from 'onnxruntime-web';
import { load, Tensor } from '../../node/index.js';

const DIR = process.argv[2] ?? 'build/bench/peers';
const T = Number(process.argv[3] ?? 1);
const PRECISIONS = (process.argv[4] ?? 'float32,int8').split(',');
ort.env.wasm.numThreads = T;
const THREADS = `${T} thread${T > 1 ? 's' : ''}`;
const f = (x, d = 1) => x.toFixed(d);
const json = (name) => JSON.parse(readFileSync(`${DIR}/${name}`, 'utf8'));
const ARRAYS = { float32: Float32Array, int64: BigInt64Array, bool: Uint8Array };

/** One ONNX step with its state (bench/models/onnx_state.py's NAME.onnx, .json, .state): call(...inputs)
 * runs it from where the last call left the state and returns its outputs' data. */
async function ortStep(name) {
  const info = json(`${name}.json`);
  const raw = readFileSync(`${DIR}/${name}.state`);
  const session = await ort.InferenceSession.create(`${DIR}/${name}.onnx`, { executionProviders: ['wasm'] });
  let state = {};
  const reset = () => {
    state = Object.fromEntries(info.state.map((s) => {
      const A = ARRAYS[s.dtype], n = s.shape.reduce((a, b) => a * b, 1);
      const data = new A(raw.buffer.slice(raw.byteOffset + s.offset, raw.byteOffset + s.offset + n * A.BYTES_PER_ELEMENT));
      return [s.name, new ort.Tensor(s.dtype, data, s.shape)];
    }));
  };
  reset();
  return {
    reset,
    release: () => session.release(),
    async call(...inputs) {
      const feeds = { ...state };
      info.inputs.forEach((d, i) => { feeds[d.name] = new ort.Tensor(d.dtype, inputs[i], d.shape); });
      const out = await session.run(feeds);
      state = Object.fromEntries(info.state.map((s) => [s.name, out[`${s.name}_out`]]));
      return info.outputs.map((o) => out[o].data);
    },
  };
}

/** Mean and median of the frames' times after `warm` frames. */
const stats = (times, warm) => {
  const t = times.slice(warm), sorted = [...t].sort((a, b) => a - b);
  return { mean: t.reduce((a, b) => a + b, 0) / t.length, median: sorted[t.length >> 1] };
};
/** Signal-to-noise ratio (dB) of got against want, accumulated over frames in acc. */
const snr = (acc, got, want) => {
  for (let j = 0; j < want.length; j++) { acc.sig += want[j] ** 2; acc.err += (got[j] - want[j]) ** 2; }
};
const db = (acc) => (acc.err > 0 ? `${f(10 * Math.log10(acc.sig / acc.err))} dB` : 'exact');

/** Runs frame(i, side) for every frame, tandem and onnxruntime-web alternating which goes first; each call
 * returns { ms: { part: time } }. Returns per side and part the list of frame times. On more than one
 * thread each call starts after IDLE_MS untimed, as a stream's frames arrive 80 ms apart: back to back,
 * the other runtime's workers, still spinning after its call (onnxruntime-web's spin after each run),
 * held a core through this one's frame. */
const IDLE_MS = 20;
async function interleave(n, frame) {
  const times = { tandem: {}, ort: {} };
  for (let i = 0; i < n; i++) {
    for (const side of i % 2 ? ['ort', 'tandem'] : ['tandem', 'ort']) {
      if (T > 1) await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
      const { ms } = await frame(i, side);
      for (const [part, t] of Object.entries(ms)) (times[side][part] ??= []).push(t);
    }
  }
  return times;
}

const rows = [], lines = [];
function report(row, precision, model, tMs, oMs, checks) {
  rows.push(`| ${model}, ${precision} | ${row}, ${THREADS} | tandem ${f(tMs.mean)} (median ${f(tMs.median)}), ` +
    `${f(80 / tMs.mean, 2)}× real time | onnxruntime-web ${f(oMs.mean)} (median ${f(oMs.median)}), ` +
    `${f(80 / oMs.mean, 2)}× real time | ${f(tMs.mean / oMs.mean, 2)}× | ${checks} |`);
  lines.push(`field-peers ${row}: tandem ${f(tMs.mean)} ms, onnxruntime-web ${f(oMs.mean)} ms (${THREADS}, ${precision}), ` +
    `ratio ${f(tMs.mean / oMs.mean, 2)}`);
}
const suffix = (p) => (p === 'float32' ? '' : `_${p}`);

// ---- Mimi: encode_step and decode_step of one 80 ms frame (moshi's codes into both decoders) -----------
if (existsSync(`${DIR}/mimi_frames.json`)) {
  const frames = json('mimi_frames.json');
  const warm = frames.warmup ?? 2;
  for (const p of PRECISIONS) {
    if (!existsSync(`${DIR}/mimi${suffix(p)}.tandem`) || !existsSync(`${DIR}/mimi_encode${suffix(p)}.onnx`)) continue;
    const m = await load(`${DIR}/mimi${suffix(p)}.tandem`, { threads: T });
    await m.resetState();
    const enc = await ortStep(`mimi_encode${suffix(p)}`), dec = await ortStep(`mimi_decode${suffix(p)}`);
    const check = { tandem: { miss: 0, sig: 0, err: 0 }, ort: { miss: 0, sig: 0, err: 0 } };
    const times = await interleave(frames.inputs.length, async (i, side) => {
      const x = Float32Array.from(frames.inputs[i]), codes = BigInt64Array.from(frames.codes[i].map(BigInt));
      const t0 = performance.now();
      const c = side === 'tandem' ? (await m.encode_step(x)).data : (await enc.call(x))[0];
      const t1 = performance.now();
      const y = side === 'tandem' ? (await m.decode_step(codes)).data : (await dec.call(codes))[0];
      const t2 = performance.now();
      c.forEach((v, j) => { if (Number(v) !== frames.codes[i][j]) check[side].miss++; });
      snr(check[side], y, frames.pcm[i]);
      return { ms: { encode: t1 - t0, decode: t2 - t1, both: t2 - t0 } };
    });
    const total = frames.codes.length * frames.codes[0].length;
    const text = `codes differing from moshi's: tandem ${check.tandem.miss}/${total}, ort ${check.ort.miss}/${total}; ` +
      `pcm SNR against moshi's: tandem ${db(check.tandem)}, ort ${db(check.ort)}`;
    const model = 'Mimi (moshi 0.2.13, full size)';
    for (const [row, part] of [['mimi-encode', 'encode'], ['mimi-decode', 'decode'], ['mimi', 'both']])
      report(row, p, model, stats(times.tandem[part], warm), stats(times.ort[part], warm), text);
    m.dispose();
    await enc.release();
    await dec.release();
  }
}

// ---- pocket-tts: LM step + decode (+ advance) of one generated 80 ms frame, after the prompt ------------
if (existsSync(`${DIR}/pocket_frames.json`)) {
  const frames = json('pocket_frames.json');
  const ldim = frames.emb_std.length;
  for (const p of PRECISIONS) {
    if (!existsSync(`${DIR}/pocket${suffix(p)}.tandem`) || !existsSync(`${DIR}/pocket_step${suffix(p)}.onnx`)) continue;
    const m = await load(`${DIR}/pocket${suffix(p)}.tandem`, { threads: T });
    await m.resetState();
    await m.prompt(new Tensor('int64', frames.prompt, [1, frames.prompt.length]));
    const step = await ortStep(`pocket_step${suffix(p)}`), dec = await ortStep(`pocket_decode${suffix(p)}`);
    const check = { tandem: { sig: 0, err: 0, eos: 0 }, ort: { sig: 0, err: 0, eos: 0 } };
    const lat = { tandem: { sig: 0, err: 0 }, ort: { sig: 0, err: 0 } };
    const times = await interleave(frames.latents.length, async (i, side) => {
      const x = i === 0 ? new Float32Array(ldim).fill(NaN) : Float32Array.from(frames.latents[i - 1]); // the package's latents in
      const scaled = Float32Array.from(frames.latents[i], (v, j) => v * frames.emb_std[j] + frames.emb_mean[j]);
      const t0 = performance.now();
      let latent, eos, audio;
      if (side === 'tandem') {
        const [l, e] = await m.step(x);
        [latent, eos] = [l.data, e.data];
        audio = (await m.decode(scaled)).data;
        await m.advance();
      } else {
        [latent, eos] = await step.call(x);
        [audio] = await dec.call(scaled);
      }
      const t1 = performance.now();
      snr(lat[side], latent, frames.latents[i]);
      snr(check[side], audio, frames.audio[i]);
      if (Boolean(eos[0]) !== frames.eos[i]) check[side].eos++;
      return { ms: { frame: t1 - t0 } };
    });
    const text = `latent SNR against pocket-tts': tandem ${db(lat.tandem)}, ort ${db(lat.ort)}; audio SNR: ` +
      `tandem ${db(check.tandem)}, ort ${db(check.ort)}; is_eos differing: tandem ${check.tandem.eos}, ort ${check.ort.eos}`;
    report('pocket-tts', p, 'pocket-tts 4.0.1 (english.yaml, full size, temperature 0)',
      stats(times.tandem.frame, 2), stats(times.ort.frame, 2), text);
    m.dispose();
    await step.release();
    await dec.release();
  }
}

// ---- Kyutai STT: Mimi encode + LMGen.step of one 80 ms frame ---------------------------------------------
if (existsSync(`${DIR}/stt_frames.json`)) {
  const { inputs } = json('stt_frames.json');
  const eager = existsSync(`${DIR}/stt_float32.json`) ? json('stt_float32.json') : null;
  for (const p of PRECISIONS) {
    if (!existsSync(`${DIR}/stt_${p}.tandem`) || !existsSync(`${DIR}/stt_step${suffix(p)}.onnx`)) continue;
    const ref = json(`stt_${p}.json`);
    const m = await load(`${DIR}/stt_${p}.tandem`, { threads: T });
    await m.resetState();
    const step = await ortStep(`stt_step${suffix(p)}`);
    const same = { tandem: 0, ort: 0 }, sameF32 = { tandem: 0, ort: 0 };
    const times = await interleave(inputs.length, async (i, side) => {
      const x = Float32Array.from(inputs[i]);
      const t0 = performance.now();
      const tok = side === 'tandem' ? (await m.step(x)).data : (await step.call(x))[0];
      const t1 = performance.now();
      if (Number(tok[0]) === ref.tokens[i]) same[side]++;
      if (eager && Number(tok[0]) === eager.tokens[i]) sameF32[side]++;
      return { ms: { frame: t1 - t0 } };
    });
    const n = inputs.length;
    const text = `greedy tokens equal to moshi eager at ${p === 'float32' ? 'float32' : `${p} (tandem's quantized weights)`}: ` +
      `tandem ${same.tandem}/${n}, ort ${same.ort}/${n}` +
      (p !== 'float32' && eager ? `; to float32 eager: tandem ${sameF32.tandem}/${n}, ort ${sameF32.ort}/${n}` : '');
    report('stt', p, `Kyutai STT (${f(ref.params / 1e6, 1)} M parameters)`, stats(times.tandem.frame, 2), stats(times.ort.frame, 2), text);
    m.dispose();
    await step.release();
  }
}

console.log('| model, precision | work, threads | tandem ms per frame | onnxruntime-web ms per frame | tandem / ort | check |');
console.log('|---|---|---|---|---|---|');
for (const r of rows) console.log(r);
for (const l of lines) console.log(l);
