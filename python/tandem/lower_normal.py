"""`normal_` (and torch.nn.init.normal_) with a standard deviation of 0: its mean, exactly.

pocket-tts samples each latent as the flow head's output for noise drawn with
`torch.nn.init.normal_(noise, mean=0.0, std=temp ** 0.5)`; at temperature 0 that noise is exactly
its mean, with no random draw, and tandem exports it as a fill. With any other std it is random
sampling, which needs the generator kept in the program's state (built on branch `rng`): an
ExportError naming the line until then. Registered only when no other handler for the op exists,
so the state-resident generator, when merged, takes over."""
from __future__ import annotations

import torch

from .lower import HANDLERS, NO_FOLD, _dtype_of, _fill, _shape_of

aten = torch.ops.aten


def _normal(L, node, args, kwargs):
    mean = kwargs.get("mean", args[1] if len(args) > 1 else 0.0)
    std = kwargs.get("std", args[2] if len(args) > 2 else 1.0)
    if not isinstance(mean, (int, float)) or not isinstance(std, (int, float)):
        L.fail("normal_ with a tensor mean or std is not supported")
    if std != 0:
        L.fail(f"normal_ draws random numbers (std {std}); tandem exports it only with std 0 (pocket-tts at temperature "
               "0: the noise is its mean), until the generator kept in the program's state is merged")
    return _fill(L, float(mean), _dtype_of(node), _shape_of(node))


for _op in (aten.normal_functional.default,):
    HANDLERS.setdefault(_op, _normal)
    NO_FOLD.add(_op)  # its noise is drawn per call, never once at export
