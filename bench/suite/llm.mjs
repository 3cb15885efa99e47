// The LLM table (`TANDEM_BENCH=llm npm run bench`): the SmolLM-135M-shaped
// Llama of bench/models/smollm.py at float32, int8 and int4, in tandem, onnxruntime-web (wasm EP) and
// @wllama/wllama (llama.cpp compiled to wasm), all three in one headless Chromium page per width,
// single thread each (bench/suite/llm-page.js). Prints a markdown table of medians and ratios.
//
//   node bench/suite/llm.mjs [build/bench]    (after bench/models/smollm.py and bench/models/llm.py wrote the models)
import { readFileSync, statSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from '../../tests/browser/chromium.js';
import { serve } from '../../scripts/serve.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DIR = process.argv[2] ?? 'build/bench';
const smol = JSON.parse(readFileSync(`${DIR}/smollm.json`, 'utf8'));
const llm = JSON.parse(readFileSync(`${DIR}/llm.json`, 'utf8'));
const FILLS = [32, 480], PREFILL = 128, GEN = 17, ROUNDS = Number(process.env.TANDEM_LLM_ROUNDS ?? 7);

const f = (x, d = 2) => (x === undefined || Number.isNaN(x) ? '—' : x.toFixed(d));
const MB = (b) => f(b / 1e6, 1), MiB = (b) => f(b / 2 ** 20, 1);
const rows = [];
const row = (section, work, tandem, peer, ratio, target, met) => {
  rows.push({ section, work, tandem, peer, ratio, target, met });
  console.error(`${section} | ${work} | ${tandem} | ${peer} | ${ratio} | ${target} | ${met === null ? '—' : met ? 'yes' : 'NO'}`);
};

const server = await serve({ index: '/bench/suite/llm.html' });
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: [...CHROMIUM_ARGS, '--js-flags=--expose-gc'] });
const version = browser.version();
const results = {};
try {
  for (const [width, files] of Object.entries(llm.widths)) {
    const page = await browser.newPage(); // a fresh page per width: each runtime's memory starts empty
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error' && !/status of 404/.test(m.text())) errors.push(m.text()); });
    await page.goto(`${server.url}/bench/suite/llm.html`);
    await page.waitForFunction(() => window.benchReady === true, null, { timeout: 60000 });
    const spec = {
      dir: relative(ROOT, DIR), width, files, config: smol.config, positions: smol.positions, capacity: smol.max_cache_len,
      maxPrompt: smol.max_prompt_len, fills: FILLS, prefill: PREFILL, genTokens: GEN, rounds: ROUNDS, nextTokens: llm.next_tokens,
    };
    const t0 = Date.now();
    try {
      results[width] = await page.evaluate((s) => window.runWidth(s), spec);
    } catch (e) {
      throw new Error(`${width}: ${e.message}\n${errors.join('\n')}`, { cause: e });
    }
    results[width].sizes = Object.fromEntries(Object.entries(files).map(([k, v]) => [k, statSync(`${DIR}/${v}`).size]));
    console.error(`llm ${width}: ${((Date.now() - t0) / 1000).toFixed(0)} s; wllama ` +
      `${results[width].wllama.error ?? `threads ${results[width].wllama.threads}, llama.cpp ${results[width].wllama.version}`}`);
    await page.close();
  }
} finally {
  await browser.close();
  await server.close();
}

// ---- rows ----
const LABEL = { float32: 'f32 / F32', int8: 'int8 / Q8_0', int4: 'int4 / Q4_0' };
const tps = (ms) => 1000 / ms;
for (const [width, r] of Object.entries(results)) {
  const sec = `LLM ${width} (${LABEL[width]})`;
  const wErr = r.wllama.error ? `llama.cpp: failed (${r.wllama.error})` : null;
  if (r.sameNext) {
    const { cases, tandem, wllama } = r.sameNext, margin = Math.min(...llm.next_tokens.map((c) => c.margin));
    row(sec, `greedy next token = transformers' (${cases} prompts, top-2 margin ≥ ${f(margin, 3)})`, `${tandem}/${cases}`,
      wErr ?? `llama.cpp ${wllama}/${cases}`, 'same weights, same function', 'all equal', tandem === cases && wllama === cases);
  }
  for (const fill of FILLS) {
    const t = r.tandem.decodeMs[fill], o = r.ort.decodeMs[fill], w = r.wllama.decodeMs[fill];
    const vsO = o / t, vsW = w / t;
    row(sec, `decode tokens/s, cache fill ${fill}`, f(tps(t), 1), `ort ${f(tps(o), 1)}, ${wErr ?? `llama.cpp ${f(tps(w), 1)}`}`,
      `${f(vsO)}× ort, ${wErr ? '—' : `${f(vsW)}× llama.cpp`}`, '≥ 1.5× ort, ≥ 1.2× llama.cpp', vsO >= 1.5 && !wErr && vsW >= 1.2);
  }
  row(sec, `prefill tokens/s, ${PREFILL}-token prompt`, f(PREFILL / r.tandem.prefillMs * 1000, 1),
    `${wErr ?? `llama.cpp ${f(PREFILL / r.wllama.prefillMs * 1000, 1)}`}; ort: not measured (its ONNX step takes one token)`,
    wErr ? '—' : `${f(r.wllama.prefillMs / r.tandem.prefillMs)}× llama.cpp`, '—', null);
  const bytes = llm.weight_bytes_per_token[width];
  FILLS.forEach((fill, i) => {
    const gbs = r.read.inRows[i], boundMs = bytes / gbs / 1e6, t = r.tandem.decodeMs[fill];
    row(sec, `decode ms vs the bound, fill ${fill}`, f(t, 1), `bound ${f(boundMs, 1)} (${MB(bytes)} MB at ${f(gbs, 1)} GB/s)`,
      `${f(100 * boundMs / t, 0)}% of the bound`, width === 'int8' ? '≥ 70%' : '—', width === 'int8' ? boundMs / t >= 0.7 : null);
  });
  if (width !== 'float32' && results.float32) {
    const want = width === 'int8' ? 2 : 3;
    for (const fill of FILLS) {
      const x = results.float32.tandem.decodeMs[fill] / r.tandem.decodeMs[fill];
      row(sec, `decode vs tandem's float32, fill ${fill}`, f(tps(r.tandem.decodeMs[fill]), 1),
        `float32 ${f(tps(results.float32.tandem.decodeMs[fill]), 1)}`,
        `${f(x)}× float32`, `≥ ${want}×`, x >= want);
    }
  }
  const s = r.sizes;
  row(sec, 'file size (MB)', MB(s.tandem), `ort ${MB(s.onnx)}, llama.cpp ${MB(s.gguf)}`,
    `${f(s.tandem / s.onnx)}× ort's, ${f(s.tandem / s.gguf)}× llama.cpp's`, '—', null);
  row(sec, 'wasm memory after load (MiB)', MiB(r.tandem.memoryBytes),
    `ort ${MiB(r.ort.memoryBytes)}, ${wErr ?? `llama.cpp ${MiB(r.wllama.memoryBytes)} (its buffers, from its log)`}`,
    `${f(r.tandem.memoryBytes / r.ort.memoryBytes)}× ort's${wErr ? '' : `, ${f(r.tandem.memoryBytes / r.wllama.memoryBytes)}× ` +
    `llama.cpp's`}`, '—', null);
  row(sec, 'load time from the page (ms)', f(r.tandem.loadMs, 0),
    `ort ${f(r.ort.loadMs, 0)}, ${wErr ?? `llama.cpp ${f(r.wllama.loadMs, 0)}`}`,
    `${f(r.tandem.loadMs / r.ort.loadMs)}× ort's${wErr ? '' : `, ${f(r.tandem.loadMs / r.wllama.loadMs)}× llama.cpp's`}`, '—', null);
}

const any = Object.values(results)[0];
console.log(`\nLLM table: SmolLM-135M-shaped Llama (${smol.config.num_hidden_layers} layers, ${(smol.parameters / 1e6).toFixed(1)} M ` +
  `parameters, random weights), headless ${version}, single thread each; ` +
  `onnxruntime-web (wasm EP) and @wllama/wllama (llama.cpp ${any?.wllama.version ?? '?'}) in the same page; medians of ${ROUNDS} ` +
  `interleaved rounds. ` +
  `SIMD128 read of 256 MiB at the start: ${Object.entries(results).map(([w, r]) => `${w} page ` +
  `${Object.values(r.read.byStreams).map((g) => f(g, 1)).join(' / ')} GB/s`).join('; ')} (1 / 2 / 4 / 8 / 16 streams; the bound uses ` +
  `the best stream count, measured again inside each decode row's rounds).\n`);
console.log('| section | work | tandem | peers | ratio | target | met |');
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) console.log(`| ${r.section} | ${r.work} | ${r.tandem} | ${r.peer} | ${r.ratio} | ${r.target} | ` +
  `${r.met === null ? '—' : r.met ? 'yes' : '**no**'} |`);
for (const [width, r] of Object.entries(results)) if (r.log?.length) console.error(`llama.cpp log (${width}):\n  ${r.log.join('\n  ')}`);
