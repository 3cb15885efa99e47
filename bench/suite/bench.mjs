// npm run bench: tandem against onnxruntime-web and TF.js (wasm backend), in Node, single thread,
// on the same work in the same run. Every time is the median of several rounds; ratios are what
// to read (these machines are noisy). Prints a markdown table for docs/performance.md.
import { readFileSync, statSync } from 'node:fs';
import { cpus } from 'node:os';
import * as ort from 'onnxruntime-web';
import * as tf from '@tensorflow/tfjs-core';
import { setThreadsCount } from '@tensorflow/tfjs-backend-wasm';
import { load as loadAny, Tensor } from '../../node/index.js';
import { instantiateRuntime } from '../../web/loader.js';
import { compare, cpuMs } from './compare.mjs';

const DIR = process.argv[2] ?? 'build/bench';
// (func (param v128 v128 v128) (result v128) ... f32x4.relaxed_madd): whether the relaxed builds run here
const RELAXED = WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 8, 1, 96, 3, 123, 123, 123, 1, 123, 3, 2,
  1, 0, 10, 13, 1, 11, 0, 32, 0, 32, 1, 32, 2, 253, 133, 2, 11]));
// Every row here is single-threaded (the peers too); bench/suite/threads.mjs has the thread rows.
const load = (source, options) => loadAny(source, { threads: 1, ...options });
ort.env.wasm.numThreads = 1;
setThreadsCount(1);
await tf.setBackend('wasm');
await tf.ready();

const rows = [];
const row = (section, work, tandem, peer, ratio, target, met, note = '') => {
  rows.push({ section, work, tandem, peer, ratio, target, met, note });
  console.error(`${section} | ${work} | ${tandem} | ${peer} | ${ratio} | ${target} | ${met ? 'yes' : 'NO'} ${note}`);
};

const time = async (fn, opts) => (await compare({ fn }, opts)).fn;

const f = (x, d = 2) => x.toFixed(d);
const rand = (n) => Float32Array.from({ length: n }, () => Math.random() - 0.5);
const ortSession = (name) => ort.InferenceSession.create(`${DIR}/${name}.onnx`, { executionProviders: ['wasm'] });

// TANDEM_BENCH=image,codec (comma-separated) runs only those sections (bench/suite/run.sh lists them);
// unset, every section runs.
const ONLY = process.env.TANDEM_BENCH ? process.env.TANDEM_BENCH.split(',').map((x) => x.trim()) : null;
const want = (section) => !ONLY || ONLY.includes(section);
const smolProfiles = {}; // filled by the smollm section, printed op by op at the end
const smolLines = []; // the smollm section's summary, one line per fill, printed last
const chunk = rand(128 * 64); // the streaming conv block's input (conv and memory sections)

// ---- reference numbers: SIMD multiply-add peak, copy bandwidth -------------------------------
const peakX = await instantiateRuntime(await WebAssembly.compile(readFileSync(`${DIR}/peak.wasm`)));
const ITERS = 200_000;
const peakCall = async () => peakX.tdm_bench_peak(ITERS);
const gflopsOfPeak = (ms) => (ITERS * 64) / ms / 1e6;
const peakGflops = gflopsOfPeak(await time(peakCall, { rounds: 5, minMs: 100 }));
/** GB/s of memcpy inside linear memory, for buffers of `bytes` (the cache level matters). */
const copyAt = new Map();
async function copyBandwidth(bytes) {
  if (!copyAt.has(bytes)) {
    const src = peakX.tdm_bench_alloc(bytes), dst = peakX.tdm_bench_alloc(bytes);
    const ms = await time(async () => peakX.tdm_bench_copy(dst, src, bytes, 2), { rounds: 7, minMs: 100 });
    copyAt.set(bytes, (2 * bytes) / ms / 1e6);
  }
  return copyAt.get(bytes);
}
const copyGBs = await copyBandwidth(4 << 20);
/** GB/s of SIMD128 loads streaming `bytes` of linear memory (past the caches, as a GEMV's
 * weights): the best over reading it as 1, 2, 4, 8 or 16 streams side by side (bench/suite/peak.c). */
const readBy = {};
async function readBandwidth(bytes) {
  const src = peakX.tdm_bench_alloc(bytes);
  new Uint8Array(peakX.memory.buffer, src >>> 0, bytes).fill(1); // touch every page first
  const reads = Object.fromEntries([1, 2, 4, 8, 16].map((n) => [n, async () => peakX.tdm_bench_read(src, bytes, 1, n)]));
  const ms = await compare(reads, { rounds: 7, minMs: 200 });
  for (const n in ms) readBy[n] = bytes / ms[n] / 1e6;
  const best = Object.keys(readBy).reduce((a, b) => (readBy[b] > readBy[a] ? b : a));
  return { gbs: readBy[best], streams: Number(best), bytes, call: reads[best] };
}
console.error(`peak ${f(peakGflops)} GFLOP/s, copy ${f(copyGBs)} GB/s (4 MiB)`);

// ---- GEMM and GEMV: y = A @ W, W a weight (constant) ---------------------------------------
if (want('gemm')) {
  const gemm = {};
  for (const [m, n] of [[64, 64], [256, 256], [512, 512], [1024, 1024], [1, 512], [1, 2048]]) {
    const name = `mm_${m}x${n}`;
    const A = rand(m * n);
    const tm = await load(`${DIR}/${name}.tandem`, { simd: 'simd128' });
    const tr = RELAXED ? await load(`${DIR}/${name}.tandem`, { simd: 'relaxed' }) : null;
    const os = await ortSession(name);
    const W = tf.randomNormal([n, n]);
    // the multiply-add peak is measured in the same interleaved rounds, for this row's % of peak
    const { tMs, rMs, oMs, tfMs, pMs } = await compare({
      pMs: peakCall,
      tMs: () => tm.forward(A),
      ...(tr ? { rMs: () => tr.forward(A) } : {}),
      oMs: () => os.run({ A: new ort.Tensor('float32', A, [m, n]) }),
      tfMs: async () => {
        const a = tf.tensor2d(A, [m, n]);
        const y = tf.matMul(a, W);
        y.dataSync();
        a.dispose();
        y.dispose();
      },
    });
    W.dispose();
    tm.dispose();
    tr?.dispose();
    await os.release();
    gemm[name] = { tMs, rMs, oMs, tfMs, peak: gflopsOfPeak(pMs), flops: 2 * m * n * n };
  }
  for (const n of [64, 256, 512, 1024]) {
    const g = gemm[`mm_${n}x${n}`];
    const gf = (ms) => g.flops / ms / 1e6;
    const best = Math.max(gf(g.oMs), gf(g.tfMs));
    const ratio = gf(g.tMs) / best, ofPeak = gf(g.tMs) / g.peak;
    row('GEMM', `${n}³ GFLOP/s`, f(gf(g.tMs)), `ort ${f(gf(g.oMs))}, tfjs ${f(gf(g.tfMs))}`,
      `${f(ratio)}× best; ${f(100 * ofPeak, 0)}% of a ${f(g.peak, 1)} GFLOP/s peak`,
      n >= 256 ? '≥ 1.25× and ≥ 65%' : '—', n < 256 || (ratio >= 1.25 && ofPeak >= 0.65));
  }
  // The relaxed-SIMD build (fused multiply-add; the peers have no relaxed build) on the same rows.
  for (const n of [64, 256, 512, 1024]) {
    const g = gemm[`mm_${n}x${n}`];
    const gf = (ms) => g.flops / ms / 1e6;
    if (!g.rMs) {
      row('GEMM relaxed SIMD', `${n}³ GFLOP/s`, '—', '—',
        'this engine has no relaxed SIMD (Node 20: run with --experimental-wasm-relaxed-simd, as npm run bench does)', '≥ 1.25× best',
        false);
      continue;
    }
    const ratio = gf(g.rMs) / Math.max(gf(g.oMs), gf(g.tfMs));
    row('GEMM relaxed SIMD', `${n}³ GFLOP/s`, f(gf(g.rMs)), `ort ${f(gf(g.oMs))}, tfjs ${f(gf(g.tfMs))}`,
      `${f(ratio)}× best; ${f(g.tMs / g.rMs)}× tandem SIMD128`, n >= 256 ? '≥ 1.25× best' : '—', n < 256 || ratio >= 1.25);
  }
  for (const n of [512, 2048]) {
    const g = gemm[`mm_1x${n}`];
    const gbs = (ms) => (4 * n * n) / ms / 1e6; // weight bytes streamed per call
    const best = Math.max(gbs(g.oMs), gbs(g.tfMs));
    const copy = await copyBandwidth(4 * n * n); // a copy of as many bytes as the weights
    const ratio = gbs(g.tMs) / best, ofCopy = gbs(g.tMs) / copy;
    row('GEMV', `1×${n}×${n} GB/s of weights`, f(gbs(g.tMs)), `ort ${f(gbs(g.oMs))}, tfjs ${f(gbs(g.tfMs))}`,
      `${f(ratio)}× best; ${f(100 * ofCopy, 0)}% of a ${f(copy, 1)} GB/s copy of ${(4 * n * n) >> 20 || '<1'} MiB`, '≥ 1.0× and ≥ 50%',
      ratio >= 1 && ofCopy >= 0.5);
  }
}

// ---- state round trip: a step whose only work is state += x ----------------------------------
if (want('state')) {
  for (const nbytes of [64, 512 * 1024, 4 * 1024 * 1024]) {
    const n = nbytes / 4, x = rand(1); // x is one element, broadcast: the state is all that moves
    const tm = await load(`${DIR}/state_${nbytes}.tandem`);
    const os = await ortSession(`state_${nbytes}`);
    let state = new ort.Tensor('float32', new Float32Array(n), [n]);
    const xt = new ort.Tensor('float32', x, [1]);
    const { tMs, oMs } = await compare({
      tMs: () => tm.forward(x),
      oMs: async () => { state = (await os.run({ state, x: xt })).state_out; },
    });
    const label = nbytes >= 1 << 20 ? `${nbytes >> 20} MiB` : nbytes >= 1024 ? `${nbytes >> 10} KiB` : `${nbytes} B`;
    const target = nbytes >= 4 << 20 ? 20 : nbytes === 64 ? 10 : 0;
    row('State round trip', `state += x, ${label} (ms)`, f(tMs, 4), `ort ${f(oMs, 4)}`, `${f(oMs / tMs, 1)}× faster`,
      target ? `≥ ${target}×` : '—', !target || oMs / tMs >= target);
    tm.dispose();
    await os.release();
  }
}

// ---- decode step of the transformer family (4 layers, width 256, 4 heads, context 512) -------
if (want('decode')) {
  const lm = await load(`${DIR}/lm.tandem`);
  const lmOrt = await ortSession('lm');
  const CACHE = [4, 1, 4, 512, 64];
  const warmed = new Set();
  for (const fill of [32, 480, 32, 480]) { // each fill twice: the first pass warms both runtimes up
    await lm.resetState();
    for (let p = 0; p < fill; p += 16) await lm.prefill(new BigInt64Array(16).fill(5n));
    const posT = new Tensor('int64', new BigInt64Array([BigInt(fill)]), []);
    const tok = new BigInt64Array([7n]);
    let k = new ort.Tensor('float32', new Float32Array(CACHE.reduce((a, b) => a * b)), CACHE);
    let v = new ort.Tensor('float32', new Float32Array(CACHE.reduce((a, b) => a * b)), CACHE);
    const feeds = { token: new ort.Tensor('int64', new BigInt64Array([7n]), [1, 1]),
      pos: new ort.Tensor('int64', new BigInt64Array([BigInt(fill)]), [1]) };
    const { tMs, oMs } = await compare({
      tMs: async () => { await lm.writeState('pos', posT); await lm.decode(tok); },
      oMs: async () => { const r = await lmOrt.run({ ...feeds, k, v }); k = r.k_out; v = r.v_out; },
    });
    if (warmed.has(fill)) row('Decode step', `LM, cache fill ${fill} (ms)`, f(tMs, 3), `ort ${f(oMs, 3)}`, `${f(tMs / oMs)}× ort's time`,
      '≤ 0.5×', tMs / oMs <= 0.5);
    warmed.add(fill);
  }
  await lmOrt.release();
  lm.dispose();
}

// ---- decode step of a SmolLM-135M-shaped Llama (transformers, 30 layers, width 576, GQA 9/3) ----
// tandem: export_causal_lm's decode over its static cache (512 positions), the fill set by writing
// the cache's length (state) before each call; onnxruntime-web: the same weights as a step taking
// and returning the KV cache (Optimum's past_key_values / present interface, P = fill). The bound
// is the weight bytes a token reads at the SIMD128 read bandwidth of linear memory measured here.
// Its rounds count this process's CPU time (every contender runs on this one thread), so other work on
// a shared machine does not land in them; TANDEM_WALL=1: the wall clock.
if (want('smollm')) {
  const clock = process.env.TANDEM_WALL === '1' ? undefined : cpuMs;
  const smolInfo = JSON.parse(readFileSync(`${DIR}/smollm.json`, 'utf8'));
  const smolBytes = statSync(`${DIR}/smollm.tandem`).size;
  const read = await readBandwidth(256 << 20); // measured again inside each row's rounds, as the GEMM rows' peak
  const smol = await load(`${DIR}/smollm.tandem`);
  const smolOrt = await ortSession('smollm');
  const { num_hidden_layers: L, num_key_value_heads: HKV, hidden_size: HID, num_attention_heads: HEADS } = smolInfo.config;
  const chunks = smol.methods.map((m) => /^prefill_(\d+)$/.exec(m.name)).filter(Boolean).map((r) => Number(r[1])).sort((a, b) => b - a);
  async function smolFill(fill) { // the cache holds `fill` positions after this
    await smol.resetState();
    let left = fill;
    if (smol.methods.some((m) => m.name === 'prefill')) { // one prefill of a dynamic length (up to max_prompt_len)
      for (let c; left > 1; left -= c) await smol.call('prefill',
        new BigInt64Array((c = Math.min(left, smol.metadata.max_prompt_len))).fill(5n));
    }
    for (const c of chunks) while (left >= c) { await smol.call(`prefill_${c}`, new BigInt64Array(c).fill(5n)); left -= c; }
    while (left-- > 0) await smol.decode(new BigInt64Array([5n]));
  }
  const lengthStates = smol.state.filter((s) => smolInfo.positions.includes(s.name));
  // fill 32 twice: the first pass only warms the process up (right after the two loads, its rounds saw
  // half the read rate of the later ones)
  for (const [warmUp, fill] of [[true, 32], [false, 32], [false, 480]]) {
    await smolFill(fill);
    const lengths = lengthStates.map((s) => [s.name,
      new Tensor(s.dtype, new BigInt64Array(s.shape.reduce((a, b) => a * b, 1)).fill(BigInt(fill)), s.shape)]);
    const tok = new BigInt64Array([7n]);
    const feeds = {
      input_ids: new ort.Tensor('int64', new BigInt64Array([7n]), [1, 1]),
      position_ids: new ort.Tensor('int64', new BigInt64Array([BigInt(fill)]), [1, 1]),
    };
    for (let i = 0; i < L; i++) {
      for (const kv of ['key', 'value']) feeds[`past_key_values.${i}.${kv}`] = new ort.Tensor('float32', rand(HKV * fill * (HID / HEADS)),
        [1, HKV, fill, HID / HEADS]);
    }
    const { tMs, oMs, rMs } = await compare({
      tMs: async () => { for (const [name, t] of lengths) await smol.writeState(name, t); await smol.decode(tok); },
      oMs: () => smolOrt.run(feeds),
      rMs: read.call,
    }, { rounds: warmUp ? 1 : 7, minMs: 200, clock });
    if (warmUp) continue;
    const readGBs = read.bytes / rMs / 1e6, boundMs = smolInfo.weight_bytes_per_token / readGBs / 1e6;
    for (const [name, t] of lengths) await smol.writeState(name, t);
    smolProfiles[fill] = await smol.profile('decode', tok);
    row('SmolLM-135M shape', `decode tokens/s, cache fill ${fill}`, f(1000 / tMs, 1), `ort ${f(1000 / oMs, 1)}`, `${f(oMs / tMs)}× ort`,
      '≥ 1.5×', oMs / tMs >= 1.5);
    row('SmolLM-135M shape', `decode ms vs the bound, fill ${fill}`, f(tMs, 1), `bound ${f(boundMs, 1)}`,
      `${f(100 * boundMs / tMs, 0)}% of the bound (${f(smolInfo.weight_bytes_per_token / 1e6, 0)} MB at ${f(readGBs, 1)} GB/s, ` +
      `${read.streams} streams)`, '≥ 85%', boundMs / tMs >= 0.85);
    const streamGBs = smolInfo.weight_bytes_per_token / tMs / 1e6;
    smolLines.push(`smollm fill ${fill}: tandem ${f(1000 / tMs, 1)} tokens/s, onnxruntime-web ${f(1000 / oMs, 1)} tokens/s ` +
      `(1 thread, float32), ratio ${f(oMs / tMs)}; weight stream ${f(streamGBs, 2)} GB/s of read ${f(readGBs, 2)} GB/s, ` +
      `${f(100 * streamGBs / readGBs, 0)}%`);
  }
  {
    const p = smolProfiles[32], rows = smolInfo.new_kv_bytes_per_token;
    row('SmolLM-135M shape', 'bytes written per decode step (KB)', f(p.bytesWritten / 1024, 1),
      `new K/V rows ${f(rows / 1024, 1)}, state ${f(p.stateBytes / 2 ** 20, 1)} MiB`,
      `state ${f(p.stateBytesWritten / 1024, 1)} KB = ${f(p.stateBytesWritten / rows)}× the rows; activations ` +
      `${f((p.bytesWritten - p.stateBytesWritten) / 1024, 1)} KB; ${p.flagged.length} ops over 5% of the state`,
      'state ≤ 2× rows, none flagged', p.stateBytesWritten <= 2 * rows && p.flagged.length === 0);
    row('SmolLM-135M shape', 'file size (MB)', f(smolBytes / 1e6, 1),
      `weights ${f(smolInfo.weight_bytes_per_token / 1e6, 1)} (untied ${f(smolInfo.untied_weight_bytes / 1e6, 1)})`,
      `${f(smolBytes / smolInfo.weight_bytes_per_token, 3)}× the weights`, 'each weight once (≤ 1.02×)',
      smolBytes <= 1.02 * smolInfo.weight_bytes_per_token);
  }
  smol.dispose();
  await smolOrt.release();
}

// ---- streaming chunk of the convolution family -----------------------------------------------
if (want('conv')) {
  const conv = await load(`${DIR}/conv.tandem`);
  const convOrt = await ortSession('conv');
  let context = new ort.Tensor('float32', new Float32Array(128 * 4), [1, 128, 4]);
  const chunkT = new ort.Tensor('float32', chunk, [1, 128, 64]);
  const { cMs, coMs } = await compare({
    cMs: () => conv.forward(chunk),
    coMs: async () => { const r = await convOrt.run({ chunk: chunkT, context }); context = r.context_out; },
  });
  row('Streaming chunk', 'conv block, 128 ch × 64 frames (ms)', f(cMs, 3), `ort ${f(coMs, 3)}`, `${f(cMs / coMs)}× ort's time`, '≤ 0.5×',
    cMs / coMs <= 0.5);
  await convOrt.release();
  conv.dispose();
}

// ---- image classifiers: torchvision resnet18 and mobilenet_v3_small, 224x224 ------------------
if (want('image')) {
  const image = rand(3 * 224 * 224);
  for (const name of ['resnet18', 'mobilenet_v3_small']) {
    const tm = await load(`${DIR}/${name}.tandem`);
    const os = await ortSession(name);
    const xT = new ort.Tensor('float32', image, [1, 3, 224, 224]);
    const a = (await tm.forward(image)).data, b = (await os.run({ x: xT })).y.data;
    const diff = a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
    const { tMs, oMs } = await compare({ tMs: () => tm.forward(image), oMs: () => os.run({ x: xT }) }, { rounds: 7, minMs: 300 });
    row('Image model', `${name}, 1×3×224×224 (ms)`, f(tMs, 1), `ort ${f(oMs, 1)}`, `${f(tMs / oMs)}× ort's time`, '≤ 0.8×',
      tMs / oMs <= 0.8,
      `(outputs differ by ${diff.toExponential(1)})`);
    tm.dispose();
    await os.release();
  }
}

// ---- streaming codec: encode and decode steps of one 80 ms chunk of 24 kHz audio -------------
if (want('codec')) {
  {
    const codecState = JSON.parse(readFileSync(`${DIR}/codec_state.json`, 'utf8'));
    const codecT = await load(`${DIR}/codec.tandem`);
    const audio = rand(1920), latents = rand(128 * 4);
    const steps = { encode_step: [audio, [1, 1, 1920]], decode_step: [latents, [1, 128, 4]] };
    const times = {};
    for (const [step, [x, shape]] of Object.entries(steps)) {
      const os = await ortSession(`codec_${step}`);
      const fresh = () => Object.fromEntries(codecState[step].map((s, i) => {
        const n = s.shape.reduce((p, q) => p * q, 1);
        const data = s.dtype === 'int64' ? new BigInt64Array(n).fill(BigInt(s.fill)) : new Float32Array(n).fill(s.fill);
        return [`s${i}`, new ort.Tensor(s.dtype, data, s.shape)];
      }));
      let state = fresh();
      const xT = new ort.Tensor('float32', x, shape);
      const ortStep = async () => {
        const r = await os.run({ x: xT, ...state });
        state = Object.fromEntries(codecState[step].map((_, i) => [`s${i}`, r[`s${i}_out`]]));
        return r.y.data;
      };
      await codecT.resetState();
      let diff = 0;
      for (let i = 0; i < 3; i++) { // the same three steps from a fresh state in both
        const a = (await codecT[step](x)).data, b = await ortStep();
        diff = Math.max(diff, a.reduce((m, v, j) => Math.max(m, Math.abs(v - b[j])), 0));
      }
      const { tMs, oMs } = await compare({ tMs: () => codecT[step](x), oMs: ortStep });
      times[step] = tMs;
      row('Codec step', `${step}, 1920 samples / 4 frames (ms)`, f(tMs, 3), `ort ${f(oMs, 3)}`, `${f(tMs / oMs)}× ort's time`, '≤ 0.5×',
        tMs / oMs <= 0.5,
        `(first 3 steps' outputs differ by ${diff.toExponential(1)})`);
      await os.release();
    }
    const both = times.encode_step + times.decode_step;
    row('Codec step', 'encode + decode of one 80 ms chunk (ms)', f(both, 2), '—', `${f(both / 80 * 100, 1)}% of real time`, '< 20 ms',
      both < 20);
    codecT.dispose();
  }
}

// ---- memory: linear memory after loading, and after 100 calls --------------------------------
if (want('memory')) {
  for (const [name, call] of [['lm', (m) => m.decode(new BigInt64Array([3n]))], ['conv', (m) => m.forward(chunk)],
    ['mm_1024x1024', (m) => m.forward(rand(1024 * 1024))]]) {
    const bytes = statSync(`${DIR}/${name}.tandem`).size;
    const m = await load(`${DIR}/${name}.tandem`);
    const loaded = m.memoryBytes;
    for (let i = 0; i < 100; i++) { if (name === 'lm' && i % 400 === 399) await m.resetState(); await call(m); }
    const after = m.memoryBytes;
    const budget = bytes + m.stateBytes + m.scratchBytes + (2 << 20);
    row('Memory', `${name}: linear memory after load / after 100 calls (MiB)`, `${f(loaded / 2 ** 20)} / ${f(after / 2 ** 20)}`,
      `file + state + scratch ${f((bytes + m.stateBytes + m.scratchBytes) / 2 ** 20)}`,
      `${f((loaded - bytes - m.stateBytes - m.scratchBytes) / 2 ** 20)} MiB over`,
      '≤ +2 MiB, no growth', loaded <= budget && after === loaded);
    m.dispose();
  }
}

// ---- load: a ~50 MB program against copying the same bytes into linear memory ----------------
if (want('load')) {
  const bigBytes = readFileSync(`${DIR}/big.tandem`);
  const wasmModule = await WebAssembly.compile(readFileSync(new URL('../../web/tandem.wasm', import.meta.url)));
  const { loadMs, copyIn } = await compare({
    loadMs: async () => (await load(bigBytes)).dispose(),
    copyIn: async () => {
      const x = await instantiateRuntime(wasmModule);
      const p = x.tdm_malloc(bigBytes.length);
      new Uint8Array(x.memory.buffer, p, bigBytes.length).set(bigBytes);
    },
  }, { rounds: 5, minMs: 50 });
  row('Load', `${f(bigBytes.length / 1e6, 1)} MB program (ms)`, f(loadMs, 1), `copy into a fresh instance ${f(copyIn, 1)}`,
    `${f(loadMs / copyIn)}× the copy`, '≤ 3×', loadMs / copyIn <= 3);
}

console.log(`Machine: ${cpus()[0].model}, ${cpus().length} cores; Node ${process.version}; single thread for every runtime.`);
console.log(`Reference: SIMD128 multiply-add peak ${f(peakGflops)} GFLOP/s at the start (each GEMM row has its own, measured in its ` +
  `rounds); linear-memory copy ${[...copyAt].map(([b, g]) => `${f(g, 1)} GB/s at ${b >> 20 || '<1'} MiB`).join(', ')}; SIMD128 read of ` +
  `256 MiB ${Object.values(readBy).map((g) => `${f(g, 1)}`).join(' / ')} GB/s as ${Object.keys(readBy).join(' / ')} streams (the ` +
  `bound uses the best).\n`);
console.log('| section | work | tandem | peers | ratio | target | met |');
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) console.log(`| ${r.section} | ${r.work} | ${r.tandem} | ${r.peer} | ${r.ratio} | ${r.target} | ` +
  `${r.met ? 'yes' : '**no**'} |`);

// The SmolLM-shaped decode step, op by op (one profiled call at fill 32 and 480), summed per op kind.
for (const fill of Object.keys(smolProfiles)) {
  const p = smolProfiles[fill], byName = new Map();
  for (const o of p.ops) {
    const e = byName.get(o.name) ?? { n: 0, ms: 0, bytes: 0, state: 0 };
    byName.set(o.name, { n: e.n + 1, ms: e.ms + o.ms, bytes: e.bytes + o.bytesWritten, state: e.state + o.stateBytesWritten });
  }
  console.log(`\nSmolLM-135M-shaped decode step at cache fill ${fill}, one profiled call: ${f(p.totalMs, 1)} ms, ${p.ops.length} ops, ` +
    `${f(p.bytesWritten / 1024, 1)} KB written (${f(p.stateBytesWritten / 1024, 1)} KB into the ${f(p.stateBytes / 2 ** 20, 1)} MiB ` +
    `state)\n`);
  console.log('| op | count | ms | % of the step | KB written | of which state |');
  console.log('|---|---|---|---|---|---|');
  for (const [name, e] of [...byName].sort((a, b) => b[1].ms - a[1].ms)) {
    const kib = (bytes) => f(bytes / 1024, 1);
    console.log(`| ${name} | ${e.n} | ${f(e.ms, 3)} | ${f(100 * e.ms / p.totalMs, 1)} | ${kib(e.bytes)} | ${kib(e.state)} |`);
  }
}
// One line per fill that a script can read: tokens/s against onnxruntime-web, the weight stream against the read rate.
for (const line of smolLines) console.log(line);
