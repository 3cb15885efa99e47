"""python/tandem/decompose.py: the table and the op set built once per state of the dispatcher's
registrations give the graphs run_decompositions gives with a table built afresh, also after an op
is registered between two exports."""

from __future__ import annotations

import torch
from torch import nn

from tandem import decompose


def fresh(ep):
    """run_decompositions as torch runs it, with tandem's edits to a new default table (uncached)."""
    return ep.run_decompositions(decompose._decompositions())


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)
        self.register_buffer("acc", torch.zeros(4))

    def forward(self, x):
        y = self.bn(self.lin(x)).softmax(-1)
        self.acc.add_(y.sum(0))
        q = y.view(1, 1, 2, 4)
        a = nn.functional.scaled_dot_product_attention(q, q, q)
        return nn.functional.hardswish(y + self.acc), a.flatten().isfinite(), torch.nn.functional.gelu(x)


def same(a, b) -> bool:
    return a.graph_module.code == b.graph_module.code and str(a.graph_signature) == str(b.graph_signature)


def test_the_cached_table_gives_the_graph_of_a_fresh_one():
    ep = torch.export.export(Mixed().train(), (torch.randn(2, 4),))
    first, second = decompose.decompose(ep), decompose.decompose(ep)
    assert same(first, fresh(ep)) and same(second, first)
    code = first.graph_module.code
    assert "aten.hardswish.default" in code and "scaled_dot_product_attention" in code and "isfinite" in code
    assert "_native_batch_norm_legit_functional" not in code and "aten.gelu" in code


def test_an_op_registered_between_exports_is_decomposed_as_afresh():
    class Twice(nn.Module):
        def forward(self, x):
            return torch.ops.tandem_test.twice(x) + 1

    decompose.decompose(torch.export.export(Mixed(), (torch.randn(2, 4),)))
    before = set(decompose._cache)
    lib = torch.library.Library("tandem_test", "DEF")
    try:
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")
        ep = torch.export.export(Twice(), (torch.randn(3),))
        got = decompose.decompose(ep)
        assert set(decompose._cache) != before, "the registration did not change the cache's key"
        assert same(got, fresh(ep))
        assert "tandem_test" not in got.graph_module.code and "aten.mul" in got.graph_module.code
    finally:
        lib._destroy()
