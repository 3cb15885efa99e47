"""The codec-LM recipe: a decoder-only LM whose every position reads its text token together with the
audio codes of one frame of its own audio codec (transformers' KyutaiSpeechToTextForConditionalGeneration:
Mimi's codes, a frame per step; imports transformers only when called).

    program = tandem.transformers.export_codec_lm(model, audio_input_shape=(1, 1, 48000), max_cache_len=64)

transformers' generate encodes the audio (`input_values`) with the model's codec (`codec_model`) and gives
the step at position p the input ids [1, 1, 1 + num_codebooks]: its text token, then the codes of frame
p - 1 (`audio_bos_token_id` in every codebook at position 0). The program does the same with the audio's
codes as state:
- `encode(audio)`: the codec's own `encode` of the whole clip (as generate runs it by default: one
  window), its codes [1, audio_frames, num_codebooks] kept as state, and a new
  decode started (the KV cache emptied, its position back to 0). `audio` is `audio_input` (input_values,
  from the model's feature extractor) of the fixed shape `audio_input_shape`;
- `prefill(tokens [1, n])`, `decode(token [1, 1])`, `decode_topk(token [1, 1])`: the causal-LM recipe's
  (causal_lm.py), each position given its frame's codes from the state. A position p reads frame p - 1,
  so positions up to audio_frames have audio: a call that would reach past them (past the audio encoded,
  or before any `encode`, for positions past 0) fails with TDM_ERR_GUARD, state unchanged;
- `reset()`: empties the KV cache and forgets the audio (its frames back to 0).
So a user runs encode(audio), prefill([bos]) (generate's prompt), then decode, at most audio_frames
tokens after the prompt's first, as generate does (it stops at the audio's frames).

Metadata: the causal-LM recipe's, and audio_input, audio_input_shape, audio_frames (the frames the codec
makes of that audio), frame_size (audio samples per frame), num_codebooks and audio_bos_token_id.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

from ..export import Method
from ..ir import ExportError
from .adapters import adapted
from .causal_lm import CausalLM, _built, _export_lm, _prefill
from .checks import ArgumentError, check_int, check_options


def is_codec_lm(model: nn.Module) -> bool:
    """Whether the model is an LM over text tokens and its own codec's codes (a `codec_model` with an
    `encode`, a config with `num_codebooks` and `audio_bos_token_id`)."""
    config = getattr(model, "config", None)
    codec = getattr(model, "codec_model", None)
    return (
        callable(getattr(codec, "encode", None))
        and isinstance(getattr(config, "num_codebooks", None), int)
        and isinstance(getattr(config, "audio_bos_token_id", None), int)
    )


class _WithCodes(nn.Module):
    """The model's forward over text tokens [1, n] at positions [1, n]: each position's input ids are its
    text token and the codes of the frame before it (audio_bos_token_id at position 0), read from `codes`;
    a position past the `frames` encoded fails its guard."""

    def __init__(self, model: nn.Module, frames: int):
        super().__init__()
        self.model = model
        self.config = model.config
        self.register_buffer("codes", torch.zeros(1, frames, model.config.num_codebooks, dtype=torch.long))
        self.register_buffer("frames", torch.zeros((), dtype=torch.long))  # frames encoded (0: none)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None, **kwargs):
        from ..runtime_values import _guard

        if position_ids is None:  # the eager call that sizes the cache: position 0
            position_ids = torch.arange(input_ids.shape[1]).reshape(1, -1)
        _guard(position_ids[0, -1] <= self.frames)  # position p reads frame p - 1
        at = position_ids[0]
        codes = self.codes.index_select(1, (at - 1).clamp(0, self.codes.shape[1] - 1))
        codes = torch.where((at == 0).reshape(1, -1, 1), self.config.audio_bos_token_id, codes)
        ids = torch.cat([input_ids.unsqueeze(2), codes], dim=2)
        return self.model(input_ids=ids, position_ids=position_ids, **kwargs)


class CodecLM(CausalLM):
    """A CausalLM over _WithCodes whose `encode` writes the codec's codes of the audio into its state."""

    def __init__(self, model: nn.Module, max_cache_len: int, frames: int):
        super().__init__(_WithCodes(model, frames), max_cache_len)

    def encode(self, audio: torch.Tensor) -> None:
        codec = self.model.model.codec_model
        with adapted(codec):
            codes = codec.encode(audio).audio_codes  # [1, num_codebooks, frames]
        self.model.codes.copy_(codes.transpose(1, 2))
        self.model.frames.fill_(codes.shape[-1])
        super().reset()

    def reset(self) -> None:
        super().reset()
        self.model.codes.zero_()
        self.model.frames.zero_()


def _codes(model: nn.Module, audio: torch.Tensor) -> torch.Tensor:
    """The codec's codes [1, num_codebooks, frames] of the audio, by its plain encode, checked equal to those
    transformers' generate makes (its encode given a fresh padding cache, whose branches on its paddings'
    values do not trace: from a fresh cache, the same padding as the plain encode's)."""
    name = type(model).__name__
    with torch.no_grad():
        try:
            codes = model.codec_model.encode(audio).audio_codes
        except Exception as e:
            raise ExportError(f"{name}: its codec's encode fails on audio of shape {list(audio.shape)} ({type(e).__name__}: {e})") from e
        if "padding_cache" in inspect.signature(model.codec_model.encode).parameters and hasattr(model, "_prepare_model_inputs"):
            bos = torch.zeros(1, 1, dtype=torch.long)
            _, _, kwargs = model._prepare_model_inputs(bos, None, {"input_values": audio, "audio_window_size": None})
            cached = model.codec_model.encode(audio, padding_cache=kwargs.get("padding_cache")).audio_codes
            if not torch.equal(cached, codes):
                raise ExportError(f"{name}: its codec's encode with generate's padding cache gives other codes than without it")
    return codes


def export_codec_lm(
    model: nn.Module,
    audio_input_shape,
    max_cache_len: int,
    max_prompt_len: int,
    metadata: dict | None = None,
    sample_top_k: int | None = 64,
    **options,
):
    """Export a codec LM (see the module's docstring) as encode(audio), prefill, decode, decode_topk and reset
    over its static KV cache and its audio's codes. audio_input_shape: the shape of the audio its codec takes
    (input_values [1, channels, samples] from its feature extractor). `options` go to tandem.export."""
    check_options("export_codec_lm", options)
    name = type(model).__name__
    if not is_codec_lm(model):
        raise ExportError(f"{name} is not an LM over its own codec's codes (a codec_model, num_codebooks, audio_bos_token_id)")
    model = model.eval().float()
    config = model.config.get_text_config(decoder=True)
    check_int("max_cache_len", max_cache_len)
    check_int("max_prompt_len", max_prompt_len)
    if sample_top_k is not None and (isinstance(sample_top_k, bool) or not isinstance(sample_top_k, int) or sample_top_k < 1):
        raise ExportError(f"sample_top_k must be a positive int (the K of decode_topk) or None (no decode_topk), got {sample_top_k!r}")
    if audio_input_shape is None:
        raise ArgumentError(f"{name} takes its audio of one fixed shape: give audio_input_shape (--encoder-input-shape), e.g. 1,1,48000")
    if not 1 <= max_prompt_len <= max_cache_len:
        raise ArgumentError(f"max_prompt_len must be in [1, max_cache_len={max_cache_len}], got {max_prompt_len}")
    shape = tuple(int(d) for d in audio_input_shape)
    example = torch.zeros(shape)
    noise = torch.rand(shape, generator=torch.Generator().manual_seed(0)) * 0.2 - 0.1
    frames = int(_codes(model, noise).shape[-1])
    lm = _built(CodecLM, model, max_cache_len, frames)
    methods = {"encode": Method(lm.encode, (example,))}
    methods.update(_prefill(lm.step, max_prompt_len))
    extra = {
        "audio_input": "input_values",
        "audio_input_shape": list(shape),
        "audio_frames": frames,
        "frame_size": int(getattr(model.config, "frame_size", 0) or shape[-1] // max(frames, 1)),
        "num_codebooks": int(model.config.num_codebooks),
        "audio_bos_token_id": int(model.config.audio_bos_token_id),
    }
    layers = int(config.num_hidden_layers)
    how = dict(metadata=metadata, sample_top_k=sample_top_k, **options)
    position = "cache.layers.0.cumulative_length"
    return _export_lm(model, config, lm, methods, extra, layers, position, {}, max_cache_len, max_prompt_len, **how)
