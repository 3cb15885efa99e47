"""Hugging Face transformers models to programs (the recipes in tandem/recipes/; each imports
transformers only when called):

    program = tandem.transformers.export_causal_lm(model, max_cache_len=512, max_prompt_len=64)
    program = tandem.transformers.export_seq2seq(whisper, max_cache_len=64)
    program = tandem.transformers.export_audio_lm(qwen2_audio, audio_input_shape=(1, 128, 3000), max_cache_len=1024, max_prompt_len=64)
    program = tandem.transformers.export_codec_lm(kyutai_stt, audio_input_shape=(1, 1, 48000), max_cache_len=64, max_prompt_len=4)
    program, report = tandem.transformers.export_pretrained("my-model/", "my-model.tandem")
    logits = tandem.transformers.prefill(tandem.load("my-model.tandem"), tokens)

recipes/causal_lm.py, recipes/audio_lm.py, recipes/codec_lm.py and recipes/seq2seq.py describe the methods and metadata of their programs,
recipes/pretrained.py the folder it reads (and `Progress`, export_pretrained's stage lines).
"""

from __future__ import annotations

from .recipes.audio_lm import export_audio_lm
from .recipes.causal_lm import export_causal_lm, prefill
from .recipes.codec_lm import export_codec_lm
from .recipes.pretrained import Progress, export_pretrained
from .recipes.seq2seq import export_seq2seq

__all__ = ["Progress", "export_audio_lm", "export_causal_lm", "export_codec_lm", "export_pretrained", "export_seq2seq", "prefill"]
