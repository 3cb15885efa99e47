"""tests/models/shrink.py, the registry walk's shrinker: the first shrink is the smallest; the next ones
(SHRINKS) keep the relations a config's validators and modeling code check, fill the sizes a config
leaves None, and keep the config's layer counts. Configs only (no model is built): fast."""

import pytest

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
    with pytest.raises(Exception, match="attention_layers"):
        _rebuilt(_shrunk(transformers.GPTNeoConfig, consistent=True))
