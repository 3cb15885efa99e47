"""Lowering an exported method to Core ATen: torch.export's run_decompositions with tandem's table.

run_decompositions builds its table from every CompositeImplicitAutograd op of every op namespace,
and collects that set again to split the table (a scan of the dispatcher per namespace, the larger
part of decomposing a small method). The set changes only when ops are registered, so the table and
the set are built once per state of the dispatcher's registrations and reused; the graphs are the
ones run_decompositions gives with a fresh table.
"""

from __future__ import annotations

import contextlib

import torch

_cache: dict = {}


def _decompositions() -> dict:
    """Core ATen, except the ops the runtime runs as one op: scaled_dot_product_attention,
    hardswish, hardsigmoid and isfinite; and training-mode batch norm decomposed."""
    table = torch.export.default_decompositions()
    from torch._decomp import decomposition_table

    # BatchNorm / InstanceNorm in training mode: the batch's statistics and the running ones (state) as
    # core ops (torch keeps the fused op, which tandem does not run)
    bn = torch.ops.aten._native_batch_norm_legit_functional.default
    table[bn] = decomposition_table[bn]
    for op in (
        torch.ops.aten.scaled_dot_product_attention.default,
        torch.ops.aten.hardswish.default,
        torch.ops.aten.hardsigmoid.default,
        torch.ops.aten.isfinite.default,
    ):
        table.pop(op, None)
    return dict(table)  # materialized: every op namespace's CompositeImplicitAutograd ops


def _registrations() -> tuple:
    """What the table and the op set depend on: the op namespaces and the ops registered for
    CompositeImplicitAutograd."""
    ops = torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")
    return tuple(torch.ops._dir), tuple(ops)


def _table_and_ops() -> tuple[dict, frozenset | None]:
    key = _registrations()
    hit = _cache.get(key)
    if hit is None:
        table = _decompositions()
        try:
            from torch._export.utils import _collect_all_valid_cia_ops

            ops = frozenset(_collect_all_valid_cia_ops())
        except ImportError:  # another torch: run_decompositions collects the set itself
            ops = None
        _cache.clear()
        hit = _cache[_registrations()] = (table, ops)
    return hit


@contextlib.contextmanager
def _collected(ops: frozenset | None):
    """run_decompositions' collection of the op set answered from `ops` while it runs."""
    import torch.export.exported_program as module

    name = "_collect_all_valid_cia_ops"
    own = getattr(module, name, None)
    if ops is None or own is None:
        yield
        return
    setattr(module, name, lambda: ops)
    try:
        yield
    finally:
        setattr(module, name, own)


def decompose(ep):
    """`ep` lowered to Core ATen with tandem's table (a new ExportedProgram)."""
    table, ops = _table_and_ops()
    with _collected(ops):
        return ep.run_decompositions(dict(table))
