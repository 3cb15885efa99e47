// lm.js — prompts and generation for language models exported by tandem.transformers
// (export_causal_lm): `prefill(model, tokens)` runs a prompt of any length with the program's
// `prefill` method (its length is a dynamic dim; programs without one, Mamba's and those of earlier
// versions: their prefill_<n> chunks); `generate(model, prompt, options)` yields sampled token ids.
// Both read what they need from model.metadata (max_prompt_len, max_cache_len, position_state,
// eos_token_id; prefill_chunks in chunked programs). max_cache_len is null for a model with a
// fixed-size state (Mamba): any number of tokens fits.
import { Tensor, TandemError } from './tandem.js';

/** Whether the program has one `prefill` of any length (else prefill_<n> chunks). */
function hasDynamicPrefill(model) {
  return (model.methods || []).some((m) => m.name === 'prefill');
}

function metadataOf(model, what) {
  const md = model.metadata || {};
  for (const key of [...(hasDynamicPrefill(model) ? [] : ['prefill_chunks']), 'max_prompt_len', 'max_cache_len']) {
    if (md[key] === undefined) {
      throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${what}: the program has no '${key}' metadata; export it with tandem.transformers.export_causal_lm`);
    }
  }
  return md;
}

function toIds(tokens, what) {
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

/** Positions of the KV cache in use (from the state named by the metadata's position_state). */
export async function position(model) {
  const name = (model.metadata || {}).position_state;
  if (!name) throw new TandemError('TDM_ERR_INVALID_ARGUMENT', "position(): the program has no 'position_state' metadata");
  return Number((await model.readState(name)).data[0]);
}

/** Appends `tokens` (1..max_prompt_len ids) to the model's cache with one `prefill` call (programs
 * of earlier versions: as prefill chunks then decode for a last single token, exact since the cache
 * makes chunked prefill the same computation), and resolves to
 * the last position's logits, a Tensor [1, vocab]. A prompt that does not fit in the cache is
 * rejected with TDM_ERR_INDEX before anything runs: the state is unchanged. */
export async function prefill(model, tokens) {
  const md = metadataOf(model, 'prefill()');
  const ids = toIds(tokens, 'prefill()');
  if (ids.length < 1 || ids.length > md.max_prompt_len) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `prefill(): ${ids.length} tokens; give 1 to ${md.max_prompt_len} (max_prompt_len), or use generate(), which feeds longer prompts in pieces`);
  }
  const used = md.position_state ? await position(model) : 0;
  if (md.max_cache_len !== null && used + ids.length > md.max_cache_len) {
    throw new TandemError('TDM_ERR_INDEX', `prefill(): ${ids.length} tokens do not fit: ${used} of ${md.max_cache_len} cache positions are in use (call reset())`);
  }
  if (hasDynamicPrefill(model)) return model.call('prefill', new Tensor('int64', ids.slice(), [1, ids.length]));
  let at = 0, logits;
  for (const n of splitPrompt(ids.length, md.prefill_chunks)) {
    logits = await model.call(n === 1 ? 'decode' : `prefill_${n}`, new Tensor('int64', ids.slice(at, at + n), [1, n]));
    at += n;
  }
  return logits;
}

/** A seeded PRNG in [0, 1) (mulberry32): the same seed gives the same samples everywhere. */
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The next token id from logits [1, vocab]: the first largest at temperature 0, else a sample of
 * softmax(logits / temperature) restricted to the topK largest and to the smallest set whose
 * probability reaches topP. */
export function sample(logits, { temperature = 0, topK = 0, topP = 1 } = {}, rand = Math.random) {
  const x = logits.data;
  if (!(temperature > 0)) {
    let best = 0;
    for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
    return best;
  }
  let order = Array.from(x.keys()).sort((a, b) => x[b] - x[a]);
  if (topK > 0) order = order.slice(0, topK);
  const top = x[order[0]];
  let p = order.map((i) => Math.exp((x[i] - top) / temperature));
  const total = p.reduce((a, b) => a + b, 0);
  p = p.map((v) => v / total);
  if (topP < 1) {
    let keep = 0, mass = 0;
    while (keep < p.length && mass < topP) mass += p[keep++];
    order = order.slice(0, keep);
    p = p.slice(0, keep).map((v) => v / mass);
  }
  let r = rand();
  for (let k = 0; k < order.length; k++) {
    r -= p[k];
    if (r < 0) return order[k];
  }
  return order[order.length - 1];
}

/** Generation: `for await (const id of generate(model, prompt, options))` yields token ids; when it
 * ends, `.reason` says why: 'eos' (the model's end-of-sequence id, or one in `stop`), 'length'
 * (maxTokens), 'capacity' (the KV cache is full) or 'aborted' (options.signal). The prompt is
 * appended to the model's cache as it is (call model.reset() first for a new conversation); prompts
 * longer than max_prompt_len are fed in pieces. Options: maxTokens (64), temperature (0: greedy),
 * topK, topP, seed (sampling is reproducible), stop (token ids), signal (AbortSignal), onToken(id). */
export function generate(model, prompt, options = {}) {
  const { maxTokens = 64, temperature = 0, topK = 0, topP = 1, seed = 0, stop = [], signal, onToken } = options;
  const md = metadataOf(model, 'generate()');
  const ids = toIds(prompt, 'generate()');
  const eos = new Set([md.eos_token_id, ...stop].flat().filter((t) => t !== null && t !== undefined).map(Number));
  const rand = random(seed);
  const run = {
    reason: undefined,
    async *[Symbol.asyncIterator]() {
      let logits;
      for (let at = 0; at < ids.length; at += md.max_prompt_len) logits = await prefill(model, ids.subarray(at, at + md.max_prompt_len));
      let used = md.position_state ? await position(model) : ids.length;
      for (let count = 0; ; count++) {
        if (signal?.aborted) return void (run.reason = 'aborted');
        if (count >= maxTokens) return void (run.reason = 'length');
        const id = sample(logits, { temperature, topK, topP }, rand);
        if (eos.has(id)) return void (run.reason = 'eos');
        onToken?.(id);
        yield id;
        if (md.max_cache_len !== null && used >= md.max_cache_len) return void (run.reason = 'capacity');
        logits = await model.decode(new Tensor('int64', BigInt64Array.of(BigInt(id)), [1, 1]));
        used++;
      }
    },
  };
  return run;
}
