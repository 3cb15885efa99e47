// The SIMD128 kernels against their scalar references, in wasm (tests/c/kernel_selftest.c built
// as build/wasm/kernel_selftest.wasm), on sizes that exercise every tail.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, existsSync } from 'node:fs';
import { instantiateRuntime } from '../../web/loader.js';
import { ROOT } from './helpers.js';

// The relaxed-SIMD builds of the same self-test, in a child process with relaxed SIMD on, so they run
// whichever way the test runner was started: build/wasi/kernel_selftest_relaxed.wasm (clang-19, the
// kernels of tandem-relaxed.wasm: fused multiply-adds and the relaxed integer dot products) and
// build/wasm/kernel_selftest_mt_relaxed.wasm (Emscripten's LLVM 14, those of tandem-mt-relaxed.wasm).
for (const path of [`${ROOT}build/wasi/kernel_selftest_relaxed.wasm`, `${ROOT}build/wasm/kernel_selftest_mt_relaxed.wasm`]) {
  test(`every relaxed-SIMD kernel matches its scalar reference on tail sizes and special values (${path.slice(ROOT.length)})`, () => {
    assert.ok(existsSync(path), `${path} is built by scripts/build.sh`);
    const script = `
      import { readFileSync } from 'node:fs';
      import { instantiateRuntime } from '${ROOT}web/loader.js';
      const x = await instantiateRuntime(await WebAssembly.compile(readFileSync('${path}')));
      console.log(x.tdm_kernel_selftest());`;
    const out = execFileSync(process.execPath, ['--experimental-wasm-relaxed-simd', '--input-type=module', '-e', script],
      { encoding: 'utf8' });
    assert.equal(out.trim(), '0', 'mismatches in the relaxed-SIMD kernel self-test');
  });
}

test('every SIMD128 kernel matches its scalar reference on tail sizes and special values', async () => {
  const path = `${ROOT}build/wasm/kernel_selftest.wasm`;
  assert.ok(existsSync(path), 'build/wasm/kernel_selftest.wasm is built by scripts/build.sh');
  const module = await WebAssembly.compile(readFileSync(path));
  const x = await instantiateRuntime(module);
  assert.equal(x.tdm_kernel_selftest(), 0);
});
