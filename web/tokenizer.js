// tokenizer.js — the tokenizer a .tandem file carries (the metadata entry 'tokenizer' that
// `python -m tandem export` stores: transformers' tokenizer.json, its special tokens and chat
// template; docs/format.md), as `model.tokenizer`. Built on the Hugging Face libraries, not a
// reimplementation: @huggingface/tokenizers (encode/decode) and @huggingface/jinja (chat templates),
// imported only when a file has a tokenizer. In a browser without a bundler, map the two names to
// their files with an import map (tests/browser/page.html does).
import { TandemError } from './errors.js';

let libraries;

/** The two libraries, imported once (a rejection is not cached: a later load retries). */
function importLibraries() {
  libraries ??= Promise.all([import('@huggingface/tokenizers'), import('@huggingface/jinja')]).catch((e) => {
    libraries = undefined;
    throw new TandemError('TDM_ERR_NOT_FOUND',
      'the file carries a tokenizer, and loading it needs the packages @huggingface/tokenizers and @huggingface/jinja, which could ' +
      `not be imported (${e.message}); install them (npm install, they are dependencies of tandem-runtime), map them in the page's ` +
      'import map, or load with { tokenizer: false }');
  });
  return libraries;
}

const SPECIAL = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'];

/** A Tokenizer from the entry's JSON text. */
export async function createTokenizer(text) {
  let entry;
  try {
    entry = JSON.parse(text);
  } catch {
    throw new TandemError('TDM_ERR_MALFORMED', "metadata 'tokenizer' is not JSON: the file is corrupt");
  }
  if (!entry || entry.version !== 1 || typeof entry.json !== 'object' || !entry.json || typeof entry.config !== 'object' || !entry.config) {
    throw new TandemError('TDM_ERR_MALFORMED',
      "metadata 'tokenizer' is not a tokenizer entry of version 1 ({ version: 1, json, config }): the file is corrupt or newer than this " +
      'tandem');
  }
  const [{ Tokenizer: HFTokenizer }, { Template }] = await importLibraries();
  let impl;
  try {
    impl = new HFTokenizer(entry.json, entry.config);
  } catch (e) {
    throw new TandemError('TDM_ERR_MALFORMED', `metadata 'tokenizer': @huggingface/tokenizers cannot build it: ${e.message}`);
  }
  return new Tokenizer(impl, entry.config, Template);
}

const toNumbers = (ids, what) => {
  const out = Array.from(ids ?? [], Number);
  if (!ArrayBuffer.isView(ids) && !Array.isArray(ids) || out.some((i) => !Number.isSafeInteger(i) || i < 0)) {
    throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `${what}: token ids must be an array (or typed array) of non-negative integers`);
  }
  return out;
};

/** A model's tokenizer: encode/decode as transformers' tokenizer does, and its chat template. */
export class Tokenizer {
  #impl; #config; #Template; #templates = new Map();

  constructor(impl, config, Template) {
    this.#impl = impl;
    this.#config = config;
    this.#Template = Template;
    const id = (token) => (token == null ? null : impl.token_to_id(token) ?? null);
    /** The special tokens by role ({ bos_token: '<s>', eos_token: ..., ... }; null where the tokenizer has none). */
    this.specialTokens = Object.freeze(Object.fromEntries(SPECIAL.map((k) => [k, config[k] ?? null])));
    this.bosTokenId = id(config.bos_token);
    this.eosTokenId = id(config.eos_token);
    Object.freeze(this);
  }

  /** The chat template(s) the file carries: a string, an object of named templates, or null. */
  get chatTemplate() { return this.#config.chat_template ?? null; }

  /** Token ids of `text`, as transformers' `tokenizer(text)["input_ids"]` (special tokens added by the
   * post-processor, e.g. a BOS, unless addSpecialTokens is false). */
  encode(text, { addSpecialTokens = true } = {}) {
    if (typeof text !== 'string') throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
      `encode(): text must be a string, given ${typeof text}`);
    return this.#impl.encode(text, { add_special_tokens: addSpecialTokens }).ids;
  }

  /** The text of `ids`, as transformers' `tokenizer.decode(ids, skip_special_tokens)`. */
  decode(ids, { skipSpecialTokens = false } = {}) {
    const list = toNumbers(ids, 'decode()');
    return list.length === 0 ? '' : this.#impl.decode(list, { skip_special_tokens: skipSpecialTokens });
  }

  /** The chat template applied to `messages` ([{ role, content }]), as transformers'
   * `apply_chat_template(messages, tokenize=False, add_generation_prompt=...)`: the text, or with
   * { tokenize: true } its ids (encoded without adding special tokens: the template writes them).
   * Options: addGenerationPrompt, tokenize, chatTemplate (the name of one of several templates),
   * tools, documents, and any other variables the template reads (`variables`). */
  applyChatTemplate(messages, { addGenerationPrompt = false, tokenize = false, chatTemplate, tools, documents, variables = {} } = {}) {
    if (!Array.isArray(messages)) throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
      'applyChatTemplate(): messages must be an array of { role, content }');
    const source = this.#templateSource(chatTemplate, tools);
    let template = this.#templates.get(source);
    if (!template) {
      try {
        template = new this.#Template(source);
      } catch (e) {
        throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `applyChatTemplate(): the chat template does not parse: ${e.message}`);
      }
      this.#templates.set(source, template);
    }
    let text;
    try {
      text = template.render({
        ...Object.fromEntries(Object.entries(this.specialTokens).filter(([, v]) => v !== null)),
        ...(this.#config.additional_special_tokens ? { additional_special_tokens: this.#config.additional_special_tokens } : {}),
        // as transformers passes None
        messages, add_generation_prompt: addGenerationPrompt, tools: tools ?? null, documents: documents ?? null,
        ...variables, // raise_exception and strftime_now are @huggingface/jinja's own globals

      });
    } catch (e) {
      if (e instanceof TandemError) throw e;
      throw new TandemError('TDM_ERR_INVALID_ARGUMENT', `applyChatTemplate(): rendering the chat template failed: ${e.message}`);
    }
    return tokenize ? this.encode(text, { addSpecialTokens: false }) : text;
  }

  #templateSource(name, tools) {
    const t = this.#config.chat_template;
    if (t == null) throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
      'applyChatTemplate(): the tokenizer has no chat template (its tokenizer_config.json had none)');
    if (typeof t === 'string') return t;
    // several named templates (a dict, or transformers' list of { name, template }), as transformers picks one
    const named = new Map(Array.isArray(t) ? t.map((x) => [x.name, x.template]) : Object.entries(t));
    const pick = name ?? (tools && named.has('tool_use') ? 'tool_use' : 'default');
    if (!named.has(pick)) throw new TandemError('TDM_ERR_INVALID_ARGUMENT',
      `applyChatTemplate(): no chat template '${pick}'; the tokenizer has ${[...named.keys()].map((k) => `'${k}'`).join(', ')} ` +
      '(pass { chatTemplate: name })');
    return named.get(pick);
  }

  /** An incremental decoder: push(id) returns the text that id completes ('' while a multi-byte
   * character or a word is still open), flush() the rest. The pieces joined equal decode(all ids). */
  streamDecoder({ skipSpecialTokens = true } = {}) {
    const ids = [];
    let prefix = 0, read = 0;
    const decode = (from, to) => this.decode(ids.slice(from, to), { skipSpecialTokens });
    return {
      push: (id) => {
        ids.push(...toNumbers([id], 'streamDecoder().push()'));
        const before = decode(prefix, read), after = decode(prefix);
        // a trailing U+FFFD: the last token ends inside a UTF-8 sequence; wait for the next one
        if (after.length <= before.length || after.endsWith('\uFFFD') || !after.startsWith(before)) return '';
        prefix = read;
        read = ids.length;
        return after.slice(before.length);
      },
      flush: () => {
        const before = decode(prefix, read), after = decode(prefix);
        prefix = read = ids.length;
        return after.length > before.length ? after.slice(before.length) : '';
      },
    };
  }
}
