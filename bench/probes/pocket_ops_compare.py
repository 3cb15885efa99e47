"""Two bench/probes/pocket_ops.py runs of the same export side by side (e.g. native and wasm): per
method the minimum-over-rounds time of each op kind and the ratio B / A, then the single ops whose
time grew most, with their shapes. Usage: python bench/probes/pocket_ops_compare.py A.json B.json [top = 12]"""

import json
import sys
from collections import defaultdict

a, b = (json.load(open(p)) for p in sys.argv[1:3])
TOP = int(sys.argv[3]) if len(sys.argv) > 3 else 12
for m in ("step", "decode"):
    ops = a["listing"][m]
    ta = [min(t) for t in a[m]["ops"]]
    tb = [min(t) for t in b[m]["ops"]]
    wall, bind = (f"{min(a[m][k]):.3f} / {min(b[m][k]):.3f}" for k in ("wall_ms", "bind_ms"))
    sums = f"{a['backend']} {sum(ta):.2f} ms, {b['backend']} {sum(tb):.2f} ms"
    print(f"{m}: {len(ops)} ops; {sums} (sums of per-op minima); wall {wall}; bind {bind} ms")
    kind = defaultdict(lambda: [0.0, 0.0, 0])
    for op, x, y in zip(ops, ta, tb):
        kind[op["name"]][0] += x
        kind[op["name"]][1] += y
        kind[op["name"]][2] += 1
    for k, (x, y, n) in sorted(kind.items(), key=lambda t: -t[1][1])[:TOP]:
        print(f"  {k:16s} x{n:<4d} {x:7.2f} -> {y:7.2f} ms  {y / max(x, 1e-6):5.2f}x")
    print("  single ops, by the time added:")
    for i in sorted(range(len(ops)), key=lambda i: -(tb[i] - ta[i]))[:TOP]:
        ratio = tb[i] / max(ta[i], 1e-6)
        print(f"    #{i:4d} {ops[i]['name']:14s} {ta[i]:6.2f} -> {tb[i]:6.2f} ms {ratio:5.2f}x  {ops[i]['ins']} -> {ops[i]['outs']}")
