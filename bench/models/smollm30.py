"""The full 30-layer SmolLM-135M shape at three weight widths, for bench/suite/smollm30.mjs
(TANDEM_BENCH=smollm30, the quantized decode targets): bench/models/smollm.py's make_model() (30 layers,
width 576, 9 heads over 3 KV heads, MLP 1536, vocabulary 49152, tied table; seeded random float32
weights, nothing downloaded), exported by export_causal_lm(max_cache_len=512, max_prompt_len=128) as

- smollm.tandem (float32), smollm_int8.tandem, smollm_int4.tandem (quantize="int8" | "int4", as
  bench/models/llm.py exports them);
- smollm30.json: the layers, each file's weight bytes per token (llm.weight_bytes) and its tied head's
  share, and PyTorch eager's greedy continuation of a seeded prompt, each step's 5 largest logits'
  ids (the float32 rows' check).

A file already in OUT_DIR is kept (the three exports take minutes): delete it to export again.

    python bench/models/smollm30.py OUT_DIR [--layers N] [--width float32|int8|int4]
    (N for a quick check of the bench itself; --width: that export only, no smollm30.json)
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

import llm  # noqa: E402
import smollm  # noqa: E402

PROMPT, GREEDY = 8, 6  # eager's greedy tokens after a seeded prompt of PROMPT ids


def head_bytes(hf, width: str) -> int:
    """The tied 49152 x 576 table's bytes in tandem's layout at `width` (llm.weight_bytes' rule)."""
    out, k = hf.lm_head.weight.shape
    if width == "float32":
        return 4 * out * k
    if width == "int8":
        return out * k + 4 * out
    return (out * k + 1) // 2 + 4 * out * -(-k // llm.GROUP)


def greedy(hf, prompt: list[int], steps: int) -> list[list[int]]:
    """PyTorch eager's greedy decode: the prompt in one forward, then one token at a time over
    transformers' own KV cache; each step's 5 largest logits' ids, largest first (the first is the
    greedy token)."""
    top = []
    with torch.no_grad():
        out = hf(input_ids=torch.tensor([prompt]), use_cache=True)
        for _ in range(steps):
            top.append(torch.topk(out.logits[0, -1], 5).indices.tolist())
            if len(top) < steps:
                out = hf(input_ids=torch.tensor([[top[-1][0]]]), past_key_values=out.past_key_values, use_cache=True)
    return top


def main(out: Path, layers: int | None = None, widths: list[str] | None = None) -> None:
    """Exports the widths missing from `out` (only `widths` if given, and then no smollm30.json: one
    process per width, side by side), then writes smollm30.json."""
    import tandem.transformers

    out.mkdir(parents=True, exist_ok=True)
    hf = smollm.make_model(layers)
    files = {"float32": "smollm.tandem", "int8": "smollm_int8.tandem", "int4": "smollm_int4.tandem"}
    seconds = {}
    for width, name in files.items():
        if (out / name).exists() or (widths and width not in widths):
            continue
        t0 = time.time()
        quantize = {} if width == "float32" else {"quantize": width}
        program = tandem.transformers.export_causal_lm(hf, max_cache_len=smollm.MAX_CACHE, max_prompt_len=smollm.MAX_PROMPT, **quantize)
        program.save(out / name)
        seconds[width] = round(time.time() - t0, 1)
        print(f"smollm30: {name} exported in {seconds[width]} s", file=sys.stderr)
    if widths:
        return
    cfg = hf.config
    prompt = torch.randint(100, cfg.vocab_size, (PROMPT,), generator=torch.Generator().manual_seed(30)).tolist()
    info = {
        "layers": cfg.num_hidden_layers,
        "config": {**smollm.CONFIG, "num_hidden_layers": cfg.num_hidden_layers},
        "files": files,
        "weight_bytes_per_token": {w: llm.weight_bytes(hf, w) for w in files},
        "head_bytes": {w: head_bytes(hf, w) for w in files},
        "prompt": prompt,
        "eager_top5": greedy(hf, prompt, GREEDY),
        "export_seconds": seconds,
    }
    (out / "smollm30.json").write_text(json.dumps(info, indent=1))
    print(f"smollm30: {out / 'smollm30.json'}", file=sys.stderr)


if __name__ == "__main__":
    args = sys.argv[1:]
    n = int(args[args.index("--layers") + 1]) if "--layers" in args else None
    width = [args[args.index("--width") + 1]] if "--width" in args else None
    paths = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] not in ("--layers", "--width"))]
    main(Path(paths[0] if paths else "build/bench30"), layers=n, widths=width)
