// The demo page: a character LM whose KV cache is tandem state in a worker's wasm memory, and the
// original report's two-method model. Everything the page does goes through the public API; text
// comes from generate() (web/lm.js), which runs the model's prefill (chunks of 16) and decode.
import { load, generate, capabilities, position as positionOf } from '../web/tandem.js';

const $ = (id) => document.getElementById(id);
const SAVE_KEY = 'tandem-demo-state';

const ui = {
  setBusy(busy) {
    document.body.dataset.busy = busy ? '1' : '0';
    for (const id of ['generate', 'reset', 'save', 'restore']) $(id).disabled = busy;
    $('stop').disabled = !busy;
  },
  message(text) { $('message').textContent = text; },
};

let lm, meta, shared;
// The next character, sampled but neither shown nor in the KV cache yet: the next Generate starts
// from it. null: nothing sampled yet, Generate starts from the prompt.
let pending = null;
let position = 0;
let stopRequested = false;

function encode(text) {
  return Array.from(text, (c) => {
    const i = meta.vocab.indexOf(c);
    return i >= 0 ? i : meta.vocab.indexOf('?');
  });
}

function showPositions() {
  $('positions').textContent = String(position);
  $('fill').value = position / meta.capacity;
}

function appendOutput(text, cls) {
  const span = document.createElement('span');
  if (cls) span.className = cls;
  span.textContent = text;
  $('output').append(span);
}

/** Shows `n` characters. generate() appends each token to the KV cache before it samples the next,
 * so a character is shown once the next one has come: the last one sampled stays pending (the loop
 * breaks on it, so it is not appended). The next Generate shows it first and continues from it, as
 * one longer run would. */
async function run() {
  ui.setBusy(true);
  stopRequested = false;
  try {
    if (position >= meta.capacity) {
      ui.message(`The KV cache is full (${meta.capacity} positions): Reset to start over.`);
      return;
    }
    const n = Number($('max-chars').value);
    let prompt, shown = 0;
    if (pending === null) {
      const text = $('prompt').value || '\n';
      appendOutput(text, 'prompt');
      prompt = encode(text);
    } else {
      appendOutput(meta.vocab[pending]);
      prompt = [pending];
      shown = 1;
    }
    const seed = $('seed').value === '' ? crypto.getRandomValues(new Uint32Array(1))[0] : Number($('seed').value);
    const sampling = $('greedy').checked ? {} : { temperature: Number($('temperature').value), seed };
    const start = position + prompt.length;
    let appended = 0, t0;
    pending = null;
    const generation = generate(lm, prompt, { ...sampling, maxTokens: n + 1 - shown });
    for await (const id of generation) {
      if (pending !== null) { // in the cache now
        appendOutput(meta.vocab[pending]);
        shown++;
        appended++;
        position = start + appended;
        $('tps').textContent = (appended / ((performance.now() - t0) / 1000)).toFixed(1);
        showPositions();
      }
      t0 ??= performance.now();
      pending = id;
      if (shown === n || stopRequested) break;
    }
    position = await positionOf(lm);
    if (generation.reason === 'capacity') ui.message(`The KV cache is full (${meta.capacity} positions): Reset to start over.`);
  } catch (e) {
    ui.message(`Error: ${e.message}`);
  } finally {
    showPositions();
    ui.setBusy(false);
  }
}

async function reset() {
  await lm.reset(); // the model's own reset method: zeroes the caches and the position
  position = await positionOf(lm);
  pending = null;
  $('output').textContent = '';
  showPositions();
  ui.message('reset(): the KV cache and the position are cleared.');
}

const toBase64 = (bytes) => {
  let s = ''; for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i
  + 0x8000)); return btoa(s);
};
const fromBase64 = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));

async function save() {
  const state = await lm.saveState();
  const record = { state: toBase64(state), pending, html: $('output').innerHTML };
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
  pending = record.pending ?? null;
  $('output').innerHTML = record.html;
  position = await positionOf(lm);
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
  const caps = await capabilities();
  if (caps.simd === null) { // no SIMD128: no runtime build can load
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
  $('threads').textContent = `${lm.threads}${caps.threads.available ? '' : ` (${caps.threads.reason})`}`;
  $('capacity').textContent = String(meta.capacity);
  $('model-info').textContent = `${(meta.parameters / 1e6).toFixed(2)} M parameters, ${meta.layers} layers, ` +
    `trained ${meta.train_minutes} min on ${meta.corpus}`;
  $('loading').hidden = true;
  $('app').hidden = false;
  $('generate').onclick = run;
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
