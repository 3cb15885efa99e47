// Cancelling calls with an AbortSignal, inline and in a worker, on the original report's model
// (forward1 adds its input to the shared state `shared_module._v`, initially 1, and returns it).
// Inline, a call runs when it is made, so only an already-aborted signal stops one; in a worker,
// calls wait in a queue and an aborted one that has not been sent to the worker is removed. In both,
// the state afterwards is exactly the sum of the calls that ran.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load, Tensor, TandemError } from '../../node/index.js';
import { fixture } from './helpers.js';

const MODES = [{ name: 'inline', opts: {} }, { name: 'worker', opts: { worker: true } }];
const STATE = 'shared_module._v';
const INITIAL = 1; // SharedModule's _v at export (tests/cases.py)
const value = async (m) => (await m.readState(STATE)).data[0];
const isAbort = (e) => e instanceof TandemError && e.name === 'AbortError' && e.code === 'TDM_ERR_ABORTED';

for (const { name: mode, opts } of MODES) {
  test(`${mode}: an already-aborted signal rejects at once, without running`, async () => {
    const m = await load(fixture('original_report').path, opts);
    const ctrl = new AbortController();
    ctrl.abort(new Error('user left'));
    const signal = ctrl.signal;
    await assert.rejects(m.forward1(5, { signal }), (e) => isAbort(e) && /before it ran/.test(e.message)
      && e.cause?.message === 'user left');
    await assert.rejects(m.call('forward1', 5, { signal }), isAbort);
    await assert.rejects(m.profile('forward1', 5, { signal }), isAbort);
    await assert.rejects(m.forward1(new Float32Array([5]), { signal: AbortSignal.abort() }), isAbort);
    assert.equal(await value(m), INITIAL);
    assert.deepEqual([...(await m.forward1(5, {})).data], [INITIAL + 5]); // {} is empty options
    m.dispose();
  });

  test(`${mode}: N overlapping calls with one signal, aborted after the first is made`, async () => {
    const m = await load(fixture('original_report').path, opts);
    const ctrl = new AbortController();
    const xs = Array.from({ length: 20 }, (_, i) => i + 1);
    const calls = xs.map((x) => m.forward1(new Float32Array([x]), { signal: ctrl.signal }));
    ctrl.abort();
    const settled = await Promise.allSettled(calls);
    // Inline, all 20 ran when they were made; the abort comes too late for any. In a worker, the
    // first was already sent to the worker: it finishes, its state change is kept and its result is
    // dropped; the 19 still queued are removed.
    const ran = mode === 'inline' ? xs.map(() => true) : xs.map((_, i) => i === 0);
    let v = INITIAL;
    for (const [i, s] of settled.entries()) {
      if (ran[i]) v += xs[i];
      if (mode === 'inline') {
        assert.equal(s.status, 'fulfilled', `call ${i}`);
        assert.equal(s.value.data[0], v, `call ${i} sees the calls before it`);
      } else {
        assert.equal(s.status, 'rejected', `call ${i}`);
        assert.ok(isAbort(s.reason), `call ${i}: ${s.reason}`);
        assert.match(s.reason.message, ran[i] ? /aborted while it ran; it finished, its state change is kept/ : /aborted before it ran/);
      }
    }
    const want = INITIAL + xs.filter((_, i) => ran[i]).reduce((a, b) => a + b, 0);
    assert.equal(await value(m), want);
    // the queue is not blocked: the next call runs and sees exactly that state
    assert.deepEqual([...(await m.forward1(new Float32Array([100]))).data], [want + 100]);
    m.dispose();
  });

  test(`${mode}: aborting some calls removes those still queued; the rest run in FIFO order`, async () => {
    const m = await load(fixture('original_report').path, opts);
    const odd = new AbortController();
    const xs = Array.from({ length: 30 }, (_, i) => i + 1);
    const calls = xs.map((x, i) => (i % 2 ? m.forward1(x, { signal: odd.signal }) : m.call('forward1', x)));
    odd.abort();
    const settled = await Promise.allSettled(calls);
    let v = INITIAL;
    for (const [i, s] of settled.entries()) {
      const ran = mode === 'inline' || i % 2 === 0; // in a worker, call 0 (no signal) is the one sent first
      if (ran) v += xs[i];
      if (mode === 'inline' || i % 2 === 0) {
        assert.equal(s.status, 'fulfilled', `call ${i}: ${s.reason}`);
        assert.equal(s.value.data[0], v, `call ${i}: the sum of the calls that ran before it and itself`);
      } else {
        assert.ok(s.status === 'rejected' && isAbort(s.reason) && /before it ran/.test(s.reason.message), `call ${i}`);
      }
    }
    const evens = xs.filter((_, i) => i % 2 === 0).reduce((a, b) => a + b, 0);
    assert.equal(await value(m), INITIAL + (mode === 'inline' ? xs.reduce((a, b) => a + b, 0) : evens));
    m.dispose();
  });

  test(`${mode}: aborting after the first call settles stops the calls behind it`, async () => {
    const m = await load(fixture('original_report').path, opts);
    const ctrl = new AbortController();
    const xs = [3, 5, 7, 11, 13];
    const calls = xs.map((x) => m.forward1(x, { signal: ctrl.signal }));
    await calls[0].then(() => ctrl.abort(), () => ctrl.abort());
    const settled = await Promise.allSettled(calls);
    const status = settled.map((s) => (s.status === 'fulfilled' ? 'ok' : isAbort(s.reason)
      ? (/while it ran/.test(s.reason.message) ? 'ran' : 'removed') : String(s.reason)));
    // In a worker, when the first reply arrives the second call is sent at once, before the abort:
    // it runs to the end (its result dropped); the three behind it are removed.
    assert.deepEqual(status, mode === 'inline' ? ['ok', 'ok', 'ok', 'ok', 'ok'] : ['ok', 'ran', 'removed', 'removed', 'removed']);
    const ran = mode === 'inline' ? xs : xs.slice(0, 2);
    assert.equal(settled[0].value.data[0], INITIAL + 3);
    assert.equal(await value(m), INITIAL + ran.reduce((a, b) => a + b, 0));
    m.dispose();
  });

  test(`${mode}: call options are the last argument only when they are a plain object of option names`, async () => {
    const m = await load(fixture('original_report').path, opts);
    // a Tensor-like plain object is an input, never options
    const y = await m.forward1({ dtype: 'float32', data: new Float32Array([2]), shape: [1] });
    assert.deepEqual([...y.data], [INITIAL + 2]);
    assert.deepEqual([...(await m.forward1(new Tensor('float32', [1], [1]), { signal: undefined })).data], [INITIAL + 3]);
    await assert.rejects(m.forward1(1, { signal: 'stop' }), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT'
      && /options.signal must be an AbortSignal/.test(e.message));
    await assert.rejects(m.forward1(1, { signl: new AbortController().signal }),
      (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /takes 1 input\(s\), 2 given/.test(e.message));
    await assert.rejects(m.forward1({ signl: 1 }),
      (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT'
        && /given object with keys signl \(call options are the last argument and take only: signal\)/.test(e.message));
    assert.equal(await value(m), INITIAL + 3);
    m.dispose();
  });
}

test('worker: aborting a running call keeps its whole state change (never half of it)', async () => {
  const { path } = fixture('transformer');
  const tokens = new BigInt64Array([5n, 1n, 4n, 2n, 8n, 3n, 7n, 6n]);
  const ref = await load(path);
  await ref.prefill(tokens);
  await ref.decode(9n);
  const m = await load(path, { worker: true });
  const ctrl = new AbortController();
  const prefill = m.prefill(tokens, { signal: ctrl.signal });
  const decode = m.decode(9n, { signal: ctrl.signal });
  const removed = m.decode(1n, { signal: ctrl.signal });
  ctrl.abort();
  await assert.rejects(prefill, (e) => isAbort(e) && /while it ran/.test(e.message));
  await assert.rejects(decode, (e) => isAbort(e) && /before it ran/.test(e.message));
  await assert.rejects(removed, isAbort);
  // prefill ran whole; decode never ran: the state equals a model that ran only prefill
  const only = await load(path);
  await only.prefill(tokens);
  assert.deepEqual(await m.saveState(), await only.saveState());
  assert.equal((await m.readState('pos')).data[0], 8n);
  // and a decode now continues exactly as the reference's
  assert.deepEqual([...(await m.decode(9n)).data], [...(await only.decode(9n)).data]);
  assert.deepEqual(await m.saveState(), await ref.saveState());
  for (const x of [ref, m, only]) x.dispose();
});

test('a disposed model rejects with TDM_ERR_DISPOSED, also when the signal is aborted', async () => {
  for (const opts of [{}, { worker: true }]) {
    const m = await load(fixture('original_report').path, opts);
    m.dispose();
    await assert.rejects(m.forward1(1, { signal: AbortSignal.abort() }), (e) => e.code === 'TDM_ERR_DISPOSED');
  }
});
