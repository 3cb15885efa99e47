"""Trains the demo's character-level transformer LM on CPU and exports it with tandem.export.

The corpus is Debian's `fortunes` package (offline text). The model is the KV-cache transformer of
tests/models/families.py: methods prefill(tokens [1, 16]), decode(token [1, 1]) and reset().
Writes demo/model.tandem, demo/model.json (vocabulary, sizes, training record) and
demo/shared.tandem (the original report's model, for the page's second panel).

    python demo/train.py            # about 30 minutes on one core; seeded and single-threaded, so reproducible
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "tests")]
import tandem  # noqa: E402
from cases import original_report  # noqa: E402
from models.families import TinyLM  # noqa: E402

CORPUS = Path("/usr/share/games/fortunes")
SKIP = {"art", "ascii-art"}
VOCAB = "\n" + "".join(chr(c) for c in range(32, 127))  # 96 symbols; others become '?'
CONFIG = dict(vocab=len(VOCAB), d=128, heads=4, layers=4, capacity=256, chunk=16)


def corpus() -> str:
    if not CORPUS.is_dir():
        sys.exit("the corpus is missing: apt-get install fortunes")
    texts = [
        p.read_text("utf-8", errors="replace") for p in sorted(CORPUS.iterdir()) if p.is_file() and not p.suffix and p.name not in SKIP
    ]
    text = "\n".join(texts).replace("\n%\n", "\n\n").replace("\t", "    ")
    return "".join(c if c in VOCAB else "?" for c in text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1800)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--out", default=str(ROOT / "demo"))
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # one thread: the same sums, so the same weights, on any machine
    text = corpus()
    data = torch.tensor([VOCAB.index(c) for c in text], dtype=torch.long)
    print(f"corpus: {len(text)} characters")
    model = TinyLM(act=nn.GELU(), **CONFIG)
    params = sum(p.numel() for p in model.parameters())
    print(f"model: {params} parameters")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(1)
    start, loss_avg = time.time(), None
    for step in range(args.steps):
        lr = 3e-3 * min(1.0, (step + 1) / 100) * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        for group in opt.param_groups:
            group["lr"] = lr
        ix = torch.randint(0, len(data) - args.seq - 1, (args.batch,), generator=g)
        x = torch.stack([data[i : i + args.seq] for i in ix])
        y = torch.stack([data[i + 1 : i + args.seq + 1] for i in ix])
        loss = F.cross_entropy(model(x).reshape(-1, len(VOCAB)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_avg = loss.item() if loss_avg is None else 0.98 * loss_avg + 0.02 * loss.item()
        if step % 100 == 0 or step == args.steps - 1:
            print(f"step {step:5d}  loss {loss_avg:.3f}  lr {lr:.5f}  {time.time() - start:.0f}s", flush=True)
    minutes = (time.time() - start) / 60
    model.eval()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    chunk = CONFIG["chunk"]
    # the metadata web/lm.js's generate() and position() read: the cache's positions and its counter
    program = tandem.export(
        model,
        {"prefill": (torch.zeros(1, chunk, dtype=torch.long),), "decode": (torch.zeros(1, 1, dtype=torch.long),), "reset": ()},
        metadata={"max_cache_len": CONFIG["capacity"], "position_state": "pos"},
    )
    program.save(out / "model.tandem")
    _, spec, _, _ = original_report()
    tandem.export(None, spec).save(out / "shared.tandem")
    meta = {
        **CONFIG,
        "vocab": VOCAB,
        "parameters": params,
        "steps": args.steps,
        "batch": args.batch,
        "seq": args.seq,
        "final_loss": round(loss_avg, 4),
        "train_minutes": round(minutes, 1),
        "corpus": "Debian fortunes",
        "corpus_characters": len(text),
    }
    (out / "model.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"exported {out / 'model.tandem'} ({len(program.to_bytes())} bytes) after {minutes:.1f} min, loss {loss_avg:.3f}")


if __name__ == "__main__":
    main()
