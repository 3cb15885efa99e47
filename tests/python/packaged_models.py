"""Models as their PyPI packages ship them (moshi's Mimi, pocket-tts), built from the packages' own
configs with seeded random weights (nothing downloaded): tests/python/test_mimi.py and test_pocket.py,
bench/models/mimi.py and pocket.py, and demo/build_audio.py use them."""

from __future__ import annotations

import copy

import torch


def mimi(small: bool = True, seed: int = 0, gain: float = 1.0, code_scale: float = 0.1):
    """Kyutai's Mimi codec (PyPI `moshi`) from `moshi.models.loaders`' config: full size (79 M
    parameters), or small (2 transformer layers, small dims; the same SEANet strides, so a frame is
    still 1920 samples, 80 ms at 24 kHz). Weights: seeded normal, scaled by fan-in so that activations
    stay in range through the network."""
    from moshi.models import loaders

    cfg = copy.deepcopy(loaders._mimi_config)
    if small:
        dim = 32
        cfg["seanet"].update(dimension=dim, n_filters=8)
        cfg["quantizer"].update(dimension=16, n_q=8, bins=64, input_dimension=dim, output_dimension=dim)
        cfg["transformer"].update(d_model=dim, num_heads=2, num_layers=2, dim_feedforward=64, input_dimension=dim, output_dimensions=[dim])
    torch.manual_seed(seed)
    model = loaders.get_mimi(None, cfg, num_codebooks=8)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=g) * (gain / p[0].numel() ** 0.5))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
        for name, b in model.named_buffers():  # the codebooks: random centroids, each used once
            if name.endswith("embedding_sum"):
                b.copy_(torch.randn(b.shape, generator=g) * code_scale)
            elif name.endswith("_initialized"):
                b.fill_(1.0)
    return model.eval()


FRAME = 1920  # samples per Mimi frame: 80 ms at 24 kHz


def _tokenizer_file(n_bins: int) -> str:
    """A local tokenizer.json (HuggingFace `tokenizers`, word level) with n_bins entries, for a
    pocket-tts config built offline: its ids are all the LM's tests need."""
    import os
    import tempfile

    from tokenizers import Tokenizer, models, pre_tokenizers

    path = os.path.join(tempfile.gettempdir(), f"tandem-pocket-tokenizer-{n_bins}.json")
    if not os.path.exists(path):
        vocab = {"[UNK]": 0, **{f"w{i}": i for i in range(1, n_bins)}}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.save(path + ".tmp")
        os.replace(path + ".tmp", path)
    return path


def pocket(small: bool = True, seed: int = 0, temp: float = 0.3):
    """pocket-tts' TTSModel from the package's own english.yaml config (full size: a 6-layer d1024
    flow LM, a Mimi decoder; 110 M parameters), or small (2 layers, small dims; the same SEANet
    strides, so a generated frame is still 1920 samples at 24 kHz), built by the package's own
    TTSModel._from_pydantic_config_with_weights with no weights path (nothing downloaded) and
    seeded random weights scaled by fan-in."""
    from pocket_tts.models.tts_model import TTSModel
    from pocket_tts.utils.config import CONFIGS_DIR, load_config

    cfg = load_config(CONFIGS_DIR / "english.yaml").model_dump()
    cfg["weights_path"] = cfg["weights_path_without_voice_cloning"] = None
    lm, mm = cfg["flow_lm"], cfg["mimi"]
    if small:
        lm["transformer"].update(d_model=64, num_heads=4, num_layers=2, hidden_scale=2)
        lm["flow"].update(dim=32, depth=2)
        lm["lookup_table"].update(dim=64, n_bins=40)
        mm.update(inner_dim=16, outer_dim=32)
        mm["seanet"].update(dimension=32, n_filters=4)
        mm["quantizer"].update(dimension=16, output_dimension=32)
        mm["transformer"].update(d_model=32, num_heads=2, num_layers=2, dim_feedforward=64, input_dimension=32, output_dimensions=[32])
    lm["lookup_table"]["tokenizer_path"] = _tokenizer_file(lm["lookup_table"]["n_bins"])
    from pocket_tts.utils.config import Config

    config = Config(**cfg)
    import logging

    logging.getLogger("pocket_tts").setLevel(logging.ERROR)
    torch.manual_seed(seed)
    model = TTSModel._from_pydantic_config_with_weights(
        config, temp=temp, sampler_decode_steps=1, noise_clamp=None, eos_threshold=config.default_eos_threshold
    )
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=g) * (1.0 / p[0].numel() ** 0.5))
            elif name.endswith("alpha") or name.endswith("norm1.weight") or name.endswith("norm2.weight"):
                p.copy_(1 + torch.randn(p.shape, generator=g) * 0.05)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    return model.eval()
