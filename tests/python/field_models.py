"""The field's models as their packages ship them, built from the packages' own configs with seeded
random weights (nothing downloaded): tests/python/test_field.py and bench/mimi.py use them."""
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
        cfg["transformer"].update(d_model=dim, num_heads=2, num_layers=2, dim_feedforward=64, input_dimension=dim,
                                  output_dimensions=[dim])
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
