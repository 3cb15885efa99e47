// The JS package's promises, inline and in worker mode: FIFO order across methods, the state API,
// sessions sharing one program, loading with progress, and typed errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { load, Tensor, TandemError } from '../../node/index.js';
import { fixture, fromJson, assertClose, ROOT } from './helpers.js';

const MODES = [{ name: 'inline', opts: {} }, { name: 'worker', opts: { worker: true } }];
const f32 = (...v) => new Float32Array(v);

for (const { name: mode, opts } of MODES) {
  test(`${mode}: 1000 overlapping calls mixing methods run in FIFO order`, async () => {
    const path = fixture('accumulator').path;
    const [a, b] = [await load(path, opts), await load(path)];
    const plan = Array.from({ length: 1000 }, (_, i) =>
      i % 97 === 0 ? ['bad'] : i % 13 === 0 ? ['reset'] : ['forward', f32(i % 7, (i * 3) % 5, -(i % 11))]);
    const run = (m, [method, ...args]) => (method === 'bad' ? m.forward(f32(1, 2)) : m[method](...args));
    const overlapped = await Promise.allSettled(plan.map((p) => run(a, p)));
    for (const [i, p] of plan.entries()) {
      const got = overlapped[i];
      if (p[0] === 'bad') {
        assert.equal(got.status, 'rejected');
        assert.equal(got.reason.code, 'TDM_ERR_INVALID_ARGUMENT');
        continue;
      }
      const want = await run(b, p);
      assert.equal(got.status, 'fulfilled', `call ${i}`);
      if (want === undefined) assert.equal(got.value, undefined);
      else assert.deepEqual([...got.value.data], [...want.data], `call ${i} ${p[0]}`);
    }
    a.dispose();
    b.dispose();
  });

  test(`${mode}: dispose rejects the calls still pending`, async () => {
    const m = await load(fixture('gru').path, opts);
    const calls = Array.from({ length: 50 }, () => m.forward(new Float32Array(16)));
    m.dispose();
    const settled = await Promise.allSettled(calls);
    const rejected = settled.filter((s) => s.status === 'rejected');
    assert.ok(rejected.length > 0, 'some calls were still pending');
    for (const r of rejected) assert.ok(r.reason.code === 'TDM_ERR_DISPOSED' && /disposed/.test(r.reason.message));
    await assert.rejects(m.forward(new Float32Array(16)), (e) => e.code === 'TDM_ERR_DISPOSED');
  });

  test(`${mode}: state can be read, written, saved and restored`, async () => {
    const { path, spec } = fixture('transformer');
    const m = await load(path, opts);
    const names = m.state.map((s) => s.name);
    assert.ok(names.includes('pos') && names.includes('blocks.0.attn.k_cache'));
    assert.deepEqual(m.state.find((s) => s.name === 'pos'), { name: 'pos', dtype: 'int64', shape: [] });
    const calls = spec.calls;
    await m.prefill(fromJson(calls[0].inputs[0]));
    for (let i = 1; i <= 5; i++) await m.decode(fromJson(calls[i].inputs[0]));
    const saved = await m.saveState();
    assert.equal((await m.readState('pos')).data[0], 13n);
    const after = [];
    for (let i = 6; i <= 10; i++) after.push(await m.decode(fromJson(calls[i].inputs[0])));
    await m.loadState(saved);
    for (let i = 6; i <= 10; i++) assertClose(await m.decode(fromJson(calls[i].inputs[0])), calls[i].outputs[0], `restored decode ${i}`);
    after.forEach((o, k) => assertClose(o, calls[6 + k].outputs[0], `decode ${6 + k}`));
    // bytes of another program, or of the wrong size, are rejected and the state is untouched
    const pos = (await m.readState('pos')).data[0];
    const other = await load(fixture('accumulator').path, opts);
    await assert.rejects(m.loadState(await other.saveState()), (e) => e.code === 'TDM_ERR_STATE_MISMATCH');
    await assert.rejects(m.loadState(saved.subarray(0, saved.length - 4)), (e) => e.code === 'TDM_ERR_STATE_MISMATCH');
    await assert.rejects(m.loadState(new Uint8Array(10)), (e) => e.code === 'TDM_ERR_STATE_MISMATCH');
    assert.equal((await m.readState('pos')).data[0], pos);
    // writeState checks dtype and shape, then writes
    await assert.rejects(m.writeState('pos', new Tensor('float32', f32(1), [])), (e) => /expected int64\[\], given float32\[\]/.test(e.message));
    await assert.rejects(m.writeState('nope', 1), (e) => e.code === 'TDM_ERR_NOT_FOUND');
    await m.writeState('pos', new Tensor('int64', new BigInt64Array([3n]), []));
    assert.equal((await m.readState('pos')).data[0], 3n);
    await m.resetState();
    assert.equal((await m.readState('pos')).data[0], 0n);
    other.dispose();
    m.dispose();
  });

  test(`${mode}: forks have their own state and share the weights`, async () => {
    const { path } = fixture('accumulator');
    const a = await load(path, opts);
    const b = await a.fork();
    assert.deepEqual([...(await a.forward(f32(1, 2, 3))).data], [2, 4, 6]);
    assert.deepEqual([...(await b.forward(f32(1, 1, 1))).data], [2, 2, 2]);
    assert.deepEqual([...(await a.forward(f32(1, 2, 3))).data], [4, 8, 12]);
    a.dispose(); // the program lives on with its other session
    assert.deepEqual([...(await b.forward(f32(1, 1, 1))).data], [4, 4, 4]);
    b.dispose();
  });
}

test('50 sessions grow memory by about 49 x (state + scratch), not 49 x weights', async () => {
  const m = await load(fixture('big_weights').path);
  const weights = 1024 * 1024 * 4;
  const one = m.memoryBytes;
  const forks = [];
  for (let i = 0; i < 49; i++) forks.push(await m.fork());
  const fifty = m.memoryBytes;
  const perSession = m.stateBytes + m.scratchBytes;
  const growth = fifty - one;
  console.log(`sessions: 1 -> ${one} bytes, 50 -> ${fifty} bytes; growth ${growth} = ${(growth / perSession).toFixed(1)} x (state ${m.stateBytes} + scratch ${m.scratchBytes}); weights ${weights}`);
  assert.ok(growth <= 49 * perSession + 512 * 1024, `growth ${growth} vs 49 x ${perSession}`);
  assert.ok(growth < weights, 'the weights were not copied per session');
  // each session computes independently
  const x = new Float32Array(1024).fill(0.01);
  const outs = await Promise.all([m, ...forks.slice(0, 3)].map((s) => s.forward(x)));
  for (const o of outs) assert.deepEqual([...o.data.slice(0, 8)], [...outs[0].data.slice(0, 8)]);
  forks.forEach((f) => f.dispose());
  m.dispose();
});

test('out of memory is a typed error and earlier sessions keep working', async () => {
  const m = await load(fixture('huge_state').path); // 256 MiB of state per session
  const forks = [];
  let error;
  for (let i = 0; i < 20 && !error; i++) {
    try {
      forks.push(await m.fork());
    } catch (e) {
      error = e;
    }
  }
  assert.ok(error instanceof TandemError && error.code === 'TDM_ERR_OUT_OF_MEMORY', `got ${error}`);
  assert.ok(/out of memory/.test(error.message));
  assert.deepEqual([...(await m.forward(f32(1, 2, 3, 4))).data], [1, 2, 3, 4]);
  assert.deepEqual([...(await forks[0].forward(f32(1, 1, 1, 1))).data], [1, 1, 1, 1]);
  forks.forEach((f) => f.dispose());
  m.dispose();
});

test('URL sources report progress, and the wasm compiles once per URL', async () => {
  const requests = [];
  const server = createServer((req, res) => {
    requests.push(req.url);
    const file = req.url === '/tandem.wasm' ? `${ROOT}web/tandem.wasm` : fixture('transformer').path;
    const body = readFileSync(file);
    res.writeHead(200, { 'content-length': body.length, 'content-type': 'application/octet-stream' });
    res.end(body);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${server.address().port}`;
  try {
    const events = [];
    const opts = { wasm: `${base}/tandem.wasm`, onProgress: (p) => events.push(p) };
    const a = await load(`${base}/model.tandem`, opts);
    const b = await load(`${base}/model.tandem`, { wasm: opts.wasm });
    const size = readFileSync(fixture('transformer').path).length;
    assert.ok(events.length >= 2);
    assert.deepEqual(events.at(-1), { loaded: size, total: size });
    assert.ok(events.every((e, i) => i === 0 || e.loaded >= events[i - 1].loaded));
    assert.equal(requests.filter((u) => u === '/tandem.wasm').length, 1, 'the wasm was fetched and compiled once');
    assert.equal(a.methods.length, 3);
    a.dispose();
    b.dispose();
  } finally {
    server.close();
  }
});

test('errors name what was wrong', async () => {
  const m = await load(fixture('gru').path);
  await assert.rejects(m.call('nope'), (e) => e.code === 'TDM_ERR_NOT_FOUND' && /no method 'nope'/.test(e.message));
  await assert.rejects(m.forward(), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /takes 1 input/.test(e.message));
  await assert.rejects(m.forward(new Tensor('int64', new BigInt64Array(16), [1, 16])), (e) => /expected float32\[1,16\], given int64\[1,16\]/.test(e.message));
  await assert.rejects(m.forward(new Tensor('float32', new Float32Array(16), [16])), (e) => /expected float32\[1,16\], given float32\[16\]/.test(e.message));
  await assert.rejects(load(new Uint8Array([1, 2, 3, 4, 5])), (e) => e.code === 'TDM_ERR_BAD_MAGIC');
  await assert.rejects(load('/nonexistent/model.tandem'), (e) => e.code === 'TDM_ERR_NOT_FOUND');
  m.dispose();
  await assert.rejects(m.forward(new Float32Array(16)), (e) => e.code === 'TDM_ERR_DISPOSED');
});
