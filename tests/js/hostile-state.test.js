// Hostile state and calls: loadState with truncated, mutated and foreign bytes,
// writeState with wrong dtypes, shapes and values (NaN, indices far out of range), calls during a
// fork, dispose during a worker call. Each is a typed error or a defined result; the state is never
// half-changed and the instance never traps (later calls still work).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load, Tensor, TandemError } from '../../node/index.js';
import { fixture } from './helpers.js';

const MODES = [['inline', {}], ['worker', { worker: true }]];

function x(n, seed = 1) {
  const data = new Float32Array(n * 4);
  for (let i = 0; i < data.length; i++) data[i] = Math.sin(seed * 13 + i * 0.7);
  return new Tensor('float32', data, [1, n, 4]);
}

async function rejects(promise, code, where) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof TandemError, `${where}: ${e}`);
    assert.equal(e.code, code, `${where}: ${e.message}`);
    return true;
  });
}

const same = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);

for (const [mode, options] of MODES) {
  test(`${mode}: loadState with truncated, mutated and foreign bytes is refused or safe, never half-applied`, async () => {
    const model = await load(fixture('dynamic_appender').path, options);
    const other = await load(fixture('state_io').path, options);
    try {
      await model.forward(x(3));
      const saved = await model.saveState();
      await model.forward(x(2, 2)); // the state now differs from `saved`
      const before = await model.saveState();
      // every truncation: refused, state as it was
      for (let n = 0; n < saved.length; n += n < 40 ? 1 : 37) {
        await rejects(model.loadState(saved.slice(0, n)), 'TDM_ERR_STATE_MISMATCH', `truncated to ${n}`);
      }
      // longer than saved: refused
      const longer = new Uint8Array(saved.length + 8);
      longer.set(saved);
      await rejects(model.loadState(longer), 'TDM_ERR_STATE_MISMATCH', 'with 8 bytes appended');
      // a header byte changed (magic, format, layout fingerprint, size): refused
      for (const at of [0, 3, 4, 7, 8, 15, 24, 31]) {
        const bad = saved.slice();
        bad[at] ^= 0x41;
        await rejects(model.loadState(bad), 'TDM_ERR_STATE_MISMATCH', `header byte ${at} changed`);
      }
      // another program's state: refused
      await rejects(model.loadState(await other.saveState()), 'TDM_ERR_STATE_MISMATCH', 'foreign state');
      for (const junk of [null, 'state', 42, {}, [1, 2, 3]]) {
        await assert.rejects(model.loadState(junk), (e) => e instanceof TandemError, `loadState(${JSON.stringify(junk)})`);
      }
      assert.ok(same(await model.saveState(), before), 'every refused loadState left the state as it was');
      // a saved state restores exactly
      await model.loadState(saved);
      assert.ok(same(await model.saveState(), saved));
    } finally {
      model.dispose();
      other.dispose();
    }
  });

  test(`${mode}: state payloads with any values (positions far out of range) give a typed error or a result, never a trap`, async () => {
    const model = await load(fixture('dynamic_appender').path, options);
    try {
      await model.forward(x(2));
      const saved = await model.saveState();
      const HEADER = 32;
      // `pos` is the int64 write position into the 16-row cache: every value the bytes can hold
      const positions = [0n, 15n, 16n, -1n, -16n, 2n ** 31n, 2n ** 62n, 2n ** 63n - 1n, -(2n ** 63n), 9n];
      const posSpec = model.state.find((s) => s.name === 'pos');
      for (const p of positions) {
        await model.writeState('pos', new Tensor('int64', new BigInt64Array([p]), posSpec.shape));
        const before = await model.saveState();
        try {
          await model.forward(x(3, 5));
          const after = await model.readState('pos');
          assert.equal(after.data[0], BigInt.asIntN(64, p + 3n), `pos ${p}: advanced by 3`);
          // rows p..p+2 of 16, negative ones counting from the end as in PyTorch
          assert.ok(p >= -16n && p + 3n <= 16n, `pos ${p}: a write outside the cache succeeded`);
        } catch (e) {
          assert.ok(e instanceof TandemError, `pos ${p}: ${e}`);
          assert.equal(e.code, 'TDM_ERR_INDEX', `pos ${p}: ${e.message}`);
          assert.ok(same(await model.saveState(), before), `pos ${p}: the failed call left the state unchanged`);
        }
      }
      // random payload bytes through loadState (header intact): the same rule
      let seed = 7;
      const rand = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
      for (let k = 0; k < 40; k++) {
        const bad = saved.slice();
        for (let j = 0; j < 6; j++) bad[HEADER + Math.floor(rand() * (bad.length - HEADER))] = Math.floor(rand() * 256);
        await model.loadState(bad);
        const before = await model.saveState();
        try {
          await model.forward(x(1 + (k % 8), k));
        } catch (e) {
          assert.ok(e instanceof TandemError && e.code === 'TDM_ERR_INDEX', `payload ${k}: ${e}`);
          assert.ok(same(await model.saveState(), before), `payload ${k}: state unchanged`);
        }
      }
      await model.reset();
      assert.equal((await model.forward(x(4)))[4].data[0], 8n, 'the model still works: pos + n after a reset');
    } finally {
      model.dispose();
    }
  });

  test(`${mode}: writeState with wrong dtypes, shapes and sizes is refused; NaN and Inf are stored and propagate`, async () => {
    const model = await load(fixture('dynamic_appender').path, options);
    try {
      await model.forward(x(2));
      const before = await model.saveState();
      const cache = model.state.find((s) => s.name === 'cache');
      const n = cache.shape.reduce((a, b) => a * b, 1);
      const wrong = [
        ['an int64 tensor', new Tensor('int64', new BigInt64Array(n), cache.shape)],
        ['another shape', new Tensor('float32', new Float32Array(n), [n])],
        ['too few values', { dtype: 'float32', data: new Float32Array(n - 1), shape: cache.shape }],
        ['a string', 'zeros'],
        ['null', null],
      ];
      for (const [what, value] of wrong) {
        await assert.rejects(model.writeState('cache', value), (e) => e instanceof TandemError, `writeState(cache, ${what})`);
      }
      await assert.rejects(model.writeState('no_such_state', new Tensor('float32', new Float32Array(1), [1])),
        (e) => e instanceof TandemError && e.code === 'TDM_ERR_NOT_FOUND');
      assert.ok(same(await model.saveState(), before), 'refused writes left the state as it was');
      const special = new Float32Array(n).fill(NaN);
      special[1] = Infinity;
      await model.writeState('cache', new Tensor('float32', special, cache.shape));
      const out = await model.forward(x(1));
      assert.ok(Number.isNaN(out[2].data[0]), 'a NaN in the cache makes its running sum NaN, as in PyTorch');
    } finally {
      model.dispose();
    }
  });

  test(`${mode}: a fork made between calls sees exactly the calls made before it`, async () => {
    const model = await load(fixture('dynamic_appender').path, options);
    try {
      const a = model.forward(x(3));
      const f = model.fork({ state: 'copy' });
      const b = model.forward(x(2, 3));
      const [, fork] = await Promise.all([a, f, b]);
      try {
        const mine = (await model.readState('pos')).data[0];
        const theirs = (await fork.readState('pos')).data[0];
        assert.equal(mine, 5n, 'the model ran both calls');
        assert.equal(theirs, 3n, 'the fork copied the state after the first call and before the second');
        assert.equal((await fork.forward(x(1)))[4].data[0], 5n, 'the fork continues from its copy');
        assert.equal((await model.readState('pos')).data[0], 5n, "the fork's call left the model's state alone");
      } finally {
        fork.dispose();
      }
    } finally {
      model.dispose();
    }
  });
}

test('worker: dispose during a running call rejects the queue; a new model on the same file works', async () => {
  const model = await load(fixture('dynamic_appender').path, { worker: true });
  const calls = Array.from({ length: 20 }, (_, i) => model.forward(x(1 + (i % 8), i)));
  model.dispose();
  const settled = await Promise.allSettled(calls);
  for (const s of settled) {
    if (s.status === 'rejected') assert.equal(s.reason.code, 'TDM_ERR_DISPOSED', String(s.reason));
  }
  assert.ok(settled.some((s) => s.status === 'rejected'), 'calls still queued at dispose were rejected');
  const again = await load(fixture('dynamic_appender').path, { worker: true });
  try {
    assert.equal((await again.forward(x(2)))[4].data[0], 4n);
  } finally {
    again.dispose();
  }
});
