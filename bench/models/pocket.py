"""npm run bench, pocket-tts rows (TANDEM_BENCH=pocket): pocket-tts 4.0.1's TTSModel at full size (its
english.yaml: a 6-layer d1024 flow LM and a Mimi decoder, 110 M parameters, seeded random weights,
nothing downloaded), exported as the package's streaming API calls it (prompt / step:
_run_flow_lm_and_increment_step over the flow LM's ModelState; decode / advance: mimi.decode_from_latent
and increment_steps over the Mimi's), at temperature 0 (tandem does not sample yet), and the
package's eager torch on one thread timed on the same frames in the same run. Writes
OUT/pocket.tandem, OUT/pocket_frames.json (the prompt and the package's latents and audio, for
bench/suite/pocket.mjs's check) and OUT/pocket_eager.json (ms per generated 80 ms frame); with int8 in
VARIANTS also OUT/pocket_int8.tandem, the same export with its linear layers' weights stored int8
(`quantize="int8"`: the flow LM's transformer and flow net, the Mimi decoder's transformer and
projections; the convs stay float32); int4 the same with `quantize="int4"`; int8i16 with int8 and
`quantize_convs="int16"` (the decoder's convs over 3-128 positions on 16-bit integers). Each variant's
op listing goes to OUT/pocket[_VARIANT]_ops.json (for profiling). onnx: the step and decode (+ advance)
as ONNX with their state as inputs and outputs for onnxruntime-web (bench/models/onnx_state.py, with the
community ports' patches: OUT/pocket_step.onnx starting from the state after the prompt,
OUT/pocket_decode.onnx taking the de-normalized latent, both checked against the package's frames, and
their int8 twins). Usage: python bench/models/pocket.py OUT [frames = 12] [VARIANTS = float32,int8: a
comma-separated list of float32, int8, int4, int8i16, onnx]."""

import functools
import json
import sys
import time
from pathlib import Path

import torch
from torch.export import Dim

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(ROOT / "bench" / "models"))
from pocket_tts.modules.stateful_module import increment_steps, init_states  # noqa: E402

import tandem  # noqa: E402
from packaged_models import pocket  # noqa: E402

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "build/bench")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 12
VARIANTS = [v for v in (sys.argv[3] if len(sys.argv) > 3 else "float32,int8").split(",") if v]  # "": eager only
OUT.mkdir(parents=True, exist_ok=True)
torch.set_num_threads(1)
PROMPT = torch.tensor([[17, 250, 3, 999, 42, 7, 1200, 64]])
LM_CAP, MIMI_CAP = 64, 16 * 32  # rows: the prompt and up to 56 frames; 32 frames of Mimi
assert PROMPT.shape[1] + N + 2 <= LM_CAP and N + 2 <= MIMI_CAP // 16
model = pocket(small=False, temp=0.0)
lm, mimi = model.flow_lm, model.mimi
steps = int(mimi.encoder_frame_rate / mimi.frame_rate)
print(f"pocket-tts full size: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters", file=sys.stderr)


def generate(frames: int, timed: bool):
    """The package's loop: the prompt, then per frame one LM step, decode_from_latent of the
    de-normalized latent and increment_steps (its decode worker, one frame per call)."""
    lm_state = init_states(lm, batch_size=1, sequence_length=LM_CAP)
    mimi_state = init_states(mimi, batch_size=1, sequence_length=MIMI_CAP)
    out, t_lm, t_dec = [], 0.0, 0.0
    with torch.no_grad():
        model._run_flow_lm_and_increment_step(model_state=lm_state, text_tokens=PROMPT)
        x = torch.full((1, 1, lm.ldim), float("nan"))
        for i in range(frames):
            t0 = time.perf_counter()
            latent, eos = model._run_flow_lm_and_increment_step(model_state=lm_state, backbone_input_latents=x)
            t1 = time.perf_counter()
            audio = mimi.decode_from_latent(latent * lm.emb_std + lm.emb_mean, mimi_state)
            increment_steps(mimi, mimi_state, increment=steps)
            t2 = time.perf_counter()
            if i >= 2:
                t_lm, t_dec = t_lm + t1 - t0, t_dec + t2 - t1
            out.append((latent, eos, audio))
            x = latent
    return out, t_lm, t_dec


want, t_lm, t_dec = generate(N + 2, True)
eager = {"step_ms": 1000 * t_lm / N, "decode_ms": 1000 * t_dec / N, "frames": N, "threads": torch.get_num_threads()}
print(
    f"pocket-tts eager torch, 1 thread: LM step {eager['step_ms']:.1f} + decode {eager['decode_ms']:.1f} ms per 80 ms frame",
    file=sys.stderr,
)

if "onnx" in VARIANTS:
    import onnx_state

    lm_state = init_states(lm, batch_size=1, sequence_length=LM_CAP)
    mimi_state = init_states(mimi, batch_size=1, sequence_length=MIMI_CAP)
    with torch.no_grad():
        model._run_flow_lm_and_increment_step(model_state=lm_state, text_tokens=PROMPT)
    lm_slots, mimi_slots = onnx_state.state_slots(lm_state), onnx_state.state_slots(mimi_state)
    starts = {"step": onnx_state.state_values(lm_slots), "decode": onnx_state.state_values(mimi_slots)}

    def step(x):
        return model._run_flow_lm_and_increment_step(model_state=lm_state, backbone_input_latents=x)

    def decode(latent):  # the de-normalized latent, as pocket.mjs gives tandem's decode
        audio = mimi.decode_from_latent(latent, mimi_state)
        increment_steps(mimi, mimi_state, increment=steps)
        return audio

    bos = torch.full((1, 1, lm.ldim), float("nan"))
    inputs = [bos] + [lat for lat, _, _ in want[:-1]]
    scaled = [lat * lm.emb_std + lm.emb_mean for lat, _, _ in want]
    checks = {
        "step": [((x,), (lat, e)) for x, (lat, e, _) in zip(inputs, want)],
        "decode": [((x,), (y,)) for x, (_, _, y) in zip(scaled, want)],
    }
    for name, fn, slots, x, io in [
        ("step", step, lm_slots, want[0][0], (["latent_in"], ["latent", "eos"])),
        ("decode", decode, mimi_slots, scaled[0], (["latent"], ["audio"])),
    ]:
        check = checks[name]
        path = OUT / f"pocket_{name}.onnx"
        with onnx_state.pocket_patches():
            n = onnx_state.export_step(fn, (x,), slots, model, path, *io, start=starts[name])
        got = onnx_state.check(path, check, atol=1e-3)
        onnx_state.quantize_int8(path, OUT / f"pocket_{name}_int8.onnx")
        print(f"{path}: {n} state tensors, equal to pocket-tts over {len(check)} frames (max |diff| {got['max_diff']:.1e})",
              file=sys.stderr)  # fmt: skip

for variant in [v for v in VARIANTS if v != "onnx"]:
    t0 = time.perf_counter()
    lm_state = init_states(lm, batch_size=1, sequence_length=LM_CAP)
    mimi_state = init_states(mimi, batch_size=1, sequence_length=MIMI_CAP)
    bos = torch.full((1, 1, lm.ldim), float("nan"))
    program = tandem.export(
        None,
        {
            "prompt": tandem.Method(
                model._run_flow_lm_and_increment_step, (lm_state, PROMPT), dynamic_shapes=(None, {1: Dim("tokens", min=1, max=16)})
            ),
            "step": tandem.Method(model._run_flow_lm_and_increment_step, (lm_state, None, bos)),
            "decode": tandem.Method(mimi.decode_from_latent, (torch.zeros(1, 1, lm.ldim), mimi_state)),
            "advance": tandem.Method(functools.partial(increment_steps, mimi, increment=steps), (mimi_state,)),
        },
        quantize=None if variant == "float32" else variant[:4],
        quantize_convs="int16" if variant == "int8i16" else False,
    )
    suffix = "" if variant == "float32" else "_" + variant
    eager["export_s" + suffix] = time.perf_counter() - t0
    program.save(OUT / f"pocket{suffix}.tandem")
    listing = {
        name: [
            {"name": op.name, "ins": [list(v.shape) for v in op.ins], "outs": [list(v.shape) for v in op.outs]}
            for op in program.method(name).ops
        ]
        for name in ("step", "decode")
    }
    (OUT / f"pocket{suffix}_ops.json").write_text(json.dumps(listing))
    print(f"exported in {eager['export_s' + suffix]:.0f} s: {OUT / f'pocket{suffix}.tandem'}", file=sys.stderr)
(OUT / "pocket_eager.json").write_text(json.dumps(eager))
(OUT / "pocket_frames.json").write_text(
    json.dumps(
        {
            "prompt": PROMPT.reshape(-1).tolist(),
            "emb_std": lm.emb_std.tolist(),
            "emb_mean": lm.emb_mean.tolist(),
            "latents": [a.reshape(-1).tolist() for a, _, _ in want],
            "eos": [bool(e.reshape(-1)[0]) for _, e, _ in want],
            "audio": [y.reshape(-1).tolist() for _, _, y in want],
        }
    )
)
