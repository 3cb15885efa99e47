// Kyutai's streaming speech-to-text in Node (tests/fixtures/make.py's stt: the small config of
// tests/python/packaged_models.py's `stt`, one `step` = Mimi's streaming encode of an 80 ms frame +
// moshi's LMGen.step on its codes): streamAudio cuts the 24 kHz audio into 1920-sample frames and
// calls `step` once a frame (its input [1, 1, 1920] taken from the program, the rate from its sample_rate
// metadata); the greedy text tokens equal moshi's eager streaming token for token, inline
// and in a worker, and again after `reset`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { load, streamAudio } from '../../node/index.js';
import { FIXTURES } from './helpers.js';

const { frame, audio, tokens } = JSON.parse(readFileSync(`${FIXTURES}/stt.json`, 'utf8'));

async function transcribe(model) {
  const got = [];
  const summary = await streamAudio(model, 'step', Float32Array.from(audio), {
    chunk: frame,
    onResult: ({ index, output }) => { got[index] = Number(output.data[0]); },
  });
  assert.equal(summary.chunks, tokens.length);
  return got;
}

for (const worker of [false, true]) {
  test(`streamAudio runs the STT step equal to moshi's eager streaming (${worker ? 'worker' : 'inline'})`, async () => {
    const model = await load(`${FIXTURES}/stt.tandem`, { worker });
    try {
      assert.deepEqual(await transcribe(model), tokens);
      await model.reset();
      assert.deepEqual(await transcribe(model), tokens, 'after reset');
    } finally {
      model.dispose();
    }
  });
}
