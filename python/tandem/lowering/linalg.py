"""Matrix products: mm, bmm, addmm as matmul, matmul_packed (a constant b, which layout.py packs in panels) or the
integer matmul, torch.cdist's decomposition against a constant codebook, and a mixture-of-experts layer's grouped
expert GEMMs as matmul_grouped (src/kernels/linalg.c)."""

from __future__ import annotations

import math

import torch

from ..ir import F32, I32, I64, Value
from .core import _dim, _dtype_of, _shape_of, aten, handles


def _producer(L, v: Value):
    """The op in L.ops whose whole first result v is (or a view of all of it), or None."""
    for op in reversed(L.ops):
        o = op.outs[0]
        if o.storage is v.storage:
            return op if v.offset == 0 and v.nbytes == o.storage.nbytes and o.nbytes == o.storage.nbytes else None
    return None


def _is_ones(L, v: Value) -> bool:
    if v in L.const_tensor:
        return bool((L.const_tensor[v] == 1).all())
    op = _producer(L, v)
    return op is not None and op.name == "fill" and list(op.fattr) == [1.0]


_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default, aten.unsqueeze.default)


def _through_views(n):
    while isinstance(n, torch.fx.Node) and n.target in _VIEWS:
        n = n.args[0]
    return n


def _is_call(n, target) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target is target


def _sum_of_squares_of(n, x) -> bool:
    """n is sum(pow(x, 2), [-1], keepdim=True), as torch's cdist decomposition writes it."""
    if (
        not _is_call(n, aten.sum.dim_IntList)
        or list(n.args[1]) not in ([-1], [len(_shape_of(n)) - 1])
        or not (len(n.args) > 2 and n.args[2] or n.kwargs.get("keepdim"))
    ):
        return False
    p = n.args[0]
    return _is_call(p, aten.pow.Tensor_Scalar) and p.args[0] is x and p.args[1] == 2


def _cdist_matmul(L, node, out_shape):
    """torch.cdist (p = 2) against a constant set of points C [N, D], as torch decomposes it when it
    takes the matmul path (more than 25 points on either side; torch's _euclidean_dist):
    cat([x·-2, Σx², 1], -1) @ cat([C, 1, ΣC²], -1)ᵀ. The right operand is C with two columns
    appended, transposed: rebuilt on every call (a cat and a permute of the whole set, C being too
    large to fold) or, folded, stored beside C. Lowered as the same sum in the same terms:
    (x·-2) @ Cᵀ (matmul_packed against C packed once at export, the constant a lookup of C's rows
    reads too: fuse.tie_embeddings) + Σx² + (ΣC²)ᵀ (a constant [N]). The dead cat and permute are
    dropped by the planner. None when the mm is not that pattern."""
    a, b = _through_views(node.args[0]), _through_views(node.args[1])
    if not _is_call(b, aten.permute.default) or not _is_call(a, aten.cat.default):
        return None
    bc = _through_views(b.args[0])
    rank = len(_shape_of(bc)) if _is_call(bc, aten.cat.default) else 0
    if rank < 2 or [_dim(int(p), rank) for p in b.args[1]] != list(range(rank - 2)) + [rank - 1, rank - 2]:
        return None
    if len(bc.args[0]) != 3 or len(a.args[0]) != 3:
        return None
    if (
        _dim(int(bc.args[1]) if len(bc.args) > 1 else 0, rank) != rank - 1
        or _dim(int(a.args[1]) if len(a.args) > 1 else 0, len(_shape_of(a))) != len(_shape_of(a)) - 1
    ):
        return None
    pts, ones_b, sq = bc.args[0]
    xm, xsq, ones_a = a.args[0]
    if not _is_call(xm, aten.mul.Tensor) or xm.args[1] != -2 or not _sum_of_squares_of(xsq, xm.args[0]) or not _sum_of_squares_of(sq, pts):
        return None
    env = L.env
    P = env.get(pts)
    if (
        P is None
        or P not in L.const_tensor
        or P.dtype != F32
        or not all(isinstance(env.get(n), Value) and _is_ones(L, env[n]) for n in (ones_a, ones_b))
    ):
        return None
    C = L.const_tensor[P]
    C = C.reshape((-1,) + tuple(C.shape[-2:]))
    if not torch.equal(C, C[:1].expand(C.shape)):  # the same points for every batch (x1 batched, x2 broadcast)
        return None
    C = C[0]
    N, D = C.shape
    x2, xs = env[xm], env[xsq]
    if out_shape[-1] != N or math.prod(x2.shape[:-1]) != math.prod(out_shape[:-1]) or x2.shape[-1] != D:
        return None
    x2, xs = L.reshape(x2, out_shape[:-1] + (D,)), L.reshape(xs, out_shape[:-1] + (1,))
    y = _matmul(L, x2, L.const(C.t()), out_shape)
    y = L.emit("add", [y, xs], F32, out_shape)
    c2 = (C * C).sum(-1)  # what ΣC² folded to: pow then sum over D, in float32
    c2 = L.const_tensor[env[sq]].reshape(-1, N)[0] if env.get(sq) in L.const_tensor else c2
    return L.emit("add", [y, L.const(c2.reshape((1,) * (len(out_shape) - 1) + (N,)))], F32, out_shape)


def _matmul(L, a: Value, b: Value, out_shape) -> Value:
    if b in L.const_tensor and (len(b.shape) == 2 or math.prod(b.shape[:-2]) == 1):
        # Weights: a constant of their own, [K, N] here, packed by layout.py into 8-column panels
        # (after quantization), so the kernel streams them in order.
        w = L.const_tensor[b].reshape(b.shape[-2:])
        K, N = w.shape
        a = L.reshape(a, out_shape[:-1] + (K,)) if len(a.shape) < len(out_shape) else a
        return L.emit("matmul_packed", [a, L.const(w)], F32, out_shape, iattr=[N])
    return L.emit("matmul", [a, b], F32, out_shape)


@handles(aten.mm.default, aten.bmm.default)
def _mm(L, node, args, kwargs):
    dt = _dtype_of(node)
    if dt in (I64, I32):
        return _int_matmul(L, args[0], args[1], _shape_of(node), dt)
    if dt != F32:
        L.fail("matmul is supported for float32, int64 and int32")
    fused = _cdist_matmul(L, node, _shape_of(node))
    if fused is not None:
        return fused
    return _matmul(L, args[0], args[1], _shape_of(node))


def _int_matmul(L, a: Value, b: Value, out_shape, dt: int) -> Value:
    """Integer a [..., M, K] @ b [..., K, N], exact and wrapping like PyTorch: the products
    a[..., M, K, 1] * b[..., 1, K, N] summed over K (an [..., M, K, N] temporary: integer matmuls are
    small index arithmetic, not weights)."""
    a, b = L.cast(a, I64), L.cast(b, I64)
    pa = L.reshape(a, a.shape + (1,))
    pb = L.reshape(b, b.shape[:-2] + (1,) + b.shape[-2:])
    prod = L.emit("mul", [pa, pb], I64, torch.broadcast_shapes(pa.shape, pb.shape))
    y = L.emit("sum", [prod], I64, out_shape, iattr=[len(prod.shape) - 2])
    return L.cast(y, dt)


@handles(aten.addmm.default)
def _addmm(L, node, args, kwargs):
    bias, a, b = args[0], args[1], args[2]
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    shape, dt = _shape_of(node), _dtype_of(node)
    y = _int_matmul(L, a, b, shape, dt) if dt in (I64, I32) else _matmul(L, a, b, shape)
    if alpha != 1:
        y = L.emit("mul", [y, L.scalar(alpha, dt)], dt, shape)
    if beta != 0:
        bias = L.cast(bias, dt)
        if beta != 1:
            bias = L.emit("mul", [bias, L.scalar(beta, dt)], dt, bias.shape)
        y = L.emit("add", [y, bias], dt, shape)
    return y


@handles(aten._grouped_mm.default, "transformers.grouped_mm_fallback.default")
def _grouped_mm(L, node, args, kwargs):
    """A mixture-of-experts layer's expert GEMMs: a [S, K] @ w [E, K, N] with offs [E] (expert e's
    rows end at offs[e]) as matmul_grouped against each expert's weights packed by layout.py, so a
    call reads only the weights of the experts that have rows."""
    a, w = args[0], args[1]
    offs = args[2] if len(args) > 2 else kwargs.get("offs")
    bias = args[3] if len(args) > 3 else kwargs.get("bias")
    if offs is None or bias is not None or len(a.shape) != 2 or len(w.shape) != 3:
        L.fail("grouped matmul is supported as a [S, K] @ w [E, K, N] with offsets and no bias")
    if w not in L.const_tensor:
        L.fail("grouped matmul is supported against constant expert weights")
    if a.dtype != F32 or _dtype_of(node) != F32:
        L.fail("grouped matmul is supported for float32")
    E, K, N = w.shape
    return L.emit("matmul_grouped", [a, L.const(L.const_tensor[w]), offs], F32, (a.shape[0], N), iattr=[N])
