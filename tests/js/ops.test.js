// Every per-op parity case of tests/python/test_ops.py, run through the wasm build (where the
// SIMD128 kernels are) against PyTorch eager's output. The Python run records the cases when
// TANDEM_OPS_FIXTURES is set (npm test does).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { load } from '../../node/index.js';
import { FIXTURES, fromJson, assertClose } from './helpers.js';

const DIR = process.env.TANDEM_OPS_FIXTURES ?? `${FIXTURES}/ops`;

test('per-op parity cases match PyTorch eager in wasm', async () => {
  assert.ok(existsSync(DIR), `missing ${DIR}: run pytest tests/python/test_ops.py with TANDEM_OPS_FIXTURES=${DIR}`);
  const names = readdirSync(DIR).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5));
  assert.ok(names.length > 250, `only ${names.length} op cases recorded`);
  for (const [i, name] of names.entries()) {
    const spec = JSON.parse(readFileSync(`${DIR}/${name}.json`, 'utf8'));
    // every other case on one thread (the single-thread build, as a page without cross-origin isolation runs it),
    // the rest with the default pool (the threaded build): each load with a pool starts a worker (~150 ms)
    const model = await load(`${DIR}/${name}.tandem`, { threads: i % 2 ? undefined : 1 });
    const out = await model.forward(...spec.inputs.map(fromJson));
    const tol = spec.rtol === null ? {} : { rtol: spec.rtol, atol: spec.atol };
    assertClose(out, spec.output, name, tol);
    model.dispose();
  }
});
