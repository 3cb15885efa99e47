// The packed package (`npm pack`) installed offline into a small app, built or served the way
// docs/guide/deploying.md says for each setup: Vite (dev server and production build, with the
// guide's vite.config.js, which only sends the isolation headers) and webpack with no configuration,
// esbuild and Rollup with the guide's own shell steps and options, a page with the guide's import
// map, and Node. Each app loads a tiny program on one thread, on 2 threads and in a worker with 2
// threads, and must give its known outputs in headless Chromium (cross-origin isolated, so the
// thread pool's worker script and the threaded build must be found) or in Node.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  mkdtempSync, mkdirSync, writeFileSync, readFileSync, copyFileSync, rmSync, readdirSync, symlinkSync, realpathSync, existsSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { launch } from './chromium.js';
import { serve } from '../../scripts/serve.mjs';
import { fixture, ROOT } from '../js/helpers.js';

const BIN = join(ROOT, 'node_modules/.bin');
// original_report: forward1 adds its input to the state (1 at first) and returns it; forward2(0)
// sets the state to 0
const WANT = { values: [2, 4, 5], inline: 1, threads: 2, worker: 2 };

// The app: three loads, each running forward1(1), forward1(2), forward2(0), forward1(5).
// `options` are the load options the guide gives for the setup (wasmPaths for esbuild and Rollup).
const appModule = (options = '{}') => `import { load } from 'tandem-runtime';

async function run() {
  const result = {};
  for (const [name, o] of Object.entries({ inline: { threads: 1 }, threads: { threads: 2 }, worker: { worker: true, threads: 2 } })) {
    const m = await load('/model.tandem', { ...o, ...${options} });
    const values = [];
    for (const x of [1, 2]) values.push((await m.forward1(new Float32Array([x]))).data[0]);
    await m.forward2(new Float32Array([0]));
    values.push((await m.forward1(new Float32Array([5]))).data[0]);
    result[name] = { threads: m.threads, values };
    m.dispose();
  }
  return result;
}
window.result = run().catch((e) => ({ error: e.message }));
`;
// An app that reports how each load ends: on the default threads, with explicit threads, in a
// worker; with the load options given in the page's query (?options=JSON).
const PROBE = `import { load } from 'tandem-runtime';

async function run() {
  const options = JSON.parse(new URLSearchParams(location.search).get('options') ?? '{}');
  const out = { cores: navigator.hardwareConcurrency };
  for (const [name, o] of Object.entries({ default: {}, threads: { threads: 2 }, worker: { worker: true, threads: 1 } })) {
    try {
      const m = await load('/model.tandem', { ...o, ...options });
      out[name] = { threads: m.threads, value: (await m.forward1(new Float32Array([3]))).data[0] };
      m.dispose();
    } catch (e) {
      out[name] = { error: e.message };
    }
  }
  return out;
}
window.result = run();
`;
const page = (script) => `<!doctype html>\n<meta charset="utf-8">\n<title>app</title>\n${script}\n`;

/** The guide's block after the heading `### name` of the given language, as it is written. */
function guideBlock(name, lang) {
  const text = readFileSync(join(ROOT, 'docs/guide/deploying.md'), 'utf8');
  const at = text.indexOf(`\n### ${name}\n`) + 1;
  const section = text.slice(at, at + 5 + text.slice(at + 4).search(/\n##/));
  const m = at > 0 && section.match(new RegExp(`\`\`\`${lang}( browser)?\\n([\\s\\S]*?)\`\`\`\\n`));
  assert.ok(m, `docs/guide/deploying.md has a ${lang} block under "### ${name}"`);
  return m[2];
}

let dir, browser, model;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'tandem-bundlers-'));
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: ROOT, encoding: 'utf8' });
  const [{ filename }] = JSON.parse(out.slice(out.indexOf('[')));
  // one install (offline, from npm's cache: scripts/setup.sh caches the package's dependencies) that
  // every app below shares; each app is a folder beside node_modules
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'apps', version: '1.0.0', type: 'module', private: true }));
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--offline', join(dir, filename)], { cwd: dir, stdio: 'pipe' });
  model = fixture('original_report').path;
});

after(async () => {
  await browser?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A new app folder with its main.js and index.html (and the model beside them, in `served`). */
function app(name, { options, served = '', html = page('<script type="module" src="./main.js"></script>'), main = 'main.js',
  module = appModule(options) } = {}) {
  const root = join(dir, name);
  mkdirSync(join(root, served), { recursive: true });
  // a project of its own, over the one install
  writeFileSync(join(root, 'package.json'), JSON.stringify({ name, version: '1.0.0', type: 'module', private: true }));
  symlinkSync(join(dir, 'node_modules'), join(root, 'node_modules'));
  mkdirSync(join(root, main, '..'), { recursive: true });
  writeFileSync(join(root, main), module);
  writeFileSync(join(root, 'index.html'), html);
  copyFileSync(model, join(root, served, 'model.tandem'));
  return root;
}

/** What the page at `url` gives; fails on a page error. */
async function runPage(url) {
  browser ??= await launch();
  const context = await browser.newContext();
  const tab = await context.newPage();
  const errors = [], logged = [];
  tab.on('pageerror', (e) => errors.push(e.message));
  tab.on('console', (m) => m.type() === 'error' && logged.push(m.text()));
  try {
    await tab.goto(url);
    await tab.waitForFunction(() => window.result, null, { timeout: 30000 }).catch((e) => {
      assert.fail(`${url}: the app gave no result (${e.message}); the console: ${logged.join('\n')}`);
    });
    const result = await tab.evaluate(async () => ({ ...(await window.result),
      ...(window.wasmMagic && { wasmMagic: await window.wasmMagic }) }));
    assert.deepEqual(errors, []);
    return result;
  } finally {
    await context.close();
  }
}

function check(result, where) {
  assert.equal(result.error, undefined, `${where}: ${result.error}`);
  for (const name of ['inline', 'threads', 'worker']) {
    assert.deepEqual(result[name], { threads: WANT[name], values: WANT.values }, `${where}: ${name}`);
  }
}

/** Serves `root` cross-origin isolated (and with `headers`): { url, close() }. */
const serveIsolated = (root, headers) => serve({ root, index: '/index.html', headers });

/** Serves `root` cross-origin isolated and checks its page. */
async function checkStatic(root, where, path = '/') {
  const server = await serveIsolated(root);
  try {
    check(await runPage(`${server.url}${path}`), where);
  } finally {
    await server.close();
  }
}

/** Runs a shell script in `cwd`, its output in the error when it fails. */
function sh(script, cwd) {
  try {
    execFileSync('bash', ['-eo', 'pipefail', '-c', script], { cwd, encoding: 'utf8', stdio: 'pipe' });
  } catch (e) {
    assert.fail(`${script}\n${e.stdout}\n${e.stderr}`);
  }
}

/** The apps' own install of a bundler (what `npm install -D` would give them): this repository's
 * devDependencies, linked into their node_modules with their commands (found by npx). */
function install(packages, bins) {
  for (const p of packages.filter((q) => !existsSync(join(dir, 'node_modules', q)))) {
    mkdirSync(join(dir, 'node_modules', p, '..'), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules', p), join(dir, 'node_modules', p));
  }
  mkdirSync(join(dir, 'node_modules/.bin'), { recursive: true });
  for (const b of bins.filter((c) => !existsSync(join(dir, 'node_modules/.bin', c)))) {
    symlinkSync(realpathSync(join(BIN, b)), join(dir, 'node_modules/.bin', b));
  }
}

test('Vite: the dev server and the production build, configured with the guide\'s isolation headers only', async () => {
  const { createServer, build } = await import(join(ROOT, 'node_modules/vite/dist/node/index.js'));
  const scripts = '<script type="module" src="/main.js"></script><script type="module" src="/url.js"></script>';
  const root = app('vite', { served: 'public', html: page(scripts) });
  // a build's URL by its export, as Vite's ?url import gives it
  writeFileSync(join(root, 'url.js'), `import wasmUrl from 'tandem-runtime/tandem.wasm?url';
window.wasmMagic = fetch(wasmUrl).then((r) => r.arrayBuffer()).then((b) => Array.from(new Uint8Array(b, 0, 4)));
`);
  // the guide's vite.config.js: the isolation headers, nothing about the package
  writeFileSync(join(root, 'vite.config.js'), guideBlock('Vite', 'js'));
  const config = { root, configFile: join(root, 'vite.config.js'), logLevel: 'silent' };
  const dev = await createServer({ ...config, server: { port: 0, host: '127.0.0.1' } });
  await dev.listen();
  try {
    const r = await runPage(dev.resolvedUrls.local[0]);
    check(r, 'vite dev');
    assert.deepEqual(r.wasmMagic, [0, 0x61, 0x73, 0x6d], 'vite dev: tandem-runtime/tandem.wasm?url');
  } finally {
    await dev.close();
  }
  await build({ ...config, build: { outDir: join(root, 'dist') } });
  const server = await serveIsolated(join(root, 'dist'));
  try {
    const r = await runPage(`${server.url}/`);
    check(r, 'vite build');
    assert.deepEqual(r.wasmMagic, [0, 0x61, 0x73, 0x6d], 'vite build: tandem-runtime/tandem.wasm?url');
  } finally {
    await server.close();
  }
});

test('webpack 5: `webpack` with no configuration', async () => {
  const root = app('webpack', { main: 'src/index.js', served: 'dist', html: page('<script src="./main.js"></script>') });
  install(['webpack', 'webpack-cli'], ['webpack']);
  sh('npx webpack --mode production', root);
  copyFileSync(join(root, 'index.html'), join(root, 'dist/index.html'));
  await checkStatic(join(root, 'dist'), 'webpack');
});

const TOOLS = {
  esbuild: [['esbuild', '@esbuild'], ['esbuild']],
  rollup: [['rollup', '@rollup'], ['rollup']],
};
for (const [name, bundler] of [['esbuild', 'esbuild'], ['Rollup', 'rollup']]) {
  test(`${name}: the guide's steps`, async () => {
    install(...TOOLS[bundler]);
    const options = guideBlock(name, 'js').match(/load\([^,]+, (\{[^}]*\})\)/)[1];
    const root = app(bundler, { options });
    sh(guideBlock(name, 'sh'), root);
    copyFileSync(join(root, 'index.html'), join(root, 'dist/index.html'));
    copyFileSync(model, join(root, 'dist/model.tandem'));
    assert.ok(readdirSync(join(root, 'dist')).length > 1);
    await checkStatic(join(root, 'dist'), bundler);
  });
}

test('an import map, no bundler', async () => {
  const map = guideBlock('An import map', 'html');
  app('importmap', { html: page(`${map}<script type="module" src="./main.js"></script>`) });
  copyFileSync(model, join(dir, 'model.tandem'));
  await checkStatic(dir, 'import map', '/importmap/index.html');
});

test('Node: the same loads', () => {
  const root = app('node');
  writeFileSync(join(root, 'run.mjs'), `globalThis.window = globalThis;\nprocess.chdir(${JSON.stringify(root)});\n`
    + readFileSync(join(root, 'main.js'), 'utf8').replace("'/model.tandem'", "'model.tandem'")
    + 'console.log(JSON.stringify(await window.result));\n');
  check(JSON.parse(execFileSync('node', ['run.mjs'], { cwd: root, encoding: 'utf8' })), 'node');
  // the files the package exports by name
  const names = ['tandem.wasm', 'tandem-mt.wasm', 'tandem-relaxed.wasm', 'tandem-mt-relaxed.wasm', 'worker.js', 'thread.js'];
  writeFileSync(join(root, 'resolve.mjs'), `console.log(JSON.stringify(${JSON.stringify(names)}.flatMap((n) =>
    [import.meta.resolve('tandem-runtime/' + n), import.meta.resolve('tandem-runtime/web/' + n)])));`);
  const resolved = JSON.parse(execFileSync('node', ['resolve.mjs'], { cwd: root, encoding: 'utf8' }));
  const web = pathToFileURL(join(realpathSync(join(dir, 'node_modules/tandem-runtime')), 'web')).href;
  assert.deepEqual(resolved, names.flatMap((n) => [`${web}/${n}`, `${web}/${n}`]));
  for (const url of resolved) assert.ok(existsSync(new URL(url)), url);
});

test('esbuild without the guide\'s copy: a missing runtime file rejects load with its URL and wasmPaths; then a CDN', async () => {
  install(...TOOLS.esbuild);
  const root = app('esbuild-bare', { module: PROBE, served: 'dist' });
  sh('npx esbuild main.js --bundle --format=esm --outdir=dist', root);
  copyFileSync(join(root, 'index.html'), join(root, 'dist/index.html'));
  const server = await serveIsolated(join(root, 'dist'));
  const missing = (file) => new RegExp(`^TDM_ERR_NOT_FOUND: .*${server.url}/${file} (was not found )?\\(HTTP 404\\); .*options\\.wasmPaths`,
    's');
  try {
    // nothing copied: the build itself
    let r = await runPage(`${server.url}/`);
    for (const name of ['default', 'threads', 'worker']) {
      assert.match(r[name].error, missing('tandem(-mt)?(-relaxed)?\\.wasm'), name);
    }
    // the builds copied: the workers' scripts; a pool on the default threads rejects too, never
    // running on one thread without a word
    sh('cp node_modules/tandem-runtime/web/*.wasm dist/', root);
    r = await runPage(`${server.url}/`);
    assert.match(r.threads.error, missing('thread\\.js'));
    if (r.cores > 1) {
      assert.match(r.default.error, /threads: \d+ \(the default\) requested, the pool did not start: thread 1 could not load/);
    }
    assert.match(r.default.error ?? '', r.cores > 1 ? missing('thread\\.js') : /^$/);
    assert.match(r.worker.error, /^TDM_ERR_NOT_FOUND: the model's worker could not load .*\/worker\.js \(HTTP 404\); /);
    // wasmPaths on another origin (a CDN: CORS and Cross-Origin-Resource-Policy): the builds and
    // both workers from there
    const cdn = await serve({ root: join(dir, 'node_modules/tandem-runtime/web'), index: '/tandem.js',
      headers: { 'access-control-allow-origin': '*', 'cross-origin-resource-policy': 'cross-origin' } });
    try {
      const options = encodeURIComponent(JSON.stringify({ wasmPaths: `${cdn.url}/` }));
      r = await runPage(`${server.url}/index.html?options=${options}`);
      assert.deepEqual([r.threads, r.worker], [{ threads: 2, value: 4 }, { threads: 1, value: 4 }]);
      assert.deepEqual(r.default, { threads: Math.min(4, r.cores), value: 4 });
    } finally {
      await cdn.close();
    }
  } finally {
    await server.close();
  }
});
