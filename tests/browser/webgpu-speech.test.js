// Kyutai's speech pipeline on WebGPU (SwiftShader in headless Chromium: correctness, never timing),
// its state resident on the GPU between calls: the small STT step (Mimi's streaming encode of an 80 ms
// frame + moshi's LMGen.step, tests/fixtures/make.py's stt) and Mimi's encode and decode steps, float32,
// int8 and int4 weights, over frames with the program's reset between them, against the wasm backend in
// the same page (and the float32 STT's tokens against moshi's eager streaming); and methods exported in
// versions (Python ints or bools they branch on: the `when` / `when_in` ops, one per value), the version
// picked from the state on the GPU.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { FIXTURES, fixture } from '../js/helpers.js';
import { near, page, openWebgpuPage } from './webgpu-near.js';

openWebgpuPage();

const STEERED = { delayed: 'a Python int', python_values: 'a Python bool', periods: 'two Python ints' };
for (const [name, what] of Object.entries(STEERED)) {
  test(`${name} (versions on ${what}) on WebGPU equals eager over its call sequence`,
    { timeout: 600000 }, async () => {
      const { spec } = fixture(name);
      const r = await page.evaluate((n) => window.gpuCase(n, 'webgpu'), name);
      assert.equal(r.device, 'webgpu');
      assert.equal(r.outs.length, spec.calls.length);
      r.outs.forEach((outs, i) => {
        assert.equal(outs.length, spec.calls[i].outputs.length, `call ${i}: outputs (none where the version returns None)`);
        outs.forEach((o, k) => near(o, spec.calls[i].outputs[k], `call ${i} (${spec.calls[i].method}) output ${k}`));
      });
    });
}

test('a state no version was exported for (a bool written as 5) is TDM_ERR_GUARD on WebGPU as on wasm, the state unchanged',
  { timeout: 600000 }, async () => {
    for (const device of ['webgpu', 'wasm']) {
      const r = await page.evaluate((d) => window.gpuVersionRefused('python_values', d, 'first', 5), device);
      assert.equal(r.device, device);
      assert.equal(r.code?.code, 'TDM_ERR_GUARD', device);
      assert.match(r.code.message, /finds 5/, device);
      assert.ok(r.unchanged, `${device}: the refused call left the state as it was`);
    }
  });

// 7 frames, the reset after 5 of them, then the first 2 again
const FRAMES = 7, RESET_AT = 5;
const again = (i) => (i < RESET_AT ? i : i - RESET_AT);

// The STT's text tokens equal wasm's, and at float32 moshi's eager ones. Tokens are argmaxes: the float
// paths of the GPU and wasm differ by float32 rounding, which moves no argmax of these frames (a
// difference would show as a different token, never hidden by a tolerance).
for (const q of ['', '_int8', '_int4']) {
  test(`stt${q}: the STT step on WebGPU gives wasm's tokens over ${FRAMES} frames with a reset${q ? '' : ', and eager\'s'}`,
    { timeout: 600000 }, async () => {
      const r = await page.evaluate(([n, f, k]) => window.gpuSpeech(n, f, k), [`stt${q}`, FRAMES, RESET_AT]);
      assert.equal(r.device, 'webgpu');
      const tok = (outs) => outs.map(([t]) => { assert.deepEqual(t.shape, [1, 1, 1]); return Number(t.data[0]); });
      const got = tok(r.gpu), want = tok(r.cpu);
      assert.deepEqual(got, want, 'tokens vs wasm');
      assert.deepEqual(got.slice(RESET_AT), got.slice(0, FRAMES - RESET_AT), 'after the reset, the first frames\' tokens again');
      if (!q) assert.deepEqual(got, Array.from({ length: FRAMES }, (_, i) => fixture('stt').spec.tokens[again(i)]), 'tokens vs eager');
      assert.ok(new Set(got).size > 2, `degenerate tokens prove little: ${got}`);
    });
}

// Mimi: each frame's codes equal wasm's (argmins over the codebooks, exact), and decode_step's audio
// from wasm's codes within 1e-3 of the largest |sample| at float32 and int8 (the integer dot products of
// matmul_q8, and with int8convs conv_q8's and conv_transpose_q8's int16 rows, as wasm's), 5e-3 at int4: an
// activation the GPU's float ops leave an ulp away from wasm's can round to the next int8 code before
// matmul_q4's integer dot, which moves a product by that group's max |a| / 127 times a 4-bit weight,
// through the transformer's layers after it (as the int4 Llama's test). int8bf16 (conv_bf16: the wasm
// kernels' summation order) within 1e-3; int8i16 within 5e-3: conv_i16's codes come from a division that
// WGSL gives within 2.5 ulp, so a code at a near tie can take its neighbour (1/4095 of its block's largest
// value), through the decoder's convs after it.
for (const q of ['', '_int8', '_int4', '_int8convs', '_int8bf16', '_int8i16']) {
  const tol = q === '_int4' || q === '_int8i16' ? 5e-3 : 1e-3;
  test(`mimi${q}: Mimi's encode and decode steps on WebGPU equal wasm over ${FRAMES} frames with a reset`, { timeout: 600000 },
    async () => {
      const r = await page.evaluate(([n, f, k]) => window.gpuSpeech(n, f, k), [`mimi${q}`, FRAMES, RESET_AT]);
      assert.equal(r.device, 'webgpu');
      r.gpu.forEach(([codes, pcm], i) => {
        near(codes, r.cpu[i][0], `frame ${i} codes`);
        near(pcm, r.cpu[i][1], `frame ${i} audio`, tol);
      });
      for (let i = RESET_AT; i < FRAMES; i++) near(r.gpu[i][0], r.gpu[again(i)][0], `frame ${i} codes after the reset`);
      assert.ok(new Set(r.gpu.flatMap(([c]) => c.data)).size > 8, 'the codes vary');
      if (q) { // the op names are in the file's string table
        const bytes = readFileSync(`${FIXTURES}/mimi${q}.tandem`);
        const ops = { _int8convs: ['conv_q8', 'conv_transpose_q8'], _int8bf16: ['conv_bf16', 'conv_transpose_bf16'],
          _int8i16: ['conv_transpose_i16', 'conv_bf16'] }[q] ?? [`matmul_q${q.at(4)}`]; // conv_i16: none this narrow (op cases)
        for (const op of ops) {
          assert.ok(bytes.includes(op), `mimi${q} has ${op}`);
        }
      }
    });
}
