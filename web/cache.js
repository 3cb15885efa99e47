// cache.js — load(url)'s cache: a program fetched from a URL is kept (in the Cache API in browsers,
// in a folder in Node: node/cache.js) and revalidated on every load with a conditional request, so
// a file the server has not changed is read from the cache (a 304 carries no body).
import { TandemError } from './errors.js';

/** The Cache API cache that load() keeps programs in unless told another name. */
export const CACHE_NAME = 'tandem-models';

/** A store (the interface node/cache.js also implements) over the Cache API cache `name`: get(url)
 * -> { meta: { etag, lastModified, length }, open() -> Response } or null; put(url, meta, body, length)
 * stores a body (a stream or bytes) whole or not at all; delete(url). null where the Cache API is
 * missing (Node, a page that is not a secure context). */
export function cacheApiStore(name = CACHE_NAME) {
  if (typeof caches === 'undefined') return null;
  const open = () => caches.open(name);
  return {
    async get(url) {
      const r = await (await open()).match(url);
      if (!r) return null;
      return { meta: metaOf(r), open: () => r };
    },
    async put(url, meta, body, length) {
      const headers = {};
      if (meta.etag) headers.etag = meta.etag;
      if (meta.lastModified) headers['last-modified'] = meta.lastModified;
      if (length !== undefined) headers['content-length'] = String(length);
      // Cache.put stores the entry once the body has been read to its end; a body that errors
      // (an aborted download) stores nothing. (Bytes are copied by the Response, made first.)
      const res = new Response(body, { headers });
      await (await open()).put(url, res);
    },
    async delete(url) { await (await open()).delete(url); },
  };
}

/** Empties the Cache API cache `name` (tandem's own by default). */
export async function clearCacheApi(name = CACHE_NAME) {
  if (typeof caches !== 'undefined') await caches.delete(name);
}

/** The absolute http(s) URL of a source, the cache's key; null for anything else (bytes, blob:). */
export function cacheKey(source) {
  if (typeof source !== 'string' && !(source instanceof URL)) return null;
  let u;
  try {
    u = new URL(source, globalThis.location?.href);
  } catch {
    return null;
  }
  return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : null;
}

const fetchFailed = (url, why) => new TandemError('TDM_ERR_NOT_FOUND', `fetching ${url} failed: ${why}`);

/** fetch() that rejects with TDM_ERR_NOT_FOUND (an aborted one rejects as fetch does). */
async function get(url, init) {
  let res;
  try {
    res = await fetch(url, init);
  } catch (e) {
    if (init.signal?.aborted) throw e;
    throw fetchFailed(url, e.message);
  }
  return res;
}

// Equal validators, and equal lengths where both are known.
const sameVersion = (a, b) => (a.etag || a.lastModified) && a.etag === b.etag && a.lastModified === b.lastModified
  && (a.length == null || b.length == null || a.length === b.length);
/** A response's validators, and its body's length where the header gives it (not a compressed one's). */
const metaOf = (res) => ({
  etag: res.headers.get('etag'),
  lastModified: res.headers.get('last-modified'),
  length: res.headers.get('content-encoding') ? null : Number(res.headers.get('content-length') ?? NaN) || null,
});

/** `url` through `store`: { res: a Response, fromCache, meta } where `meta` ({ etag, lastModified, length })
 * is set when a downloaded body may be kept (the server gave a validator to revalidate it by: a file
 * without one could change and keep its length, so it is not cached). `fresh`: ignore the cached
 * copy. */
export async function fetchCached(url, store, signal, { fresh = false } = {}) {
  const cached = fresh ? null : await store.get(url).catch(() => null);
  // the body goes to the store: not to the engine's HTTP cache as well
  const init = { signal, cache: 'no-store' };
  let res;
  if (cached) {
    const headers = {};
    if (cached.meta.etag) headers['if-none-match'] = cached.meta.etag;
    if (cached.meta.lastModified) headers['if-modified-since'] = cached.meta.lastModified;
    try {
      res = await get(url, { ...init, headers });
    } catch (e) {
      if (signal?.aborted) throw e;
      // A cross-origin server may refuse the conditional headers (their CORS preflight): compare
      // its HEAD (a simple request) with the cached copy's validators; offline, the cached copy.
      let head;
      try {
        head = await get(url, { ...init, method: 'HEAD' });
      } catch (e2) {
        if (signal?.aborted) throw e2;
        return { res: cached.open(), fromCache: true };
      }
      if (head.ok && sameVersion(metaOf(head), cached.meta)) return { res: cached.open(), fromCache: true };
    }
    if (res?.status === 304) {
      await res.body?.cancel();
      return { res: cached.open(), fromCache: true };
    }
  }
  res ??= await get(url, init);
  if (!res.ok && cached && res.status >= 500) { // the server fails: the copy it served before
    await res.body?.cancel();
    return { res: cached.open(), fromCache: true };
  }
  if (!res.ok) throw fetchFailed(url, `HTTP ${res.status}`);
  const meta = metaOf(res);
  if (!meta.etag && !meta.lastModified) {
    if (cached) await store.delete(url).catch(() => {});
    return { res, fromCache: false, meta: null };
  }
  return { res, fromCache: false, meta };
}
