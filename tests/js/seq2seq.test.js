// More models as people have them, in wasm, against what eager transformers computed
// (tests/fixtures/make.py): Whisper through tandem.transformers.export_seq2seq (encode, decode,
// encode new audio, reset), Mamba through export_causal_lm (recurrent state, no KV cache), and
// constant methods stored as metadata.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load, prefill, generate, position, Tensor, TandemError } from '../../node/index.js';
import { assertClose, fixture, fromJson } from './helpers.js';

const whisper = fixture('hf_whisper');
const mamba = fixture('hf_mamba');
const token = (id) => new Tensor('int64', BigInt64Array.of(BigInt(id)), [1, 1]);

for (const mode of ['inline', 'worker']) {
  const opts = mode === 'worker' ? { worker: true } : {};

  test(`${mode}: whisper: encode, decodes, encode new audio, decodes, reset: every step equals eager`, async () => {
    const m = await load(whisper.path, opts);
    assert.deepEqual(m.methods.map((x) => x.name), ['encode', 'decode', 'reset']);
    const md = m.metadata;
    assert.equal(md.model_type, 'whisper');
    assert.deepEqual([md.vocab_size, md.max_cache_len, md.num_layers], [64, 8, 2]);
    assert.deepEqual([md.bos_token_id, md.eos_token_id, md.decoder_start_token_id], [1, 2, 3]);
    assert.deepEqual(md.encoder_input_shape, [1, 8, 32]);
    const { runs } = whisper.spec;
    for (const [r, resetFirst] of [[0, false], [1, false], [0, true]]) {
      const run = runs[r];
      if (resetFirst) await m.reset();
      await m.encode(fromJson(run.features));
      assert.equal(await position(m), 0);
      for (let i = 0; i < run.tokens.length; i++) {
        assertClose(await m.decode(token(run.tokens[i])), run.logits[i], `audio ${r} token ${i}`);
      }
      assert.equal(await position(m), run.tokens.length);
    }
    // the cache is full (8 of 8): one more decode is refused and changes nothing
    const saved = await m.saveState();
    await assert.rejects(m.decode(token(7)), (e) => e instanceof TandemError && e.code === 'TDM_ERR_INDEX');
    assert.deepEqual(await m.saveState(), saved);
    m.dispose();
  });

  test(`${mode}: mamba: prefill of any length and greedy generation equal eager`, async () => {
    const m = await load(mamba.path, opts);
    assert.equal(m.metadata.model_type, 'mamba');
    assert.equal(m.metadata.max_cache_len, null);
    const { prompt, logits, greedy } = mamba.spec;
    for (const n of [3, 8]) {
      await m.reset();
      assertClose(await prefill(m, prompt.slice(0, n)), { ...logits[n], shape: [1, 64] }, `prefill of ${n}`);
      assert.equal(await position(m), n);
    }
    // 8 tokens then 5 more: the second prefill continues from the recurrent state
    assertClose(await prefill(m, prompt.slice(8, 13)), { ...logits[13], shape: [1, 64] }, 'prefill of 8 then 5');
    await m.reset();
    const ids = [];
    const run = generate(m, prompt, { maxTokens: greedy.length });
    for await (const id of run) ids.push(id);
    assert.deepEqual(ids, greedy);
    m.dispose();
  });
}

test('constant methods are read from the metadata, not called', async () => {
  const { path, spec } = fixture('constant_methods');
  const m = await load(path);
  assert.deepEqual(m.metadata, spec.metadata);
  assert.equal(m.metadata.get_max_seq_len, 128);
  assert.ok(Object.isFrozen(m.metadata.info.sizes));
  assert.equal(m.get_max_seq_len, undefined);
  assertClose(await m.forward(new Tensor('float32', [2], [1])), { dtype: 'float32', shape: [1], data: [2] }, 'forward');
  m.dispose();
});
