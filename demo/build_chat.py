"""Builds the chat page's model into OUT (default build/demo), only when missing:

- chat-checkpoint/: a transformers checkpoint folder as a user has one, made here (no hub): a seeded
  tiny Llama saved with save_pretrained, a byte-level BPE tokenizer trained locally with the
  `tokenizers` package, its special tokens and chat template in tokenizer_config.json
  (tests/models/checkpoint.py, the one the tokenizer tests use);
- chat.tandem: that folder through `tandem.transformers.export_pretrained` (what
  `python -m tandem export DIR -o FILE` runs), tokenizer and chat template stored in the file.

The weights are random (seeded), not trained: the replies are the model's greedy tokens, not sense.

    python demo/build_chat.py [OUT]        (npm start runs it)
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "python")]


def main(out: Path) -> None:
    from tandem.recipes.pretrained import print_report
    from tandem.transformers import export_pretrained
    from tests.models.checkpoint import make_checkpoint

    folder, target = out / "chat-checkpoint", out / "chat.tandem"
    if target.is_file():
        return
    make_checkpoint(folder, seed=0, max_position_embeddings=512)  # room for a few turns
    _, report = export_pretrained(folder, target, max_prompt_len=128)
    print_report(report, target)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "build/demo"))
