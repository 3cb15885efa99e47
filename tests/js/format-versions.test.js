// Files of the earlier .tandem format versions (tests/fixtures/formats/vN/, written by those versions'
// exporters from tests/fixtures/formats/format_models.py) load in JS and compute what eager PyTorch does;
// the values here follow by hand from the models (tests/python/test_format_versions.py checks the same
// files against eager itself, on both Python backends).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { load } from '../../node/index.js';
import { ROOT } from './helpers.js';

for (const version of [1, 2, 3]) {
  const file = (name) => `${ROOT}tests/fixtures/formats/v${version}/${name}.tandem`;

  test(`format version ${version}: the shared buffer's methods (add to it, clear it)`, async () => {
    const bytes = readFileSync(file('shared'));
    assert.equal(new DataView(bytes.buffer, bytes.byteOffset).getUint32(4, true), version);
    const model = await load(file('shared'));
    try {
      assert.deepEqual(model.methods.map((m) => m.name).sort(), ['forward', 'reset']);
      assert.deepEqual(Array.from((await model.forward(new Float32Array([1.5]))).data), [2.5]); // the buffer starts at 1
      assert.deepEqual(Array.from((await model.forward(new Float32Array([-0.25]))).data), [2.25]);
      await model.reset();
      assert.deepEqual(Array.from((await model.forward(new Float32Array([2]))).data), [2]);
      if (version === 1) assert.deepEqual(model.metadata, {});
    } finally {
      model.dispose();
    }
  });

  test(`format version ${version}: rows written at an int64 position, the cache's sum read back`, async () => {
    const model = await load(file('cache'));
    try {
      const row = (v) => new Float32Array([v, v, v]);
      assert.deepEqual(Array.from((await model.forward(row(1))).data), [1, 1, 1]);
      assert.deepEqual(Array.from((await model.forward(row(2))).data), [3, 3, 3]);
      const saved = await model.saveState();
      assert.deepEqual(Array.from((await model.forward(row(3))).data), [6, 6, 6]);
      await model.loadState(saved);
      assert.deepEqual(Array.from((await model.forward(row(10))).data), [13, 13, 13]);
      await model.reset();
      assert.deepEqual(Array.from((await model.forward(row(0.5))).data), [0.5, 0.5, 0.5]);
    } finally {
      model.dispose();
    }
  });
}
