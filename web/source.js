// source.js — what load() reads a program from: bytes as they are, a URL fetched or a Response,
// read whole, streamed into the runtime's memory, or handed to a worker as a stream.
import { TandemError } from './errors.js';
import { cacheKey, fetchCached } from './cache.js';

/** `source` as bytes (a Uint8Array over them) or, for a URL or Response, as a Response; `signal`
 * aborts the download. */
export async function sourceOf(source, signal) {
  if (source instanceof Uint8Array) return source;
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  if (ArrayBuffer.isView(source)) return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
  let res = source;
  if (typeof source === 'string' || source instanceof URL) {
    try {
      res = await fetch(source, { signal });
    } catch (e) {
      if (signal?.aborted) throw e;
      throw new TandemError('TDM_ERR_NOT_FOUND', `fetching ${source} failed: ${e.message}`);
    }
    if (!res.ok) throw new TandemError('TDM_ERR_NOT_FOUND', `fetching ${source} failed: HTTP ${res.status}`);
  }
  if (typeof Response === 'undefined' || !(res instanceof Response)) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', 'load(source): source must be a URL, a path (Node), bytes or a Response');
  }
  return res;
}

/** Calls fn(chunk) for each chunk of a Response's body, with progress; returns the byte count. */
async function eachChunk(res, onProgress, fn) {
  const total = Number(res.headers.get('content-length')) || undefined;
  let loaded = 0;
  onProgress?.({ loaded, total });
  if (!res.body) {
    const all = new Uint8Array(await res.arrayBuffer());
    fn(all);
    onProgress?.({ loaded: all.length, total });
    return all.length;
  }
  for (const reader = res.body.getReader(); ;) {
    let r;
    try {
      r = await reader.read();
    } catch (e) {
      throw new TandemError('TDM_ERR_NOT_FOUND', `reading the program failed after ${loaded} bytes: ${e.message}`);
    }
    if (r.done) return loaded;
    fn(r.value);
    loaded += r.value.length;
    onProgress?.({ loaded, total });
  }
}

let streamsMove;
/** Whether a ReadableStream can be transferred to a worker (Chrome 87+, Firefox 103+, Node 18+). */
function streamsTransferable() {
  if (streamsMove === undefined) {
    try {
      const s = new ReadableStream();
      structuredClone(s, { transfer: [s] });
      streamsMove = true;
    } catch {
      streamsMove = false;
    }
  }
  return streamsMove;
}

/** A Response's body as a stream to transfer to the model's worker, which streams it into its
 * memory as load() does inline; progress is reported here as the worker reads each chunk. null
 * where streams cannot be transferred (the caller then reads the body and transfers the bytes). */
export function bodyForWorker(res, onProgress) {
  if (!res.body || !streamsTransferable()) return null;
  const total = Number(res.headers.get('content-length')) || undefined;
  let loaded = 0;
  onProgress?.({ loaded, total });
  const stream = res.body.pipeThrough(new TransformStream({
    transform(chunk, c) {
      c.enqueue(chunk);
      loaded += chunk.length;
      onProgress?.({ loaded, total });
    },
  }));
  return { stream, length: total };
}

/** Bytes of a source: bytes as they are, a Response or URL read (with progress when asked). */
export async function bytesOf(source, onProgress) {
  const res = await sourceOf(source);
  if (res instanceof Uint8Array) return res;
  if (!onProgress || !res.body) return new Uint8Array(await res.arrayBuffer());
  const parts = [];
  const n = await eachChunk(res, onProgress, (c) => parts.push(c));
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}

/** Streams a Response's body into the runtime's memory: [ptr (tdm_malloc'd), length]. With a
 * content-length the buffer is allocated once and JS holds one chunk at a time (a 1 GB program
 * never exists as a JS copy); without one (or a body longer than it, as a compressed one
 * decodes), the buffer doubles as it fills. */
export async function streamInto(rt, res, onProgress) {
  let cap = Math.max(Number(res.headers.get('content-length')) || 0, 1 << 16);
  let ptr = rt.malloc(cap), at = 0;
  try {
    await eachChunk(res, onProgress, (c) => {
      if (at + c.length > cap) {
        cap = Math.max(at + c.length, 2 * cap);
        const bigger = rt.malloc(cap);
        rt.heap(Uint8Array).copyWithin(bigger, ptr, ptr + at);
        rt.x.tdm_free(ptr);
        ptr = bigger;
      }
      rt.heap(Uint8Array).set(c, ptr + at);
      at += c.length;
    });
  } catch (e) {
    rt.x.tdm_free(ptr);
    throw e;
  }
  return [ptr, at];
}

/** A copy of `res` whose body errors when `signal` aborts (a body read from the cache, which no
 * fetch's signal reaches), keeping the headers (content-length: the progress's total). */
function abortable(res, signal) {
  if (!signal || !res.body) return res;
  return new Response(res.body.pipeThrough(new TransformStream(), { signal }), { headers: res.headers });
}

/** The lowercase hex SHA-256 of bytes. */
async function sha256Of(bytes) {
  if (!globalThis.crypto?.subtle) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', 'sha256: this context has no crypto.subtle (a page needs https or localhost)');
  }
  const d = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(d, (b) => b.toString(16).padStart(2, '0')).join('');
}

const mismatch = (what, got, want) => new TandemError('TDM_ERR_INTEGRITY',
  `the SHA-256 of ${what} is ${got}, not the sha256 given (${want}); it was not loaded${what.startsWith('http') ? ' nor cached' : ''}`);

/**
 * What load() reads the program from: { src, owned, written }. `src`: bytes, or a Response whose
 * body streams into the runtime's memory; `owned`: the bytes were read here (not the caller's);
 * `written`: the cache write of a downloaded program (a promise that settles when it is stored or
 * given up, never rejecting), else null; `drop()` removes it (a program that failed to load). A
 * URL goes through `store` (web/cache.js) when there is one.
 * With `sha256` the bytes are read whole and checked before anything loads, and only a matching
 * file is cached; a cached copy that does not match is dropped and downloaded again.
 */
export async function openSource(source, { store, signal, sha256, onProgress }) {
  const url = store ? cacheKey(source) : null;
  if (!url) {
    const src = await sourceOf(source, signal);
    if (!sha256) return { src: src instanceof Uint8Array ? src : abortable(src, signal), owned: false, written: null };
    const bytes = await bytesOf(abortable(src, signal), onProgress);
    const got = await sha256Of(bytes);
    if (got !== sha256) throw mismatch(typeof source === 'string' || source instanceof URL ? String(source) : 'the source', got, sha256);
    return { src: bytes, owned: !(src instanceof Uint8Array), written: null };
  }
  const drop = () => store.delete(url).catch(() => {});
  let r = await fetchCached(url, store, signal);
  if (sha256) {
    let bytes = await bytesOf(abortable(r.res, signal), onProgress);
    let got = await sha256Of(bytes);
    if (got !== sha256 && r.fromCache) {
      await drop();
      r = await fetchCached(url, store, signal, { fresh: true });
      bytes = await bytesOf(abortable(r.res, signal), onProgress);
      got = await sha256Of(bytes);
    }
    if (got !== sha256) throw mismatch(url, got, sha256);
    // stored before the bytes go on: a worker's load transfers (detaches) them
    const written = r.meta ? store.put(url, r.meta, bytes, bytes.length).catch(() => {}) : null;
    await written;
    return { src: bytes, owned: true, written, drop };
  }
  const res = abortable(r.res, signal);
  if (!r.meta || !res.body) return { src: res, owned: false, written: null };
  // One download, two readers: the runtime's memory and the store (which keeps it only once read whole).
  const [body, copy] = res.body.tee();
  const written = store.put(url, r.meta, copy, r.meta.length ?? undefined).catch(() => {});
  return { src: new Response(body, { headers: res.headers }), owned: false, written, drop };
}
