#!/usr/bin/env python3
"""PyTorch's OpInfo samples through tandem: the pass rate of every operator docs/ops.md lists.

For each OpInfo (torch.testing._internal.common_methods_invocations.op_db) named below, every
sample input (float32; int64 too where the OpInfo supports it) is exported as a one-op module
with tandem.export, run natively with tandem.load and compared with eager PyTorch by
torch.testing.assert_close at its default tolerances (NaN equal to NaN; topk's indices by the
values they select, as PyTorch leaves the order of ties unspecified; a float64 result, which
tandem computes in float32 by its documented rule, as float32). A sample passes only if
all of that works. Export errors count as failures, except the out-of-scope cases listed in
OUT_OF_SCOPE (docs/ops.md, "OpInfo pass rates", says why each is out of scope); those are counted
apart. Slow (minutes): not part of the test suite; tests/python/test_opinfo.py runs a few samples.

    python scripts/opinfo.py                        # every op, a table and the totals
    python scripts/opinfo.py --ops cumsum,topk -v   # some ops, with each failure
    python scripts/opinfo.py --markdown             # the table for docs/ops.md

At most the first 100 samples per op and dtype by default (--max-samples): every sample of every op
but max_pool1d/max_pool2d, which have thousands.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import tandem  # noqa: E402
from tandem.ir import DTYPE_CODE  # noqa: E402

# OpInfo names (name or name.variant) of the ops docs/ops.md lists, by family.
OPS = {
    "elementwise": [
        "add",
        "sub",
        "mul",
        "div.no_rounding_mode",
        "div.floor_rounding",
        "div.trunc_rounding",
        "floor_divide",
        "remainder",
        "pow",
        "maximum",
        "minimum",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "logical_not",
        "rsub",
        "clamp",
        "where",
        "neg",
        "abs",
        "exp",
        "log",
        "log1p",
        "sqrt",
        "rsqrt",
        "sin",
        "cos",
        "tanh",
        "sigmoid",
        "nn.functional.relu",
        "nn.functional.gelu",
        "nn.functional.silu",
        "erf",
        "reciprocal",
        "floor",
        "ceil",
    ],
    "shape": [
        "clone",
        "reshape",
        "view",
        "squeeze",
        "unsqueeze",
        "flatten",
        "permute",
        "transpose",
        "t",
        "expand",
        "cat",
        "select",
        "slice",
        "split",
        "split_with_sizes",
        "chunk",
        "narrow",
        "slice_scatter",
        "select_scatter",
        "repeat",
        "constant_pad_nd",
        "nn.functional.pad.constant",
        "full_like",
        "zeros_like",
        "ones_like",
    ],
    "linalg": ["mm", "bmm", "addmm", "matmul", "nn.functional.linear", "nn.functional.scaled_dot_product_attention"],
    "reduce": [
        "sum",
        "mean",
        "amax",
        "amin",
        "any",
        "all",
        "argmax",
        "argmin",
        "softmax",
        "log_softmax",
        "var",
        "var.unbiased",
        "std",
        "std.unbiased",
        "var_mean",
        "cumsum",
        "topk",
        "sort",
    ],
    "norm": [
        "nn.functional.layer_norm",
        "nn.functional.rms_norm",
        "native_group_norm",
        "nn.functional.group_norm",
        "nn.functional.batch_norm",
    ],
    "index": ["nn.functional.embedding", "index_select", "index_put", "index_copy", "gather"],
    # convolution and pooling (their variants are another branch's work; measured all the same)
    "conv": [
        "nn.functional.conv1d",
        "nn.functional.conv2d",
        "nn.functional.max_pool1d",
        "nn.functional.max_pool2d",
        "nn.functional.avg_pool1d",
        "nn.functional.avg_pool2d",
    ],
}


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x)


# Out of scope: (reason, predicate over (op name, sample)). Each is documented in docs/ops.md.
OUT_OF_SCOPE = [
    (
        "a sample tensor's dtype is one tandem does not have (uint8, int16, float64, ...)",
        lambda name, s: any(t.dtype not in DTYPE_CODE for t in _tensors((s.input, s.args, s.kwargs))),
    ),
    (
        "batch norm in training mode (tandem exports inference: eval-mode batch norm)",
        lambda name, s: "batch_norm" in name and (s.kwargs.get("training") or (len(s.args) > 4 and s.args[4] is True)),
    ),
    (
        "embedding with max_norm (renormalizes the weight, an input, in place; tandem does not write inputs back)",
        lambda name, s: name == "nn.functional.embedding" and s.kwargs.get("max_norm") is not None,
    ),
    ("attention with dropout (random)", lambda name, s: "scaled_dot_product_attention" in name and (s.kwargs.get("dropout_p") or 0) > 0),
]


class _Slot:
    def __init__(self, i):
        self.i = i


def _template(obj, tensors):
    if isinstance(obj, torch.Tensor):
        tensors.append(obj)
        return _Slot(len(tensors) - 1)
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(_template(x, tensors) for x in obj)
    if isinstance(obj, dict):
        return {k: _template(v, tensors) for k, v in obj.items()}
    return obj


def _fill(obj, xs):
    if isinstance(obj, _Slot):
        return xs[obj.i]
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(_fill(x, xs) for x in obj)
    if isinstance(obj, dict):
        return {k: _fill(v, xs) for k, v in obj.items()}
    return obj


class OneOp(nn.Module):
    def __init__(self, fn, template):
        super().__init__()
        self.fn, self.template = fn, template

    def forward(self, *xs):
        inp, args, kwargs = _fill(self.template, xs)
        return self.fn(inp, *args, **kwargs)


def _outputs(r):
    if isinstance(r, torch.Tensor):
        return [r]
    if isinstance(r, (list, tuple)) and r and all(isinstance(t, torch.Tensor) for t in r):
        return list(r)
    return None


def run_sample(op, sample) -> tuple[str, str]:
    """('pass' | 'fail' | 'skip' | 'scope', detail)."""
    full = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
    for reason, pred in OUT_OF_SCOPE:
        if pred(full, sample):
            return "scope", reason
    tensors: list = []
    template = _template((sample.input, tuple(sample.args), dict(sample.kwargs)), tensors)
    tensors = [t.detach().clone() for t in tensors]
    module = OneOp(op.op, template)
    try:
        with torch.no_grad():
            want = _outputs(module(*[t.clone() for t in tensors]))
    except Exception as e:  # an invalid sample for eager too (error-input samples)
        return "skip", f"eager raises {type(e).__name__}"
    if want is None:
        return "skip", "not a tensor result"
    try:
        program = tandem.export(module, {"forward": tuple(tensors)})
    except tandem.ExportError as e:
        return "fail", "export: " + " ".join(str(e).splitlines()[:2])[:300]
    except Exception as e:
        return "fail", f"export crashed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    try:
        got = _outputs(tandem.load(program.to_bytes()).forward(*tensors))
    except Exception as e:
        return "fail", f"run: {type(e).__name__}: {str(e)[:200]}"
    if got is None or len(got) != len(want):
        return "fail", f"{0 if got is None else len(got)} outputs, eager gives {len(want)}"
    if op.name == "topk":  # which of equal values PyTorch returns is unspecified: indices must select the values
        x, dim = tensors[0], (list(sample.args) + [-1])[1] if len(sample.args) > 1 else sample.kwargs.get("dim", -1)
        picked = x if x.dim() == 0 else torch.gather(x, dim, got[1])
        got, want = [got[0], picked], [want[0], got[0]]
    # float64 computed in a method is computed in float32 (docs/ops.md, Dtypes): compared as float32
    want = [w.float() if w.dtype == torch.float64 else w for w in want]
    for k, (g, w) in enumerate(zip(got, want)):
        try:
            torch.testing.assert_close(g, w, equal_nan=True)
        except AssertionError as e:
            return "fail", f"output {k} differs: " + " ".join(str(e).split())[:300]
    return "pass", ""


def samples_of(op, dtypes):
    """(dtype, sample) pairs: float32, and the other requested dtypes the OpInfo supports."""
    supported = op.supported_dtypes("cpu")
    for dt in dtypes:
        if dt not in supported:
            continue
        torch.manual_seed(0)
        for s in op.sample_inputs("cpu", dt, requires_grad=False):
            yield dt, s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", help="comma-separated OpInfo names (default: every op listed)")
    ap.add_argument("--dtypes", default="float32,int64")
    ap.add_argument(
        "--max-samples",
        type=int,
        default=100,
        help="the first N samples per op and dtype (default 100: all but the thousands of pooling samples; 0: every sample)",
    )
    ap.add_argument("-v", "--verbose", action="store_true", help="print every failure")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    from torch.testing._internal.common_methods_invocations import op_db

    family = {n: f for f, names in OPS.items() for n in names}
    wanted = a.ops.split(",") if a.ops else list(family)
    by_name = {o.name + (f".{o.variant_test_name}" if o.variant_test_name else ""): o for o in op_db}
    missing = [n for n in wanted if n not in by_name]
    if missing:
        print("not in op_db:", ", ".join(missing), file=sys.stderr)
    dtypes = [getattr(torch, d) for d in a.dtypes.split(",")]
    rows, totals, fam_totals = [], defaultdict(int), defaultdict(lambda: defaultdict(int))
    for name in [n for n in wanted if n in by_name]:
        op, counts, failures, t0 = by_name[name], defaultdict(int), [], time.time()
        per_dtype = defaultdict(int)
        for dt, s in samples_of(op, dtypes):
            if a.max_samples and per_dtype[dt] >= a.max_samples:
                continue
            per_dtype[dt] += 1
            status, detail = run_sample(op, s)
            counts[status] += 1
            if status == "fail":
                failures.append(f"{str(dt)[6:]}: {detail}")
        ran = counts["pass"] + counts["fail"]
        rows.append((name, family.get(name, "?"), counts["pass"], ran, counts["scope"], counts["skip"], time.time() - t0))
        for k in ("pass", "fail", "scope", "skip"):
            totals[k] += counts[k]
            fam_totals[family.get(name, "?")][k] += counts[k]
        if a.verbose or not a.markdown:
            rate = f"{100 * counts['pass'] / ran:.1f}%" if ran else "-"
            print(
                f"{name:42s} {counts['pass']:4d}/{ran:<4d} {rate:>7s}  out of scope {counts['scope']}, "
                f"skipped {counts['skip']}  ({time.time() - t0:.1f} s)",
                flush=True,
            )
            if a.verbose:
                for f in sorted(set(failures)):
                    print(f"    {failures.count(f)}x {f}")
    ran = totals["pass"] + totals["fail"]
    if a.markdown:
        print("| OpInfo | samples passed | pass rate | out of scope |")
        print("|---|---|---|---|")
        for name, fam, p, n, sc, sk, _ in rows:
            print(f"| `{name}` | {p}/{n} | {100 * p / n:.1f}% | {sc or ''} |" if n else f"| `{name}` | 0/0 | - | {sc or ''} |")
    print(
        f"\ntotal: {totals['pass']}/{ran} samples pass ({100 * totals['pass'] / max(ran, 1):.2f}%), "
        f"{totals['scope']} out of scope, {totals['skip']} skipped (eager rejects the sample or gives no tensor)"
    )
    for fam, t in fam_totals.items():
        n = t["pass"] + t["fail"]
        print(f"  {fam}: {t['pass']}/{n} ({100 * t['pass'] / max(n, 1):.2f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
