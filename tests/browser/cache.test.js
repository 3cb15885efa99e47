// load(url)'s cache in headless Chromium: the Cache API cache 'tandem-models', revalidated with
// the server's ETag (scripts/serve.mjs with validators, which counts the body bytes it sends). A
// second page load of a model downloads nothing; a changed file downloads again; an aborted load,
// a wrong sha256 and cache: false keep nothing; clearCache() empties it. Also capabilities() in
// Chromium, cross-origin isolated and not.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, launchPersistent, WEBGPU_ARGS } from './chromium.js';
import { serve } from '../../scripts/serve.mjs';
import { fixture, ROOT } from '../js/helpers.js';

const DIR = '/build/browser-cache';
let server, context, profile;

before(async () => {
  mkdirSync(join(ROOT, DIR), { recursive: true });
  copyFileSync(fixture('accumulator').path, join(ROOT, DIR, 'm.tandem'));
  copyFileSync(fixture('big_weights').path, join(ROOT, DIR, 'big.tandem'));
  server = await serve({ index: '/tests/browser/page.html', validators: true });
  profile = mkdtempSync(join(tmpdir(), 'tandem-chromium-'));
  context = await launchPersistent(profile);
});

after(async () => {
  await context?.close();
  await server?.close();
  rmSync(profile, { recursive: true, force: true });
  rmSync(join(ROOT, DIR), { recursive: true, force: true });
});

/** A new page of the context (a page load), which runs fn(arg) with the package imported. */
async function inPage(fn, arg, url = server.url) {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e));
  try {
    await page.goto(`${url}/tests/browser/page.html`);
    await page.waitForFunction(() => window.testReady === true, null, { timeout: 30000 });
    const r = await page.evaluate(`(async () => {
      const t = await import('/web/tandem.js');
      return (${fn})(t, ${JSON.stringify(arg)});
    })()`);
    assert.deepEqual(errors, []);
    return r;
  } finally {
    await page.close();
  }
}

// Loads `path` with `options` (worker, sha256, cache; abortAt: abort at the first progress past
// that many bytes), runs forward([1, 2, 3]) unless `call` is false, and says what the cache holds.
const run = async (t, { path, options = {}, abortAt, call = true }) => {
  const ctrl = new AbortController();
  const opts = { ...options };
  if (abortAt !== undefined) {
    opts.signal = ctrl.signal;
    opts.onProgress = ({ loaded }) => { if (loaded >= abortAt) ctrl.abort(); };
  }
  let out = null, error = null, methods = null;
  try {
    const m = await t.load(path, opts);
    methods = m.methods.map((s) => s.name);
    if (call) out = Array.from((await m.forward(new Float32Array([1, 2, 3]))).data);
    m.dispose();
  } catch (e) {
    error = { code: e.code, name: e.name };
  }
  const cache = await caches.open('tandem-models');
  const bytes = async (r) => (await (await cache.match(r)).arrayBuffer()).byteLength;
  const kept = await Promise.all((await cache.keys()).map(async (r) => [new URL(r.url).pathname, await bytes(r)]));
  return { out, error, methods, kept: kept.sort() };
};

const served = (name) => server.served.get(`${DIR}/${name}`) ?? 0;
const size = (name) => readFileSync(join(ROOT, DIR, name)).length;

test('a second page load of a model downloads nothing: the Cache API copy, revalidated (304)', async () => {
  const first = await inPage(run, { path: `${DIR}/m.tandem` });
  assert.deepEqual(first, { out: [2, 4, 6], error: null, methods: first.methods, kept: [[`${DIR}/m.tandem`, size('m.tandem')]] });
  assert.equal(served('m.tandem'), size('m.tandem'));
  for (const worker of [false, true]) {
    const again = await inPage(run, { path: `${DIR}/m.tandem`, options: { worker } });
    assert.deepEqual(again, first, `worker: ${worker}`);
    assert.equal(served('m.tandem'), size('m.tandem'), `worker: ${worker}: no body was downloaded again`);
  }
  // cache: false downloads
  await inPage(run, { path: `${DIR}/m.tandem`, options: { cache: false } });
  assert.equal(served('m.tandem'), 2 * size('m.tandem'));
});

test('a file changed on the server is downloaded again and replaces the cached copy', async () => {
  const before = served('m.tandem');
  copyFileSync(fixture('gru').path, join(ROOT, DIR, 'm.tandem'));
  const got = await inPage(run, { path: `${DIR}/m.tandem`, call: false });
  assert.equal(served('m.tandem'), before + size('m.tandem'));
  assert.equal(got.error, null);
  assert.deepEqual(got.kept, [[`${DIR}/m.tandem`, size('m.tandem')]]);
  copyFileSync(fixture('accumulator').path, join(ROOT, DIR, 'm.tandem'));
  assert.deepEqual((await inPage(run, { path: `${DIR}/m.tandem` })).out, [2, 4, 6]);
});

test('an aborted load and a wrong sha256 keep nothing; clearCache() empties the cache', async () => {
  for (const worker of [false, true]) {
    const got = await inPage(run, { path: `${DIR}/big.tandem`, call: false, options: { worker }, abortAt: 1 });
    assert.deepEqual(got.error, { code: 'TDM_ERR_ABORTED', name: 'AbortError' }, `worker: ${worker}`);
    assert.ok(!got.kept.some(([p]) => p.endsWith('big.tandem')), JSON.stringify(got.kept));
  }
  const wrong = createHash('sha256').update('not the file').digest('hex');
  const bad = await inPage(run, { path: `${DIR}/big.tandem`, call: false, options: { sha256: wrong } });
  assert.equal(bad.error.code, 'TDM_ERR_INTEGRITY');
  assert.ok(!bad.kept.some(([p]) => p.endsWith('big.tandem')));
  const right = createHash('sha256').update(readFileSync(join(ROOT, DIR, 'big.tandem'))).digest('hex');
  const good = await inPage(run, { path: `${DIR}/big.tandem`, call: false, options: { sha256: right } });
  assert.equal(good.error, null);
  assert.ok(good.kept.some(([p, n]) => p.endsWith('big.tandem') && n === size('big.tandem')));
  const after = await inPage(async (t) => {
    await t.clearCache();
    return (await caches.keys()).includes('tandem-models');
  });
  assert.equal(after, false);
});

const probe = async (t) => ({ caps: await t.capabilities(), cores: navigator.hardwareConcurrency });

test('capabilities() in Chromium: relaxed SIMD, threads where cross-origin isolated, the reason where not', async () => {
  const { caps, cores } = await inPage(probe);
  assert.equal(caps.simd, 'relaxed');
  assert.equal(caps.relaxedSimd, true);
  assert.deepEqual(caps.threads, { available: true, reason: null, cores });
  assert.equal(caps.memoryLimitBytes, 2 ** 32);
  // launched with --disable-gpu: WebGPU has no adapter here (tests/browser/webgpu.test.js runs one)
  assert.equal(caps.webgpu.available, false);
  assert.match(caps.webgpu.reason, /WebGPU/);
  assert.deepEqual([caps.webgpu.adapter, caps.webgpu.limits, caps.webgpu.f16], [null, null, false]);
  const plain = await serve({ index: '/tests/browser/page.html', isolated: false });
  try {
    const p = await inPage(probe, undefined, plain.url);
    assert.deepEqual(p.caps.threads, { available: false, cores: p.cores,
      reason: 'not cross-origin isolated: serve with COOP/COEP headers (Cross-Origin-Opener-Policy: same-origin, ' +
        'Cross-Origin-Embedder-Policy: require-corp)' });
    assert.equal(p.caps.simd, 'relaxed');
  } finally {
    await plain.close();
  }
});

test('capabilities() with a WebGPU adapter (SwiftShader): its info, limits and shader-f16, as the adapter gives them', async () => {
  const browser = await launch(WEBGPU_ARGS);
  try {
    const page = await browser.newPage();
    await page.goto(`${server.url}/tests/browser/page.html`);
    await page.waitForFunction(() => window.testReady === true, null, { timeout: 30000 });
    const { caps, want } = await page.evaluate(async () => {
      const t = await import('/web/tandem.js');
      const adapter = await navigator.gpu.requestAdapter();
      const info = adapter.info ?? {};
      return {
        caps: await t.capabilities(),
        want: { vendor: info.vendor, f16: adapter.features.has('shader-f16'), maxBufferSize: adapter.limits.maxBufferSize,
          maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize },
      };
    });
    assert.equal(caps.webgpu.available, true);
    assert.equal(caps.webgpu.reason, null);
    assert.equal(caps.webgpu.adapter.vendor, want.vendor ?? '');
    assert.equal(caps.webgpu.f16, want.f16);
    assert.equal(caps.webgpu.limits.maxBufferSize, want.maxBufferSize);
    assert.equal(caps.webgpu.limits.maxStorageBufferBindingSize, want.maxStorageBufferBindingSize);
    assert.ok(caps.webgpu.limits.maxBufferSize >= 256 * 2 ** 20, 'at least WebGPU\'s default limit');
    for (const v of Object.values(caps.webgpu.limits)) assert.ok(Number.isInteger(v) && v > 0, JSON.stringify(caps.webgpu.limits));
  } finally {
    await browser.close();
  }
});
