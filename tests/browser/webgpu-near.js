// What the WebGPU browser tests (webgpu.test.js, webgpu-speech.test.js) share: their page
// (tests/browser/webgpu.html in headless Chromium with WebGPU) and the comparison of outputs as the
// page returns them ({ dtype, shape, data }, float specials as 'inf' / '-inf' / 'nan' strings).
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, WEBGPU_ARGS } from './chromium.js';
import { serve } from '../../scripts/serve.mjs';

/** The test page, set by openWebgpuPage's `before` (an ES module binding: importers see it once set). */
export let page;

/** Registers the test file's `before` (serve the repository, open tests/browser/webgpu.html, wait for it
 * to be ready with no page error) and `after` (close the browser and the server). */
export function openWebgpuPage() {
  let server, browser;
  before(async () => {
    server = await serve({ index: '/tests/browser/webgpu.html' });
    browser = await launch(WEBGPU_ARGS);
    page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e));
    await page.goto(`${server.url}/tests/browser/webgpu.html`);
    await page.waitForFunction(() => window.testReady === true, null, { timeout: 30000 });
    assert.deepEqual(errors, []);
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });
}

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
