"""scaled_dot_product_attention as one attention op over the KV heads (src/kernels/attention.c)."""

from __future__ import annotations

import math

import torch

from ..ir import F32, Op, Value
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
