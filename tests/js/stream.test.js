// Loading from a Response streams the program into the runtime's memory chunk by chunk (with
// no second full copy in JS memory): the model is the same as one loaded from bytes, with or
// without a content-length (or a wrong one), progress is reported, a failing body and a program
// past 4 GiB are typed errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { load } from '../../node/index.js';
import { FIXTURES } from './helpers.js';
import { callAll } from './threads-calls.js';

const file = readFileSync(`${FIXTURES}/transformer.tandem`);

/** A Response whose body arrives in `chunk`-byte pieces, with the given content-length header. */
function response(bytes, { chunk = 4096, failAt, ...rest } = {}) {
  const length = 'length' in rest ? rest.length : bytes.length;
  let at = 0;
  const body = new ReadableStream({
    pull(c) {
      if (failAt !== undefined && at >= failAt) return c.error(new Error('connection reset'));
      if (at >= bytes.length) return c.close();
      c.enqueue(bytes.slice(at, at + chunk));
      at += chunk;
    },
  });
  return new Response(body, { headers: length === undefined ? {} : { 'content-length': String(length) } });
}

test('a Response streams in and gives the model loaded from bytes, with progress', async () => {
  const want = await callAll(await load(file, { threads: 1 }));
  for (const length of [file.length, undefined, 1000]) { // right, absent, too small (a compressed body's)
    const seen = [];
    const m = await load(response(file, { length }), { threads: 1, onProgress: (p) => seen.push(p) });
    assert.equal(await callAll(m), want, `content-length ${length}`);
    assert.deepEqual(seen[0], { loaded: 0, total: length });
    assert.equal(seen.at(-1).loaded, file.length);
    assert.ok(seen.length > file.length / 4096, 'one report per chunk');
    m.dispose();
  }
});

test('a body that fails midway rejects with TDM_ERR_NOT_FOUND; one past 4 GiB with TDM_ERR_OUT_OF_MEMORY', async () => {
  await assert.rejects(load(response(file, { failAt: 8192 }), { threads: 1 }), (e) => e.code === 'TDM_ERR_NOT_FOUND'
    && /after 8192 bytes/.test(e.message));
  await assert.rejects(load(response(file, { length: 5 * 2 ** 30 }), { threads: 1 }), (e) => e.code === 'TDM_ERR_OUT_OF_MEMORY');
});

test('streaming holds about a chunk in JS memory, not the program', async () => {
  const big = readFileSync(`${FIXTURES}/big_weights.tandem`);
  globalThis.gc?.();
  const base = process.memoryUsage().arrayBuffers - big.length; // `big` itself is the caller's
  let peak = 0;
  const m = await load(response(big, { chunk: 65536 }),
    { threads: 1, onProgress: () => { peak = Math.max(peak, process.memoryUsage().arrayBuffers); } });
  m.dispose();
  assert.ok(peak - base - big.length < big.length / 2, `JS buffers grew by ${peak - base - big.length} bytes while ${big.length} streamed`);
});

// With { worker: true } the Response's body is transferred to the model's worker as a stream, which
// writes it into the worker's memory chunk by chunk: the calling thread never holds the program.
test('in worker mode a Response streams into the worker: the same model, progress here, typed errors, no full copy in this thread',
  async () => {
    const want = await callAll(await load(file, { threads: 1 }));
    for (const length of [file.length, undefined]) {
      const seen = [];
      const m = await load(response(file, { length }), { threads: 1, worker: true, onProgress: (p) => seen.push(p) });
      assert.equal(await callAll(m), want, `content-length ${length}`);
      assert.deepEqual(seen[0], { loaded: 0, total: length });
      assert.equal(seen.at(-1).loaded, file.length);
      assert.ok(seen.length > file.length / 4096, 'one report per chunk');
      m.dispose();
    }
    await assert.rejects(load(response(file, { failAt: 8192 }), { threads: 1, worker: true }), (e) => e.code === 'TDM_ERR_NOT_FOUND'
    && /after 8192 bytes/.test(e.message));

    const big = readFileSync(`${FIXTURES}/big_weights.tandem`);
    globalThis.gc?.();
    const base = process.memoryUsage().arrayBuffers - big.length; // `big` itself is the caller's
    let peak = 0;
    const m = await load(response(big, { chunk: 65536 }),
      { threads: 1, worker: true, onProgress: () => { peak = Math.max(peak, process.memoryUsage().arrayBuffers); } });
    peak = Math.max(peak, process.memoryUsage().arrayBuffers);
    m.dispose();
    assert.ok(peak - base - big.length < big.length / 2,
      `this thread's buffers grew by ${peak - base - big.length} bytes while ${big.length} streamed to the worker`);
  });
