// `npm run bench:webgpu` (bench/suite/webgpu.sh): the SmolLM-135M-shaped Llama (bench/models/smollm.py) decode and
// prefill, a streaming codec step (bench/models/make_models.py's codec) and Kyutai's speech pipeline (the STT step,
// Mimi's encode and decode steps: bench/models/stt.py, mimi.py) on tandem's WebGPU backend in
// headless Chromium, beside tandem on wasm, onnxruntime-web's WebGPU EP and transformers.js (WebGPU,
// greedy, its tokens checked against tandem's) on the same weights. On
// SwiftShader (Chromium's CPU Vulkan, the only adapter here) the figures are labelled as such:
// they measure a CPU emulating a GPU, not a GPU; TANDEM_WEBGPU_ADAPTER=gpu runs Chromium on the machine's GPU
// (Vulkan) instead. Prints markdown tables.
//
//   node bench/suite/webgpu.mjs [build/bench-webgpu]
//   TANDEM_WEBGPU_ROUNDS (default 3), TANDEM_WEBGPU_PREFILL (tokens, default 16), TANDEM_WEBGPU_FILL (default 32),
//   TANDEM_WEBGPU_TJS_TOKENS (transformers.js's greedy tokens, default 6), TANDEM_WEBGPU_TJS (its install, default
//   build/transformersjs, where bench/suite/webgpu.sh puts it), TANDEM_WEBGPU_ONLY (page functions to run, e.g. benchTjs),
//   TANDEM_WEBGPU_SPEECH_WARM (8), TANDEM_WEBGPU_SPEECH_FRAMES (16), TANDEM_WEBGPU_SPEECH_FILES (the speech programs in
//   the folder to time, default the STT's int4 and int8 and Mimi's float32, int8, int8convs, int8bf16 and int8i16
//   programs that exist)
import { existsSync, readFileSync } from 'node:fs';
import { launch, WEBGPU_ARGS, WEBGPU_GPU_ARGS } from '../../tests/browser/chromium.js';
import { serve } from '../../scripts/serve.mjs';

const DIR = process.argv[2] ?? 'build/bench-webgpu';
// the SmolLM's config (webgpu.sh exports it unless TANDEM_WEBGPU_ONLY names none of its page functions)
const smol = existsSync(`${DIR}/smollm.json`) ? JSON.parse(readFileSync(`${DIR}/smollm.json`, 'utf8'))
  : { config: { num_hidden_layers: 0, num_key_value_heads: 1, hidden_size: 1, num_attention_heads: 1 }, parameters: NaN };
const rounds = Number(process.env.TANDEM_WEBGPU_ROUNDS ?? 3), prefill = Number(process.env.TANDEM_WEBGPU_PREFILL ?? 16);
const fill = Number(process.env.TANDEM_WEBGPU_FILL ?? 32);
const tjsTokens = Number(process.env.TANDEM_WEBGPU_TJS_TOKENS ?? 6), tjsDir = process.env.TANDEM_WEBGPU_TJS ?? 'build/transformersjs';
const cfg = smol.config, L = cfg.num_hidden_layers, hkv = cfg.num_key_value_heads, dh = cfg.hidden_size / cfg.num_attention_heads;

// the speech pipeline: `warm` untimed frames (the caches fill), then `frames` timed
const speechWarm = Number(process.env.TANDEM_WEBGPU_SPEECH_WARM ?? 8), speechFrames = Number(process.env.TANDEM_WEBGPU_SPEECH_FRAMES ?? 16);
const gpuAdapter = process.env.TANDEM_WEBGPU_ADAPTER === 'gpu'; // the machine's GPU (Vulkan) in place of SwiftShader

const server = await serve({ index: '/bench/suite/webgpu.html' });
const browser = gpuAdapter ? await launch(WEBGPU_GPU_ARGS, { gpu: true }) : await launch(WEBGPU_ARGS);
const f = (x, d = 1) => (x === undefined || x === null || Number.isNaN(x) ? '—' : x.toFixed(d));
try {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${server.url}/bench/suite/webgpu.html`);
  await page.waitForFunction(() => globalThis.benchReady === true, null, { timeout: 60000 });
  const info = await page.evaluate(() => globalThis.adapterInfo());
  const soft = !info || /swiftshader/i.test(`${info.vendor} ${info.architecture} ${info.description}`);
  const label = soft ? 'SwiftShader (CPU) — not a GPU measurement' : `GPU: ${info.vendor} ${info.architecture} ${info.description}`.trim();
  console.error(`# adapter: ${JSON.stringify(info)}`);
  const only = process.env.TANDEM_WEBGPU_ONLY?.split(','); // e.g. benchTjs,tandemGreedy (while developing)
  const run = async (fn, arg) => {
    if (only && !only.includes(fn)) return { error: 'skipped (TANDEM_WEBGPU_ONLY)' };
    try {
      return await page.evaluate(([n, a]) => globalThis[n](a), [fn, arg]);
    } catch (e) {
      return { error: e.message.split('\n')[0] };
    }
  };
  const gpu = await run('benchLM', { dir: DIR, device: 'webgpu', prefill, fill, rounds });
  console.error('# tandem webgpu', JSON.stringify(gpu));
  const wasm = await run('benchLM', { dir: DIR, device: 'wasm', prefill, fill, rounds });
  console.error('# tandem wasm', JSON.stringify(wasm));
  const ort = await run('benchOrt', { dir: DIR, fill, rounds, layers: L, hkv, dh });
  console.error('# onnxruntime-web webgpu', JSON.stringify(ort));
  // greedy from [7] (timed) and the first token from two other one-token prompts, each checked against tandem's
  const greedy = { prompts: [7, 300, 12345], tokens: [tjsTokens, 1, 1] };
  const tjs = await run('benchTjs', { dir: DIR, tjs: tjsDir, ...greedy });
  console.error('# transformers.js webgpu', JSON.stringify(tjs));
  const ref = await run('tandemGreedy', { dir: DIR, device: 'webgpu', ...greedy });
  console.error('# tandem greedy', JSON.stringify(ref));
  const cg = await run('benchCodec', { dir: DIR, device: 'webgpu', rounds });
  const cw = await run('benchCodec', { dir: DIR, device: 'wasm', rounds });
  console.error('# codec', JSON.stringify(cg), JSON.stringify(cw));
  // Kyutai's speech pipeline (webgpu.sh exported it): the STT step per variant and Mimi's steps, WebGPU and
  // wasm (one thread) interleaved per model, and whether the two devices' tokens / codes agree frame by frame
  const speech = [];
  const speechDefault = 'stt_int4.tandem,stt_int8.tandem,mimi.tandem,mimi_int8.tandem,mimi_int8convs.tandem,mimi_int8bf16.tandem,'
    + 'mimi_int8i16.tandem';
  const speechFiles = (process.env.TANDEM_WEBGPU_SPEECH_FILES ?? speechDefault).split(',').filter((n) => existsSync(`${DIR}/${n}`));
  for (const file of speechFiles) {
    const arg = { dir: DIR, file, warm: speechWarm, frames: speechFrames };
    const g = await run('benchSpeech', { ...arg, device: 'webgpu' }), w = await run('benchSpeech', { ...arg, device: 'wasm' });
    console.error(`# ${file}`, JSON.stringify({ ...g, results: undefined }), JSON.stringify({ ...w, results: undefined }));
    const same = g.results && w.results ? g.results.filter((r, i) => JSON.stringify(r) === JSON.stringify(w.results[i])).length : 0;
    speech.push({ file, g, w, same, n: w.results?.length ?? 0 });
  }
  const tokS = (ms) => (ms ? 1000 / ms : undefined);
  console.log(`\n### WebGPU (${label}; Chromium ${browser.version()})\n`);
  const ratio = (a, b) => (a && b ? `${f(b / a, 2)}×` : '—');
  const lm = !only || only.some((n) => n !== 'benchSpeech'); // the SmolLM's and codec's rows were run
  if (lm) {
    console.log(`SmolLM-135M-shaped Llama (${L} layers, ${(smol.parameters / 1e6).toFixed(0)} M parameters, float32), decode at a ` +
      `fill of ${fill}, prefill of ${prefill} tokens; codec: one 80 ms step. Medians of ${rounds} rounds; transformers.js: ` +
      `the median of its greedy steps 2..${tjsTokens} from a one-token prompt (fills 1..${tjsTokens - 1}).\n`);
    console.log('| work | tandem WebGPU | tandem wasm (1 thread) | onnxruntime-web WebGPU EP | transformers.js WebGPU | WebGPU / ORT | ' +
      'WebGPU / transformers.js |');
    console.log('|---|---|---|---|---|---|---|');
    const ms = (x) => `${f(x)} (${f(tokS(x), 2)})`;
    console.log(`| decode, ms/token (tokens/s) | ${ms(gpu.decodeMs)} | ${ms(wasm.decodeMs)} | ${ms(ort.decodeMs)} | ` +
      `${ms(tjs.decodeMs)} | ${ratio(gpu.decodeMs, ort.decodeMs)} | ${ratio(gpu.decodeMs, tjs.decodeMs)} |`);
    console.log(`| prefill of ${prefill}, ms | ${f(gpu.prefillMs)} | ${f(wasm.prefillMs)} | — | — | — | — |`);
    console.log(`| codec encode_step, ms | ${f(cg.encode)} | ${f(cw.encode)} | — | — | — | — |`);
    console.log(`| codec decode_step, ms | ${f(cg.decode)} | ${f(cw.decode)} | — | — | — | — |`);
    console.log(`| decode: submissions per call | ${gpu.decode?.submits ?? '—'} | — | ${ort.decode?.submits ?? '—'} | ` +
      `${tjs.decode?.submits ?? '—'} | — | — |`);
    console.log(`| decode: bytes read back per call | ${gpu.decode?.readBytes ?? '—'} (logits: ${cfg.vocab_size * 4} + a 16-byte ` +
      `flag) | — | ${ort.decode?.readBytes ?? '—'} | ${tjs.decode?.readBytes ?? '—'} | — | — |`);
    console.log(`| decode_topk: bytes read back per call | ${gpu.decodeTopk?.readBytes ?? '—'} | — | — | — | — | — |`);
    console.log(`| load, ms | ${f(gpu.loadMs, 0)} | ${f(wasm.loadMs, 0)} | ${f(ort.loadMs, 0)} | ${f(tjs.loadMs, 0)} | — | — |`);
    const same = Array.isArray(tjs.tokens) && Array.isArray(ref) && JSON.stringify(tjs.tokens) === JSON.stringify(ref);
    console.log(`\ngreedy tokens from the prompts ${JSON.stringify(greedy.prompts.map((p) => [p]))}: tandem WebGPU ` +
      `${JSON.stringify(ref)}, transformers.js ${tjs.version ?? ''} ${JSON.stringify(tjs.tokens)}: ${same ? 'equal' : 'DIFFERENT'}`);
    const all = [['tandem WebGPU', gpu], ['tandem wasm', wasm], ['onnxruntime-web', ort], ['transformers.js', tjs], ['tandem greedy', ref],
      ['codec WebGPU', cg], ['codec wasm', cw]];
    for (const [n, r] of all) {
      if (r.error) console.log(`\n${n}: ${r.error}`);
      else if (r.deviceReason) console.log(`\n${n}: ran on ${r.device}: ${r.deviceReason}`);
    }
  }
  if (speech.length) {
    console.log(`\nKyutai's speech pipeline (bench/models/stt.py, mimi.py): ms per 80 ms frame, medians of ${speechFrames} ` +
      `frames after ${speechWarm} untimed, each call's output read back; × real time in brackets; same: frames whose ` +
      'STT token (Mimi: codes) the two devices agree on.\n');
    console.log('| model, work | tandem WebGPU | tandem wasm (1 thread) | wasm / WebGPU | same |');
    console.log('|---|---|---|---|---|');
    const rt = (x) => `${f(x)} (${f(x ? 80 / x : undefined, 2)}×)`;
    for (const { file, g, w, same, n } of speech) {
      for (const k of ['step', 'encode', 'decode'].filter((key) => g[key] !== undefined || w[key] !== undefined)) {
        console.log(`| ${file}, ${k === 'step' ? 'STT step (Mimi encode + LM step)' : `${k}_step`} | ${rt(g[k])} | ${rt(w[k])} | ` +
          `${ratio(g[k], w[k])} | ${same}/${n} |`);
      }
    }
    for (const { file, g, w } of speech) {
      for (const [d, r] of [['WebGPU', g], ['wasm', w]]) {
        if (r.error) console.log(`\n${file} ${d}: ${r.error}`);
        else if (r.deviceReason) console.log(`\n${file} ${d}: ran on ${r.device}: ${r.deviceReason}`);
      }
    }
  }
  if (errors.length) console.log(`\npage errors: ${errors.join('; ')}`);
} finally {
  await browser.close();
  await server.close();
}
