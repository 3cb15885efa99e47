"""tandem.generate (lm.py, as web/lm.js): token ids from a loaded language-model program (tandem.load of a file that
tandem.transformers.export_causal_lm or `python -m tandem export` wrote: prefill, decode, decode_topk,
reset; metadata max_cache_len, max_prompt_len, position_state, eos_token_id), as the JS package's
generate() (web/lm.js) makes them: the same prompt feeding, the same ranking of equal logits, and
with the same seed the same samples (its mulberry32 generator).
"""

from __future__ import annotations

from typing import Callable, Iterable, Union

import torch

from .decoding import Picker, Random, prefill
from .errors import TandemError


def _invalid(message: str) -> TandemError:
    return TandemError("TDM_ERR_INVALID_ARGUMENT", f"generate(): {message}")


def _is_messages(prompt) -> bool:
    return isinstance(prompt, (list, tuple)) and len(prompt) > 0 and all(isinstance(m, dict) and "role" in m for m in prompt)


def _prompt_ids(model, prompt) -> list:
    """Token ids as given; text through the file's tokenizer (as tokenizer(text), special tokens
    added); chat messages [{"role", "content"}] through its chat template with the generation prompt."""
    if isinstance(prompt, str) or _is_messages(prompt):
        if model.tokenizer is None:
            raise _invalid(
                f"the prompt is {'text' if isinstance(prompt, str) else 'chat messages'}, but the file carries no tokenizer; "
                "export the checkpoint with `python -m tandem export` (which stores its tokenizer), or give token ids"
            )
        if isinstance(prompt, str):
            return list(model.tokenizer(prompt)["input_ids"])
        return list(model.tokenizer.apply_chat_template(list(prompt), tokenize=True, add_generation_prompt=True, return_dict=False))
    if isinstance(prompt, torch.Tensor):
        if prompt.dtype.is_floating_point or prompt.dtype.is_complex or prompt.dim() > 2 or (prompt.dim() == 2 and prompt.shape[0] != 1):
            raise _invalid(f"prompt_ids must be integer ids [n] or [1, n], given {prompt.dtype}{list(prompt.shape)}")
        return [int(t) for t in prompt.reshape(-1)]
    try:
        return [int(t) for t in prompt]
    except (TypeError, ValueError):
        raise _invalid("prompt_ids must be a list of token ids, a tensor of them, or text (with a file that carries a tokenizer)") from None


def generate(
    model,
    prompt_ids: Union[Iterable[int], torch.Tensor, str],
    max_new_tokens: int = 64,
    *,
    eos: Union[int, Iterable[int], None] = None,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    on_token: Callable[[int], None] | None = None,
) -> list:
    """The ids `model` generates after `prompt_ids` (a list or tensor of token ids; when the file
    carries a tokenizer also text, or chat messages [{"role": ..., "content": ...}] that its chat
    template turns into a prompt with the generation prompt), at most max_new_tokens of them, the
    end-of-sequence id not included.

    The prompt is appended to the model's cache as it is (call model.reset() first for a new
    conversation), in pieces of at most max_prompt_len tokens. Generation stops at an id of `eos`
    (default: the file's eos_token_id; eos=() never stops early), after max_new_tokens, or when the
    KV cache is full. temperature=0 (the default) is greedy: the first largest logit; else a sample
    of softmax(logits / temperature) from the top_k largest (0: all) and the smallest set of them
    whose probability reaches top_p, drawn with `seed` (the JS generate() draws the same ids with
    the same seed). Each step runs decode_topk when the program has it and the sampling reads no
    more than its K best logits, else decode: the ids are the same either way. on_token(id) is
    called with each id as it is made."""
    md = model.metadata
    missing = [k for k in ("max_cache_len", "max_prompt_len", "position_state") if k not in md]
    if "decode" not in model.methods or missing:
        raise _invalid(
            "the program is not a language model of the causal-LM recipe (it has no decode method, or no "
            f"metadata {', '.join(missing) or 'it needs'}); export it with tandem.transformers.export_causal_lm"
        )
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise _invalid(f"max_new_tokens must be an int >= 0, given {max_new_tokens!r}")
    if not (isinstance(temperature, (int, float)) and temperature >= 0):
        raise _invalid(f"temperature must be a number >= 0, given {temperature!r}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise _invalid(f"top_k must be an int >= 0 (0: every token), given {top_k!r}")
    if not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
        raise _invalid(f"top_p must be a number in (0, 1], given {top_p!r}")
    ids = _prompt_ids(model, prompt_ids)
    if not ids:
        raise _invalid("the prompt is empty; give at least one token id")
    if eos is None:
        eos = md.get("eos_token_id")
    stop = {int(t) for t in ([] if eos is None else [eos] if isinstance(eos, int) else eos)}

    max_cache_len = md["max_cache_len"]
    logits = prefill(model, torch.tensor([ids], dtype=torch.long))
    used = int(model.read_state(md["position_state"]))
    picker, out = Picker(model, logits, temperature, top_k, top_p, Random(seed)), []
    while len(out) < max_new_tokens:
        token = picker.pick()
        if token in stop:
            break
        out.append(token)
        if on_token is not None:
            on_token(token)
        if max_cache_len is not None and used >= max_cache_len:
            break
        # the id goes into the cache, the last one too (as in JS): the model is ready to continue
        picker.feed(token)
        used += 1
    return out
