"""Control flow inside the program: torch.cond as a `cond` op whose two branches are ops of the
method (docs/format.md, docs/ops.md); torch.while_loop unrolled when its trip count is known at
export, else refused naming the line."""

from __future__ import annotations

import torch

from ..ir import BOOL, SCRATCH, Op, Value, flat_ops, refresh_conds, same_shape
from .core import _dtype_of, _size, handles
from .provenance import source_line

_higher = torch.ops.higher_order


def _known(L, pred):
    """pred's value when the export knows it (a Python bool, a constant), else None."""
    if isinstance(pred, bool):
        return pred
    if isinstance(pred, Value) and pred in L.const_tensor:
        return bool(L.const_tensor[pred].reshape(()))
    return None


def _branch(L, gm, operands: list, outs: list) -> list:
    """The ops of one branch, ending with its results written into `outs` (the cond's outputs): the
    op that computes a result writes it there directly when the result is all of a value the branch
    makes, else a copy does. Sizes cached by the lowering stay inside the branch."""
    saved = L.ops, dict(L.sizes), set(L.checked)
    L.ops = []
    try:
        results = L.lower_subgraph(gm, operands)
        if len(results) != len(outs):
            L.fail(f"a branch of torch.cond gives {len(results)} results where the cond has {len(outs)}")
        made = {id(v.storage) for op in flat_ops(L.ops) for v in op.outs}
        taken = set()
        for r, out in zip(results, outs):
            if not isinstance(r, Value):
                r = L.scalar(r, out.dtype)
            s = r.storage
            if (
                s.kind == SCRATCH
                and id(s) in made
                and id(s) not in taken
                and not s.is_input
                and r.offset == 0
                and r.nbytes == s.nbytes == out.storage.nbytes
                and r.dtype == out.dtype
                and same_shape(r.shape, out.shape)
            ):
                taken.add(id(s))
                for op in flat_ops(L.ops):
                    for v in op.ins + op.outs:
                        if v.storage is s:
                            v.storage = out.storage
                r.storage = out.storage
            else:
                L.ops.append(Op("copy", [L.expand(L.cast(r, out.dtype), out.shape)], [out], where=source_line(L.node)))
        return L.ops
    finally:
        L.ops, L.sizes, L.checked = saved


@handles(_higher.cond)
def _cond(L, node, args, kwargs):
    """torch.cond(pred, true_fn, false_fn, operands): a `cond` op on pred, then the ops of true_fn,
    then those of false_fn, each writing the cond's outputs. A pred the export knows (a constant)
    lowers the branch it picks, without a cond."""
    pred, then_gm, else_gm, operands = args
    operands = list(operands)
    known = _known(L, pred)
    if known is not None:
        return L.lower_subgraph(then_gm if known else else_gm, operands)
    if not isinstance(pred, Value) or pred.numel != 1:
        L.fail("torch.cond's predicate must be a bool or a tensor of one element")
    pred = L.cast(L.reshape(pred, ()), BOOL)
    vals = node.meta.get("val")
    vals = vals if isinstance(vals, (list, tuple)) else [vals]
    outs = []
    for v in vals:
        if not isinstance(v, torch.Tensor):
            L.fail("torch.cond returns a value that is not a tensor; return tensors from both branches")
        outs.append(L.new(_dtype_of_val(L, node, v), tuple(_size(d, node) for d in v.shape)))
    where = source_line(node)
    bodies = (_branch(L, then_gm, operands, outs), _branch(L, else_gm, operands, outs))
    L.node = node
    op = Op("cond", [pred], list(outs), [], [], where, bodies=bodies)
    refresh_conds([op])
    L.ops.append(op)
    return outs


def _dtype_of_val(L, node, v: torch.Tensor) -> int:
    class _N:  # _dtype_of reads a node's meta
        op, target, name = node.op, node.target, node.name
        meta = {"val": v}

    return _dtype_of(_N)


MAX_UNROLL = 1024  # iterations of a torch.while_loop the export unrolls


@handles(_higher.while_loop)
def _while_loop(L, node, args, kwargs):
    """torch.while_loop(cond_fn, body_fn, carried, additional) whose trip count the export knows (its
    condition a constant at each step: a counter from a constant start): unrolled, body after body.
    A condition that depends on values known only at run time is refused, naming the line."""
    cond_gm, body_gm, carried, additional = args
    carried, additional = list(carried), list(additional)
    for _ in range(MAX_UNROLL + 1):
        (pred,) = L.lower_subgraph(cond_gm, carried + additional)
        L.node = node
        known = _known(L, pred)
        if known is None:
            L.fail(
                "torch.while_loop's condition depends on values known only at run time, so its trip count is not "
                "bounded at export: loop in Python over a bounded range (for i in range(n): ..., traced unrolled), or "
                "keep the loop's counter as state and call the method once per step"
            )
        if not known:
            return carried
        carried = list(L.lower_subgraph(body_gm, carried + additional))
        L.node = node
    L.fail(
        f"torch.while_loop runs more than {MAX_UNROLL} iterations, which the export unrolls: loop in Python over "
        "a bounded range, or keep the loop's counter as state and call the method once per step"
    )
