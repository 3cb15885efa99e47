"""q8_rows.py — exports one Linear(K, N) (default 512 -> 1536, a Mimi transformer's FFN input) at
float32 and int8 for 1, 2, 3 and 4 rows into OUT/linear_{float32,int8}_m{M}.tandem, for
bench/probes/q8_rows.mjs (issue #24: the multi-row integer GEMV). Seeded weights.

    python bench/probes/q8_rows.py [OUT = build/q8rows] [K = 512] [N = 1536] [ROWS = 1,2,3,4]"""

import sys
from pathlib import Path

import torch

import tandem

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "build/q8rows")
K = int(sys.argv[2]) if len(sys.argv) > 2 else 512
N = int(sys.argv[3]) if len(sys.argv) > 3 else 1536
ROWS = [int(m) for m in (sys.argv[4] if len(sys.argv) > 4 else "1,2,3,4").split(",")]
OUT.mkdir(parents=True, exist_ok=True)
torch.manual_seed(0)
lin = torch.nn.Linear(K, N).eval()
for m in ROWS:
    x = torch.randn(m, K)
    for mode in ("float32", "int8"):
        program = tandem.export(lin, {"forward": (x,)}, quantize=None if mode == "float32" else mode)
        (OUT / f"linear_{mode}_m{m}.tandem").write_bytes(program.to_bytes())
print(f"wrote {OUT}/linear_*_m*.tandem (K={K}, N={N})")
