// A small static file server for the repository (the demo and the browser tests), on 127.0.0.1.
// Usage: node scripts/serve.mjs [port]   — or import { serve } for tests.
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css',
  '.json': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png', '.tandem': 'application/octet-stream',
  '.txt': 'text/plain; charset=utf-8',
};

// Cross-origin isolation (COOP + COEP): what lets a page share memory between workers, so a model
// runs on several threads (load(..., { threads })). Every file here is same-origin, so nothing the
// pages load is blocked by it.
const ISOLATION = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };

/** Serves `root` on 127.0.0.1:`port` (0: any free port), cross-origin isolated unless `isolated`
 * is false, with `headers` on every file. With `validators`, each file has an ETag and a Last-Modified
 * (from its size and mtime) and a conditional request for an unchanged one gets a 304 (what load()'s
 * cache revalidates by).
 * Resolves to { url, close(), served }: `served` maps each path to the body bytes sent for it. */
export async function serve({ root = ROOT, port = 0, index = '/demo/', isolated = true, validators = false, headers: extra = {} } = {}) {
  const served = new Map();
  const server = createServer(async (req, res) => {
    try {
      let path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
      if (path === '/') {
        res.writeHead(302, { location: index });
        res.end();
        return;
      }
      if (path.endsWith('/')) path += 'index.html';
      const file = normalize(join(root, path));
      if (!file.startsWith(normalize(root))) throw new Error('outside the root');
      const st = await stat(file);
      if (!st.isFile()) throw new Error('not a file');
      const headers = { 'cache-control': 'no-store', ...(isolated ? ISOLATION : {}), ...extra };
      if (validators) {
        headers.etag = `"${st.size.toString(16)}-${Math.round(st.mtimeMs * 1000).toString(16)}"`;
        headers['last-modified'] = st.mtime.toUTCString();
        if (req.headers['if-none-match'] === headers.etag) {
          res.writeHead(304, headers);
          res.end();
          return;
        }
      }
      const body = await readFile(file);
      res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream', 'content-length': body.length, ...headers });
      served.set(path, (served.get(path) ?? 0) + body.length);
      res.end(body);
    } catch {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found');
    }
  });
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)), served };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { url } = await serve({ port: Number(process.argv[2] ?? 8080), validators: true });
  console.log(`tandem demo: ${url}/`);
}
