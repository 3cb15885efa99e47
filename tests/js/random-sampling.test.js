// Random sampling from the program's own generator (the `__rng__` state, docs/ops.md "Random
// sampling"): the wasm runtime gives the stream of tests/random_reference.py (the numpy
// implementation of the specification) bit for bit; model.seed(n), saveState/loadState,
// fork({ state: 'copy' }) and resetState reproduce or restart it, on the calling thread and in a worker.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Tensor, load } from '../../node/index.js';
import { fixture } from './helpers.js';

const { path, spec } = fixture('random_noise');
const x = () => new Tensor('float32', new Float32Array(5), [5]);

function assertStream(out, want, where) {
  const [eps, y, acc] = out;
  assert.deepEqual(eps.shape, [2, 3], `${where}: eps shape`);
  assert.deepEqual([...eps.data], want.eps.map(Math.fround), `${where}: eps`);
  assert.deepEqual([...y.data], want.y.map(Math.fround), `${where}: y`);
  return acc;
}

for (const worker of [false, true]) {
  const mode = worker ? 'worker' : 'main thread';

  test(`${mode}: the stream from seed 0 and seed 42 equals the reference, call by call`, async () => {
    const model = await load(path, { worker });
    try {
      assert.ok(model.state.some((s) => s.name === '__rng__' && s.dtype === 'int64' && s.shape[0] === 2));
      for (let c = 0; c < 3; c++) {
        const acc = assertStream(await model.forward(x()), spec.calls['0'][c], `seed 0 call ${c}`);
        assert.deepEqual([...acc.data], [c + 1, c + 1]);
      }
      assert.deepEqual([...(await model.readState('__rng__')).data], [0n, 3n]);
      await model.seed(42);
      assert.deepEqual([...(await model.readState('__rng__')).data], [42n, 0n]);
      for (let c = 0; c < 3; c++) assertStream(await model.forward(x()), spec.calls['42'][c], `seed 42 call ${c}`);
      await model.seed(42n); // a BigInt seed is the same seed
      assertStream(await model.forward(x()), spec.calls['42'][0], 'seed 42n');
      await assert.rejects(model.seed(2 ** 64), /TDM_ERR_INVALID_ARGUMENT|64-bit/);
      await assert.rejects(model.seed(1.5), /64-bit/);
    } finally {
      model.dispose();
    }
  });

  test(`${mode}: saveState/loadState and resetState reproduce and restart the stream`, async () => {
    const model = await load(path, { worker });
    try {
      await model.forward(x());
      const saved = await model.saveState();
      const second = await model.forward(x());
      assertStream(second, spec.calls['0'][1], 'call 1');
      await model.loadState(saved);
      assertStream(await model.forward(x()), spec.calls['0'][1], 'call 1 after loadState');
      await model.resetState();
      assertStream(await model.forward(x()), spec.calls['0'][0], 'call 0 after resetState');
    } finally {
      model.dispose();
    }
  });
}

test('fork({ state: "copy" }) continues the same stream, a plain fork starts it over', async () => {
  const model = await load(path);
  try {
    await model.seed(42);
    await model.forward(x());
    const copy = await model.fork({ state: 'copy' });
    const fresh = await model.fork();
    try {
      assertStream(await copy.forward(x()), spec.calls['42'][1], 'copy');
      assertStream(await model.forward(x()), spec.calls['42'][1], 'original');
      assertStream(await fresh.forward(x()), spec.calls['0'][0], 'fresh fork');
    } finally {
      copy.dispose();
      fresh.dispose();
    }
  } finally {
    model.dispose();
  }
});

test('writeState of the generator sets its seed and call count', async () => {
  const model = await load(path);
  try {
    await model.writeState('__rng__', new Tensor('int64', new BigInt64Array([42n, 1n]), [2]));
    assertStream(await model.forward(x()), spec.calls['42'][1], 'writeState of the generator');
  } finally {
    model.dispose();
  }
});

test('the threaded build gives the same stream (and the relaxed-SIMD one, where the engine has it)', async () => {
  const model = await load(path, { threads: 2 });
  try {
    for (let c = 0; c < 2; c++) assertStream(await model.forward(x()), spec.calls['0'][c], `${model.simd}, 2 threads, call ${c}`);
  } finally {
    model.dispose();
  }
});
