// toolchain.mjs — which compiler builds the one-thread relaxed-SIMD runtime, by
// measurement in one process: GEMM GFLOP/s (256³ to 1024³, beside onnxruntime-web and TF.js's
// wasm backend) and SmolLM-135M-shaped decode tokens/s at float32, int8 and int4 (bench/models/smollm.py,
// bench/models/llm.py), each on every runtime given, all timed in interleaved rounds (CPU time; TANDEM_WALL=1:
// wall clock, bench/suite/compare.mjs).
// Also the bandwidth bound of each width: the program's weight bytes over the best SIMD128 read
// bandwidth of as many bytes (bench/suite/peak.c).
//
//   node --expose-gc --experimental-wasm-relaxed-simd bench/suite/toolchain.mjs [build/bench] [NAME=path.wasm ...]
//
// Without runtimes: clang-19 + wasi-libc (web/tandem-relaxed.wasm), Emscripten 3.1.6 relaxed with
// the post-link rewrite (build/wasm/tandem-relaxed-emcc.wasm: `ninja -C build/wasm tandem_relaxed_emcc_wasm`)
// and SIMD128 (web/tandem.wasm). ROUNDS (default 7) and TANDEM_TOOLCHAIN=gemm, gemv or decode pick.
import { existsSync, readFileSync, statSync } from 'node:fs';
import * as ort from 'onnxruntime-web';
import * as tf from '@tensorflow/tfjs-core';
import { setThreadsCount } from '@tensorflow/tfjs-backend-wasm';
import { load, Tensor } from '../../node/index.js';
import { instantiateRuntime } from '../../web/loader.js';
import { compare as timeCalls, cpuMs } from './compare.mjs';

/** compare() (interleaved rounds, median ms per call) of this process's CPU time unless
 * TANDEM_WALL=1 (compare.mjs's cpuMs). */
function compare(fns, opts = {}) {
  return timeCalls(fns, process.env.TANDEM_WALL === '1' ? opts : { ...opts, clock: cpuMs });
}

const DIR = process.argv[2] ?? 'build/bench';
const given = process.argv.slice(3).map((a) => a.split('='));
const RUNTIMES = Object.fromEntries(given.length ? given : [
  ['clang-19 relaxed', 'web/tandem-relaxed.wasm'],
  ['emcc relaxed', 'build/wasm/tandem-relaxed-emcc.wasm'],
  ['SIMD128', 'web/tandem.wasm'],
].filter(([, p]) => existsSync(p)));
const ROUNDS = Number(process.env.ROUNDS ?? 7);
const ONLY = process.env.TANDEM_TOOLCHAIN;
const f = (x, d = 2) => x.toFixed(d);
const opts = (wasm) => ({ threads: 1, wasm, simd: wasm.includes('relaxed') ? 'relaxed' : 'simd128' });

console.log(`runtimes: ${Object.entries(RUNTIMES).map(([n, p]) => `${n} (${p}, ${statSync(p).size} bytes)`).join('; ')}`);

if (!ONLY || ONLY === 'gemm') {
  ort.env.wasm.numThreads = 1;
  setThreadsCount(1);
  await tf.setBackend('wasm');
  await tf.ready();
  console.log('\n| GEMM | ' + Object.keys(RUNTIMES).join(' | ') + ' | ort | tfjs | best tandem / best peer |');
  console.log('|---|' + Object.keys(RUNTIMES).map(() => '---|').join('') + '---|---|---|');
  for (const n of [256, 512, 1024]) {
    const name = `mm_${n}x${n}`;
    const A = Float32Array.from({ length: n * n }, () => Math.random() - 0.5);
    const models = {};
    for (const [rn, p] of Object.entries(RUNTIMES)) models[rn] = await load(`${DIR}/${name}.tandem`, opts(p));
    const os = await ort.InferenceSession.create(`${DIR}/${name}.onnx`, { executionProviders: ['wasm'] });
    const W = tf.randomNormal([n, n]);
    const fns = Object.fromEntries(Object.entries(models).map(([rn, m]) => [rn, () => m.forward(A)]));
    fns.ort = () => os.run({ A: new ort.Tensor('float32', A, [n, n]) });
    fns.tfjs = async () => {
      const a = tf.tensor2d(A, [n, n]);
      const y = tf.matMul(a, W);
      y.dataSync();
      a.dispose();
      y.dispose();
    };
    const ms = await compare(fns, { rounds: ROUNDS });
    const gf = (t) => (2 * n * n * n) / t / 1e6;
    const bestT = Math.max(...Object.keys(RUNTIMES).map((rn) => gf(ms[rn]))), bestP = Math.max(gf(ms.ort), gf(ms.tfjs));
    console.log(`| ${n}³ GFLOP/s | ${Object.keys(RUNTIMES).map((rn) => f(gf(ms[rn]))).join(' | ')} | ${f(gf(ms.ort))} | ` +
      `${f(gf(ms.tfjs))} | ${f(bestT / bestP)}× |`);
    for (const m of Object.values(models)) m.dispose();
    W.dispose();
    await os.release();
  }
}

// One linear layer at SmolLM's shapes with one row (a decode step's GEMV; bench/models/make_models.py
// TANDEM_BENCH=toolchain): ns per weight of each width on each runtime.
if (!ONLY || ONLY === 'gemv') {
  const widths = ['float32', 'int8', 'int4'];
  console.log('\n| GEMV, ns per weight | ' + Object.keys(RUNTIMES).flatMap((rn) => widths.map((w) => `${rn} ${w}`)).join(' | ') + ' |');
  console.log('|---|' + Object.keys(RUNTIMES).flatMap(() => widths.map(() => '---|')).join(''));
  for (const [K, N] of [[576, 1536], [1536, 576], [576, 49152]]) {
    const x = Float32Array.from({ length: K }, () => Math.random() - 0.5);
    const fns = {}, models = [];
    for (const [rn, p] of Object.entries(RUNTIMES))
      for (const w of widths) {
        const m = await load(`${DIR}/gemv_${w}_${K}x${N}.tandem`, opts(p));
        models.push(m);
        fns[`${rn} ${w}`] = () => m.forward(new Tensor('float32', x, [1, K]));
      }
    const ms = await compare(fns, { rounds: ROUNDS });
    console.log(`| ${K} × ${N} | ${Object.keys(fns).map((k) => f((ms[k] * 1e6) / (K * N), 3)).join(' | ')} |`);
    for (const m of models) m.dispose();
  }
}

if (!ONLY || ONLY === 'decode') {
  const smol = JSON.parse(readFileSync(`${DIR}/smollm.json`, 'utf8'));
  const FILL = 32;
  const files = { float32: 'smollm', int8: 'smollm_int8', int4: 'smollm_int4' };
  // the bound: the weights read once per token at the best read bandwidth of as many bytes
  const peak = await instantiateRuntime(await WebAssembly.compile(readFileSync(`${DIR}/peak.wasm`)));
  const bytes = Object.fromEntries(Object.entries(files).map(([w, file]) => [w, statSync(`${DIR}/${file}.tandem`).size]));
  const bandwidth = {};
  for (const [w, b] of Object.entries(bytes)) {
    const src = peak.tdm_bench_alloc(b);
    new Uint8Array(peak.memory.buffer, src >>> 0, b).fill(1);
    const reads = Object.fromEntries([1, 4, 8, 16].map((s) => [s, async () => peak.tdm_bench_read(src, b, 1, s)]));
    const rms = await compare(reads, { rounds: 5, minMs: 200 });
    bandwidth[w] = Math.max(...Object.values(rms).map((t) => b / t / 1e6));
  }
  const fns = {}, first = {};
  const models = [];
  for (const [rn, p] of Object.entries(RUNTIMES))
    for (const [w, file] of Object.entries(files)) {
      const model = await load(`${DIR}/${file}.tandem`, opts(p));
      models.push(model);
      const lengths = model.state.filter((s) => smol.positions.includes(s.name))
        .map((s) => [s.name, new Tensor(s.dtype, new BigInt64Array(s.shape.reduce((a, b) => a * b, 1)).fill(BigInt(FILL)), s.shape)]);
      await model.resetState();
      const tok = new BigInt64Array([7n]);
      const key = `${rn} ${w}`;
      fns[key] = async () => {
        for (const [n, t] of lengths) await model.writeState(n, t);
        return model.decode(tok);
      };
      first[key] = (await fns[key]()).data;
    }
  const ms = await compare(fns, { rounds: ROUNDS });
  const argmax = (x) => x.reduce((b, v, i) => (v > x[b] ? i : b), 0);
  console.log(`\n| decode (SmolLM-135M shape, fill ${FILL}, 1 thread) | ` + Object.keys(files).map((w) => `${w} tokens/s`).join(' | ') +
    ' | int8 / float32 | int4 / float32 | int8 of its bound | int4 of its bound |');
  console.log('|---|---|---|---|---|---|---|---|');
  console.log(`| bound (weights ${Object.values(bytes).map((b) => `${f(b / 2 ** 20, 0)} MiB`).join(' / ')} at ` +
    `${Object.values(bandwidth).map((g) => f(g, 1)).join(' / ')} GB/s) | ` +
    `${Object.keys(files).map((w) => f((bandwidth[w] * 1e9) / bytes[w], 1)).join(' | ')} | | | | |`);
  for (const rn of Object.keys(RUNTIMES)) {
    const tps = Object.fromEntries(Object.keys(files).map((w) => [w, 1000 / ms[`${rn} ${w}`]]));
    const ofBound = (w) => tps[w] / ((bandwidth[w] * 1e9) / bytes[w]);
    console.log(`| ${rn} | ${Object.keys(files).map((w) => f(tps[w], 1)).join(' | ')} | ${f(tps.int8 / tps.float32)}× | ` +
      `${f(tps.int4 / tps.float32)}× | ${f(100 * ofBound('int8'), 0)}% | ${f(100 * ofBound('int4'), 0)}% |`);
    const a = Object.fromEntries(Object.keys(files).map((w) => [w, argmax(first[`${rn} ${w}`])]));
    console.error(`${rn}: argmax float32 ${a.float32}, int8 ${a.int8}, int4 ${a.int4}`);
  }
  for (const m of models) m.dispose?.();
}
