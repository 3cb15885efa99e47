"""A 1 GiB program for the load-memory measurement (bench/suite/big_load.mjs,
docs/performance.md): one bias-free Linear(16384, 16384), seeded, exported with tandem.export.

    python bench/models/big_program.py OUT.tandem
"""

import sys
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "python")]
import tandem  # noqa: E402

torch.manual_seed(0)
model = torch.nn.Linear(16384, 16384, bias=False).eval()
tandem.export(model, {"forward": (torch.zeros(1, 16384),)}).save(sys.argv[1])
