// The WebGPU backend (web/webgpu/) in headless Chromium on SwiftShader: op cases against the wasm
// backend in the same page, model fixtures over their call sequences against PyTorch eager, the
// state operations, and the device fallback and refusal. Tolerance: 1e-3 of the largest |value|
// of each output (exact for integer and bool outputs). SwiftShader is slow: small cases, no timing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import { FIXTURES, fixture } from '../js/helpers.js';
import { near, num, page, openWebgpuPage } from './webgpu-near.js';

openWebgpuPage();

test('op cases: every case whose ops have WebGPU kernels equals the wasm backend', { timeout: 600000 }, async () => {
  // one case per op family (the first recorded), to keep SwiftShader's time small
  const names = [...new Set(readdirSync(`${FIXTURES}/ops`).filter((f) => f.endsWith('.tandem')).map((f) => f.slice(0, -7)))];
  const first = new Map();
  for (const n of names.sort()) {
    const fam = n.replace(/-\d+$/, '');
    if (!first.has(fam)) first.set(fam, n);
  }
  const res = await page.evaluate((ns) => window.gpuOps(ns), [...first.values()]);
  const ran = res.filter((r) => r.device === 'webgpu');
  const failures = [];
  // WGSL lets a GPU flush float32 subnormals to zero (SwiftShader does): these two cases feed or
  // produce subnormals on purpose, so they differ from the wasm kernels' IEEE results
  const SUBNORMAL = new Set(['exp_denormal', 'exp_underflows']);
  for (const r of ran.filter((x) => !SUBNORMAL.has(x.name.replace(/-\d+$/, '')))) {
    try {
      assert.equal(r.error, null, `${r.name}: ${r.error}`);
      assert.equal(r.got.length, r.want.length);
      r.got.forEach((g, k) => near(g, r.want[k], `${r.name} output ${k}`));
    } catch (e) {
      failures.push(e.message.split('\n')[0]);
    }
  }
  assert.deepEqual(failures, []);
  for (const r of res.filter((x) => x.device === 'wasm')) assert.match(r.reason, /ops without a WebGPU kernel: /, r.name);
  console.log(`# op cases on WebGPU: ${ran.length} of ${res.length}; on wasm (no kernel): ` +
    `${res.filter((r) => r.device === 'wasm').map((r) => r.name).join(' ')}`);
  // the families this slice covers must all be among those that ran
  const must = ['add-0', 'matmul', 'linear', 'softmax', 'layer_norm', 'rms_norm_plain', 'embedding', 'index_put', 'cat', 'expand',
    'permute', 'sum', 'sdpa', 'sdpa_causal', 'sdpa_gqa', 'conv1d', 'slice_scatter', 'where', 'gelu'];
  const gotNames = new Set(ran.map((r) => r.name.replace(/-\d+$/, '')));
  for (const m of must) assert.ok(gotNames.has(m.replace(/-\d+$/, '')), `${m} did not run on WebGPU`);
});

for (const name of ['transformer', 'streaming_conv']) {
  test(`${name} on WebGPU equals eager over its call sequence`, { timeout: 600000 }, async () => {
    const { spec } = fixture(name);
    const r = await page.evaluate((n) => window.gpuCase(n, 'webgpu'), name);
    assert.equal(r.device, 'webgpu');
    assert.equal(r.outs.length, spec.calls.length);
    r.outs.forEach((outs, i) => outs.forEach((o, k) => near(o, spec.calls[i].outputs[k],
      `call ${i} (${spec.calls[i].method}) output ${k}`)));
  });

  test(`${name} on WebGPU: saveState/loadState, fork, readState, writeState, resetState`, { timeout: 600000 }, async () => {
    const { spec } = fixture(name);
    const k = 3;
    const r = await page.evaluate(([n, kk]) => window.gpuState(n, kk), [name, k]);
    r.a.forEach((o, j) => near(o, r.c[j], `call ${k} vs wasm`));
    assert.deepEqual(r.f, r.a, 'the fork (copied state) gives the same bits');
    assert.deepEqual(r.b, r.a, 'after loadState the call gives the same bits');
    r.states.forEach(([g, c], j) => near(g, c, `state ${j} vs wasm`));
    if (r.val) assert.deepEqual(r.written.data, r.val);
    r.reset.forEach((o, j) => near(o, spec.calls[0].outputs[j], 'first call after resetState vs eager'));
    assert.equal(r.bad, 'TDM_ERR_INVALID_ARGUMENT');
  });
}

// more model fixtures (pooling, the codec's transposed convolutions, an LSTM's state) over their call sequences
for (const name of ['cnn', 'codec', 'lstm']) {
  test(`${name} on WebGPU equals eager over its call sequence`, { timeout: 600000 }, async () => {
    const { spec } = fixture(name);
    const r = await page.evaluate((n) => window.gpuCase(n, 'webgpu'), name);
    assert.equal(r.device, 'webgpu');
    r.outs.forEach((outs, i) => outs.forEach((o, k) => near(o, spec.calls[i].outputs[k],
      `call ${i} (${spec.calls[i].method}) output ${k}`)));
  });
}

// the causal-LM recipe's models (tests/fixtures/make.py): against eager where the fixture has it,
// else against the wasm backend in the same page
for (const name of ['hf_llama', 'hf_mamba']) {
  test(`${name} on WebGPU: prefill, greedy generation, decode_topk, save/restore, fork, a refused decode`, { timeout: 600000 },
    async () => {
      const { spec } = fixture(name);
      const r = await page.evaluate((n) => window.gpuLM(n), name);
      assert.equal(r.device, 'webgpu');
      for (const n of Object.keys(spec.logits ?? {})) {
        near(r.prefill[n], { ...spec.logits[n], shape: [1, spec.logits[n].shape.at(-1)] }, `prefill of ${n} vs eager`);
        near(r.prefill[n], r.cpuPrefill[n], `prefill of ${n} vs wasm`);
      }
      if (spec.greedy) {
        assert.deepEqual(r.greedy.slice(0, spec.greedy.length), spec.greedy, 'greedy tokens');
        if (spec.reason) assert.equal(r.reason, spec.reason);
      }
      r.decode.forEach((o, k) => near(o, r.cpuDecode[k], `decode output ${k} vs wasm`));
      assert.ok(r.restored, 'after loadState the decode gives the same bits');
      assert.ok(r.forked, 'the fork (copied state) gives the same bits');
      if (r.topk) {
        near(r.topk[0], r.cpuTopk[0], 'decode_topk values');
        assert.deepEqual(r.topk[1], r.cpuTopk[1], 'decode_topk ids');
      }
      if (r.refused !== undefined) {
        assert.equal(r.refused, 'TDM_ERR_INDEX');
        assert.ok(r.unchanged, 'the refused decode left the state as it was');
      }
    });
}

// the same Llama with int8 and int4 weights (dequantized in the WebGPU kernels; matmul_q8's and
// matmul_q4's integer paths quantize the activations as wasm does): against the wasm backend, over the
// same calls. int4's logits within 5e-3 of their scale, not 1e-3: an activation that the GPU's float
// ops (rsqrt, exp) leave an ulp away from wasm's can round to the next int8 code, which moves a
// product by s_g (max |a| / 127 of its group) times a 4-bit weight, through every layer after it
for (const q of ['int8', 'int4']) {
  const tol = q === 'int4' ? 5e-3 : 1e-3;
  test(`hf_llama_${q} on WebGPU equals wasm: prefill, decode, decode_topk, save/restore, fork, a refused decode`,
    { timeout: 600000 }, async () => {
      const { spec } = fixture('hf_llama');
      const r = await page.evaluate(([n, s]) => window.gpuLM(n, s), [`hf_llama_${q}`, 'hf_llama']);
      assert.equal(r.device, 'webgpu');
      for (const n of Object.keys(spec.logits)) near(r.prefill[n], r.cpuPrefill[n], `prefill of ${n} vs wasm`, tol);
      r.decode.forEach((o, k) => near(o, r.cpuDecode[k], `decode output ${k} vs wasm`, tol));
      assert.ok(r.restored, 'after loadState the decode gives the same bits');
      assert.ok(r.forked, 'the fork (copied state) gives the same bits');
      near(r.topk[0], r.cpuTopk[0], 'decode_topk values');
      assert.deepEqual(r.topk[1], r.cpuTopk[1], 'decode_topk ids');
      assert.equal(r.refused, 'TDM_ERR_INDEX');
      assert.ok(r.unchanged, 'the refused decode left the state as it was');
    });
}

test('hf_whisper on WebGPU: encode, decodes, new audio, decodes, reset: every step equals eager', { timeout: 600000 }, async () => {
  const { spec } = fixture('hf_whisper');
  const r = await page.evaluate(() => window.gpuSeq2seq('hf_whisper'));
  assert.equal(r.device, 'webgpu');
  for (const [run, i, o] of r.outs) near(o, spec.runs[run].logits[i], `audio ${run} token ${i}`);
});

test('constants above the adapter\'s storage binding limit are split into buffers (hf_llama under a 64 KiB limit)',
  { timeout: 600000 }, async () => {
    const { path, spec } = fixture('hf_llama');
    assert.ok(statSync(path).size > 65536, 'the constants need more than one buffer');
    const r = await page.evaluate((n) => window.gpuSplit(n), 65536);
    assert.equal(r.device, 'webgpu', r.reason);
    for (const n of Object.keys(spec.logits)) near(r.prefill[n], { ...spec.logits[n], shape: [1, 64] }, `prefill of ${n}`);
    // one op's constants above the limit: 'auto' falls back to wasm and says so
    const small = await page.evaluate((n) => window.gpuSplit(n), 4096);
    assert.equal(small.device, 'wasm');
    assert.match(small.reason, /storage|limit/);
  });

test('a branch going the other way (guard) is TDM_ERR_GUARD on WebGPU and the state is unchanged', async () => {
  const r = await page.evaluate(() => window.gpuGuard());
  assert.equal(r.device, 'webgpu');
  assert.deepEqual(r.y.data, [-1, -3, -5]);
  assert.equal(r.err?.code, 'TDM_ERR_GUARD');
  assert.match(r.err.message, /other way/);
  assert.ok(r.unchanged, 'the state after the refused call is the state before it');
  assert.deepEqual(r.z.data, [-3, -7, -11]);
});

test('a lost device (device.destroy()) rejects calls and state reads with TDM_ERR_DEVICE_LOST; a state saved before it '
  + 'carries on elsewhere', { timeout: 600000 }, async () => {
  const r = await page.evaluate(() => window.gpuLoss());
  assert.deepEqual([r.inFlight, r.later, r.save, r.read], Array(4).fill('TDM_ERR_DEVICE_LOST'));
  // the saved state (written by WebGPU's kernels), loaded on wasm, decodes as a model run on wasm throughout
  near(r.restored, r.reference, 'decode after loadState of the state saved before the loss');
});

// tests/js/backend-checks.js: the checks wasm on this thread and in a worker pass in Node
// (tests/js/backends.test.js), here on WebGPU and, in the same page, on wasm
test('backend checks: WebGPU passes the checks every backend passes (and wasm in the same page)', async () => {
  const { spec } = fixture('accumulator');
  const run = (options, expect) => page.evaluate(async ([calls, opts, exp]) => {
    const { backendChecks } = await import('/tests/js/backend-checks.js');
    const { load, Tensor } = await import('/web/tandem.js');
    const source = '/build/fixtures/accumulator.tandem';
    try {
      return { ran: await backendChecks({ load, Tensor, source, options: opts, calls, expect: exp }) };
    } catch (e) {
      return { error: e.message };
    }
  }, [spec.calls, options, expect]);
  const gpu = await run({ device: 'webgpu' }, { device: 'webgpu', profile: false });
  assert.equal(gpu.error, undefined);
  const wasm = await run({ threads: 1 }, { device: 'wasm', profile: true });
  assert.equal(wasm.error, undefined);
  assert.deepEqual(gpu.ran, wasm.ran);
  assert.equal(gpu.ran.length, 10);
});

test("device 'auto' runs a program with an op without a kernel on wasm and says why", async () => {
  const { spec } = fixture('gpu_fallback');
  const r = await page.evaluate(() => window.gpuCase('gpu_fallback', 'auto'));
  assert.equal(r.device, 'wasm');
  assert.match(r.deviceReason, /ops without a WebGPU kernel: .*isnan/);
  r.outs.forEach((outs, i) => outs.forEach((o, k) => near(o, spec.calls[i].outputs[k], `call ${i}`)));
});

test("device 'webgpu' starts no wasm thread pool unless threads are asked for (its methods run on the GPU)", async () => {
  const gpu = await page.evaluate(() => window.workersFor('transformer', { device: 'webgpu' }));
  assert.equal(gpu.device, 'webgpu');
  assert.equal(gpu.made, 0);
  const asked = await page.evaluate(() => window.workersFor('transformer', { device: 'webgpu', threads: 2 }));
  assert.equal(asked.made, 1, 'threads: 2 asked for: one worker beside the calling thread');
  const wasm = await page.evaluate(() => window.workersFor('transformer', {}));
  assert.ok(wasm.isolated, 'the page is cross-origin isolated (scripts/serve.mjs)');
  assert.equal(wasm.made, Math.min(4, wasm.cores) - 1, 'device wasm: the default pool');
});

test("device 'webgpu' refuses such a program with TDM_ERR_DEVICE naming the ops", async () => {
  const e = await page.evaluate(() => window.gpuRefuses('gpu_fallback'));
  assert.equal(e.code, 'TDM_ERR_DEVICE');
  assert.equal(e.name, 'TandemError');
  assert.match(e.message, /isnan/);
});

test('out of GPU memory (simulated) at load, for a call, a state read and a fork: TDM_ERR_OUT_OF_MEMORY, nothing half-done',
  { timeout: 600000 }, async () => {
    const r = await page.evaluate(() => window.gpuOom());
    assert.equal(r.load?.code, 'TDM_ERR_OUT_OF_MEMORY', JSON.stringify(r.load));
    assert.match(r.load.message, /constants .* and the state and scratch/);
    assert.equal(r.auto.device, 'wasm');
    assert.match(r.auto.reason, /out of GPU memory/);
    assert.equal(r.call?.code, 'TDM_ERR_OUT_OF_MEMORY');
    assert.match(r.call.message, /method 'decode'.*nothing ran, the state is unchanged/);
    assert.equal(r.read?.code, 'TDM_ERR_OUT_OF_MEMORY');
    assert.ok(r.unchangedAfterCall, 'the refused call left the state as it was');
    assert.equal(r.fork?.code, 'TDM_ERR_OUT_OF_MEMORY');
    assert.match(r.fork.message, /fork\(\)/);
    assert.ok(r.unchangedAfterFork, 'the refused fork left the state as it was');
    near(r.next, r.cpuNext, 'the decode after the refused calls vs wasm');
  });

test('state and scratch above the adapter\'s maxStorageBufferBindingSize or maxBufferSize: TDM_ERR_DEVICE_LIMIT naming both; '
  + "'auto' runs on wasm and says why; requiredLimits the adapter lacks: TDM_ERR_DEVICE_LIMIT", { timeout: 600000 }, async () => {
  for (const [name, limit] of [['hf_llama', 4096], ['streaming_conv', 64]]) {
    const r = await page.evaluate(([n, l]) => window.gpuLimits(n, l), [name, { maxStorageBufferBindingSize: limit }]);
    assert.ok(r.stateBytes + r.scratchBytes > limit, `${name}: the state and scratch need more than the limit`);
    assert.equal(r.strict?.code, 'TDM_ERR_DEVICE_LIMIT', `${name}: ${JSON.stringify(r.strict)}`);
    assert.ok(r.strict.message.includes(`above this adapter's maxStorageBufferBindingSize (${limit} bytes)`), r.strict.message);
    assert.match(r.strict.message, /the state and scratch buffer \(state \d+ bytes, scratch \d+ bytes/);
    assert.equal(r.device, 'wasm');
    assert.match(r.reason, /maxStorageBufferBindingSize/);
  }
  const b = await page.evaluate(([n, l]) => window.gpuLimits(n, l), ['hf_llama', { maxBufferSize: 4096 }]);
  assert.equal(b.strict?.code, 'TDM_ERR_DEVICE_LIMIT');
  assert.match(b.strict.message, /state and scratch buffer .* maxBufferSize \(4096 bytes\)/);
  // an adapter claiming more than the device can have: requestDevice refuses the requiredLimits
  const big = await page.evaluate(([n, l]) => window.gpuLimits(n, l), ['streaming_conv', { maxStorageBufferBindingSize: 2 ** 50 }]);
  assert.equal(big.strict?.code, 'TDM_ERR_DEVICE_LIMIT', JSON.stringify(big.strict));
  assert.match(big.strict.message, /requiredLimits/);
  assert.equal(big.device, 'wasm');
});

// the tiled matmul (web/webgpu/gemm.js) for more than one row, its tile side from the adapter's
// limits: 16 (256 threads), 8 (64 threads), 4 (128 bytes of workgroup storage), none (the map kernel)
const TILES = [[{}, 256], [{ maxComputeInvocationsPerWorkgroup: 64 }, 64], [{ maxComputeWorkgroupStorageSize: 128 }, 16],
  [{ maxComputeWorkgroupStorageSize: 64 }, 0]];

test('tiled matmul: gemm_tiles (M, N, K of 37, 45, 70, 21, 33, 19...) equals eager at every tile side', { timeout: 600000 }, async () => {
  const { spec } = fixture('gemm_tiles');
  for (const [limits, wg] of TILES) {
    const { r, gemm } = await page.evaluate(([l]) => window.withLimits(l, 'gpuCase', 'gemm_tiles', 'webgpu'), [limits]);
    assert.equal(r.device, 'webgpu');
    if (wg) assert.ok(gemm.length >= 2 && gemm.every((w) => w === wg), `tiled kernels of ${wg} threads: ${gemm}`);
    else assert.deepEqual(gemm, [], 'no tile fits: the map kernel');
    const where = (i, k) => `${JSON.stringify(limits)} call ${i} output ${k}`;
    r.outs.forEach((outs, i) => outs.forEach((o, k) => near(o, spec.calls[i].outputs[k], where(i, k))));
  }
});

test('tiled matmul and conv: every matmul/linear/addmm/bmm/conv op case equals wasm at tile sides 16 and 4', { timeout: 600000 },
  async () => {
    const products = /^(matmul|linear|addmm|bmm|conv(?!_transpose))[-_\d].*\.tandem$/;
    const names = [...new Set(readdirSync(`${FIXTURES}/ops`).filter((f) => products.test(f))
      .map((f) => f.slice(0, -7)))].filter((n) => !/int|_q8|_bf16|_i16/.test(n)); // conv_q8_*, _bf16_*, _i16_*: not tiled
    assert.ok(names.length >= 50, names.join(' '));
    for (const [limits, wg] of [TILES[0], TILES[2]]) {
      const { r, gemm } = await page.evaluate(([l, ns]) => window.withLimits(l, 'gpuOps', ns), [limits, names]);
      assert.ok(gemm.length > 0 && gemm.every((w) => w === wg), `tiled kernels: ${gemm}`);
      for (const c of r) {
        assert.equal(c.device, 'webgpu', c.name);
        assert.equal(c.error, null, c.name);
        c.got.forEach((g, k) => near(g, c.want[k], `${c.name} output ${k} (${wg} threads)`));
      }
    }
  });

// int8 takes the activation-quantizing kernel for any rows with K <= 8192, as wasm does (int8_linear_40x24_m12 there);
// the dequantizing tiles for int4 rows > 1 and int8 with K > 8192 (int8_linear_8195x5_m3)
test('tiled int8/int4 matmul: every quantized op case equals wasm at tile sides 16 and 4 (int4 rows > 1, int8 K > 8192 tiled)',
  { timeout: 600000 }, async () => {
    const names = [...new Set(readdirSync(`${FIXTURES}/ops`).filter((f) => /^int[48]_.*\.tandem$/.test(f)).map((f) => f.slice(0, -7)))];
    assert.ok(names.length >= 20 && names.some((n) => /_m[2-9]$/.test(n)) && names.includes('int8_linear_8195x5_m3'), names.join(' '));
    for (const [limits, wg] of [TILES[0], TILES[2]]) {
      const { r, gemm, gemmQ } = await page.evaluate(([l, ns]) => window.withLimits(l, 'gpuOps', ns), [limits, names]);
      assert.ok(gemm.length >= 2 && gemm.every((w) => w === wg), `tiled kernels: ${gemm}`);
      assert.ok(gemmQ[0] >= 1 && gemmQ[1] >= 1, `tiled int8 / int4 kernels: ${gemmQ}`);
      for (const c of r) {
        assert.equal(c.device, 'webgpu', c.name);
        assert.equal(c.error, null, c.name);
        c.got.forEach((g, k) => near(g, c.want[k], `${c.name} output ${k} (${wg} threads)`));
      }
    }
  });

test('tiled conv (implicit GEMM): streaming_conv, cnn and codec at tile side 4 equal eager over their call sequences',
  { timeout: 600000 }, async () => {
    for (const name of ['streaming_conv', 'cnn', 'codec']) {
      const { spec } = fixture(name);
      const { r, gemm } = await page.evaluate(([l, n]) => window.withLimits(l, 'gpuCase', n, 'webgpu'), [TILES[2][0], name]);
      assert.equal(r.device, 'webgpu');
      if (name !== 'codec') assert.ok(gemm.length > 0 && gemm.every((w) => w === 16), `${name}: tiled kernels ${gemm}`);
      r.outs.forEach((outs, i) => outs.forEach((o, k) => near(o, spec.calls[i].outputs[k], `${name} call ${i} output ${k}`)));
    }
  });

test('tiled matmul: the Llama prefill (several rows through the packed linear layers) at tile side 4 equals eager and wasm',
  { timeout: 600000 }, async () => {
    const { spec } = fixture('hf_llama');
    const { r, gemm } = await page.evaluate(([l]) => window.withLimits(l, 'gpuLM', 'hf_llama'), [TILES[2][0]]);
    assert.equal(r.device, 'webgpu');
    assert.ok(gemm.length > 0 && gemm.every((w) => w === 16), `tiled kernels: ${gemm}`);
    for (const n of Object.keys(spec.logits)) {
      near(r.prefill[n], { ...spec.logits[n], shape: [1, spec.logits[n].shape.at(-1)] }, `prefill of ${n} vs eager`);
      near(r.prefill[n], r.cpuPrefill[n], `prefill of ${n} vs wasm`);
    }
    r.decode.forEach((o, k) => near(o, r.cpuDecode[k], `decode output ${k} vs wasm`));
  });

// gpuWeights: 'float16' (web/webgpu/half.js): the weight matrices as float16 in GPU memory, float32
// math. SwiftShader has no 'shader-f16' feature; the kernels need none (unpack2x16float is core WGSL).
// Tolerance: 1e-2 of each output's largest |value| (float16 keeps 11 significant bits: 2^-12 relative
// per weight, summed over K); the largest error seen is printed.
/** The largest |got - want| over want's largest |value|. */
const relErr = (got, want) => {
  const scale = Math.max(1e-6, ...want.data.map(num).map(Math.abs));
  return Math.max(...got.data.map((g, i) => Math.abs(num(g) - num(want.data[i])))) / scale;
};

test("gpuWeights: 'float16' keeps the weights as float16 on WebGPU: gemm_tiles and the Llama within 1e-2 of eager and wasm",
  { timeout: 600000 }, async () => {
    const { spec } = fixture('gemm_tiles');
    const { r, half } = await page.evaluate(() => window.withLimits({}, 'gpuCase', 'gemm_tiles', 'webgpu', { gpuWeights: 'float16' }));
    assert.equal(r.device, 'webgpu');
    assert.ok(half > 0, 'a kernel read float16 weights');
    let worst = 0, linear = 0;
    r.outs.forEach((outs, i) => outs.forEach((o, k) => {
      const e = relErr(o, spec.calls[i].outputs[k]);
      assert.ok(e <= 1e-2, `call ${i} output ${k}: ${e}`);
      worst = Math.max(worst, e);
      if (k === 0) linear = Math.max(linear, e);
    }));
    assert.ok(linear > 1e-6, `the linear layer's weights were rounded to float16 (error ${linear})`);
    const lm = await page.evaluate(() => window.withLimits({}, 'gpuLM', 'hf_llama', 'hf_llama', { gpuWeights: 'float16' }));
    assert.ok(lm.half > 0);
    const { r: q } = lm;
    for (const n of Object.keys(q.prefill)) {
      const e = Math.max(relErr(q.prefill[n], q.cpuPrefill[n]), relErr(q.prefill[n], { ...fixture('hf_llama').spec.logits[n] }));
      assert.ok(e <= 1e-2, `prefill of ${n}: ${e}`);
      worst = Math.max(worst, e);
    }
    q.decode.forEach((o, k) => assert.ok(relErr(o, q.cpuDecode[k]) <= 1e-2, `decode output ${k}`));
    assert.ok(q.restored && q.forked, 'save/restore and fork give the same bits');
    assert.equal(q.refused, 'TDM_ERR_INDEX');
    assert.ok(q.unchanged);
    const bytes = await page.evaluate(async () => [await window.gpuBytes('hf_llama', {}),
      await window.gpuBytes('hf_llama', { gpuWeights: 'float16' })]);
    assert.ok(bytes[1] < bytes[0], `float16 weights take fewer GPU bytes: ${bytes}`);
    console.log(`# float16 weights: largest error ${worst.toExponential(2)} of the largest |value|; hf_llama's GPU buffers at load: `
      + `${bytes[0]} bytes with float32 weights, ${bytes[1]} with float16`);
  });
