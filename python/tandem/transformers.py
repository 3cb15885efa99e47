"""Recipes for Hugging Face transformers models (imports transformers only when called).

    program = tandem.transformers.export_causal_lm(model, max_cache_len=512, max_prompt_len=64)

A decoder-only LM becomes one program whose state is its static KV cache (transformers'
StaticCache, exported as it is: the cache object's tensors are state):
- `prefill(tokens [1, n])`, 1 <= n <= max_prompt_len (a dynamic dim 'n'): appends n tokens to the
  cache and returns the last position's logits [1, vocab]; each call runs at its own length;
- `decode(token [1, 1])`: appends one token, returns its logits [1, vocab];
- `reset()`: empties the cache.
The position lives in state: callers never pass it. A call that would write past max_cache_len
fails with TDM_ERR_INDEX and leaves the state unchanged.
"""
from __future__ import annotations

import torch
from torch import nn

from .export import Method, export
from .ir import ExportError
from .program import Program


def prefill_chunks(max_prompt_len: int) -> list[int]:
    """The prefill lengths of programs exported before prefill had a dynamic length (prefill_<n>
    methods), largest first (1 is decode's); `prefill()` still runs such programs."""
    sizes = {max_prompt_len} if max_prompt_len > 1 else set()
    n = 2
    while n < max_prompt_len:
        sizes.add(n)
        n *= 2
    return sorted(sizes, reverse=True)


def split_prompt(n: int, chunks: list[int]) -> list[int]:
    """n as a sum of chunk lengths, largest first, ending with 1s (decode's)."""
    out = []
    for c in list(chunks) + [1]:
        while n >= c:
            out.append(c)
            n -= c
    return out


class CausalLM(nn.Module):
    """A decoder-only LM with its StaticCache: prefill/decode append to the cache, reset empties it."""

    def __init__(self, model: nn.Module, max_cache_len: int):
        super().__init__()
        from transformers import StaticCache
        from transformers.cache_utils import StaticLayer
        from transformers.configuration_utils import get_head_shapes

        self.model = model
        config = model.config.get_text_config(decoder=True)
        self.cache = StaticCache(config=config, max_cache_len=max_cache_len)
        for i, layer in enumerate(self.cache.layers):
            if type(layer) is not StaticLayer:  # sliding-window and shared-KV layers: a plain static layer
                self.cache.layers[i] = StaticLayer(max_cache_len)
        heads, head_dim = get_head_shapes(config)
        self.cache.early_initialization(1, heads, head_dim, torch.float32, torch.device("cpu"))

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=tokens, cache=self.cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1]

    def reset(self) -> None:
        for layer in self.cache.layers:
            layer.keys.zero_()
            layer.values.zero_()
            layer.cumulative_length.zero_()


def export_causal_lm(model: nn.Module, max_cache_len: int, max_prompt_len: int, metadata: dict | None = None,
                     **options) -> Program:
    """Export a transformers decoder-only LM (e.g. LlamaForCausalLM, Qwen2, Gemma, Phi-3, GPT-2) as
    prefill (of 1 to max_prompt_len tokens), decode and reset over its static KV cache (see the
    module's docstring).
    `options` go to tandem.export, e.g. quantize="int8" | "int4", quantize_group, quantize_skip."""
    if not 1 <= max_prompt_len <= max_cache_len:
        raise ExportError(f"max_prompt_len must be in [1, max_cache_len={max_cache_len}], got {max_prompt_len}")
    model = model.eval().float()
    config = model.config.get_text_config(decoder=True)
    lm = CausalLM(model, max_cache_len)
    example = min(max(max_prompt_len - 1, 2), max_prompt_len)  # not 1: torch.export would specialize the dim to it
    n = torch.export.Dim("n", min=1, max=max_prompt_len)
    methods = {"prefill": Method(lm.step, (torch.zeros(1, example, dtype=torch.long),), dynamic_shapes=({1: n},))}
    methods["decode"] = Method(lm.step, (torch.zeros(1, 1, dtype=torch.long),))
    methods["reset"] = Method(lm.reset, ())
    return export(None, methods, metadata={
        "model_type": getattr(config, "model_type", ""),
        "vocab_size": int(config.vocab_size),
        "num_layers": int(config.num_hidden_layers),
        "max_cache_len": int(max_cache_len),
        "max_prompt_len": int(max_prompt_len),
        "position_state": "cache.layers.0.cumulative_length",
        "bos_token_id": _token_id(getattr(config, "bos_token_id", None)),
        "eos_token_id": _token_id(getattr(config, "eos_token_id", None)),
        **(metadata or {}),
    }, **options)


def _token_id(v):
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v]
    return None if v is None else int(v)


def prefill(model, tokens: torch.Tensor) -> torch.Tensor:
    """Append tokens [1, n] (1 <= n <= max_prompt_len) to a loaded model's cache (tandem.load) with one
    `prefill` call (programs of earlier versions: their prefill chunks, then decode for a last single
    token); returns the last position's logits. A prompt that does not fit in the cache raises
    TDM_ERR_INDEX before anything runs."""
    from .runtime import TandemError

    md = model.metadata
    n = tokens.shape[-1]
    if not 1 <= n <= md["max_prompt_len"]:
        raise TandemError("TDM_ERR_INVALID_ARGUMENT", f"prefill: {n} tokens; give 1 to {md['max_prompt_len']} (max_prompt_len)")
    used = int(model.read_state(md["position_state"]))
    if used + n > md["max_cache_len"]:
        raise TandemError("TDM_ERR_INDEX", f"prefill: {n} tokens do not fit: {used} of {md['max_cache_len']} cache positions "
                          "are in use (call reset())")
    if "prefill" in model.methods:
        return model.call("prefill", tokens.reshape(1, -1))
    at, logits = 0, None
    for c in split_prompt(n, md["prefill_chunks"]):
        logits = model.call("decode" if c == 1 else f"prefill_{c}", tokens.reshape(1, -1)[:, at:at + c])
        at += c
    return logits
