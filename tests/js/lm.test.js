// Language models from tandem.transformers.export_causal_lm, in wasm: metadata, prefill of any
// prompt length with one dynamic-length prefill, generation, against what eager transformers computed
// (tests/fixtures/make.py: hf_llama).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { load, prefill, generate, position, splitPrompt, TandemError } from '../../node/index.js';
import { FIXTURES, assertClose, fromJson } from './helpers.js';

const spec = JSON.parse(readFileSync(`${FIXTURES}/hf_llama.json`, 'utf8'));
const path = `${FIXTURES}/hf_llama.tandem`;

test('splitPrompt: largest chunks first, then single tokens', () => {
  assert.deepEqual(splitPrompt(13, [8, 4, 2]), [8, 4, 1]);
  assert.deepEqual(splitPrompt(7, [8, 4, 2]), [4, 2, 1]);
  assert.deepEqual(splitPrompt(1, [8, 4, 2]), [1]);
});

for (const mode of ['inline', 'worker']) {
  const opts = mode === 'worker' ? { worker: true } : {};

  test(`${mode}: the recipe's metadata is read from the file`, async () => {
    const m = await load(path, opts);
    const md = m.metadata;
    assert.equal(md.model_type, 'llama');
    assert.equal(md.max_cache_len, 24);
    assert.equal(md.max_prompt_len, 8);
    assert.equal(md.prefill_chunks, undefined); // one prefill of a dynamic length instead
    assert.deepEqual(m.methods.find((x) => x.name === 'prefill').dims, { n: { min: 1, max: 8 } });
    assert.deepEqual(m.methods.find((x) => x.name === 'prefill').inputs[0].shape, [1, 'n']);
    assert.equal(md.eos_token_id, 5);
    assert.equal(md.vocab_size, 64);
    assert.ok(Object.isFrozen(md));
    m.dispose();
  });

  test(`${mode}: prefill of any length equals eager; a prompt that does not fit leaves the state as it was`, async () => {
    const m = await load(path, opts);
    for (const n of [1, 3, 7, 8]) {
      await m.reset();
      const logits = await prefill(m, spec.prompt.slice(0, n));
      assertClose(logits, { ...spec.logits[n], shape: [1, 64] }, `prefill of ${n}`);
      assert.equal(await position(m), n);
    }
    await assert.rejects(prefill(m, spec.prompt.slice(0, 9)), (e) => e instanceof TandemError && e.code === 'TDM_ERR_INVALID_ARGUMENT');
    await m.reset();
    for (let i = 0; i < 3; i++) await prefill(m, spec.prompt.slice(0, 8));
    const saved = await m.saveState();
    await assert.rejects(prefill(m, [7]), (e) => e.code === 'TDM_ERR_INDEX' && /24 of 24/.test(e.message));
    await assert.rejects(m.decode(fromJson({ dtype: 'int64', shape: [1, 1], data: ['7'] })), (e) => e.code === 'TDM_ERR_INDEX');
    assert.deepEqual(await m.saveState(), saved);
    m.dispose();
  });

  test(`${mode}: greedy generation reproduces eager token for token, and says why it stopped`, async () => {
    const m = await load(path, opts);
    const got = [];
    const run = generate(m, spec.prompt, { maxTokens: 30, onToken: (id) => got.push(-id) });
    const ids = [];
    for await (const id of run) ids.push(id);
    assert.deepEqual(ids, spec.greedy);
    assert.deepEqual(got, spec.greedy.map((id) => -id));
    assert.equal(run.reason, spec.reason);
    // a second run from a reset model gives the same tokens; maxTokens and an aborted signal end it
    await m.reset();
    const three = [];
    const short = generate(m, spec.prompt, { maxTokens: 3 });
    for await (const id of short) three.push(id);
    assert.deepEqual(three, spec.greedy.slice(0, 3));
    assert.equal(short.reason, 'length');
    await m.reset();
    const ctl = new AbortController();
    const aborted = generate(m, spec.prompt, { signal: ctl.signal });
    for await (const id of aborted) if (id !== undefined) ctl.abort();
    assert.equal(aborted.reason, 'aborted');
    m.dispose();
  });
}

test('sampling is reproducible with a seed', async () => {
  const m = await load(path);
  const runs = [];
  for (let r = 0; r < 2; r++) {
    await m.reset();
    const ids = [];
    for await (const id of generate(m, spec.prompt.slice(0, 5), { maxTokens: 8, temperature: 0.8, topK: 5, seed: 7 })) ids.push(id);
    runs.push(ids);
  }
  assert.deepEqual(runs[0], runs[1]);
  assert.equal(runs[0].length, 8);
  m.dispose();
});
