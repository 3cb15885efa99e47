// What the wasm runtime refuses, and says why: truncated and corrupted files (the runtime still loads
// the next one), and calls with wrong inputs, an unknown method or a disposed model (later calls still run).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { load, TandemError } from '../../node/index.js';
import { fixture } from './helpers.js';

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
