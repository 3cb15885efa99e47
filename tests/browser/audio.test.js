// streamAudio's MediaStream path in headless Chromium: a fake microphone (Chromium's
// --use-fake-device-for-media-stream, granted by --use-fake-ui-for-media-stream) captured through
// the AudioWorklet (web/audio-worklet.js) at the AudioContext's rate (48 kHz here), resampled to
// the model's 16 kHz, cut into chunks with 64 context samples, run by a model in a Web Worker.
// The chunks must be contiguous (each one's context is the audio before it), carry audio, come in
// order with their timestamps, and give the results of calling the method by hand on them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './chromium.js';
import { serve } from '../../scripts/serve.mjs';
import { existsSync } from 'node:fs';
import { FIXTURES } from '../js/helpers.js';

let server, browser, page;

before(async () => {
  assert.ok(existsSync(`${FIXTURES}/audio_vad.tandem`), 'missing audio_vad.tandem: run tests/fixtures/make.py first (npm test does)');
  server = await serve({ index: '/tests/browser/page.html' });
  browser = await launch(['--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream',
    '--autoplay-policy=no-user-gesture-required']);
  page = await browser.newPage();
  await page.goto(`${server.url}/tests/browser/page.html`);
  await page.waitForFunction(() => window.testReady === true, null, { timeout: 30000 });
});

after(async () => {
  await browser?.close();
  await server?.close();
});

test('a microphone MediaStream streams through the AudioWorklet into a model in a worker, in exact contiguous chunks', async () => {
  const r = await page.evaluate(async () => {
    const { load, streamAudio, Tensor } = await import('/web/tandem.js');
    const url = '/build/fixtures/audio_vad.tandem';
    const model = await load(url, { worker: true });
    const mic = await navigator.mediaDevices.getUserMedia({ audio: true });
    const audioContext = new AudioContext();
    const stop = new AbortController();
    const results = [];
    const done = streamAudio(model, 'forward', mic, {
      context: 64, signal: stop.signal, audioContext, blockSize: 1024,
      onResult: (x) => { results.push(x); if (results.length === 40) stop.abort(); },
    });
    const timeout = setTimeout(() => stop.abort(), 20000);
    const summary = await done;
    clearTimeout(timeout);
    const rate = audioContext.sampleRate;
    await audioContext.close();
    mic.getTracks().forEach((t) => t.stop());
    const byHand = await load(url);
    const want = [];
    for (const x of results) want.push((await byHand.forward(new Tensor('float32', x.input, [1, 320]))).data[0]);
    let contiguous = true, peak = 0;
    for (let i = 1; i < results.length; i++) {
      const prev = results[i - 1].input, cur = results[i].input;
      for (let k = 0; k < 64; k++) if (cur[k] !== prev[prev.length - 64 + k]) contiguous = false;
    }
    for (const x of results) for (const v of x.input) peak = Math.max(peak, Math.abs(v));
    model.dispose();
    byHand.dispose();
    return {
      summary, rate, contiguous, peak, want,
      got: results.map((x) => x.output.data[0]),
      index: results.map((x) => x.index),
      spans: results.map((x) => [x.start, x.end]),
      firstContext: Array.from(results[0]?.input.slice(0, 64) ?? []),
    };
  });
  assert.equal(r.summary.reason, 'aborted');
  assert.ok(r.got.length >= 40, `${r.got.length} results in 20 s`);
  assert.equal(r.summary.results, r.got.length);
  assert.deepEqual(r.index, r.got.map((_, i) => i), 'in order, none dropped (queue policy)');
  assert.deepEqual(r.spans, r.got.map((_, i) => [(i * 256) / 16000, ((i + 1) * 256) / 16000]));
  assert.ok(r.contiguous, "each chunk's 64 context samples are the end of the chunk before it");
  assert.deepEqual(r.firstContext, new Array(64).fill(0), 'zeros before the start');
  assert.ok(r.peak > 0.01, `the fake microphone's audio came through (peak ${r.peak}, context rate ${r.rate})`);
  assert.deepEqual(r.got, r.want, 'the same results as calling the method by hand on the chunks');
});
