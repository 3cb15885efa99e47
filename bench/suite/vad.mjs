// Silero VAD on the audio demo's recording (build/demo, made by demo/build_audio.py), in Node, one
// thread: tandem on the program exported from the silero-vad package's weights (both SIMD builds)
// against onnxruntime-web on the package's shipped silero_vad.onnx, chunk by chunk with the state
// carried, the same 64 + 512-sample chunks. Checks both give the same probabilities (1e-4), then
// prints ms per chunk (median of 5 passes over the recording, the runtimes interleaved) and how
// many times faster than real time.   node --experimental-wasm-relaxed-simd bench/suite/vad.mjs
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import * as ort from 'onnxruntime-web';
import { load, Tensor } from '../../node/index.js';

const DEMO = new URL('../../build/demo/', import.meta.url);
const ONNX = execFileSync(process.env.TANDEM_PYTHON ?? `${process.env.HOME}/.cache/tandem-venv/bin/python`,
  ['-c', 'import sys; sys.path.insert(0, "demo"); import vad_model; print(vad_model.shipped_onnx_path())'], { encoding: 'utf8' }).trim();
ort.env.wasm.numThreads = 1;

const wav = readFileSync(new URL('recording.wav', DEMO));
const pcm = new Int16Array(wav.buffer.slice(wav.byteOffset + 44, wav.byteOffset + wav.length)); // build_audio.py's plain 44-byte header
const x = Float32Array.from(pcm, (v) => v / 32768);
const chunks = [];
for (let at = 0; at < x.length; at += 512) {
  const c = new Float32Array(576);
  c.set(x.subarray(Math.max(0, at - 64), at), 64 - Math.min(64, at));
  c.set(x.subarray(at, at + 512), 64);
  chunks.push(c);
}
const seconds = x.length / 16000;

async function tandemPass(model) {
  await model.reset();
  const out = [];
  for (const c of chunks) out.push((await model.forward(new Tensor('float32', c, [1, 576]))).data[0]);
  return out;
}
const session = await ort.InferenceSession.create(ONNX, { executionProviders: ['wasm'] });
const sr = new ort.Tensor('int64', new BigInt64Array([16000n]), []);
async function ortPass() {
  let state = new ort.Tensor('float32', new Float32Array(2 * 128), [2, 1, 128]);
  const out = [];
  for (const c of chunks) {
    const r = await session.run({ input: new ort.Tensor('float32', c, [1, 576]), state, sr });
    state = r.stateN;
    out.push(r.output.data[0]);
  }
  return out;
}

const models = { 'tandem (relaxed SIMD)': await load(new URL('silero_vad.tandem', DEMO), { simd: 'relaxed', threads: 1 }),
  'tandem (SIMD128)': await load(new URL('silero_vad.tandem', DEMO), { simd: 'simd128', threads: 1 }) };
const ORT = `onnxruntime-web ${ort.env.versions?.web ?? ''} (silero_vad.onnx)`;
const runs = { ...Object.fromEntries(Object.entries(models).map(([k, m]) => [k, () => tandemPass(m)])), [ORT]: ortPass };
const reference = await ortPass();
for (const [name, run] of Object.entries(runs)) {
  const got = await run();
  const worst = Math.max(...got.map((p, i) => Math.abs(p - reference[i])));
  if (!(worst < 1e-4)) throw new Error(`${name}: probabilities differ from onnxruntime-web's by ${worst}`);
}
const times = Object.fromEntries(Object.keys(runs).map((k) => [k, []]));
for (let pass = 0; pass < 5; pass++) {
  for (const [name, run] of Object.entries(runs)) {
    const t0 = performance.now();
    await run();
    times[name].push(performance.now() - t0);
  }
}
const median = (a) => [...a].sort((p, q) => p - q)[a.length >> 1];
const ortMs = median(times[ORT]);
console.log(`Silero VAD, ${chunks.length} chunks (${seconds.toFixed(2)} s of audio), Node ${process.version}, one thread`);
console.log('| runtime | ms per chunk | × real time | vs onnxruntime-web |\n|---|---|---|---|');
for (const [name, t] of Object.entries(times)) {
  const ms = median(t);
  console.log(`| ${name} | ${(ms / chunks.length).toFixed(3)} | ${((seconds * 1000) / ms).toFixed(0)} | ${(ortMs / ms).toFixed(2)}× |`);
}
Object.values(models).forEach((m) => m.dispose());
