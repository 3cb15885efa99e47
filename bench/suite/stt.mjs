// npm run bench, Kyutai STT rows (TANDEM_BENCH=stt): the program bench/models/stt.py exported (Mimi's
// streaming encode of one 80 ms frame + moshi's LMGen.step on its codes, one `step` call) run in wasm
// (Node) on 1 and 2 threads over the frames moshi's eager streaming ran, its greedy text tokens checked
// against eager's on the same weights. Each row gives the mean time of a frame (after the first 2, while
// V8 and the caches warm up) and the median frame, the wasm memory, and the bound: the bytes of weights a
// step reads over the minute's DRAM read rate (bench/suite/machine.mjs).
// Tokens, two ways. Teacher-forced: after every frame's `step`, `force_text` feeds eager's token of that
// frame back in place of tandem's own, so each frame is compared on the same history (eager fed its own
// stream is its free-running run): the frames where tandem's token is eager's. Free-running: tandem's
// own tokens fed back, where one flip at a near-tie changes every later frame: the tokens equal to eager's
// and the first that differs, with eager's top-2 text logit margin there. And the two halves of a step
// apart: Mimi's codes of each frame (`encode`) against eager's, and the LM (`lm_step`) given eager's codes
// and, as teacher-forced, eager's text: one code flipped at an RVQ near-tie changes every later frame's
// context, so the first measures Mimi and the second the LM on eager's inputs. The LM's tokens there are
// also counted against the float64 reference (bench/models/stt.py: the same LM, weights and rounding in
// float64 on the same inputs), beside eager float32's own count against it: the noise floor of float32.
// Ends with one line per precision: `stt: 1 thread X ms, 2 threads Y ms per 80 ms frame (PRECISION),
// token agreement Z% teacher-forced (...), free-running N/M (...), LM on eager's codes L/M, Mimi's codes
// equal in C/M frames, LM against the float64 reference F/M (eager float32 E/M)[; the SIMD128 build on 1
// thread S ms, teacher-forced T/M]`, Z the lower of the two thread counts', and for a quantized precision
// how many of eager's tokens at that precision equal eager's at float32. Where the engine has relaxed SIMD
// (Node 20 with --experimental-wasm-relaxed-simd, as bench/suite/run.sh runs it), a last row runs the
// SIMD128 build on one thread: what engines without relaxed SIMD run (unfused multiply-adds, so Mimi's
// codes may leave eager's at an RVQ near-tie).
// tandem's free-running tokens go to OUT/stt_VARIANT_tandem_THREADS.json.
// Usage: node bench/suite/stt.mjs build/bench [VARIANTS = float32,int8,int4: those exported].
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { load } from '../../node/index.js';
import { machine } from './machine.mjs';

const DIR = process.argv[2] ?? 'build/bench';
const VARIANTS = (process.argv[3] ?? 'float32,int8,int4').split(',').filter((v) => existsSync(`${DIR}/stt_${v}.tandem`));
const { inputs } = JSON.parse(readFileSync(`${DIR}/stt_frames.json`, 'utf8'));
const f = (x, d = 1) => x.toFixed(d);
const WARM = 2;
const minute = await machine(DIR);
const lines = [];
const margin = (ref, i) => (ref.margins ? f(ref.margins[i], 4) : '?');

/** Frame by frame: tandem's tokens and the step times (after WARM frames); with `force`, eager's token of
 * each frame is fed back after its step in place of tandem's. */
async function run(m, force, ref) {
  const perFrame = [], got = [];
  for (let i = 0; i < inputs.length; i++) {
    const x = Float32Array.from(inputs[i]);
    const t0 = performance.now();
    const tok = await m.step(x);
    if (i >= WARM) perFrame.push(performance.now() - t0);
    got.push(Number(tok.data[0]));
    if (force) await m.force_text(ref.tokens[i]);
  }
  return { got, perFrame };
}

/** The halves apart: each frame's codes from `encode` against eager's, then `lm_step` on eager's codes and
 * `force_text` of eager's token: { tokens: frames whose token is eager's, exact: those equal to the float64
 * reference's (where the reference has one), codes: frames whose codes all are eager's, firstCodes: the first
 * frame whose codes differ, or -1 }. */
async function halves(m, ref) {
  let tokens = 0, exact = 0, codes = 0, firstCodes = -1;
  for (let i = 0; i < inputs.length; i++) {
    const c = await m.encode(Float32Array.from(inputs[i]));
    const same = ref.codes[i].every((v, j) => Number(c.data[j]) === v);
    codes += same;
    if (!same && firstCodes < 0) firstCodes = i;
    const tok = await m.lm_step(BigInt64Array.from(ref.codes[i], BigInt));
    tokens += Number(tok.data[0]) === ref.tokens[i];
    exact += Number(tok.data[0]) === ref.float64_tokens?.[i];
    await m.force_text(ref.tokens[i]);
  }
  return { tokens, exact, codes, firstCodes };
}

for (const variant of VARIANTS) {
  const ref = JSON.parse(readFileSync(`${DIR}/stt_${variant}.json`, 'utf8'));
  const n = inputs.length;
  const times = {};
  let forcedSame = n, forcedNote = '', freeSame = 0, freeNote = '', split = null, plain = null, relaxed = false;
  // The default build (relaxed SIMD where the engine has it) on 1 and 2 threads, then, where that was the
  // relaxed build, the SIMD128 build on one thread: what engines without relaxed SIMD (Safari) run.
  for (const [threads, simd] of [[1], [2], [1, 'simd128']]) {
    if (simd && !relaxed) break;
    const limits = await minute(threads);
    const dram = Number(/DRAM read ([\d.]+) GB\/s/.exec(limits)?.[1] ?? NaN);
    const m = await load(`${DIR}/stt_${variant}.tandem`, { threads, simd });
    if (!simd) relaxed = m.simd === 'relaxed';
    const { got, perFrame } = await run(m, false, ref);
    if (!simd) writeFileSync(`${DIR}/stt_${variant}_tandem_${threads}.json`, JSON.stringify(got));
    const same = got.filter((tok, i) => tok === ref.tokens[i]).length;
    const first = got.findIndex((tok, i) => tok !== ref.tokens[i]);
    const where = first < 0 ? '' : `, first differs at frame ${first} (eager's top-2 text logit margin there ${margin(ref, first)})`;
    await m.reset();
    const forced = (await run(m, true, ref)).got;
    const missed = forced.map((tok, i) => (tok === ref.tokens[i] ? -1 : i)).filter((i) => i >= 0);
    const listed = `${missed.slice(0, 8).join(', ')}${missed.length > 8 ? ', ...' : ''}`;
    const missedNote = missed.length === 0 ? '' : `; differing at frames ${listed}` +
      ` (eager's largest top-2 margin among them ${f(Math.max(...missed.map((i) => ref.margins?.[i] ?? NaN)), 4)})`;
    const mean = perFrame.reduce((a, b) => a + b, 0) / perFrame.length;
    const median = [...perFrame].sort((a, b) => a - b)[perFrame.length >> 1];
    const bound = ref.weight_bytes / 1e6 / dram;
    if (simd) plain = { mean, forced: n - missed.length };
    else times[threads] = mean;
    if (!simd && n - missed.length <= forcedSame) {
      forcedSame = n - missed.length;
      forcedNote = missedNote;
    }
    if (threads === 1 && !simd && ref.codes && typeof m.lm_step === 'function') {
      await m.reset();
      split = await halves(m, ref);
    }
    if (threads === 1 && !simd) {
      freeSame = same;
      freeNote = first < 0 ? '' : `, first divergence at frame ${first}, top-2 margin ${margin(ref, first)}`;
    }
    console.log(`| Kyutai STT (${f(ref.params / 1e6, 0)} M parameters), ${variant} | Mimi encode + LM step of one 80 ms ` +
      `frame, ${threads} thread${threads > 1 ? 's' : ''}, ${m.simd} | ${f(mean)} ms (median ${f(median)}), ` +
      `${f(80 / mean, 2)}× real time | teacher-forced tokens equal to eager ${n - missed.length}/${n}${missedNote}; ` +
      `free-running ${same}/${n}${where} | ` +
      `${f(ref.weight_bytes / 2 ** 20, 0)} MiB of weights a step / ${f(dram)} GB/s = ${f(bound)} ms bound ` +
      `(${f((100 * bound) / mean, 0)}% of it); wasm memory ${f(m.memoryBytes / 2 ** 20, 0)} MiB; ${limits} |`);
    m.dispose();
  }
  if (ref.float32_tokens) {
    const same = ref.float32_tokens.filter((tok, i) => tok === ref.tokens[i]).length;
    console.log(`eager at ${variant} against eager at float32: ${same}/${n} tokens equal (free-running)`);
  }
  lines.push(`stt: 1 thread ${f(times[1])} ms, 2 threads ${f(times[2])} ms per 80 ms frame (${variant}), ` +
    `token agreement ${f((100 * forcedSame) / n)}% teacher-forced (${forcedSame}/${n}${forcedNote}), ` +
    `free-running ${freeSame}/${n}${freeNote}` + (split ? `, LM on eager's codes ${split.tokens}/${n} ` +
      `(${f((100 * split.tokens) / n)}%), Mimi's codes equal in ${split.codes}/${n} frames` +
      (split.firstCodes < 0 ? '' : ` (first differing at frame ${split.firstCodes})`) : '') +
    (split && ref.float64_tokens ? `, LM against the float64 reference ${split.exact}/${n} (eager float32 ` +
      `${ref.float64_tokens.filter((tok, i) => tok === ref.tokens[i]).length}/${n})` : '') +
    (plain ? `; the SIMD128 build on 1 thread ${f(plain.mean)} ms, teacher-forced ${plain.forced}/${n}` : ''));
}
for (const line of lines) console.log(line);
