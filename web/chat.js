// chat.js — a conversation over a language-model program (prefill / decode / reset, as
// tandem.transformers exports them, or a hand-written program with the same methods) that keeps its
// KV cache between turns: `model.chat(options)` makes one (web/model.js), python/tandem/chat.py is
// the same session in Python.
//
// The session keeps the token ids its cache holds. A turn renders the whole conversation with the
// chat template and takes the longest common token prefix with those ids: when the prefix covers
// the cache, only the tokens after it are prefilled; otherwise the state goes back to the nearest
// snapshot (model.saveState / loadState, which every backend has) at or before the prefix, or to
// the initial state, and is prefilled from there. Snapshots are taken at the two points a later turn
// comes back to: where a turn starts (undo(), a reply whose text encodes to other tokens) and after
// a turn's prompt, with its logits (regenerate() prefills nothing). When the conversation and the
// reply would not fit the cache, the oldest turns are dropped (a system prompt stays), and what
// follows the first changed token is computed again.
import { TandemError } from './errors.js';
import { describe, prefillWith, random, picker, stopIds } from './lm.js';

const invalid = (message) => new TandemError('TDM_ERR_INVALID_ARGUMENT', message);
const now = () => globalThis.performance.now();

const SESSION_OPTIONS = new Set(['system', 'messages', 'tokenizer', 'maxNewTokens', 'temperature', 'topK', 'topP', 'seed', 'stop',
  'snapshots', 'maxCacheLen', 'positionState']);
const TURN_OPTIONS = new Set(['maxNewTokens', 'temperature', 'topK', 'topP', 'stop', 'signal', 'onToken', 'onText']);

function checkKeys(options, allowed, what) {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw invalid(`${what}: options must be an object`);
  for (const k of Object.keys(options)) {
    if (!allowed.has(k)) throw invalid(`${what}: unknown option '${k}'; the options are ${[...allowed].join(', ')}`);
  }
  return options;
}

function checkSampling(o, what) {
  const { maxNewTokens, temperature, topK, topP } = o;
  if (maxNewTokens !== undefined && !(Number.isInteger(maxNewTokens) && maxNewTokens >= 0)) {
    throw invalid(`${what}: maxNewTokens must be an integer >= 0, given ${maxNewTokens}`);
  }
  if (temperature !== undefined && !(typeof temperature === 'number' && temperature >= 0)) {
    throw invalid(`${what}: temperature must be a number >= 0, given ${temperature}`);
  }
  if (topK !== undefined && !(Number.isInteger(topK) && topK >= 0)) throw invalid(`${what}: topK must be an integer >= 0, given ${topK}`);
  if (topP !== undefined && !(typeof topP === 'number' && topP > 0 && topP <= 1)) {
    throw invalid(`${what}: topP must be a number in (0, 1], given ${topP}`);
  }
}

const isMessage = (m) => m && typeof m === 'object' && typeof m.role === 'string' && typeof m.content === 'string';

/** How many leading ids a and b share. */
function commonPrefix(a, b) {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** A conversation over `model` whose cache holds what earlier turns computed. Made by model.chat(). */
export class Chat {
  #model; #owned; #lm; #tokenizer; #defaults; #rand; #maxSnapshots;
  #messages = [];    // the conversation in the context: [{ role, content }], the system prompt first
  #ids = [];         // the token ids the cache holds (when #inCache), and that the snapshots are prefixes of
  #inCache = false;  // whether the model's state is exactly #ids (false before the first turn: it is reset then)
  #snapshots = [];   // [{ length, bytes, logits }] by length: the state holding #ids.slice(0, length)
  #stats = null;
  #queue = Promise.resolve();
  #disposed = false;

  /** Use model.chat(options). `from`: the session a fork copies (and the forked model it owns). */
  constructor(model, options = {}, from = null) {
    this.#model = model;
    if (from) {
      this.#owned = true;
      this.#lm = from.lm;
      this.#tokenizer = from.tokenizer;
      this.#defaults = from.defaults;
      this.#rand = random(from.rand);
      this.#maxSnapshots = from.maxSnapshots;
      this.#messages = from.messages.map((m) => ({ ...m }));
      this.#ids = from.ids.slice();
      this.#inCache = from.inCache;
      this.#snapshots = from.snapshots.slice();
      return;
    }
    const o = checkKeys(options, SESSION_OPTIONS, 'chat()');
    checkSampling(o, 'chat()');
    this.#owned = false;
    this.#lm = describe(model, { maxCacheLen: o.maxCacheLen, positionState: o.positionState }, 'chat()');
    const tokenizer = o.tokenizer ?? model.tokenizer;
    if (!tokenizer || typeof tokenizer.applyChatTemplate !== 'function' || typeof tokenizer.decode !== 'function') {
      throw invalid('chat(): the file carries no tokenizer; export the checkpoint with `python -m tandem export` (which stores its ' +
        'tokenizer and chat template), or pass { tokenizer } with applyChatTemplate(messages, { addGenerationPrompt, tokenize }) ' +
        'and decode(ids, { skipSpecialTokens })');
    }
    this.#tokenizer = tokenizer;
    const { maxNewTokens = 128, temperature = 0, topK = 0, topP = 1, seed = 0, stop = [], snapshots = 8 } = o;
    if (!(Number.isInteger(snapshots) && snapshots >= 0)) throw invalid(`chat(): snapshots must be an integer >= 0, given ${snapshots}`);
    this.#maxSnapshots = snapshots;
    this.#defaults = { maxNewTokens, temperature, topK, topP, stop };
    this.#rand = random(seed);
    if (o.system !== undefined) {
      if (typeof o.system !== 'string') throw invalid('chat(): system must be a string');
      this.#messages.push({ role: 'system', content: o.system });
    }
    if (o.messages !== undefined) {
      if (!Array.isArray(o.messages) || !o.messages.every(isMessage)) {
        throw invalid('chat(): messages must be an array of { role, content } (strings)');
      }
      this.#messages.push(...o.messages.map(({ role, content }) => ({ role, content })));
    }
  }

  /** The conversation in the context, [{ role, content }] (copies): the system prompt, then the
   * turns not dropped to fit the cache. */
  get messages() { return this.#messages.map((m) => ({ ...m })); }

  /** The last turn's figures (see the guide), or null before the first turn. */
  get stats() { return this.#stats; }

  /** The model the session runs on (a fork's own model for a fork). */
  get model() { return this.#model; }

  /** Adds the user's message `text`, generates the reply and resolves to its text. Options:
   * maxNewTokens, temperature, topK, topP, stop (the session's by default), signal (AbortSignal: the
   * reply ends where it is, reason 'aborted'), onToken(id), onText(piece) (text pieces that never
   * split a character; joined, the reply). */
  send(text, options) {
    return this.#enqueue('send', () => {
      if (typeof text !== 'string') throw invalid('send(text): text must be a string');
      const o = this.#turnOptions(options, 'send()');
      const before = this.#messages;
      this.#messages = [...before, { role: 'user', content: text }];
      return this.#turn(o, before);
    });
  }

  /** The last reply again, from the state before it (with sampling it can differ); options as send(). */
  regenerate(options) {
    return this.#enqueue('regenerate', () => {
      const o = this.#turnOptions(options, 'regenerate()');
      const before = this.#messages;
      if (before.at(-1)?.role !== 'assistant') throw invalid('regenerate(): the conversation does not end with a reply');
      this.#messages = before.slice(0, -1);
      return this.#turn(o, before);
    });
  }

  /** Drops the last user message and the reply after it; the next turn continues from the state
   * before them. */
  undo() {
    return this.#enqueue('undo', () => {
      const at = this.#messages.findLastIndex((m) => m.role === 'user');
      if (at < 0) throw invalid('undo(): there is no user message to take back');
      this.#messages = this.#messages.slice(0, at);
    });
  }

  /** An independent session that continues this conversation: its own model (model.fork with a copy
   * of the state), the same messages, snapshots and sampling state. Dispose it when done. */
  fork() {
    return this.#enqueue('fork', async () => {
      const model = await this.#model.fork({ state: 'copy' });
      return new Chat(model, undefined, {
        lm: this.#lm, tokenizer: this.#tokenizer, defaults: this.#defaults, rand: this.#rand.state(), maxSnapshots: this.#maxSnapshots,
        messages: this.#messages, ids: this.#ids, inCache: this.#inCache, snapshots: this.#snapshots,
      });
    });
  }

  /** Frees the snapshots, and a fork's model. */
  dispose() {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#snapshots = [];
    if (this.#owned) this.#model.dispose();
  }

  [Symbol.dispose]() { this.dispose(); }

  #enqueue(what, fn) {
    if (this.#disposed) return Promise.reject(new TandemError('TDM_ERR_DISPOSED', `${what}(): the chat was disposed`));
    const run = this.#queue.then(() => {
      if (this.#disposed) throw new TandemError('TDM_ERR_DISPOSED', `${what}(): the chat was disposed`);
      return fn();
    });
    this.#queue = run.catch(() => {});
    return run;
  }

  #turnOptions(options, what) {
    const o = checkKeys(options, TURN_OPTIONS, what);
    checkSampling(o, what);
    return { ...this.#defaults, ...Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) };
  }

  #render(messages) {
    const ids = this.#tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true, tokenize: true });
    return Array.from(ids, Number);
  }

  /** The context that fits the cache with room for `reserve` new tokens: the oldest turns dropped
   * (a system prompt and the last message stay), and its rendering. */
  #fit(reserve) {
    let context = this.#messages, prompt = this.#render(context);
    const capacity = this.#lm.maxCacheLen;
    if (capacity === null) return { context, prompt, dropped: 0 };
    const first = context[0]?.role === 'system' ? 1 : 0;
    while (prompt.length + reserve > capacity && context.length - first > 1) {
      // a user message and the replies after it, so the context starts with a user turn
      let end = first + 1;
      while (end < context.length - 1 && context[end].role !== 'user') end++;
      context = [...context.slice(0, first), ...context.slice(end)];
      prompt = this.#render(context);
    }
    if (prompt.length > capacity) {
      throw new TandemError('TDM_ERR_INDEX', `chat: the conversation needs ${prompt.length} positions with the oldest turns dropped; the ` +
        `cache has ${capacity}`);
    }
    return { context, prompt, dropped: this.#messages.length - context.length };
  }

  #snapshot(length, bytes, logits) {
    this.#snapshots = this.#snapshots.filter((s) => s.length !== length);
    this.#snapshots.push({ length, bytes, logits });
    this.#snapshots.sort((a, b) => a.length - b.length);
    while (this.#snapshots.length > this.#maxSnapshots) this.#snapshots.shift();
  }

  /** One turn on this.#messages (ending with the user's message); `before`: the messages to put
   * back when it fails. */
  async #turn(o, before) {
    const model = this.#model, lm = this.#lm;
    const t0 = now();
    let context, prompt, dropped;
    try {
      ({ context, prompt, dropped } = this.#fit(o.maxNewTokens));
    } catch (e) {
      this.#messages = before;
      throw e;
    }
    const shared = commonPrefix(this.#ids, prompt);
    let start, logits = null, restored;
    try {
      if (this.#inCache && shared === this.#ids.length && shared < prompt.length) {
        start = shared;
        restored = 'cache';
        if (start > 0 && this.#maxSnapshots > 0 && !this.#snapshots.some((s) => s.length === start)) {
          this.#snapshot(start, await model.saveState(), null);
        }
      } else {
        const s = this.#snapshots.findLast((x) => x.length <= shared && (x.length < prompt.length || x.logits));
        this.#inCache = false;
        if (s) {
          await model.loadState(s.bytes);
          start = s.length;
          logits = s.length === prompt.length ? s.logits : null;
          restored = 'snapshot';
        } else {
          await model.resetState();
          start = 0;
          restored = 'reset';
        }
        this.#ids = this.#ids.slice(0, start);
        this.#snapshots = this.#snapshots.filter((x) => x.length <= start);
        this.#inCache = true;
      }
      for (let at = start; at < prompt.length; at += lm.maxPromptLen) {
        const piece = prompt.slice(at, at + lm.maxPromptLen);
        logits = await prefillWith(model, lm, BigInt64Array.from(piece, BigInt));
        this.#ids.push(...piece);
      }
      if (start < prompt.length && this.#maxSnapshots > 0) this.#snapshot(prompt.length, await model.saveState(), logits);
    } catch (e) {
      this.#inCache = false;
      this.#messages = before;
      throw e;
    }
    const prefillMs = now() - t0;
    return this.#reply(o, { before, context, prompt, dropped, start, restored, logits, t0, prefillMs });
  }

  async #reply(o, turn) {
    const model = this.#model, lm = this.#lm, rand = this.#rand;
    const { maxNewTokens, temperature, topK, topP, stop, signal, onToken, onText } = o;
    const how = { temperature, topK, topP };
    const eos = stopIds(lm, stop);
    const step = picker(model, lm, turn.logits, how, rand);
    const reply = [];
    let reason, ttftMs = null, shown = '';
    const show = (final) => {
      if (!onText) return;
      const text = this.#tokenizer.decode(reply, { skipSpecialTokens: true });
      if ((final || !text.endsWith('\uFFFD')) && text.startsWith(shown) && text.length > shown.length) {
        const piece = text.slice(shown.length);
        shown = text;
        onText(piece);
      }
    };
    try {
      for (;;) {
        if (signal?.aborted) { reason = 'aborted'; break; }
        if (reply.length >= maxNewTokens) { reason = 'length'; break; }
        const id = step.pick();
        ttftMs ??= now() - turn.t0;
        if (eos.has(id)) { reason = 'eos'; break; }
        reply.push(id);
        onToken?.(id);
        show(false);
        if (lm.maxCacheLen !== null && this.#ids.length >= lm.maxCacheLen) { reason = 'capacity'; break; }
        await step.feed(id);
        this.#ids.push(id);
      }
    } catch (e) {
      this.#inCache = false; // a failed decode leaves the state as it was, but a callback may have thrown anywhere
      this.#messages = turn.before;
      throw e;
    }
    show(true);
    const text = this.#tokenizer.decode(reply, { skipSpecialTokens: true });
    this.#messages = [...turn.context, { role: 'assistant', content: text }];
    const totalMs = now() - turn.t0, decodeMs = ttftMs === null ? 0 : totalMs - ttftMs;
    const prefillTokens = turn.prompt.length - turn.start;
    this.#stats = Object.freeze({
      promptTokens: turn.prompt.length,
      cachedTokens: turn.start,
      prefillTokens,
      restored: turn.restored,
      droppedMessages: turn.dropped,
      newTokens: reply.length,
      reason,
      ttftMs,
      prefillMs: turn.prefillMs,
      totalMs,
      prefillTokensPerSecond: prefillTokens > 0 && turn.prefillMs > 0 ? prefillTokens / (turn.prefillMs / 1000) : null,
      tokensPerSecond: reply.length > 1 && decodeMs > 0 ? (reply.length - 1) / (decodeMs / 1000) : null,
    });
    return text;
  }
}
