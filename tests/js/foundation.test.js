// The foundation's cases through the wasm build, against PyTorch eager's outputs for the same
// call sequences (recorded by tests/fixtures/make.py).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { load, TandemError } from '../../node/index.js';
import { fixture, checkSequence } from './helpers.js';

const CASES = ['original_report', 'accumulator', 'state_io', 'gru', 'initialized', 'int32_counter', 'dynamic_appender'];

for (const name of CASES) {
  test(`${name}: call sequence matches PyTorch eager`, () => checkSequence(name));
}

test('methods describe their inputs and outputs', async () => {
  const model = await load(fixture('gru').path);
  assert.deepEqual(model.methods.map((m) => m.name).sort(), ['forward', 'reset']);
  const fwd = model.methods.find((m) => m.name === 'forward');
  assert.deepEqual(fwd.inputs, [{ name: 'x', dtype: 'float32', shape: [1, 16] }]);
  assert.deepEqual(fwd.outputs, [{ name: 'output', dtype: 'float32', shape: [1, 32] }]);
  assert.equal(await model.reset(), undefined);
  model.dispose();
});

test('inputs may be typed arrays or plain numbers', async () => {
  const model = await load(fixture('original_report').path);
  assert.deepEqual([...(await model.forward1(new Float32Array([2]))).data], [3]);
  assert.deepEqual([...(await model.forward1(1.5)).data], [4.5]);
  model.dispose();
});

test('int32 inputs, outputs and state: Int32Array in, Int32Array out, wrapping like PyTorch', async () => {
  const model = await load(fixture('int32_counter').path);
  try {
    const fwd = model.methods.find((m) => m.name === 'forward');
    assert.deepEqual(fwd.inputs, [{ name: 'x', dtype: 'int32', shape: [3] }]);
    assert.deepEqual(model.state.map((s) => s.dtype), ['int32', 'int32']);
    const [count, q, r, pos, half] = await model.forward(new Int32Array([1, -2, 3]));
    assert.ok(count.data instanceof Int32Array && count.dtype === 'int32');
    assert.deepEqual([...count.data], [2 ** 31 - 2, 6]);
    assert.deepEqual([...q.data], [0, -1, 1]); // total = [2, -7, 8]: floor division by 7
    assert.deepEqual([...r.data], [-3, -2, -2]); // remainder with the divisor's sign (-5)
    assert.deepEqual([...pos.data], [2, 7, 8]);
    assert.deepEqual([...half.data], [0.5, -1, 1.5]);
    await model.forward(new Int32Array([0, 0, 0]));
    const [wrapped] = await model.forward(new Int32Array([0, 0, 0]));
    assert.deepEqual([...wrapped.data], [-(2 ** 31), 8]); // 2^31 - 1 + 1 wraps
    await assert.rejects(model.forward(new Float32Array([1, 2, 3])), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT'
      && /expected int32\[3\]/.test(e.message));
  } finally {
    model.dispose();
  }
});

test('bytes, ArrayBuffer and Response sources load', async () => {
  const bytes = readFileSync(fixture('accumulator').path);
  for (const src of [new Uint8Array(bytes), bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length), new Response(bytes)]) {
    const model = await load(src);
    assert.deepEqual([...(await model.forward(new Float32Array([1, 2, 3]))).data], [2, 4, 6]);
    model.dispose();
  }
});

test('a truncated file fails to load with TDM_ERR_TRUNCATED', async () => {
  const bytes = readFileSync(fixture('gru').path);
  for (const cut of [40, 200, bytes.length - 1]) {
    await assert.rejects(load(bytes.subarray(0, cut)), (e) => e instanceof TandemError && e.code === 'TDM_ERR_TRUNCATED'
      && /truncated/.test(e.message));
  }
});

test('a corrupted header fails to load with a clear error', async () => {
  const bytes = new Uint8Array(readFileSync(fixture('gru').path));
  const magic = bytes.slice();
  magic[0] = 0x58;
  await assert.rejects(load(magic), (e) => e.code === 'TDM_ERR_BAD_MAGIC' && /not a \.tandem file/.test(e.message));
  const count = bytes.slice();
  count[16] = 9; // section count
  await assert.rejects(load(count), (e) => e.code === 'TDM_ERR_MALFORMED' && /sections/.test(e.message));
  // the runtime still works after rejected files
  const model = await load(bytes);
  assert.equal((await model.forward(new Float32Array(16))).shape[1], 32);
  model.dispose();
});

test('wrong inputs reject with expected and given, and do not block later calls', async () => {
  const model = await load(fixture('accumulator').path);
  const bad = model.forward(new Float32Array(4));
  const good = model.forward(new Float32Array([1, 1, 1]));
  await assert.rejects(bad, (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /expected float32\[3\]/.test(e.message));
  assert.deepEqual([...(await good).data], [2, 2, 2]);
  await assert.rejects(model.forward(new Float32Array([1, 1, 1]), 2), (e) => /takes 1 input/.test(e.message));
  await assert.rejects(model.call('nope'), (e) => e.code === 'TDM_ERR_NOT_FOUND');
  model.dispose();
  await assert.rejects(model.forward(new Float32Array(3)), (e) => e.code === 'TDM_ERR_DISPOSED');
});
