// The JS package's promises, inline and in worker mode: FIFO order across methods, the state API,
// sessions sharing one program, loading with progress, and typed errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { load, Tensor, TandemError } from '../../node/index.js';
import { fixture, fromJson, assertClose, ROOT } from './helpers.js';
import { HOOKS } from '../../web/options.js';

const MODES = [{ name: 'inline', opts: {} }, { name: 'worker', opts: { worker: true } }];
const f32 = (...v) => new Float32Array(v);
/** p, or a rejection naming `what` after ms milliseconds (a promise that never settles fails). */
async function within(p, ms, what) {
  let timer;
  const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: did not settle within ${ms} ms`)), ms); });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The bytes of a .tandem file with the string `from` (e.g. a method name) renamed to the shorter
 * or equal `to`: the strings section is rewritten in place and shrinks (a gap after it is allowed,
 * docs/format.md). Makes files tandem.export refuses to write. */
function renameString(bytes, from, to) {
  const out = new Uint8Array(bytes);
  const dv = new DataView(out.buffer);
  let entry = 32;
  while (dv.getUint32(entry, true) !== 1) entry += 24; // section id 1: strings
  const off = Number(dv.getBigUint64(entry + 8, true)), size = Number(dv.getBigUint64(entry + 16, true));
  const strings = [];
  for (let at = off + 4, n = dv.getUint32(off, true); n > 0; n--) {
    const len = dv.getUint32(at, true);
    strings.push(new TextDecoder().decode(out.subarray(at + 4, at + 4 + len)));
    at += 4 + len + 1;
  }
  assert.ok(strings.includes(from) && to.length <= from.length, `${from} -> ${to}`);
  const enc = new TextEncoder();
  const parts = strings.map((x) => enc.encode(x === from ? to : x));
  out.fill(0, off, off + size);
  dv.setUint32(off, parts.length, true);
  let at = off + 4;
  for (const p of parts) { dv.setUint32(at, p.length, true); out.set(p, at + 4); at += 4 + p.length + 1; }
  dv.setBigUint64(entry + 16, BigInt(at - off), true);
  return out;
}

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
    // inline, a call runs when it is made, so none is pending; in a worker, some still are
    if (mode === 'inline') assert.equal(rejected.length, 0);
    else assert.ok(rejected.length > 0, 'some calls were still pending');
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
    const v1 = saved.slice();
    new DataView(v1.buffer).setUint32(4, 1, true); // an earlier saved-state format
    await assert.rejects(m.loadState(v1), (e) => e.code === 'TDM_ERR_STATE_MISMATCH'
      && /format 1; this tandem reads format 2/.test(e.message));
    assert.equal((await m.readState('pos')).data[0], pos);
    // another program over the same state layout (the model re-exported with one more method)
    // reads the saved state, and goes on as the original would
    const plus = await load(`${path.slice(0, -'.tandem'.length)}_plus.tandem`, opts);
    await plus.loadState(saved);
    for (let i = 6; i <= 10; i++) assertClose(await plus.decode(fromJson(calls[i].inputs[0])), calls[i].outputs[0],
      `decode ${i} in the other program`);
    const header = new DataView(saved.buffer, saved.byteOffset);
    const fromPlus = new DataView((await plus.saveState()).buffer);
    assert.equal(fromPlus.getBigUint64(8, true), header.getBigUint64(8, true), 'same layout fingerprint');
    assert.notEqual(fromPlus.getBigUint64(16, true), header.getBigUint64(16, true), 'each records the program that wrote it');
    plus.dispose();
    // writeState checks dtype and shape, then writes
    await assert.rejects(m.writeState('pos', new Tensor('float32', f32(1), [])),
      (e) => /expected int64\[\], given float32\[\]/.test(e.message));
    await assert.rejects(m.writeState('nope', 1), (e) => e.code === 'TDM_ERR_NOT_FOUND');
    await m.writeState('pos', new Tensor('int64', new BigInt64Array([3n]), []));
    assert.equal((await m.readState('pos')).data[0], 3n);
    await m.resetState();
    assert.equal((await m.readState('pos')).data[0], 0n);
    other.dispose();
    m.dispose();
  });

  test(`${mode}: inputs are read when the call is made: one array reused across overlapping calls`, async () => {
    // The original report's forward1: v += x; return v (v starts at 1). Eager with x = 1, 2, 3, 4
    // gives 2, 4, 7, 11; reading the array when the call runs instead gives 5, 9, 13, 17.
    const m = await load(fixture('original_report').path, opts);
    const a = new Float32Array(1);
    const calls = [];
    for (const v of [1, 2, 3, 4]) {
      a[0] = v;
      calls.push(m.forward1(a));
    }
    assert.deepEqual((await Promise.all(calls)).map((y) => y.data[0]), [2, 4, 7, 11]);
    // a Tensor's data, by call(), and writeState the same way
    const t = new Tensor('float32', new Float32Array(1), [1]);
    calls.length = 0;
    for (const v of [1, 2]) {
      t.data[0] = v;
      calls.push(m.call('forward1', t));
    }
    const b = new Float32Array([10]);
    calls.push(m.writeState('shared_module._v', b));
    b[0] = 99;
    calls.push(m.forward1(0));
    assert.deepEqual((await Promise.all(calls)).map((y) => y?.data[0]), [12, 14, undefined, 10]);
    m.dispose();
  });

  test(`${mode}: model.methods and model.state are frozen copies; calls are validated against the runtime's own`, async () => {
    const m = await load(fixture('accumulator').path, opts);
    const fwd = m.methods.find((x) => x.name === 'forward');
    const state = m.state[0];
    Reflect.set(fwd.inputs[0].shape, 0, 4); // what a caller might do: it must not change validation
    Reflect.set(fwd.inputs[0], 'dtype', 'int64');
    Reflect.set(state.shape, 0, 4);
    assert.deepEqual([...(await m.forward(f32(1, 2, 3))).data], [2, 4, 6]);
    await assert.rejects(m.forward(new Float32Array(4)), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT'
      && /expected float32\[3\]/.test(e.message));
    await assert.rejects(m.forward(new Tensor('float32', new Float32Array(4), [4])), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT');
    await assert.rejects(m.forward(new Tensor('int64', new BigInt64Array(3), [3])), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT');
    await assert.rejects(m.writeState('state', new Float32Array(4)), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT');
    await m.writeState('state', f32(1, 1, 1));
    assert.deepEqual([...(await m.readState('state')).data], [1, 1, 1]);
    // the specs read back unchanged, and are frozen all the way down
    Reflect.set(m, 'methods', []);
    Reflect.set(m, 'state', []);
    assert.deepEqual(m.methods.find((x) => x.name === 'forward')?.inputs, [{ name: 'x', dtype: 'float32', shape: [3] }]);
    assert.deepEqual(m.state, [{ name: 'state', dtype: 'float32', shape: [3] }]);
    for (const o of [m.methods, fwd, fwd.inputs, fwd.inputs[0], fwd.inputs[0].shape, m.state, state, state.shape]) {
      assert.ok(Object.isFrozen(o), `frozen: ${JSON.stringify(o)}`);
    }
    assert.throws(() => { fwd.inputs[0].shape[0] = 4; }, TypeError); // modules are strict: writes throw
    m.dispose();
  });

  test(`${mode}: a method named 'then' does not make the model a thenable; call() reaches it`, async () => {
    const bytes = renameString(readFileSync(fixture('accumulator').path), 'reset', 'then');
    const m = await within(load(bytes, opts), 10000, 'await load()');
    assert.equal(m.then, undefined);
    assert.deepEqual(m.methods.map((x) => x.name).sort(), ['forward', 'then']);
    assert.deepEqual([...(await m.forward(f32(1, 1, 1))).data], [2, 2, 2]);
    assert.equal(await m.call('then'), undefined); // the renamed reset
    assert.deepEqual([...(await m.call('forward', f32(1, 1, 1))).data], [2, 2, 2]);
    const f = await within(m.fork(), 10000, 'await fork()');
    assert.equal(await f.call('then'), undefined);
    f.dispose();
    m.dispose();
  });

  test(`${mode}: every name of the model object is reserved in python/tandem/names.py`, async () => {
    const source = readFileSync(`${ROOT}python/tandem/names.py`, 'utf8');
    const reserved = new Set(source.match(/RESERVED = frozenset\(\s*"""([^"]*)"""/)[1].split(/\s+/).filter(Boolean));
    assert.ok(reserved.has('then') && reserved.has('call'));
    const m = await load(fixture('accumulator').path, opts);
    const names = new Set(Object.getOwnPropertyNames(m).filter((n) => !m.methods.some((x) => x.name === n)));
    for (let o = Object.getPrototypeOf(m); o; o = Object.getPrototypeOf(o)) Object.getOwnPropertyNames(o).forEach((n) => names.add(n));
    const missing = [...names].filter((n) => !n.startsWith('_') && !reserved.has(n));
    assert.deepEqual(missing, [], 'names of the JS model that python/tandem/names.py does not reserve');
    assert.ok(names.has('readState') && names.has('fork') && names.has('toString'));
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
  test(`${mode}: fork({ state: 'copy' }) continues from the current state; fork() starts from the initial values`, async () => {
    const { path, spec } = fixture('transformer');
    const m = await load(path, opts);
    const run = async (model, call, where) => {
      const out = await model[call.method](...call.inputs.map(fromJson));
      const outs = out === undefined ? [] : Array.isArray(out) ? out : [out];
      assert.equal(outs.length, call.outputs.length, `${where}: output count`);
      outs.forEach((o, k) => assertClose(o, call.outputs[k], `${where} output ${k}`));
    };
    const k = 6; // prefill and 5 decode steps
    for (const [i, call] of spec.calls.slice(0, k).entries()) await run(m, call, `call ${i}`);
    const fresh = await load(path, opts);
    const initial = await Promise.all(m.state.map((s) => fresh.readState(s.name)));
    const copy = await m.fork({ state: 'copy' });
    const plain = await m.fork();
    const same = await m.fork({}); // no options: as fork()
    assert.deepEqual(await copy.saveState(), await m.saveState());
    assert.equal((await copy.readState('pos')).data[0], 8n + 5n);
    for (const f of [plain, same]) {
      for (const [i, s] of m.state.entries()) assert.deepEqual(await f.readState(s.name), initial[i], `${s.name} of a plain fork`);
    }
    // the same next calls on the original and on the copy both give eager's recorded outputs
    for (const [i, call] of spec.calls.slice(k).entries()) {
      await run(m, call, `original, call ${k + i}`);
      await run(copy, call, `fork, call ${k + i}`);
    }
    // the copy is its own state, not a view of the original's
    await m.resetState();
    assert.equal((await m.readState('pos')).data[0], 0n);
    assert.notEqual((await copy.readState('pos')).data[0], 0n);
    await assert.rejects(m.fork({ state: 'share' }), (e) => e instanceof TandemError && e.code === 'TDM_ERR_INVALID_ARGUMENT'
      && /state must be 'initial' or 'copy'/.test(e.message));
    await assert.rejects(m.fork({ copy: true }), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /unknown option 'copy'/.test(e.message));
    await assert.rejects(m.fork('copy'), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT');
    for (const x of [m, fresh, copy, plain, same]) x.dispose();
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
  console.log(`sessions: 1 -> ${one} bytes, 50 -> ${fifty} bytes; growth ${growth} = ${(growth / perSession).toFixed(1)} x (state ` +
    `${m.stateBytes} + scratch ${m.scratchBytes}); weights ${weights}`);
  assert.ok(growth <= 49 * perSession + 512 * 1024, `growth ${growth} vs 49 x ${perSession}`);
  assert.ok(growth < weights, 'the weights were not copied per session');
  // each session computes independently
  const x = new Float32Array(1024).fill(0.01);
  const outs = await Promise.all([m, ...forks.slice(0, 3)].map((s) => s.forward(x)));
  for (const o of outs) assert.deepEqual([...o.data.slice(0, 8)], [...outs[0].data.slice(0, 8)]);
  forks.forEach((f) => f.dispose());
  m.dispose();
});

test('sessions above 2 GiB of linear memory work; past 4 GiB, out of memory is a typed error', async () => {
  const m = await load(fixture('huge_state').path); // 256 MiB of state per session
  const sessions = [m];
  let error;
  for (let i = 0; i < 20 && !error; i++) {
    try {
      sessions.push(await m.fork());
    } catch (e) {
      error = e;
    }
  }
  assert.ok(error instanceof TandemError && error.code === 'TDM_ERR_OUT_OF_MEMORY', `got ${error}`);
  assert.ok(/out of memory/.test(error.message));
  // 15 sessions of 256 MiB fit in 4 GiB of linear memory: 7 of them lie above 2 GiB
  assert.ok(sessions.length === 15 && m.memoryBytes > 3.5 * 2 ** 30, `${sessions.length} sessions in ${m.memoryBytes} bytes`);
  // every session, above 2 GiB too: distinct values in, its own values back
  for (const [i, s] of sessions.entries()) assert.deepEqual([...(await s.forward(f32(i, i + 0.5, 100 - i, 1))).data],
    [i, i + 0.5, 100 - i, 1], `session ${i}`);
  for (const [i, s] of sessions.entries()) assert.deepEqual([...(await s.forward(f32(1, 1, 1, 1))).data], [i + 1, i + 1.5, 101 - i, 2],
    `session ${i}`);
  const last = sessions.at(-1);
  const big = new Float32Array(64 * 1024 * 1024);
  big.set([7, 8, 9, 10]);
  big[big.length - 1] = 11;
  await last.writeState('big', big);
  assert.deepEqual([...(await last.forward(f32(0, 0, 0, 0))).data], [7, 8, 9, 10]);
  const back = (await last.readState('big')).data;
  assert.deepEqual([back[0], back[3], back[4], back.at(-1)], [7, 10, 0, 11]);
  await assert.rejects(m.fork(), (e) => e instanceof TandemError && e.code === 'TDM_ERR_OUT_OF_MEMORY');
  sessions.forEach((s) => s.dispose());
});

test('worker: a worker that dies rejects pending and later calls with TDM_ERR_WORKER_DIED', async () => {
  for (const kill of ['an uncaught error', 'terminate']) {
    let worker;
    const m = await load(fixture('accumulator').path, { worker: true, [HOOKS]: { onWorker: (w) => (worker = w) } });
    const f = await m.fork();
    assert.deepEqual([...(await m.forward(f32(1, 1, 1))).data], [2, 2, 2]);
    // null is no request the worker knows: its message handler throws outside any call
    if (kill === 'terminate') worker.terminate();
    else worker.postMessage(null);
    const pending = [m.forward(f32(1, 1, 1)), m.reset(), f.forward(f32(1, 1, 1)), m.readState('state')];
    const settled = await within(Promise.allSettled(pending), 10000, `calls pending when the worker died (${kill})`);
    for (const s of settled) assert.ok(s.status === 'rejected' && s.reason instanceof TandemError
      && s.reason.code === 'TDM_ERR_WORKER_DIED', `${kill}: ${s.reason ?? s.status}`);
    assert.ok(/worker/.test(settled[0].reason.message) && /load it again/.test(settled[0].reason.message));
    // the model reports itself unusable: later calls reject at once, with the same code
    for (const later of [() => m.forward(f32(1, 1, 1)), () => f.call('reset'), () => m.saveState(), () => m.fork()]) {
      await within(assert.rejects(later(), (e) => e.code === 'TDM_ERR_WORKER_DIED'), 2000, `a later call (${kill})`);
    }
    m.dispose();
    f.dispose();
  }
});

test('the saved state of the demo model round-trips through the base64 helpers of docs/guide/getting-started.md', async () => {
  const guide = readFileSync(`${ROOT}docs/guide/getting-started.md`, 'utf8');
  const helpers = guide.split('\n').filter((l) => /^const (toBase64|fromBase64) = /.test(l));
  assert.equal(helpers.length, 2, 'the guide shows toBase64 and fromBase64');
  const [toBase64, fromBase64] = new Function(`${helpers.join('\n')}; return [toBase64, fromBase64];`)();
  const m = await load(`${ROOT}demo/model.tandem`);
  await m.prefill(new BigInt64Array(m.methods.find((x) => x.name === 'prefill').inputs[0].shape.reduce((a, b) => a * b, 1)).fill(5n));
  const saved = await m.saveState();
  assert.ok(saved.length > 2 ** 20, `the demo's state is over 1 MiB (${saved.length} bytes)`);
  assert.throws(() => btoa(String.fromCharCode(...saved)), RangeError); // why the helpers convert in pieces
  const storage = new Map([['chat', toBase64(saved)]]);
  const f = await m.fork();
  await f.loadState(fromBase64(storage.get('chat')));
  assert.deepEqual(await f.saveState(), saved);
  f.dispose();
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
  await assert.rejects(m.forward(new Tensor('int64', new BigInt64Array(16), [1, 16])),
    (e) => /expected float32\[1,16\], given int64\[1,16\]/.test(e.message));
  await assert.rejects(m.forward(new Tensor('float32', new Float32Array(16), [16])),
    (e) => /expected float32\[1,16\], given float32\[16\]/.test(e.message));
  await assert.rejects(load(new Uint8Array([1, 2, 3, 4, 5])), (e) => e.code === 'TDM_ERR_BAD_MAGIC');
  await assert.rejects(load('/nonexistent/model.tandem'), (e) => e.code === 'TDM_ERR_NOT_FOUND');
  m.dispose();
  await assert.rejects(m.forward(new Float32Array(16)), (e) => e.code === 'TDM_ERR_DISPOSED');
});
