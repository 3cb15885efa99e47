// The tokenizer a file carries (`python -m tandem export` of the checkpoint folder that
// tests/models/checkpoint.py makes: a tiny Llama, a byte-level BPE trained locally, a chat template),
// against what transformers' own tokenizer and greedy generate gave (tests/fixtures/make.py: tok_llama):
// encode/decode on non-ASCII text, whitespace runs and special tokens written in the text; the chat
// template; generate() from text and from chat messages, as ids and as streamed text pieces.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { load, generate, TandemError } from '../../node/index.js';
import { FIXTURES, fixture } from './helpers.js';

const path = `${FIXTURES}/tok_llama.tandem`;
const spec = JSON.parse(readFileSync(`${FIXTURES}/tok_llama.json`, 'utf8'));

export function checkTokenizer(tok, spec) {
  for (const c of spec.texts) {
    assert.deepEqual(tok.encode(c.text), c.ids, `encode(${JSON.stringify(c.text)})`);
    assert.deepEqual(tok.encode(c.text, { addSpecialTokens: false }), c.ids_no_special,
      `encode(${JSON.stringify(c.text)}, no special tokens)`);
    assert.equal(tok.decode(c.ids), c.decoded, `decode of ${JSON.stringify(c.text)}`);
    assert.equal(tok.decode(c.ids, { skipSpecialTokens: true }), c.decoded_skip,
      `decode of ${JSON.stringify(c.text)}, special tokens skipped`);
  }
  for (const c of spec.chats) {
    const opts = { addGenerationPrompt: c.add_generation_prompt };
    assert.equal(tok.applyChatTemplate(c.messages, opts), c.text, `chat template (add_generation_prompt=${c.add_generation_prompt})`);
    assert.deepEqual(tok.applyChatTemplate(c.messages, { ...opts, tokenize: true }), c.ids, 'chat template, tokenized');
  }
}

for (const mode of ['inline', 'worker']) {
  const opts = mode === 'worker' ? { worker: true } : {};

  test(`${mode}: model.tokenizer encodes, decodes and applies the chat template as transformers does`, async () => {
    const m = await load(path, opts);
    try {
      assert.equal(m.metadata.tokenizer, undefined, "the 'tokenizer' entry is model.tokenizer, not a metadata value");
      assert.equal(m.tokenizer.bosTokenId, spec.special.bos_token_id);
      assert.equal(m.tokenizer.eosTokenId, spec.special.eos_token_id);
      assert.equal(m.tokenizer.specialTokens.eos_token, spec.special.eos_token);
      assert.equal(m.tokenizer.decode([]), '');
      checkTokenizer(m.tokenizer, spec);
      const fork = await m.fork();
      assert.equal(fork.tokenizer, m.tokenizer, 'forks share the tokenizer');
      fork.dispose();
    } finally {
      m.dispose();
    }
  });

  test(`${mode}: generate() from text and from chat messages yields transformers' greedy tokens, and streams text`, async () => {
    const m = await load(path, opts);
    try {
      const g = spec.generate;
      const run = generate(m, g.prompt, { temperature: 0, maxTokens: g.max_new_tokens });
      assert.deepEqual(run.promptIds, g.prompt_ids);
      const ids = [];
      for await (const id of run) ids.push(id);
      assert.deepEqual(ids, g.tokens);
      assert.equal(run.reason, g.tokens.length < g.max_new_tokens ? 'eos' : 'length');

      await m.reset();
      const pieces = [];
      for await (const piece of generate(m, g.prompt, { temperature: 0, maxTokens: g.max_new_tokens }).text()) pieces.push(piece);
      assert.equal(pieces.join(''), g.text, 'the pieces joined are the decoded text');
      assert.ok(pieces.every((p) => p.length > 0));

      await m.reset();
      const c = spec.chat_generate;
      const chat = generate(m, c.messages, { temperature: 0, maxTokens: g.max_new_tokens });
      assert.deepEqual(chat.promptIds, c.prompt_ids, 'the chat template with the generation prompt');
      const got = [];
      for await (const id of chat) got.push(id);
      assert.deepEqual(got, c.tokens);
    } finally {
      m.dispose();
    }
  });
}

test('streamed text never splits a UTF-8 character: pieces of multi-byte characters wait for their last byte', async () => {
  const m = await load(path);
  try {
    const tok = m.tokenizer;
    for (const text of ['東京の日本語テキスト 你好世界', 'emoji 🙂🚀 and 🦀 (never seen)', 'café naïve über straße — état']) {
      const ids = tok.encode(text, { addSpecialTokens: false });
      const stream = tok.streamDecoder();
      const pieces = ids.map((id) => stream.push(id)).concat(stream.flush()).filter((p) => p);
      assert.equal(pieces.join(''), text);
      for (const p of pieces) assert.ok(!p.includes('\uFFFD'), `piece ${JSON.stringify(p)} holds half a character`);
      // '🦀' is never in the corpus: its 4 bytes are 4 byte tokens, and it comes out whole
      if (text.includes('🦀')) assert.ok(pieces.some((p) => p.includes('🦀')));
    }
  } finally {
    m.dispose();
  }
});

test('a file without a tokenizer: model.tokenizer is null, generate() asks for ids; { tokenizer: false } skips it', async () => {
  const plain = await load(fixture('hf_llama').path);
  try {
    assert.equal(plain.tokenizer, null);
    assert.throws(() => generate(plain, 'some text'), (e) => e instanceof TandemError && e.code === 'TDM_ERR_INVALID_ARGUMENT'
      && /carries no tokenizer/.test(e.message));
  } finally {
    plain.dispose();
  }
  const m = await load(path, { tokenizer: false });
  try {
    assert.equal(m.tokenizer, null);
    const run = generate(m, spec.generate.prompt_ids, { maxTokens: 3 });
    const ids = [];
    for await (const id of run) ids.push(id);
    assert.deepEqual(ids, spec.generate.tokens.slice(0, 3));
  } finally {
    m.dispose();
  }
});

test('applyChatTemplate: a role the template rejects raises its message; bad arguments are TandemErrors', async () => {
  const m = await load(path);
  try {
    assert.throws(() => m.tokenizer.applyChatTemplate([{ role: 'robot', content: 'x' }]), (e) => e instanceof TandemError
      && /unknown role robot/.test(e.message));
    assert.throws(() => m.tokenizer.applyChatTemplate('hi'), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT');
    assert.throws(() => m.tokenizer.encode(42), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT');
    assert.throws(() => m.tokenizer.decode([1, -2]), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT');
    assert.throws(() => m.tokenizer.decode('12'), (e) => e.code === 'TDM_ERR_INVALID_ARGUMENT');
  } finally {
    m.dispose();
  }
});
