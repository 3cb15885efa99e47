// The audio demo page (demo/audio.html) in headless Chromium on its bundled recording: Silero VAD
// (exported from the silero-vad package's weights) in a Web Worker through streamAudio must find
// the speech segments the shipped ONNX model finds (onnxruntime in Python, the package's own
// get_speech_timestamps_from_probs at threshold 0.5: build/demo/recording.json, made by
// demo/build_audio.py), give its probabilities within 1e-4, and run faster than real time. Its
// Microphone button (Chromium's fake microphone) streams live until Stop. Its codec panel (a small
// Mimi from `moshi`, build/demo/codec.tandem, random weights) gives, frame by frame, what the same
// program gives run by hand in Node (encode_step then decode_step on the recording resampled to
// 24 kHz by resample_poly's filter, cut into 1920-sample frames), its Play button starts playback,
// and its Microphone button streams the fake microphone through the codec until Stop. Its
// speech-to-text panel (a small Kyutai STT, build/demo/stt.tandem) gives the tokens the same program
// gives run by hand in Node on the same frames.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { launch } from './chromium.js';
import { serve } from '../../scripts/serve.mjs';
import { ROOT } from '../js/helpers.js';
import { load, Resampler, Tensor } from '../../node/index.js';

const DEMO = `${ROOT}build/demo`;
let server, browser, page;
const errors = [];

before(async () => {
  assert.ok(['recording.json', 'silero_vad.tandem', 'codec.tandem', 'stt.tandem'].every((f) => existsSync(`${DEMO}/${f}`)),
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
    + `${(r.chunkMs.reduce((a, b) => a + b, 0) / r.chunkMs.length).toFixed(2)} ms per 32 ms chunk, `
    + `worst probability difference ${worst.toExponential(1)}`);
  // the page drew what it found
  const text = await page.textContent('#segments');
  assert.ok(text.startsWith('speech: ') && text.split(',').length === want.segments.length, text);
});

/**
 * Clicks `button` and returns what `#seconds` showed the moment `#message` first read 'listening…':
 * it must be the new run's count, not the 16 s recording's before it (a stale count once let the
 * test's wait for a second of audio pass at once and Stop come before the first frame).
 */
async function listen(button, message, seconds) {
  const shown = page.evaluate(([message, seconds]) => new Promise((resolve) => {
    const m = document.getElementById(message);
    new MutationObserver((_, observer) => {
      if (m.textContent !== 'listening…') return;
      observer.disconnect();
      resolve(document.getElementById(seconds).textContent);
    }).observe(m, { childList: true, characterData: true, subtree: true });
  }), [message, seconds]);
  await page.click(button);
  return shown;
}

test('the Microphone button streams the (fake) microphone live until Stop', async () => {
  const shown = await listen('#mic', 'message', 'audio-seconds');
  assert.equal(shown, '0.0 s', 'the last run\'s figures were still shown while listening');
  await page.waitForFunction(() => parseFloat(document.getElementById('audio-seconds').textContent) >= 1, null, { timeout: 30000 });
  await page.click('#stop');
  await page.waitForFunction(() => !document.getElementById('mic').disabled, null, { timeout: 20000 });
  assert.deepEqual(errors, []);
  assert.equal(await page.textContent('#message'), '');
  assert.equal(await page.textContent('#speed'), 'live');
  const seconds = parseFloat(await page.textContent('#audio-seconds'));
  assert.ok(seconds >= 1, `${seconds} s streamed`);
});

/** The recording's 16-bit samples as floats (build_audio.py writes a plain 44-byte header). */
function recordingSamples() {
  const b = readFileSync(`${DEMO}/recording.wav`);
  assert.equal(b.toString('ascii', 36, 40), 'data');
  assert.equal(b.readUInt32LE(24), 16000);
  const n = b.readUInt32LE(40) / 2;
  return Float32Array.from({ length: n }, (_, i) => b.readInt16LE(44 + 2 * i) / 32768);
}

/** The whole recording resampled 16 -> 24 kHz at once, as the panels' streams see it. */
function recordingAt24k() {
  const rs = new Resampler(16000, 24000), parts = [rs.push(recordingSamples()), rs.flush()];
  const audio = new Float32Array(parts[0].length + parts[1].length);
  audio.set(parts[0]);
  audio.set(parts[1], parts[0].length);
  return audio;
}

test('the codec panel streams the recording through encode_step and decode_step as the program run by hand in Node does', async () => {
  const r = await page.evaluate(() => window.audioDemo.runCodec());
  assert.deepEqual(errors, []);
  assert.equal(r.summary.reason, 'end');
  // by hand: resample the whole recording 16 -> 24 kHz, cut 1920-sample frames (the last padded with zeros)
  const audio = recordingAt24k();
  assert.equal(audio.length, Math.ceil((recordingSamples().length * 3) / 2));
  const frames = Math.ceil(audio.length / 1920);
  assert.equal(r.frames, frames);
  const codec = await load(readFileSync(`${DEMO}/codec.tandem`));
  await codec.reset();
  const want = new Float32Array(frames * 1920);
  const codes = new Set();
  for (let i = 0; i < frames; i++) {
    const frame = new Float32Array(1920);
    frame.set(audio.subarray(i * 1920, (i + 1) * 1920));
    let inputDiff = 0;
    frame.forEach((v, k) => { inputDiff = Math.max(inputDiff, Math.abs(v - r.inputs[i][k])); });
    assert.equal(inputDiff, 0, `frame ${i}: the page gave encode_step other samples`);
    const c = await codec.encode_step(new Tensor('float32', frame, [1, 1, 1920]));
    assert.deepEqual(c.shape, [1, 8, 1]);
    c.data.forEach((v) => codes.add(v));
    const pcm = await codec.decode_step(c);
    assert.deepEqual(pcm.shape, [1, 1, 1920]);
    want.set(pcm.data, i * 1920);
  }
  assert.ok(codes.size > 8, `the codes are degenerate (${codes.size} distinct): the test would prove little`);
  assert.equal(r.decoded.length, want.length);
  let peak = 0, worst = 0;
  want.forEach((v, i) => { peak = Math.max(peak, Math.abs(v)); worst = Math.max(worst, Math.abs(v - r.decoded[i])); });
  assert.ok(peak > 1e-3, `the decoded audio is silent (peak ${peak})`);
  assert.ok(worst <= 1e-4 * peak, `decoded samples differ by up to ${worst} (peak ${peak})`);
  const mean = r.chunkMs.reduce((a, b) => a + b, 0) / r.chunkMs.length;
  console.log(`# codec panel: ${frames} frames of 80 ms in ${r.wallMs.toFixed(0)} ms, `
    + `${mean.toFixed(1)} ms per frame (encode + decode, ${(mean / 0.8).toFixed(0)}% of real time), `
    + `${codes.size} distinct codes, worst difference ${worst.toExponential(1)} of peak ${peak.toFixed(3)}`);
  assert.ok(r.wallMs < frames * 80, `slower than real time: ${r.wallMs} ms for ${frames * 80} ms of audio`);
  assert.match(await page.textContent('#codec-realtime'), /% of 80 ms/);

  // Play: an AudioBufferSourceNode of the decoded samples at 24 kHz is started
  assert.equal(await page.isDisabled('#play-codec'), false);
  await page.click('#play-codec');
  await page.waitForFunction(() => window.audioDemo.played !== null, null, { timeout: 20000 });
  const played = await page.evaluate(() => window.audioDemo.played);
  assert.deepEqual(errors, []);
  assert.equal(await page.textContent('#codec-message'), '');
  assert.deepEqual(played, { frames, samples: frames * 1920, sampleRate: 24000, state: 'running' });
});

test("the codec panel's Microphone button streams the (fake) microphone through the codec until Stop", async () => {
  const shown = await listen('#codec-mic', 'codec-message', 'codec-seconds');
  assert.equal(shown, '0.0 s', 'the last run\'s figures were still shown while listening');
  await page.waitForFunction(() => parseFloat(document.getElementById('codec-seconds').textContent) >= 1, null, { timeout: 30000 });
  await page.click('#codec-stop');
  await page.waitForFunction(() => !document.getElementById('codec-mic').disabled, null, { timeout: 20000 });
  assert.deepEqual(errors, []);
  assert.equal(await page.textContent('#codec-message'), '');
  assert.equal(await page.isDisabled('#play-codec'), false);
  assert.ok(parseFloat(await page.textContent('#codec-seconds')) >= 1);
});

test('the speech-to-text panel streams the recording through step as the program run by hand in Node does', async () => {
  const r = await page.evaluate(() => window.audioDemo.runStt());
  assert.deepEqual(errors, []);
  assert.equal(r.summary.reason, 'end');
  const audio = recordingAt24k();
  const frames = Math.ceil(audio.length / 1920);
  assert.equal(r.tokens.length, frames);
  const stt = await load(readFileSync(`${DEMO}/stt.tandem`));
  const want = [];
  for (let i = 0; i < frames; i++) {
    const frame = new Float32Array(1920);
    frame.set(audio.subarray(i * 1920, (i + 1) * 1920));
    assert.ok(frame.every((v, k) => v === r.inputs[i][k]), `frame ${i}: the page gave step other samples`);
    const tok = await stt.step(new Tensor('float32', frame, [1, 1, 1920]));
    assert.deepEqual(tok.shape, [1, 1, 1]);
    want.push(Number(tok.data[0]));
  }
  stt.dispose();
  assert.ok(new Set(want).size > 4, `the tokens are degenerate (${new Set(want).size} distinct): the test would prove little`);
  assert.deepEqual(r.tokens, want);
  assert.match(await page.textContent('#stt-realtime'), /× real time/);
  assert.match(await page.textContent('#stt-info'), /^small: /);
  console.log(`# speech-to-text panel: ${frames} frames, ${(r.ms.reduce((a, b) => a + b, 0) / frames).toFixed(1)} ms per frame`);
});
