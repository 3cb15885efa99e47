"""The walk's codec LMs (tests/models/zoo.py): decoder-only classes registered for speech generation
whose every position reads its text token and a frame of their own audio codec's codes
(KyutaiSpeechToTextForConditionalGeneration: tandem.recipes.codec_lm).

Its shrunk config keeps what the released one has: the codec's quantizer works at its codebooks' width
(vector_quantization_hidden_dimension = codebook_dim), each codebook's vocabulary is the codec's codes and
one more, the audio start token (audio_bos_token_id = codebook_size), and the audio padding token is the
embedding's last row. Its audio is 1 s of seeded noise through the model's own feature extractor (which
pads 1 s of silence after it: 2 s, 25 frames); the prompt is the start token, as generate makes it; the
reference is transformers' greedy generate (which goes on to the audio's last frame: its first
NEW_TOKENS), and the runtime's is encode of the audio, prefill of the start token, then decode."""

from __future__ import annotations

from pathlib import Path


def is_codec_config(config) -> bool:
    return all(hasattr(config, k) for k in ("codec_config", "num_codebooks", "codebook_vocab_size", "audio_bos_token_id"))


def configure(config) -> None:
    """The shrunk config's codec and token ids as the released config has them (the module's docstring)."""
    if not is_codec_config(config):
        return
    codec = config.codec_config
    codec.vector_quantization_hidden_dimension = codec.codebook_dim
    config.codebook_vocab_size = codec.codebook_size + 1
    config.audio_bos_token_id = codec.codebook_size
    config.audio_pad_token_id = config.vocab_size + config.num_codebooks * config.codebook_vocab_size


def audio_input(model, folder: Path) -> dict:
    """{'input_values': 1 s of seeded noise through the model's own feature extractor}, saved in the folder."""
    import torch
    import transformers
    from transformers.models.auto.feature_extraction_auto import FEATURE_EXTRACTOR_MAPPING_NAMES

    extractor = getattr(transformers, FEATURE_EXTRACTOR_MAPPING_NAMES[model.config.model_type])()
    extractor.save_pretrained(folder)
    rate = int(extractor.sampling_rate)
    noise = (torch.rand(rate, generator=torch.Generator().manual_seed(0)) * 0.2 - 0.1).numpy()
    return {"input_values": extractor(noise, sampling_rate=rate, return_tensors="pt")["input_values"].float()}


def build(model, folder: Path, new_tokens: int) -> tuple[dict, list[int], list[int]]:
    """(the audio input, the prompt ids, transformers' greedy tokens)."""
    from models.zoo import reference

    inputs = audio_input(model, folder)
    ids = [model.config.bos_token_id]
    return inputs, ids, reference(model, ids, inputs, new_tokens)[:new_tokens]


def greedy(m, ids: list[int], inputs: dict, new_tokens: int) -> list[int]:
    """The same in the runtime: encode, prefill of the prompt, then decode."""
    import torch

    m.reset()
    m.encode(inputs["input_values"])
    logits = m.prefill(torch.tensor([ids]))
    got = []
    while len(got) < new_tokens:
        got.append(int(logits.argmax()))
        if len(got) < new_tokens:
            logits = m.decode(torch.tensor([[got[-1]]]))
    return got
