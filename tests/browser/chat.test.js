// The chat page (demo/chat.html) in headless Chromium: type a message, send it, and the reply is the
// text generate() gives in Node for the same conversation from the same file (chat template applied,
// greedy, the same token budget); a second turn continues the conversation the same way. The file
// is build/demo/chat.tandem (demo/build_chat.py; npm start and scripts/test.sh build it).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { launch } from './chromium.js';
import { serve } from '../../scripts/serve.mjs';
import { ROOT } from '../js/helpers.js';
import { load, generate } from '../../node/index.js';

const FILE = `${ROOT}build/demo/chat.tandem`;
const ARTIFACTS = `${ROOT}build/test-artifacts`;
let server, browser, page;
const errors = [];

before(async () => {
  assert.ok(existsSync(FILE), `${FILE} is missing: run python demo/build_chat.py build/demo`);
  server = await serve();
  browser = await launch();
  page = await browser.newPage({ viewport: { width: 1000, height: 800 } });
  page.on('pageerror', (e) => errors.push(e));
  page.on('response', (r) => { if (r.status() >= 400 && !r.url().endsWith('/favicon.ico')) errors.push(`${r.status()} ${r.url()}`); });
});

after(async () => {
  await browser?.close();
  await server?.close();
});

/** The reply generate() gives in Node: text pieces joined, greedy, from an empty cache. */
async function inNode(messages, maxTokens) {
  const lm = await load(FILE);
  try {
    let text = '';
    for await (const piece of generate(lm, messages, { temperature: 0, maxTokens }).text()) text += piece;
    return text;
  } finally {
    lm.dispose();
  }
}

async function say(text) {
  const before = await page.locator('.msg.user').count();
  await page.fill('#input', text);
  await page.click('#send');
  await page.waitForFunction((n) => document.querySelectorAll('.msg.user').length > n && document.body.dataset.busy === '0', before,
    { timeout: 60000 });
  assert.equal(await page.locator('.msg.assistant').count(), before + 1, `a reply (status: ${await page.textContent('#status')})`);
  return page.locator('.msg.assistant').nth(before).textContent();
}

test('the chat page replies with what generate() gives in Node for the conversation', async () => {
  await page.goto(`${server.url}/demo/chat.html`);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
  await page.fill('#max-tokens', '20');
  const first = 'Hello, who are you? Ça va? 日本語';
  const reply = await say(first);
  const conversation = [{ role: 'user', content: first }];
  assert.equal(reply, await inNode(conversation, 20));
  assert.ok(reply.length > 0, 'a reply');
  conversation.push({ role: 'assistant', content: reply });
  const second = 'Tell me about the cache.';
  conversation.push({ role: 'user', content: second });
  assert.equal(await say(second), await inNode(conversation, 20));
  assert.match(await page.textContent('#status'), /tokens in .* s \((eos|length)\)/);
  assert.equal(await page.locator('.msg.user').count(), 2);
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: `${ARTIFACTS}/chat.png` });
  assert.deepEqual(errors, []);
});
