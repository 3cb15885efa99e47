// The demo page in headless Chromium: generate greedily, reset and get the same text again, save
// the state, reload the page, restore it and continue as if nothing happened. The text is what
// generate() gives in Node for the same prompt. Saves a screenshot.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { launch } from './chromium.js';
import { serve } from '../../scripts/serve.mjs';
import { ROOT } from '../js/helpers.js';
import { load, generate } from '../../node/index.js';

let server, browser, page;
const ARTIFACTS = `${ROOT}build/test-artifacts`;

before(async () => {
  server = await serve();
  browser = await launch();
  page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
});

after(async () => {
  await browser?.close();
  await server?.close();
});

async function open() {
  await page.goto(`${server.url}/`);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
}

/** What generate() gives in Node for the demo's model (greedy unless `sampling` says otherwise):
 * `chars` characters after `prompt`. */
async function inNode(prompt, chars, sampling = {}) {
  const meta = JSON.parse(readFileSync(`${ROOT}demo/model.json`, 'utf8'));
  const lm = await load(`${ROOT}demo/model.tandem`);
  try {
    const ids = Array.from(prompt, (c) => meta.vocab.indexOf(c));
    assert.ok(ids.every((i) => i >= 0), 'the prompt is in the vocabulary');
    let text = '';
    for await (const id of generate(lm, ids,
      { maxCacheLen: meta.capacity, positionState: 'pos', maxTokens: chars, ...sampling })) text += meta.vocab[id];
    return text;
  } finally {
    lm.dispose();
  }
}

async function generateOnPage(chars, { seed } = {}) {
  await page.fill('#max-chars', String(chars));
  if (seed === undefined) {
    await page.check('#greedy');
  } else {
    await page.uncheck('#greedy');
    await page.fill('#seed', String(seed));
  }
  const before = (await page.textContent('#output')).length;
  await page.click('#generate');
  await page.waitForSelector('body[data-busy="0"]', { timeout: 60000 });
  const text = await page.textContent('#output');
  return text.slice(before);
}

test('the demo generates, resets, saves, reloads and restores', async () => {
  await open();
  assert.match(await page.textContent('#capacity'), /^\d+$/);
  assert.ok(Number((await page.textContent('#state-bytes')).replace(/,/g, '')) > 0);
  assert.match(await page.textContent('#load-time'), /\d+ ms/);
  const cores = await page.evaluate(() => navigator.hardwareConcurrency);
  assert.equal(await page.textContent('#threads'), String(Math.min(4, cores)),
    'served cross-origin isolated (as npm start does), the model runs on the cores');

  const prompt = await page.inputValue('#prompt');
  const first = await generateOnPage(50);
  assert.ok(first.startsWith(prompt), 'the prompt is shown first');
  const generated = first.slice(prompt.length);
  assert.equal(generated.length, 50, 'fifty characters appear');
  const node = await inNode(prompt, 70);
  assert.equal(generated, node.slice(0, 50), "the page's text is generate()'s");
  assert.ok(Number(await page.textContent('#tps')) > 0, 'tokens per second is positive');
  const positions = Number(await page.textContent('#positions'));
  assert.equal(positions, prompt.length + 50);

  await page.click('#reset');
  await page.waitForFunction(() => document.getElementById('positions').textContent === '0');
  assert.equal(await page.textContent('#output'), '');
  const again = await generateOnPage(50);
  assert.equal(again, first, 'after reset(), the same prompt gives the same text');

  await page.click('#save');
  await page.waitForFunction(() => /Saved \d+ bytes/.test(document.getElementById('message').textContent));
  const continued = await generateOnPage(20); // what continuing gives, without a reload
  assert.equal(continued, node.slice(50, 70), 'continuing gives what one longer generate() run does');

  await page.reload();
  await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
  assert.equal(await page.textContent('#positions'), '0', 'a fresh page starts empty');
  await page.click('#restore');
  await page.waitForFunction(() => /Restored/.test(document.getElementById('message').textContent));
  assert.equal(Number(await page.textContent('#positions')), positions);
  assert.equal(await page.textContent('#output'), first);
  const afterReload = await generateOnPage(20);
  assert.equal(afterReload, continued, 'the restored conversation continues exactly as before');

  // sampling at the page's temperature with a seed: generate()'s sampler, as in Node
  await page.click('#reset');
  await page.waitForFunction(() => document.getElementById('positions').textContent === '0');
  const temperature = Number(await page.inputValue('#temperature'));
  const sampled = (await generateOnPage(40, { seed: 42 })).slice(prompt.length);
  assert.equal(sampled, await inNode(prompt, 40, { temperature, seed: 42 }), 'seeded sampling on the page is generate()\'s');
  assert.notEqual(sampled, generated.slice(0, 40), 'sampled, not greedy');

  // the shared-state panel: forward1 adds, forward2 clears
  await page.fill('#shared-x', '2');
  await page.click('#forward1');
  await page.waitForFunction(() => document.getElementById('shared-v').textContent === '3');
  await page.click('#forward2');
  await page.waitForFunction(() => document.getElementById('shared-v').textContent === '0');

  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: `${ARTIFACTS}/demo.png`, fullPage: true });
});
