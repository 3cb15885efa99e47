// The stateful cases of tests/cases.py through the wasm build, against PyTorch eager's outputs for the
// same call sequences (recorded by tests/fixtures/make.py); what methods say of their inputs and
// outputs; the input forms (typed arrays, plain numbers), int32 in, out and in state; the source forms.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { load } from '../../node/index.js';
import { fixture, checkSequence } from './helpers.js';

const CASES = [
  'original_report', 'accumulator', 'state_io', 'gru', 'initialized', 'int32_counter', 'dynamic_appender', 'python_values', 'delayed',
  'periods', 'branches', 'history_window', 'last_inputs',
];

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

test('a method exported in versions (a Python bool it branches on) is one method; the state picks the version', async () => {
  const model = await load(fixture('python_values').path);
  try {
    assert.deepEqual(model.methods.map((m) => m.name).sort(), ['forward', 'reset']);
    assert.equal(model.forward1, undefined);
    const first = model.state.find((s) => s.name === 'first');
    assert.deepEqual(first, { name: 'first', dtype: 'int64', shape: [] });
    assert.equal((await model.readState('first')).data[0], 1n);
    await model.forward(new Float32Array([1, 2]));
    assert.equal((await model.readState('first')).data[0], 0n); // the next call runs the other version
    await model.reset();
    assert.equal((await model.readState('first')).data[0], 1n);
  } finally {
    model.dispose();
  }
});

test('a method that changes its inputs writes their new values into the caller\'s arrays, inline and in a worker', async () => {
  const want = fixture('input_writes').spec;
  for (const worker of [false, true]) {
    const model = await load(fixture('input_writes').path, { worker });
    try {
      const fwd = model.methods.find((m) => m.name === 'forward');
      assert.deepEqual(fwd.inputs.map((i) => i.mutated), [true, true]);
      assert.deepEqual(fwd.outputs.map((o) => o.name), ['output']);
      for (const [c, call] of want.calls.entries()) {
        const [x, y] = call.inputs.map((v) => new Float32Array(v));
        const out = await model.forward(x, y);
        const close = (a, b, what) => a.forEach((v, i) =>
          assert.ok(Math.abs(v - b[i]) < 1e-5, `${what} (worker ${worker}) call ${c}: ${v} vs ${b[i]}`));
        close([...out.data], call.output, 'output');
        close([...x], call.after[0], 'x');
        close([...y], call.after[1], 'y');
      }
    } finally {
      model.dispose();
    }
  }
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

test('a history kept to a window: readState gives it at its length, reset empties it, inline and in a worker', async () => {
  for (const worker of [false, true]) await windowAtItsLength(worker);
});

async function windowAtItsLength(worker) {
  const model = await load(fixture('history_window').path, { worker });
  try {
    assert.deepEqual(model.state.find((s) => s.name === 'hist').shape, [3, 2]); // the slot, at its capacity
    assert.equal(model.metadata.growing_state, undefined);
    assert.deepEqual((await model.readState('hist')).shape, [0, 2]);
    for (let i = 1; i <= 4; i++) {
      await model.forward(new Float32Array([i, -i]));
      const hist = await model.readState('hist');
      assert.deepEqual(hist.shape, [Math.min(i, 3), 2]);
      assert.deepEqual([...hist.data].slice(-2), [i, -i]); // the newest row last
    }
    assert.deepEqual([...(await model.readState('hist')).data], [2, -2, 3, -3, 4, -4]);
    await model.reset();
    assert.deepEqual((await model.readState('hist')).shape, [0, 2]);
  } finally {
    model.dispose();
  }
}
