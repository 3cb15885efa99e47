"""The uncached recipe: a causal LM whose cache cannot be exported (its forward takes no transformers
Cache, as GPT-1's, or its cache path does not trace) run by its own forward with no cache at all
(export_causal_lm falls back to it; imports transformers only when called).

The program state is the token ids seen since reset, in a buffer of max_cache_len int64 ids
(`tokens`), and their count (`position`). `prefill` (1 to max_prompt_len tokens) and `decode` (one)
append to the buffer and run the model's forward (use_cache=False) over the whole buffer, max_cache_len
positions, padding included, and return the logits at position count - 1: in a causal model a position
is unaffected by the ones after it, so the padding changes nothing and every shape is static. Each
call costs a full forward over max_cache_len tokens, whatever the prompt's length. A call that would
write past max_cache_len fails with TDM_ERR_INDEX and leaves the state unchanged.

Before exporting, `check_causal` makes sure the model is causal: the logits at the prompt's positions
with two different paddings after it must be the same, and the recipe's own steps (run eagerly) must
give transformers' generate's logits; else an ExportError (NotCausal) says why, so a bidirectional
model is never exported to give silently wrong values.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

from ..ir import ExportError


class NotCausal(ExportError):
    """The model's forward over the padded buffer does not give a causal LM's logits."""


class UncachedLM(nn.Module):
    """The model's forward over a fixed buffer of token ids: `step` appends tokens [1, n] and returns
    the logits [1, vocab] at the last one; `reset` empties the buffer."""

    def __init__(self, model: nn.Module, max_cache_len: int):
        super().__init__()
        self.model = model
        self.max_cache_len = max_cache_len
        self.register_buffer("tokens", torch.zeros(1, max_cache_len, dtype=torch.long))  # ids seen since reset, then padding
        self.register_buffer("position", torch.zeros((), dtype=torch.long))  # how many ids the buffer holds
        params = inspect.signature(model.forward).parameters
        # no cache of any kind (XLNet's memories are use_mems); the logits of one position where it can pick it
        self.options = {k: False for k in ("use_cache", "use_mems") if k in params}
        self.pick = "logits_to_keep" in params

    def forward_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """The model's logits [1, max_cache_len, vocab] over a whole buffer, as step runs it."""
        return self.model(input_ids=tokens, **self.options).logits

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        at = self.position + torch.arange(tokens.shape[1])
        self.tokens.index_copy_(1, at, tokens)  # past max_cache_len: TDM_ERR_INDEX, nothing written
        self.position.add_(tokens.shape[1])
        last = (self.position - 1).reshape(1)
        if self.pick:  # transformers' logits_to_keep takes the positions to keep as a 1-D tensor
            out = self.model(input_ids=self.tokens, logits_to_keep=last, **self.options).logits
            return out.reshape(1, -1)
        return self.forward_logits(self.tokens).index_select(1, last)[:, 0]

    def step_topk(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, ids = torch.topk(self.step(tokens), self.top_k, dim=-1)
        return values, ids

    def reset(self) -> None:
        self.tokens.zero_()
        self.position.zero_()


def _scale(x: torch.Tensor) -> float:
    return max(1.0, float(x.abs().max()))


def check_causal(lm: UncachedLM, vocab: int, max_prompt_len: int) -> None:
    """Raises NotCausal (naming the model and what differs) unless the model's forward over the padded
    buffer is causal and the recipe's steps give what transformers' generate gives. lm is left reset."""
    from transformers import GenerationConfig

    name = type(lm.model).__name__
    size = lm.max_cache_len
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        # 1. the logits at the first c positions with two different paddings after them
        c = max(1, size // 2)
        prompt = torch.randint(0, vocab, (1, c), generator=g)
        pads = [torch.zeros(1, size - c, dtype=torch.long), torch.randint(0, vocab, (1, size - c), generator=g)]
        a, b = (lm.forward_logits(torch.cat([prompt, pad], dim=1))[:, :c] for pad in pads)
        diff = float((a - b).abs().max())
        if c < size and not diff <= 1e-6 * _scale(a):  # a causal model's are the same, bit for bit
            raise NotCausal(
                f"{name} is not a causal LM: the logits of its first {c} positions change by {diff:.3g} when the tokens after "
                f"them change (its forward reads later positions: it attends to them, or counts them), so the uncached recipe, "
                f"which runs it over a padded buffer of max_cache_len tokens, would give wrong values"
            )
        # 2. the recipe's steps, eagerly, against transformers' generate (its cache, its masks) on the same tokens
        n = min(max_prompt_len, max(1, size - 3), 5)
        prompt = torch.randint(0, vocab, (1, n), generator=g)
        new = min(3, size - n + 1)
        how = GenerationConfig(
            do_sample=False, max_new_tokens=new, eos_token_id=None, pad_token_id=0, output_logits=True, return_dict_in_generate=True
        )
        try:
            out = lm.model.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=how)
        except Exception as e:
            raise NotCausal(
                f"{name}: transformers' generate fails on it ({type(e).__name__}: {' '.join(str(e).split())[:200]}), "
                "so the uncached recipe has nothing to check its steps against"
            ) from e
        want = torch.cat(list(out.logits))  # [new, vocab]
        lm.reset()
        got = [lm.step(prompt)]
        for t in out.sequences[0, n : n + len(out.logits) - 1].tolist():
            got.append(lm.step(torch.tensor([[t]])))
        lm.reset()
        got = torch.cat(got)
        diff = float((got - want).abs().max())
        if not diff <= 1e-3 * _scale(want):
            raise NotCausal(
                f"{name}: its forward over a padded buffer of token ids (no cache) gives logits {diff:.3g} away from "
                f"transformers' generate's (largest {_scale(want):.3g}), so the uncached recipe would give wrong values"
            )
