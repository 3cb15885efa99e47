// lm.js — prompts and generation for language models: programs from tandem.transformers
// (export_causal_lm) and hand-written ones with the same methods. `prefill(model, tokens)` runs a
// prompt of any length with the program's `prefill` method (its length a dynamic dim), or as fixed
// chunks (a `prefill` of a fixed length, `prefill_<n>` methods: those of earlier versions) and
// `decode` for single tokens; `generate(model, prompt, options)` yields sampled token ids,
// sampling from `decode_topk`'s K best logits where the requested sampling needs no more.
// What the method signatures do not say comes from model.metadata (max_cache_len, max_prompt_len,
// position_state, eos_token_id), or from options (maxCacheLen, positionState) for a program without
// it. max_cache_len is null for a model with a fixed-size state (Mamba): any number of tokens fits.
import { TandemError } from './errors.js';
import { Tensor } from './tensor.js';

const invalid = (message) => new TandemError('TDM_ERR_INVALID_ARGUMENT', message);

/** How to drive `model` as an LM: from its method signatures, its metadata, and `options`
 * (maxCacheLen, positionState) where the program has no metadata for them (web/chat.js uses it). */
export function describe(model, options, what) {
  const md = model.metadata || {};
  const methods = new Map((model.methods || []).map((m) => [m.name, m]));
  const decode = methods.get('decode');
  if (!decode || decode.inputs.length !== 1 || decode.outputs.length !== 1) {
    throw invalid(`${what}: the program has no 'decode' method (token [1, 1] -> logits [1, vocab]); export it with ` +
      `tandem.transformers.export_causal_lm, or give a hand-written model one`);
  }
  const maxCacheLen = options.maxCacheLen !== undefined ? options.maxCacheLen : md.max_cache_len;
  if (maxCacheLen === undefined) {
    throw invalid(`${what}: the program has no 'max_cache_len' metadata; pass { maxCacheLen } (the positions its cache holds, null for a ` +
      `state of fixed size), or export it with tandem.transformers.export_causal_lm`);
  }
  if (maxCacheLen !== null && !(Number.isInteger(maxCacheLen) && maxCacheLen >= 1)) {
    throw invalid(`${what}: maxCacheLen must be a positive integer or null, given ${maxCacheLen}`);
  }
  const positionState = options.positionState ?? md.position_state;
  if (positionState !== undefined && !(model.state || []).some((s) => s.name === positionState)) {
    throw invalid(`${what}: no state tensor '${positionState}' (positionState); the program has ` +
      `${(model.state || []).map((s) => `'${s.name}'`).join(', ') || 'none'}`);
  }
  // prefill: one call of a dynamic length, or fixed-length chunks (length -> method) then decode
  const prefill = methods.get('prefill');
  const dynamic = prefill && Object.keys(prefill.dims || {}).length > 0 ? prefill : null;
  const chunks = new Map();
  for (const m of methods.values()) {
    const n = m.name === 'prefill' ? m.inputs[0]?.shape[1] : Number(/^prefill_(\d+)$/.exec(m.name)?.[1]);
    if (m !== dynamic && m.inputs.length === 1 && Number.isInteger(n) && n > 1 && m.inputs[0].shape[1] === n) chunks.set(n, m.name);
  }
  const maxPromptLen = md.max_prompt_len ?? (dynamic ? dynamic.dims[dynamic.inputs[0].shape[1]]?.max ?? Infinity : Infinity);
  // decode_topk(token) -> values float32 [1, K], ids int64 [1, K]: the K best logits
  const t = methods.get('decode_topk');
  const [values, ids] = t?.inputs.length === 1 && t.outputs.length === 2 ? t.outputs : [];
  const topk = values?.dtype === 'float32' && ids.dtype === 'int64' && values.shape[1] === ids.shape[1] ? values.shape[1] : 0;
  const vocab = decode.outputs[0].shape[decode.outputs[0].shape.length - 1];
  return { md, maxCacheLen, positionState, dynamic: !!dynamic, chunks, maxPromptLen, topk, vocab };
}

export function toIds(tokens, what) {
  const data = tokens instanceof Tensor ? tokens.data : tokens;
  if (data instanceof BigInt64Array) return data;
  if (Array.isArray(data) || ArrayBuffer.isView(data)) {
    try {
      return BigInt64Array.from(data, (t) => BigInt(t));
    } catch {
      // fall through to the error below
    }
  }
  throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${what}: tokens must be a Tensor, a BigInt64Array or an array of integer ids`);
}

const isMessages = (p) => Array.isArray(p) && p.length > 0
  && p.every((m) => m && typeof m === 'object' && !ArrayBuffer.isView(m) && 'role' in m);

/** A prompt's token ids: ids as given; a string through the file's tokenizer (as transformers'
 * `tokenizer(text)`, special tokens added); chat messages [{ role, content }] through its chat
 * template with the generation prompt. */
function promptIds(model, prompt) {
  if (typeof prompt !== 'string' && !isMessages(prompt)) return toIds(prompt, 'generate()');
  const tokenizer = model.tokenizer;
  if (!tokenizer) {
    throw invalid(`generate(): the prompt is ${typeof prompt === 'string' ? 'text' : 'chat messages'}, but the file carries no ` +
      `tokenizer; export the checkpoint with \`python -m tandem export\` (which stores its tokenizer), or give token ids`);
  }
  const ids = typeof prompt === 'string' ? tokenizer.encode(prompt)
    : tokenizer.applyChatTemplate(prompt, { addGenerationPrompt: true, tokenize: true });
  return BigInt64Array.from(ids, (t) => BigInt(t));
}

/** n as the program's chunk lengths, largest first, then 1s (decode's). */
export function splitPrompt(n, chunks) {
  const out = [];
  for (const c of [...chunks, 1]) {
    while (n >= c) {
      out.push(c);
      n -= c;
    }
  }
  return out;
}

/** Positions of the KV cache in use: the state tensor named by the metadata's position_state (or
 * options.positionState, for a program without that metadata). */
export async function position(model, options = {}) {
  const name = options.positionState ?? (model.metadata || {}).position_state;
  if (!name) throw invalid("position(): the program has no 'position_state' metadata; pass { positionState } (the name of the state " +
    'tensor counting the positions in use)');
  return Number((await model.readState(name)).data[0]);
}

/** Appends `tokens` (1..max_prompt_len ids) to the model's cache with one `prefill` call (programs
 * whose prefill has a fixed length, or prefill_<n> methods: as those chunks, largest first, then
 * decode for single tokens, exact since the cache makes chunked prefill the same computation), and
 * resolves to the last position's logits, a Tensor [1, vocab]. A prompt that does not fit in the
 * cache is rejected with TDM_ERR_INDEX before anything runs: the state is unchanged. Options, for a
 * program without the recipe's metadata: maxCacheLen, positionState. */
export async function prefill(model, tokens, options = {}) {
  return prefillWith(model, describe(model, options, 'prefill()'), toIds(tokens, 'prefill()'));
}

/** prefill() on a described model (web/chat.js uses it). */
export async function prefillWith(model, lm, ids) {
  if (ids.length < 1 || ids.length > lm.maxPromptLen) {
    throw invalid(`prefill(): ${ids.length} tokens; give 1 to ${lm.maxPromptLen} (max_prompt_len), or use generate(), which feeds longer ` +
      `prompts in pieces`);
  }
  const used = lm.positionState ? await position(model, lm) : 0;
  if (lm.maxCacheLen !== null && used + ids.length > lm.maxCacheLen) {
    throw new TandemError('TDM_ERR_INDEX',
      `prefill(): ${ids.length} tokens do not fit: ${used} of ${lm.maxCacheLen} cache positions are in use (call reset())`);
  }
  if (lm.dynamic) return model.call('prefill', new Tensor('int64', ids.slice(), [1, ids.length]));
  let at = 0, logits;
  for (const n of splitPrompt(ids.length, [...lm.chunks.keys()].sort((a, b) => b - a))) {
    logits = await model.call(n === 1 ? 'decode' : lm.chunks.get(n), new Tensor('int64', ids.slice(at, at + n), [1, n]));
    at += n;
  }
  return logits;
}

/** A seeded PRNG in [0, 1) (mulberry32): the same seed gives the same samples everywhere.
 * `rand.state()` is its state: random(rand.state()) continues the same sequence (a chat's fork). */
export function random(seed) {
  let a = seed >>> 0;
  const rand = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  rand.state = () => a;
  return rand;
}

/** Whether logit a (of token i) ranks above logit b (of token j): the larger first, NaN above
 * every number, equal values by the lower id. The runtime's `topk` orders decode_topk's output so,
 * which makes sampling from it and from the full logits the same. */
function above(a, i, b, j) {
  const an = Number.isNaN(a), bn = Number.isNaN(b);
  if (an || bn) return an && bn ? i < j : an;
  return a !== b ? a > b : i < j;
}

/** The ids of the n best logits of x, best first. */
function best(x, n) {
  if (n === 1) {
    let top = 0;
    for (let i = 1; i < x.length; i++) if (above(x[i], i, x[top], top)) top = i;
    return [top];
  }
  return Array.from(x.keys()).sort((i, j) => (i === j ? 0 : above(x[i], i, x[j], j) ? -1 : 1)).slice(0, n);
}

/** How many of the best logits sampling with these options reads, out of a vocabulary of n. */
export function needed({ temperature = 0, topK = 0 }, n) {
  if (!(temperature > 0)) return 1;
  return topK > 0 ? Math.min(topK, n) : n;
}

/** A token id from candidates ranked best first (values[k] the logit of ids[k]), as `sample`
 * describes; only the first needed() are read. */
export function choose(values, ids, { temperature = 0, topK = 0, topP = 1 }, rand) {
  if (!(temperature > 0)) return ids[0];
  const n = topK > 0 ? Math.min(topK, ids.length) : ids.length;
  const top = values[0];
  let p = [];
  for (let k = 0; k < n; k++) p.push(Math.exp((values[k] - top) / temperature));
  const total = p.reduce((a, b) => a + b, 0);
  p = p.map((v) => v / total);
  let keep = n;
  if (topP < 1) {
    let mass = 0;
    keep = 0;
    while (keep < n && mass < topP) mass += p[keep++];
    p = p.slice(0, keep).map((v) => v / mass);
  }
  let r = rand();
  for (let k = 0; k < keep; k++) {
    r -= p[k];
    if (r < 0) return ids[k];
  }
  return ids[keep - 1];
}

/** The next token id from logits [1, vocab]: the first largest at temperature 0, else a sample of
 * softmax(logits / temperature) restricted to the topK largest and to the smallest set whose
 * probability reaches topP. Logits rank larger first, equal ones by the lower id, NaN above every
 * number (the order of the runtime's topk). */
export function sample(logits, options = {}, rand = Math.random) {
  const x = logits.data;
  const ids = best(x, needed(options, x.length));
  return choose(ids.map((i) => x[i]), ids, options, rand);
}

/** The next-token step of generate() and of a chat reply: pick() chooses a token from the last
 * logits (a prompt's, or decode's), feed(id) appends it to the cache. With decode_topk in the program
 * and sampling that reads no more than its K best, feed runs it and pick() ranks only those (the
 * logits never leave the runtime); otherwise feed runs decode. */
export function picker(model, lm, logits, how, rand) {
  const onDevice = lm.topk > 0 && needed(how, lm.vocab) <= lm.topk;
  let next = () => sample(logits, how, rand);
  return {
    pick: () => next(),
    async feed(id) {
      const token = new Tensor('int64', BigInt64Array.of(BigInt(id)), [1, 1]);
      if (onDevice) {
        const [values, top] = await model.call('decode_topk', token);
        next = () => choose(values.data, Array.from(top.data, Number), how, rand);
      } else {
        const last = await model.call('decode', token);
        next = () => sample(last, how, rand);
      }
    },
  };
}

/** The ids that end a reply: the file's eos_token_id (one or a list) and the caller's stop ids. */
export function stopIds(lm, stop) {
  return new Set([lm.md.eos_token_id, ...stop].flat().filter((t) => t !== null && t !== undefined).map(Number));
}

/** Generation: `for await (const id of generate(model, prompt, options))` yields token ids
 * (`for await (const piece of generate(model, prompt).text())` text pieces instead); when it
 * ends, `.reason` says why: 'eos' (the model's end-of-sequence id, or one in `stop`), 'length'
 * (maxTokens), 'capacity' (the KV cache is full) or 'aborted' (options.signal). The prompt: token
 * ids, or, when the file carries a tokenizer, a string (encoded as transformers' tokenizer(text)
 * does) or chat messages [{ role, content }] (the chat template applied, with the generation prompt). It is
 * appended to the model's cache as it is (call model.reset() first for a new conversation); prompts
 * longer than max_prompt_len are fed in pieces. Options: maxTokens (64), temperature (0: greedy),
 * topK, topP, seed (sampling is reproducible), stop (token ids), signal (AbortSignal), onToken(id);
 * for a program without the recipe's metadata, maxCacheLen and positionState. After the prompt, each
 * step runs decode_topk when the program has it and the sampling reads no more than its K best
 * logits (greedy, or 0 < topK <= K), else decode: the tokens are the same either way. */
export function generate(model, prompt, options = {}) {
  const { maxTokens = 64, temperature = 0, topK = 0, topP = 1, seed = 0, stop = [], signal, onToken } = options;
  const lm = describe(model, options, 'generate()');
  const ids = promptIds(model, prompt);
  if (ids.length < 1) throw invalid('generate(): the prompt is empty; give at least one token id');
  const eos = stopIds(lm, stop);
  const rand = random(seed);
  const how = { temperature, topK, topP };
  const run = {
    reason: undefined,
    /** The prompt as token ids (a text or chat prompt after the tokenizer and the chat template). */
    promptIds: Array.from(ids, Number),
    /** The generated ids as text pieces, each yielded once it is complete (never half of a UTF-8
     * character): `for await (const piece of run.text())`. Joined, they equal
     * model.tokenizer.decode(ids, { skipSpecialTokens }) of the generated ids. Iterates the run. */
    async *text({ skipSpecialTokens = true } = {}) {
      if (!model.tokenizer) throw invalid('generate(): text() needs the tokenizer the file carries, and this file has none (export it ' +
        'with `python -m tandem export`, which stores it); iterate the run for token ids');
      const stream = model.tokenizer.streamDecoder({ skipSpecialTokens });
      for await (const id of run) {
        const piece = stream.push(id);
        if (piece) yield piece;
      }
      const rest = stream.flush();
      if (rest) yield rest;
    },
    async *[Symbol.asyncIterator]() {
      let logits;
      for (let at = 0; at < ids.length; at += lm.maxPromptLen) logits = await prefillWith(model, lm,
        ids.subarray(at, at + lm.maxPromptLen));
      let used = lm.positionState ? await position(model, lm) : ids.length;
      const step = picker(model, lm, logits, how, rand);
      for (let count = 0; ; count++) {
        if (signal?.aborted) return void (run.reason = 'aborted');
        if (count >= maxTokens) return void (run.reason = 'length');
        const id = step.pick();
        if (eos.has(id)) return void (run.reason = 'eos');
        onToken?.(id);
        yield id;
        if (lm.maxCacheLen !== null && used >= lm.maxCacheLen) return void (run.reason = 'capacity');
        await step.feed(id);
        used++;
      }
    },
  };
  return run;
}
