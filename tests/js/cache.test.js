// load(url, { cache }) in Node: a program fetched over HTTP is kept in a cache folder and
// revalidated on every load (ETag / Last-Modified: a 304 carries no body), against a server on
// 127.0.0.1 that counts the body bytes it sends. Also `signal`, `sha256`, clearCache and cache: false.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { load, clearCache, Tensor } from '../../node/index.js';
import { defaultCacheDir } from '../../node/cache.js';
import { fixture } from './helpers.js';

const sha = (b) => createHash('sha256').update(b).digest('hex');
const ACC = readFileSync(fixture('accumulator').path);
const GRU = readFileSync(fixture('gru').path);
const BIG = readFileSync(fixture('big_weights').path);

// path -> { body, etag, lastModified, slow }: what the server serves; every response is logged.
const files = new Map();
let log = [];
let server, base, dir;

before(async () => {
  server = createServer((req, res) => {
    const f = files.get(req.url);
    if (!f) {
      res.writeHead(404).end();
      return;
    }
    // a network error: the server is down, or refuses a conditional request (as a cross-origin
    // server that does not allow its headers fails the CORS preflight)
    if (f.status) {
      log.push({ path: req.url, status: f.status, bytes: 0, method: req.method });
      res.writeHead(f.status).end();
      return;
    }
    if (f.down || (f.refuseConditional && (req.headers['if-none-match'] || req.headers['if-modified-since']))) {
      log.push({ path: req.url, status: 'error', bytes: 0, method: req.method });
      req.socket.destroy();
      return;
    }
    const headers = { 'content-type': 'application/octet-stream', 'content-length': f.body.length };
    if (f.etag) headers.etag = f.etag;
    if (f.lastModified) headers['last-modified'] = f.lastModified;
    const fresh = (f.etag && req.headers['if-none-match'] === f.etag)
      || (!f.etag && f.lastModified && req.headers['if-modified-since'] === f.lastModified);
    if (fresh) {
      log.push({ path: req.url, status: 304, bytes: 0 });
      res.writeHead(304, { etag: f.etag ?? '' }).end();
      return;
    }
    const entry = { path: req.url, status: 200, bytes: 0, method: req.method };
    log.push(entry);
    res.writeHead(200, headers);
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    if (!f.slow) {
      entry.bytes = f.body.length;
      res.end(f.body);
      return;
    }
    // 16 KiB every 5 ms: slow enough for a test to abort in the middle
    let at = 0;
    const next = () => {
      if (res.destroyed) return;
      if (at >= f.body.length) {
        res.end();
        return;
      }
      const chunk = f.body.subarray(at, at + 16384);
      at += chunk.length;
      entry.bytes += chunk.length;
      res.write(chunk);
      setTimeout(next, 5);
    };
    next();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
});

after(() => server.close());

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tandem-cache-test-'));
  log = [];
  files.clear();
});

const serveFile = (path, body, extra = { etag: `"${sha(body).slice(0, 16)}"` }) => files.set(path, { body, ...extra });
const cached = () => readdirSync(dir).sort();
const binSizes = () => cached().filter((n) => n.endsWith('.bin')).map((n) => statSync(join(dir, n)).size);

async function accumulate(model) {
  const y = await model.forward(new Float32Array([1, 2, 3]));
  model.dispose();
  return Array.from(y.data);
}

test('a first load downloads and keeps the file; a second one gets a 304 and reads the cache', async () => {
  serveFile('/acc.tandem', ACC);
  assert.deepEqual(await accumulate(await load(`${base}/acc.tandem`, { cache: dir })), [2, 4, 6]);
  assert.deepEqual(log.map((e) => [e.status, e.bytes]), [[200, ACC.length]]);
  assert.deepEqual(binSizes(), [ACC.length]);
  assert.equal(cached().length, 2, cached().join(' ')); // the body and its validators, no partial file

  log = [];
  const progress = [];
  const m = await load(`${base}/acc.tandem`, { cache: dir, onProgress: (p) => progress.push(p) });
  assert.deepEqual(log.map((e) => [e.status, e.bytes]), [[304, 0]]);
  assert.deepEqual(await accumulate(m), [2, 4, 6]);
  // progress is reported while the cached copy is read
  assert.deepEqual(progress.at(-1), { loaded: ACC.length, total: ACC.length });
});

test('a file changed on the server is downloaded again, and the new one is kept', async () => {
  serveFile('/m.tandem', ACC);
  (await load(`${base}/m.tandem`, { cache: dir })).dispose();
  serveFile('/m.tandem', GRU);
  log = [];
  const m = await load(`${base}/m.tandem`, { cache: dir });
  assert.deepEqual(log.map((e) => [e.status, e.bytes]), [[200, GRU.length]]);
  const summary = async (model) => {
    const s = JSON.stringify([model.stateBytes, model.methods]);
    model.dispose();
    return s;
  };
  const got = await summary(m);
  assert.equal(got, await summary(await load(GRU)), 'the new program');
  assert.notEqual(got, await summary(await load(ACC)));
  assert.deepEqual(binSizes(), [GRU.length]);
  log = [];
  (await load(`${base}/m.tandem`, { cache: dir })).dispose();
  assert.deepEqual(log.map((e) => e.status), [304]);
});

test('Last-Modified alone revalidates with If-Modified-Since; a server without validators is not cached', async () => {
  serveFile('/lm.tandem', ACC, { lastModified: 'Wed, 21 Oct 2015 07:28:00 GMT' });
  (await load(`${base}/lm.tandem`, { cache: dir })).dispose();
  (await load(`${base}/lm.tandem`, { cache: dir })).dispose();
  assert.deepEqual(log.map((e) => [e.status, e.bytes]), [[200, ACC.length], [304, 0]]);

  rmSync(dir, { recursive: true });
  log = [];
  serveFile('/plain.tandem', ACC, {});
  (await load(`${base}/plain.tandem`, { cache: dir })).dispose();
  (await load(`${base}/plain.tandem`, { cache: dir })).dispose();
  assert.deepEqual(log.map((e) => [e.status, e.bytes]), [[200, ACC.length], [200, ACC.length]]);
  assert.throws(() => readdirSync(dir), /ENOENT/); // nothing was written
});

test('a server that refuses the conditional request is asked with HEAD; offline, the cached copy loads', async () => {
  serveFile('/acc.tandem', ACC);
  (await load(`${base}/acc.tandem`, { cache: dir })).dispose();
  files.get('/acc.tandem').refuseConditional = true;
  log = [];
  assert.deepEqual(await accumulate(await load(`${base}/acc.tandem`, { cache: dir })), [2, 4, 6]);
  assert.deepEqual(log.map((e) => [e.method, e.status, e.bytes]), [['GET', 'error', 0], ['HEAD', 200, 0]]);
  // changed: HEAD's ETag differs, and a plain GET downloads it
  serveFile('/acc.tandem', GRU, { refuseConditional: true, etag: '"gru"' });
  log = [];
  (await load(`${base}/acc.tandem`, { cache: dir })).dispose();
  assert.deepEqual(log.map((e) => [e.method, e.status, e.bytes]), [['GET', 'error', 0], ['HEAD', 200, 0], ['GET', 200, GRU.length]]);
  assert.deepEqual(binSizes(), [GRU.length]);
  // offline
  files.get('/acc.tandem').down = true;
  log = [];
  const m = await load(`${base}/acc.tandem`, { cache: dir });
  const gru = await load(GRU);
  assert.equal(m.stateBytes, gru.stateBytes);
  m.dispose();
  gru.dispose();
  assert.deepEqual(log.map((e) => e.status), ['error', 'error']);
  await assert.rejects(load(`${base}/acc.tandem`, { cache: false }), { code: 'TDM_ERR_NOT_FOUND' });
  // a server error: the cached copy; a 404 is an error
  files.get('/acc.tandem').status = 503;
  log = [];
  (await load(`${base}/acc.tandem`, { cache: dir })).dispose();
  assert.deepEqual(log.map((e) => e.status), [503]);
  await assert.rejects(load(`${base}/acc.tandem`, { cache: false }), (e) => e.code === 'TDM_ERR_NOT_FOUND' && /HTTP 503/.test(e.message));
  await assert.rejects(load(`${base}/missing.tandem`, { cache: dir }), (e) => e.code === 'TDM_ERR_NOT_FOUND' && /HTTP 404/.test(e.message));
});

test('signal aborts a download midway: TDM_ERR_ABORTED, nothing cached', async () => {
  for (const worker of [false, true]) {
    serveFile('/big.tandem', BIG, { etag: '"big"', slow: true });
    log = [];
    const ctrl = new AbortController();
    let seen = 0;
    const onProgress = ({ loaded }) => {
      seen = loaded;
      if (loaded >= 65536) ctrl.abort();
    };
    await assert.rejects(load(`${base}/big.tandem`, { cache: dir, signal: ctrl.signal, onProgress, worker }),
      (e) => e.code === 'TDM_ERR_ABORTED' && e.name === 'AbortError', `worker: ${worker}`);
    assert.ok(seen >= 65536 && seen < BIG.length, `aborted after ${seen} bytes`);
    assert.deepEqual(cached(), [], `worker: ${worker}`); // no body, no partial file
    assert.ok(log[0].bytes < BIG.length, `the server sent ${log[0].bytes} bytes`);
  }
  // already aborted: rejects before fetching
  log = [];
  await assert.rejects(load(`${base}/big.tandem`, { cache: dir, signal: AbortSignal.abort() }), { code: 'TDM_ERR_ABORTED' });
  assert.deepEqual(log, []);
});

test('sha256: a mismatch rejects before loading and caches nothing; a match loads and is kept', async () => {
  serveFile('/acc.tandem', ACC);
  const wrong = sha(GRU);
  await assert.rejects(load(`${base}/acc.tandem`, { cache: dir, sha256: wrong }), (e) => e.code === 'TDM_ERR_INTEGRITY'
    && e.message.includes(sha(ACC)) && e.message.includes(wrong));
  assert.deepEqual(cached(), []);
  assert.deepEqual(await accumulate(await load(`${base}/acc.tandem`, { cache: dir, sha256: sha(ACC).toUpperCase() })), [2, 4, 6]);
  assert.deepEqual(binSizes(), [ACC.length]);
  // bytes are checked too
  await assert.rejects(load(ACC, { sha256: wrong }), { code: 'TDM_ERR_INTEGRITY' });
  assert.deepEqual(await accumulate(await load(ACC, { sha256: sha(ACC) })), [2, 4, 6]);
  // a cached copy the hash does not match (the server's ETag unchanged) is dropped and downloaded again
  serveFile('/acc.tandem', GRU, { etag: files.get('/acc.tandem').etag });
  log = [];
  const m = await load(`${base}/acc.tandem`, { cache: dir, sha256: sha(GRU) });
  m.dispose();
  assert.deepEqual(log.map((e) => [e.status, e.bytes]), [[304, 0], [200, GRU.length]]);
  assert.deepEqual(binSizes(), [GRU.length]);
  // with a worker, the checked bytes go to the worker and the cache both
  await clearCache(dir);
  serveFile('/acc.tandem', ACC);
  for (let i = 0; i < 2; i++) {
    assert.deepEqual(await accumulate(await load(`${base}/acc.tandem`, { cache: dir, sha256: sha(ACC), worker: true })), [2, 4, 6]);
    assert.deepEqual(binSizes(), [ACC.length]);
  }
  assert.equal(sha(readFileSync(join(dir, cached().find((n) => n.endsWith('.bin'))))), sha(ACC));
});

test('clearCache() empties the cache; cache: false neither reads nor writes it', async () => {
  serveFile('/acc.tandem', ACC);
  (await load(`${base}/acc.tandem`, { cache: dir })).dispose();
  assert.equal(binSizes().length, 1);
  await clearCache(dir);
  assert.deepEqual(cached(), []);
  log = [];
  (await load(`${base}/acc.tandem`, { cache: dir })).dispose();
  (await load(`${base}/acc.tandem`, { cache: false })).dispose();
  (await load(`${base}/acc.tandem`, { cache: false })).dispose();
  assert.deepEqual(log.map((e) => [e.status, e.bytes]), [[200, ACC.length], [200, ACC.length], [200, ACC.length]]);
});

test('worker: true caches too (the download happens on the calling thread)', async () => {
  serveFile('/acc.tandem', ACC);
  assert.deepEqual(await accumulate(await load(`${base}/acc.tandem`, { cache: dir, worker: true })), [2, 4, 6]);
  assert.deepEqual(await accumulate(await load(`${base}/acc.tandem`, { cache: dir, worker: true })), [2, 4, 6]);
  assert.deepEqual(log.map((e) => [e.status, e.bytes]), [[200, ACC.length], [304, 0]]);
});

test('a program that fails to load is not kept; a cache write failing does not fail the load', async () => {
  serveFile('/bad.tandem', new Uint8Array(ACC.length).fill(7));
  await assert.rejects(load(`${base}/bad.tandem`, { cache: dir }), (e) => e.code !== 'TDM_ERR_ABORTED');
  assert.deepEqual(binSizes(), []);
  serveFile('/acc.tandem', ACC);
  const file = join(dir, 'not-a-folder');
  (await import('node:fs')).writeFileSync(file, 'x');
  assert.deepEqual(await accumulate(await load(`${base}/acc.tandem`, { cache: file })), [2, 4, 6]);
});

test('the default folder and the options checks', async () => {
  assert.equal(defaultCacheDir({ TANDEM_CACHE_DIR: '/x/y' }), '/x/y');
  if (process.platform === 'linux') {
    assert.equal(defaultCacheDir({ XDG_CACHE_HOME: '/c' }), '/c/tandem');
    assert.match(defaultCacheDir({}), /\/\.cache\/tandem$/);
  }
  for (const [options, what] of [[{ cache: 1 }, /cache must be/], [{ cache: '' }, /cache must be/],
    [{ sha256: 'abc' }, /sha256 must be 64 hex/], [{ signal: {} }, /signal must be an AbortSignal/]]) {
    await assert.rejects(load(ACC, options), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && what.test(e.message));
  }
  const t = new Tensor('float32', new Float32Array([1]), [1]);
  assert.equal(t.dtype, 'float32');
});
