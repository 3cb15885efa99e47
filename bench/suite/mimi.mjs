// npm run bench, Mimi rows (TANDEM_BENCH=mimi): the full-size Mimi exported by bench/models/mimi.py, run in
// wasm (Node) on 1 and 2 threads over the frames moshi's eager torch ran, its codes and audio checked
// against moshi's, printed beside moshi's eager torch on one thread (timed by bench/models/mimi.py in the
// same run). Usage: node bench/suite/mimi.mjs build/bench. Prints table rows: float32 (mimi.tandem), then,
// where bench/models/mimi.py exported them, int8 linear weights (mimi_int8.tandem) and those with the 1-2
// position convs' weights bfloat16 (mimi_int8bf16.tandem, quantize_convs="bf16") and those with the 3-128
// position convs on 16-bit integers too (mimi_int8i16.tandem, quantize_convs="int16"), whose check column gives
// the codes that differ from moshi's and the decoded pcm's SNR against moshi's (decoding moshi's codes).
// The time is the mean over the timed frames (those after the `warmup` frames that fill moshi's attention
// context, bench/models/mimi.py), and beside it the median frame (this shared machine's
// neighbours make single frames several times slower at random; eager's time is a mean too).
import { existsSync, readFileSync } from 'node:fs';
import { load } from '../../node/index.js';
import { machine } from './machine.mjs';

const DIR = process.argv[2] ?? 'build/bench';
const frames = JSON.parse(readFileSync(`${DIR}/mimi_frames.json`, 'utf8'));
const eager = JSON.parse(readFileSync(`${DIR}/mimi_eager.json`, 'utf8'));
const f = (x, d = 1) => x.toFixed(d);
const eagerMs = eager.encode_ms + eager.decode_ms;
const warmup = frames.warmup ?? 2;

// The minute's FMA rate and DRAM read rate (bench/suite/machine.mjs), printed in each row.
const minute = await machine(DIR);

const variants = [['mimi', ''], ['mimi_int8', ', int8 linear weights'],
  ['mimi_int8bf16', ', int8 linear weights, bfloat16 streaming convs'],
  ['mimi_int8i16', ', int8 linear weights, int16 convs at 3-128 positions, bfloat16 at 1-2']]
  .filter(([name]) => existsSync(`${DIR}/${name}.tandem`));
for (const [name, label] of variants) for (const threads of [1, 2]) {
  const limits = await minute(threads);
  const m = await load(`${DIR}/${name}.tandem`, { threads });
  await m.resetState();
  let enc = 0, dec = 0, codeMiss = 0, pcmDiff = 0, sig = 0, noise = 0;
  const perFrame = [];
  const n = frames.inputs.length;
  for (let i = 0; i < n; i++) {
    const x = Float32Array.from(frames.inputs[i]);
    const t0 = performance.now();
    const c = await m.encode_step(x);
    const t1 = performance.now();
    const codes = BigInt64Array.from(frames.codes[i].map(BigInt)); // moshi's codes: both decoders see the same input
    const y = await m.decode_step(codes);
    const t2 = performance.now();
    if (i >= warmup) { enc += t1 - t0; dec += t2 - t1; perFrame.push(t2 - t0); }
    c.data.forEach((v, j) => { if (Number(v) !== frames.codes[i][j]) codeMiss++; });
    y.data.forEach((v, j) => {
      const d = v - frames.pcm[i][j];
      pcmDiff = Math.max(pcmDiff, Math.abs(d));
      sig += frames.pcm[i][j] ** 2;
      noise += d * d;
    });
  }
  const k = n - warmup, total = (enc + dec) / k, median = perFrame.sort((a, b) => a - b)[perFrame.length >> 1];
  const snr = noise > 0 ? `${f(10 * Math.log10(sig / noise))} dB` : 'exact';
  console.log(`| Mimi (moshi 0.2.13, full size${label}) | encode_step + decode_step of one 80 ms frame, ${threads} ` +
    `thread${threads > 1 ? 's' : ''}, ${m.simd} (ms) | ` +
    `${f(enc / k)} + ${f(dec / k)} = ${f(total)} (median frame ${f(median)}) | ` +
    `moshi eager torch 1 thread ${f(eager.encode_ms)} + ${f(eager.decode_ms)} = ` +
    `${f(eagerMs)} | ` +
    `${f(total / eagerMs, 2)}× eager's time, ${f(80 / total, 2)}× real time | codes differing ` +
    `${codeMiss}/${frames.codes.length * frames.codes[0].length}, ` +
    `pcm max |diff| ${pcmDiff.toExponential(1)}, SNR ${snr}; ${limits} |`);
  m.dispose();
}
