"""tests/models/shrink.py, the registry walk's shrinker: the first shrink is the smallest; the next ones
(SHRINKS) keep the relations a config's validators and modeling code check, fill the sizes a config
leaves None, keep each kind of layer twice, and keep the config's layer counts. Configs only (a model at most on
the meta device: no weights): fast."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from models import shrink  # noqa: E402


def _shrunk(cls, **how):
    config = cls()
    shrink.shrink(config, 64, {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}, **how)
    return config


def _rebuilt(config):
    """The config as a checkpoint folder gives it back: its class's validators run on its fields."""
    return type(config).from_dict(config.to_dict())


def test_a_head_width_keeps_its_product_with_the_heads_as_a_multiple_of_the_hidden_size():
    smallest = _shrunk(transformers.Mamba2Config)
    assert smallest.hidden_size * smallest.expand != smallest.num_heads * smallest.head_dim
    with pytest.raises(Exception, match="hidden_size \\* expand"):
        _rebuilt(smallest)
    c = _rebuilt(_shrunk(transformers.Mamba2Config, consistent=True))
    assert (c.hidden_size, c.num_hidden_layers) == (32, 2)
    assert c.hidden_size * c.expand == c.num_heads * c.head_dim == 64
    assert c.num_heads % c.n_groups == 0  # a group count dividing the heads
    x = _rebuilt(_shrunk(transformers.XLNetConfig, consistent=True))
    assert x.d_head == x.d_model // x.n_head == 8


def test_a_size_the_config_leaves_none_is_filled_by_its_role():
    assert transformers.MinistralConfig().head_dim is None and _shrunk(transformers.MinistralConfig).head_dim is None
    c = _shrunk(transformers.MinistralConfig, consistent=True)
    assert c.head_dim == c.hidden_size // c.num_attention_heads == 8
    d = _shrunk(transformers.Dots1Config, consistent=True)
    assert (d.n_routed_experts, d.num_experts_per_tok) == (4, 2)


def test_counts_that_summed_to_another_still_do():
    c = transformers.DoryConfig()
    parts = [k for k in vars(c) if k.startswith("n_") and k.endswith("_layers")]
    assert sum(getattr(c, k) for k in parts) == c.num_hidden_layers
    s = _shrunk(transformers.DoryConfig, consistent=True)
    assert sum(getattr(s, k) for k in parts) == s.num_hidden_layers < c.num_hidden_layers


def test_keep_layers_keeps_the_layer_count_and_the_per_layer_lists():
    c = _rebuilt(_shrunk(transformers.GPTNeoConfig, consistent=True, keep_layers=True))
    assert c.num_layers == transformers.GPTNeoConfig().num_layers == len(c.attention_layers)
    assert c.hidden_size == 32
    s = _rebuilt(_shrunk(transformers.GPTNeoConfig, consistent=True))  # the list follows the shrunk count
    assert (s.num_layers, s.attention_layers) == (2, ["global", "local"])


def test_a_hybrid_keeps_an_attention_layer_and_its_indices_stay_in_range():
    b = _rebuilt(_shrunk(transformers.BambaConfig, consistent=True))  # attn_layer_indices left None: attention-free
    assert b.attn_layer_indices == [1] and b.layers_block_type == ["linear_attention", "full_attention"]
    g = _shrunk(transformers.GraniteMoeHybridConfig, consistent=True)  # linear attention only in every layer
    assert g.layer_types == ["linear_attention", "full_attention"]
    z = _rebuilt(_shrunk(transformers.Zamba2Config, consistent=True))
    assert z.layers_block_type == ["linear_attention", "hybrid"] and z.hybrid_layer_ids == [1]
    assert z.n_mamba_heads * z.mamba_headdim == z.mamba_expand * z.hidden_size == 64  # mamba's heads, not attention's


def test_a_default_is_the_first_of_its_options():
    assert transformers.XmodConfig().default_language is None
    assert _shrunk(transformers.XmodConfig, consistent=True).default_language == "en_XX"


def test_layer_counts_follow_their_parts_and_the_per_layer_lists_follow_the_count():
    d = _rebuilt(_shrunk(transformers.DoryConfig, consistent=True))
    assert len(d.layer_types) == d.num_hidden_layers == 6
    h = _rebuilt(_shrunk(transformers.HrmTextConfig, consistent=True))
    assert h.num_hidden_layers == h.num_layers_per_stack * h.H_cycles * (h.L_cycles + 1) == 2 * 8


def test_twice_keeps_each_kind_of_layer_twice_and_the_second_half_reads_the_first_halfs_cache():
    with pytest.raises(Exception, match="producing a cache"):
        _rebuilt(_shrunk(transformers.Gemma3nTextConfig, consistent=True)).kv_sharing_modes  # every layer a consumer
    c = _rebuilt(_shrunk(transformers.Gemma3nTextConfig, consistent=True, twice=True))
    assert c.layer_types == ["sliding_attention", "full_attention"] * 2 and c.num_kv_shared_layers == 2
    assert c.kv_sharing_modes == ["store", "store", "reuse", "reuse"]
    z = _shrunk(transformers.ZambaConfig, consistent=True, twice=True)  # the hybrid layers share weights: two of them
    assert z.layers_block_type == ["linear_attention", "hybrid"] * 2


def test_per_layer_settings_follow_the_layers_kept():
    c = transformers.Gemma4TextConfig()
    assert c.layer_types[5] == "full_attention" and (c.per_layer_config[4].head_dim, c.per_layer_config[5].head_dim) == (256, 512)
    s = _rebuilt(_shrunk(transformers.Gemma4TextConfig))
    assert s.layer_types == ["sliding_attention", "full_attention"]
    assert (s.per_layer_config[0].head_dim, s.per_layer_config[1].head_dim) == (8, 16)  # twice the global, as it was
    d = _rebuilt(_shrunk(transformers.Dots3NoteTextConfig))  # read without the per-layer ambiguity error; shrunk by role
    assert [(c.num_attention_heads, c.qk_nope_head_dim) for c in d.per_layer_config] == [(4, 8), (4, 8)]


def test_lists_as_long_as_a_layer_count_follow_it():
    c = _rebuilt(_shrunk(transformers.Wav2Vec2Config))  # its validator checks the conv lists' lengths
    assert c.num_feat_extract_layers == len(c.conv_dim) == len(c.conv_stride) == len(c.conv_kernel) == 2
    assert tuple(c.conv_stride) == transformers.Wav2Vec2Config().conv_stride[:2]


def test_a_speech_models_input_feature_widths_are_kept():
    c = _shrunk(transformers.SeamlessM4TConfig)
    assert c.feature_projection_input_dim == 160 and c.hidden_size == 32
    assert _shrunk(transformers.WhisperConfig).num_mel_bins == 80


def test_token_ids_past_the_vocabulary_and_its_last_keep_their_place():
    c = _rebuilt(_shrunk(transformers.KyutaiSpeechToTextConfig, consistent=True))
    assert c.audio_pad_token_id == c.vocab_size + c.num_codebooks * c.codebook_vocab_size == 64 + 32 * 64
    assert c.codec_config.upsample_groups == c.codec_config.hidden_size == 32  # depthwise: one group per channel
    head = _shrunk(transformers.Nemotron3_5TranscribeConfig, consistent=True).word_timestamp_config
    assert head.blank_token_id == head.vocab_size - 1 == 63


def test_a_width_that_was_another_sub_configs_hidden_size_stays_it():
    c = _rebuilt(_shrunk(transformers.VibeVoiceConfig, consistent=True))
    assert c.diffusion_head_config.latent_size == c.audio_config.hidden_size == 32
    d = _shrunk(transformers.Nemotron3_5TranscribeConfig, consistent=True).audio_config.diarization_config
    assert d.head_config.audio_hidden_size == d.audio_config.hidden_size == 32


def test_a_chunk_of_audio_samples_stays_a_multiple_of_the_hop():
    c = _rebuilt(_shrunk(transformers.VibeVoiceAsrConfig, consistent=True))
    assert c.acoustic_tokenizer_chunk_size % c.acoustic_tokenizer_encoder_config.hop_length == 0


def test_a_codecs_filters_that_double_per_stage_start_small():
    c = _rebuilt(_shrunk(transformers.VibeVoiceAsrConfig, consistent=True))
    assert c.acoustic_tokenizer_encoder_config.num_filters == c.semantic_tokenizer_encoder_config.num_filters == 4
    with torch.device("meta"):
        model = transformers.VibeVoiceAsrForConditionalGeneration(c)
    assert sum(p.numel() for p in model.parameters()) < 20_000_000  # 32 filters doubled six times: 686 million
    assert _shrunk(transformers.MimiConfig).num_filters == 4


def test_own_ids_keeps_the_configs_special_token_ids_in_the_vocabulary():
    for own, want in ((False, (5, 6)), (True, (0, 1))):  # ProphetNet's positions start after its pad id, 0
        c = transformers.ProphetNetConfig()
        shrink.shrink(c, 64, {"pad_token_id": 5, "bos_token_id": 6}, own_ids=own)
        assert (c.pad_token_id, c.bos_token_id) == want
