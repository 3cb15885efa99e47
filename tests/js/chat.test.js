// model.chat(): a conversation that keeps its KV cache between turns (web/chat.js), on seeded tiny
// Llamas exported by the causal-LM recipe (tests/fixtures/make.py: chat_llama, 384 positions and
// prompts of up to 16 tokens per prefill; tok_llama, 64 positions). Each turn's prefilled tokens are
// counted from the model's own method calls, and every reply is checked against a fresh session on
// a forked model that prefills the same conversation in full (greedy, so the tokens must be equal).
//
// Most cases use a character tokenizer given to the session (CharTokenizer), whose decode and encode
// are inverses for every id, so a reply's text renders back to exactly the ids the cache holds;
// the last case uses the tokenizer and chat template the file carries.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load, Chat, TandemError } from '../../node/index.js';
import { fixture } from './helpers.js';

const BOS = 0, START = 3, END = 4; // the checkpoint's <s>, <|im_start|>, <|im_end|> (its eos_token_id)
const CJK = 0x4e00;

/** Text as ids: a character U+4E00 + i is id i (what decode writes), any other its code point. */
const encode = (text) => Array.from(text, (c) => (c.codePointAt(0) >= CJK ? c.codePointAt(0) - CJK : c.codePointAt(0)));
const CharTokenizer = {
  decode: (ids) => String.fromCodePoint(...Array.from(ids, (i) => CJK + Number(i))),
  /** '<s>' then '<|im_start|>role\ncontent<|im_end|>\n' per message, the checkpoint's template. */
  applyChatTemplate(messages, { addGenerationPrompt = false } = {}) {
    const ids = [BOS];
    for (const m of messages) ids.push(START, ...encode(`${m.role}\n${m.content}`), END, ...encode('\n'));
    if (addGenerationPrompt) ids.push(START, ...encode('assistant\n'));
    return ids;
  },
};

/** Records the methods the model runs and how many tokens each prefill call takes (the model's
 * own calls, forks included: a fork's calls are recorded in the fork's list). */
function spy(m) {
  const calls = [];
  const call = m.call.bind(m);
  m.call = (name, ...args) => {
    calls.push({ name, tokens: args[0]?.shape?.[1] ?? 0 });
    return call(name, ...args);
  };
  const fork = m.fork.bind(m);
  m.fork = async (...a) => {
    const f = await fork(...a);
    f.calls = spy(f);
    return f;
  };
  return calls;
}

const prefilled = (calls) => calls.filter((c) => c.name === 'prefill').reduce((a, c) => a + c.tokens, 0);

/** A fresh session on a fork of `m` (initial state) holding `messages`, sent `text`: the reference. */
async function fresh(m, messages, text, options = {}) {
  const f = await m.fork();
  const c = f.chat({ tokenizer: CharTokenizer, messages, maxNewTokens: 4, ...options });
  const reply = await c.send(text);
  const stats = c.stats;
  assert.equal(prefilled(f.calls), stats.promptTokens, 'the reference prefills the whole conversation');
  assert.equal(stats.restored, 'reset');
  f.dispose();
  return reply;
}

const say = (i) => `q${i}, and?`;

test('a 10-turn conversation prefills only each turn\'s new tokens; turn 10\'s reply equals a fresh full prefill', async () => {
  const m = await load(fixture('chat_llama').path);
  const calls = spy(m);
  const chat = m.chat({ tokenizer: CharTokenizer, system: 'be brief', maxNewTokens: 4 });
  let cached = 0; // positions the cache holds after the last turn
  const perTurn = [];
  for (let i = 1; i <= 10; i++) {
    calls.length = 0;
    const before = chat.messages;
    const reply = await chat.send(say(i));
    const s = chat.stats;
    // what turn i adds to the conversation the cache holds: the end of the last reply, the user's
    // message, the generation prompt
    const prompt = CharTokenizer.applyChatTemplate([...before, { role: 'user', content: say(i) }], { addGenerationPrompt: true });
    const added = prompt.length - cached;
    assert.equal(prefilled(calls), added, `turn ${i}: prefilled tokens`);
    assert.deepEqual([s.promptTokens, s.cachedTokens, s.prefillTokens, s.restored],
      [prompt.length, cached, added, i === 1 ? 'reset' : 'cache']);
    assert.equal(s.droppedMessages, 0);
    assert.equal(s.newTokens, encode(reply).length);
    // a dynamic-length prefill in pieces of at most 16, then one decode step per token fed back
    assert.deepEqual(calls.map((c) => c.name), [...Array(Math.ceil(added / 16)).fill('prefill'),
      ...Array(s.newTokens).fill('decode_topk')]);
    assert.ok(s.ttftMs > 0 && s.totalMs >= s.ttftMs && s.prefillMs > 0, JSON.stringify(s));
    assert.ok(s.newTokens < 2 || s.tokensPerSecond > 0);
    cached = prompt.length + s.newTokens; // every reply token went into the cache (eos does not)
    perTurn.push(added);
  }
  // <|im_end|> \n closing reply 9, <|im_start|> user \n message <|im_end|> \n, <|im_start|> assistant \n
  assert.equal(perTurn[9], 2 + 1 + encode(`user\n${say(10)}`).length + 2 + 1 + encode('assistant\n').length, 'turn 10');
  const history = chat.messages;
  assert.equal(history.length, 21);
  assert.deepEqual(history[0], { role: 'system', content: 'be brief' });
  const reference = await fresh(m, history.slice(0, 19), say(10));
  assert.equal(history[20].content, reference);
  assert.ok(reference.length > 0);
  chat.dispose();
  m.dispose();
});

test('regenerate() starts from the snapshot after the prompt: nothing prefilled; sampled replies differ', async () => {
  const m = await load(fixture('chat_llama').path);
  const calls = spy(m);
  const chat = m.chat({ tokenizer: CharTokenizer, maxNewTokens: 4 });
  for (let i = 1; i <= 3; i++) await chat.send(say(i));
  const first = chat.messages.at(-1).content;
  calls.length = 0;
  const again = await chat.regenerate();
  assert.equal(again, first, 'greedy: the same reply');
  assert.equal(prefilled(calls), 0);
  assert.deepEqual([chat.stats.restored, chat.stats.prefillTokens], ['snapshot', 0]);
  assert.equal(again, await fresh(m, chat.messages.slice(0, 4), say(3)));
  assert.equal(chat.messages.length, 6);

  // sampled: each regenerate() draws again from the session's generator, so the replies differ; a
  // fork (same generator state) that takes the turn back and sends it again draws the same reply
  const sampling = { temperature: 1.5, maxNewTokens: 8 };
  const twin = await chat.fork();
  const a = await chat.regenerate(sampling);
  const b = await chat.regenerate(sampling);
  assert.notEqual(a, b);
  await twin.undo();
  assert.equal(await twin.send(say(3), sampling), a);
  await assert.rejects(m.chat({ tokenizer: CharTokenizer }).regenerate(),
    (e) => e instanceof TandemError && e.code === 'TDM_ERR_INVALID_ARGUMENT' && /does not end with a reply/.test(e.message));
  twin.dispose();
  m.dispose();
});

test('undo() drops the last turn; the next turn prefills from the snapshot where that turn began', async () => {
  const m = await load(fixture('chat_llama').path);
  const calls = spy(m);
  const chat = m.chat({ tokenizer: CharTokenizer, maxNewTokens: 4 });
  for (let i = 1; i <= 3; i++) await chat.send(say(i));
  const kept = chat.messages;
  const cached = CharTokenizer.applyChatTemplate(kept.slice(0, 5), { addGenerationPrompt: true }).length + encode(kept[5].content).length;
  await chat.send(say(4));
  await chat.undo();
  assert.deepEqual(chat.messages, kept);
  calls.length = 0;
  const reply = await chat.send('another question');
  const prompt = CharTokenizer.applyChatTemplate([...kept, { role: 'user', content: 'another question' }], { addGenerationPrompt: true });
  assert.deepEqual([chat.stats.restored, chat.stats.cachedTokens], ['snapshot', cached]);
  assert.equal(prefilled(calls), prompt.length - cached);
  assert.equal(reply, await fresh(m, kept, 'another question'));
  // undo twice, back to the first turn
  await chat.undo();
  await chat.undo();
  await chat.undo();
  assert.deepEqual(chat.messages, kept.slice(0, 2));
  assert.equal(await chat.send(say(9)), await fresh(m, kept.slice(0, 2), say(9)));
  await chat.undo();
  await chat.undo();
  await assert.rejects(chat.undo(), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /no user message/.test(e.message));
  m.dispose();
});

test('fork() branches a conversation: two independent sessions, each prefilling only its new turn', async () => {
  const m = await load(fixture('chat_llama').path);
  spy(m);
  const chat = m.chat({ tokenizer: CharTokenizer, system: 'be brief', maxNewTokens: 4 });
  for (let i = 1; i <= 2; i++) await chat.send(say(i));
  const base = chat.messages;
  const branch = await chat.fork();
  assert.notEqual(branch.model, m);
  const calls = branch.model.calls;
  calls.length = 0;
  const [left, right] = await Promise.all([chat.send('left'), branch.send('right')]);
  assert.equal(chat.stats.restored, 'cache');
  assert.equal(branch.stats.restored, 'cache');
  assert.equal(prefilled(calls), branch.stats.prefillTokens);
  assert.equal(branch.stats.cachedTokens, chat.stats.cachedTokens);
  assert.ok(branch.stats.prefillTokens < branch.stats.promptTokens / 3, JSON.stringify(branch.stats));
  assert.equal(left, await fresh(m, base, 'left'));
  assert.equal(right, await fresh(m, base, 'right'));
  assert.deepEqual(chat.messages.slice(0, 5), base);
  assert.equal(chat.messages[5].content, 'left');
  assert.equal(branch.messages[5].content, 'right');
  branch.dispose();
  await assert.rejects(branch.send('x'), (e) => e.code === 'TDM_ERR_DISPOSED');
  await assert.rejects(branch.model.reset(), (e) => e.code === 'TDM_ERR_DISPOSED');
  assert.equal(await chat.send(say(3)), await fresh(m, chat.messages.slice(0, 7), say(3)));
  m.dispose();
});

test('a full cache drops the oldest turns (the system prompt stays) and prefills the kept text again', async () => {
  const m = await load(fixture('tok_llama').path); // 64 positions
  assert.equal(m.metadata.max_cache_len, 64);
  const calls = spy(m);
  const chat = m.chat({ tokenizer: CharTokenizer, system: 'hi', maxNewTokens: 4 });
  let turn = 0;
  for (; turn < 6 && !chat.stats?.droppedMessages; turn++) {
    calls.length = 0;
    const before = chat.messages;
    const reply = await chat.send(`q${turn}`);
    const s = chat.stats;
    if (!s.droppedMessages) {
      assert.ok(s.promptTokens + 4 <= 64);
      continue;
    }
    // the oldest user turn and its reply are gone; the rest is computed again from the start
    const kept = chat.messages.slice(0, -1);
    assert.deepEqual(kept, [before[0], ...before.slice(1 + s.droppedMessages), { role: 'user', content: `q${turn}` }]);
    assert.equal(s.droppedMessages % 2, 0);
    const whole = CharTokenizer.applyChatTemplate([...before, { role: 'user', content: `q${turn}` }], { addGenerationPrompt: true });
    assert.ok(whole.length + 4 > 64, 'all of it would not fit');
    assert.deepEqual([s.restored, s.cachedTokens, s.prefillTokens], ['reset', 0, s.promptTokens]);
    assert.equal(prefilled(calls), s.promptTokens);
    assert.ok(s.promptTokens + 4 <= 64);
    assert.equal(reply, await fresh(m, kept.slice(0, -1), `q${turn}`));
  }
  assert.ok(chat.stats.droppedMessages > 0, 'the cache filled up');
  // a message that cannot fit even alone is refused, and the conversation stays as it was
  const messages = chat.messages;
  await assert.rejects(chat.send('x'.repeat(80)), (e) => e.code === 'TDM_ERR_INDEX' && /64/.test(e.message));
  assert.deepEqual(chat.messages, messages);
  m.dispose();
});

test("the file's tokenizer and chat template: text streams, and the reply equals a fresh session's", async () => {
  const m = await load(fixture('chat_llama').path, { worker: true });
  const chat = m.chat({ system: 'You are terse.', maxNewTokens: 6 });
  const pieces = [], ids = [];
  let reply;
  for (const text of ['Hello world', 'the model reads a token', 'and the cache keeps it']) {
    pieces.length = ids.length = 0;
    reply = await chat.send(text, { onText: (p) => pieces.push(p), onToken: (id) => ids.push(id) });
    assert.equal(pieces.join(''), reply);
    assert.equal(m.tokenizer.decode(ids, { skipSpecialTokens: true }), reply);
    assert.equal(chat.stats.newTokens, ids.length);
  }
  const messages = chat.messages;
  assert.equal(messages.length, 7);
  const f = await m.fork();
  const ref = f.chat({ messages: messages.slice(0, 5), maxNewTokens: 6 });
  assert.equal(await ref.send(messages[5].content), reply);
  assert.equal(ref.stats.promptTokens, chat.stats.promptTokens);
  f.dispose();
  m.dispose();
});

test('a signal ends the reply where it is; the next turn continues from the cache', async () => {
  const m = await load(fixture('chat_llama').path);
  const calls = spy(m);
  const chat = m.chat({ tokenizer: CharTokenizer, maxNewTokens: 8 });
  const controller = new AbortController();
  const ids = [];
  const onToken = (id) => {
    ids.push(id);
    if (ids.length === 2) controller.abort();
  };
  const reply = await chat.send(say(1), { signal: controller.signal, onToken });
  assert.deepEqual([chat.stats.reason, chat.stats.newTokens, encode(reply)], ['aborted', 2, ids]);
  const full = await fresh(m, [], say(1), { maxNewTokens: 8 });
  assert.ok(full.startsWith(reply) && full.length > reply.length, 'the first tokens of the whole reply');
  calls.length = 0;
  const next = await chat.send(say(2));
  assert.equal(chat.stats.restored, 'cache');
  assert.equal(prefilled(calls), chat.stats.prefillTokens);
  assert.equal(next, await fresh(m, chat.messages.slice(0, 2), say(2), { maxNewTokens: 8 }));
  m.dispose();
});

test('options are checked; a program without a tokenizer needs one given', async () => {
  const m = await load(fixture('chat_llama').path);
  assert.throws(() => m.chat({ maxNewToken: 3 }), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /maxNewToken'/.test(e.message));
  assert.throws(() => m.chat({ temperature: -1 }), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT');
  assert.throws(() => m.chat({ messages: [{ role: 'user' }] }), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT');
  const chat = m.chat({ tokenizer: CharTokenizer });
  await assert.rejects(chat.send(3), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT');
  await assert.rejects(chat.send('x', { topP: 0 }), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT');
  assert.deepEqual(chat.messages, []);
  assert.equal(chat.stats, null);
  assert.ok(chat instanceof Chat);
  m.dispose();
  const plain = await load(fixture('hf_llama').path);
  assert.throws(() => plain.chat(), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT' && /no tokenizer/.test(e.message));
  plain.dispose();
});
