// source.js — what load() reads a program from: bytes as they are, a URL fetched or a Response,
// read whole, streamed into the runtime's memory, or handed to a worker as a stream.
import { TandemError } from './errors.js';

/** `source` as bytes (a Uint8Array over them) or, for a URL or Response, as a Response. */
export async function sourceOf(source) {
  if (source instanceof Uint8Array) return source;
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  if (ArrayBuffer.isView(source)) return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
  let res = source;
  if (typeof source === 'string' || source instanceof URL) {
    try {
      res = await fetch(source);
    } catch (e) {
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
