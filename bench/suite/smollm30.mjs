// smollm30.mjs — the full 30-layer SmolLM-135M shape's decode at float32, int8 and int4 on one thread
// (the targets: int8 >= 2.0x and int4 >= 3.0x float32's tokens/s, int8 >= 70% of its
// weight-bandwidth bound), on the SIMD128 and the relaxed build, from bench/models/smollm30.py's
// exports (TANDEM_BENCH=smollm30 in bench/suite/run.sh).
//
//   node --expose-gc --experimental-wasm-relaxed-simd bench/suite/smollm30.mjs [build/bench30] [NAME=path.wasm ...]
//
// Per cache fill (FILLS, default 32,256), REPEATS (default 3) times: every runtime x width decode step and a
// plain SIMD128 read of each width's weight bytes (bench/suite/peak.c, a buffer of as many bytes, its
// best stream count picked first; PEAK_WASM, default build/bench/peak.wasm, from bench/suite/run.sh)
// in the same interleaved rounds (ROUNDS, default 5; process CPU time, TANDEM_WALL=1:
// wall clock). A decode step: the cache's lengths (state) written back to the fill, then decode() of one
// token. The bound of a width is its weight bytes per token over that read's rate. Before timing, each
// model's greedy decode after the seeded prompt is checked against PyTorch eager's (smollm30.json: each
// step's 5 largest logits; float32 must match), and profiled decodes give the tied head's share of the time.
import { readFileSync, existsSync } from 'node:fs';
import { load, Tensor } from '../../node/index.js';
import { instantiateRuntime } from '../../web/loader.js';
import { compare as timeCalls, cpuMs } from './compare.mjs';

const DIR = process.argv[2] ?? 'build/bench30';
const given = process.argv.slice(3).map((a) => a.split('='));
const RUNTIMES = Object.fromEntries(given.length ? given : [
  ['SIMD128', 'web/tandem.wasm'],
  ['relaxed', 'web/tandem-relaxed.wasm'],
].filter(([, p]) => existsSync(p)));
const FILLS = (process.env.FILLS ?? '32,256').split(',').map(Number);
const REPEATS = Number(process.env.REPEATS ?? 3);
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const PROFILES = Number(process.env.PROFILES ?? 5);
const compare = (fns, opts) => timeCalls(fns, process.env.TANDEM_WALL === '1' ? opts : { ...opts, clock: cpuMs });
const f = (x, d = 2) => x.toFixed(d);
const span = (a, d = 1, unit = '') => {
  const lo = Math.min(...a), hi = Math.max(...a);
  return f(lo, d) === f(hi, d) ? `${f(lo, d)}${unit}` : `${f(lo, d)}–${f(hi, d)}${unit}`;
};

const info = JSON.parse(readFileSync(`${DIR}/smollm30.json`, 'utf8'));
const WIDTHS = Object.keys(info.files);
console.log(`smollm30: ${info.layers} layers; runtimes ${Object.entries(RUNTIMES).map(([n, p]) => `${n} (${p})`).join(', ')}; ` +
  `fills ${FILLS.join(', ')}; ${REPEATS} repeats of ${ROUNDS} rounds, ${process.env.TANDEM_WALL === '1' ? 'wall clock' : 'CPU time'}`);

// ---- the models, checked against eager ---------------------------------------------------------
const opts = (wasm) => ({ threads: 1, wasm, simd: wasm.includes('relaxed') ? 'relaxed' : 'simd128' });
const models = {}; // `${runtime} ${width}` -> { model, lengths(fill) }
async function prefill(model, tokens) {
  let out;
  for (let i = 0; i < tokens.length; i += model.metadata.max_prompt_len)
    out = await model.call('prefill', BigInt64Array.from(tokens.slice(i, i + model.metadata.max_prompt_len), BigInt));
  return out;
}
const top5 = (x) => Array.from(x.keys()).sort((a, b) => x[b] - x[a] || a - b).slice(0, 5);
/** Greedy decode after the seeded prompt: each step's 5 largest logits' ids, largest first. */
async function greedy(model) {
  await model.resetState();
  const got = [top5((await prefill(model, info.prompt)).data)];
  while (got.length < info.eager_top5.length) got.push(top5((await model.decode(new BigInt64Array([BigInt(got.at(-1)[0])]))).data));
  return got;
}
const eagerTokens = info.eager_top5.map((t) => t[0]);
for (const [rn, p] of Object.entries(RUNTIMES))
  for (const w of WIDTHS) {
    const model = await load(`${DIR}/${info.files[w]}`, opts(p));
    const top = await greedy(model);
    const same = top.filter((t, i) => t[0] === eagerTokens[i]).length;
    const sameTop5 = top.filter((t, i) => t.join() === info.eager_top5[i].join()).length;
    console.log(`${rn} ${w}: greedy ${top.map((t) => t[0]).join(' ')} (eager ${eagerTokens.join(' ')}): ${same}/${top.length} tokens ` +
      `the same, ${sameTop5}/${top.length} steps with eager's 5 largest logits in its order`);
    if (w === 'float32' && sameTop5 !== top.length) {
      console.error(`smollm30: ${rn} float32 does not decode as PyTorch eager does: the rows would not be real`);
      process.exit(1);
    }
    const positions = model.state.filter((s) => s.name.includes('cumulative_length'));
    const lengths = (fill) => positions.map((s) => [s.name,
      new Tensor(s.dtype, new BigInt64Array(s.shape.reduce((a, b) => a * b, 1)).fill(BigInt(fill)), s.shape)]);
    models[`${rn} ${w}`] = { model, lengths };
  }

// ---- the read bandwidth of a buffer of each width's weight bytes (peak.c) -----------------------
const peak = await instantiateRuntime(await WebAssembly.compile(readFileSync(process.env.PEAK_WASM ?? 'build/bench/peak.wasm')));
const reads = {};
for (const w of WIDTHS) {
  const b = info.weight_bytes_per_token[w];
  const src = peak.tdm_bench_alloc(b);
  new Uint8Array(peak.memory.buffer, src >>> 0, b).fill(1);
  const byStreams = await compare(Object.fromEntries([1, 2, 4, 8, 16].map((s) => [s, async () => peak.tdm_bench_read(src, b, 1, s)])),
    { rounds: 3, minMs: 200 });
  const streams = Number(Object.keys(byStreams).reduce((a, s) => (byStreams[s] < byStreams[a] ? s : a)));
  reads[w] = { bytes: b, streams, call: async () => peak.tdm_bench_read(src, b, 1, streams) };
}

// ---- the tied head's share of a decode step (the fastest of PROFILES profiled calls per model, at the first fill) -
const headShare = {};
for (const [key, { model, lengths }] of Object.entries(models)) {
  let best = null;
  for (let i = 0; i < PROFILES; i++) {
    for (const [n, t] of lengths(FILLS[0])) await model.writeState(n, t);
    const p = await model.profile('decode', new BigInt64Array([7n]));
    // the head is the step's last matrix product (matmul_packed, matmul_q8, matmul_q4)
    const head = p.ops.filter((o) => o.name.startsWith('matmul')).at(-1);
    if (!best || p.totalMs < best.total) best = { ms: head.ms, name: head.name, total: p.totalMs };
  }
  headShare[key] = best;
}

// ---- the interleaved rounds -----------------------------------------------------------------------
const results = []; // { fill, run, tps: {key: tokens/s}, gbs: {width: GB/s} }
const tok = new BigInt64Array([7n]);
for (const fill of FILLS) {
  for (const { model } of Object.values(models)) await model.resetState();
  for (const { model } of Object.values(models)) await prefill(model, Array.from({ length: fill }, (_, i) => 100 + i));
  for (let run = 0; run < REPEATS; run++) {
    const fns = {};
    for (const [key, { model, lengths }] of Object.entries(models)) {
      const ls = lengths(fill);
      fns[key] = async () => {
        for (const [n, t] of ls) await model.writeState(n, t);
        return model.decode(tok);
      };
    }
    for (const w of WIDTHS) fns[`read ${w}`] = reads[w].call;
    const ms = await compare(fns, { rounds: ROUNDS, minMs: 200 });
    const r = { fill, run, tps: {}, gbs: {} };
    for (const key of Object.keys(models)) r.tps[key] = 1000 / ms[key];
    for (const w of WIDTHS) r.gbs[w] = reads[w].bytes / ms[`read ${w}`] / 1e6;
    results.push(r);
    console.error(`fill ${fill} run ${run + 1}: ${Object.entries(r.tps).map(([k, t]) => `${k} ${f(t, 1)}`).join(', ')}; ` +
      `read ${WIDTHS.map((w) => `${w} ${f(r.gbs[w], 1)} GB/s`).join(', ')}`);
  }
}

// ---- the rows ------------------------------------------------------------------------------------
const bound = (r, w) => (r.gbs[w] * 1e9) / reads[w].bytes; // tokens/s
console.log('\n| fill | runtime | ' + WIDTHS.map((w) => `${w} tokens/s`).join(' | ') + ' | int8 / float32 | int4 / float32 | ' +
  WIDTHS.map((w) => `${w} of its bound`).join(' | ') + ' |');
console.log('|---|---|' + WIDTHS.map(() => '---|').join('') + '---|---|' + WIDTHS.map(() => '---|').join(''));
for (const fill of FILLS) {
  const rs = results.filter((r) => r.fill === fill);
  console.log(`| ${fill} | bound (${WIDTHS.map((w) => `${f(reads[w].bytes / 2 ** 20, 0)} MiB`).join(' / ')} at ` +
    `${WIDTHS.map((w) => span(rs.map((r) => r.gbs[w]))).join(' / ')} GB/s) | ` +
    `${WIDTHS.map((w) => span(rs.map((r) => bound(r, w)))).join(' | ')} | | | ${WIDTHS.map(() => '').join(' | ')} |`);
  for (const rn of Object.keys(RUNTIMES)) {
    const k = (w) => `${rn} ${w}`;
    console.log(`| ${fill} | ${rn} | ${WIDTHS.map((w) => span(rs.map((r) => r.tps[k(w)]))).join(' | ')} | ` +
      `${span(rs.map((r) => r.tps[k('int8')] / r.tps[k('float32')]), 2, '×')} | ` +
      `${span(rs.map((r) => r.tps[k('int4')] / r.tps[k('float32')]), 2, '×')} | ` +
      `${WIDTHS.map((w) => span(rs.map((r) => (100 * r.tps[k(w)]) / bound(r, w)), 0, '%')).join(' | ')} |`);
  }
}
// the bound again at float32's read rate (a buffer past the last-level cache): the smaller widths'
// buffers may be served from a large shared cache when read over and over
console.log('\n| fill | runtime | int8 of its bound at float32\'s read rate | int4 of it |');
console.log('|---|---|---|---|');
for (const fill of FILLS) {
  const rs = results.filter((r) => r.fill === fill);
  for (const rn of Object.keys(RUNTIMES)) {
    const of = (w) => span(rs.map((r) => (100 * r.tps[`${rn} ${w}`]) / ((r.gbs.float32 * 1e9) / reads[w].bytes)), 0, '%');
    console.log(`| ${fill} | ${rn} | ${of('int8')} | ${of('int4')} |`);
  }
}
console.log('\n| width | weight bytes per token | tied head (49152 × 576) bytes | head share of bytes | ' +
  Object.keys(RUNTIMES).map((rn) => `${rn}: head op, ms of the step (fill ${FILLS[0]}, fastest of ${PROFILES} profiled calls)`)
    .join(' | ') + ' |');
console.log('|---|---|---|---|' + Object.keys(RUNTIMES).map(() => '---|').join(''));
for (const w of WIDTHS) {
  const hb = info.head_bytes[w], wb = info.weight_bytes_per_token[w];
  console.log(`| ${w} | ${f(wb / 2 ** 20, 1)} MiB | ${f(hb / 2 ** 20, 1)} MiB | ${f((100 * hb) / wb, 0)}% | ` +
    Object.keys(RUNTIMES).map((rn) => {
      const h = headShare[`${rn} ${w}`];
      if (!h) return 'not profiled (PROFILES=0)';
      return `${h.name} ${f(h.ms, 1)} of ${f(h.total, 1)} ms (${f((100 * h.ms) / h.total, 0)}%)`;
    }).join(' | ') + ' |');
}
for (const { model } of Object.values(models)) model.dispose();
