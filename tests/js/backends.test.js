// The same members behave the same on every backend: tests/js/backend-checks.js run on wasm on this
// thread and on wasm in a worker (WebGPU runs them in tests/browser/webgpu.test.js), over the
// accumulator fixture and its call sequence from PyTorch eager.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load, Tensor, Model, WorkerModel } from '../../node/index.js';
import { fixture } from './helpers.js';
import { backendChecks } from './backend-checks.js';

const CHECKS = ['members', 'memoryBytes', 'the call sequence', 'FIFO: calls made without waiting run in the order made',
  'rejected calls leave the state and the queue as they were', 'saveState / loadState / resetState', 'profile',
  'fork: its own state, initial or a copy', 'an unknown load option is rejected, naming it and the valid ones', 'dispose'];

const BACKENDS = [['wasm on this thread', { threads: 1 }, Model], ['wasm in a worker', { worker: true, threads: 1 }, WorkerModel],
  ['wasm, two threads', { threads: 2 }, Model]];

for (const [name, options, Class] of BACKENDS) {
  test(`backend checks: ${name}`, async () => {
    const { path, spec } = fixture('accumulator');
    const ran = await backendChecks({ load, Tensor, source: path, options, calls: spec.calls, expect: { device: 'wasm', profile: true } });
    assert.deepEqual(ran, CHECKS);
    const m = await load(path, options);
    assert.ok(m instanceof Class && m instanceof Model, `${name}: a ${Class.name}`);
    assert.equal(m instanceof WorkerModel, Class === WorkerModel);
    m.dispose();
  });
}

test('backend checks fail when a backend misbehaves', async () => {
  // a load whose model returns wrong values fails the call-sequence check, naming it
  const { path, spec } = fixture('accumulator');
  const calls = spec.calls.map((c, k) => (k === 0 ? { ...c, outputs: [{ ...c.outputs[0], data: [2, 4, 7] }] } : c));
  await assert.rejects(backendChecks({ load, Tensor, source: path, options: {}, calls, expect: { device: 'wasm', profile: true } }),
    /the call sequence: call 0 \(forward\): \[2,4,6\], expected \[2,4,7\]/);
});

test('hooks are not load options: an underscored key is an unknown option like any other', async () => {
  const { path } = fixture('accumulator');
  for (const key of ['_spawnThread', '_onWorker', '_wasmFile', '_cores', 'hooks']) {
    await assert.rejects(load(path, { [key]: () => {} }), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT'
      && e.message.includes(`unknown option '${key}'`) && e.message.includes('the options are: threads, simd, device'), key);
  }
  await assert.rejects(load(path, null), /TDM_ERR_INVALID_ARGUMENT/); // not an options object
});
