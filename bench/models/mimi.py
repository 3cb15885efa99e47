"""npm run bench, Mimi rows (TANDEM_BENCH=mimi): Kyutai's Mimi codec from PyPI `moshi` at full size (79 M
parameters, seeded random weights from moshi's own config, nothing downloaded), exported as moshi's
streaming API is used, and moshi's eager torch on one thread (torch.set_num_threads(1)) timed on the
same frames in the same run. The timed frames follow WARMUP frames that fill the transformers' attention
context (250 steps, 10 s of audio), so both sides are timed in a long stream's steady state (each step
attends to the whole cache) rather than on a cache a few steps full. Writes OUT/mimi.tandem,
OUT/mimi_frames.json (inputs and moshi's outputs, for bench/suite/mimi.mjs's check) and
OUT/mimi_eager.json (ms per 80 ms frame); with int8 in VARIANTS also OUT/mimi_int8.tandem, the same
export with its linear layers' weights stored int8 (`quantize="int8"`: the two transformers and the
codebook projections; the convs stay float32), and with int8convs OUT/mimi_int8convs.tandem
(`quantize="int8", quantize_convs=True`: also the big streaming convs, conv_q8), with int8bf16
OUT/mimi_int8bf16.tandem (`quantize="int8", quantize_convs="bf16"`: those of them at 1-2 positions with
bfloat16 weights, conv_bf16); int4 and int4bf16 the same with `quantize="int4"` (no
faster than int8, codes differ); int8i16 OUT/mimi_int8i16.tandem (`quantize="int8", quantize_convs="int16"`: the
convs over 3+ positions on 16-bit integers, conv_i16, and the 1-2 position ones bfloat16); onnx the
two steps as ONNX with their state as inputs and outputs for onnxruntime-web (bench/models/onnx_state.py:
OUT/mimi_encode.onnx, mimi_decode.onnx, checked against moshi's codes and audio on every frame, and their
int8 twins mimi_encode_int8.onnx, mimi_decode_int8.onnx).
Usage: python bench/models/mimi.py OUT [frames = 20] [VARIANTS = float32: a comma-separated list of
float32, int8, int8convs, int8bf16, int4, int4bf16, int8i16, onnx]."""

import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(ROOT / "bench" / "models"))
import tandem  # noqa: E402
from packaged_models import FRAME, mimi  # noqa: E402

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "build/bench")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 20
VARIANTS = (sys.argv[3] if len(sys.argv) > 3 else "float32").split(",")
OUT.mkdir(parents=True, exist_ok=True)
torch.set_num_threads(1)
model = mimi(small=False)
g = torch.Generator().manual_seed(1)
# Frames before the timed ones: the attention context (steps of the 25 Hz transformers, two an 80 ms frame)
# filled, plus two.
CONTEXT = next(m.context for m in model.modules() if hasattr(m, "context"))
WARMUP = -(-CONTEXT // 2) + 2
chunks = [torch.randn(1, 1, FRAME, generator=g) * 0.3 for _ in range(N + WARMUP)]

with torch.no_grad(), model.streaming(1):  # eager, moshi's own streaming: WARMUP frames, then N timed
    enc = dec = 0.0
    codes_all, pcm_all = [], []
    for i, x in enumerate(chunks):
        t0 = time.perf_counter()
        c = model.encode(x)
        t1 = time.perf_counter()
        y = model.decode(c)
        t2 = time.perf_counter()
        if i >= WARMUP:
            enc, dec = enc + t1 - t0, dec + t2 - t1
        codes_all.append(c)
        pcm_all.append(y)
eager = {"encode_ms": 1000 * enc / N, "decode_ms": 1000 * dec / N, "frames": N, "threads": torch.get_num_threads()}
print(f"moshi eager torch, 1 thread: encode {eager['encode_ms']:.1f} + decode {eager['decode_ms']:.1f} ms per 80 ms frame", file=sys.stderr)

if "onnx" in VARIANTS:
    import onnx_state

    for step, fn, x, name, steps in [
        ("encode", model.encode, chunks[0], "pcm", [((x,), (c,)) for x, c in zip(chunks, codes_all)]),
        ("decode", model.decode, codes_all[0], "codes", [((c,), (y,)) for c, y in zip(codes_all, pcm_all)]),
    ]:
        path = OUT / f"mimi_{step}.onnx"
        with torch.no_grad(), model.streaming(1):
            slots = onnx_state.state_slots(*onnx_state.moshi_states(model))
            n = onnx_state.export_step(fn, (x,), slots, model, path, [name], ["pcm" if step == "decode" else "codes"])
        got = onnx_state.check(path, steps, atol=1e-3)
        onnx_state.quantize_int8(path, OUT / f"mimi_{step}_int8.onnx")
        print(f"{path}: {n} state tensors, equal to moshi over {len(steps)} frames (max |diff| {got['max_diff']:.1e})", file=sys.stderr)

for variant in [v for v in VARIANTS if v != "onnx"]:
    t0 = time.perf_counter()
    with torch.no_grad(), model.streaming(1):
        program = tandem.export(
            None,
            {
                "encode_step": tandem.Method(model.encode, (chunks[0],)),
                "decode_step": tandem.Method(model.decode, (codes_all[0],)),
                "reset": tandem.Method(model.reset_streaming, ()),
            },
            quantize=None if variant == "float32" else variant[:4],
            quantize_convs={"int8convs": True, "int8bf16": "bf16", "int4bf16": "bf16", "int8i16": "int16"}.get(variant, False),
        )
    suffix = "" if variant == "float32" else "_" + variant
    eager["export_s" + suffix] = time.perf_counter() - t0
    program.save(OUT / f"mimi{suffix}.tandem")
    (OUT / f"mimi{suffix}_ops.json").write_text(
        json.dumps(
            {
                name: [  # each method's ops with shapes, for bench/suite/mimi_profile.py
                    {
                        "name": op.name,
                        "ins": [list(v.shape) for v in op.ins],
                        "outs": [list(v.shape) for v in op.outs],
                        "iattr": list(op.iattr),
                    }
                    for op in program.method(name).ops
                ]
                for name in ("encode_step", "decode_step")
            }
        )
    )
    print(f"exported in {eager['export_s' + suffix]:.0f} s: {OUT / f'mimi{suffix}.tandem'}", file=sys.stderr)
(OUT / "mimi_eager.json").write_text(json.dumps(eager))
(OUT / "mimi_frames.json").write_text(
    json.dumps(
        {
            "inputs": [x.reshape(-1).tolist() for x in chunks],
            "codes": [c.reshape(-1).tolist() for c in codes_all],
            "pcm": [y.reshape(-1).tolist() for y in pcm_all],
            "codes_shape": list(codes_all[0].shape),
            "warmup": WARMUP,
        }
    )
)
