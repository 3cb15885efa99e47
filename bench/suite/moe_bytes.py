"""Weight bytes a step of a mixture-of-experts LM reads: a small transformers Mixtral (seeded random
weights) exported with tandem.transformers.export_causal_lm as float32, int8 and int4. For each
export: the bytes of one expert (codes and scales of its grouped products, matmul_grouped /
matmul_grouped_q8 / matmul_grouped_q4, read from the exported decode method's operands), and what a
step reads of them against every expert's bytes, beside the dense weights every step reads whole
(attention, routers, the head; of the embedding table only its token's row, not counted). The
runtime reads only the experts that have rows (docs/ops.md, matmul_grouped): a decode step of one
token reads top-k experts per layer; a prefill chunk the union of its tokens' picks (counted here
from the eager model's routers on random tokens). Not part of npm test.

    python bench/suite/moe_bytes.py [--layers 4] [--experts 8] [--top-k 2] [--chunk 8]
"""

import argparse
import sys
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "python")]
warnings.filterwarnings("ignore")

import tandem.transformers as tt  # noqa: E402
from tandem.ir import flat_ops  # noqa: E402

GROUPED = ("matmul_grouped", "matmul_grouped_q8", "matmul_grouped_q4")
WEIGHT_OPS = {"matmul_packed": (1,), "matmul_q8": (1, 2), "matmul_q4": (1, 2)}  # read whole each step


def _model(layers: int, experts: int, top_k: int):
    import transformers

    config = transformers.MixtralConfig(
        vocab_size=512,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=experts,
        num_experts_per_tok=top_k,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    return transformers.MixtralForCausalLM(config).eval()


def _bytes(program) -> tuple[int, int]:
    """(bytes of one expert of every layer's grouped products together, bytes of the dense weights
    a decode step reads whole: each constant counted once), from the decode method's operands."""
    expert, dense, seen = 0, 0, set()
    for op in flat_ops(program.method("decode").ops):
        if op.name in GROUPED:
            operands = op.ins[1:3] if op.name != "matmul_grouped" else op.ins[1:2]
            expert += sum(v.nbytes // v.shape[0] for v in operands)  # [E, ...]: one expert's share
        for i in WEIGHT_OPS.get(op.name, ()):
            v = op.ins[i]
            if v.storage not in seen:
                seen.add(v.storage)
                dense += v.nbytes
    return expert, dense


def _chunk_experts(model, chunk: int) -> float:
    """Experts per layer that a prefill chunk of `chunk` random tokens routes rows to (the union of
    its tokens' top-k), averaged over the layers, from the eager model's routers."""
    picks = []
    hooks = [
        layer.mlp.gate.register_forward_hook(lambda mod, args, out: picks.append(len(set(out[2].flatten().tolist()))))
        for layer in model.model.layers
    ]
    tokens = torch.randint(0, model.config.vocab_size, (1, chunk), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        model(tokens)
    for h in hooks:
        h.remove()
    return sum(picks) / len(picks)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=8)
    args = ap.parse_args()
    model = _model(args.layers, args.experts, args.top_k)
    L, E = args.layers, args.experts
    chunk = _chunk_experts(model, args.chunk)
    print(f"Mixtral: {L} layers, {E} experts per layer, top-{args.top_k}")
    print(f"experts read per layer: decode token {args.top_k} of {E}; prefill chunk of {args.chunk} tokens {chunk:.1f} of {E}")
    print(f"{'weights':8} {'expert MB':>10} {'experts MB':>11} | decode: {'experts MB':>10} {'of all':>7} {'+ dense MB':>10}", end="")
    print(f" {'of all':>7} | chunk: {'experts MB':>10} {'of all':>7}")
    for mode in (None, "int8", "int4"):
        program = tt.export_causal_lm(model, max_cache_len=64, max_prompt_len=args.chunk, quantize=mode)
        expert, dense = _bytes(program)
        expert /= L  # one expert of one layer
        every = E * L * expert
        decode, prefill = args.top_k * L * expert, chunk * L * expert
        step = decode + dense
        print(
            f"{mode or 'float32':8} {expert / 1e6:10.3f} {every / 1e6:11.2f} | decode: {decode / 1e6:10.2f} {decode / every:7.1%} "
            f"{step / 1e6:10.2f} {step / (every + dense):7.1%} | chunk: {prefill / 1e6:10.2f} {prefill / every:7.1%}"
        )


if __name__ == "__main__":
    main()
