"""The LLM table's models: bench/models/smollm.py's SmolLM-135M-shaped Llama, the same
seeded weights, at three widths for each runtime. bench/models/smollm.py writes the float32 ones
(smollm.tandem, smollm.onnx); this writes the rest into OUT_DIR:

- smollm_int8.tandem, smollm_int4.tandem: export_causal_lm(quantize="int8" | "int4"), every linear
  layer and the tied embedding / output head quantized (int8 per output channel; int4 per output
  channel and group of 32 along K; symmetric, no zero point);
- smollm_int8.onnx: onnxruntime's quantize_dynamic of smollm.onnx (int8 weights per output
  channel, activations quantized per call: DynamicQuantizeLinear + MatMulInteger, and the embedding
  as an int8 Gather + DequantizeLinear);
- smollm_int4.onnx: onnxruntime's MatMulNBitsQuantizer of smollm.onnx (4 bits, block 32 along K,
  symmetric: MatMulNBits with no zero points; the tied head included, the embedding Gather stays
  float32 as that quantizer leaves it);
- smollm_f32.gguf, smollm_q8_0.gguf, smollm_q4_0.gguf: the llama architecture for llama.cpp
  (@wllama/wllama), written with the gguf package (gguf_llama.py); Q8_0 and Q4_0 on every matrix,
  the tied table too;
- llm.json: the files, and the weight bytes each width reads per decode step (the bound).

    python bench/models/llm.py OUT_DIR [--layers N]   (after bench/models/smollm.py OUT_DIR [--layers N];
                                               called by bench/models/make_models.py for TANDEM_BENCH=llm)
"""

import json
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "bench" / "models")]
warnings.filterwarnings("ignore")

import gguf_llama  # noqa: E402
import smollm  # noqa: E402

GROUP = 32  # int4 / MatMulNBits / Q4_0 block along K


def weight_bytes(hf, width: str) -> int:
    """Bytes of weights a decode step reads at `width` in tandem's layout: every matrix once (the
    tied table once, as the output head; its lookup reads one row more), quantized with one float32
    scale per output channel (int8) or per output channel and group of 32 k (int4); the norms'
    vectors in float32."""
    total = 0
    for p in {id(p): p for p in hf.parameters()}.values():
        if p.dim() != 2 or width == "float32":
            total += 4 * p.numel()
        elif width == "int8":
            total += p.numel() + 4 * p.shape[0]
        else:
            out, k = p.shape
            total += (p.numel() + 1) // 2 + 4 * out * -(-k // GROUP)
    return total


def quantize_onnx(src: Path, int8: Path, int4: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    quantize_dynamic(str(src), str(int8), per_channel=True, weight_type=QuantType.QInt8)
    q = MatMulNBitsQuantizer(onnx.load(str(src)), bits=4, block_size=GROUP, is_symmetric=True)
    q.process()
    onnx.save(q.model.model, str(int4))


def next_tokens(hf, prompts: int = 3, length: int = 40) -> list[dict]:
    """transformers' greedy next token after a few seeded prompts of token ids (past the GGUF
    vocabulary's special and byte tokens): bench/suite/llm-page.js checks that tandem's float32 program
    and llama.cpp's F32 GGUF pick the same, i.e. compute the same function of the same weights."""
    cases = []
    for s in range(prompts):
        ids = torch.randint(gguf_llama.FIRST, hf.config.vocab_size, (length,), generator=torch.Generator().manual_seed(s)).tolist()
        with torch.no_grad():
            logits = hf(torch.tensor([ids])).logits[0, -1]
        top = torch.topk(logits, 2)
        cases.append({"prompt": ids, "next": int(top.indices[0]), "margin": float(top.values[0] - top.values[1])})
    return cases


def main(out: Path, layers: int | None = None) -> None:
    import tandem
    import tandem.transformers

    hf = smollm.make_model(layers)
    times = {}
    for width in ("int8", "int4"):
        t0 = time.time()
        tandem.transformers.export_causal_lm(hf, max_cache_len=smollm.MAX_CACHE, max_prompt_len=smollm.MAX_PROMPT, quantize=width).save(
            out / f"smollm_{width}.tandem"
        )
        times[f"tandem {width}"] = round(time.time() - t0, 1)
    t0 = time.time()
    quantize_onnx(out / "smollm.onnx", out / "smollm_int8.onnx", out / "smollm_int4.onnx")
    times["onnx int8 + int4"] = round(time.time() - t0, 1)
    t0 = time.time()
    for name, qtype in (("f32", "F32"), ("q8_0", "Q8_0"), ("q4_0", "Q4_0")):
        gguf_llama.write(hf, out / f"smollm_{name}.gguf", qtype, context_length=smollm.MAX_CACHE)
    times["gguf"] = round(time.time() - t0, 1)
    cfg = hf.config
    info = {
        "layers": cfg.num_hidden_layers,
        "widths": {
            "float32": {"tandem": "smollm.tandem", "onnx": "smollm.onnx", "gguf": "smollm_f32.gguf"},
            "int8": {"tandem": "smollm_int8.tandem", "onnx": "smollm_int8.onnx", "gguf": "smollm_q8_0.gguf"},
            "int4": {"tandem": "smollm_int4.tandem", "onnx": "smollm_int4.onnx", "gguf": "smollm_q4_0.gguf"},
        },
        "weight_bytes_per_token": {w: weight_bytes(hf, w) for w in ("float32", "int8", "int4")},
        "next_tokens": next_tokens(hf),
        "export_seconds": times,
    }
    (out / "llm.json").write_text(json.dumps(info, indent=1))
    print(f"llm: {times}", file=sys.stderr)


if __name__ == "__main__":
    args = sys.argv[1:]
    n = int(args[args.index("--layers") + 1]) if "--layers" in args else None
    paths = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] != "--layers")]
    main(Path(paths[0] if paths else "build/bench"), layers=n)
