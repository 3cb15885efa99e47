// The SIMD level of the runtime build: relaxed SIMD (fused multiply-add) where the engine has it,
// SIMD128 otherwise or on request, and what model.simd says. scripts/test.sh runs tests/js/ twice
// in Node, without and with --experimental-wasm-relaxed-simd, so every other test runs on both
// builds; Chromium has relaxed SIMD (tests/browser/).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { load } from '../../node/index.js';
import { ROOT, fixture } from './helpers.js';

// (func (param v128 v128 v128) (result v128) local.get 0 local.get 1 local.get 2 f32x4.relaxed_madd)
const PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 8, 1, 96, 3, 123, 123, 123, 1, 123, 3, 2, 1, 0, 10, 13, 1,
  11, 0, 32, 0, 32, 1, 32, 2, 253, 133, 2, 11]);
const engineHasRelaxed = WebAssembly.validate(PROBE);

test('the default build is the relaxed one exactly where the engine has relaxed SIMD', async () => {
  for (const options of [{ threads: 1 }, { threads: 2 }, { threads: 1, worker: true }]) {
    const model = await load(fixture('transformer').path, options);
    try {
      assert.equal(model.simd, engineHasRelaxed ? 'relaxed' : 'simd128', JSON.stringify(options));
    } finally {
      model.dispose();
    }
  }
});

test("simd: 'simd128' runs the SIMD128 build; 'relaxed' runs the relaxed one or is refused, naming why", async () => {
  for (const threads of [1, 2]) {
    const plain = await load(fixture('transformer').path, { threads, simd: 'simd128' });
    assert.equal(plain.simd, 'simd128');
    plain.dispose();
    if (engineHasRelaxed) {
      const relaxed = await load(fixture('transformer').path, { threads, simd: 'relaxed' });
      assert.equal(relaxed.simd, 'relaxed');
      relaxed.dispose();
    } else {
      await assert.rejects(load(fixture('transformer').path, { threads, simd: 'relaxed' }),
        (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /no relaxed SIMD/.test(e.message)
          && /experimental-wasm-relaxed-simd/.test(e.message));
    }
  }
  await assert.rejects(load(fixture('transformer').path, { simd: 'avx' }), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT'
    && /'relaxed' or 'simd128'/.test(e.message));
});

test('model.simd is read from the build itself, also for a build given as options.wasm', async () => {
  const model = await load(fixture('transformer').path, { wasm: `${ROOT}web/tandem.wasm`, simd: engineHasRelaxed ? 'relaxed' : undefined });
  assert.equal(model.simd, 'simd128');
  model.dispose();
  // The relaxed builds hold standard relaxed-SIMD opcodes: they compile exactly where the engine has it.
  for (const name of ['tandem-relaxed.wasm', 'tandem-mt-relaxed.wasm']) {
    assert.equal(WebAssembly.validate(readFileSync(`${ROOT}web/${name}`)), engineHasRelaxed, name);
  }
});

test('the relaxed build agrees with eager on every fixture call sequence (run in a process with relaxed SIMD)', () => {
  // A child process with the flag, so this holds whichever way the test runner was started.
  const script = `
    import { load } from '${ROOT}node/index.js';
    import { checkSequence } from '${ROOT}tests/js/helpers.js';
    for (const name of ['accumulator', 'original_report', 'gru', 'lstm', 'transformer', 'streaming_conv', 'cnn', 'codec',
      'big_weights']) await checkSequence(name, { simd: 'relaxed', threads: 2 });
    const m = await load('${fixture('transformer').path}', { simd: 'relaxed' });
    console.log(m.simd);`;
  // A file, not -e: the pool's worker threads inherit the process's flags, and --input-type with them.
  const dir = mkdtempSync(join(tmpdir(), 'tandem-simd-'));
  try {
    writeFileSync(join(dir, 'run.mjs'), script);
    const out = execFileSync(process.execPath, ['--experimental-wasm-relaxed-simd', join(dir, 'run.mjs')], { encoding: 'utf8' });
    assert.equal(out.trim(), 'relaxed');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
