"""pocket-tts' generated frame op by op, robust to a loaded machine: bench/models/pocket.py's export
(DIR/NAME.tandem) over the package's frames on the native library, or on the wasm runtime (through
wasmtime) with wasm = a .wasm path, one thread. After the prompt and two frames, each of `step` and
`decode` is profiled over `rounds` frames; per op the minimum over the rounds (a preempted op only
makes a round slower), and per call the time tdm_session_bind takes to re-bind the method's shapes
at the new offset (a state-bound dim moves every call) and the call's wall time without profiling.
Writes OUT (JSON) for bench/probes/pocket_ops_compare.py. Usage:
  python bench/probes/pocket_ops.py DIR NAME OUT [rounds = 8] [wasm]"""

import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
import tandem  # noqa: E402
from tandem import runtime  # noqa: E402

DIR, NAME, OUT = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 8
if len(sys.argv) > 5:
    from tandem.wasm import WasmLibrary

    runtime._lib, runtime.BACKEND = WasmLibrary(Path(sys.argv[5])), "wasm"
torch.set_num_threads(1)
listing = json.loads((DIR / f"{NAME}_ops.json").read_text())
frames = json.loads((DIR / "pocket_frames.json").read_text())
model = tandem.load((DIR / f"{NAME}.tandem").read_bytes())
lib, session = model._lib, model._session
std, mean = torch.tensor(frames["emb_std"]), torch.tensor(frames["emb_mean"])
latents = [torch.tensor(v).reshape(1, 1, -1) for v in frames["latents"]]
assert 2 + 2 * ROUNDS <= 30, "the Mimi cache holds 32 frames: at most 14 rounds"
model.prompt(torch.tensor(frames["prompt"]).reshape(1, -1))
x = torch.full_like(latents[0], float("nan"))
res = {m: {"ops": [[] for _ in listing[m]], "bind_ms": [], "wall_ms": [], "sum_ms": []} for m in ("step", "decode")}


def bind(name):
    """tdm_session_bind at the current state: the re-binding a call at a new offset does first."""
    t0 = time.perf_counter()
    runtime._check(lib.tdm_session_bind(session, model.methods[name][0]))
    return (time.perf_counter() - t0) * 1e3


i = 0
for r in range(2 + 2 * ROUNDS):
    lat = latents[i % len(latents)] * std + mean
    profiled = r >= 2 and r % 2 == 0  # profiled and plain calls alternate
    for name, args in (("step", (x,)), ("decode", (lat,))):
        if r < 2:
            getattr(model, name)(*args)
            continue
        b = bind(name)
        if profiled:
            ops = model.profile(name, *args)[1]
            for p in ops:
                res[name]["ops"][p.index].append(p.ms)
            res[name]["sum_ms"].append(sum(p.ms for p in ops))
            res[name]["bind_ms"].append(b)
        else:
            t0 = time.perf_counter()
            getattr(model, name)(*args)
            res[name]["wall_ms"].append((time.perf_counter() - t0) * 1e3 + b)
    model.advance()
    x = latents[i % len(latents)]
    i += 1
res["backend"] = runtime.BACKEND
res["listing"] = listing
OUT.write_text(json.dumps(res))
for m in ("step", "decode"):
    r = res[m]
    print(f"{runtime.BACKEND} {m}: bind {min(r['bind_ms']):.3f} ms, sum of ops {min(r['sum_ms']):.1f}, wall {min(r['wall_ms']):.1f}")
