// capabilities() in Node, against what this Node has: SIMD128 always, relaxed SIMD from Node 22 (or
// Node 20 with --experimental-wasm-relaxed-simd), shared memory, no WebGPU, the 4 GiB wasm32 limit.
// tests/browser/capabilities.test.js checks Chromium's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { capabilities, load } from '../../node/index.js';
import { fixture } from './helpers.js';

const RELAXED_FLAG = '--experimental-wasm-relaxed-simd';
const major = Number(process.versions.node.split('.')[0]);
const hasRelaxed = (execArgv) => major >= 22 || execArgv.includes(RELAXED_FLAG);

test("capabilities() in this Node, and load()'s default build is the one it names", async () => {
  const caps = await capabilities();
  const relaxed = hasRelaxed(process.execArgv);
  assert.deepEqual(caps, {
    simd: relaxed ? 'relaxed' : 'simd128',
    relaxedSimd: relaxed,
    threads: { available: true, reason: null, cores: availableParallelism() },
    webgpu: { available: false, reason: 'this engine has no WebGPU (navigator.gpu is missing)', adapter: null, limits: null, f16: false },
    memoryLimitBytes: 2 ** 32,
  });
  const m = await load(fixture('accumulator').path);
  assert.equal(m.simd, caps.simd);
  m.dispose();
});

test('relaxed SIMD is reported where the engine has it (Node with the flag)', () => {
  const script = "import('./node/index.js').then(async (t) => console.log(JSON.stringify((await t.capabilities()).simd)))";
  for (const args of [[], [RELAXED_FLAG]]) {
    const out = execFileSync(process.execPath, [...args, '-e', script], { cwd: new URL('../../', import.meta.url), encoding: 'utf8' });
    assert.equal(JSON.parse(out), hasRelaxed(args) ? 'relaxed' : 'simd128', args.join(' '));
  }
});
