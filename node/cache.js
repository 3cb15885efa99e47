// node/cache.js — load(url)'s cache in Node: a folder holding each program as <key>.bin and its
// validators as <key>.json (key: the SHA-256 of the URL). A body is written to a .part file and
// renamed into place once read whole, so an aborted download leaves nothing behind.
import { createReadStream } from 'node:fs';
import { mkdir, open, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createHash, randomBytes } from 'node:crypto';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';

/** The folder load() keeps programs in unless told another: $TANDEM_CACHE_DIR, else the user's
 * cache folder's tandem/ ($XDG_CACHE_HOME or ~/.cache on Linux, ~/Library/Caches on macOS,
 * %LOCALAPPDATA% on Windows). */
export function defaultCacheDir(env = process.env) {
  if (env.TANDEM_CACHE_DIR) return env.TANDEM_CACHE_DIR;
  if (process.platform === 'win32') return join(env.LOCALAPPDATA || join(homedir(), 'AppData', 'Local'), 'tandem', 'cache');
  if (process.platform === 'darwin') return join(homedir(), 'Library', 'Caches', 'tandem');
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'tandem');
}

const keyOf = (url) => createHash('sha256').update(url).digest('hex');
// Only files of these names are ever removed (clearCache of a folder that holds other files too).
const OURS = /^[0-9a-f]{64}\.(bin|json|[0-9a-f]+\.part)$/;

/** The store (web/cache.js's interface) over folder `dir`. */
export function fileStore(dir = defaultCacheDir()) {
  const paths = (url) => {
    const k = join(dir, keyOf(url));
    const part = () => `${k}.${randomBytes(6).toString('hex')}.part`;
    return { bin: `${k}.bin`, json: `${k}.json`, part: part(), jsonPart: part() };
  };
  return {
    async get(url) {
      const p = paths(url);
      let meta, size;
      try {
        meta = JSON.parse(await readFile(p.json, 'utf8'));
        size = (await stat(p.bin)).size;
      } catch {
        return null;
      }
      // a copy of another length than was written is not the one its validators describe
      if (meta.url !== url || meta.bytes !== size) return null;
      return {
        meta: { etag: meta.etag ?? null, lastModified: meta.lastModified ?? null, length: size },
        open: () => new Response(Readable.toWeb(createReadStream(p.bin)), { headers: { 'content-length': String(size) } }),
      };
    },
    async put(url, meta, body) {
      const p = paths(url);
      await mkdir(dir, { recursive: true });
      const file = await open(p.part, 'w');
      let bytes = 0;
      try {
        if (body instanceof Uint8Array) {
          await file.write(body);
          bytes = body.length;
        } else {
          for await (const chunk of body) {
            await file.write(chunk);
            bytes += chunk.length;
          }
        }
        await file.close();
        await rm(p.json, { force: true });
        await rename(p.part, p.bin);
        await writeFile(p.jsonPart, JSON.stringify({ url, etag: meta.etag, lastModified: meta.lastModified, bytes }));
        await rename(p.jsonPart, p.json);
      } catch (e) {
        await file.close().catch(() => {});
        await rm(p.part, { force: true });
        await rm(p.jsonPart, { force: true });
        throw e;
      }
    },
    async delete(url) {
      const p = paths(url);
      await rm(p.json, { force: true });
      await rm(p.bin, { force: true });
    },
    /** Removes every program (and partial download) of the folder; its other files stay. */
    async clear() {
      let names;
      try {
        names = await readdir(dir);
      } catch {
        return;
      }
      await Promise.all(names.filter((n) => OURS.test(n)).map((n) => rm(join(dir, n), { force: true })));
    },
  };
}
