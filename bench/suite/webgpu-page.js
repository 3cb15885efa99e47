// The WebGPU benchmark's page (bench/suite/webgpu.html, driven by bench/suite/webgpu.mjs): the SmolLM-135M-shaped
// Llama of bench/models/smollm.py, the streaming codec of bench/models/make_models.py and Kyutai's speech pipeline
// (the STT step and Mimi's steps: bench/models/stt.py, mimi.py) on tandem's WebGPU
// backend, beside tandem on wasm, onnxruntime-web's WebGPU execution provider (served from node_modules)
// and transformers.js (a bench-only install, build/transformersjs) on the same weights, no CDN, no hub. Counts, per call, the queue submissions and the bytes mapped
// back to the CPU (GPUQueue.submit and GPUBuffer.getMappedRange of MAP_READ buffers, wrapped in this page).
const { load } = await import('/web/tandem.js');
const { compare } = await import('/bench/suite/compare.mjs');

const counts = { submits: 0, readBytes: 0 };
const submit = GPUQueue.prototype.submit;
GPUQueue.prototype.submit = function (...a) {
  counts.submits++;
  return submit.apply(this, a);
};
const getMappedRange = GPUBuffer.prototype.getMappedRange;
GPUBuffer.prototype.getMappedRange = function (...a) {
  const r = getMappedRange.apply(this, a);
  if (this.usage & GPUBufferUsage.MAP_READ) counts.readBytes += r.byteLength; // not the uploads through mapped buffers
  return r;
};
/** What one call of fn submits and reads back. */
async function traffic(fn) {
  const s = counts.submits, b = counts.readBytes;
  await fn();
  return { submits: counts.submits - s, readBytes: counts.readBytes - b };
}

const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const ids = (n) => BigInt64Array.from({ length: n }, (_, i) => BigInt(300 + ((i * 7919) % 40000)));

window.adapterInfo = async () => {
  const adapter = await navigator.gpu?.requestAdapter();
  if (!adapter) return null;
  const i = adapter.info ?? {};
  return { vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description,
    maxBufferSize: adapter.limits.maxBufferSize, maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize };
};

/** tandem's SmolLM on `device`: prefill of `prefill` tokens, decode at a fill of `fill` positions. */
window.benchLM = async ({ dir, device, prefill, fill, rounds }) => {
  const t0 = performance.now();
  const model = await load(`/${dir}/smollm.tandem`, { device });
  const out = { device: model.device, deviceReason: model.deviceReason, loadMs: performance.now() - t0 };
  try {
    const positions = model.state.filter((s) => /cumulative_length/.test(s.name));
    const { Tensor } = await import('/web/tandem.js');
    // prefill: the first call compiles its pipelines (not timed)
    const ms = [];
    for (let r = 0; r <= rounds; r++) {
      await model.resetState();
      const t = performance.now();
      await model.call('prefill', ids(prefill));
      if (r) ms.push(performance.now() - t);
    }
    out.prefillMs = median(ms);
    await model.resetState();
    for (let left = fill; left > 0;) {
      const c = Math.min(left, model.metadata.max_prompt_len);
      await model.call('prefill', ids(c));
      left -= c;
    }
    // each decode step at the same fill: the lengths written back before it (as bench/suite/llm-page.js)
    const lengths = positions.map((s) => [s.name, new Tensor(s.dtype, new BigInt64Array(1).fill(BigInt(fill)), s.shape)]);
    const tok = new BigInt64Array([7n]);
    const step = async () => {
      for (const [name, t] of lengths) await model.writeState(name, t);
      await model.decode(tok);
    };
    await step();
    out.decode = await traffic(() => model.decode(tok));
    out.decodeTopk = await traffic(() => model.decode_topk(tok));
    out.decodeMs = (await compare({ step }, { rounds, minMs: 200 })).step;
    return out;
  } finally {
    model.dispose();
  }
};

/** onnxruntime-web's WebGPU EP on the same weights: one decode step at a fill of `fill`, the KV
 * cache fed from the CPU each step (its default: no gpu-buffer binding by the caller). */
window.benchOrt = async ({ dir, fill, rounds, layers, hkv, dh }) => {
  const ort = await import('/node_modules/onnxruntime-web/dist/ort.webgpu.min.mjs');
  ort.env.wasm.wasmPaths = '/node_modules/onnxruntime-web/dist/';
  ort.env.wasm.numThreads = 1;
  const t0 = performance.now();
  const session = await ort.InferenceSession.create(`/${dir}/smollm.onnx`, { executionProviders: ['webgpu'] });
  const out = { loadMs: performance.now() - t0 };
  try {
    const feeds = {
      input_ids: new ort.Tensor('int64', new BigInt64Array([7n]), [1, 1]),
      position_ids: new ort.Tensor('int64', new BigInt64Array([BigInt(fill)]), [1, 1]),
    };
    for (let i = 0; i < layers; i++) {
      for (const kv of ['key', 'value']) {
        feeds[`past_key_values.${i}.${kv}`] = new ort.Tensor('float32', Float32Array.from({ length: hkv * fill * dh }, () => Math.random() - 0.5),
          [1, hkv, fill, dh]);
      }
    }
    await session.run(feeds);
    out.decode = await traffic(() => session.run(feeds));
    out.decodeMs = (await compare({ step: () => session.run(feeds) }, { rounds, minMs: 200 })).step;
    return out;
  } finally {
    await session.release();
  }
};

/** tandem's greedy tokens from one-token prompts: `tokens[i]` from `prompts[i]` (what transformers.js's must equal). */
window.tandemGreedy = async ({ dir, device, prompts, tokens }) => {
  const model = await load(`/${dir}/smollm.tandem`, { device });
  const argmax = (a) => a.reduce((best, x, i) => (x > a[best] ? i : best), 0);
  try {
    const vocab = model.methods.find((m) => m.name === 'decode').outputs[0].shape.at(-1);
    const last = (t) => t.data.subarray(t.data.length - vocab);
    const all = [];
    for (const [i, p] of prompts.entries()) {
      await model.resetState();
      const out = [argmax(last(await model.call('prefill', new BigInt64Array([BigInt(p)]))))];
      while (out.length < tokens[i]) out.push(argmax(last(await model.decode(new BigInt64Array([BigInt(out.at(-1))])))));
      all.push(out);
    }
    return all;
  } finally {
    model.dispose();
  }
};

/** transformers.js (@huggingface/transformers, bench-only install in `tjs`, its bundle with onnxruntime-web
 * inside) on the same ONNX: AutoModelForCausalLM from the local folder `dir`/smollm-tjs (config.json,
 * generation_config.json, onnx/model.onnx = smollm.onnx; no hub), device 'webgpu', greedy generate of
 * `tokens[i]` tokens from each one-token prompt `prompts[i]`. The first prompt's steps are timed and counted
 * between its streamer's calls (its first step, which compiles the shaders, left out). */
window.benchTjs = async ({ dir, tjs, prompts, tokens }) => {
  const T = await import(`/${tjs}/node_modules/@huggingface/transformers/dist/transformers.js`);
  T.env.allowRemoteModels = false;
  T.env.allowLocalModels = true;
  T.env.localModelPath = `/${dir}/`;
  T.env.useBrowserCache = false;
  T.env.backends.onnx.wasm.wasmPaths = `/${tjs}/node_modules/onnxruntime-web/dist/`;
  T.env.backends.onnx.wasm.numThreads = 1;
  const t0 = performance.now();
  const model = await T.AutoModelForCausalLM.from_pretrained('smollm-tjs', { device: 'webgpu', dtype: 'fp32' });
  const out = { loadMs: performance.now() - t0, version: T.env.version };
  try {
    const marks = [];
    const streamer = { put: () => marks.push({ t: performance.now(), ...counts }), end: () => {} };
    out.tokens = [];
    for (const [i, p] of prompts.entries()) {
      const seq = await model.generate({ input_ids: new T.Tensor('int64', new BigInt64Array([BigInt(p)]), [1, 1]),
        max_new_tokens: tokens[i], do_sample: false, eos_token_id: null, ...(i ? {} : { streamer }) });
      out.tokens.push(Array.from(seq.data.slice(1), Number));
    }
    const steps = marks.slice(1).map((m, i) => ({ ms: m.t - marks[i].t, submits: m.submits - marks[i].submits,
      readBytes: m.readBytes - marks[i].readBytes }));
    out.firstStepMs = steps[0]?.ms;
    const later = steps.slice(1);
    out.decodeMs = later.length ? median(later.map((s) => s.ms)) : undefined;
    out.decode = later.at(-1);
    return out;
  } finally {
    await model.dispose();
  }
};

/** One encode_step and one decode_step of the streaming codec (80 ms of 24 kHz audio) on `device`. */
window.benchCodec = async ({ dir, device, rounds }) => {
  const model = await load(`/${dir}/codec.tandem`, { device });
  try {
    const enc = model.methods.find((m) => m.name === 'encode_step').inputs[0].shape;
    const dec = model.methods.find((m) => m.name === 'decode_step').inputs[0].shape;
    const x = Float32Array.from({ length: enc.reduce((a, b) => a * b, 1) }, (_, i) => Math.sin(i / 7) * 0.3);
    const z = Float32Array.from({ length: dec.reduce((a, b) => a * b, 1) }, (_, i) => Math.cos(i / 5) * 0.5);
    const fns = { encode: () => model.encode_step(x), decode: () => model.decode_step(z) };
    await fns.encode();
    await fns.decode();
    const out = { device: model.device, deviceReason: model.deviceReason, encodeTraffic: await traffic(fns.encode) };
    Object.assign(out, await compare(fns, { rounds, minMs: 200 }));
    return out;
  } finally {
    model.dispose();
  }
};

/** Kyutai's speech pipeline (bench/models/stt.py's stt_VARIANT.tandem: Mimi's encode of an 80 ms frame + the
 * STT's LMGen.step as one `step`; bench/models/mimi.py's mimi*.tandem: Mimi's encode_step and decode_step) on
 * `device` (wasm: one thread), over the frames of stt_frames.json in stream order: `warm` frames untimed (the
 * first compiles the GPU's pipelines; the caches fill), then `frames` timed, each call awaited with its output
 * read back (a stream's latency per frame). Returns the medians (ms) and each frame's result: the STT's text
 * token, or Mimi's codes (decode_step takes them back). */
window.benchSpeech = async ({ dir, file, device, warm, frames }) => {
  const { inputs } = await (await fetch(`/${dir}/stt_frames.json`)).json();
  const t0 = performance.now();
  const model = await load(`/${dir}/${file}`, { device, threads: 1 });
  const out = { device: model.device, deviceReason: model.deviceReason, loadMs: performance.now() - t0, results: [] };
  try {
    const stt = model.methods.some((m) => m.name === 'step');
    const ms = { step: [], encode: [], decode: [] };
    for (let i = 0; i < warm + frames; i++) {
      const x = Float32Array.from(inputs[i % inputs.length]);
      const a = performance.now();
      if (stt) {
        out.results.push(Number((await model.step(x)).data[0]));
        if (i >= warm) ms.step.push(performance.now() - a);
      } else {
        const codes = await model.encode_step(x);
        const b = performance.now();
        await model.decode_step(codes);
        if (i >= warm) {
          ms.encode.push(b - a);
          ms.decode.push(performance.now() - b);
        }
        out.results.push(Array.from(codes.data, Number));
      }
    }
    for (const [k, v] of Object.entries(ms)) if (v.length) out[k] = median(v);
    out.wasmBytes = model.memoryBytes;
    return out;
  } finally {
    model.dispose();
  }
};

window.benchReady = true;
