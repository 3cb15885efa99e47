"""The audio-LM recipe: a decoder-only LM that merges its audio encoder's output into its token stream
at audio placeholder tokens (Qwen2-Audio, Voxtral, Granite Speech, AudioFlamingo3, ...: transformers
registers them for speech or sequence-to-sequence generation; imports transformers only when called),
or adds the audio of every token to its embedding as it streams (VoxtralRealtime, below).

    program = tandem.transformers.export_audio_lm(model, audio_input_shape=(1, 128, 3000), max_cache_len=1024)

The program has the causal-LM recipe's methods over the same static KV cache (causal_lm.py: prefill,
decode, decode_topk, reset; a recurrent language model's: below), and
- `prefill_audio(tokens [1, n], audio)`: the model's own forward over n tokens and the audio (its audio
  encoder, its projector, and its own merge of the audio embeddings at the placeholder tokens), appended
  to the cache like a prefill; returns the last position's logits [1, vocab]. `audio` is the model's
  audio input (`audio_input`, e.g. input_features: a log-mel spectrogram from its feature extractor) of
  the fixed shape `audio_input_shape`, every frame of it audio (a model that takes a mask of its audio
  frames is given one of all ones). tokens hold exactly `audio_tokens` placeholder tokens (id
  `audio_token_id`), all of them: n is from audio_tokens to audio_tokens + max_prompt_len (text before
  and after the placeholders may go in the same call, or in prefills before and after it). Other
  counts of placeholders fail the call (TDM_ERR_GUARD, state unchanged).
So a user builds input_ids as transformers' processor does: the prompt's text tokens with
`audio_tokens` copies of `audio_token_id` where the audio goes, e.g. prefill(prefix), then
prefill_audio(placeholders + text, features), then decode.

A model whose language model's cache has recurrent layers (Nemotron 3.5 Transcribe's Nemotron-H: Mamba
beside attention) has the causal-LM recipe's methods over its recurrent state (causal_lm.RecurrentLM:
one token per step of its own forward), and prefill_audio runs its forward as far as its language model
(the embeddings it is given: the tokens' with the audio's merged at the placeholders), then those
embeddings one position per step, audio_tokens + max_prompt_len steps whatever n is (those past the n-th
undone, as its prefill does).

The number of placeholders is the number of rows the model's forward scatters into its embeddings for
audio of that shape (one eager call). The model's code runs as it is; two tensor operations of its merge
whose result sizes PyTorch cannot know before the values (a boolean-mask index `x[mask]`, and
`masked_scatter`) run in a fixed-size form while prefill_audio is traced: x[mask] takes the first K
positions of the mask, K the count found by the eager call (a call with another count fails its guard),
and masked_scatter gathers the source rows by the mask's running count.

A forward that draws random numbers (torch's generator moves in the eager call) is refused, unless it
takes an argument that turns the draw off (NO_SAMPLING: VibeVoice ASR's sample=False, the deterministic
mode of its generate, which otherwise adds fresh noise to its acoustic latents in every call):
prefill_audio is the forward given that argument.

Metadata: the causal-LM recipe's, and audio_input, audio_input_shape, audio_token_id, audio_tokens,
audio_masks ({name: shape} of the masks of the audio the forward is given, all ones; empty when it needs
none), audio_options (the NO_SAMPLING arguments the forward is given: {"sample": false}; empty when it
takes none) and max_audio_prompt_len (audio_tokens + max_prompt_len).

A model that streams its audio (streams_audio: VoxtralRealtime, its config's audio_length_per_tok = F
mel frames a token, its forward's encoder_cache and padding_cache) has no placeholders: transformers'
generate gives each forward the audio of the tokens it feeds (F frames a token, in order: the encoder
runs its causal convolutions over them and appends them to its own KV cache), projects it to one row
a token and adds the row to that token's embedding. Its program (export_audio_lm with
audio_input_shape=None) has no prefill or decode; every method takes its tokens' audio, over the text's
static KV cache and the audio encoder's streaming state (the encoder's KV cache, max_cache_len *
downsample_factor positions, and the last input frames of each convolution, the model's own padding
cache):
- `prefill_audio(tokens [1, n], audio [1, mel bins, n * F])`, 1 <= n <= max_prompt_len: the model's
  forward over the tokens and their frames; returns the last position's logits [1, vocab];
- `decode_audio(token [1, 1], audio [1, mel bins, F])`: one token and its frames, its logits;
- `decode_audio_topk(token, audio)`: as decode_audio, the K largest logits and their ids (decode_topk's
  form; absent with sample_top_k=None);
- `reset()`: empties both caches and the convolutions' frames.
The forward's time conditioning (num_delay_tokens) is the config's default_num_delay_tokens. Metadata:
the causal-LM recipe's, and audio_streaming (true), audio_input ("input_features"),
audio_frames_per_token (F), audio_chunk_shape ([1, mel bins, F]: one token's audio) and num_delay_tokens.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os

import torch
from torch import nn

from ..export import Method, export
from ..ir import ExportError
from ..watching import restore
from .causal_lm import (
    CausalLM,
    RecurrentLM,
    _built,
    _cache_layer_kinds,
    _export_lm,
    _prefill,
    _steps_prefill,
    _topk,
    is_recurrent,
    prefill_steps,
)
from .checks import ArgumentError, check_int, check_options, token_id

AUDIO_TOKEN_FIELDS = ("audio_token_id", "audio_token_index")


# Forward arguments that turn off a random draw of the model's own, given with the audio: VibeVoice ASR's
# `sample` (transformers' default True adds Gaussian noise from torch's generator to its acoustic latents in
# every call, so its generate is not reproducible; False uses the latents as its encoder gives them, the
# deterministic mode transformers documents for it: generate(..., sample=False))
NO_SAMPLING = {"sample": False}


class NotAnAudioLM(ExportError):
    """The model has no audio input the audio-LM recipe can give it, or merges no audio rows."""


def audio_token_id(config) -> int | None:
    """The placeholder token id the config names (audio_token_id, audio_token_index), or None."""
    for k in AUDIO_TOKEN_FIELDS:
        v = getattr(config, k, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def audio_input_name(model: nn.Module) -> str:
    """The forward's audio input: input_features, input_values, ... (the first tensor argument after
    input_ids that is neither a mask, positions, embeddings nor labels)."""
    skip = {"input_ids", "attention_mask", "position_ids", "inputs_embeds", "labels", "cache", "past_key_values"}
    for name in inspect.signature(model.forward).parameters:
        if name.startswith("input_") and name not in skip and not name.endswith("mask"):
            return name
    raise NotAnAudioLM(f"{type(model).__name__}: its forward takes no audio input (input_features, input_values, ...)")


def no_sampling(model: nn.Module) -> dict:
    """The NO_SAMPLING arguments that the model's forward takes."""
    params = inspect.signature(model.forward).parameters
    return {k: v for k, v in NO_SAMPLING.items() if k in params}


def audio_masks(model: nn.Module) -> list[str]:
    """The forward's masks of its audio input (feature_attention_mask, input_features_mask, padding_mask)."""
    params = inspect.signature(model.forward).parameters
    return [k for k in params if k.endswith("mask") and k != "attention_mask"]


@contextlib.contextmanager
def _no_model_checks():
    """transformers' own torch_compilable_check skipped (its placeholder check indexes by a mask whose count
    is only known from values; the fixed-size index below guards the same count)."""
    saved = os.environ.get("TRANSFORMERS_DISABLE_TORCH_CHECK")
    os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"] = "1"
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"]
        else:
            os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"] = saved


def _bool_index(index):
    """The mask when `index` is one boolean tensor (x[mask]), else None."""
    if isinstance(index, torch.Tensor) and index.dtype == torch.bool:
        return index
    return None


def _first_k(x: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """x[mask] when mask holds k true values: the rows of x (over mask's dims, flattened) at the first k
    true positions, in order, found by topk over a score that falls with the position; a guard fails the
    call when the mask holds another count."""
    from ..runtime_values import _guard

    m = mask.expand(x.shape[: mask.dim()]).reshape(-1)
    n = m.shape[0]
    _guard(m.sum() == k)
    score = torch.where(m, n - torch.arange(n, device=m.device), 0).float()
    order = torch.topk(score, k).indices
    return x.reshape(n, *x.shape[mask.dim() :]).index_select(0, order)


def _masked_scatter(self: torch.Tensor, mask: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """Tensor.masked_scatter in fixed sizes: the i-th true position of the mask (in self's order) takes
    source's i-th element."""
    m = mask.expand(self.shape).reshape(-1)
    at = (torch.cumsum(m.long(), 0) - 1).clamp(0, source.numel() - 1)
    return torch.where(m, source.reshape(-1).index_select(0, at), self.reshape(-1)).reshape(self.shape)


class _FixedCounts(torch.overrides.TorchFunctionMode):
    """fixed_counts' mode: it sees every x[mask] and masked_scatter as torch dispatches them (torch.Tensor
    itself is left alone: a __getitem__ set on it, even put back, keeps 0-d tensors sequences to CPython)."""

    def __init__(self, counts: list | None):
        super().__init__()
        self.counts, self.queue, self.found = counts, list(counts or []), []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.__getitem__ and len(args) == 2 and (mask := _bool_index(args[1])) is not None:
            x = args[0]
            if self.counts is None:
                self.found.append(int(mask.expand(x.shape[: mask.dim()]).sum()))
            elif not self.queue:
                raise ExportError("x[mask]: more boolean-mask indexes while tracing prefill_audio than in the eager call")
            else:
                return _first_k(x, mask, self.queue.pop(0))
        elif func in (torch.Tensor.masked_scatter, torch.masked_scatter) and self.counts is not None:
            return _masked_scatter(*args, **kwargs)
        return func(*args, **kwargs)


@contextlib.contextmanager
def fixed_counts(counts: list | None):
    """Within the block a boolean-mask index x[mask] runs as _first_k with the next of `counts`, and
    masked_scatter as _masked_scatter; counts=None: each x[mask]'s count is appended to the list the
    block yields (an eager call, to find them)."""
    mode = _FixedCounts(counts)
    with _no_model_checks(), mode:
        yield mode.found


class _Audio:
    """What both audio LMs add to their causal LM: the audio input's name, its masks, the counts of
    fixed_counts (from one eager call in export_audio_lm), the placeholder token and how many the audio fills."""

    def _audio(self, audio_name: str, masks: dict) -> None:
        self.audio_name = audio_name
        self.masks = masks  # mask name -> its shape (all ones)
        self.options = no_sampling(self.model)
        self.counts = None  # fixed_counts' counts, from one eager call
        self.audio_id = self.audio_tokens = None

    def _inputs(self, audio: torch.Tensor) -> dict:
        return {self.audio_name: audio, **_ones(self.masks), **self.options}

    def _all_placeholders(self, tokens: torch.Tensor) -> None:
        from ..runtime_values import _guard

        _guard((tokens == self.audio_id).sum() == self.audio_tokens)  # every placeholder, and no more, in this call


class AudioLM(_Audio, CausalLM):
    """A CausalLM whose `step_audio` gives the model its audio input (and all-ones masks of it) with the
    tokens, under fixed_counts."""

    def __init__(self, model: nn.Module, max_cache_len: int, audio_name: str, masks: dict):
        super().__init__(model, max_cache_len)
        self._audio(audio_name, masks)

    def probe(self, tokens: torch.Tensor, audio: torch.Tensor) -> torch.Tensor:
        return self.step(tokens, **self._inputs(audio))

    def step_audio(self, tokens: torch.Tensor, audio: torch.Tensor) -> torch.Tensor:
        self._all_placeholders(tokens)
        with fixed_counts(self.counts):
            return self.probe(tokens, audio)


class RecurrentAudioLM(_Audio, RecurrentLM):
    """An audio LM whose language model's cache has recurrent layers (causal_lm.RecurrentLM: one token per
    step of its own forward). `step_audio` takes the embeddings its forward gives its language model (the
    tokens' with the audio's merged at the placeholders, under fixed_counts), then runs them one position
    per step as prefill_steps runs tokens: audio_tokens + max_prompt_len steps, those past n undone."""

    def __init__(self, model: nn.Module, cache, kinds: list, max_cache_len: int, audio_name: str, masks: dict):
        super().__init__(model, cache, kinds, max_cache_len)
        self._audio(audio_name, masks)

    def probe(self, tokens: torch.Tensor, audio: torch.Tensor) -> torch.Tensor:
        """The embeddings [1, n, width] the model's forward gives its language model (get_decoder()) for
        the tokens and the audio. The language model is not run: it returns the embeddings as its hidden
        states (what the forward computes from them is left unused)."""
        from transformers.modeling_outputs import BaseModelOutputWithPast

        got = []

        def embedded(*args, **kwargs):
            got.append(kwargs.get("inputs_embeds"))
            return BaseModelOutputWithPast(last_hidden_state=got[-1])

        decoder = self.model.get_decoder()
        decoder.forward = embedded  # the instance's, over its class's
        try:
            self.model(input_ids=tokens, **self._inputs(audio))
        finally:
            del decoder.forward
        if len(got) != 1 or not isinstance(got[0], torch.Tensor):
            raise NotAnAudioLM(f"{type(self.model).__name__}: its forward gives its language model (get_decoder()) no inputs_embeds")
        return got[0]

    def _embedded(self, embeds: torch.Tensor) -> torch.Tensor:
        out = self.model(inputs_embeds=embeds, cache=self.cache, use_cache=True, logits_to_keep=1)
        self.position.add_(1)
        return out.logits[:, -1]

    def step_audio(self, tokens: torch.Tensor, audio: torch.Tensor) -> torch.Tensor:
        self._all_placeholders(tokens)
        with fixed_counts(self.counts):
            embeds = self.probe(tokens, audio)
        return prefill_steps(self, embeds, self._embedded, self.audio_tokens + self.max_prompt_len)


def audio_inputs(model, name: str, audio: torch.Tensor) -> tuple[dict, int]:
    """({name: audio, the masks its forward needs and its no_sampling arguments}, the placeholder count)
    (see _audio_inputs)."""
    masks, count = _audio_inputs(model, name, audio)
    return {name: audio, **_ones(masks), **no_sampling(model)}, count


def _audio_inputs(model, name: str, audio: torch.Tensor) -> tuple[dict, int]:
    """({mask name: shape}, the placeholder count) of the first that the model's forward takes with the audio:
    each of its audio masks all ones over the audio's frames ([batch, frames], as a feature extractor gives a
    mask of its frames: frames its last dim, as in [batch, mel bins, frames], or another, as in [batch, frames,
    mel bins]), else no masks (a forward whose mask is of something else, and optional)."""
    names = audio_masks(model)
    frames = dict.fromkeys(audio.shape[d] for d in [audio.dim() - 1, *range(1, audio.dim() - 1)])
    tries = [{k: (audio.shape[0], n) for k in names} for n in frames if names] + [{}]
    for masks in tries:
        try:
            inputs = {name: audio, **_ones(masks), **no_sampling(model)}
            return masks, count_audio_tokens(model, audio_token_id(model.config), inputs)
        except NotAnAudioLM as e:
            error = e
    raise error


def _ones(masks: dict) -> dict:
    return {k: torch.ones(shape, dtype=torch.long) for k, shape in masks.items()}


def count_audio_tokens(model: nn.Module, audio_id: int, inputs: dict) -> int:
    """The number of placeholder tokens the model's forward fills for `inputs` (its audio input and
    masks): the rows its merge scatters into the token embeddings, from one eager call with two
    placeholders (transformers' own check of the count skipped)."""
    rows = []
    scatter, own = torch.Tensor.masked_scatter, torch.Tensor.__dict__.get("masked_scatter")

    def record(self, mask, source):
        if tuple(self.shape[:2]) == (1, 2):  # into the two tokens' embeddings (not one inside the audio encoder)
            rows.append(source.numel() // self.shape[-1])
        return scatter(self, mask, source)

    torch.Tensor.masked_scatter = record
    try:
        with torch.no_grad(), _no_model_checks():
            model(input_ids=torch.full((1, 2), audio_id), **inputs)
    except Exception as e:
        raise NotAnAudioLM(
            f"{type(model).__name__}: its forward on audio of shape {list(next(iter(inputs.values())).shape)} fails "
            f"({type(e).__name__}: {' '.join(str(e).split())[:300]})"
        ) from e
    finally:
        restore(torch.Tensor, "masked_scatter", own)
    if not rows:
        raise NotAnAudioLM(f"{type(model).__name__}: its forward merges no audio rows into its token embeddings (no masked_scatter)")
    return rows[0]


def audio_lm(model, max_cache_len: int, max_prompt_len: int, audio_name: str, masks: dict, example: torch.Tensor, count: int):
    """(the AudioLM, or RecurrentAudioLM for a language model with recurrent layers, ready to trace: the counts
    of its boolean-mask indexes found by one eager call on `example` audio with `count` placeholders, its
    prefill methods, its number of layers, its position state)."""
    if is_recurrent(model):
        cache, kinds = _cache_layer_kinds(model, max_cache_len)
        lm = _built(RecurrentAudioLM, model, cache, kinds, max_cache_len, audio_name, masks)
        prefills, layers, position = _steps_prefill(lm, max_prompt_len), len(kinds), "position"
    else:
        lm = _built(AudioLM, model, max_cache_len, audio_name, masks)
        layers = int(model.config.get_text_config(decoder=True).num_hidden_layers)
        prefills, position = _prefill(lm.step, max_prompt_len), "cache.layers.0.cumulative_length"
    audio_id = audio_token_id(model.config)
    rng = torch.random.get_rng_state()
    with torch.no_grad(), fixed_counts(None) as counts:
        lm.probe(torch.tensor([[audio_id] * count + [0]]), example)
    lm.reset()
    if not torch.equal(rng, torch.random.get_rng_state()):
        raise ExportError(
            f"{type(model).__name__}: its forward draws random numbers from torch's generator (one call on audio of shape "
            f"{list(example.shape)} moved it): tandem's generator is not torch's, so a program could not give transformers' "
            f"values; the audio-LM recipe turns a draw off only through a forward argument "
            f"({', '.join(f'{k}={v}' for k, v in NO_SAMPLING.items())})"
        )
    lm.counts, lm.audio_id, lm.audio_tokens = counts, audio_id, count
    return lm, prefills, layers, position


def export_audio_lm(
    model: nn.Module,
    audio_input_shape,
    max_cache_len: int,
    max_prompt_len: int,
    metadata: dict | None = None,
    sample_top_k: int | None = 64,
    **options,
):
    """Export a transformers audio LM (see the module's docstring) as prefill_audio(tokens, audio),
    prefill, decode, decode_topk and reset over its static KV cache (and recurrent state). audio_input_shape: the shape of the
    audio input its forward takes (e.g. its feature extractor's input_features for the audio length
    wanted); max_cache_len must hold the audio's placeholder tokens and the text: at least
    audio_tokens + max_prompt_len. A model that streams its audio takes audio_input_shape=None and is
    exported as prefill_audio, decode_audio, decode_audio_topk and reset (export_streaming_audio_lm).
    `options` go to tandem.export."""
    check_options("export_audio_lm", options)
    model = model.eval().float()
    config = model.config.get_text_config(decoder=True)
    name = type(model).__name__
    check_int("max_cache_len", max_cache_len)
    check_int("max_prompt_len", max_prompt_len)
    if sample_top_k is not None and (isinstance(sample_top_k, bool) or not isinstance(sample_top_k, int) or sample_top_k < 1):
        raise ExportError(f"sample_top_k must be a positive int (the K of decode_topk) or None (no decode_topk), got {sample_top_k!r}")
    if streams_audio(model):
        if audio_input_shape is not None:
            raise ArgumentError(
                f"{name} takes the audio of each token with it ({int(model.config.audio_length_per_tok)} mel frames a token): "
                "leave audio_input_shape (--encoder-input-shape) out"
            )
        return export_streaming_audio_lm(model, max_cache_len, max_prompt_len, metadata, sample_top_k, **options)
    if audio_input_shape is None:
        raise ArgumentError(f"{name} takes its audio of one fixed shape: give audio_input_shape (--encoder-input-shape), e.g. 1,128,3000")
    audio_id = audio_token_id(model.config)
    if audio_id is None:
        raise NotAnAudioLM(
            f"{name}: its config names no audio placeholder token ({' or '.join(AUDIO_TOKEN_FIELDS)}), and it does not "
            "stream its audio with every token (a config's audio_length_per_tok, a forward's encoder_cache and padding_cache)"
        )
    shape = tuple(int(d) for d in audio_input_shape)
    audio_name = audio_input_name(model)
    example = torch.zeros(shape)
    masks, count = _audio_inputs(model, audio_name, example)
    if not 1 <= max_prompt_len or count + max_prompt_len > max_cache_len:
        raise ArgumentError(
            f"max_cache_len={max_cache_len} cannot hold audio of shape {list(shape)}: its {count} placeholder tokens and "
            f"max_prompt_len={max_prompt_len} text tokens need at least {count + max_prompt_len}"
        )
    lm, prefills, layers, position = audio_lm(model, max_cache_len, max_prompt_len, audio_name, masks, example, count)
    tokens = torch.tensor([[audio_id] * count + [0]])  # n = count + 1: not a bound of the dim
    n = torch.export.Dim("n", min=count, max=count + max_prompt_len)
    methods = {"prefill_audio": Method(lm.step_audio, (tokens, example), dynamic_shapes=({1: n}, None))}
    methods.update(prefills)
    extra = {
        "audio_input": audio_name,
        "audio_input_shape": list(shape),
        "audio_token_id": int(audio_id),
        "audio_tokens": int(count),
        "audio_masks": {k: list(v) for k, v in masks.items()},
        "audio_options": dict(lm.options),
        "max_audio_prompt_len": int(count + max_prompt_len),
    }
    how = dict(metadata=metadata, sample_top_k=sample_top_k, **options)
    return _export_lm(model, config, lm, methods, extra, layers, position, {}, max_cache_len, max_prompt_len, **how)


# ---- streaming audio LMs: the audio of every token added to its embedding (VoxtralRealtime) ----------


def streams_audio(model: nn.Module) -> bool:
    """Whether the model adds audio to every token's embedding as it streams (VoxtralRealtime): its config
    gives the mel frames of each token (audio_length_per_tok) and its forward takes its audio encoder's
    caches (encoder_cache, padding_cache)."""
    frames = getattr(model.config, "audio_length_per_tok", None)
    params = inspect.signature(model.forward).parameters
    return isinstance(frames, int) and not isinstance(frames, bool) and {"encoder_cache", "padding_cache"} <= set(params)


class StreamingAudioLM(CausalLM):
    """A CausalLM whose every step gives the model the audio of its tokens, `frames` mel frames a token,
    with its audio encoder's streaming state: the encoder's own KV cache (a StaticCache of the audio
    config over downsample_factor positions a token, plain static layers: the model's own mask keeps
    its sliding window) and its convolutions' padding cache (the last input frames of each causal
    convolution, the object the model's forward makes, kept from one eager call)."""

    def __init__(self, model: nn.Module, max_cache_len: int):
        from transformers import StaticCache
        from transformers.cache_utils import StaticLayer

        config = model.config
        frames, mels = int(config.audio_length_per_tok), int(config.audio_config.num_mel_bins)
        delay = getattr(config, "default_num_delay_tokens", None)
        own = model.__dict__.get("forward")
        model.forward = functools.partial(model.forward, input_features=torch.zeros(1, mels, frames), num_delay_tokens=delay)
        try:  # CausalLM's eager call of one token: with that token's audio
            super().__init__(model, max_cache_len)
        finally:
            del model.forward
            if own is not None:
                model.forward = own
        self.frames, self.mels, self.delay = frames, mels, delay
        positions = max_cache_len * int(config.downsample_factor)
        self.encoder_cache = StaticCache(config=config.audio_config, max_cache_len=positions)
        self.encoder_cache.layers[:] = [StaticLayer(positions) for _ in self.encoder_cache.layers]
        with torch.no_grad():  # the static layers' shapes and the model's own padding cache, from one token's audio
            out = model(
                input_ids=torch.zeros(1, 1, dtype=torch.long),
                input_features=torch.zeros(1, mels, frames),
                cache=self.cache,
                encoder_cache=self.encoder_cache,
                use_cache=True,
                logits_to_keep=1,
                num_delay_tokens=delay,
            )
        self.padding = out.padding_cache
        self.reset()

    def step_audio(self, tokens: torch.Tensor, audio: torch.Tensor) -> torch.Tensor:
        cached = dict(encoder_cache=self.encoder_cache, padding_cache=self.padding, num_delay_tokens=self.delay)
        return self.step(tokens, input_features=audio, **cached)

    def step_audio_topk(self, tokens: torch.Tensor, audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _topk(self.step_audio(tokens, audio), self.top_k)

    def reset(self) -> None:
        super().reset()  # (CausalLM's __init__ resets before the audio encoder's caches are made)
        encoder = self.__dict__.get("encoder_cache")
        padding = self.__dict__.get("padding")
        for layer in [*(encoder.layers if encoder else ()), *(padding.layers.values() if padding else ())]:
            for t in vars(layer).values():
                if isinstance(t, torch.Tensor):
                    t.zero_()


def export_streaming_audio_lm(model, max_cache_len, max_prompt_len, metadata, sample_top_k, **options):
    """export_audio_lm's program for a model that streams its audio (streams_audio): prefill_audio(tokens, audio)
    of n tokens and their n * frames mel frames, decode_audio(token, audio) of one, decode_audio_topk, reset."""
    config = model.config.get_text_config(decoder=True)
    if not 1 <= max_prompt_len <= max_cache_len:
        raise ArgumentError(f"max_prompt_len must be in [1, max_cache_len={max_cache_len}], got {max_prompt_len}")
    lm = _built(StreamingAudioLM, model, max_cache_len)
    frames, mels = lm.frames, lm.mels
    example = min(max(max_prompt_len - 1, 2), max_prompt_len)  # not 1: torch.export would specialize the dim to it
    n = torch.export.Dim("n", min=1, max=max_prompt_len)
    prompt = (torch.zeros(1, example, dtype=torch.long), torch.zeros(1, mels, frames * example))
    one = (torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, mels, frames))
    methods = {
        "prefill_audio": Method(lm.step_audio, prompt, dynamic_shapes=({1: n}, {2: frames * n})),
        "decode_audio": Method(lm.step_audio, one),
    }
    extra = {}
    if sample_top_k is not None:
        lm.top_k = extra["sample_top_k"] = min(sample_top_k, int(config.vocab_size))
        methods["decode_audio_topk"] = Method(lm.step_audio_topk, one)
    methods["reset"] = Method(lm.reset, ())
    md = {
        "model_type": getattr(config, "model_type", ""),
        "vocab_size": int(config.vocab_size),
        "num_layers": int(config.num_hidden_layers),
        "max_cache_len": int(max_cache_len),
        "max_prompt_len": int(max_prompt_len),
        **extra,
        "position_state": "cache.layers.0.cumulative_length",
        "bos_token_id": token_id(getattr(config, "bos_token_id", None)),
        "eos_token_id": token_id(getattr(config, "eos_token_id", None)),
        "audio_input": "input_features",
        "audio_streaming": True,
        "audio_frames_per_token": frames,
        "audio_chunk_shape": [1, mels, frames],
        "num_delay_tokens": None if lm.delay is None else int(lm.delay),
    }
    return export(None, methods, metadata={**md, **(metadata or {})}, **options)
