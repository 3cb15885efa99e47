"""npm run bench, Kyutai STT rows (TANDEM_BENCH=stt): Kyutai's streaming speech-to-text at the published
size of kyutai/stt-1b-en_fr (moshi's LMModel with its config.json's kwargs, 989 M parameters, and the Mimi
with 32 codebooks that feeds it; seeded random weights from moshi's own loader, nothing downloaded:
tests/python/packaged_models.py's `stt`), exported as moshi runs it: one program whose `step` is Mimi's
streaming `encode` of one 80 ms frame and `LMGen.step` on its codes, `reset`, and `force_text` (teacher
forcing: the text token the next step reads, which bench/suite/stt.mjs sets to eager's), and the two halves
of `step` as methods of their own (`encode`: Mimi's codes; `lm_step`: LMGen.step on given codes, which the
bench gives eager's). For each variant
(float32 / int8 / int4 weights: `quantize`), one model is built, exported to OUT/stt_VARIANT.tandem and
freed before the next, and moshi's eager streaming computes the reference tokens on the same weights
(packaged_models.as_quantized: the weights dequantized, the Linears' activation rows rounded to int8 as
matmul_q8 / matmul_q4 do) into OUT/stt_VARIANT.json, with the margin between eager's two highest text
logits at each frame (eager fed its own tokens: the teacher-forced run is this one), Mimi's codes of each
frame, the tokens of the float32 eager model on the same audio, and the float64 reference: the same LM (same
weights and rounding) in float64 given eager's codes and, teacher-forced, eager's text (float32's own
rounding against it is the noise floor of any float32 run), beside the bytes of weights one step reads
(every constant but the embedding tables, of which a step reads one row each).
OUT/stt_frames.json holds the audio (seeded noise).
The variant onnx exports the float32 model's step as ONNX with its state (Mimi's and LMGen's) as inputs and
outputs for onnxruntime-web (bench/models/onnx_state.py): OUT/stt_step.onnx, its tokens checked equal to
moshi's eager ones on every frame, and its int8 twin OUT/stt_step_int8.onnx.
Usage: python bench/models/stt.py OUT [frames = 200] [VARIANTS = int8,int4] [size = 1b | small]."""

import gc
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
from packaged_models import FRAME, as_quantized, stt  # noqa: E402
from tandem.ir import CONST, flat_ops  # noqa: E402

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "build/bench")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 200
VARIANTS = (sys.argv[3] if len(sys.argv) > 3 else "int8,int4").split(",")
SMALL = (sys.argv[4] if len(sys.argv) > 4 else "1b") == "small"
OUT.mkdir(parents=True, exist_ok=True)
torch.set_num_threads(1)
g = torch.Generator().manual_seed(1)
chunks = [torch.randn(1, 1, FRAME, generator=g) * 0.3 for _ in range(N)]
(OUT / "stt_frames.json").write_text(json.dumps({"inputs": [x.reshape(-1).tolist() for x in chunks]}))


def step_weight_bytes(program) -> int:
    """Bytes of constants one `step` reads: every constant input of its ops once, except the tables
    an embedding or index_select gathers rows from."""
    seen, total = set(), 0
    for op in flat_ops(program.method("step").ops):
        if op.name.startswith("embedding") or op.name == "index_select":
            continue
        for v in op.ins:
            if v.storage.kind == CONST and id(v.storage) not in seen:
                seen.add(id(v.storage))
                total += v.storage.nbytes
    return total


def export_onnx():
    import onnx_state

    t = stt(small=SMALL)
    with torch.no_grad(), t.mimi.streaming(1), t.lm_gen.streaming(1):
        tokens = [t.step(x) for x in chunks]
    path = OUT / "stt_step.onnx"
    with onnx_state.moshi_patches(), torch.no_grad(), t.mimi.streaming(1), t.lm_gen.streaming(1):
        slots = onnx_state.state_slots(*onnx_state.moshi_states(t.mimi), *onnx_state.moshi_states(t.lm_gen))
        n = onnx_state.export_step(t.step, (chunks[0],), slots, t, path, ["pcm"], ["token"])
    onnx_state.check(path, [((x,), (k,)) for x, k in zip(chunks, tokens)], atol=0)
    onnx_state.quantize_int8(path, OUT / "stt_step_int8.onnx")
    print(f"{path}: {n} state tensors, tokens equal to moshi's over {N} frames", file=sys.stderr)


def eager(t) -> tuple[list, list, list]:
    """moshi's streaming over the frames: (greedy text tokens, top-2 text logit margin at each frame,
    Mimi's codes of each frame)."""
    margins, codes = [], []

    def hook(mod, args, out):
        top = out.detach().reshape(-1).double().topk(2).values
        margins.append(float(top[0] - top[1]))

    handle = t.lm_gen.lm_model.text_linear.register_forward_hook(hook)
    tokens = []
    with torch.no_grad(), t.mimi.streaming(1), t.lm_gen.streaming(1):
        for x in chunks:
            codes.append(t.encode(x))
            tokens.append(int(t.lm_step(codes[-1])))
    handle.remove()
    return tokens, margins, [c.reshape(-1).tolist() for c in codes]


def eager_float64(t, tokens: list, codes: list) -> list:
    """The LM of t (converted to float64 in place) given eager's codes of each frame and, after each
    step, eager's text token (teacher-forced): its greedy token at each frame."""
    t.lm_gen.lm_model.double()
    out = []
    with torch.no_grad(), t.lm_gen.streaming(1):
        for c, k in zip(codes, tokens):
            out.append(int(t.lm_step(torch.tensor(c).reshape(1, -1, 1))))
            t.force_text(torch.tensor(k).reshape(1, 1, 1))
    return out


for variant in VARIANTS:
    if variant == "onnx":
        export_onnx()
        continue
    quantize = None if variant == "float32" else variant
    t = stt(small=SMALL)
    params = sum(p.numel() for p in t.parameters())
    t0 = time.perf_counter()
    with torch.no_grad(), t.mimi.streaming(1), t.lm_gen.streaming(1):
        methods = {
            "step": tandem.Method(t.step, (chunks[0],)),
            "reset": tandem.Method(t.reset, ()),
            "force_text": tandem.Method(t.force_text, (torch.zeros(1, 1, 1, dtype=torch.long),)),
            "encode": tandem.Method(t.encode, (chunks[0],)),
            "lm_step": tandem.Method(t.lm_step, (torch.zeros(1, t.lm_gen.lm_model.num_audio_codebooks, 1, dtype=torch.long),)),
        }
        program = tandem.export(None, methods, quantize=quantize)
    export_s = time.perf_counter() - t0
    path = OUT / f"stt_{variant}.tandem"
    program.save(path)
    weights = step_weight_bytes(program)
    del program, methods
    gc.collect()
    print(f"stt {variant}: {params / 1e6:.1f} M parameters, exported in {export_s:.0f} s, {path.stat().st_size / 2**20:.0f} MiB, "
          f"{weights / 2**20:.0f} MiB of weights read a step", file=sys.stderr)  # fmt: skip
    f32_tokens = eager(t)[0] if quantize else None
    if quantize:
        as_quantized(t, quantize)
    t0 = time.perf_counter()
    tokens, margins, codes = eager(t)
    eager_ms = 1000 * (time.perf_counter() - t0) / N
    print(f"stt {variant}: moshi eager (same weights) {eager_ms:.0f} ms a frame, {len(set(tokens))} distinct tokens", file=sys.stderr)
    if f32_tokens:
        same = sum(a == b for a, b in zip(tokens, f32_tokens))
        print(f"stt {variant}: eager at {variant} equals eager at float32 for {same} of {N} tokens", file=sys.stderr)
    float64_tokens = eager_float64(t, tokens, codes)
    same = sum(a == b for a, b in zip(tokens, float64_tokens))
    print(f"stt {variant}: eager's LM in float64 on eager's codes and text equals eager for {same} of {N} tokens", file=sys.stderr)
    info = {"tokens": tokens, "margins": margins, "codes": codes, "float32_tokens": f32_tokens, "float64_tokens": float64_tokens,
            "params": params, "weight_bytes": weights, "file_bytes": path.stat().st_size, "export_s": export_s}  # fmt: skip
    (OUT / f"stt_{variant}.json").write_text(json.dumps(info))
    del t
    gc.collect()
