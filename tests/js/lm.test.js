// Language models from tandem.transformers.export_causal_lm, in wasm: metadata, prefill of any
// prompt length with one dynamic-length prefill, generation, against what eager transformers computed
// (tests/fixtures/make.py: hf_llama, exported with decode_topk's K = 16); sampling from decode_topk
// against sampling from decode's full logits; a hand-written program without the recipe's metadata
// (tied_lm: a fixed-length prefill, logits full of ties and NaNs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { load, prefill, generate, position, sample, splitPrompt, Tensor, TandemError } from '../../node/index.js';
import { FIXTURES, assertClose, fixture, fromJson } from './helpers.js';

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
    assert.equal(md.sample_top_k, 16);
    assert.deepEqual(m.methods.find((x) => x.name === 'decode_topk').outputs.map((o) => [o.dtype, o.shape]),
      [['float32', [1, 16]], ['int64', [1, 16]]]);
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

/** `m` as what generate uses of a model, recording the methods it calls, and with the methods named
 * in `hide` left out of its method list (so generate cannot pick them). */
function spy(m, hide = []) {
  const calls = [];
  const model = {
    methods: m.methods.filter((x) => !hide.includes(x.name)), metadata: m.metadata, state: m.state,
    call: (name, ...args) => { calls.push(name); return m.call(name, ...args); },
    readState: (name) => m.readState(name),
    reset: () => m.reset(),
  };
  return { model, calls };
}

async function tokensOf(model, prompt, options) {
  await model.reset();
  const run = generate(model, prompt, options);
  const ids = [];
  for await (const id of run) ids.push(id);
  return { ids, reason: run.reason };
}

/** Token ids ranked best first by a stable sort: larger first, NaN above every number. */
function ranking(x) {
  return Array.from(x.keys()).sort((a, b) => {
    const na = Number.isNaN(x[a]), nb = Number.isNaN(x[b]);
    if (na || nb) return na === nb ? 0 : na ? -1 : 1;
    return x[b] - x[a];
  });
}

for (const mode of ['inline', 'worker']) {
  const opts = mode === 'worker' ? { worker: true } : {};

  test(`${mode}: decode_topk appends a token like decode and returns decode's 16 best logits (float32) and their ids (int64)`, async () => {
    const m = await load(path, opts);
    await prefill(m, spec.prompt.slice(0, 5));
    const saved = await m.saveState();
    const token = new Tensor('int64', BigInt64Array.of(BigInt(spec.prompt[5])), [1, 1]);
    const logits = await m.decode(token);
    await m.loadState(saved);
    const [values, ids] = await m.decode_topk(token);
    assert.equal(await position(m), 6);
    assert.ok(values.data instanceof Float32Array && values.dtype === 'float32');
    assert.ok(ids.data instanceof BigInt64Array && ids.dtype === 'int64');
    assert.deepEqual([values.shape, ids.shape], [[1, 16], [1, 16]]);
    const want = ranking(logits.data).slice(0, 16);
    assert.deepEqual(Array.from(ids.data, Number), want);
    assert.deepEqual(Array.from(values.data), want.map((i) => logits.data[i]));
    m.dispose();
  });

  test(`${mode}: generate gives the same tokens from decode_topk as from decode's full logits`, async () => {
    const m = await load(path, opts);
    const device = spy(m), full = spy(m, ['decode_topk']);
    const settings = [
      { maxTokens: 11 },
      { maxTokens: 11, temperature: 0.8, topK: 5, seed: 7 },
      { maxTokens: 11, temperature: 1.5, topK: 16, topP: 0.9, seed: 3 },
    ];
    for (const s of settings) {
      device.calls.length = full.calls.length = 0;
      const a = await tokensOf(device.model, spec.prompt.slice(0, 5), s);
      const b = await tokensOf(full.model, spec.prompt.slice(0, 5), s);
      assert.deepEqual(a, b, JSON.stringify(s));
      assert.ok(a.ids.length >= 6, `${JSON.stringify(s)}: ${a.ids.length} tokens`); // then eos_token_id, or 11
      assert.deepEqual(device.calls, ['prefill', ...Array(a.ids.length).fill('decode_topk')],
        `${JSON.stringify(s)}: sampled on the device`);
      assert.deepEqual(full.calls, ['prefill', ...Array(a.ids.length).fill('decode')]);
    }
    assert.deepEqual((await tokensOf(device.model, spec.prompt, { maxTokens: 30 })).ids, spec.greedy,
      'greedy from decode_topk equals eager');
    // more than K = 16 candidates: the full logits
    device.calls.length = 0;
    await tokensOf(device.model, spec.prompt.slice(0, 5), { maxTokens: 3, temperature: 1, topK: 17, seed: 1 });
    await tokensOf(device.model, spec.prompt.slice(0, 5), { maxTokens: 3, temperature: 1, topP: 0.5, seed: 1 });
    assert.deepEqual(device.calls, ['prefill', 'decode', 'decode', 'decode', 'prefill', 'decode', 'decode', 'decode']);
    m.dispose();
  });

  test(`${mode}: a hand-written program without metadata (fixed-length prefill, ties, NaN) generates with { maxCacheLen, positionState }`,
    async () => {
      const { path: tied, spec: t } = fixture('tied_lm');
      const m = await load(tied, opts);
      assert.deepEqual(m.metadata, {});
      const lmOpts = { maxCacheLen: 16, positionState: 'pos' };
      await assert.rejects(async () => generate(m, t.prompt),
        (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /maxCacheLen/.test(e.message));
      await assert.rejects(async () => generate(m, t.prompt, { maxCacheLen: 16, positionState: 'nope' }),
        (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /'pos'/.test(e.message));
      await assert.rejects(position(m), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /positionState/.test(e.message));

      // decode_topk ranks ties and NaN as sample() does, and as a stable sort of the table's rows
      const table = fromJson(t.table).data;
      for (let token = 0; token < 12; token++) {
        await m.reset();
        const row = table.subarray(((token + 1) % 12) * 12, ((token + 1) % 12 + 1) * 12);
        const logits = await m.decode(new Tensor('int64', BigInt64Array.of(BigInt(token)), [1, 1]));
        assert.deepEqual(Array.from(logits.data), Array.from(row));
        await m.reset();
        const [, ids] = await m.decode_topk(new Tensor('int64', BigInt64Array.of(BigInt(token)), [1, 1]));
        assert.deepEqual(Array.from(ids.data, Number), ranking(row).slice(0, 4), `row of token ${token}`);
        assert.equal(sample(logits, { temperature: 0 }), ranking(row)[0]);
      }

      // the prompt of 6 runs as prefill (its fixed 4) + decode + decode; 16 positions: 11 tokens fit
      const device = spy(m), full = spy(m, ['decode_topk']);
      const greedy = await tokensOf(device.model, t.prompt, lmOpts);
      assert.deepEqual(greedy, { ids: t.greedy.slice(0, 11), reason: 'capacity' });
      assert.deepEqual(device.calls, ['prefill', 'decode', 'decode', ...Array(10).fill('decode_topk')]);
      assert.equal(await position(m, lmOpts), 16);
      assert.deepEqual(await tokensOf(full.model, t.prompt, lmOpts), greedy);
      assert.deepEqual(full.calls, ['prefill', 'decode', 'decode', ...Array(10).fill('decode')]);
      for (const s of [{ temperature: 0.7, topK: 4, seed: 11 }, { temperature: 2, topK: 3, topP: 0.8, seed: 5 }]) {
        const a = await tokensOf(device.model, t.prompt, { ...lmOpts, ...s });
        assert.deepEqual(a, await tokensOf(full.model, t.prompt, { ...lmOpts, ...s }), JSON.stringify(s));
      }
      // prefill() of any length, by the fixed chunk and decode; a prompt that does not fit is refused
      await m.reset();
      await prefill(m, t.prompt.concat(t.prompt), lmOpts);
      assert.equal(await position(m, lmOpts), 12);
      await assert.rejects(prefill(m, t.prompt, lmOpts), (e) => e.code === 'TDM_ERR_INDEX' && /12 of 16/.test(e.message));
      m.dispose();
    });
}

test('sample: ties go to the lower id, NaN ranks above every number', () => {
  const logits = (xs) => new Tensor('float32', Float32Array.from(xs), [1, xs.length]);
  assert.equal(sample(logits([1, 3, -0, 3, 0])), 1);
  assert.equal(sample(logits([1, 3, NaN, 3, NaN])), 2);
  // topK 2 of [0, 5, 5, 1] keeps ids 1 and 2 with equal probability: a draw below 1/2 is id 1
  assert.equal(sample(logits([0, 5, 5, 1]), { temperature: 1, topK: 2 }, () => 0.49), 1);
  assert.equal(sample(logits([0, 5, 5, 1]), { temperature: 1, topK: 2 }, () => 0.51), 2);
});
