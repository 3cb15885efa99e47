"""Exports the transformer LM family for the benchmarks: `python bench/models/export_lm.py OUT_DIR CAP...`
writes OUT_DIR/lm_<cap>.tandem for each KV-cache capacity (same weights: the same seed)."""

import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "tests")]
warnings.filterwarnings("ignore")

import tandem  # noqa: E402
from models.families import make_transformer  # noqa: E402

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
for cap in [int(c) for c in sys.argv[2:]]:
    module, spec, _, _ = make_transformer(capacity=cap)
    tandem.export(module, spec).save(out / f"lm_{cap}.tandem")
    print(f"lm_{cap}.tandem")
