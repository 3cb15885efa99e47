// The JS package's layout: no import cycle among the modules of web/ and node/ (each static import
// is followed), no module in web/ over 700 lines, and every module of web/ shipped by npm pack
// (package.json's "files").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { ROOT } from './helpers.js';

// `import x from '...'`, `import '...'`, `export { x } from '...'`, `export * from '...'`, across
// lines; a dynamic import() is not followed (it runs later, so it cannot make a cycle at load).
const STATIC_IMPORT = /^\s*(?:import|export)\s+(?:[^'"`;]*?\sfrom\s+)?['"]([^'"]+)['"]/gm;

/** The relative modules `file` imports statically, as absolute paths. */
function importsOf(file) {
  const text = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '');
  return [...text.matchAll(STATIC_IMPORT)].map((m) => m[1]).filter((s) => s.startsWith('.')).map((s) => resolve(dirname(file), s));
}

/** The first import cycle reachable from `files` (a list of paths, the first repeated last), or null. */
export function findCycle(files) {
  const state = new Map(); // path -> 'open' (on the current path) | 'done'
  const path = [];
  const visit = (f) => {
    if (state.get(f) === 'done') return null;
    if (state.get(f) === 'open') return [...path.slice(path.indexOf(f)), f];
    state.set(f, 'open');
    path.push(f);
    for (const dep of importsOf(f)) {
      const cycle = visit(dep);
      if (cycle) return cycle;
    }
    path.pop();
    state.set(f, 'done');
    return null;
  };
  for (const f of files) {
    const cycle = visit(f);
    if (cycle) return cycle;
  }
  return null;
}

/** The .js files under dir (web/webgpu/ too), as absolute paths. */
const modules = (dir) => readdirSync(join(ROOT, dir), { recursive: true }).filter((n) => n.endsWith('.js')).map((n) => join(ROOT, dir, n));

test('no import cycle among the modules of web/ and node/', () => {
  const files = [...modules('web'), ...modules('node')];
  assert.ok(files.some((f) => f.endsWith('web/tandem.js')) && files.some((f) => f.endsWith('web/lm.js')), 'the modules were listed');
  const cycle = findCycle(files);
  assert.equal(cycle && cycle.map((f) => relative(ROOT, f)).join(' -> '), null, 'an import cycle');
});

test('the cycle check finds a cycle, through re-exports and multi-line imports', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tandem-cycle-'));
  try {
    writeFileSync(join(dir, 'a.js'), "import {\n  b,\n} from './b.js';\nexport const a = 1;\n");
    writeFileSync(join(dir, 'b.js'), "export { c as b } from './c.js';\n// import { a } from './a.js'; (a comment)\n");
    writeFileSync(join(dir, 'c.js'), "/* import './a.js' */ export const c = () => import('./a.js');\n");
    assert.equal(findCycle([join(dir, 'a.js')]), null, 'comments and dynamic imports are not followed');
    writeFileSync(join(dir, 'c.js'), "import './a.js';\nexport const c = 3;\n");
    assert.deepEqual(findCycle([join(dir, 'a.js')]).map((f) => relative(dir, f)), ['a.js', 'b.js', 'c.js', 'a.js']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('no module in web/ (or below it) is over 700 lines', () => {
  const long = modules('web').map((f) => [relative(ROOT, f), readFileSync(f, 'utf8').split('\n').length - 1]).filter(([, n]) => n > 700);
  assert.deepEqual(long, [], 'split these by what they hold');
});

test("package.json's files ship every module of web/ and node/", () => {
  const { files } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const shipped = (p) => files.some((f) => p === f || (f.endsWith('/') && p.startsWith(f)));
  const missing = [...modules('web'), ...modules('node')].map((f) => relative(ROOT, f)).filter((p) => !shipped(p));
  assert.deepEqual(missing, [], 'add these to package.json "files"');
});

test('a backend imports what it needs and never the model or the entry that drive it', () => {
  const backends = ['web/wasm-backend.js', 'web/worker-backend.js', 'web/webgpu/backend.js'].map((f) => join(ROOT, f));
  const drivers = new Set(['web/model.js', 'web/tandem.js'].map((f) => join(ROOT, f)));
  for (const b of backends) {
    const bad = importsOf(b).filter((d) => drivers.has(d));
    assert.deepEqual(bad.map((d) => relative(ROOT, d)), [], `${relative(ROOT, b)} imports the model or the entry`);
  }
  // web/webgpu/ takes its errors and tensors from their modules (no bag of internals handed over)
  const gpu = importsOf(join(ROOT, 'web/webgpu/backend.js')).map((d) => relative(ROOT, d));
  assert.ok(gpu.includes('web/errors.js') && gpu.includes('web/tensor.js'), gpu.join(' '));
});
