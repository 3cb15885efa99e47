// The tokenizer a file carries, in headless Chromium: the page (tests/browser/page.html) resolves
// @huggingface/tokenizers and @huggingface/jinja through an import map to the repository's
// node_modules (no CDN), and must give transformers' ids, texts and chat templates
// (tests/fixtures/make.py: tok_llama) and its greedy tokens from a text prompt, inline and in a Web Worker.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { launch } from './chromium.js';
import { serve } from '../../scripts/serve.mjs';
import { FIXTURES } from '../js/helpers.js';

const spec = JSON.parse(readFileSync(`${FIXTURES}/tok_llama.json`, 'utf8'));
let server, browser, page;
const errors = [];

before(async () => {
  server = await serve({ index: '/tests/browser/page.html' });
  browser = await launch();
  page = await browser.newPage();
  page.on('pageerror', (e) => errors.push(e));
  await page.goto(`${server.url}/tests/browser/page.html`);
  await page.waitForFunction(() => window.testReady === true, null, { timeout: 30000 });
});

after(async () => {
  await browser?.close();
  await server?.close();
});

for (const options of [{}, { worker: true }, { simd: 'simd128' }]) {
  test(`Chromium ${JSON.stringify(options)}: model.tokenizer and generate() from text equal transformers`, async () => {
    const got = await page.evaluate((o) => window.tokenizerCase(o), options);
    spec.texts.forEach((c, i) => {
      const where = JSON.stringify(c.text);
      assert.deepEqual(got.texts[i].ids, c.ids, `encode(${where})`);
      assert.deepEqual(got.texts[i].ids_no_special, c.ids_no_special, `encode(${where}) without special tokens`);
      assert.equal(got.texts[i].decoded, c.decoded, `decode of ${where}`);
      assert.equal(got.texts[i].decoded_skip, c.decoded_skip, `decode of ${where}, special tokens skipped`);
    });
    spec.chats.forEach((c, i) => {
      assert.equal(got.chats[i].text, c.text, `chat ${i}`);
      assert.deepEqual(got.chats[i].ids, c.ids, `chat ${i}, tokenized`);
    });
    assert.deepEqual(got.tokens, spec.generate.tokens);
    assert.equal(got.pieces.join(''), spec.generate.text);
    assert.deepEqual(got.chatTokens, spec.chat_generate.tokens);
    assert.deepEqual(errors, []);
  });
}
