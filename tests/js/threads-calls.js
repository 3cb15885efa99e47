// Shared by tests/js/threads.test.js and the browser page: calls every method of a model twice in
// turn with deterministic inputs (the same as tests/c/test_threads.c) and returns the bytes of
// every output and of the final state, as one hex string, for bit-for-bit comparison.
import { Tensor } from '../../web/tandem.js';

const ARRAYS = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array, bool: Uint8Array };

function input(spec, i) {
  const n = spec.shape.reduce((a, b) => a * b, 1);
  const data = new ARRAYS[spec.dtype](n);
  for (let e = 0; e < n; e++) {
    if (spec.dtype === 'float32') data[e] = Math.fround(Math.sin(Math.fround(0.37 * e) + i + 1));
    else if (spec.dtype === 'int64') data[e] = BigInt((e * 7 + 3) % 3);
    else if (spec.dtype === 'int32') data[e] = (e * 7 + 3) % 3;
    else data[e] = e & 1;
  }
  return new Tensor(spec.dtype, data, spec.shape);
}

const hex = (view) => Array.from(new Uint8Array(view.buffer, view.byteOffset, view.byteLength),
  (b) => b.toString(16).padStart(2, '0')).join('');

export async function callAll(model) {
  const parts = [];
  for (let round = 0; round < 2; round++) {
    for (const m of model.methods) {
      try {
        const out = await model.call(m.name, ...m.inputs.map(input));
        for (const t of out === undefined ? [] : Array.isArray(out) ? out : [out]) parts.push(hex(t.data));
      } catch (e) {
        parts.push(e.code ?? String(e));
      }
    }
  }
  parts.push(hex(await model.saveState()));
  return parts.join('|');
}
