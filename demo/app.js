// The demo page: a character LM whose KV cache is tandem state in a worker's wasm memory, and the
// original report's two-method model. Everything the page does goes through the public API.
import { load } from '../web/tandem.js';

const $ = (id) => document.getElementById(id);
const SAVE_KEY = 'tandem-demo-state';

// A tiny module using a SIMD128 instruction: if it does not validate, the runtime cannot load.
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]);

const ui = {
  setBusy(busy) {
    document.body.dataset.busy = busy ? '1' : '0';
    for (const id of ['generate', 'reset', 'save', 'restore']) $(id).disabled = busy;
    $('stop').disabled = !busy;
  },
  message(text) { $('message').textContent = text; },
};

let lm, meta, shared;
let logits = null; // the last position's logits: what to sample the next character from
let position = 0;
let stopRequested = false;

function encode(text) {
  return Array.from(text, (c) => {
    const i = meta.vocab.indexOf(c);
    return i >= 0 ? i : meta.vocab.indexOf('?');
  });
}

function sample(l) {
  if ($('greedy').checked) {
    let best = 0;
    for (let i = 1; i < l.length; i++) if (l[i] > l[best]) best = i;
    return best;
  }
  const t = Number($('temperature').value);
  let max = -Infinity;
  for (const v of l) max = Math.max(max, v);
  const p = Array.from(l, (v) => Math.exp((v - max) / t));
  let r = Math.random() * p.reduce((a, b) => a + b, 0);
  for (let i = 0; i < p.length; i++) if ((r -= p[i]) <= 0) return i;
  return p.length - 1;
}

function showPositions() {
  $('positions').textContent = String(position);
  $('fill').value = position / meta.capacity;
}

/** Runs the prompt through the model: prefill for whole chunks, decode for the rest. */
async function feed(tokens) {
  let i = 0;
  for (; i + meta.chunk <= tokens.length && position + meta.chunk <= meta.capacity; i += meta.chunk) {
    logits = (await lm.prefill(new BigInt64Array(tokens.slice(i, i + meta.chunk).map(BigInt)))).data;
    position += meta.chunk;
  }
  for (; i < tokens.length && position < meta.capacity; i++) {
    logits = (await lm.decode(new BigInt64Array([BigInt(tokens[i])]))).data;
    position++;
  }
  showPositions();
}

function appendOutput(text, cls) {
  const span = document.createElement('span');
  if (cls) span.className = cls;
  span.textContent = text;
  $('output').append(span);
}

async function generate() {
  ui.setBusy(true);
  stopRequested = false;
  try {
    if (logits === null) {
      // A fresh conversation starts from the prompt; otherwise Generate continues it.
      const prompt = $('prompt').value || '\n';
      appendOutput(prompt, 'prompt');
      await feed(encode(prompt));
    }
    const n = Number($('max-chars').value);
    const t0 = performance.now();
    let produced = 0;
    while (produced < n && !stopRequested) {
      if (position >= meta.capacity) {
        ui.message(`The KV cache is full (${meta.capacity} positions): Reset to start over.`);
        break;
      }
      const token = sample(logits);
      appendOutput(meta.vocab[token]);
      logits = (await lm.decode(new BigInt64Array([BigInt(token)]))).data;
      position++;
      produced++;
      const secs = (performance.now() - t0) / 1000;
      $('tps').textContent = (produced / secs).toFixed(1);
      showPositions();
    }
  } catch (e) {
    ui.message(`Error: ${e.message}`);
  } finally {
    ui.setBusy(false);
  }
}

async function reset() {
  await lm.reset(); // the model's own reset method: zeroes the caches and the position
  position = Number((await lm.readState('pos')).data[0]);
  logits = null;
  $('output').textContent = '';
  showPositions();
  ui.message('reset(): the KV cache and the position are cleared.');
}

const toBase64 = (bytes) => { let s = ''; for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000)); return btoa(s); };
const fromBase64 = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));

async function save() {
  const state = await lm.saveState();
  const record = { state: toBase64(state), logits: logits ? toBase64(new Uint8Array(logits.buffer.slice(0))) : null, html: $('output').innerHTML };
  localStorage.setItem(SAVE_KEY, JSON.stringify(record));
  ui.message(`Saved ${state.length} bytes of state (KV cache at ${position} positions) to this browser's storage.`);
}

async function restore() {
  const raw = localStorage.getItem(SAVE_KEY);
  if (!raw) { ui.message('Nothing saved yet.'); return; }
  const record = JSON.parse(raw);
  try {
    await lm.loadState(fromBase64(record.state));
  } catch (e) {
    ui.message(`Cannot restore: ${e.message}`);
    return;
  }
  logits = record.logits ? new Float32Array(fromBase64(record.logits).buffer) : null;
  $('output').innerHTML = record.html;
  position = Number((await lm.readState('pos')).data[0]);
  showPositions();
  ui.message(`Restored: the conversation continues from position ${position}.`);
}

async function sharedCall(method) {
  const x = Number($('shared-x').value);
  const y = await shared[method](new Float32Array([x]));
  const v = (await shared.readState('shared_module._v')).data[0];
  $('shared-v').textContent = String(v);
  const li = document.createElement('li');
  li.textContent = `await model.${method}(${x}) → [${y.data[0]}]   _v = ${v}`;
  $('shared-log').prepend(li);
}

async function main() {
  if (!WebAssembly.validate(SIMD_PROBE)) {
    $('nosimd').hidden = false;
    $('loading').hidden = true;
    return;
  }
  const t0 = performance.now();
  meta = await (await fetch('model.json')).json();
  lm = await load('model.tandem', {
    worker: true,
    onProgress: ({ loaded, total }) => {
      $('progress').value = total ? loaded / total : 0;
      $('progress-text').textContent = `${(loaded / 1e6).toFixed(1)}${total ? ` / ${(total / 1e6).toFixed(1)}` : ''} MB`;
    },
  });
  shared = await load('shared.tandem');
  $('load-time').textContent = `${Math.round(performance.now() - t0)} ms`;
  $('state-bytes').textContent = lm.stateBytes.toLocaleString('en-US');
  $('threads').textContent = `${lm.threads}${globalThis.crossOriginIsolated ? '' : ' (the page is not cross-origin isolated)'}`;
  $('capacity').textContent = String(meta.capacity);
  $('model-info').textContent = `${(meta.parameters / 1e6).toFixed(2)} M parameters, ${meta.layers} layers, trained ${meta.train_minutes} min on ${meta.corpus}`;
  $('loading').hidden = true;
  $('app').hidden = false;
  $('generate').onclick = generate;
  $('stop').onclick = () => { stopRequested = true; };
  $('reset').onclick = reset;
  $('save').onclick = save;
  $('restore').onclick = restore;
  $('temperature').oninput = () => { $('temperature-value').textContent = Number($('temperature').value).toFixed(2); };
  $('forward1').onclick = () => sharedCall('forward1');
  $('forward2').onclick = () => sharedCall('forward2');
  ui.setBusy(false);
  showPositions();
  document.body.dataset.ready = '1';
}

main().catch((e) => { $('loading').textContent = `Could not load the model: ${e.message}`; });
