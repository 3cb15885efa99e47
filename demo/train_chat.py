"""Trains the chat page's model on CPU: a small transformers Llama and a byte-level BPE tokenizer,
both learned from Debian's `fortunes` package (offline text), on conversations in the chat template
(tests/models/checkpoint.py's: `<|im_start|>role\\ncontent<|im_end|>\\n`). The riddles and other
"Q: ... A: ..." fortunes become a question and its answer; every other fortune answers one of a few
requests ("Tell me a fortune.", ...). A sample holds two to four such turns, so the model sees
replies that follow earlier turns. The checkpoint folder (save_pretrained) goes through
`tandem.transformers.export_pretrained`, which stores the tokenizer and the chat template in the file.
Writes demo/chat.tandem and demo/chat.json (sizes and the training record).

    python demo/train_chat.py            # about 15 minutes on one core; seeded and single-threaded,
                                         # so reproducible
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "python"), str(ROOT)]
from tests.models.checkpoint import CHAT_TEMPLATE, make_tokenizer  # noqa: E402

CORPUS = Path("/usr/share/games/fortunes")
SKIP = {"art", "ascii-art"}
REQUESTS = ["Tell me a fortune.", "Say something.", "Any advice?", "What do you think?", "Tell me more.", "Hello!"]
CONFIG = dict(hidden_size=128, intermediate_size=320, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2)
VOCAB_SIZE = 1024
MAX_CACHE_LEN = 512


def fortunes() -> list[str]:
    if not CORPUS.is_dir():
        sys.exit("the corpus is missing: apt-get install fortunes")
    out = []
    for p in sorted(CORPUS.iterdir()):
        if p.is_file() and not p.suffix and p.name not in SKIP:
            text = p.read_text("utf-8", errors="replace").replace("\t", "    ")
            out += [f.strip() for f in text.split("\n%\n") if f.strip() and len(f) < 600]
    return out


def turn(fortune: str, rng: random.Random) -> tuple[str, str]:
    """(the user's message, the assistant's reply) made of one fortune."""
    m = re.match(r"^Q:\s*(.+?)\n\s*A:\s*(.+)$", fortune, re.S)
    if m:
        return " ".join(m[1].split()), " ".join(m[2].split())
    return rng.choice(REQUESTS), " ".join(fortune.split())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--out", default=str(ROOT / "demo"))
    args = ap.parse_args()
    import transformers

    from tandem.recipes.pretrained import print_report
    from tandem.transformers import export_pretrained

    torch.manual_seed(0)
    torch.set_num_threads(1)  # one thread: the same sums, so the same weights, on any machine
    rng = random.Random(0)
    pairs = [turn(f, rng) for f in fortunes()]
    tokenizer = make_tokenizer(VOCAB_SIZE, [t for p in pairs for t in p])
    conversations = []
    for _ in range(len(pairs)):
        messages = []
        for user, reply in rng.sample(pairs, rng.randint(2, 4)):
            messages += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
        conversations.append(tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False))
    data = torch.tensor([t for c in conversations for t in c], dtype=torch.long)
    print(f"corpus: {len(pairs)} fortunes, {sum(1 for u, _ in pairs if u not in REQUESTS)} of them questions; {len(data)} tokens")

    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=MAX_CACHE_LEN,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        **CONFIG,
    )
    model = transformers.LlamaForCausalLM(config)
    params = sum(p.numel() for p in model.parameters())
    print(f"model: {params} parameters")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(1)
    start, loss_avg = time.time(), None
    for step in range(args.steps):
        lr = 3e-3 * min(1.0, (step + 1) / 50) * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        for group in opt.param_groups:
            group["lr"] = lr
        ix = torch.randint(0, len(data) - args.seq - 1, (args.batch,), generator=g)
        x = torch.stack([data[i : i + args.seq] for i in ix])
        y = torch.stack([data[i + 1 : i + args.seq + 1] for i in ix])
        loss = F.cross_entropy(model(input_ids=x).logits.reshape(-1, config.vocab_size), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_avg = loss.item() if loss_avg is None else 0.97 * loss_avg + 0.03 * loss.item()
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step:5d}  loss {loss_avg:.3f}  lr {lr:.5f}  {time.time() - start:.0f}s", flush=True)
    minutes = (time.time() - start) / 60
    model.eval()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "chat-checkpoint"
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        cfg = json.loads((folder / "tokenizer_config.json").read_text())
        cfg["chat_template"] = CHAT_TEMPLATE
        (folder / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2, ensure_ascii=False))
        (folder / "chat_template.jinja").unlink(missing_ok=True)
        _, report = export_pretrained(folder, out / "chat.tandem", max_cache_len=MAX_CACHE_LEN, max_prompt_len=128)
    print_report(report, out / "chat.tandem")
    meta = {
        **CONFIG,
        "vocab_size": len(tokenizer),
        "max_cache_len": MAX_CACHE_LEN,
        "parameters": params,
        "steps": args.steps,
        "batch": args.batch,
        "seq": args.seq,
        "final_loss": round(loss_avg, 4),
        "train_minutes": round(minutes, 1),
        "corpus": "Debian fortunes, as chat turns",
        "corpus_tokens": len(data),
    }
    (out / "chat.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"exported {out / 'chat.tandem'} after {minutes:.1f} min of training, loss {loss_avg:.3f}")


if __name__ == "__main__":
    main()
