"""pocket-tts' generated frame op by op: bench/models/pocket.py's exported file (DIR/NAME.tandem, and its op
listing NAME_ops.json for the shapes) over the package's frames, on the native library (or the wasm
runtime through wasmtime with wasm = a .wasm path), one thread. After the prompt and two frames,
`step` and `decode` are profiled over `rounds` frames: the time and bytes written per op kind and the
slowest single ops with their shapes. Usage: python bench/probes/pocket_profile.py DIR [rounds = 3]
[name = pocket: DIR/NAME.tandem, for example pocket_int8] [wasm]."""

import json
import sys
from collections import defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
import tandem  # noqa: E402
from tandem import runtime  # noqa: E402

DIR = Path(sys.argv[1] if len(sys.argv) > 1 else "build/bench")
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
NAME = sys.argv[3] if len(sys.argv) > 3 else "pocket"
if len(sys.argv) > 4:
    from tandem.wasm import WasmLibrary

    runtime._lib, runtime.BACKEND = WasmLibrary(Path(sys.argv[4])), "wasm"
listing = json.loads((DIR / f"{NAME}_ops.json").read_text()) if (DIR / f"{NAME}_ops.json").exists() else None
frames = json.loads((DIR / "pocket_frames.json").read_text())
model = tandem.load((DIR / f"{NAME}.tandem").read_bytes())
std, mean = torch.tensor(frames["emb_std"]), torch.tensor(frames["emb_mean"])
latents = [torch.tensor(v).reshape(1, 1, -1) for v in frames["latents"]]
model.prompt(torch.tensor(frames["prompt"]).reshape(1, -1))
x = torch.full_like(latents[0], float("nan"))
prof = {"step": [], "decode": []}
for i in range(2 + ROUNDS):
    if i < 2:
        model.step(x)
        model.decode(latents[i] * std + mean)
    else:
        prof["step"].append(model.profile("step", x)[1])
        prof["decode"].append(model.profile("decode", latents[i] * std + mean)[1])
    model.advance()
    x = latents[i]
for name, runs in prof.items():
    kind, by_op, total = defaultdict(lambda: [0.0, 0]), defaultdict(float), 0.0
    for ops in runs:
        for p in ops:
            kind[p.name][0] += p.ms / ROUNDS
            kind[p.name][1] += p.bytes_written // ROUNDS
            by_op[p.index] += p.ms / ROUNDS
            total += p.ms / ROUNDS
    print(f"{name}: {total:.1f} ms per call ({runtime.BACKEND}, 1 thread)")
    for k, (ms, nbytes) in sorted(kind.items(), key=lambda t: -t[1][0])[:8]:
        print(f"  {k:16s} {ms:7.2f} ms  {nbytes / 1e6:8.2f} MB written")
    for i, ms in sorted(by_op.items(), key=lambda t: -t[1])[:8]:
        op = listing[name][i] if listing else {}
        print(f"    #{i:4d} {op.get('name', ''):14s} {ms:6.2f} ms  {op.get('ins', '')} -> {op.get('outs', '')}")
