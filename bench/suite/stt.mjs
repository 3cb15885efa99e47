// npm run bench, Kyutai STT rows (TANDEM_BENCH=stt): the program bench/models/stt.py exported (Mimi's
// streaming encode of one 80 ms frame + moshi's LMGen.step on its codes, one `step` call) run in wasm
// (Node) on 1 and 2 threads over the frames moshi's eager streaming ran, its greedy text tokens checked
// against eager's on the same weights. Each row gives the mean time of a frame (after the first 2, while
// V8 and the caches warm up) and the median frame, the wasm memory, and the bound: the bytes of weights a
// step reads over the minute's DRAM read rate (bench/suite/machine.mjs). Ends with one line per precision:
// `stt: 1 thread X ms, 2 threads Y ms per 80 ms frame (PRECISION), token agreement Z%`, and for a quantized
// precision how many of eager's tokens at that precision equal eager's at float32 (the spread near ties alone
// give). tandem's tokens go to OUT/stt_VARIANT_tandem_THREADS.json.
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
for (const variant of VARIANTS) {
  const ref = JSON.parse(readFileSync(`${DIR}/stt_${variant}.json`, 'utf8'));
  const times = {};
  let agree = 0;
  for (const threads of [1, 2]) {
    const limits = await minute(threads);
    const dram = Number(/DRAM read ([\d.]+) GB\/s/.exec(limits)?.[1] ?? NaN);
    const m = await load(`${DIR}/stt_${variant}.tandem`, { threads });
    const perFrame = [], got = [];
    let same = 0;
    for (let i = 0; i < inputs.length; i++) {
      const x = Float32Array.from(inputs[i]);
      const t0 = performance.now();
      const tok = await m.step(x);
      if (i >= WARM) perFrame.push(performance.now() - t0);
      got.push(Number(tok.data[0]));
      if (got[i] === ref.tokens[i]) same++;
    }
    writeFileSync(`${DIR}/stt_${variant}_tandem_${threads}.json`, JSON.stringify(got));
    const first = got.findIndex((tok, i) => tok !== ref.tokens[i]);
    const where = first < 0 ? '' : `, first differs at frame ${first} (eager's top-2 text logit margin there ` +
      `${ref.margins ? f(ref.margins[first], 4) : '?'})`;
    const mean = perFrame.reduce((a, b) => a + b, 0) / perFrame.length;
    const median = [...perFrame].sort((a, b) => a - b)[perFrame.length >> 1];
    const bound = ref.weight_bytes / 1e6 / dram;
    times[threads] = mean;
    agree = same / inputs.length;
    console.log(`| Kyutai STT (${f(ref.params / 1e6, 0)} M parameters), ${variant} | Mimi encode + LM step of one 80 ms ` +
      `frame, ${threads} thread${threads > 1 ? 's' : ''}, ${m.simd} | ${f(mean)} ms (median ${f(median)}), ` +
      `${f(80 / mean, 2)}× real time | tokens equal to eager ${same}/${inputs.length}${where} | ` +
      `${f(ref.weight_bytes / 2 ** 20, 0)} MiB of weights a step / ${f(dram)} GB/s = ${f(bound)} ms bound ` +
      `(${f((100 * bound) / mean, 0)}% of it); wasm memory ${f(m.memoryBytes / 2 ** 20, 0)} MiB; ${limits} |`);
    m.dispose();
  }
  if (ref.float32_tokens) {
    const same = ref.float32_tokens.filter((tok, i) => tok === ref.tokens[i]).length;
    console.log(`eager at ${variant} against eager at float32: ${same}/${inputs.length} tokens equal`);
  }
  lines.push(`stt: 1 thread ${f(times[1])} ms, 2 threads ${f(times[2])} ms per 80 ms frame (${variant}), ` +
    `token agreement ${f(100 * agree)}%`);
}
for (const line of lines) console.log(line);
