// web/webgpu/half.js's float32 -> float16 rounding (gpuWeights: 'float16'), in Node (no GPU needed):
// every float16 value round-trips, and random float32 values go to the nearest float16, ties to even.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { f16bits, f16value } from '../../web/webgpu/half.js';

test('every finite float16 value and infinity round-trips through f16bits', () => {
  for (let h = 0; h < 0x10000; h++) {
    if ((h & 0x7c00) === 0x7c00 && (h & 0x3ff)) {
      assert.ok(Number.isNaN(f16value(f16bits(NaN))));
      continue;
    }
    assert.equal(f16bits(f16value(h)), h === 0x8000 ? 0x8000 : h, `bits ${h.toString(16)}`);
  }
});

test('f16bits rounds to the nearest float16, ties to even, overflow to infinity', () => {
  const f32 = new Float32Array(1);
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
  for (let i = 0; i < 20000; i++) {
    f32[0] = (rnd() - 0.5) * 2 ** Math.floor(rnd() * 44 - 30);
    const x = f32[0], h = f16bits(x), v = f16value(h);
    // no float16 is nearer: check the neighbours of h (same sign)
    for (const n of [h - 1, h + 1]) {
      if ((n & 0x7fff) > 0x7c00 || (n & 0x8000) !== (h & 0x8000) || n < 0) continue;
      const d = Math.abs(f16value(n) - x), dh = Math.abs(v - x);
      assert.ok(dh < d || (dh === d && (h & 1) === 0), `${x}: ${v} (bits ${h}) vs ${f16value(n)}`);
    }
  }
  assert.equal(f16bits(1 + 2 ** -11), 0x3c00, 'a tie goes to the even neighbour (1)');
  assert.equal(f16bits(1 + 3 * 2 ** -11), 0x3c02, 'a tie goes to the even neighbour (1 + 2^-9)');
  assert.equal(f16bits(65520), 0x7c00, 'above the largest float16 (65504) by half an ulp: infinity');
  assert.equal(f16bits(65519), 0x7bff);
  assert.equal(f16bits(-(2 ** -24)), 0x8001, 'the smallest subnormal');
  assert.equal(f16bits(2 ** -25), 0, 'half the smallest subnormal: a tie to zero');
  assert.equal(f16bits(1.5 * 2 ** -25), 1);
});
