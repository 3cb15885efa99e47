// model.profile in wasm, inline and in a worker: every op of a decode step timed, the call's outputs
// beside, the bytes each op writes (one K and one V row per layer into the state) and the flag.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load } from '../../node/index.js';
import { fixture, fromJson, assertClose } from './helpers.js';

test('profile times each op of a call and resolves to its outputs too', async () => {
  const { path, spec } = fixture('transformer');
  const model = await load(path);
  await model.prefill(fromJson(spec.calls[0].inputs[0]));
  const first = spec.calls[1];
  const { outputs, ops, totalMs } = await model.profile('decode', fromJson(first.inputs[0]));
  assertClose(outputs, first.outputs[0], 'profiled decode');
  assert.ok(ops.length > 10 && ops.some((o) => o.name === 'attention') && ops.some((o) => o.name === 'index_put'));
  assert.ok(ops.every((o, i) => o.index === i && o.ms >= 0) && totalMs > 0);
  model.dispose();
});

test('profile counts the bytes each op writes: a decode step writes one K and one V row per layer', async () => {
  // The transformer fixture: 2 layers, 4 heads of 16, a KV cache of 64 positions, an int64 position.
  const { path, spec } = fixture('transformer');
  for (const worker of [false, true]) {
    const model = await load(path, { worker });
    await model.prefill(fromJson(spec.calls[0].inputs[0]));
    const p = await model.profile('decode', fromJson(spec.calls[1].inputs[0]));
    assertClose(p.outputs, spec.calls[1].outputs[0], 'profiled decode');
    const row = 4 * 16 * 4;
    const puts = p.ops.filter((o) => o.name === 'index_put');
    assert.deepEqual(puts.map((o) => [o.bytesWritten, o.stateBytesWritten]), [[row, row], [row, row], [row, row], [row, row]]);
    assert.equal(p.stateBytesWritten, 4 * row + 8); // the new rows and the position
    assert.equal(p.stateBytes, model.stateBytes);
    assert.ok(p.stateBytes >= 2 * 2 * 4 * 64 * 16 * 4 + 8); // the caches and the position (and alignment)
    assert.equal(p.bytesWritten, p.ops.reduce((a, o) => a + o.bytesWritten, 0));
    assert.ok(p.bytesWritten > p.stateBytesWritten && p.ops.some((o) => o.name === 'attention' && o.bytesWritten > 0));
    assert.deepEqual(p.flagged, []);
    model.dispose();
  }
  // a fraction of 0 flags every op that writes anything
  const strict = await load(path, { profileFlagFraction: 0 });
  const p = await strict.profile('decode', fromJson(spec.calls[1].inputs[0]));
  assert.deepEqual(p.flagged.map((o) => o.index), p.ops.filter((o) => o.bytesWritten > 0).map((o) => o.index));
  strict.dispose();
  await assert.rejects(load(path, { profileFlagFraction: -1 }), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT');
});
