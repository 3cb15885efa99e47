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
    """The perm of attention op `op`'s operand i (0 q, 1 k, 2 v, 3 y; identity when it has none):
    the operand as the op uses it is the stored value's .permute(perm)."""
    n = len(op.iattr)
    has = n == 2 + 4 * r or (n == 2 + 3 * r and i < 3)
    return list(op.iattr[2 + i * r : 2 + (i + 1) * r]) if has else list(range(r))


def _iattr(op: Op, r: int, perms: list) -> list:
    """op's [has_mask, is_causal] and the four perms (y's left out when it is the identity)."""
    keep = perms if perms[3] != list(range(r)) else perms[:3]
    return list(op.iattr[:2]) + [d for pm in keep for d in pm]


def _dead(ops, t, readers) -> bool:
    """Op t's results are read by nothing (the expand of a repeat_kv the attention reads around):
    the planner drops it, so it does not keep a permute alive."""
    return (
        t >= 0
        and bool(ops[t].outs)
        and all(o.storage.kind == SCRATCH and not o.storage.is_input and not readers.get(o.storage) for o in ops[t].outs)
    )


def _live_readers(ops, v: Value, readers) -> list:
    return [t for t in readers.get(v.storage, []) if not _dead(ops, t, readers)]


def _whole_scratch(v: Value) -> bool:
    return v.storage.kind == SCRATCH and not v.storage.is_input and v.offset == 0 and v.nbytes == v.storage.nbytes


def _touches(op: Op, storages, reads: bool) -> bool:
    return any(v.storage in storages for v in op.outs + (op.ins if reads else []))


def fold_permutes(ops, i, readers, producer):
    """Layout permutes folded into an attention op (docs/ops.md), for fuse.fuse_method: (ops to
    remove, the new op) or None. Each perm keeps the last dim last (rows stay contiguous).
    - q, k or v = x.permute(perm), the permute's only reader: the attention reads x in place with
      that perm, so a time-first cache [B, T, H, D] is read as [B, H, T, D] by strides and the
      permute (a copy of the cache prefix per layer per step) is not written.
    - y read only by a permute (`x.transpose(1, 2)` before the out projection): the attention writes
      the permute's result directly, through y's perm."""
    op = ops[i]
    if op.name != "attention":
        return None
    r = len(op.ins[0].shape)
    perms = [_perm_of(op, r, t) for t in range(4)]
    for j in range(3):
        a = op.ins[j]
        p = producer.get(a.storage)
        if p is None or p >= i or ops[p].name != "permute" or len(ops[p].outs) != 1:
            continue
        out = ops[p].outs[0]
        if not _whole_scratch(a) or out.storage is not a.storage or tuple(a.shape) != tuple(out.shape) or a.dtype != out.dtype:
            continue
        if [t for t in _live_readers(ops, a, readers) if t != i] or readers.get(a.storage, []).count(i) != 1:
            continue
        x, perm = ops[p].ins[0], list(ops[p].iattr)
        if len(perm) != r or perm[-1] != r - 1:
            continue
        if any(_touches(ops[t], (x.storage, a.storage), False) for t in range(p + 1, i)):
            continue  # x (or the copy) is written between the permute and the attention: keep the copy
        perms[j] = [perm[c] for c in perms[j]]  # (x.permute(perm)).permute(cur) = x.permute(perm ∘ cur)
        ins = list(op.ins)
        ins[j] = x
        return [p, i], Op("attention", ins, op.outs, _iattr(op, r, perms), op.fattr, op.where)
    y, ws = op.outs
    rd = _live_readers(ops, y, readers)
    if len(rd) != 1 or rd[0] <= i or ops[rd[0]].name != "permute" or not _whole_scratch(y):
        return None
    p = rd[0]
    src, z, perm = ops[p].ins[0], ops[p].outs[0], list(ops[p].iattr)
    if tuple(src.shape) != tuple(y.shape) or src.storage is not y.storage or len(perm) != r or perm[-1] != r - 1:
        return None
    if not _whole_scratch(z) or producer.get(z.storage) != p:
        return None
    # the attention moves to the permute's place: nothing between may write its inputs or touch z
    ins_st = [v.storage for v in op.ins] + [ws.storage]
    if any(_touches(ops[t], ins_st, False) or _touches(ops[t], (z.storage,), True) for t in range(i + 1, p)):
        return None
    inv = [0] * r
    for d, e in enumerate(perm):
        inv[e] = d  # y = z.permute(inv)
    perms[3] = [inv[c] for c in perms[3]]
    return [i, p], Op("attention", op.ins, [z, ws], _iattr(op, r, perms), op.fattr, op.where)
