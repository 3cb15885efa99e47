"""conv / conv_transpose at Mimi's streaming shapes, float32 against quantize="int8" (conv_q8 /
conv_transpose_q8), one op per program on the wasm backend (wasmtime, one thread): the best of
`reps` calls each, the two programs alternating so a busy machine slows both alike. The rule for
which convolutions quantize_conv.py turns int8 (CONV_Q8_MAX_ROWS) is lifted here to 16 so the
16-position shapes can be measured too. Usage: python bench/probes/conv_q8_ops.py [reps = 15]
[wasm = web/tandem.wasm]."""

import sys
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
import tandem  # noqa: E402
from tandem import quantize_conv, runtime  # noqa: E402
from tandem.wasm import WasmLibrary  # noqa: E402

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
runtime._lib = WasmLibrary(Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "web" / "tandem.wasm")
runtime.BACKEND = "wasm"
quantize_conv.CONV_Q8_MAX_ROWS = 16

SHAPES = [  # (name, module, input shape): Mimi's full-size encoder and decoder steps
    ("enc 512->1024 k16 s8, 2 pos", nn.Conv1d(512, 1024, 16, stride=8), (1, 512, 24)),
    ("enc 1024->512 k3, 2 pos", nn.Conv1d(1024, 512, 3), (1, 1024, 4)),
    ("enc 512->512 k4 s2, 1 pos", nn.Conv1d(512, 512, 4, stride=2), (1, 512, 4)),
    ("dec 512->1024 k7, 2 pos", nn.Conv1d(512, 1024, 7), (1, 512, 8)),
    ("dec T 1024->512 k16 s8, 2 in", nn.ConvTranspose1d(1024, 512, 16, stride=8), (1, 1024, 2)),
    ("enc 256->512 k12 s6, 16 pos", nn.Conv1d(256, 512, 12, stride=6), (1, 256, 102)),
    ("enc 512->256 k3, 16 pos", nn.Conv1d(512, 256, 3), (1, 512, 18)),
    ("dec T 512->256 k12 s6, 16 in", nn.ConvTranspose1d(512, 256, 12, stride=6), (1, 512, 16)),
]

torch.manual_seed(0)
for name, module, shape in SHAPES:
    x = torch.randn(*shape)
    models = [tandem.load(tandem.export(module, {"forward": (x,)}, quantize=q).to_bytes()) for q in (None, "int8")]
    kinds = [[op.name for op in tandem.export(module, {"forward": (x,)}, quantize=q).method("forward").ops] for q in (None, "int8")]
    best = [float("inf")] * 2
    for _ in range(REPS):
        for k, m in enumerate(models):
            t0 = time.perf_counter()
            m.forward(x)
            best[k] = min(best[k], time.perf_counter() - t0)
    with torch.no_grad():
        ref = module(x)
    err = float((models[1].forward(x) - ref).abs().max() / ref.abs().max())
    print(
        f"{name:32s} float32 {1e3 * best[0]:6.2f} ms  int8 {1e3 * best[1]:6.2f} ms  ({best[1] / best[0]:.2f}x)  "
        f"{kinds[1][0]}  rel err {err:.1e}",
        flush=True,
    )
