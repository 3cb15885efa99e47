"""The walk's audio LMs (tests/models/zoo.py): decoder-only classes that transformers registers for
speech or sequence-to-sequence generation, which merge their audio encoder's output into the token
stream at audio placeholder tokens (Qwen2-Audio, Voxtral, ...), or add it to every token's embedding
as they stream it (VoxtralRealtime).

A class's checkpoint gets the walk's tokenizer with one more special token, `<|audio|>`, which its
config names as its audio placeholder (audio_token_id / audio_token_index); a Whisper-style audio
encoder (max_source_positions) takes 1 s of audio (100 mel frames, 50 positions), not 30 s. Its audio
is seeded noise through its own feature extractor (transformers' class for its model type, made
for the config's mel bins and a 1 s chunk where it takes them, saved in the checkpoint folder): 1 s,
or STREAM_S for a streaming model, its frames padded with zeros to a multiple of the config's
subsampling_factor where it names one, as the model's processor pads them (Nemotron 3.5 Transcribe
stacks 8 frames into one position). For a placeholder model the prompt is the walk's with the audio's
placeholders after its first two tokens, as many as the model's forward fills for that audio (one eager
call: tandem.recipes.audio_lm.audio_inputs); the reference is transformers' greedy generate on the prompt
and the audio, and the runtime's is prefill of the first two tokens, prefill_audio of the placeholders and
the next two, prefill of the rest, then decode. For a streaming model the prompt is the walk's and the
audio the mel frames of the prompt and the tokens generated (audio_length_per_tok a token), what
generate reads; the runtime's is prefill_audio of the prompt (in max_prompt_len pieces, each with its
tokens' frames), then decode_audio of each token with its frames."""

from __future__ import annotations

import copy
import math
from pathlib import Path

AUDIO = "<|audio|>"
FRAMES_POSITIONS = 50  # a Whisper-style encoder's positions for 1 s of audio (100 mel frames, 2 per position)
BEFORE, AFTER = 2, 2  # prompt tokens before the audio's placeholders, and in prefill_audio after them
STREAM_S = 3  # seconds of audio made for a streaming model (300 mel frames: 37 tokens of 8 frames)


def is_audio_lm(class_name: str) -> bool:
    """Whether the class is a decoder-only model registered for speech or sequence-to-sequence generation
    (its config is not an encoder-decoder's)."""
    import transformers

    try:
        return not getattr(getattr(transformers, class_name).config_class(), "is_encoder_decoder", False)
    except Exception:
        return False


def tokenizer(base):
    """The walk's tokenizer with the audio placeholder token added (a copy)."""
    tok = copy.deepcopy(base)
    tok.add_tokens([AUDIO], special_tokens=True)
    return tok


def configure(config, tok) -> None:
    """The shrunk config's audio placeholder is the tokenizer's AUDIO, and its Whisper-style audio
    encoders take 1 s of audio."""
    from tandem.recipes.audio_lm import AUDIO_TOKEN_FIELDS

    for k in AUDIO_TOKEN_FIELDS:
        if k in vars(config):
            setattr(config, k, tok.convert_tokens_to_ids(AUDIO))
    for sub in [config, *vars(config).values()]:
        if hasattr(sub, "max_source_positions") and hasattr(sub, "to_dict"):
            sub.max_source_positions = FRAMES_POSITIONS


def audio_input(model, folder: Path) -> dict:
    """{the forward's audio input name: 1 s (STREAM_S for a streaming model) of seeded noise through the
    model's own feature extractor, its frames (the last dim, or the one before the mel bins) padded to a
    multiple of frame_multiple}."""
    import inspect

    import torch
    import transformers
    from transformers.models.auto.feature_extraction_auto import FEATURE_EXTRACTOR_MAPPING_NAMES

    from tandem.recipes.audio_lm import audio_input_name, streams_audio

    config = model.config
    cls = FEATURE_EXTRACTOR_MAPPING_NAMES.get(config.model_type)
    if cls is None:
        raise ValueError(f"{config.model_type} registers no feature extractor to make its audio with")
    cls = getattr(transformers, cls)
    params = inspect.signature(cls.__init__).parameters
    kwargs = {}
    bins = mel_bins(config)
    if bins and "feature_size" in params:
        kwargs["feature_size"] = bins
    if "chunk_length" in params:
        kwargs["chunk_length"] = 1
    extractor = cls(**kwargs)
    extractor.save_pretrained(folder)
    rate = int(getattr(extractor, "sampling_rate", 16000))
    seconds = STREAM_S if streams_audio(model) else 1
    noise = (torch.rand(rate * seconds, generator=torch.Generator().manual_seed(0)) * 0.2 - 0.1).numpy()
    features = extractor(noise, sampling_rate=rate, return_tensors="pt")
    name = audio_input_name(model)
    if name not in features:
        raise ValueError(f"{cls.__name__} gives {sorted(features)}, not the {name} that {type(model).__name__} takes")
    x = features[name].float()
    frames = 1 if x.dim() > 2 and x.shape[-1] == getattr(extractor, "feature_size", None) else x.dim() - 1  # [b, frames, bins]
    pad = [0, 0] * (x.dim() - 1 - frames) + [0, -x.shape[frames] % frame_multiple(config)]
    return {name: torch.nn.functional.pad(x, pad)}


def mel_bins(config) -> int | None:
    """The mel bins a speech config's encoder reads (num_mel_bins, a sub-config's at any depth), or None."""
    from transformers import PretrainedConfig

    for k in ("num_mel_bins", "n_mel_bins", "n_mels", "input_feat_size", "input_feat_per_channel"):
        if isinstance(getattr(config, k, None), int):
            return getattr(config, k)
    subs = [v for v in vars(config).values() if isinstance(v, PretrainedConfig)]
    return next((b for b in map(mel_bins, subs) if b), None)


def frame_multiple(config) -> int:
    """The number of feature frames the model's encoder takes a multiple of: its subsampling_factor (in a
    sub-config at any depth; the least common multiple of all it names), the frames it stacks into one
    position, which its processor pads the features to; else 1."""
    from transformers import PretrainedConfig

    own = getattr(config, "subsampling_factor", None)
    subs = [frame_multiple(v) for v in vars(config).values() if isinstance(v, PretrainedConfig)]
    return math.lcm(own if isinstance(own, int) and own > 0 else 1, *subs)


def prompt(model, tok, text: str, audio: dict, new_tokens: int) -> tuple[list[int], dict]:
    """(the prompt's ids with the audio's placeholders after its first BEFORE tokens, the forward's audio
    inputs: the audio and the masks it needs, all ones); for a streaming model the prompt's ids and the
    audio's first frames, those of the prompt and new_tokens more tokens."""
    from tandem.recipes.audio_lm import audio_inputs, audio_token_id, streams_audio

    ((name, x),) = audio.items()
    ids = tok(text)["input_ids"]
    if streams_audio(model):
        frames = (len(ids) + new_tokens) * model.config.audio_length_per_tok
        if x.shape[-1] < frames:
            raise ValueError(f"{x.shape[-1]} mel frames of audio, fewer than the {frames} of {len(ids)} + {new_tokens} tokens")
        return ids, {name: x[..., :frames]}
    inputs, count = audio_inputs(model, name, x)
    return ids[:BEFORE] + [audio_token_id(model.config)] * count + ids[BEFORE:], inputs


def greedy(m, ids: list[int], audio: dict, new_tokens: int, logits_seen: list | None = None) -> list[int]:
    """The same in the runtime: prefill of the tokens before the audio, prefill_audio of its placeholders and
    AFTER more tokens, prefill of the rest (in max_prompt_len pieces), then decode; for a streaming model
    (metadata audio_streaming) prefill_audio of the prompt in max_prompt_len pieces and decode_audio, each
    call with its tokens' frames of the audio. The logits each token is chosen from go to logits_seen."""
    import torch

    from tandem.transformers import prefill

    md = m.metadata
    x = next(iter(audio.values()))
    m.reset()
    if md.get("audio_streaming"):
        step, per = md["max_prompt_len"], md["audio_frames_per_token"]
        for i in range(0, len(ids), step):
            piece = ids[i : i + step]
            logits = m.prefill_audio(torch.tensor([piece]), x[..., i * per : (i + len(piece)) * per])
    else:
        end = BEFORE + md["audio_tokens"] + AFTER
        prefill(m, torch.tensor([ids[:BEFORE]]))
        logits = m.prefill_audio(torch.tensor([ids[BEFORE:end]]), x)
        if end < len(ids):
            logits = prefill(m, torch.tensor([ids[end:]]))
    got = []
    while len(got) < new_tokens:
        got.append(int(logits.argmax()))
        if logits_seen is not None:
            logits_seen.append(logits)
        if len(got) < new_tokens:
            if md.get("audio_streaming"):
                at = (len(ids) + len(got) - 1) * md["audio_frames_per_token"]
                logits = m.decode_audio(torch.tensor([[got[-1]]]), x[..., at : at + md["audio_frames_per_token"]])
            else:
                logits = m.decode(torch.tensor([[got[-1]]]))
    return got
