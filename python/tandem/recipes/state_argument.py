"""A causal LM that takes its past as a forward argument and gives it back in its output under the
same name (RWKV's `state`: a list of tensors of fixed shapes), not as a transformers Cache: the list
becomes program state (export_causal_lm uses it; imports transformers only when called)."""

from __future__ import annotations

import inspect

import torch
from torch import nn

NAMES = ("state", "mems")  # forward arguments a model may keep its past in


def state_argument(model: nn.Module) -> str | None:
    """The name of the forward argument the model keeps its past in, when its forward takes no Cache
    and the output gives the argument back as tensors of the shapes that went in; else None."""
    params = inspect.signature(model.forward).parameters
    if any(k in params for k in ("cache", "past_key_values")):
        return None
    name = next((k for k in NAMES if k in params), None)
    if name is None:
        return None
    try:
        with torch.no_grad():
            first = getattr(model(input_ids=torch.zeros(1, 1, dtype=torch.long), use_cache=True), name, None)
            if not _tensors(first):
                return None
            shapes = [t.shape for t in first]
            second = getattr(model(input_ids=torch.zeros(1, 1, dtype=torch.long), use_cache=True, **{name: first}), name, None)
    except Exception:
        return None
    return name if _tensors(second) and [t.shape for t in second] == shapes else None


def _tensors(x) -> bool:
    return isinstance(x, (list, tuple)) and len(x) > 0 and all(isinstance(t, torch.Tensor) for t in x)


class TokenSteps(nn.Module):
    """A causal LM run one token at a time by its `_one` (each step advances a recurrent state): a step of
    n tokens is n such steps; `step_topk` gives its `top_k` largest logits and their ids."""

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        logits = None
        for t in range(tokens.shape[1]):
            logits = self._one(tokens[:, t : t + 1])
        return logits

    def step_topk(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, ids = torch.topk(self.step(tokens), self.top_k, dim=-1)
        return values, ids


class StateArgumentLM(TokenSteps):
    """The model's state list as buffers: a step of one token passes them to the model's forward as the
    argument `name` and copies back what its output gives under that name; a prefill of n tokens is n
    such steps (causal_lm.py adds `prefill`: prefill_steps, a fixed graph for every n). reset restores the state the model starts
    from when given none, as its first module to receive the list receives it (RWKV's zeros and its
    running maximum's -1e30), not zeros."""

    def __init__(self, model: nn.Module, name: str):
        super().__init__()
        self.model = model
        self.name = name
        first = []

        def seen(module, args, kwargs):
            got = kwargs.get(name)
            if not first and _tensors(got):
                first.append([t.detach().clone() for t in got])

        inner = [m.register_forward_pre_hook(seen, with_kwargs=True) for m in model.modules() if m is not model]
        try:
            with torch.no_grad():
                model(input_ids=torch.zeros(1, 1, dtype=torch.long), use_cache=True)
        finally:
            for h in inner:
                h.remove()
        if not first:
            raise ValueError(f"{type(model).__name__}: no module received the {name!r} the model made")
        self.count = len(first[0])
        for i, t in enumerate(first[0]):
            self.register_buffer(f"initial_{i}", t, persistent=False)
            self.register_buffer(f"state_{i}", t.clone())
        self.register_buffer("position", torch.zeros((), dtype=torch.long))  # tokens seen since reset

    def _state(self) -> list:
        return [getattr(self, f"state_{i}") for i in range(self.count)]

    def _one(self, token: torch.Tensor) -> torch.Tensor:
        state = [t.clone() for t in self._state()]  # the model writes into the list it is given
        out = self.model(input_ids=token, use_cache=True, **{self.name: state})
        for t, new in zip(self._state(), getattr(out, self.name)):
            t.copy_(new)
        self.position.add_(1)
        return out.logits[:, -1]

    def kept_state(self) -> list:
        """What a padding step of prefill_steps must leave as it was: the state and the position."""
        return self._state() + [self.position]

    def reset(self) -> None:
        for i, t in enumerate(self._state()):
            t.copy_(getattr(self, f"initial_{i}"))
        self.position.zero_()
