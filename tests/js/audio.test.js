// streamAudio (web/audio.js) in Node, on a small stateful streaming model shaped like Silero VAD
// (tests/fixtures/make.py's audio_vad: 64 context + 256 new samples a call, 16 kHz): its results
// equal calling the method by hand on the same chunks, from a Float32Array, an AudioBuffer and a
// ReadableStream, inline and in a worker; the resampler equals scipy.signal.resample_poly and
// passes a hand-checked tone; abort stops it; the 'drop' policy drops and reports.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { load, streamAudio, Resampler, Tensor } from '../../node/index.js';
import { FIXTURES, fixture } from './helpers.js';

const VAD = `${FIXTURES}/audio_vad.tandem`;
const CHUNK = 256, CONTEXT = 64, RATE = 16000;
const { cases: RESAMPLE } = JSON.parse(readFileSync(`${FIXTURES}/audio_resample.json`, 'utf8'));

/** A deterministic test signal: tones and a little noise. */
function signal(n, rate, seed = 1) {
  let s = seed;
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    x[i] = 0.5 * Math.sin((2 * Math.PI * 300 * i) / rate) * (i % 4000 < 2000 ? 1 : 0.05) + 0.05 * (s / 2 ** 31 - 0.5);
  }
  return x;
}

/** The chunks streamAudio should cut from samples at the model's rate: each 64 samples before it
 * (zeros before the start) and 256 new ones, the last one padded with zeros. */
function chunksByHand(x) {
  const padded = new Float32Array(CONTEXT + Math.ceil(x.length / CHUNK) * CHUNK);
  padded.set(x, CONTEXT);
  const out = [];
  for (let at = 0; at + CONTEXT < padded.length; at += CHUNK) out.push(padded.slice(at, at + CONTEXT + CHUNK));
  return out;
}

async function byHand(chunks, options = {}) {
  const m = await load(VAD, options);
  const outs = [];
  for (const c of chunks) outs.push((await m.forward(new Tensor('float32', c, [1, CHUNK + CONTEXT]))).data[0]);
  m.dispose();
  return outs;
}

function assertNear(got, want, tol, where) {
  assert.equal(got.length, want.length, `${where}: length`);
  for (let i = 0; i < want.length; i++) assert.ok(Math.abs(got[i] - want[i]) <= tol, `${where}[${i}]: ${got[i]}, expected ${want[i]}`);
}

function readable(blocks, { pace = 0, onCancel } = {}) {
  let i = 0;
  return new ReadableStream({
    async pull(c) {
      if (pace) await new Promise((r) => setTimeout(r, pace));
      if (i < blocks.length) c.enqueue(blocks[i++]);
      else c.close();
    },
    cancel: onCancel,
  });
}

function pieces(x, sizes) {
  const out = [];
  for (let at = 0, k = 0; at < x.length; k++) {
    const n = sizes[k % sizes.length];
    out.push(x.slice(at, at + n));
    at += n;
  }
  return out;
}

test('the resampler equals scipy.signal.resample_poly, fed whole or in pieces of any size', () => {
  for (const c of RESAMPLE) {
    const x = Float32Array.from(c.input);
    for (const sizes of [[x.length], [1, 7, 100, 513], [64]]) {
      const r = new Resampler(c.from, c.to);
      const parts = pieces(x, sizes).map((p) => r.push(p));
      parts.push(r.flush());
      const y = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of parts) { y.set(p, at); at += p.length; }
      assertNear(y, c.output, 2e-6, `${c.from} -> ${c.to} Hz in pieces of ${sizes}`);
    }
  }
});

test('resampling a tone: in band it is the same tone at the new rate, above the new Nyquist it is gone', () => {
  const from = 44100, to = 16000, n = 44100;
  const tone = (f, rate, count) => Float32Array.from({ length: count }, (_, i) => Math.sin((2 * Math.PI * f * i) / rate));
  const run = (x) => {
    const r = new Resampler(from, to); const a = r.push(x); const b = r.flush(); const y = new Float32Array(a.length
    + b.length); y.set(a); y.set(b, a.length); return y;
  };
  const y = run(tone(1000, from, n));
  assert.equal(y.length, Math.ceil((n * to) / from));
  const want = tone(1000, to, y.length);
  let worst = 0;
  for (let i = 500; i < y.length - 500; i++) worst = Math.max(worst, Math.abs(y[i] - want[i])); // away from the edges
  assert.ok(worst < 2e-3, `1 kHz tone: worst error ${worst}`);
  const alias = run(tone(10000, from, n)); // above 8 kHz: would alias to 6 kHz without the filter
  let energy = 0;
  for (let i = 500; i < alias.length - 500; i++) energy += alias[i] * alias[i];
  const rms = Math.sqrt(energy / (alias.length - 1000));
  assert.ok(rms < 0.01 * Math.SQRT1_2, `10 kHz tone after resampling to 16 kHz: rms ${rms} (not 40 dB down)`);
});

test('a Float32Array streams in exact chunks with context; results equal calling the method by hand, inline and in a worker', async () => {
  const x = signal(RATE + 100, RATE); // 1 s and a bit: the last chunk is partial, padded
  const chunks = chunksByHand(x);
  const want = await byHand(chunks);
  for (const worker of [false, true]) {
    const m = await load(VAD, { worker });
    const got = [];
    const summary = await streamAudio(m, 'forward', x, { context: CONTEXT, onResult: (r) => got.push(r) });
    assert.deepEqual(summary, { chunks: chunks.length, results: chunks.length, dropped: 0, seconds: (chunks.length * CHUNK) / RATE,
      reason: 'end' });
    assert.deepEqual(got.map((r) => r.index), chunks.map((_, i) => i));
    assert.deepEqual(got.map((r) => r.input), chunks, 'the chunks given to the method');
    assert.deepEqual(got.map((r) => r.output.data[0]), want, `worker: ${worker}`);
    assert.deepEqual(got.map((r) => [r.start, r.end]), chunks.map((_, i) => [(i * CHUNK) / RATE, ((i + 1) * CHUNK) / RATE]));
    assert.ok(got.every((r) => r.ms >= 0 && r.output.shape.join() === '1,1'));
    // tail: 'drop' leaves the partial chunk out
    await m.reset();
    const dropTail = await streamAudio(m, 'forward', x, { context: CONTEXT, tail: 'drop' });
    assert.equal(dropTail.chunks, Math.floor(x.length / CHUNK));
    m.dispose();
  }
});

test('an AudioBuffer is mixed to mono; a ReadableStream at 48 kHz is resampled as resample_poly does', async () => {
  const left = signal(8000, RATE, 1), right = signal(8000, RATE, 2);
  const buffer = { sampleRate: RATE, numberOfChannels: 2, length: left.length, duration: left.length / RATE,
    getChannelData: (c) => [left, right][c] };
  const monoSignal = left.map((v, i) => (v + right[i]) / 2);
  const m = await load(VAD);
  const fromBuffer = [];
  await streamAudio(m, 'forward', buffer, { context: CONTEXT, onResult: (r) => fromBuffer.push(r.output.data[0]) });
  assert.deepEqual(fromBuffer, await byHand(chunksByHand(monoSignal)));

  const c = RESAMPLE.find((k) => k.from === 48000 && k.to === 16000);
  await m.reset();
  const fromStream = [];
  const summary = await streamAudio(m, 'forward', readable(pieces(Float32Array.from(c.input), [100, 333, 1])), {
    inputRate: 48000, context: CONTEXT, onResult: (r) => fromStream.push(r.output.data[0]),
  });
  assert.equal(summary.chunks, Math.ceil(c.output.length / CHUNK));
  assertNear(fromStream, await byHand(chunksByHand(Float32Array.from(c.output))), 1e-5, '48 kHz stream');
  m.dispose();
});

test('an AbortSignal stops a live stream: it resolves as aborted, no result after it, the stream is cancelled', async () => {
  const m = await load(VAD, { worker: true });
  const controller = new AbortController();
  let cancelled = false, afterAbort = 0, results = 0;
  let i = 0;
  const endless = new ReadableStream({
    async pull(c) { await new Promise((r) => setTimeout(r, 2)); c.enqueue(signal(CHUNK, RATE, ++i)); },
    cancel() { cancelled = true; },
  });
  const summary = await streamAudio(m, 'forward', endless, {
    context: CONTEXT,
    signal: controller.signal,
    onResult: () => { if (controller.signal.aborted) afterAbort++; if (++results === 3) controller.abort(); },
  });
  assert.equal(summary.reason, 'aborted');
  assert.equal(summary.results, 3);
  assert.equal(afterAbort, 0);
  await new Promise((r) => setTimeout(r, 20));
  assert.ok(cancelled, 'the source stream was cancelled');
  assert.equal(results, 3);
  // an already-aborted signal: nothing runs
  const none = await streamAudio(m, 'forward', signal(RATE, RATE),
    { context: CONTEXT, signal: AbortSignal.abort(), onResult: () => assert.fail('ran') });
  assert.deepEqual(none, { chunks: 0, results: 0, dropped: 0, seconds: 0, reason: 'aborted' });
  m.dispose();
});

test("backpressure 'drop' drops chunks while the model is busy and reports them; 'queue' runs them all", async () => {
  const x = signal(RATE * 2, RATE);
  const chunks = chunksByHand(x);
  const blocks = pieces(x, [CHUNK]);
  const fast = () => new ReadableStream({ start(c) { for (const b of blocks) c.enqueue(b); c.close(); } }); // all at once
  const m = await load(VAD, { worker: true });
  const got = [], drops = [];
  const summary = await streamAudio(m, 'forward', fast(), {
    context: CONTEXT, backpressure: 'drop', maxQueue: 1, onResult: (r) => got.push(r), onDrop: (d) => drops.push(d),
  });
  assert.equal(summary.chunks, chunks.length);
  assert.ok(summary.dropped > 0, 'some chunks were dropped');
  assert.equal(summary.dropped, drops.length);
  assert.equal(summary.results + summary.dropped, chunks.length);
  assert.deepEqual([...got.map((r) => r.index), ...drops.map((d) => d.index)].sort((a, b) => a - b), chunks.map((_, i) => i));
  assert.deepEqual(drops.map((d) => [d.start, d.end]), drops.map((d) => [(d.index * CHUNK) / RATE, ((d.index + 1) * CHUNK) / RATE]));
  // the model saw only the delivered chunks, in order, each with the audio's own context before it
  assert.deepEqual(got.map((r) => r.input), got.map((r) => chunks[r.index]));
  assert.deepEqual(got.map((r) => r.output.data[0]), await byHand(got.map((r) => chunks[r.index])));

  await m.reset();
  const all = [];
  const queued = await streamAudio(m, 'forward', fast(), { context: CONTEXT, maxQueue: 1, onResult: (r) => all.push(r.output.data[0]) });
  assert.equal(queued.dropped, 0);
  assert.deepEqual(all, await byHand(chunks));
  m.dispose();
});

test('mistakes are typed errors naming what to change', async () => {
  const m = await load(VAD);
  const x = signal(1000, RATE);
  await assert.rejects(streamAudio(m, 'nope', x), (e) => e.code === 'TDM_ERR_NOT_FOUND' && /no method 'nope'.*forward/.test(e.message));
  await assert.rejects(streamAudio(m, 'forward', x, { chunk: 100 }), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT'
    && /100 samples.*\[1, 320\]/.test(e.message));
  await assert.rejects(streamAudio(m, 'forward', x, { context: CONTEXT, backpressure: 'wait' }),
    (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /'queue' or 'drop'/.test(e.message));
  await assert.rejects(streamAudio(m, 'forward', [1, 2, 3]), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT'
    && /MediaStream, an AudioBuffer/.test(e.message));
  await assert.rejects(streamAudio(m, 'forward', { getAudioTracks: () => [] }, { context: CONTEXT }),
    (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /no audio track/.test(e.message));
  await assert.rejects(streamAudio(m, 'forward', { getAudioTracks: () => [{}] }, { context: CONTEXT }),
    (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /needs Web Audio/.test(e.message));
  await assert.rejects(streamAudio(m, 'forward', readable([new Float64Array(4)]), { context: CONTEXT }),
    (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /Float64Array/.test(e.message));
  await assert.rejects(streamAudio(m, 'forward', x, { context: CONTEXT, onResult: () => { throw new Error('from onResult'); } }),
    /from onResult/);
  const plain = await load(fixture('streaming_conv').path); // no sample_rate metadata
  await assert.rejects(streamAudio(plain, 'forward', x), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /sampleRate/.test(e.message));
  plain.dispose();
  assert.throws(() => new Resampler(44100.5, 16000), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT');
  m.dispose();
});
