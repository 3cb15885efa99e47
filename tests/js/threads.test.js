// Threads (load(source, { threads })): the threaded build on 2, 3 and 5 threads gives the same bits as
// the single-threaded build, inline and in a worker; the pool starts and ends with the model; an
// idle model uses no CPU; bad thread counts are refused. (Chromium: tests/browser/browser.test.js.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { load } from '../../node/index.js';
import { nodeThread } from '../../node/spawn.js';
import { HOOKS } from '../../web/options.js';
import { FIXTURES } from './helpers.js';

const fixture = (name) => ({ path: `${FIXTURES}/${name}.tandem` });
import { callAll } from './threads-calls.js';

// Every op with a parallel path at uneven sizes (float32, int8, int4), and whole models.
const PROGRAMS = ['parallel', 'parallel_conv', 'parallel_int8', 'parallel_int4', 'transformer', 'hf_llama', 'codec', 'cnn', 'lstm'];

for (const name of PROGRAMS) {
  test(`${name}: 2, 3 and 5 threads give the same bits as 1`, async () => {
    const { path } = fixture(name);
    const one = await load(path, { threads: 1 });
    assert.equal(one.threads, 1);
    const want = await callAll(one);
    one.dispose();
    for (const threads of [2, 3, 5]) {
      const m = await load(path, { threads });
      assert.equal(m.threads, threads);
      assert.equal(await callAll(m), want, `${threads} threads`);
      m.dispose();
    }
  });
}

test('a model in a worker runs its own pool, with the same bits', async () => {
  const { path } = fixture('parallel');
  const one = await load(path, { threads: 1 });
  const want = await callAll(one);
  one.dispose();
  const m = await load(path, { worker: true, threads: 2 });
  assert.equal(m.threads, 2);
  assert.equal(await callAll(m), want);
  m.dispose();
});

test('the default is the cores up to 4; forks share the pool; dispose of the last model ends its workers', async () => {
  const { path } = fixture('transformer');
  const started = [];
  const spawn = () => {
    const port = nodeThread();
    const rec = { terminated: false };
    started.push(rec);
    return { ...port, terminate: () => { rec.terminated = true; return port.terminate(); } };
  };
  const m = await load(path, { [HOOKS]: { spawnThread: spawn } });
  const cores = (await import('node:os')).availableParallelism();
  assert.equal(m.threads, Math.min(4, cores));
  assert.equal(started.length, m.threads - 1);
  const f = await m.fork();
  assert.equal(f.threads, m.threads);
  assert.equal(started.length, m.threads - 1, 'a fork starts no workers');
  m.dispose();
  assert.ok(started.every((r) => !r.terminated), 'the fork still uses them');
  f.dispose();
  assert.ok(started.every((r) => r.terminated));
});

test('an idle model with threads keeps no CPU busy', async () => {
  const { path } = fixture('parallel');
  const m = await load(path, { threads: 3 });
  await callAll(m);
  const before = process.cpuUsage();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, 400));
  const used = process.cpuUsage(before), wall = performance.now() - t0;
  // process-wide (every worker thread counts): a spinning worker would use ~400 ms per thread
  assert.ok((used.user + used.system) / 1000 < 0.25 * wall, `${(used.user + used.system) / 1000} ms of CPU in ${wall} ms idle`);
  m.dispose();
});

test('errors from the threaded build carry their message (thread-local in C)', async () => {
  const bytes = readFileSync(fixture('gru').path);
  await assert.rejects(load(bytes.subarray(0, 200), { threads: 2 }), (e) => e.code === 'TDM_ERR_TRUNCATED' && /truncated/.test(e.message));
  const m = await load(fixture('transformer').path, { threads: 2 });
  await assert.rejects(m.decode(new BigInt64Array([100000n])), (e) => e.code === 'TDM_ERR_INDEX' && /100000/.test(e.message));
  m.dispose();
});

test('thread counts out of range are refused with a typed error', async () => {
  const { path } = fixture('original_report');
  for (const threads of [0, -1, 1.5, 65, '2', null]) {
    await assert.rejects(load(path, { threads }), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /threads/.test(e.message),
      String(threads));
  }
});

test('an explicit count whose workers cannot start rejects the load, naming why', async () => {
  const { path } = fixture('original_report');
  const broken = () => {
    const port = nodeThread();
    port.post = () => port.terminate(); // the worker exits before it is ready
    return port;
  };
  await assert.rejects(load(path, { threads: 2, [HOOKS]: { spawnThread: broken } }), (e) => e.code === 'TDM_ERR_WORKER'
    && /threads: 2 requested/.test(e.message));
  // the default count falls back to one thread instead
  const m = await load(path, { [HOOKS]: { spawnThread: broken } });
  assert.equal(m.threads, 1);
  assert.equal((await m.forward1(new Float32Array([1]))).data[0], 2);
  m.dispose();
});

test('a pool whose script is not found rejects the load with TDM_ERR_NOT_FOUND, the default count too', async () => {
  const { path } = fixture('original_report');
  // a port as web/worker-backend.js gives for a thread.js answered with a 404
  const missing = () => ({
    post() {},
    onMessage() {},
    onError(f) {
      setTimeout(() => f('could not load https://example.com/thread.js (HTTP 404); set options.wasmPaths', 'TDM_ERR_NOT_FOUND'));
    },
    terminate() {},
  });
  for (const threads of [2, undefined]) {
    const why = /the pool did not start: thread 1 could not load https:\/\/example\.com\/thread\.js \(HTTP 404\); set options\.wasmPaths/;
    await assert.rejects(load(path, { threads, [HOOKS]: { spawnThread: missing, cores: 2 } }),
      (e) => e.code === 'TDM_ERR_NOT_FOUND' && why.test(e.message), String(threads));
  }
});

test('options.wasmPaths in Node: a folder path or file: URL holding the builds; a missing one is named', async () => {
  const { path } = fixture('original_report');
  const web = new URL('../../web/', import.meta.url);
  for (const wasmPaths of [web.pathname, web.pathname.slice(0, -1), web, web.href]) {
    for (const threads of [1, 2]) {
      const m = await load(path, { wasmPaths, threads });
      assert.deepEqual([m.threads, (await m.forward1(new Float32Array([1]))).data[0]], [threads, 2], `${wasmPaths} ${threads}`);
      m.dispose();
    }
  }
  await assert.rejects(load(path, { wasmPaths: '/no/such/folder', threads: 1 }), (e) => e.code === 'TDM_ERR_NOT_FOUND'
    && e.message.includes('/no/such/folder/tandem') && e.message.includes('options.wasmPaths (/no/such/folder/)'));
  for (const bad of ['', 3, {}, null]) {
    await assert.rejects(load(path, { wasmPaths: bad }),
      (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /wasmPaths must be/.test(e.message), String(bad));
  }
});
