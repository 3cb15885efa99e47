// The audio demo page (demo/audio.html): Silero VAD (build/demo/silero_vad.tandem, made by
// demo/build_audio.py) in a Web Worker, fed by streamAudio from the bundled recording (offline, as
// fast as the model goes) or the microphone (live; chunks dropped while the model is busy).
// Draws the waveform, the speech probability and the segments. A second panel streams the same
// audio (resampled to 24 kHz) through a codec (build/demo/codec.tandem: a small Mimi from `moshi`
// with random weights), encode_step then decode_step per 80 ms frame, its streaming state kept in
// the program, draws the decoded waveform under the input and plays it back. A third panel
// (demo/stt-panel.js) streams it through Kyutai's streaming speech-to-text. window.audioDemo is for the
// tests.
import { load, streamAudio } from '/web/tandem.js';
import { speechSegments } from './segments.js';
import { sttPanel } from './stt-panel.js';

const $ = (id) => document.getElementById(id);
const model = await load('/build/demo/silero_vad.tandem', { worker: true });
const { sample_rate: RATE, chunk: CHUNK, context: CONTEXT } = model.metadata;
const codec = await load('/build/demo/codec.tandem', { worker: true });
const { sample_rate: CODEC_RATE, chunk: FRAME } = codec.metadata;
const recording = await wavSamples(await (await fetch('/build/demo/recording.wav')).arrayBuffer());

/** Mono 16-bit PCM WAV → Float32Array at its rate (only what build_audio.py writes). */
function wavSamples(buffer) {
  const view = new DataView(buffer);
  let at = 12, rate = 0, data = null;
  while (at + 8 <= view.byteLength) {
    const id = String.fromCharCode(...new Uint8Array(buffer, at, 4)), size = view.getUint32(at + 4, true);
    if (id === 'fmt ') {
      const pcm16 = view.getUint16(at + 8, true) === 1 && view.getUint16(at + 10, true) === 1 && view.getUint16(at + 22, true) === 16;
      if (!pcm16) throw new Error('recording.wav: not mono 16-bit PCM');
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
  // the new run replaces the last one's plot and figures before the first await, so what the
  // page shows once a caller says 'listening…' is this run's
  const file = source instanceof Float32Array;
  run = { probs: [], wave: [], ms: [], dropped: 0, length: file ? source.length : 0, live: !file };
  draw();
  await model.reset();
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
  const spans = segments.map(([s, e]) => `${(s / RATE).toFixed(2)}–${(e / RATE).toFixed(2)} s`);
  $('segments').textContent = segments.length ? `speech: ${spans.join(', ')}` : 'no speech yet';
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
    const streaming = stream(mic, { backpressure: 'drop', maxQueue: 2, signal: controller.signal });
    $('message').textContent = 'listening…';
    await streaming;
    mic.getTracks().forEach((t) => t.stop());
    $('message').textContent = '';
  } catch (e) {
    $('message').textContent = `microphone: ${e.message}`;
  } finally {
    busy(false);
  }
};
$('stop').onclick = () => controller?.abort();

// The codec panel: per frame, encode_step (codes) then decode_step (samples); the decodes are chained
// after the encodes, in order, so both run while the next frame is cut.
let codecRun = null; // { input: [[lo, hi]], output: [[lo, hi]], decoded: Float32Array[], ms, frames, live, wallMs }
let codecController = null;

const extent = (a) => { let lo = 0, hi = 0; for (const v of a) { lo = Math.min(lo, v); hi = Math.max(hi, v); } return [lo, hi]; };

async function streamCodec(source, options) {
  const file = source instanceof Float32Array; // as in stream(): the new run shows before the first await
  const frames = file ? Math.ceil((source.length * CODEC_RATE) / RATE / FRAME) : 0;
  codecRun = { input: [], output: [], decoded: [], inputs: [], ms: [], live: !file, frames };
  drawCodec();
  await codec.reset();
  const t0 = performance.now();
  let decoding = Promise.resolve(), pending = false;
  const run = codecRun;
  const summary = await streamAudio(codec, 'encode_step', source, {
    sampleRate: CODEC_RATE, inputRate: RATE, chunk: FRAME, ...options,
    onResult: (r) => {
      decoding = decoding.then(async () => {
        const t = performance.now();
        const pcm = await codec.call('decode_step', r.output);
        run.decoded.push(pcm.data);
        if (options.keepInputs) run.inputs.push(r.input);
        run.input.push(extent(r.input));
        run.output.push(extent(pcm.data));
        run.ms.push(r.ms + performance.now() - t);
        if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; drawCodec(); }); }
      });
    },
  });
  await decoding;
  run.wallMs = performance.now() - t0;
  if (run.live) run.frames = run.decoded.length;
  drawCodec();
  $('play-codec').disabled = run.decoded.length === 0;
  return { summary, wallMs: run.wallMs, frames: run.decoded.length, chunkMs: run.ms };
}

function drawCodec() {
  const canvas = $('codec-plot'), g = canvas.getContext('2d'), W = canvas.width, H = canvas.height;
  g.fillStyle = '#0f172a';
  g.fillRect(0, 0, W, H);
  if (!codecRun) return;
  const n = codecRun.input.length, span = codecRun.live ? Math.max(n, Math.round((10 * CODEC_RATE) / FRAME)) : Math.max(1, codecRun.frames);
  const first = codecRun.live ? Math.max(0, n - span) : 0;
  const scale = Math.max(1e-9, ...codecRun.output.map(([lo, hi]) => Math.max(-lo, hi))); // random weights: any loudness
  for (const [rows, mid, color, k] of [[codecRun.input, H * 0.25, '#64748b', 1], [codecRun.output, H * 0.75, '#38bdf8', 1 / scale]]) {
    g.strokeStyle = color;
    g.beginPath();
    for (let i = first; i < n; i++) {
      const x = ((i - first + 0.5) / span) * W, [lo, hi] = rows[i];
      g.moveTo(x, mid - hi * k * H * 0.22);
      g.lineTo(x, mid - lo * k * H * 0.22);
    }
    g.stroke();
  }
  const mean = codecRun.ms.reduce((a, b) => a + b, 0) / Math.max(1, n), frameMs = (1000 * FRAME) / CODEC_RATE;
  $('codec-seconds').textContent = `${((n * FRAME) / CODEC_RATE).toFixed(1)} s`;
  $('codec-ms').textContent = n ? `${mean.toFixed(1)} ms (max ${Math.max(...codecRun.ms).toFixed(1)})` : '–';
  $('codec-realtime').textContent = n ? `${((100 * mean) / frameMs).toFixed(0)}% of ${frameMs} ms` : '–';
  $('codec-wall').textContent = codecRun.wallMs === undefined ? '…' : `${(codecRun.wallMs / 1000).toFixed(2)} s`;
}

/** The decoded audio as one Float32Array at the codec's rate. */
function decodedSamples() {
  const parts = codecRun?.decoded ?? [], out = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}

let playback = null;
async function playDecoded() {
  const samples = decodedSamples();
  let peak = 0;
  for (const v of samples) peak = Math.max(peak, Math.abs(v));
  const ctx = playback?.context ?? new AudioContext();
  await ctx.resume();
  playback?.source?.stop();
  const buffer = ctx.createBuffer(1, samples.length, CODEC_RATE);
  const gain = peak > 0.9 ? 0.9 / peak : 1; // random weights: keep it from clipping
  buffer.getChannelData(0).set(gain === 1 ? samples : samples.map((v) => v * gain));
  const source = ctx.createBufferSource();
  source.buffer = buffer;
  source.connect(ctx.destination);
  source.start();
  playback = { context: ctx, source };
  window.audioDemo.played = { frames: codecRun.decoded.length, samples: samples.length, sampleRate: buffer.sampleRate, state: ctx.state };
}

function codecBusy(on) {
  $('codec-recording').disabled = on;
  $('codec-mic').disabled = on;
  $('codec-stop').disabled = !on;
  if (on) $('play-codec').disabled = true;
}

$('codec-recording').onclick = async () => {
  codecBusy(true);
  $('codec-message').textContent = '';
  try { await streamCodec(recording, { backpressure: 'queue' }); } finally { codecBusy(false); }
};
$('codec-mic').onclick = async () => {
  codecBusy(true);
  codecController = new AbortController();
  try {
    const mic = await navigator.mediaDevices.getUserMedia({ audio: true });
    const streaming = streamCodec(mic, { backpressure: 'drop', maxQueue: 2, signal: codecController.signal });
    $('codec-message').textContent = 'listening…';
    await streaming;
    mic.getTracks().forEach((t) => t.stop());
    $('codec-message').textContent = '';
  } catch (e) {
    $('codec-message').textContent = `microphone: ${e.message}`;
  } finally {
    codecBusy(false);
  }
};
$('codec-stop').onclick = () => codecController?.abort();
$('play-codec').onclick = () => playDecoded().catch((e) => { $('codec-message').textContent = `playback: ${e.message}`; });
$('codec-info').textContent = `${codec.simd}, ${(codec.stateBytes / 1024).toFixed(1)} KiB of state, `
  + `${CODEC_RATE / 1000} kHz, ${FRAME}-sample frames (${(1000 * FRAME) / CODEC_RATE} ms)`;

$('model-info').textContent = `${model.simd}, ${(model.stateBytes / 1024).toFixed(1)} KiB of state, `
  + `${RATE / 1000} kHz, ${CHUNK}-sample chunks`;
const stt = await sttPanel(recording, RATE);
$('loading').hidden = true;
$('app').hidden = false;
window.audioDemo = {
  ...stt,
  runRecording: () => stream(recording, { backpressure: 'queue' }),
  // the codec on the recording: its frames (24 kHz, as given to encode_step) and the decoded samples, as arrays
  runCodec: async () => {
    codecBusy(true);
    try {
      const r = await streamCodec(recording, { backpressure: 'queue', keepInputs: true });
      return { ...r, inputs: codecRun.inputs.map((a) => Array.from(a)), decoded: Array.from(decodedSamples()) };
    } finally { codecBusy(false); }
  },
  played: null,
  ready: true,
};
