// A method with a bounded dynamic dim (tests/cases.py dynamic_appender, x [1, n, 4], 1 <= n <= 8)
// through the wasm build: its spec names the dim, calls at several lengths give outputs of their
// actual shapes (the sequence against PyTorch eager is in call-sequences.test.js), and a length out of
// range is a TDM_ERR_SHAPE that leaves the state as it was.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load, Tensor, TandemError } from '../../node/index.js';
import { fixture } from './helpers.js';

test('a dynamic dim appears in the spec as its name, with its bounds in dims', async () => {
  const model = await load(fixture('dynamic_appender').path);
  const fwd = model.methods.find((m) => m.name === 'forward');
  assert.deepEqual(fwd.dims, { n: { min: 1, max: 8 } });
  assert.deepEqual(fwd.inputs, [{ name: 'x', dtype: 'float32', shape: [1, 'n', 4] }]);
  assert.deepEqual(fwd.outputs.map((o) => o.shape), [[1, 'n + 1', 4], ['4*n - 1'], [1, 4], [1, 4], []]);
  assert.deepEqual(model.methods.find((m) => m.name === 'reset').dims, {});
  model.dispose();
});

test('calls at several lengths give outputs of their actual shapes', async () => {
  const model = await load(fixture('dynamic_appender').path);
  for (const n of [2, 7, 1, 5]) { // 15 of the cache's 16 rows
    const x = new Tensor('float32', Float32Array.from({ length: n * 4 }, (_, i) => i - 3), [1, n, 4]);
    const [y, flat, , last] = await model.forward(x);
    assert.deepEqual(y.shape, [1, n + 1, 4]);
    assert.deepEqual([...y.data], [...x.data, ...x.data.subarray(0, 4)].map((v) => 2 * v));
    assert.deepEqual(flat.shape, [4 * n - 1]);
    assert.deepEqual([...flat.data], [...x.data.subarray(1)]);
    assert.deepEqual([...last.data], [...x.data.subarray(4 * n - 4)]);
  }
  // a typed array with one dynamic dim: the length gives n
  await model.reset();
  const [y] = await model.forward(new Float32Array(12).fill(1));
  assert.deepEqual(y.shape, [1, 4, 4]);
  model.dispose();
});

test('a length out of range is rejected with TDM_ERR_SHAPE and the state unchanged', async () => {
  const model = await load(fixture('dynamic_appender').path);
  await model.forward(new Tensor('float32', new Float32Array(12).fill(1), [1, 3, 4]));
  const before = await model.saveState();
  for (const n of [9, 0]) {
    await assert.rejects(model.forward(new Tensor('float32', new Float32Array(n * 4), [1, n, 4])), (e) => {
      assert.ok(e instanceof TandemError);
      assert.equal(e.code, 'TDM_ERR_SHAPE');
      assert.match(e.message, /'n' is between 1 and 8/);
      return true;
    });
  }
  await assert.rejects(model.forward(new Tensor('float32', new Float32Array(15), [1, 3, 5])), { code: 'TDM_ERR_INVALID_ARGUMENT' });
  assert.deepEqual(await model.saveState(), before);
  const [y] = await model.forward(new Tensor('float32', new Float32Array(8), [1, 2, 4])); // and the queue goes on
  assert.deepEqual(y.shape, [1, 3, 4]);
  model.dispose();
});

// tests/cases.py branch_guard: `if bool((pad > 0).any()):` specialized at export (no padding then)
// with a guard op; a call whose pad takes the other branch is a TDM_ERR_GUARD (the status string
// comes from the wasm build) and the state stays as it was.
test('a specialized branch going the other way is TDM_ERR_GUARD and the state unchanged', async () => {
  const model = await load(fixture('branch_guard').path);
  const x = new Tensor('float32', new Float32Array([1, 2, 3]), [3]);
  const [y] = [await model.forward(x, new Tensor('int64', [0n, -1n], [2]))].flat();
  assert.deepEqual([...y.data], [-1, -3, -5]); // acc -= 2x, + 1
  const before = await model.saveState();
  await assert.rejects(model.forward(x, new Tensor('int64', [0n, 4n], [2])),
    (e) => e instanceof TandemError && e.code === 'TDM_ERR_GUARD' && /other way/.test(e.message));
  assert.deepEqual(await model.saveState(), before);
  const [z] = [await model.forward(x, new Tensor('int64', [0n, 0n], [2]))].flat();
  assert.deepEqual([...z.data], [-3, -7, -11]);
  model.dispose();
});
