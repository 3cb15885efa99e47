// Shared by the JS tests: fixtures produced by tests/fixtures/make.py, and tensor comparison with
// torch.testing.assert_close's float32 tolerances.
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Tensor, load } from '../../node/index.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const FIXTURES = process.env.TANDEM_FIXTURES ?? `${ROOT}build/fixtures`;

export function fixture(name) {
  const path = `${FIXTURES}/${name}.tandem`;
  assert.ok(existsSync(path), `missing ${path}: run tests/fixtures/make.py first (npm test does)`);
  return { path, spec: JSON.parse(readFileSync(`${FIXTURES}/${name}.json`, 'utf8')) };
}

export function fromJson(t) {
  // floats that JSON cannot hold are written by tests/fixtures/make.py as Python spells them
  const special = { inf: Infinity, '-inf': -Infinity, nan: NaN };
  const data = t.dtype === 'int64' ? t.data.map((x) => BigInt(x)) : t.data.map((x) => (x in special ? special[x] : Number(x)));
  return new Tensor(t.dtype, data, t.shape);
}

export function assertClose(got, want, where, { rtol = 1.3e-6, atol = 1e-5 } = {}) {
  assert.equal(got.dtype, want.dtype, `${where}: dtype`);
  assert.deepEqual(got.shape, want.shape, `${where}: shape`);
  const w = fromJson(want).data;
  for (let i = 0; i < w.length; i++) {
    const a = got.data[i], b = w[i];
    if (typeof b === 'bigint' || want.dtype === 'bool') {
      assert.equal(a, b, `${where}[${i}]`);
    } else if (Number.isNaN(b)) {
      assert.ok(Number.isNaN(a), `${where}[${i}]: ${a}, expected NaN`);
    } else if (!Number.isFinite(b)) {
      assert.equal(a, b, `${where}[${i}]`); // ±inf: the same infinity (inf - inf is NaN, never within a tolerance)
    } else {
      assert.ok(Math.abs(a - b) <= atol + rtol * Math.abs(b), `${where}[${i}]: ${a}, expected ${b}`);
    }
  }
}

/** Runs a fixture's whole call sequence and checks every output against eager's. */
export async function checkSequence(name, options = {}) {
  const { path, spec } = fixture(name);
  const model = await load(path, options);
  try {
    for (const [i, call] of spec.calls.entries()) {
      const out = await model[call.method](...call.inputs.map(fromJson));
      if (call.outputs.length === 0 && model.methods.find((m) => m.name === call.method).outputs.length > 0) {
        assert.equal(out, null, `call ${i} ${call.method}: eager returns None here (a version without outputs)`);
      }
      const outs = out === undefined || out === null ? [] : Array.isArray(out) ? out : [out];
      assert.equal(outs.length, call.outputs.length, `call ${i} ${call.method}: output count`);
      outs.forEach((o, k) => assertClose(o, call.outputs[k], `call ${i} ${call.method} output ${k}`));
    }
  } finally {
    model.dispose();
  }
}
