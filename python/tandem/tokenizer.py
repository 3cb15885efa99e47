"""The tokenizer a .tandem file carries: transformers' fast tokenizer (its `tokenizer.json`), its special
tokens and its chat template, stored once as the metadata entry `tokenizer` (docs/format.md).

    entry = tandem.tokenizer.entry(AutoTokenizer.from_pretrained(folder))   # what the exporter stores
    tok = tandem.load("model.tandem").tokenizer                           # a PreTrainedTokenizerFast

The entry is a JSON object {"version": 1, "json": <tokenizer.json>, "config": {...}}: "json" is the
backend tokenizer exactly as transformers runs it (`tokenizer.backend_tokenizer.to_str()`, so a
post-processor the tokenizer class set up, e.g. for add_bos_token, is in it), "config" the
tokenizer_config.json values the JS and Python hosts need (special tokens, chat_template,
clean_up_tokenization_spaces, ...). Its added tokens are in "json" only (stored once).
"""

from __future__ import annotations

import json

from .errors import TandemError

ENTRY = "tokenizer"  # the metadata key
VERSION = 1

# tokenizer_config.json values kept in the entry's "config" (each when the tokenizer has it)
SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
CONFIG_KEYS = (
    "chat_template",
    "clean_up_tokenization_spaces",
    "model_max_length",
    "padding_side",
    "truncation_side",
    "split_special_tokens",
    "add_bos_token",
    "add_eos_token",
    "add_prefix_space",
    "tokenizer_class",
    "spaces_between_special_tokens",
    "do_lower_case",
    "remove_space",
    "legacy",
)


def _plain(v):
    """v as JSON values: an AddedToken as its text; None for what JSON cannot hold."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if v == v and abs(v) != float("inf") else None
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if hasattr(v, "content"):  # tokenizers.AddedToken
        return str(v.content)
    return None


def entry(tokenizer, config_file: dict | None = None) -> dict:
    """The metadata value for a transformers fast tokenizer (a PreTrainedTokenizerFast /
    TokenizersBackend, as AutoTokenizer loads it). `config_file`: the folder's tokenizer_config.json,
    whose other JSON values are kept too (the special tokens and chat template come from the tokenizer
    object, which has resolved chat_template.jinja and special_tokens_map.json)."""
    from .ir import ExportError

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not getattr(tokenizer, "is_fast", False):
        raise ExportError(
            f"the tokenizer is a {type(tokenizer).__name__}, not a fast tokenizer with a tokenizer.json; "
            "tandem stores transformers' fast tokenizers (convert it with "
            "AutoTokenizer.from_pretrained(folder, use_fast=True).save_pretrained(folder))"
        )
    config = {
        k: _plain(v)
        for k, v in (config_file or {}).items()
        if k not in ("added_tokens_decoder", "auto_map", "name_or_path", "tokenizer_file", "vocab_file")
    }
    for k in CONFIG_KEYS:
        v = getattr(tokenizer, k, None) if k != "tokenizer_class" else None
        if v is not None and _plain(v) is not None:
            config[k] = _plain(v)
    for k in SPECIAL:
        v = getattr(tokenizer, k, None)
        config[k] = None if v is None else str(v)
    extra = getattr(tokenizer, "extra_special_tokens", None) or getattr(tokenizer, "additional_special_tokens", None)
    if extra:
        config["additional_special_tokens"] = [str(t) for t in (extra.values() if isinstance(extra, dict) else extra)]
    # model_max_length is often 1e30 ("no limit"): not an integer JSON keeps exactly
    if not isinstance(config.get("model_max_length"), int) or config["model_max_length"] >= 2**53:
        config.pop("model_max_length", None)
    return {"version": VERSION, "json": json.loads(backend.to_str()), "config": config}


def check_entry(value) -> dict:
    """A stored entry, checked: a TandemError (MALFORMED) if it is not one tandem wrote."""
    if not (
        isinstance(value, dict)
        and value.get("version") == VERSION
        and isinstance(value.get("json"), dict)
        and isinstance(value.get("config"), dict)
    ):
        raise TandemError(
            "TDM_ERR_MALFORMED",
            f"metadata '{ENTRY}' is not a tokenizer entry of version {VERSION} "
            '({"version": 1, "json": {...}, "config": {...}}): the file is corrupt or newer than this tandem',
        )
    return value


def rebuild(value: dict):
    """A transformers PreTrainedTokenizerFast from a stored entry."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    value = check_entry(value)
    config = value["config"]
    kwargs = {k: config[k] for k in SPECIAL if config.get(k) is not None}
    for k in (
        "chat_template",
        "clean_up_tokenization_spaces",
        "model_max_length",
        "padding_side",
        "truncation_side",
        "split_special_tokens",
        "spaces_between_special_tokens",
    ):
        if config.get(k) is not None:
            kwargs[k] = config[k]
    if config.get("additional_special_tokens"):
        kwargs["additional_special_tokens"] = list(config["additional_special_tokens"])
    # add_bos_token / add_eos_token are not passed: the stored backend's post-processor already adds them
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(value["json"])), **kwargs)


def summary(value: dict) -> str:
    """One line on a stored entry (`python -m tandem inspect`)."""
    model = value.get("json", {}).get("model", {})
    vocab = model.get("vocab")
    ids = set(vocab.values()) if isinstance(vocab, dict) else set(range(len(vocab))) if isinstance(vocab, list) else set()
    added = [t.get("id") for t in value.get("json", {}).get("added_tokens") or [] if isinstance(t, dict)]
    n = len(ids | set(added))
    config = value.get("config", {})
    template = config.get("chat_template")
    chat = (
        f"a chat template of {len(template)} characters"
        if isinstance(template, str)
        else f"chat templates {sorted(template)}"
        if isinstance(template, dict)
        else "no chat template"
    )
    specials = ", ".join(f"{k.removesuffix('_token')} {config[k]!r}" for k in SPECIAL if config.get(k) is not None)
    return f"{model.get('type', '?')}, {n} tokens ({len(added)} added; {specials or 'no special tokens'}), {chat}"
