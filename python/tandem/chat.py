"""Chat sessions (Model.chat, as web/chat.js in JS): a conversation over a loaded language-model
program (tandem.transformers.export_causal_lm or `python -m tandem export`: prefill, decode,
decode_topk, reset; metadata max_cache_len, max_prompt_len, position_state, eos_token_id) that keeps
its KV cache between turns.

The session keeps the token ids its cache holds. A turn renders the whole conversation with the chat
template and takes the longest common token prefix with those ids: when the prefix covers the cache,
only the tokens after it are prefilled; otherwise the state goes back to the nearest snapshot
(save_state / load_state) at or before the prefix, or to the initial state, and is prefilled from
there. Snapshots are taken where a turn starts (undo(), a reply whose text encodes to other tokens)
and after a turn's prompt, with its logits (regenerate() prefills nothing). When the conversation and
the reply would not fit the cache, the oldest turns are dropped (a system prompt stays), and what
follows the first changed token is computed again. The tokens equal JS's for the same file, options
and seed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

import torch

from .decoding import Picker, Random, prefill
from .errors import TandemError


def _invalid(message: str) -> TandemError:
    return TandemError("TDM_ERR_INVALID_ARGUMENT", message)


@dataclass(frozen=True)
class ChatStats:
    """One turn's figures (Chat.stats), as JS's chat.stats with snake_case names."""

    prompt_tokens: int  # the rendered conversation before the reply
    cached_tokens: int  # of them, those the cache (or a snapshot) held
    prefill_tokens: int  # and those prefilled
    restored: str  # where the turn started: 'cache', 'snapshot' or 'reset'
    dropped_messages: int  # messages dropped from the start so that it fits the cache
    new_tokens: int
    reason: str  # 'eos', 'length' or 'capacity'
    ttft_ms: Optional[float]  # from the call to the first sampled token (None when none was)
    prefill_ms: float
    total_ms: float
    prefill_tokens_per_second: Optional[float]
    tokens_per_second: Optional[float]  # tokens after the first, per second after the first (None for fewer than 2)


def _check_sampling(what: str, max_new_tokens=None, temperature=None, top_k=None, top_p=None) -> None:
    if max_new_tokens is not None and (isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0):
        raise _invalid(f"{what}: max_new_tokens must be an int >= 0, given {max_new_tokens!r}")
    if temperature is not None and not (isinstance(temperature, (int, float)) and temperature >= 0):
        raise _invalid(f"{what}: temperature must be a number >= 0, given {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
        raise _invalid(f"{what}: top_k must be an int >= 0 (0: every token), given {top_k!r}")
    if top_p is not None and not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
        raise _invalid(f"{what}: top_p must be a number in (0, 1], given {top_p!r}")


def _common_prefix(a: list, b: list) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Chat:
    """A conversation over `model` whose cache holds what earlier turns computed: model.chat(...).

    Options: system (the system prompt, never dropped), messages (a conversation to continue:
    [{"role", "content"}]), tokenizer (default: the file's; anything with transformers'
    apply_chat_template and decode), max_new_tokens (128), temperature (0: greedy), top_k, top_p,
    seed, stop (ids that end a reply besides the model's eos_token_id), snapshots (how many saved
    states it keeps, 8; 0: none). The session drives the model's state: call no other method of the
    model between its turns (fork the model for other work)."""

    def __init__(
        self,
        model,
        *,
        system: Optional[str] = None,
        messages: Optional[Iterable[dict]] = None,
        tokenizer=None,
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        stop: Iterable[int] = (),
        snapshots: int = 8,
    ):
        md = model.metadata
        missing = [k for k in ("max_cache_len", "max_prompt_len", "position_state") if k not in md]
        if "decode" not in model.methods or missing:
            raise _invalid(
                "chat(): the program is not a language model of the causal-LM recipe (it has no decode method, or no "
                f"metadata {', '.join(missing) or 'it needs'}); export it with tandem.transformers.export_causal_lm"
            )
        _check_sampling("chat()", max_new_tokens, temperature, top_k, top_p)
        if isinstance(snapshots, bool) or not isinstance(snapshots, int) or snapshots < 0:
            raise _invalid(f"chat(): snapshots must be an int >= 0, given {snapshots!r}")
        tokenizer = tokenizer if tokenizer is not None else model.tokenizer
        if tokenizer is None or not hasattr(tokenizer, "apply_chat_template") or not hasattr(tokenizer, "decode"):
            raise _invalid(
                "chat(): the file carries no tokenizer; export the checkpoint with `python -m tandem export` (which stores its "
                "tokenizer and chat template), or give tokenizer= (with apply_chat_template and decode)"
            )
        self._model, self._owned, self._tokenizer = model, False, tokenizer
        self._defaults = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p, stop=tuple(stop))
        self._rand = Random(seed)
        self._max_snapshots = snapshots
        self._messages: list = []
        if system is not None:
            if not isinstance(system, str):
                raise _invalid("chat(): system must be a string")
            self._messages.append({"role": "system", "content": system})
        for m in messages or ():
            if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
                raise _invalid("chat(): messages must be dicts with a 'role' and a 'content' (strings)")
            self._messages.append({"role": m["role"], "content": m["content"]})
        self._ids: list = []  # the ids the cache holds (when _in_cache), and that the snapshots are prefixes of
        self._in_cache = False  # whether the state is exactly _ids (not before the first turn: it is reset then)
        self._snapshots: list = []  # [(length, bytes, logits)] by length: the state holding _ids[:length]
        self._stats: Optional[ChatStats] = None
        self._closed = False

    @property
    def messages(self) -> list:
        """The conversation in the context (copies): the system prompt, then the turns not dropped."""
        return [dict(m) for m in self._messages]

    @property
    def stats(self) -> Optional[ChatStats]:
        """The last turn's figures, or None before the first turn."""
        return self._stats

    @property
    def model(self):
        """The model the session runs on (a fork's own model for a fork)."""
        return self._model

    def send(self, text: str, **options) -> str:
        """Adds the user's message `text`, generates the reply and returns its text. Options (the
        session's by default): max_new_tokens, temperature, top_k, top_p, stop, on_token(id),
        on_text(piece) (text pieces that never split a character; joined, the reply)."""
        self._alive("send")
        if not isinstance(text, str):
            raise _invalid("send(text): text must be a string")
        o = self._turn_options(options, "send()")
        before = self._messages
        self._messages = before + [{"role": "user", "content": text}]
        return self._turn(o, before)

    def regenerate(self, **options) -> str:
        """The last reply again, from the state before it (with sampling it can differ); options as send()."""
        self._alive("regenerate")
        o = self._turn_options(options, "regenerate()")
        before = self._messages
        if not before or before[-1]["role"] != "assistant":
            raise _invalid("regenerate(): the conversation does not end with a reply")
        self._messages = before[:-1]
        return self._turn(o, before)

    def undo(self) -> None:
        """Drops the last user message and the reply after it; the next turn continues from the
        state before them."""
        self._alive("undo")
        users = [i for i, m in enumerate(self._messages) if m["role"] == "user"]
        if not users:
            raise _invalid("undo(): there is no user message to take back")
        self._messages = self._messages[: users[-1]]

    def fork(self) -> "Chat":
        """An independent session that continues this conversation: its own model
        (model.fork(state="copy")), the same messages, snapshots and sampling state. Close it when done."""
        self._alive("fork")
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._model, new._owned = self._model.fork(state="copy"), True
        new._rand = Random(self._rand.state)
        new._messages = [dict(m) for m in self._messages]
        new._ids, new._snapshots = list(self._ids), list(self._snapshots)
        return new

    def close(self) -> None:
        """Frees the snapshots, and a fork's model."""
        if not self._closed:
            self._closed = True
            self._snapshots = []
            if self._owned:
                self._model.close()

    def __enter__(self) -> "Chat":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _alive(self, what: str) -> None:
        if self._closed:
            raise TandemError("TDM_ERR_DISPOSED", f"{what}(): the chat was closed")

    def _turn_options(self, options: dict, what: str) -> dict:
        known = {"max_new_tokens", "temperature", "top_k", "top_p", "stop", "on_token", "on_text"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise _invalid(f"{what}: unknown option {unknown[0]!r}; the options are {', '.join(sorted(known))}")
        given = {k: v for k, v in options.items() if v is not None}
        _check_sampling(what, **{k: given.get(k) for k in ("max_new_tokens", "temperature", "top_k", "top_p")})
        return {**self._defaults, "on_token": None, "on_text": None, **given}

    def _render(self, messages: list) -> list:
        ids = self._tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)
        return [int(t) for t in ids]

    def _fit(self, reserve: int):
        """The context that fits the cache with room for `reserve` new tokens (the oldest turns
        dropped; a system prompt and the last message stay), its rendering, and how many were dropped."""
        context = self._messages
        prompt = self._render(context)
        capacity = self._model.metadata["max_cache_len"]
        if capacity is None:
            return context, prompt, 0
        first = 1 if context and context[0]["role"] == "system" else 0
        while len(prompt) + reserve > capacity and len(context) - first > 1:
            end = first + 1  # a user message and the replies after it: the context starts with a user turn
            while end < len(context) - 1 and context[end]["role"] != "user":
                end += 1
            context = context[:first] + context[end:]
            prompt = self._render(context)
        if len(prompt) > capacity:
            raise TandemError(
                "TDM_ERR_INDEX",
                f"chat: the conversation needs {len(prompt)} positions with the oldest turns dropped; the cache has {capacity}",
            )
        return context, prompt, len(self._messages) - len(context)

    def _snapshot(self, length: int, data: bytes, logits) -> None:
        self._snapshots = sorted([s for s in self._snapshots if s[0] != length] + [(length, data, logits)], key=lambda s: s[0])
        del self._snapshots[: max(0, len(self._snapshots) - self._max_snapshots)]

    def _turn(self, o: dict, before: list) -> str:
        model, md = self._model, self._model.metadata
        t0 = time.perf_counter()
        try:
            context, prompt, dropped = self._fit(o["max_new_tokens"])
        except BaseException:
            self._messages = before
            raise
        shared = _common_prefix(self._ids, prompt)
        logits = None
        try:
            if self._in_cache and shared == len(self._ids) and shared < len(prompt):
                start, restored = shared, "cache"
                if start > 0 and self._max_snapshots > 0 and all(s[0] != start for s in self._snapshots):
                    self._snapshot(start, model.save_state(), None)
            else:
                self._in_cache = False
                usable = [s for s in self._snapshots if s[0] <= shared and (s[0] < len(prompt) or s[2] is not None)]
                if usable:
                    start, data, saved = usable[-1]
                    model.load_state(data)
                    logits = saved if start == len(prompt) else None
                    restored = "snapshot"
                else:
                    model.reset_state()
                    start, restored = 0, "reset"
                self._ids = self._ids[:start]
                self._snapshots = [s for s in self._snapshots if s[0] <= start]
                self._in_cache = True
            step = int(md["max_prompt_len"])
            for at in range(start, len(prompt), step):
                piece = prompt[at : at + step]
                logits = prefill(model, torch.tensor([piece], dtype=torch.long))
                self._ids += piece
            if start < len(prompt) and self._max_snapshots > 0:
                self._snapshot(len(prompt), model.save_state(), logits)
        except BaseException:
            self._in_cache = False
            self._messages = before
            raise
        prefill_ms = (time.perf_counter() - t0) * 1000
        try:
            reply, reason, ttft_ms = self._reply(o, logits, t0)
        except BaseException:
            self._in_cache = False  # a failed decode leaves the state as it was, but a callback may have raised anywhere
            self._messages = before
            raise
        text = self._tokenizer.decode(reply, skip_special_tokens=True)
        self._messages = context + [{"role": "assistant", "content": text}]
        total_ms = (time.perf_counter() - t0) * 1000
        decode_ms = 0.0 if ttft_ms is None else total_ms - ttft_ms
        n = len(prompt) - start
        self._stats = ChatStats(
            prompt_tokens=len(prompt),
            cached_tokens=start,
            prefill_tokens=n,
            restored=restored,
            dropped_messages=dropped,
            new_tokens=len(reply),
            reason=reason,
            ttft_ms=ttft_ms,
            prefill_ms=prefill_ms,
            total_ms=total_ms,
            prefill_tokens_per_second=n / (prefill_ms / 1000) if n > 0 and prefill_ms > 0 else None,
            tokens_per_second=(len(reply) - 1) / (decode_ms / 1000) if len(reply) > 1 and decode_ms > 0 else None,
        )
        return text

    def _reply(self, o: dict, logits, t0: float):
        model, md, rand = self._model, self._model.metadata, self._rand
        temperature, top_k, top_p = o["temperature"], o["top_k"], o["top_p"]
        on_token: Optional[Callable[[int], None]] = o["on_token"]
        on_text: Optional[Callable[[str], None]] = o["on_text"]
        eos = md.get("eos_token_id")
        stop = {int(t) for t in ([] if eos is None else [eos] if isinstance(eos, int) else eos)} | {int(t) for t in o["stop"]}
        capacity = md["max_cache_len"]
        picker = Picker(model, logits, temperature, top_k, top_p, rand)
        reply, shown, ttft_ms = [], "", None

        def show(final: bool) -> None:
            nonlocal shown
            if on_text is None:
                return
            text = self._tokenizer.decode(reply, skip_special_tokens=True)
            if (final or not text.endswith("\ufffd")) and text.startswith(shown) and len(text) > len(shown):
                piece, shown = text[len(shown) :], text
                on_text(piece)

        while True:
            if len(reply) >= o["max_new_tokens"]:
                reason = "length"
                break
            token = picker.pick()
            if ttft_ms is None:
                ttft_ms = (time.perf_counter() - t0) * 1000
            if token in stop:
                reason = "eos"
                break
            reply.append(token)
            if on_token is not None:
                on_token(token)
            show(False)
            if capacity is not None and len(self._ids) >= capacity:
                reason = "capacity"
                break
            picker.feed(token)
            self._ids.append(token)
        show(True)
        return reply, reason, ttft_ms
