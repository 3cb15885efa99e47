"""scaled_dot_product_attention as one attention op over the KV heads (src/kernels/attention.c)."""

from __future__ import annotations

import math

import torch

from ..ir import F32, SCRATCH, Op, Value
from .core import aten, handles
from .provenance import source_line


def _unrepeat_kv(L, x: Value) -> Value:
    """x without its head repetition when x is `repeat_kv(kv, g)` (transformers' expand of
    [B, Hkv, 1, T, D] to [B, Hkv, g, T, D], reshaped to [B, Hkv*g, T, D]); else x. The attention
    kernel reads a grouped KV head for each query head, so the copy is never made (the expand is
    then unread and dropped by the planner)."""
    if len(x.shape) != 4 or x.offset != 0 or x.nbytes != x.storage.nbytes:
        return x
    op = next((o for o in reversed(L.ops) if any(v.storage is x.storage for v in o.outs)), None)
    if op is None or op.name != "expand":
        return x
    src, out = op.ins[0], op.outs[0]
    B, H, T, D = x.shape
    if len(src.shape) != 5 or src.shape[2] != 1 or out.shape[:2] != src.shape[:2] or out.shape[3:] != (T, D):
        return x
    if out.shape[0] != B or out.shape[1] * out.shape[2] != H:
        return x
    return L.reshape(src, (B, src.shape[1], T, D))


@handles(aten.scaled_dot_product_attention.default)
def _sdpa(L, node, args, kwargs):
    names = ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"]
    a = dict(zip(names, args))
    a.update(kwargs)
    q, k, v, mask = a["query"], a["key"], a["value"], a.get("attn_mask")
    if a.get("dropout_p", 0.0) not in (0, 0.0):
        L.fail("scaled_dot_product_attention with dropout is not supported (export in eval mode, dropout_p=0)")
    k, v = _unrepeat_kv(L, k), _unrepeat_kv(L, v)
    if len(q.shape) < len(k.shape) and len(k.shape) == len(v.shape):  # q's batch dims broadcast against k's
        q = L.expand(q, tuple(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])) + q.shape[-2:])
    if len(q.shape) < 3 or len(k.shape) != len(q.shape):
        if q.shape[:-2] != k.shape[:-2]:
            L.fail("scaled_dot_product_attention needs q, k, v of one rank with equal batch dims")
    elif q.shape[:-3] != k.shape[:-3] or k.shape[:-2] != v.shape[:-2] or (k.shape[-3] and q.shape[-3] % k.shape[-3]):
        L.fail(
            f"scaled_dot_product_attention: q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}: k and v need "
            "q's batch dims and a number of heads that divides q's (grouped-query attention)"
        )
    scale = a.get("scale") or 1.0 / math.sqrt(q.shape[-1])
    ins = [q, k, v] + ([mask] if mask is not None else [])
    out_shape = q.shape[:-1] + (v.shape[-1],)
    y = L.new(F32, out_shape)
    group = q.shape[-3] // k.shape[-3] if len(q.shape) >= 3 and k.shape[-3] else 1
    ws = L.new(F32, (group * k.shape[-2],))  # the scores of the query heads that share a KV head
    L.ops.append(Op("attention", ins, [y, ws], [int(mask is not None), int(bool(a.get("is_causal", False)))], [scale], source_line(L.node)))
    return y


def _perm_of(op: Op, r: int, i: int) -> list:
    """The perm attention op `op` reads its operand i (0 q, 1 k, 2 v) through (identity when none)."""
    return list(op.iattr[2 + i * r : 2 + (i + 1) * r]) if len(op.iattr) == 2 + 3 * r else list(range(r))


def _dead(ops, t, readers) -> bool:
    """Op t's results are read by nothing (the expand of a repeat_kv the attention reads around):
    the planner drops it, so it does not keep a permute alive."""
    return (
        t >= 0
        and bool(ops[t].outs)
        and all(o.storage.kind == SCRATCH and not o.storage.is_input and not readers.get(o.storage) for o in ops[t].outs)
    )


def fold_permutes(ops, i, readers, producer):
    """An attention op whose q, k or v is a `permute` (x.permute(perm), the permute's only reader)
    that keeps the last dim last reads x in place instead: the perm goes into the attention's
    integer attributes (docs/ops.md), so a time-first cache [B, T, H, D] is read as [B, H, T, D]
    by strides and the permute (a copy of the cache prefix per layer per step) is not written.
    For fuse.fuse_method: (ops to remove, the new op) or None."""
    op = ops[i]
    if op.name != "attention":
        return None
    r = len(op.ins[0].shape)
    for j in range(3):
        a = op.ins[j]
        p = producer.get(a.storage)
        if p is None or p >= i or ops[p].name != "permute" or len(ops[p].outs) != 1:
            continue
        perm_op, out = ops[p], ops[p].outs[0]
        if a.offset != 0 or a.nbytes != a.storage.nbytes or tuple(a.shape) != tuple(out.shape) or a.dtype != out.dtype:
            continue
        if (
            a.storage.is_input
            or out.storage is not a.storage
            or [t for t in readers.get(a.storage, []) if t == i or not _dead(ops, t, readers)] != [i]
        ):
            continue
        x, perm = perm_op.ins[0], list(perm_op.iattr)
        if len(perm) != r or perm[-1] != r - 1:
            continue  # rows of the last dim must stay contiguous
        if any(any(o.storage in (x.storage, a.storage) for o in ops[t].outs) for t in range(p + 1, i)):
            continue  # x (or the copy) is written between the permute and the attention: keep the copy
        cur = _perm_of(op, r, j)
        perms = [_perm_of(op, r, t) for t in range(3)]
        perms[j] = [perm[c] for c in cur]  # (x.permute(perm)).permute(cur) = x.permute(perm ∘ cur)
        ins = list(op.ins)
        ins[j] = x
        iattr = list(op.iattr[:2]) + [d for pm in perms for d in pm]
        return [p, i], Op("attention", ins, op.outs, iattr, op.fattr, op.where)
    return None
