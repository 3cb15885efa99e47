"""Weight layout: matmul_packed's b in panels of PANEL columns (docs/ops.md), written once at export
(also by fuse.py and quantize.py through pack_panels)."""

from __future__ import annotations

import torch

from .. import schema

PANEL = schema.PANEL  # columns per packed panel (schema.py; TDM_PANEL in the runtime)


def pack_panels(w: torch.Tensor) -> torch.Tensor:
    """Weights w [K, N] as [ceil(N/PANEL), K, PANEL]: PANEL-column panels, zero past N (matmul_packed's b)."""
    K, N = w.shape
    panels = (N + PANEL - 1) // PANEL
    padded = torch.zeros(K, panels * PANEL)
    padded[:, :N] = w
    return padded.reshape(K, panels, PANEL).permute(1, 0, 2).contiguous()
