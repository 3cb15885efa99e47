// Hostile files and hostile callers, in wasm: the malformed-file corpus, and calls that are wrong
// in every way a caller can be wrong. After each rejected call the state reads back unchanged.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { load, Tensor, TandemError } from '../../node/index.js';
import { FIXTURES, fixture } from './helpers.js';

test('every malformed file fails to load with its expected status (wasm)', async () => {
  const dir = `${FIXTURES}/malformed`;
  assert.ok(existsSync(`${dir}/expected.txt`), 'run tests/fixtures/malformed.py first (npm test does)');
  const lines = readFileSync(`${dir}/expected.txt`, 'utf8').trim().split('\n');
  let valid = 0;
  const wasm = readFileSync(new URL('../../web/tandem.wasm', import.meta.url));
  for (const line of lines) {
    const [name, allowed] = line.split(' ');
    try {
      const m = await load(readFileSync(`${dir}/${name}.tandem`), { wasm });
      valid++; // a mutation that leaves a valid program (e.g. a changed weight): it must be one the corpus allows to load, and run
      assert.ok(allowed.split(',').includes('TDM_OK'), `${name} loaded, but must fail with ${allowed}`);
      for (const spec of m.methods) {
        // a dynamic dim (a string: its name or expression) at the dim's maximum
        const sizes = (s) => s.shape.map((d) => (typeof d === 'string' ? (spec.dims[d] ? spec.dims[d].max : 1) : d));
        await m.call(spec.name, ...spec.inputs.map((s) => new Tensor(s.dtype,
          new ({ float32: Float32Array, int64: BigInt64Array, bool: Uint8Array,
            int32: Int32Array })[s.dtype](sizes(s).reduce((a, b) => a * b, 1)), sizes(s))))
          .catch((e) => assert.ok(['TDM_ERR_INDEX', 'TDM_ERR_SHAPE'].includes(e.code), `${name}: ${e}`));
      }
      m.dispose();
    } catch (e) {
      assert.ok(e instanceof TandemError, `${name}: ${e}`);
      assert.ok(allowed.split(',').includes(e.code), `${name}: ${e.code} (${e.message}), expected ${allowed}; ${line}`);
    }
  }
  assert.ok(lines.length > 500 && valid < lines.length / 10);
});

async function stateOf(m) {
  return Promise.all(m.state.map(async (s) => Array.from((await m.readState(s.name)).data)));
}

test('rejected calls of every kind leave the state unchanged', async () => {
  for (const opts of [{}, { worker: true }]) {
    const m = await load(fixture('transformer').path, opts);
    await m.prefill(new BigInt64Array(8).fill(3n));
    const before = await stateOf(m);
    const detached = new BigInt64Array(1);
    structuredClone(detached.buffer, { transfer: [detached.buffer] });
    const bad = [
      () => m.decode(),                                                     // wrong count
      () => m.decode(1n, 2n),
      () => m.decode(new Float32Array(1)),                                  // wrong dtype
      () => m.decode(new BigInt64Array(2)),                                 // wrong size
      () => m.decode(new Tensor('int64', new BigInt64Array(1), [1])),       // wrong shape
      () => m.decode(detached),                                             // detached buffer
      () => m.decode(new BigInt64Array([99999n])),                          // index out of range at run time
      () => m.decode(new BigInt64Array([-99999n])),
      () => m.decode('a'),
      () => m.decode(null),
      () => m.call('nope'),
      () => m.writeState('pos', new Float32Array(1)),
      () => m.loadState(new Uint8Array(100)),
    ];
    for (const [i, call] of bad.entries()) {
      await assert.rejects(call(), (e) => e instanceof TandemError, `bad call ${i}`);
      assert.deepEqual(await stateOf(m), before, `state after bad call ${i} (${opts.worker ? 'worker' : 'inline'})`);
    }
    m.dispose();
  }
});

test('typed arrays over a SharedArrayBuffer are accepted', async () => {
  for (const opts of [{}, { worker: true }]) {
    const m = await load(fixture('accumulator').path, opts);
    const x = new Float32Array(new SharedArrayBuffer(12));
    x.set([1, 2, 3]);
    assert.deepEqual([...(await m.forward(x)).data], [2, 4, 6]);
    m.dispose();
  }
});

test('NaN and Inf propagate like PyTorch', async () => {
  const m = await load(fixture('accumulator').path);
  const y = await m.forward(new Float32Array([NaN, Infinity, -Infinity]));
  assert.ok(Number.isNaN(y.data[0]));
  assert.equal(y.data[1], Infinity);
  assert.equal(y.data[2], -Infinity);
  const z = await m.forward(new Float32Array([1, -Infinity, 1])); // inf + -inf = nan
  assert.ok(Number.isNaN(z.data[0]) && Number.isNaN(z.data[1]) && z.data[2] === -Infinity);
  m.dispose();
});

test('results stay correct when linear memory grows between calls', async () => {
  const a = await load(fixture('big_weights').path);
  const x = new Float32Array(1024).fill(0.5);
  const first = await a.forward(x);
  await a.resetState();
  const before = a.memoryBytes;
  const forks = [];
  while (a.memoryBytes === before) forks.push(await a.fork()); // sessions in the same instance
  assert.ok(a.memoryBytes > before, 'linear memory grew');
  assert.deepEqual([...(await a.forward(x)).data], [...first.data]);
  forks.forEach((f) => f.dispose());
  a.dispose();
});

test('dispose() during a call rejects it cleanly, in a worker', async () => {
  const m = await load(fixture('transformer').path, { worker: true });
  const inflight = m.prefill(new BigInt64Array(8));
  m.dispose();
  await assert.rejects(inflight, (e) => e.code === 'TDM_ERR_DISPOSED');
  await assert.rejects(m.decode(1n), (e) => e.code === 'TDM_ERR_DISPOSED');
});

test('truncation at every byte offset of a small program fails cleanly (wasm)', async () => {
  const bytes = readFileSync(fixture('accumulator').path);
  const wasm = readFileSync(new URL('../../web/tandem.wasm', import.meta.url));
  for (let cut = 0; cut < bytes.length; cut++) {
    await assert.rejects(load(bytes.subarray(0, cut), { wasm }),
      (e) => e instanceof TandemError && e.code === (cut < 4 ? 'TDM_ERR_BAD_MAGIC' : 'TDM_ERR_TRUNCATED'), `cut at ${cut}`);
  }
  (await load(bytes, { wasm })).dispose();
});
