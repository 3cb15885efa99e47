// The model families of tests/models/families.py through the wasm build, against PyTorch eager's
// outputs for the same call sequences (recorded by tests/fixtures/make.py); an out-of-range token
// fails the call and leaves the KV cache as it was.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load } from '../../node/index.js';
import { fixture, fromJson, assertClose, checkSequence } from './helpers.js';

for (const name of ['transformer', 'lstm', 'gru_layer', 'streaming_conv', 'cnn']) {
  test(`${name}: call sequence matches PyTorch eager`, () => checkSequence(name));
}

test('transformer: an out-of-range token fails the call and leaves the KV cache as it was', async () => {
  const { path, spec } = fixture('transformer');
  const model = await load(path);
  const prefill = spec.calls[0];
  await model.prefill(fromJson(prefill.inputs[0]));
  const first = spec.calls[1];
  await assert.rejects(model.decode(new BigInt64Array([100000n])), (e) => e.code === 'TDM_ERR_INDEX' && /100000/.test(e.message));
  // the failed call changed nothing: the next decode gives eager's answer for the first decode
  assertClose(await model.decode(fromJson(first.inputs[0])), first.outputs[0], 'decode after a rejected call');
  model.dispose();
});
