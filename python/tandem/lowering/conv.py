"""Convolutions (im2col + GEMM in chunks, transposed), batch norm (folded into the conv before it
when it can be) and pooling (src/kernels/conv.c)."""

from __future__ import annotations

import math

import torch

from ..ir import F32, Op
from ..schema import PANEL
from .core import _shape_of, _size, aten, handles
from .provenance import source_line

CONV_CHUNK_FLOATS = 262144  # src/kernels/variants.h TDM_CONV_CHUNK_FLOATS


def conv_gemm_chunk(K: int, N: int) -> int:
    """Output positions per im2col chunk (src/kernels/conv_gemm.c tdm_conv_gemm_chunk): whole 8-column
    panels, about CONV_CHUNK_FLOATS floats of patches, at least one panel, at most every position."""
    per = max(PANEL, CONV_CHUNK_FLOATS // max(K, 1) // PANEL * PANEL)
    return min(per, (N + PANEL - 1) // PANEL * PANEL)


@handles(aten.convolution.default)
def _convolution(L, node, args, kwargs):
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = args[:9]
    r = len(x.shape) - 2
    if r not in (1, 2):
        L.fail(f"{r}-d convolution is not supported (1-d and 2-d are)")
    stride, padding, dilation = [int(s) for s in stride], [int(p) for p in padding], [int(d) for d in dilation]
    groups = int(groups)
    if transposed:
        return _conv_transpose(L, node, x, w, b, stride, padding, dilation, [int(p) for p in output_padding], groups)
    ins = [x, w] + ([b] if b is not None else [])
    iattr = [r, int(b is not None), groups] + stride + padding + dilation
    out_shape = _shape_of(node)
    O, Cg = w.shape[0], w.shape[1]
    K = Cg * math.prod(w.shape[2:])
    plain_1x1 = K == Cg and groups == 1 and all(s == 1 for s in stride) and not any(padding)
    # im2col + GEMM where each output sums enough products and the GEMM's rows (output channels of a
    # group) fill its 4-row tiles, or where the stride leaves the direct kernel scalar; else direct
    # (depthwise, tiny kernels).
    if not plain_1x1 and K >= 16 and (O // groups >= 4 or stride[-1] > 2):
        y = L.new(F32, out_shape)
        # sized for the most positions (a dynamic length's maximum: int() of a SymDim), so a plain size
        ws = L.new(F32, (int(K * conv_gemm_chunk(K, math.prod(out_shape[2:]))),))
        L.ops.append(Op("conv", ins, [y, ws], iattr, [], source_line(L.node)))
        return y
    return L.emit("conv", ins, F32, out_shape, iattr=iattr)


def _conv_transpose(L, node, x, w, b, stride, padding, dilation, output_padding, groups):
    """conv_transpose with w [C, O/groups, *kernel] rearranged to [groups, O/groups·prod(kernel), C/groups]
    (the GEMM's rows) and a workspace for the GEMM's result, O/groups·prod(kernel)·H·W, and for x's
    group packed in 8-column panels, C/groups·ceil8(H·W)."""
    C, Og = w.shape[0], w.shape[1]
    kernel = [int(k) for k in w.shape[2:]]
    rows = Og * math.prod(kernel)
    if w in L.const_tensor:
        wt = L.const(L.const_tensor[w].reshape(groups, C // groups, rows).permute(0, 2, 1).contiguous())
    else:
        wt = L.emit("permute", [L.reshape(w, (groups, C // groups, rows))], F32, (groups, rows, C // groups), iattr=[0, 2, 1])
    y = L.new(F32, _shape_of(node))
    hw = math.prod(x.shape[2:])
    ws = L.new(F32, (int(rows * hw + (C // groups) * ((hw + PANEL - 1) // PANEL * PANEL)),))  # at the maximum, as conv's
    ins = [x, wt] + ([b] if b is not None else [])
    iattr = [len(kernel), int(b is not None), groups] + kernel + stride + padding + dilation + output_padding
    L.ops.append(Op("conv_transpose", ins, [y, ws], iattr, [], source_line(L.node)))
    return y


@handles(aten._native_batch_norm_legit_no_training.default)
def _batch_norm_eval(L, node, args, kwargs):
    x, w, b, mean, var, _momentum, eps = args[:7]
    C = x.shape[1]
    shape = (C,) + (1,) * (len(x.shape) - 2)
    if all(t is None or t in L.const_tensor for t in (w, b, mean, var)):
        inv = 1.0 / torch.sqrt(L.const_tensor[var] + eps)
        scale = inv * (L.const_tensor[w] if w is not None else 1.0)
        shift = -L.const_tensor[mean] * scale + (L.const_tensor[b] if b is not None else 0.0)
        if _fold_into_conv(L, node, x, scale, shift):
            return [x, None, None]
        y = L.emit("mul", [x, L.const(scale.reshape(shape))], F32, x.shape)
        y = L.emit("add", [y, L.const(shift.reshape(shape))], F32, x.shape)
        return [y, None, None]

    # statistics computed or given at run time: (x - mean) * rsqrt(var + eps) [* w] [+ b]
    def per_channel(t):
        return L.reshape(L.cast(t, F32), shape)

    y = L.emit("sub", [x, per_channel(mean)], F32, x.shape)
    inv = L.emit("rsqrt", [L.emit("add", [per_channel(var), L.scalar(eps, F32)], F32, shape)], F32, shape)
    y = L.emit("mul", [y, inv], F32, x.shape)
    if w is not None:
        y = L.emit("mul", [y, per_channel(w)], F32, x.shape)
    if b is not None:
        y = L.emit("add", [y, per_channel(b)], F32, x.shape)
    return [y, None, None]


def _fold_into_conv(L, node, x, scale, shift) -> bool:
    """Batch norm right after a convolution with constant weights that nothing else reads: scale
    the conv's weights and bias instead (conv·scale + shift), so the norm costs nothing at run time."""
    op = L.ops[-1] if L.ops else None
    if op is None or op.name != "conv" or op.outs[0] is not x or len(node.args[0].users) != 1:
        return False
    w, has_bias = op.ins[1], op.iattr[1] == 1
    if w not in L.const_tensor or (has_bias and op.ins[2] not in L.const_tensor):
        return False
    wt = L.const_tensor[w]
    op.ins[1] = L.const(wt * scale.reshape((-1,) + (1,) * (wt.dim() - 1)))
    bias = shift + (L.const_tensor[op.ins[2]] * scale if has_bias else 0.0)
    op.ins[2:3] = [L.const(bias.reshape(-1).float())]
    op.iattr[1] = 1
    return True


def _pool(L, out_shape, name, x, kernel, stride, padding, dilation, ceil_mode, include_pad):
    r = len(x.shape) - 2
    n = lambda v: [int(i) for i in v] * (r if len(v) == 1 else 1)  # noqa: E731
    kernel = n(kernel)
    stride = n(stride) if stride else kernel
    if ceil_mode:
        L.fail("pooling with ceil_mode=True is not supported yet")
    return L.emit(name, [x], F32, out_shape, iattr=[r] + kernel + stride + n(padding) + n(dilation) + [int(include_pad)])


@handles(aten.max_pool2d_with_indices.default)
def _max_pool(L, node, args, kwargs):
    a = list(args) + [None] * 6
    out_shape = tuple(_size(d, node) for d in node.meta["val"][0].shape)
    y = _pool(L, out_shape, "max_pool", a[0], a[1], a[2], a[3] or [0], a[4] or [1], a[5] or False, 0)
    return [y, None]  # the indices are not produced: using them fails in getitem


@handles(aten.avg_pool2d.default, aten.avg_pool1d.default)
def _avg_pool(L, node, args, kwargs):
    a = list(args) + [None] * 7
    if a[6] is not None:
        L.fail("avg_pool with divisor_override is not supported")
    return _pool(L, _shape_of(node), "avg_pool", a[0], a[1], a[2], a[3] or [0], [1], a[4] or False, True if a[5] is None else a[5])
