"""Mimi's streaming steps op by op on the wasm backend (wasmtime, one thread): bench/models/mimi.py's
exported file (and its op listing, mimi_ops.json, for the shapes), a few frames, then each method
profiled over `rounds` frames. Prints the time per
op kind and the slowest single ops with their shapes (read from the file), to see which kernels a
change moves. Usage: python bench/suite/mimi_profile.py DIR [rounds = 3] [wasm = web/tandem.wasm] [name = mimi: DIR/NAME.tandem,
for example mimi_int8]."""

import json
import sys
from collections import defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
import tandem  # noqa: E402
from tandem import runtime  # noqa: E402
from tandem.wasm import WasmLibrary  # noqa: E402

DIR = Path(sys.argv[1] if len(sys.argv) > 1 else "build/bench")
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
runtime._lib = WasmLibrary(Path(sys.argv[3]) if len(sys.argv) > 3 else ROOT / "web" / "tandem.wasm")
runtime.BACKEND = "wasm"
NAME = sys.argv[4] if len(sys.argv) > 4 else "mimi"
blob = (DIR / f"{NAME}.tandem").read_bytes()
listing = json.loads((DIR / f"{NAME}_ops.json").read_text()) if (DIR / f"{NAME}_ops.json").exists() else None
frames = json.loads((DIR / "mimi_frames.json").read_text())
model = tandem.load(blob)
shape = frames["codes_shape"]
x = [torch.tensor(f).reshape(1, 1, -1) for f in frames["inputs"]]
codes = [torch.tensor(c).reshape(shape) for c in frames["codes"]]
model.encode_step(x[0]), model.decode_step(codes[0])
for name, arg in (("encode_step", x), ("decode_step", codes)):
    by_kind, by_op, total = defaultdict(float), defaultdict(float), 0.0
    for r in range(ROUNDS):
        _, ops = model.profile(name, arg[1 + r])
        for p in ops:
            by_kind[p.name] += p.ms / ROUNDS
            by_op[p.index] += p.ms / ROUNDS
            total += p.ms / ROUNDS
    print(f"{name}: {total:.1f} ms per step (wasm, 1 thread)")
    for k, ms in sorted(by_kind.items(), key=lambda t: -t[1])[:8]:
        print(f"  {k:16s} {ms:7.2f} ms")
    for i, ms in sorted(by_op.items(), key=lambda t: -t[1])[:14]:
        op = listing[name][i] if listing else {}
        print(f"    #{i:4d} {op.get('name', ''):14s} {ms:6.2f} ms  {op.get('ins', '')} -> {op.get('outs', '')} {op.get('iattr', '')}")
