// The chat page (demo/chat.html) in headless Chromium: type a message, send it, and the reply is the
// text a chat session in Node gives for the same conversation from the same file (the page's
// options: the same sampling seed and token budget); the second turn prefills only what it adds,
// and equals a fresh Node session's reply to the whole conversation; "Again" and "Undo" as in Node.
// The file is demo/chat.tandem (demo/train_chat.py).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { launch } from './chromium.js';
import { serve } from '../../scripts/serve.mjs';
import { ROOT } from '../js/helpers.js';
import { load } from '../../node/index.js';

const FILE = `${ROOT}demo/chat.tandem`;
const OPTIONS = { system: 'You answer with a fortune.', temperature: 0.7, topK: 40, seed: 1 }; // the page's, and its stop
const ARTIFACTS = `${ROOT}build/test-artifacts`;
let server, browser, page;
const errors = [];

before(async () => {
  assert.ok(existsSync(FILE), `${FILE} is missing: run python demo/train_chat.py`);
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

/** The replies a chat session in Node gives with the page's options: `turns` are texts to send,
 * or 'again' / 'undo'. */
async function inNode(turns, maxNewTokens) {
  const lm = await load(FILE);
  try {
    const stop = lm.tokenizer.encode('<|im_start|>', { addSpecialTokens: false });
    const chat = lm.chat({ ...OPTIONS, stop, maxNewTokens });
    const replies = [];
    for (const t of turns) {
      if (t === 'undo') await chat.undo();
      else replies.push(t === 'again' ? await chat.regenerate() : await chat.send(t));
    }
    return { replies, stats: chat.stats };
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

test('the chat page keeps the conversation in the cache and replies as a session in Node does', async () => {
  await page.goto(`${server.url}/demo/chat.html`);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
  await page.fill('#max-tokens', '20');
  const first = 'What do you get when you cross a computer with a dog?';
  const second = 'Tell me a fortune.';
  const replies = [await say(first), await say(second)];
  const node = await inNode([first, second], 20);
  assert.deepEqual(replies, node.replies);
  assert.ok(replies.every((r) => r.length > 0), 'replies');
  assert.match(await page.textContent('#status'), /first token after \d+ ms, [\d.]+ tokens\/s; prefilled \d+ of \d+ tokens/);
  const prefilled = Number((await page.textContent('#status')).match(/prefilled (\d+) of/)[1]);
  assert.equal(prefilled, node.stats.prefillTokens);
  assert.ok(prefilled < node.stats.promptTokens, 'the second turn prefills only part of the conversation');
  // Again: the last reply regenerated (another sample); Undo: the last turn taken back
  await page.click('#again');
  await page.waitForFunction(() => document.body.dataset.busy === '0' && document.querySelectorAll('.msg.assistant').length === 2);
  const again = await page.locator('.msg.assistant').nth(1).textContent();
  assert.equal(again, (await inNode([first, second, 'again'], 20)).replies[2]);
  await page.click('#undo');
  await page.waitForFunction(() => document.querySelectorAll('.msg').length === 2);
  const third = 'Any advice?';
  assert.equal(await say(third), (await inNode([first, second, 'again', 'undo', third], 20)).replies[3]);
  assert.equal(await page.locator('.msg.user').count(), 2);
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: `${ARTIFACTS}/chat.png` });
  assert.deepEqual(errors, []);
});
