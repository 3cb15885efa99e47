// The SIMD128 kernels against their scalar references, in wasm (tests/c/kernel_selftest.c built
// as build/wasm/kernel_selftest.wasm), on sizes that exercise every tail.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { instantiateRuntime } from '../../web/loader.js';
import { ROOT } from './helpers.js';

test('every SIMD128 kernel matches its scalar reference on tail sizes and special values', async () => {
  const path = `${ROOT}build/wasm/kernel_selftest.wasm`;
  assert.ok(existsSync(path), 'build/wasm/kernel_selftest.wasm is built by scripts/build.sh');
  const module = await WebAssembly.compile(readFileSync(path));
  const x = await instantiateRuntime(module);
  assert.equal(x.tdm_kernel_selftest(), 0);
});
