// Shared by the JS tests: fixtures produced by tests/fixtures/make.py, and tensor comparison with
// torch.testing.assert_close's float32 tolerances.
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Tensor } from '../../node/index.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const FIXTURES = process.env.TANDEM_FIXTURES ?? `${ROOT}build/fixtures`;

export function fixture(name) {
  const path = `${FIXTURES}/${name}.tandem`;
  assert.ok(existsSync(path), `missing ${path}: run tests/fixtures/make.py first (npm test does)`);
  return { path, spec: JSON.parse(readFileSync(`${FIXTURES}/${name}.json`, 'utf8')) };
}

export function fromJson(t) {
  const data = t.dtype === 'int64' ? t.data.map((x) => BigInt(x)) : t.data.map(Number);
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
    } else {
      assert.ok(Math.abs(a - b) <= atol + rtol * Math.abs(b), `${where}[${i}]: ${a}, expected ${b}`);
    }
  }
}
