// The audio demo page (demo/audio.html): Silero VAD (build/demo/silero_vad.tandem, made by
// demo/build_audio.py) in a Web Worker, fed by streamAudio from the bundled recording (offline, as
// fast as the model goes) or the microphone (live; chunks dropped while the model is busy).
// Draws the waveform, the speech probability and the segments; window.audioDemo is for the tests.
import { load, streamAudio } from '/web/tandem.js';
import { speechSegments } from './segments.js';

const $ = (id) => document.getElementById(id);
const model = await load('/build/demo/silero_vad.tandem', { worker: true });
const { sample_rate: RATE, chunk: CHUNK, context: CONTEXT } = model.metadata;
const recording = await wavSamples(await (await fetch('/build/demo/recording.wav')).arrayBuffer());

/** Mono 16-bit PCM WAV → Float32Array at its rate (only what build_audio.py writes). */
function wavSamples(buffer) {
  const view = new DataView(buffer);
  let at = 12, rate = 0, data = null;
  while (at + 8 <= view.byteLength) {
    const id = String.fromCharCode(...new Uint8Array(buffer, at, 4)), size = view.getUint32(at + 4, true);
    if (id === 'fmt ') {
      if (view.getUint16(at + 8, true) !== 1 || view.getUint16(at + 10, true) !== 1
        || view.getUint16(at + 22, true) !== 16) throw new Error('recording.wav: not mono 16-bit PCM');
      rate = view.getUint32(at + 12, true);
    } else if (id === 'data') {
      data = new Int16Array(buffer.slice(at + 8, at + 8 + size));
    }
    at += 8 + size + (size & 1);
  }
  if (!data || rate !== RATE) throw new Error(`recording.wav: no data, or not ${RATE} Hz`);
  return Float32Array.from(data, (v) => v / 32768);
}

let run = null; // { probs, wave, ms, dropped, length, live }
let controller = null;

async function stream(source, options) {
  await model.reset();
  run = { probs: [], wave: [], ms: [], dropped: 0, length: source instanceof Float32Array ? source.length : 0,
    live: !(source instanceof Float32Array) };
  draw(); // clears the last run's plot and figures
  const t0 = performance.now();
  let pending = false;
  const summary = await streamAudio(model, 'forward', source, {
    sampleRate: RATE, chunk: CHUNK, context: CONTEXT, ...options,
    onResult: (r) => {
      run.probs.push(r.output.data[0]);
      run.ms.push(r.ms);
      let lo = 0, hi = 0; // the chunk's extent, for the waveform
      for (let i = CONTEXT; i < r.input.length; i++) { lo = Math.min(lo, r.input[i]); hi = Math.max(hi, r.input[i]); }
      run.wave.push([lo, hi]);
      if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; draw(); }); }
    },
    onDrop: () => { run.dropped++; },
  });
  run.wallMs = performance.now() - t0;
  if (run.live) run.length = summary.chunks * CHUNK;
  run.segments = speechSegments(run.probs, { sampleRate: RATE, chunk: CHUNK, length: run.length });
  draw();
  return { summary, probs: run.probs, segments: run.segments, wallMs: run.wallMs, audioSeconds: run.length / RATE, chunkMs: run.ms };
}

function draw() {
  const canvas = $('plot'), g = canvas.getContext('2d'), W = canvas.width, H = canvas.height;
  g.fillStyle = '#0f172a';
  g.fillRect(0, 0, W, H);
  if (!run) return;
  const n = run.probs.length;
  const span = run.live ? Math.max(n, Math.round((10 * RATE) / CHUNK)) : Math.ceil(run.length / CHUNK); // chunks across the width
  const first = run.live ? Math.max(0, n - span) : 0;
  const x = (chunk) => ((chunk - first) / span) * W;
  const segments = run.segments ?? speechSegments(run.probs, { sampleRate: RATE, chunk: CHUNK, length: n * CHUNK });
  g.fillStyle = 'rgba(34, 197, 94, 0.25)';
  for (const [s, e] of segments) g.fillRect(x(s / CHUNK), 0, x(e / CHUNK) - x(s / CHUNK), H);
  g.strokeStyle = '#64748b';
  g.beginPath();
  for (let i = first; i < n; i++) {
    const [lo, hi] = run.wave[i];
    g.moveTo(x(i), H * 0.3 - hi * H * 0.28);
    g.lineTo(x(i), H * 0.3 - lo * H * 0.28);
  }
  g.stroke();
  g.strokeStyle = '#475569';
  g.setLineDash([4, 4]);
  g.beginPath();
  g.moveTo(0, H - 0.5 * H * 0.4 - 4);
  g.lineTo(W, H - 0.5 * H * 0.4 - 4);
  g.stroke();
  g.setLineDash([]);
  g.strokeStyle = '#fbbf24';
  g.beginPath();
  for (let i = first; i < n; i++) g[i === first ? 'moveTo' : 'lineTo'](x(i + 0.5), H - run.probs[i] * H * 0.4 - 4);
  g.stroke();
  const audio = (n * CHUNK) / RATE, mean = run.ms.reduce((a, b) => a + b, 0) / Math.max(1, n);
  $('audio-seconds').textContent = `${audio.toFixed(1)} s`;
  $('chunk-ms').textContent = `${mean.toFixed(2)} ms (max ${Math.max(0, ...run.ms).toFixed(1)})`;
  $('dropped').textContent = String(run.dropped);
  $('wall').textContent = run.wallMs === undefined ? '…' : `${(run.wallMs / 1000).toFixed(2)} s`;
  $('speed').textContent = run.live ? 'live' : run.wallMs === undefined ? '…' : `${((audio * 1000) / run.wallMs).toFixed(1)}×`;
  $('segments').textContent = segments.length
    ? `speech: ${segments.map(([s, e]) => `${(s / RATE).toFixed(2)}–${(e / RATE).toFixed(2)} s`).join(', ')}` : 'no speech yet';
}

function busy(on) {
  $('run-recording').disabled = on;
  $('mic').disabled = on;
  $('stop').disabled = !on;
}

$('run-recording').onclick = async () => {
  busy(true);
  $('message').textContent = '';
  try { await stream(recording, { backpressure: 'queue' }); } finally { busy(false); }
};
$('mic').onclick = async () => {
  busy(true);
  controller = new AbortController();
  try {
    const mic = await navigator.mediaDevices.getUserMedia({ audio: true });
    $('message').textContent = 'listening…';
    await stream(mic, { backpressure: 'drop', maxQueue: 2, signal: controller.signal });
    mic.getTracks().forEach((t) => t.stop());
    $('message').textContent = '';
  } catch (e) {
    $('message').textContent = `microphone: ${e.message}`;
  } finally {
    busy(false);
  }
};
$('stop').onclick = () => controller?.abort();

$('model-info').textContent = `${model.simd}, ${(model.stateBytes / 1024).toFixed(1)} KiB of state, ${RATE / 1000} kHz, ${CHUNK}-sample ` +
  `chunks`;
$('loading').hidden = true;
$('app').hidden = false;
window.audioDemo = { runRecording: () => stream(recording, { backpressure: 'queue' }), ready: true };
