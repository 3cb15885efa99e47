"""tandem.generate (lm.py, as web/lm.js): token ids from a loaded language-model program (tandem.load of a file that
tandem.transformers.export_causal_lm or `python -m tandem export` wrote: prefill, decode, decode_topk,
reset; metadata max_cache_len, max_prompt_len, position_state, eos_token_id), as the JS package's
generate() (web/lm.js) makes them: the same prompt feeding, the same ranking of equal logits, and
with the same seed the same samples (its mulberry32 generator).
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Union

import torch

from .errors import TandemError
from .recipes.causal_lm import prefill


def _invalid(message: str) -> TandemError:
    return TandemError("TDM_ERR_INVALID_ARGUMENT", f"generate(): {message}")


class _Random:
    """Numbers in [0, 1) from mulberry32, as web/lm.js's random(seed); `state` continues the same
    sequence in a new generator (_Random(r.state), a chat's fork)."""

    def __init__(self, seed: int):
        self.state = int(seed) & 0xFFFFFFFF

    def __call__(self) -> float:
        def imul(x: int, y: int) -> int:
            return (x * y) & 0xFFFFFFFF

        a = self.state = (self.state + 0x6D2B79F5) & 0xFFFFFFFF
        t = imul(a ^ (a >> 15), a | 1)
        t ^= (t + imul(t ^ (t >> 7), t | 61)) & 0xFFFFFFFF
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296


def _best(logits: torch.Tensor, n: int) -> list:
    """The ids of the n largest logits, largest first: NaN above every number, equal values by the
    lower id (the order of the runtime's topk, which decode_topk's output has)."""
    x = logits.reshape(-1).double()
    nan = torch.isnan(x)
    first = torch.nonzero(nan).reshape(-1).tolist()
    if len(first) >= n:
        return first[:n]
    if n == 1:
        return [int(torch.argmax(x))]  # the first of equal largest values
    rest = torch.nonzero(~nan).reshape(-1)
    order = torch.sort(x[rest], descending=True, stable=True).indices[: n - len(first)]
    return first + rest[order].tolist()


def _needed(temperature: float, top_k: int, vocab: int) -> int:
    """How many of the best logits sampling with these options reads."""
    if not temperature > 0:
        return 1
    return min(top_k, vocab) if top_k > 0 else vocab


def _choose(values: list, ids: list, temperature: float, top_k: int, top_p: float, rand) -> int:
    """A token id from candidates ranked best first (values[k] the logit of ids[k]), as web/lm.js's choose()."""
    if not temperature > 0:
        return ids[0]
    n = min(top_k, len(ids)) if top_k > 0 else len(ids)
    p = [math.exp((values[k] - values[0]) / temperature) for k in range(n)]
    total = sum(p)
    p = [v / total for v in p]
    keep = n
    if top_p < 1:
        mass, keep = 0.0, 0
        while keep < n and mass < top_p:
            mass += p[keep]
            keep += 1
        p = [v / mass for v in p[:keep]]
    r = rand()
    for k in range(keep):
        r -= p[k]
        if r < 0:
            return ids[k]
    return ids[keep - 1]


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
    vocab = logits.shape[-1]
    k = md.get("sample_top_k") or 0
    on_device = "decode_topk" in model.methods and 0 < _needed(temperature, top_k, vocab) <= k
    rand = _Random(seed)

    def from_logits():
        best = _best(logits, _needed(temperature, top_k, vocab))
        row = logits.reshape(-1)
        return _choose([float(row[i]) for i in best], best, temperature, top_k, top_p, rand)

    pick, out = from_logits, []
    while len(out) < max_new_tokens:
        token = pick()
        if token in stop:
            break
        out.append(token)
        if on_token is not None:
            on_token(token)
        if max_cache_len is not None and used >= max_cache_len:
            break
        # the id goes into the cache, the last one too (as in JS): the model is ready to continue
        step = torch.tensor([[token]], dtype=torch.long)
        if on_device:
            values, top = model.call("decode_topk", step)
            values, top = values.reshape(-1).tolist(), top.reshape(-1).tolist()
            pick = lambda values=values, top=top: _choose(values, top, temperature, top_k, top_p, rand)  # noqa: E731
        else:
            logits = model.call("decode", step)
            pick = from_logits
        used += 1
    return out
