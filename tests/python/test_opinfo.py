"""A small fixed subset of PyTorch's OpInfo samples through scripts/opinfo.py (the full run is
slow and lives outside the suite; its pass rates are in docs/ops.md)."""

import importlib.util
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("opinfo", ROOT / "scripts" / "opinfo.py")
opinfo = importlib.util.module_from_spec(spec)
spec.loader.exec_module(opinfo)

# (OpInfo name, dtype, how many of its first samples)
SUBSET = [
    ("log1p", torch.float32, 3),
    ("cumsum", torch.float32, 4),
    ("cumsum", torch.int64, 2),
    ("gather", torch.float32, 3),
    ("topk", torch.float32, 7),
    ("sort", torch.float32, 6),
    ("sort", torch.int64, 3),
    ("var", torch.float32, 8),
    ("std", torch.float32, 4),
    ("constant_pad_nd", torch.float32, 6),
    ("nn.functional.pad.constant", torch.float32, 3),
    ("native_group_norm", torch.float32, 6),
    ("nn.functional.group_norm", torch.float32, 6),
    ("repeat", torch.float32, 12),
    ("index_put", torch.float32, 4),
    ("add", torch.int64, 4),
    ("remainder", torch.float32, 4),
    ("nn.functional.hardswish", torch.float32, 4),
    ("nn.functional.hardsigmoid", torch.float32, 4),
]


def _op(name):
    from torch.testing._internal.common_methods_invocations import op_db

    return next(o for o in op_db if o.name + (f".{o.variant_test_name}" if o.variant_test_name else "") == name)


@pytest.mark.parametrize("name,dtype,n", SUBSET, ids=[f"{n}-{str(d)[6:]}" for n, d, _ in SUBSET])
def test_opinfo_samples_pass(name, dtype, n):
    op = _op(name)
    results = []
    for i, (_, s) in enumerate(opinfo.samples_of(op, [dtype])):
        if i >= n:
            break
        results.append(opinfo.run_sample(op, s))
    assert results
    failed = [d for status, d in results if status == "fail"]
    assert not failed, failed
