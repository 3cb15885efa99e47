// The comparison of the WebGPU browser tests (webgpu.test.js, webgpu-speech.test.js): outputs as the
// page returns them ({ dtype, shape, data }, float specials as 'inf' / '-inf' / 'nan' strings).
import assert from 'node:assert/strict';

export const num = (x) => (typeof x === 'string' ? ({ inf: Infinity, '-inf': -Infinity, nan: NaN }[x] ?? Number(x)) : x);

/** got within tol (1e-3) of want's largest |value| (NaN where NaN; exact for integers and bools). */
export function near(got, want, where, tol = 1e-3) {
  assert.equal(got.dtype, want.dtype, `${where}: dtype`);
  assert.deepEqual(got.shape, want.shape, `${where}: shape`);
  if (want.dtype !== 'float32') {
    assert.deepEqual(got.data.map(String), want.data.map(String), `${where}: values`);
    return;
  }
  const w = want.data.map(num), g = got.data.map(num);
  const scale = w.reduce((m, v) => (Number.isFinite(v) && Math.abs(v) > m ? Math.abs(v) : m), 1e-6); // no spread: outputs can be long
  for (let i = 0; i < w.length; i++) {
    if (Number.isNaN(w[i])) assert.ok(Number.isNaN(g[i]), `${where}[${i}]: ${g[i]}, expected NaN`);
    else if (!Number.isFinite(w[i])) assert.equal(g[i], w[i], `${where}[${i}]`);
    else assert.ok(Math.abs(g[i] - w[i]) <= tol * scale, `${where}[${i}]: ${g[i]}, expected ${w[i]} (scale ${scale})`);
  }
}
