// npm run bench, thread rows: tandem on 1 and on T threads (load(..., { threads })) and
// onnxruntime-web on T threads, in Node, on the same work in one run (bench/suite/bench.mjs runs the
// single-thread rows; onnxruntime-web's thread count is fixed per process, hence this second
// process). Usage: node --expose-gc bench/suite/threads.mjs build/bench [T = 2]. Prints table rows.
import { readFileSync } from 'node:fs';
import * as ort from 'onnxruntime-web';
import { load } from '../../node/index.js';
import { compare } from './compare.mjs';

const DIR = process.argv[2] ?? 'build/bench';
const T = Number(process.argv[3] ?? 2);
ort.env.wasm.numThreads = T;

const f = (x, d = 2) => x.toFixed(d);
const rand = (n) => Float32Array.from({ length: n }, () => Math.random() - 0.5);

const rows = [];
const row = (work, one, many, peer, target, met) => {
  rows.push(`| Threads (${T}) | ${work} | ${one} | ${many} | ${peer} | ${target} | ${met ? 'yes' : '**no**'} |`);
  console.error(rows.at(-1));
};

// GEMM 1024: y = A @ W with W a constant
{
  const n = 1024, A = rand(n * n);
  const t1 = await load(`${DIR}/mm_${n}x${n}.tandem`, { threads: 1 });
  const tn = await load(`${DIR}/mm_${n}x${n}.tandem`, { threads: T });
  const os = await ort.InferenceSession.create(`${DIR}/mm_${n}x${n}.onnx`, { executionProviders: ['wasm'] });
  const a = new ort.Tensor('float32', A, [n, n]);
  // onnxruntime-web's pool spins for a while after each run (its default), which on a machine with
  // T cores slows whatever runs next: tandem's 1-vs-T rounds run without it, then T-vs-ort.
  const { one, many } = await compare({ one: () => t1.forward(A), many: () => tn.forward(A) }, { rounds: 7, minMs: 200 });
  const { peer } = await compare({ many: () => tn.forward(A), peer: () => os.run({ A: a }) }, { rounds: 7, minMs: 200 });
  const gf = (ms) => (2 * n ** 3) / ms / 1e6;
  row(`GEMM ${n}³ GFLOP/s`, f(gf(one)), f(gf(many)), `ort ${T} threads ${f(gf(peer))}`,
    `${T} threads ≥ 1.7× 1 thread (${f(one / many)}×); ≥ 1.5× ort (${f(peer / many)}×)`, one / many >= 1.7 && peer / many >= 1.5);
  t1.dispose();
  tn.dispose();
  await os.release();
}

// SmolLM-135M shape: prefill of 128 tokens from an empty cache; decode at cache fill 32
{
  const info = JSON.parse(readFileSync(`${DIR}/smollm.json`, 'utf8'));
  const { num_hidden_layers: L, num_key_value_heads: HKV, hidden_size: HID, num_attention_heads: HEADS } = info.config;
  const t1 = await load(`${DIR}/smollm.tandem`, { threads: 1 });
  const tn = await load(`${DIR}/smollm.tandem`, { threads: T });
  const prompt = BigInt64Array.from({ length: 128 }, (_, i) => BigInt((i * 7919) % 49152));
  // one prefill of a dynamic length (export_causal_lm), or the 128-token chunk of older files
  const prefillOf = (m, tokens) => (m.methods.some((x) => x.name === 'prefill') ? m.call('prefill', tokens)
    : m.call(`prefill_${tokens.length}`, tokens));
  const prefill = async (m) => { await m.resetState(); await prefillOf(m, prompt); };
  const p = await compare({ one: () => prefill(t1), many: () => prefill(tn) }, { rounds: 5, minMs: 400 });
  // onnxruntime-web's prefill: bench/models/smollm.py's smollm_prefill.onnx (the prompt into an empty
  // cache, returning the last logits and the cache), timed beside tandem on T threads only (as the
  // decode below: its pool's spinning would slow tandem's 1-vs-T rounds)
  const ps = await ort.InferenceSession.create(`${DIR}/smollm_prefill.onnx`, { executionProviders: ['wasm'] });
  const pfeeds = {
    input_ids: new ort.Tensor('int64', prompt, [1, 128]),
    position_ids: new ort.Tensor('int64', BigInt64Array.from({ length: 128 }, (_, i) => BigInt(i)), [1, 128]),
  };
  p.peer = (await compare({ many: () => prefill(tn), peer: () => ps.run(pfeeds) }, { rounds: 5, minMs: 400 })).peer;
  await ps.release();
  row('SmolLM-135M shape: prefill 128 tokens (tokens/s)', f(128000 / p.one, 0), f(128000 / p.many, 0),
    `ort ${T} threads ${f(128000 / p.peer, 0)}`,
    `≥ 1.7× 1 thread (${f(p.one / p.many)}×); ≥ 1.5× ort (${f(p.peer / p.many)}×)`, p.one / p.many >= 1.7 && p.peer / p.many >= 1.5);

  const fill = 32;
  const lengths = tn.state.filter((s) => info.positions.includes(s.name));
  const setFill = async (m) => {
    for (const s of lengths) await m.writeState(s.name,
      { dtype: s.dtype, shape: s.shape, data: new BigInt64Array(s.shape.reduce((a, b) => a * b, 1)).fill(BigInt(fill)) });
  };
  for (const m of [t1, tn]) { await m.resetState(); await prefillOf(m, prompt.slice(0, 32)); }
  const os = await ort.InferenceSession.create(`${DIR}/smollm.onnx`, { executionProviders: ['wasm'] });
  const feeds = { input_ids: new ort.Tensor('int64', new BigInt64Array([7n]), [1, 1]),
    position_ids: new ort.Tensor('int64', new BigInt64Array([BigInt(fill)]), [1, 1]) };
  for (let i = 0; i < L; i++) for (const kv of ['key', 'value']) feeds[`past_key_values.${i}.${kv}`] = new ort.Tensor('float32',
    rand(HKV * fill * (HID / HEADS)), [1, HKV, fill, HID / HEADS]);
  const tok = new BigInt64Array([7n]);
  const step = async (m) => { await setFill(m); await m.decode(tok); };
  const d = await compare({ one: () => step(t1), many: () => step(tn) }, { rounds: 7, minMs: 300 });
  d.peer = (await compare({ many: () => step(tn), peer: () => os.run(feeds) }, { rounds: 7, minMs: 300 })).peer;
  row(`SmolLM-135M shape: decode tokens/s, fill ${fill}`, f(1000 / d.one, 1), f(1000 / d.many, 1),
    `ort ${T} threads ${f(1000 / d.peer, 1)}`,
    `≥ 1.3× 1 thread (${f(d.one / d.many)}×); ≥ 1.5× ort (${f(d.peer / d.many)}×)`, d.one / d.many >= 1.3 && d.peer / d.many >= 1.5);
  t1.dispose();
  tn.dispose();
  await os.release();
}

console.log(`| section | work | tandem 1 thread | tandem ${T} threads | peer | target (measured) | met |`);
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) console.log(r);
