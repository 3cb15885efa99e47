// Headless Chromium (Debian's chromium, driven by playwright-core; no browser download) loads
// models from a local static server, inline and in a Web Worker, and must give the same values
// as Node (the same wasm: bit for bit) and PyTorch eager (within tolerance).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './chromium.js';
import { serve } from '../../scripts/serve.mjs';
import { load } from '../../node/index.js';
import { fixture, fromJson, assertClose } from '../js/helpers.js';

let server, browser, page;

before(async () => {
  server = await serve({ index: '/tests/browser/page.html' });
  browser = await launch();
  page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e));
  await page.goto(`${server.url}/tests/browser/page.html`);
  await page.waitForFunction(() => window.testReady === true, null, { timeout: 30000 });
  assert.deepEqual(errors, []);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

async function nodeOutputs(name) {
  const { path, spec } = fixture(name);
  const m = await load(path, { simd: 'simd128' });
  const outs = [];
  for (const call of spec.calls) {
    const o = await m.call(call.method, ...call.inputs.map(fromJson));
    outs.push(o === undefined ? [] : Array.isArray(o) ? o : [o]);
  }
  m.dispose();
  return outs;
}

for (const name of ['original_report', 'gru', 'transformer']) {
  for (const worker of [false, true]) {
    // The SIMD128 build gives Node's bits; the relaxed build (Chromium's default) eager's values
    // within the fixture's tolerance.
    test(`${name} in Chromium (${worker ? 'Web Worker' : 'inline'}) equals Node and eager`, async () => {
      const got = await page.evaluate(([n, w]) => window.runCase(n, w, undefined, 'simd128'), [name, worker]);
      const relaxed = await page.evaluate(([n, w]) => window.runCase(n, w), [name, worker]);
      const want = await nodeOutputs(name);
      const { spec } = fixture(name);
      assert.equal(got.length, want.length);
      assert.equal(relaxed.length, want.length);
      got.forEach((outs, i) => {
        assert.equal(outs.length, want[i].length);
        outs.forEach((o, k) => {
          const n = want[i][k];
          assert.deepEqual(o.shape, n.shape);
          assert.deepEqual(o.data, Array.from(n.data, (v) => (typeof v === 'bigint' ? String(v) : v)),
            `call ${i} output ${k}: browser vs Node`);
          assertClose(n, spec.calls[i].outputs[k], `call ${i} output ${k}: vs eager`);
          const r = relaxed[i][k];
          assertClose({ ...r, data: r.dtype === 'int64' ? r.data.map(BigInt) : r.data }, spec.calls[i].outputs[k],
            `call ${i} output ${k}: relaxed build vs eager`);
        });
      });
    });
  }
}

// Threads in a page: served cross-origin isolated (COOP/COEP, as `npm start` does), a model runs on
// 2 threads, inline (the page's main thread coordinates) and in a Web Worker, with the bits of one
// thread; a page without isolation gets one thread and says so in model.threads. Both SIMD levels:
// the SIMD128 builds give Node's bits (the same on every machine); the relaxed builds, which
// Chromium picks by default, give one thread's bits on every count (their fused multiply-adds may
// round differently from SIMD128's, within the tolerances docs/ops.md states).
test('threads in an isolated page give the same bits as one thread, inline and in a worker, at both SIMD levels', async () => {
  const { callAll } = await import('../js/threads-calls.js');
  const node = await load(fixture('transformer').path.replace('transformer', 'parallel'), { threads: 1, simd: 'simd128' });
  const simd128 = await callAll(node);
  node.dispose();
  const dflt = await page.evaluate(() => window.callAll('parallel', { threads: 1 }));
  assert.equal(dflt.simd, 'relaxed', 'Chromium has relaxed SIMD: it is the default there');
  for (const [simd, want] of [['simd128', simd128], ['relaxed', dflt.bytes]]) {
    for (const options of [{ threads: 1, simd }, { threads: 2, simd }, { threads: 2, worker: true, simd }]) {
      const got = await page.evaluate((o) => window.callAll('parallel', o), options);
      assert.equal(got.isolated, true);
      assert.equal(got.threads, options.threads, JSON.stringify(options));
      assert.equal(got.simd, simd, JSON.stringify(options));
      assert.equal(got.bytes, want, JSON.stringify(options));
    }
  }
});

test('a page that is not cross-origin isolated runs on one thread and says so', async () => {
  const plain = await serve({ index: '/tests/browser/page.html', isolated: false });
  const p = await browser.newPage();
  try {
    await p.goto(`${plain.url}/tests/browser/page.html`);
    await p.waitForFunction(() => window.testReady === true, null, { timeout: 30000 });
    const got = await p.evaluate(() => window.callAll('parallel', { threads: 2 }));
    assert.equal(got.isolated, false);
    assert.equal(got.threads, 1);
    const dflt = await p.evaluate(() => window.callAll('parallel', {}));
    assert.equal(dflt.threads, 1);
    assert.equal(dflt.bytes, got.bytes);
  } finally {
    await p.close();
    await plain.close();
  }
});
