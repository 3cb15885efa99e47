"""Two exports of pocket-tts (bench/models/pocket.py's DIR/pocket.tandem), each on its own runtime,
interleaved frame by frame (which goes first alternating) on one thread over the package's frames,
so a busy machine slows both alike: per frame the `step` and `decode` + `advance` wall time (the median over the frames after
two warm-up ones) and, from `model.profile`, the bytes `step` writes per call (state, scratch) and
its permute ops. Each run is checked against the package's latents. Usage:
  python bench/probes/pocket_before_after.py BEFORE_DIR BEFORE_RUNTIME AFTER_DIR AFTER_RUNTIME [passes = 3]
where a runtime is a libtandem.so (native) or a .wasm file (the wasm runtime through wasmtime)."""

import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
import tandem  # noqa: E402
from tandem import runtime  # noqa: E402

before_dir, before_rt, after_dir, after_rt = (Path(a) for a in sys.argv[1:5])
PASSES = int(sys.argv[5]) if len(sys.argv) > 5 else 3
torch.set_num_threads(1)


def library(path: Path):
    if path.suffix == ".wasm":
        from tandem.wasm import WasmLibrary

        return WasmLibrary(path)
    return runtime.NativeLibrary(path)


def load(d: Path, rt: Path):
    runtime._lib = library(rt)  # the model keeps the library it was loaded with
    return tandem.load((d / "pocket.tandem").read_bytes())


frames = json.loads((after_dir / "pocket_frames.json").read_text())
std, mean = torch.tensor(frames["emb_std"]), torch.tensor(frames["emb_mean"])
latents = [torch.tensor(v).reshape(1, 1, -1) for v in frames["latents"]]
runs = {"before": load(before_dir, before_rt), "after": load(after_dir, after_rt)}
times = {k: {"step": [], "decode": []} for k in runs}
err = dict.fromkeys(runs, 0.0)
for _ in range(PASSES):
    for m in runs.values():
        m.reset_state()
        m.prompt(torch.tensor(frames["prompt"]).reshape(1, -1))
    x = torch.full_like(latents[0], float("nan"))
    for i, want in enumerate(latents):
        for k in list(runs)[:: 1 if i % 2 else -1]:  # either order every other frame
            m = runs[k]
            t0 = time.perf_counter()
            got, _ = m.step(x)
            t1 = time.perf_counter()
            m.decode(want * std + mean)
            m.advance()
            t2 = time.perf_counter()
            if i >= 2:
                times[k]["step"].append((t1 - t0) * 1e3)
                times[k]["decode"].append((t2 - t1) * 1e3)
            err[k] = max(err[k], float((got - want).abs().max()))
        x = want
backend = "wasm" if after_rt.suffix == ".wasm" else "native"
med = {k: {w: statistics.median(v) for w, v in t.items()} for k, t in times.items()}
for k in runs:
    s, d = med[k]["step"], med[k]["decode"]
    print(f"{k:6s} ({backend}, 1 thread): step {s:.2f} + decode/advance {d:.2f} = {s + d:.2f} ms per frame; latent max |diff| {err[k]:.1e}")
print(f"after / before: step {med['after']['step'] / med['before']['step']:.3f}, frame "
      f"{(med['after']['step'] + med['after']['decode']) / (med['before']['step'] + med['before']['decode']):.3f}")  # fmt: skip
# bytes written per step and per decode, and time by op kind: the mean over frames 3 to 5
R = 3
for k, m in runs.items():
    m.reset_state()
    m.prompt(torch.tensor(frames["prompt"]).reshape(1, -1))
    x = torch.full_like(latents[0], float("nan"))
    profs = {"step": [], "decode": []}
    for i, want in enumerate(latents[: 3 + R]):
        if i < 3:
            m.step(x)
            m.decode(want * std + mean)
        else:
            profs["step"].append(m.profile("step", x)[1])
            profs["decode"].append(m.profile("decode", want * std + mean)[1])
        m.advance()
        x = want
    for method, runs_ in profs.items():
        kind = defaultdict(lambda: [0.0, 0, 0, 0])
        for prof in runs_:
            for p in prof:
                kind[p.name][0] += p.ms / R
                kind[p.name][1] += p.bytes_written / R
                kind[p.name][2] += p.state_bytes_written / R
                kind[p.name][3] += 1 / R
        state, total = sum(v[2] for v in kind.values()), sum(v[1] for v in kind.values())
        perm = kind.get("permute", [0.0, 0, 0, 0])
        print(f"{k:6s} {method}: {len(runs_[0])} ops, state bytes written {state:,.0f}, scratch bytes written {total - state:,.0f}; "
              f"permute: {perm[3]:.0f} ops, {perm[1]:,.0f} bytes, {perm[0]:.3f} ms; attention {kind['attention'][0]:.3f} ms")  # fmt: skip
