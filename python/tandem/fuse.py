"""Fusions on a lowered method, before planning: op sequences that decomposed modules leave behind,
replaced by one op that has a kernel of its own (docs/ops.md).

- RMS norm: mul(x, x) -> mean(last dim, keepdim) -> add(eps) -> rsqrt -> mul(x, .) [-> mul(., w)]
  becomes rms_norm(x[, w]) (what nn.RMSNorm and hand-written RMSNorm modules decompose to).
- An activation right after a convolution: conv -> relu / hardswish becomes one conv with the
  activation as its last attribute, applied to each block of the output while it is in cache; so
  does conv -> ELU (alpha 1, as lowering/elementwise.py's _elu writes it: minimum, exp, sub, maximum), SEANet's.
  That ELU of any other value (SEANet's after each residual add, whose sum the next add reads too)
  becomes one `elu` op: one pass instead of four.
- Layer norm over a dim that is not last, written with permutes (e.g. a channel norm of [N, C, T]:
  norm(y.transpose(1, 2)).transpose(1, 2)): permute -> layer_norm(last dim) -> the inverse permute
  becomes one layer_norm with its axis, and neither permute is materialized.
- Attention written out (transformers' eager_attention_forward, hand-written attention):
  [repeat_kv (expand) of k and v ->] matmul(q, kᵀ) [· scale] [+ mask] -> softmax(last dim) ->
  matmul(., v) becomes one attention op over the KV heads, the scale applied to q or to the scores,
  so neither the repeated K/V nor the [.., heads, Tq, Tk] scores are materialized.
- A permute that feeds only an attention op and keeps the last dim last (a time-first KV cache put
  heads-first, `cache_k.permute(0, 2, 1, 3)`; q's `transpose(1, 2)`) is folded into the attention's
  perms (fold_permutes): the attention reads the permute's input in place.

Across methods, `tie_embeddings` makes an embedding table that is also a linear layer's weight
(tied input and output embeddings) read its rows from the packed weight, so it is stored once.

A sequence is fused only when its intermediate values have no other reader (another op, a method
output or a state write), so the fused op computes exactly what the sequence's result was.
"""

from __future__ import annotations

import math
from collections import defaultdict

import torch

from . import schema
from .ir import CONST, F32, I64, SCRATCH, MethodIR, Op, Storage, Value, flat_ops, op_lists, refresh_conds

_OUTPUT = -1  # a reader that is a method output


def fuse_method(ir: MethodIR) -> None:
    """Fuses the method's own ops (a cond's branches keep their ops as lowered)."""
    refresh_conds(ir.ops)
    while _fuse_one(ir):
        pass


def _fuse_one(ir: MethodIR) -> bool:
    readers: dict = defaultdict(list)
    producer: dict = {}
    for i, op in enumerate(ir.ops):
        for v in op.ins:
            readers[v.storage].append(i)
        for v in op.outs:
            producer.setdefault(v.storage, i)
    for _, v in ir.outputs:
        readers[v.storage].append(_OUTPUT)
    for i in range(len(ir.ops)):
        for match in (_rms_norm, _layer_norm_axis, _conv_activation, _conv_elu, _elu, _eager_attention, fold_permutes):
            found = match(ir.ops, i, readers, producer)
            if found:
                remove, new = found
                last = max(remove)
                ir.ops[last] = new
                for k in sorted(remove, reverse=True):
                    if k != last:
                        del ir.ops[k]
                return True
    return False


def _whole(v: Value) -> bool:
    return v.offset == 0 and v.nbytes == v.storage.nbytes


def _same(a: Value, b: Value) -> bool:
    return a.storage is b.storage and a.offset == b.offset and a.shape == b.shape and a.dtype == b.dtype


def _only_reader(v: Value, readers) -> int | None:
    """The index of the single op that reads scratch value v (whole), or None."""
    if v.storage.kind != SCRATCH or v.storage.is_input or not _whole(v):
        return None
    r = readers[v.storage]
    return r[0] if len(r) == 1 and r[0] != _OUTPUT else None


def _scalar_const(v: Value):
    if v.storage.kind != CONST or v.numel != 1 or v.offset != 0 or v.storage.tensor.numel() != 1:
        return None
    return float(v.storage.tensor.reshape(-1)[0])


def _other(op: Op, v: Value):
    """op's operand that is not v (op has two inputs, one of them v), or None."""
    if len(op.ins) != 2:
        return None
    a, b = op.ins
    if _same(a, v):
        return b
    if _same(b, v):
        return a
    return None


def _plain_binary(op: Op, name: str) -> bool:
    return op.name == name and len(op.ins) == 2 and not op.iattr and not op.fattr


def _rms_norm(ops, i, readers, producer):
    mean = ops[i]
    if mean.name != "mean" or len(mean.ins) != 1:
        return None
    sq = mean.ins[0]
    rank = len(sq.shape)
    if rank < 1 or mean.iattr != [rank - 1] or mean.outs[0].shape != sq.shape[:-1] + (1,) or sq.dtype != F32:
        return None
    p = producer.get(sq.storage)
    if p is None or _only_reader(sq, readers) != i or not _plain_binary(ops[p], "mul"):
        return None
    x = ops[p].ins[0]
    if not _same(x, ops[p].ins[1]) or x.shape != sq.shape:
        return None
    chain = [p, i]
    v = mean.outs[0]
    j = _only_reader(v, readers)  # add eps
    if j is None or not _plain_binary(ops[j], "add"):
        return None
    c = _other(ops[j], v)
    eps = None if c is None else _scalar_const(c)
    if eps is None or ops[j].outs[0].shape != v.shape:
        return None
    chain.append(j)
    v = ops[j].outs[0]
    k = _only_reader(v, readers)  # rsqrt
    if k is None or ops[k].name != "rsqrt":
        return None
    chain.append(k)
    v = ops[k].outs[0]
    m = _only_reader(v, readers)  # x * rsqrt(...)
    if m is None or not _plain_binary(ops[m], "mul") or _other(ops[m], v) is None or not _same(_other(ops[m], v), x):
        return None
    if ops[m].outs[0].shape != x.shape:
        return None
    chain.append(m)
    y = ops[m].outs[0]
    ins = [x]
    q = _only_reader(y, readers)  # optional: * weight
    if q is not None and _plain_binary(ops[q], "mul"):
        w = _other(ops[q], y)
        if w is not None and w.storage.kind == CONST and w.dtype == F32 and w.shape == x.shape[-1:] and ops[q].outs[0].shape == x.shape:
            ins.append(w)
            chain.append(q)
            y = ops[q].outs[0]
    return chain, Op("rms_norm", ins, [y], [len(ins) - 1], [eps], mean.where)


def _layer_norm_axis(ops, i, readers, producer):
    ln = ops[i]
    if ln.name != "layer_norm" or len(ln.iattr) != 3 or ln.iattr[0] != 1:
        return None
    a = ln.ins[0]
    p = producer.get(a.storage)
    if p is None or ops[p].name != "permute" or _only_reader(a, readers) != i:
        return None
    perm = ops[p].iattr
    y = ln.outs[0]
    q = _only_reader(y, readers)
    if q is None or ops[q].name != "permute":
        return None
    back = ops[q].iattr
    if len(back) != len(perm) or any(perm[back[t]] != t for t in range(len(perm))):
        return None
    x = ops[p].ins[0]
    axis = perm[-1]
    return [p, i, q], Op("layer_norm", [x] + ln.ins[1:], ops[q].outs, ln.iattr + [axis], ln.fattr, ln.where)


def _scale_of(op: Op, v: Value):
    """c when op computes v * c, c * v or v / c for a scalar constant c (v one of its inputs), else None."""
    if _plain_binary(op, "mul"):
        c = _other(op, v)
        return None if c is None else _scalar_const(c)
    if _plain_binary(op, "div") and _same(op.ins[0], v):
        c = _scalar_const(op.ins[1])
        return None if c in (None, 0.0) else 1.0 / c
    return None


def _kv_heads(v: Value, producer, ops) -> Value:
    """v [..., H, T, D] without its repeated heads when an expand made them from fewer: transformers'
    repeat_kv ([..., Hkv, 1, T, D] expanded to [..., Hkv, g, T, D], read as [..., Hkv·g, T, D]) or
    one head broadcast ([..., 1, T, D] to [..., H, T, D]); else v. The attention kernel reads KV head
    h // g for query head h, so the expand is left unread (and dropped by the planner)."""
    p = producer.get(v.storage)
    if p is None or ops[p].name != "expand" or not _whole(v) or len(v.shape) < 3:
        return v
    src, out = ops[p].ins[0], ops[p].outs[0]
    lead, H, T, D = v.shape[:-3], v.shape[-3], v.shape[-2], v.shape[-1]
    if len(src.shape) == len(v.shape) + 1 and src.shape[-3] == 1 and out.shape[-2:] == (T, D) and out.shape[:-4] == lead:
        hkv = src.shape[-4]  # repeat_kv
        if out.shape[-4] == hkv and hkv * out.shape[-3] == H:
            return src.view(lead + (hkv, T, D))
    if (
        len(src.shape) == len(v.shape)
        and src.shape[-3] == 1
        and src.shape[:-3] == lead
        and src.shape[-2:] == (T, D)
        and out.shape == v.shape
    ):
        return src  # one KV head for every query head
    return v


def _eager_attention(ops, i, readers, producer):
    """matmul(q, kᵀ) [· c] [+ mask] -> softmax(last) -> matmul(., v), anchored at the softmax, with
    an optional q · c before the first matmul and k, v read around a repeat_kv expand."""
    sm = ops[i]
    if sm.name != "softmax" or len(sm.ins) != 1:
        return None
    x = sm.ins[0]
    rank = len(x.shape)
    if rank < 2 or sm.iattr != [rank - 1] or x.dtype != F32:
        return None
    chain, scale, mask, v, reader = [i], 1.0, None, x, i
    while True:  # back from the softmax's input: [add mask] after [scale], up to the first matmul
        p = producer.get(v.storage)
        if p is None or _only_reader(v, readers) != reader or ops[p].outs[0].shape != v.shape and ops[p].name != "matmul":
            return None
        op = ops[p]
        if op.name == "matmul":
            break
        if op.name == "add" and mask is None and scale == 1.0 and len(op.ins) == 2 and not op.iattr:
            pick = None
            for a, b in ((op.ins[0], op.ins[1]), (op.ins[1], op.ins[0])):
                if a.shape == x.shape and b.dtype == F32 and len(b.shape) <= rank and _only_reader(a, readers) == p:
                    if all(m in (1, n) for m, n in zip(b.shape[::-1], x.shape[::-1])):
                        pick = (a, b)
                        break
            if pick is None:
                return None
            v, mask = pick
        else:
            c = next((_scale_of(op, a) for a in op.ins if a.shape == x.shape and _scale_of(op, a) is not None), None)
            if c is None or scale != 1.0:
                return None
            scale = c
            v = next(a for a in op.ins if a.shape == x.shape and _scale_of(op, a) is not None)
        chain.append(p)
        reader = p
    mm1 = ops[p]
    if mm1.outs[0].storage is not v.storage or len(mm1.ins) != 2:
        return None
    chain.append(p)
    a, bt = mm1.ins
    # kᵀ: a permute swapping the last two dims of k [..., H, Tk, D], read only by this matmul
    Tq, Tk, D = x.shape[-2], x.shape[-1], bt.shape[-2]
    t = producer.get(bt.storage)
    if t is not None and ops[t].name == "permute" and _only_reader(bt, readers) == p:
        kk = ops[t].ins[0]
        kr = len(kk.shape)
        if kr < 2 or ops[t].iattr != list(range(kr - 2)) + [kr - 1, kr - 2]:
            return None
        chain.append(t)
    elif (Tk == 1 or D == 1) and bt.shape[-1] == Tk:  # the transpose of a single row or column is a view
        kk = bt.view(x.shape[:-2] + (Tk, D))
        kr = rank
    else:
        return None
    if kk.shape[-2] != Tk or a.numel != math.prod(x.shape[:-1]) * D or kr != rank or kk.shape[:-2] != x.shape[:-2]:
        return None
    # q, scaled here or not
    qp = producer.get(a.storage)
    if qp is not None and _only_reader(a, readers) == p and len(ops[qp].ins) == 2:
        c = next((_scale_of(ops[qp], b) for b in ops[qp].ins if b.numel == a.numel and _scale_of(ops[qp], b) is not None), None)
        if c is not None:
            src = next(b for b in ops[qp].ins if b.numel == a.numel and _scale_of(ops[qp], b) is not None)
            scale *= c
            chain.append(qp)
            a = src
    q = a.view(x.shape[:-1] + (D,))
    # the probabilities' one reader: matmul(p, v)
    probs = sm.outs[0]
    j = _only_reader(probs, readers)
    if j is None or ops[j].name != "matmul" or len(ops[j].ins) != 2 or ops[j].ins[0].storage is not probs.storage:
        return None
    vv = ops[j].ins[1]
    if len(vv.shape) == rank:
        vv4 = vv
    elif vv.numel == math.prod(x.shape[:-1]) // Tq * Tk * vv.shape[-1] and vv.shape[-2] == Tk:
        vv4 = vv.view(x.shape[:-2] + vv.shape[-2:])
    else:
        return None
    Dv = vv4.shape[-1]
    if vv4.shape[:-2] != x.shape[:-2]:
        return None
    chain.append(j)
    k, val = _kv_heads(kk, producer, ops), _kv_heads(vv4, producer, ops)
    if rank >= 3 and (k.shape[-3] != val.shape[-3] or k.shape[-3] == 0 or x.shape[-3] % k.shape[-3]):
        k, val = kk, vv4  # K and V grouped differently: read both with every head
    group = x.shape[-3] // k.shape[-3] if rank >= 3 else 1
    y = ops[j].outs[0]
    y = y.view(x.shape[:-1] + (Dv,))
    ins = [q, k, val] + ([mask] if mask is not None else [])
    ws = Value(F32, (group * Tk,), Storage(SCRATCH, 0))
    ws.storage.nbytes = ws.nbytes
    return chain, Op("attention", ins, [y, ws], [int(mask is not None), 0], [scale], ops[j].where)


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
    """Layout permutes folded into an attention op (docs/ops.md): (ops to remove, the new op) or None.
    Each perm keeps the last dim last (rows stay contiguous).
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


# conv's optional last attribute, codes from schema.CONV_ACTIVATIONS: the single ops fused as one step
# (relu, hardswish), and ELU, which is fused from its four-op lowering (_conv_elu).
CONV_ACTIVATIONS = {a: schema.CONV_ACTIVATIONS.index(a) for a in ("relu", "hardswish")}
CONV_ELU = schema.CONV_ACTIVATIONS.index("elu")


def _conv_activation(ops, i, readers, producer):
    """conv immediately followed by relu / hardswish of its whole output, which nothing else reads."""
    conv = ops[i]
    if conv.name != "conv" or len(conv.iattr) != 3 + 3 * conv.iattr[0] or i + 1 >= len(ops):
        return None
    y, act = conv.outs[0], ops[i + 1]
    if (
        act.name not in CONV_ACTIVATIONS
        or len(act.ins) != 1
        or not _same(act.ins[0], y)
        or _only_reader(y, readers) != i + 1
        or act.outs[0].shape != y.shape
        or act.outs[0].dtype != F32
    ):
        return None
    return [i, i + 1], Op(
        "conv", conv.ins, [act.outs[0]] + conv.outs[1:], conv.iattr + [CONV_ACTIVATIONS[act.name]], conv.fattr, conv.where
    )


def _elu_chain(ops, i, y: Value, readers) -> list | None:
    """ops[i] = minimum(y, 0) -> exp -> sub(., 1) -> maximum(y, .) (ELU, alpha 1, as lowering/elementwise.py's
    _elu writes it) over a float32 y, each step read only by the next: the four ops' indices, or None."""
    mn = ops[i]
    if not (_plain_binary(mn, "minimum") and _same(mn.ins[0], y) and _scalar_const(mn.ins[1]) == 0.0):
        return None
    if mn.outs[0].shape != y.shape or y.dtype != F32:
        return None
    ex = _only_reader(mn.outs[0], readers)
    if ex is None or ops[ex].name != "exp" or len(ops[ex].ins) != 1 or not _same(ops[ex].ins[0], mn.outs[0]):
        return None
    sb = _only_reader(ops[ex].outs[0], readers)
    if (
        sb is None
        or not _plain_binary(ops[sb], "sub")
        or not _same(ops[sb].ins[0], ops[ex].outs[0])
        or _scalar_const(ops[sb].ins[1]) != 1.0
    ):
        return None
    k = _only_reader(ops[sb].outs[0], readers)
    mx = ops[k] if k is not None else None
    if (
        mx is None
        or not _plain_binary(mx, "maximum")
        or not _same(mx.ins[0], y)
        or not _same(mx.ins[1], ops[sb].outs[0])
        or mx.outs[0].shape != y.shape
        or mx.outs[0].dtype != F32
    ):
        return None
    return [i, ex, sb, k]


def _conv_elu(ops, i, readers, producer):
    """conv, then ELU (alpha 1) of its whole output (_elu_chain), y read by nothing but the chain's
    minimum and maximum: one conv with the elu activation (the same kernels in the same order on each
    block of y while it is in cache)."""
    conv = ops[i]
    if conv.name != "conv" or len(conv.iattr) != 3 + 3 * conv.iattr[0]:
        return None
    y = conv.outs[0]
    r = readers[y.storage] if y.storage.kind == SCRATCH and not y.storage.is_input and _whole(y) else []
    if len(r) != 2 or _OUTPUT in r:
        return None
    chain = _elu_chain(ops, r[0], y, readers)
    if chain is None or chain[-1] != r[1]:
        return None
    mx = ops[r[1]]
    return [i] + chain, Op("conv", conv.ins, [mx.outs[0]] + conv.outs[1:], conv.iattr + [CONV_ELU], conv.fattr, conv.where)


def _elu(ops, i, readers, producer):
    """ELU (_elu_chain) of a float32 y that others may read too (a conv's own ELU is _conv_elu's), y
    not written between the chain's minimum and maximum: one elu op reading y."""
    mn = ops[i]
    if mn.name != "minimum" or len(mn.ins) != 2:
        return None
    y = mn.ins[0]
    chain = _elu_chain(ops, i, y, readers)
    if chain is None or any(_writes(ops[j], y) for j in range(i + 1, chain[-1])):
        return None
    mx = ops[chain[-1]]
    return chain, Op("elu", [y], [mx.outs[0]], [], [], mx.where)


def _writes(op: Op, v: Value) -> bool:
    return any(o.storage is v.storage for o in op.outs)


def tie_embeddings(methods: list) -> None:
    """index_select of rows of a float32 table [N, K] whose transpose some matmul_packed uses as its
    weight B [K, N] becomes embedding_packed on that weight: the table is then stored once, laid out
    as the weight (layout.py; the file dedupes identical constants across methods)."""
    weights = [op.ins[1] for m in methods for op in flat_ops(m.ops) if op.name == "matmul_packed" and op.ins[1].storage.kind == CONST]
    if not weights:
        return
    for ops in (lst for m in methods for lst in op_lists(m.ops)):
        for i, op in enumerate(ops):
            x = op.ins[0] if op.name == "index_select" else None
            if (
                x is None
                or op.iattr != [0]
                or x.storage.kind != CONST
                or x.dtype != F32
                or len(x.shape) != 2
                or not _whole(x)
                or op.ins[1].dtype != I64
            ):
                continue
            N, K = x.shape
            table = x.storage.tensor.reshape(N, K)
            same = (w for w in weights if w.shape == (K, N) and _whole(w) and torch.equal(w.storage.tensor.reshape(K, N), table.t()))
            match = next(same, None)
            if match is not None:
                ops[i] = Op("embedding_packed", [match, op.ins[1]], op.outs, [N], [], op.where)
