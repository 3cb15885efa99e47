// The audio demo page (demo/audio.html) in headless Chromium on its bundled recording: Silero VAD
// (exported from the silero-vad package's weights) in a Web Worker through streamAudio must find
// the speech segments the shipped ONNX model finds (onnxruntime in Python, the package's own
// get_speech_timestamps_from_probs at threshold 0.5: build/demo/recording.json, made by
// demo/build_audio.py), give its probabilities within 1e-4, and run faster than real time. Its
// Microphone button (Chromium's fake microphone) streams live until Stop.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { launch } from './chromium.js';
import { serve } from '../../scripts/serve.mjs';
import { ROOT } from '../js/helpers.js';

const DEMO = `${ROOT}build/demo`;
let server, browser, page;
const errors = [];

before(async () => {
  assert.ok(existsSync(`${DEMO}/recording.json`) && existsSync(`${DEMO}/silero_vad.tandem`),
    'missing build/demo: run python demo/build_audio.py (npm test and npm start do)');
  server = await serve();
  browser = await launch(['--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream',
    '--autoplay-policy=no-user-gesture-required']);
  page = await browser.newPage();
  page.on('pageerror', (e) => errors.push(e));
  await page.goto(`${server.url}/demo/audio.html`);
  await page.waitForFunction(() => window.audioDemo?.ready === true, null, { timeout: 60000 });
});

after(async () => {
  await browser?.close();
  await server?.close();
});

test("the audio page finds the shipped ONNX model's speech segments on the recording, faster than real time", async () => {
  const want = JSON.parse(readFileSync(`${DEMO}/recording.json`, 'utf8'));
  const r = await page.evaluate(() => window.audioDemo.runRecording());
  assert.deepEqual(errors, []);
  assert.equal(r.summary.reason, 'end');
  assert.equal(r.summary.dropped, 0);
  assert.equal(r.probs.length, want.probs.length);
  let worst = 0;
  r.probs.forEach((p, i) => { worst = Math.max(worst, Math.abs(p - want.probs[i])); });
  assert.ok(worst < 1e-4, `probabilities differ from onnxruntime's by up to ${worst}`);
  assert.ok(want.segments.length >= 3, 'the recording has several sentences');
  assert.deepEqual(r.segments, want.segments, 'the speech segments (samples) of the shipped ONNX model');
  const speed = (r.audioSeconds * 1000) / r.wallMs;
  assert.ok(speed > 1, `${r.audioSeconds} s of audio took ${r.wallMs} ms`);
  console.log(`# audio demo: ${r.audioSeconds.toFixed(2)} s of audio in ${r.wallMs.toFixed(0)} ms (${speed.toFixed(1)}x real time), `
    + `${(r.chunkMs.reduce((a, b) => a + b, 0) / r.chunkMs.length).toFixed(2)} ms per 32 ms chunk, worst probability difference ` +
      `${worst.toExponential(1)}`);
  // the page drew what it found
  const text = await page.textContent('#segments');
  assert.ok(text.startsWith('speech: ') && text.split(',').length === want.segments.length, text);
});

test('the Microphone button streams the (fake) microphone live until Stop', async () => {
  await page.click('#mic');
  await page.waitForFunction(() => document.getElementById('message').textContent === 'listening…', null, { timeout: 20000 });
  await page.waitForFunction(() => parseFloat(document.getElementById('audio-seconds').textContent) >= 1, null, { timeout: 30000 });
  await page.click('#stop');
  await page.waitForFunction(() => !document.getElementById('mic').disabled, null, { timeout: 20000 });
  assert.deepEqual(errors, []);
  assert.equal(await page.textContent('#message'), '');
  assert.equal(await page.textContent('#speed'), 'live');
  const seconds = parseFloat(await page.textContent('#audio-seconds'));
  assert.ok(seconds >= 1, `${seconds} s streamed`);
});
