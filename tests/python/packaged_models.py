"""Models as their PyPI packages ship them (moshi's Mimi, pocket-tts), built from the packages' own
configs with seeded random weights (nothing downloaded): tests/python/test_mimi.py and test_pocket.py,
bench/models/mimi.py and pocket.py, and demo/build_audio.py use them."""

from __future__ import annotations

import copy

import torch


def mimi(small: bool = True, seed: int = 0, gain: float = 1.0, code_scale: float = 0.1, num_codebooks: int = 8):
    """Kyutai's Mimi codec (PyPI `moshi`) from `moshi.models.loaders`' config: full size (79 M
    parameters), or small (2 transformer layers, small dims; the same SEANet strides, so a frame is
    still 1920 samples, 80 ms at 24 kHz). Weights: seeded normal, scaled by fan-in so that activations
    stay in range through the network. `num_codebooks` codes a frame (8 for Moshi's codec, 32 for
    Kyutai STT's; the small config has 8)."""
    from moshi.models import loaders

    cfg = copy.deepcopy(loaders._mimi_config)
    if small:
        dim = 32
        cfg["seanet"].update(dimension=dim, n_filters=8)
        cfg["quantizer"].update(dimension=16, n_q=8, bins=64, input_dimension=dim, output_dimension=dim)
        cfg["transformer"].update(d_model=dim, num_heads=2, num_layers=2, dim_feedforward=64, input_dimension=dim, output_dimensions=[dim])
    torch.manual_seed(seed)
    model = loaders.get_mimi(None, cfg, num_codebooks=num_codebooks)
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

# Kyutai STT's language model, as moshi's loader takes it (`lm_kwargs`), from the published config.json
# of kyutai/stt-1b-en_fr: moshi's LMModel over Mimi's 32 codebooks and a text stream, no depformer
# (dep_q 0: it predicts text only), every delay 0 (the text lags the audio by how the model was
# trained, 0.5 s: the caller appends that much silence at the end). 989 M parameters.
STT_1B = dict(
    dim=2048, num_heads=16, num_layers=16, hidden_scale=4.125, n_q=32, dep_q=0, card=2048, text_card=8000,
    existing_text_padding_id=3, context=750, max_period=100000.0, causal=True, layer_scale=None, gating="silu",
    norm="rms_norm_f32", positional_embedding="rope", delays=[0] * 33,
)  # fmt: skip
# kyutai/stt-2.6b-en differs in num_heads=32, num_layers=48, text_card=4000, context=375 (2.5 s delay).
# The small STT: the same structure over the small Mimi's 8 codebooks of 64 entries.
STT_SMALL = {**STT_1B, "dim": 64, "num_heads": 4, "num_layers": 2, "n_q": 8, "card": 64, "text_card": 100, "context": 16, "delays": [0] * 9}


class Transcriber(torch.nn.Module):
    """Kyutai's streaming speech-to-text as moshi runs it: each 80 ms frame of 24 kHz audio
    [1, 1, 1920] is encoded by Mimi's streaming `encode` into one step of codes, which `LMGen.step`
    takes, giving the greedy text token [1, 1, 1] (also as two calls, `encode` and `lm_step`, so that a
    caller can give the LM other codes). Both run inside their `streaming(1)` contexts,
    entered by the caller (`with t.mimi.streaming(1), t.lm_gen.streaming(1)`); `reset` starts a new
    stream."""

    def __init__(self, codec, lm_gen):
        super().__init__()
        self.mimi, self.lm_gen = codec, lm_gen

    def step(self, pcm: torch.Tensor) -> torch.Tensor:
        return self.lm_step(self.encode(pcm))

    def encode(self, pcm: torch.Tensor) -> torch.Tensor:
        """The first half of `step`: Mimi's codes of the frame [1, n_q, 1]."""
        return self.mimi.encode(pcm)

    def lm_step(self, codes: torch.Tensor) -> torch.Tensor:
        """The second half of `step`: `LMGen.step` on a frame's codes (`encode` then `lm_step` is `step`)."""
        return self.lm_gen.step(codes)

    def reset(self) -> None:
        self.mimi.reset_streaming()
        self.lm_gen.reset_streaming()

    def force_text(self, token: torch.Tensor) -> None:
        """Teacher forcing: the next `step` reads `token` ([1, 1, 1] int64) as the previous frame's text
        token, in place of the one the last `step` gave (moshi's LMGen keeps it in its token cache at
        the slot the next step reads)."""
        state = self.lm_gen._streaming_state
        positions = (state.offsets % state.cache.shape[2])[:, None, None]
        state.cache[:, :1].scatter_(-1, positions, token.reshape(-1, 1, 1))


def stt(small: bool = True, seed: int = 0) -> Transcriber:
    """Kyutai STT (moshi's `LMModel` from `get_moshi_lm` with STT_1B's or STT_SMALL's kwargs, and
    the Mimi that feeds it: full size with 32 codebooks, or small), greedy (`LMGen(use_sampling=False)`,
    what temp 0 gives), with seeded random weights (nothing downloaded): each matrix normal and scaled
    by its fan-in, the norms' gains 1 as moshi makes them."""
    from moshi.models import loaders
    from moshi.models.lm import LMGen

    codec = mimi(small=small, seed=seed, num_codebooks=8 if small else 32)
    kwargs = {**loaders._lm_kwargs, **(STT_SMALL if small else STT_1B)}
    # made on the meta device and then filled in place: the 1B model's 4 GB are allocated once
    lm = loaders.get_moshi_lm(None, lm_kwargs=kwargs, device="meta", dtype=torch.float32).to_empty(device="cpu")
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in lm.parameters():
            if p.dim() == 2:  # a Linear's weight [out, in] or an embedding table [entries, dim]
                p.normal_(0, p.shape[1] ** -0.5, generator=g)
            else:  # the RMS norms' gains, 1 as moshi makes them
                p.fill_(1.0)
    assert not list(lm.buffers())
    return Transcriber(codec, LMGen(lm.eval(), use_sampling=False)).eval()


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


def as_quantized(model: torch.nn.Module, mode: str, group: int = 32) -> list:
    """Makes model compute, in float32, what `tandem.export(..., quantize=mode)` of it computes: each
    nn.Linear's and nn.Embedding's weight replaced, in place, by its dequantized int8 / int4 value,
    and the Linears' input rows quantized to int8 as matmul_q8 (blocks of 32) and matmul_q4 (blocks of
    the weight group) do before their integer dot products (tests/python/test_ops.py's reference),
    also where the model passes a Linear's weight to F.linear itself. Returns those Linears."""
    from test_ops import dot_rows, q4_dot_rows, quantize_linear_inputs, ref_dequantize

    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (torch.nn.Linear, torch.nn.Embedding)):
                mod.weight.copy_(ref_dequantize(mod.weight, mode, group).float())
    if mode == "int8":
        return quantize_linear_inputs(model, dot_rows)
    return quantize_linear_inputs(model, q4_dot_rows(group), block=group)
