// The LLM table's page (bench/suite/llm.html, driven by bench/suite/llm.mjs in headless Chromium): tandem,
// onnxruntime-web (wasm EP) and @wllama/wllama (llama.cpp's wasm build) on the same weights at one
// width per page, single thread each. window.runWidth(spec) resolves to plain numbers; the driver
// makes the rows.

// Every wasm memory created in this page, so a runtime's memory after load can be read even when
// the runtime keeps its module to itself (onnxruntime-web): memories made by the constructor and
// memories exported by an instance. Set before any runtime is imported.
const memories = new Set();
const NativeMemory = WebAssembly.Memory;
WebAssembly.Memory = class Memory extends NativeMemory {
  constructor(descriptor) {
    super(descriptor);
    memories.add(this);
  }
};
for (const name of ['instantiate', 'instantiateStreaming']) {
  const native = WebAssembly[name];
  WebAssembly[name] = async function (...args) {
    const r = await native.apply(WebAssembly, args);
    for (const v of Object.values((r.instance ?? r).exports ?? {})) if (v instanceof NativeMemory) memories.add(v);
    return r;
  };
}
const memoryBytesSince = (before) => [...memories].filter((m) => !before.has(m)).reduce((s, m) => s + m.buffer.byteLength, 0);

const { load } = await import('/web/tandem.js');
const { instantiateRuntime } = await import('/web/loader.js');
const { compare } = await import('/bench/suite/compare.mjs');
const ort = await import('/node_modules/onnxruntime-web/dist/ort.wasm.min.mjs');
const { Wllama } = await import('/node_modules/@wllama/wllama/esm/index.js');
ort.env.wasm.numThreads = 1;
ort.env.wasm.wasmPaths = '/node_modules/onnxruntime-web/dist/';

const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const rand = (n) => Float32Array.from({ length: n }, () => Math.random() - 0.5);
/** Token i's piece in the GGUF files' synthetic vocabulary (bench/models/gguf_llama.py's piece(): one
 * CJK ideograph per token from id 259 on), so a prompt of ids can be given to wllama as text. */
const EXT_B = 0x2a6e0 - 0x20000;
const piece = (i) => String.fromCodePoint(i - 259 < EXT_B ? 0x20000 + i - 259 : 0x4e00 + i - 259 - EXT_B);
const unpiece = (text) => { const p = text.codePointAt(0); return p >= 0x20000 ? p - 0x20000 + 259 : p - 0x4e00 + EXT_B + 259; };
/** n token ids past the synthetic vocabulary's special and byte tokens (bench/models/gguf_llama.py). */
const tokens = (n, vocab) => Array.from({ length: n }, (_, i) => 259 + ((i * 7919 + 13) % (vocab - 259)));

/** GB/s of SIMD128 loads streaming `bytes` of linear memory (bench/suite/peak.c): the best of 1 to 16
 * streams side by side, and a call that reads it that way, to time inside each row's rounds. */
async function readBandwidth(dir, bytes) {
  const x = await instantiateRuntime(await WebAssembly.compile(await (await fetch(`/${dir}/peak.wasm`)).arrayBuffer()));
  const src = x.tdm_bench_alloc(bytes);
  new Uint8Array(x.memory.buffer, src >>> 0, bytes).fill(1);
  const reads = Object.fromEntries([1, 2, 4, 8, 16].map((n) => [n, async () => x.tdm_bench_read(src, bytes, 1, n)]));
  const ms = await compare(reads, { rounds: 5, minMs: 200 });
  const best = Object.keys(ms).reduce((a, b) => (ms[b] < ms[a] ? b : a));
  return { gbs: bytes / ms[best] / 1e6, streams: Number(best), bytes, call: reads[best], byStreams: Object.fromEntries(Object.entries(ms).map(([n, t]) => [n, bytes / t / 1e6])) };
}

/** llama.cpp's buffers (model weights, KV cache, compute, output), summed from its load log. */
function llamaBuffers(lines) {
  let mib = 0;
  for (const l of lines) {
    const m = /buffer size\s*=\s*([\d.]+)\s*MiB/.exec(l);
    if (m) mib += Number(m[1]);
  }
  return mib * 2 ** 20;
}

/** One width: loads the three runtimes (in this fresh page), then times prefill and decode.
 * spec: { dir, width, files: { tandem, onnx, gguf }, config, fills, prefill, genTokens, rounds }. */
window.runWidth = async function runWidth(spec) {
  const { dir, files, config, fills, prefill, genTokens, rounds } = spec;
  const { num_hidden_layers: L, num_key_value_heads: HKV, hidden_size: HID, num_attention_heads: HEADS, vocab_size: VOCAB } = config;
  const DH = HID / HEADS;
  const out = { tandem: {}, ort: {}, wllama: {}, notes: [] };
  const read = await readBandwidth(dir, 256 << 20);
  out.read = { gbs: read.gbs, streams: read.streams, byStreams: read.byStreams, inRows: [] };

  // ---- load ----
  let t0 = performance.now();
  const model = await load(`/${dir}/${files.tandem}`, { threads: 1 });
  out.tandem.loadMs = performance.now() - t0;
  out.tandem.memoryBytes = model.memoryBytes;

  let before = new Set(memories);
  t0 = performance.now();
  const session = await ort.InferenceSession.create(`/${dir}/${files.onnx}`, { executionProviders: ['wasm'] });
  out.ort.loadMs = performance.now() - t0;
  out.ort.memoryBytes = memoryBytesSince(before);

  const logLines = [];
  const keep = (...a) => logLines.push(a.join(' '));
  const wllama = new Wllama({ default: '/node_modules/@wllama/wllama/esm/wasm/wllama.wasm' },
    { logger: { debug: keep, log: keep, warn: keep, error: keep } });
  t0 = performance.now();
  try {
    const blob = await (await fetch(`/${dir}/${files.gguf}`)).blob();
    await wllama.loadModel([blob], { n_ctx: spec.capacity, n_threads: 1, n_gpu_layers: 0, n_parallel: 1 });
    out.wllama.loadMs = performance.now() - t0;
    out.wllama.memoryBytes = llamaBuffers(logLines);
    out.wllama.threads = wllama.getNumThreads();
    out.wllama.multithread = wllama.isMultithread();
    out.wllama.version = Wllama.getLibllamaVersion?.();
  } catch (e) {
    out.wllama.error = `${e?.message ?? e}`.slice(0, 300);
  }
  const wllamaOk = !out.wllama.error;
  /** One raw completion over token ids (written as their pieces, which tokenize back to the same
   * ids: checked by the count), greedy; resolves to llama.cpp's own timings. */
  const complete = async (ids, maxTokens, cachePrompt) => {
    const r = await wllama.createCompletion({ prompt: ids.map(piece).join(''), max_tokens: maxTokens, temperature: 0, top_k: 1, ignore_eos: true, cache_prompt: cachePrompt });
    if (r.usage?.prompt_tokens !== ids.length) throw new Error(`wllama's prompt has ${r.usage?.prompt_tokens} tokens, not ${ids.length}: ${JSON.stringify(r.usage)}`);
    if (r.timings?.predicted_n !== maxTokens) throw new Error(`wllama generated ${r.timings?.predicted_n} tokens, not ${maxTokens}`);
    return r.timings;
  };

  // ---- the same function: transformers' greedy next token after a few prompts (bench/models/llm.py),
  // from tandem's float32 program and llama.cpp's F32 file (the quantized ones may differ) ----
  if (spec.width === 'float32') {
    const argmax = (a) => a.reduce((b, v, i) => (v > a[b] ? i : b), 0);
    out.sameNext = { cases: spec.nextTokens.length, tandem: 0, wllama: wllamaOk ? 0 : undefined };
    for (const c of spec.nextTokens) {
      await model.resetState();
      const logits = (await model.call('prefill', new BigInt64Array(c.prompt.map(BigInt)))).data;
      if (argmax(logits.subarray(logits.length - VOCAB)) === c.next) out.sameNext.tandem++;
      if (wllamaOk) {
        const r = await wllama.createCompletion({ prompt: c.prompt.map(piece).join(''), max_tokens: 1, temperature: 0, top_k: 1, cache_prompt: false });
        if (unpiece(r.choices[0].text) === c.next) out.sameNext.wllama++;
      }
    }
  }

  // ---- prefill of a `prefill`-token prompt ----
  const prompt = tokens(prefill, VOCAB);
  const promptT = new BigInt64Array(prompt.map(BigInt));
  const pre = await compare({
    tandem: async () => { await model.resetState(); await model.call('prefill', promptT); },
  }, { rounds: Math.min(rounds, 5), minMs: 0 });
  out.tandem.prefillMs = pre.tandem;
  if (wllamaOk) {
    const ms = [];
    for (let i = 0; i < Math.min(rounds, 5) + 1; i++) {
      const t = await complete(prompt, 1, false);
      if (t.prompt_n !== prefill) throw new Error(`wllama evaluated ${t.prompt_n} prompt tokens, not ${prefill}`);
      if (i) ms.push(t.prompt_ms); // the first is a warm-up
    }
    out.wllama.prefillMs = median(ms);
  }

  // ---- decode at each fill ----
  const chunks = model.methods.some((m) => m.name === 'prefill');
  const lengthStates = model.state.filter((s) => spec.positions.includes(s.name));
  out.tandem.decodeMs = {};
  out.ort.decodeMs = {};
  out.wllama.decodeMs = {};
  for (const fill of fills) {
    await model.resetState();
    for (let left = fill; left > 0;) {
      const c = chunks ? Math.min(left, spec.maxPrompt) : 1;
      if (c > 1) await model.call('prefill', new BigInt64Array(c).fill(5n));
      else await model.decode(new BigInt64Array([5n]));
      left -= c;
    }
    const { Tensor } = await import('/web/tandem.js');
    const lengths = lengthStates.map((s) => [s.name, new Tensor(s.dtype, new BigInt64Array(s.shape.reduce((a, b) => a * b, 1)).fill(BigInt(fill)), s.shape)]);
    const tok = new BigInt64Array([7n]);
    const feeds = {
      input_ids: new ort.Tensor('int64', new BigInt64Array([7n]), [1, 1]),
      position_ids: new ort.Tensor('int64', new BigInt64Array([BigInt(fill)]), [1, 1]),
    };
    for (let i = 0; i < L; i++) {
      for (const kv of ['key', 'value']) feeds[`past_key_values.${i}.${kv}`] = new ort.Tensor('float32', rand(HKV * fill * DH), [1, HKV, fill, DH]);
    }
    const ids = tokens(fill, VOCAB);
    const wMs = [];
    const fns = {
      tandem: async () => { for (const [name, t] of lengths) await model.writeState(name, t); await model.decode(tok); },
      ort: () => session.run(feeds),
      read: read.call,
    };
    // llama.cpp's decode: genTokens greedy tokens after the fill's prompt (cached after the first
    // call: only its last token is evaluated again, and not timed); its timings count genTokens
    // sampled tokens over genTokens - 1 decode steps (the first token comes from the prompt's logits).
    if (wllamaOk) fns.wllama = async () => { const t = await complete(ids, genTokens, true); wMs.push(t.predicted_ms / (t.predicted_n - 1)); };
    const ms = await compare(fns, { rounds, minMs: 200 });
    out.tandem.decodeMs[fill] = ms.tandem;
    out.ort.decodeMs[fill] = ms.ort;
    if (wllamaOk) out.wllama.decodeMs[fill] = median(wMs.slice(-rounds));
    out.read.inRows.push(read.bytes / ms.read / 1e6);
  }
  model.dispose();
  await session.release();
  if (wllamaOk) await wllama.exit();
  out.log = logLines.filter((l) => /buffer size|flash_attn|n_ctx|CPU|error|warn/i.test(l)).slice(0, 40);
  return out;
};

window.benchReady = true;
