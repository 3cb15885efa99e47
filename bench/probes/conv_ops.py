"""conv_ops.py — issue #23 item 6 (branch convrate): one .tandem per Mimi SEANet conv shape (the
whole op as the model runs it: Conv1d without padding, the k3 ones followed by ELU, which the
exporter fuses into the conv; the decoder's ConvTranspose1d without padding, names "t..."), for
bench/probes/conv_ops.mjs to time with two runtime builds.
Usage: python bench/probes/conv_ops.py OUT_DIR (writes OUT_DIR/NAME.tandem and OUT_DIR/shapes.json)."""

import json
import sys
from pathlib import Path

import torch

import tandem

# name, C, O, k, stride, T_in, ELU after (Mimi's encoder/decoder at one 80 ms frame)
SHAPES = [
    ("k3_64x1922", 64, 32, 3, 1, 1922, True),
    ("k1_32x1920", 32, 64, 1, 1, 1920, False),
    ("k3_128x482", 128, 64, 3, 1, 482, True),
    ("k1_64x480", 64, 128, 1, 1, 480, False),
    ("k3_256x98", 256, 128, 3, 1, 98, True),
    ("k1_128x96", 128, 256, 1, 1, 96, False),
    ("k3_512x18", 512, 256, 3, 1, 18, True),
    ("k8s4_64x1924", 64, 128, 8, 4, 1924, False),
    ("k10s5_128x485", 128, 256, 10, 5, 485, False),
    ("k12s6_256x102", 256, 512, 12, 6, 102, False),
    ("t12s6_512x16", 512, 256, 12, 6, 16, False),
    ("t10s5_256x96", 256, 128, 10, 5, 96, False),
    ("t8s4_128x480", 128, 64, 8, 4, 480, False),
]


class Conv(torch.nn.Module):
    def __init__(self, c, o, k, s, elu, transposed=False):
        super().__init__()
        self.conv = (torch.nn.ConvTranspose1d if transposed else torch.nn.Conv1d)(c, o, k, stride=s)
        self.elu = elu

    def forward(self, x):
        y = self.conv(x)
        return torch.nn.functional.elu(y) if self.elu else y


def main(out):
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    meta = []
    for name, c, o, k, s, t, elu in SHAPES:
        m = Conv(c, o, k, s, elu, name.startswith("t")).eval()
        x = torch.randn(1, c, t)
        (out / f"{name}.tandem").write_bytes(tandem.export(m, {"forward": (x,)}).to_bytes())
        tout = t if name.startswith("t") else (t - k) // s + 1  # a transposed conv: k products per input and output channel
        meta.append(
            {
                "name": name,
                "x": [1, c, t],
                "flop": 2 * o * c * k * tout,
                "input": x.flatten().tolist(),
                "expect": m(x).detach().flatten().tolist(),
            }
        )
    (out / "shapes.json").write_text(json.dumps(meta))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
