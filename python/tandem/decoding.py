"""Running a loaded language-model program (tandem.load of a file tandem.transformers or
`python -m tandem export` wrote): feeding a prompt of any length, and picking the next token as
web/lm.js does (the same ranking of equal logits; with the same seed, the same samples from its
mulberry32 generator). tandem.generate (lm.py) and chat sessions (chat.py) run on these; this module
imports nothing of the exporter.
"""

from __future__ import annotations

import math

import torch

from .errors import TandemError


def split_prompt(n: int, chunks: list[int]) -> list[int]:
    """n as a sum of chunk lengths, largest first, ending with 1s (decode's)."""
    out = []
    for c in list(chunks) + [1]:
        while n >= c:
            out.append(c)
            n -= c
    return out


def prefill(model, tokens: torch.Tensor) -> torch.Tensor:
    """Append tokens [1, n] (any n >= 1) to a loaded model's cache (tandem.load): with `prefill`
    calls of at most max_prompt_len tokens each, in order, as JS generate() feeds a long prompt (a
    program without a dynamic `prefill`, one of an earlier version: its prefill_<n>
    chunks, then decode for a last single token); returns the last position's logits. A prompt that
    does not fit in the cache raises TDM_ERR_INDEX before anything runs."""
    md = model.metadata
    tokens = tokens.reshape(1, -1)
    n = tokens.shape[-1]
    if n < 1:
        raise TandemError("TDM_ERR_INVALID_ARGUMENT", "prefill: no tokens; give at least one")
    used = int(model.read_state(md["position_state"]))
    if md["max_cache_len"] is not None and used + n > md["max_cache_len"]:
        raise TandemError(
            "TDM_ERR_INDEX", f"prefill: {n} tokens do not fit: {used} of {md['max_cache_len']} cache positions are in use (call reset())"
        )
    logits, step = None, int(md["max_prompt_len"])
    for at in range(0, n, step):
        piece = tokens[:, at : at + step]
        if "prefill" in model.methods:
            logits = model.call("prefill", piece)
            continue
        done = 0
        for c in split_prompt(piece.shape[-1], md["prefill_chunks"]):
            logits = model.call("decode" if c == 1 else f"prefill_{c}", piece[:, done : done + c])
            done += c
    return logits


class Random:
    """Numbers in [0, 1) from mulberry32, as web/lm.js's random(seed); `state` continues the same
    sequence in a new generator (Random(r.state), a chat's fork)."""

    def __init__(self, seed: int):
        self.state = int(seed) & 0xFFFFFFFF

    def __call__(self) -> float:
        def imul(x: int, y: int) -> int:
            return (x * y) & 0xFFFFFFFF

        a = self.state = (self.state + 0x6D2B79F5) & 0xFFFFFFFF
        t = imul(a ^ (a >> 15), a | 1)
        t ^= (t + imul(t ^ (t >> 7), t | 61)) & 0xFFFFFFFF
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296


def best(logits: torch.Tensor, n: int) -> list:
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


def needed(temperature: float, top_k: int, vocab: int) -> int:
    """How many of the best logits sampling with these options reads."""
    if not temperature > 0:
        return 1
    return min(top_k, vocab) if top_k > 0 else vocab


def choose(values: list, ids: list, temperature: float, top_k: int, top_p: float, rand) -> int:
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


class Picker:
    """The next-token step of generate and of a chat reply: pick() chooses a token from the last
    logits (a prompt's, or decode's), feed(token) appends it to the cache. With decode_topk in the
    program and sampling that reads no more than its k best, feed runs it and pick() ranks only those
    (the logits never leave the runtime); otherwise feed runs decode."""

    def __init__(self, model, logits: torch.Tensor, temperature: float, top_k: int, top_p: float, rand):
        self._model, self._rand = model, rand
        self._options = (temperature, top_k, top_p)
        self._vocab = logits.shape[-1]
        k = model.metadata.get("sample_top_k") or 0
        self._on_device = "decode_topk" in model.methods and 0 < needed(temperature, top_k, self._vocab) <= k
        self._logits, self._ranked = logits, None

    def pick(self) -> int:
        temperature, top_k, top_p = self._options
        if self._ranked is not None:
            values, ids = self._ranked
        else:
            ids = best(self._logits, needed(temperature, top_k, self._vocab))
            row = self._logits.reshape(-1)
            values = [float(row[i]) for i in ids]
        return choose(values, ids, temperature, top_k, top_p, self._rand)

    def feed(self, token: int) -> None:
        step = torch.tensor([[token]], dtype=torch.long)
        if self._on_device:
            values, ids = self._model.call("decode_topk", step)
            self._ranked = (values.reshape(-1).tolist(), ids.reshape(-1).tolist())
        else:
            self._logits = self._model.call("decode", step)
