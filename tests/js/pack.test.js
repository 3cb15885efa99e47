// The package as users get it: `npm pack`, install the tarball into an empty project, run a model
// there; and the hand-written typings checked by tsc over an example using every public name.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixture, ROOT } from './helpers.js';

test('npm pack, install into an empty project, run a model there', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tandem-pack-'));
  try {
    const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: ROOT, encoding: 'utf8' });
    const [{ filename, files }] = JSON.parse(out.slice(out.indexOf('[')));
    const paths = files.map((f) => f.path);
    for (const p of ['web/tandem.wasm', 'web/tandem.js', 'web/tandem.d.ts', 'web/worker.js', 'web/audio.js', 'web/audio-worklet.js',
      'node/index.js', 'package.json', 'LICENSE']) {
      assert.ok(paths.includes(p), `the package holds ${p}`);
    }
    assert.ok(!paths.some((p) => p.startsWith('src/') || p.startsWith('tests/')), 'sources and tests stay out');
    const app = join(dir, 'app');
    execFileSync('mkdir', ['-p', app]);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', type: 'module' }));
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--offline', join(dir, filename)], { cwd: app, stdio: 'pipe' });
    writeFileSync(join(app, 'run.mjs'), `
      import { load } from 'tandem-runtime';
      const m = await load(process.argv[2]);
      const w = await load(process.argv[2], { worker: true });
      const out = [];
      for (const x of [1, 2]) out.push((await m.forward1(new Float32Array([x]))).data[0], (await w.forward1(x)).data[0]);
      await m.forward2(0);
      out.push((await m.forward1(5)).data[0]);
      m.dispose(); w.dispose();
      console.log(JSON.stringify(out));`);
    const result = execFileSync('node', ['run.mjs', fixture('original_report').path], { cwd: app, encoding: 'utf8' });
    assert.deepEqual(JSON.parse(result), [2, 2, 4, 4, 5]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('typings: tsc --noEmit --strict over an example using every public name', () => {
  execFileSync(join(ROOT, 'node_modules/.bin/tsc'), ['-p', join(ROOT, 'tests/types/tsconfig.json')], { cwd: ROOT, stdio: 'pipe' });
});
