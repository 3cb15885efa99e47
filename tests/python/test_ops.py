"""Per-op parity with PyTorch eager through the native runtime: several shapes per op, with
broadcasting and odd (tail) sizes. Each case is a one-line function exported as a method."""
import json
import math
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tandem

g = torch.Generator().manual_seed(0)


def r(*shape):
    return torch.randn(shape, generator=g)


def pos(*shape):
    return torch.rand(shape, generator=g) + 0.1


def wide(*shape):
    """Values across [-6, 6]: both ends of hardswish's and hardsigmoid's clamp and the ramp."""
    return torch.randn(shape, generator=g) * 4


def ints(*shape, lo=-20, hi=20):
    return torch.randint(lo, hi, shape, generator=g)


SHAPES_2 = [((7,), (7,)), ((3, 5), (5,)), ((2, 1, 9), (4, 1)), ((1,), (3, 17)), ((), (6,))]

CASES = []


def case(name, fn, *inputs, rtol=None, atol=None):
    CASES.append(pytest.param(fn, inputs, rtol, atol, id=f"{name}-{len(CASES)}"))


for sa, sb in SHAPES_2:
    case("add", lambda a, b: a + b, r(*sa), r(*sb))
    case("sub_alpha", lambda a, b: torch.sub(a, b, alpha=2.5), r(*sa), r(*sb))
    case("mul", lambda a, b: a * b, r(*sa), r(*sb))
    case("div", lambda a, b: a / b, r(*sa), pos(*sb))
    case("maximum", torch.maximum, r(*sa), r(*sb))
    case("minimum", torch.minimum, r(*sa), r(*sb))
    case("pow", torch.pow, pos(*sa), r(*sb))
    case("remainder", torch.remainder, r(*sa) * 5, pos(*sb))
    case("fmod", torch.fmod, r(*sa) * 5, r(*sb) + 0.05)
    case("fmod_int", torch.fmod, ints(*sa), ints(*sb, lo=1, hi=7) * (1 - 2 * ints(*sb, lo=0, hi=2)))
    case("lt", lambda a, b: a < b, r(*sa), r(*sb))
    case("ge", lambda a, b: a >= b, r(*sa), r(*sb))
    case("eq_int", lambda a, b: a == b, ints(*sa, lo=0, hi=3), ints(*sb, lo=0, hi=3))
    case("add_int", lambda a, b: a + b, ints(*sa), ints(*sb))
    case("mul_int", lambda a, b: a * b, ints(*sa), ints(*sb))
    case("where", lambda a, b: torch.where(a > 0, a, b), r(*sa), r(*sb))
    case("logical_and", lambda a, b: (a > 0) & (b > 0), r(*sa), r(*sb))
    case("logical_or", lambda a, b: (a > 0) | (b > 0), r(*sa), r(*sb))

for shape in [(1,), (3, 17), (2, 3, 33)]:
    for name, fn, mk in [("neg", torch.neg, r), ("abs", torch.abs, r), ("exp", torch.exp, r), ("log", torch.log, pos),
                         ("sqrt", torch.sqrt, pos), ("rsqrt", torch.rsqrt, pos), ("sin", torch.sin, r),
                         ("cos", torch.cos, r), ("tanh", torch.tanh, r), ("sigmoid", torch.sigmoid, r),
                         ("relu", F.relu, r), ("gelu", F.gelu, r), ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), r),
                         ("silu", F.silu, r), ("erf", torch.erf, r), ("reciprocal", torch.reciprocal, pos),
                         ("floor", torch.floor, r), ("ceil", torch.ceil, r), ("clamp", lambda x: x.clamp(-0.5, 0.7), r),
                         ("hardswish", F.hardswish, wide), ("hardsigmoid", F.hardsigmoid, wide),
                         ("scalar_ops", lambda x: (x * 3 + 1) / 2 - 0.5, r), ("rsub", lambda x: 1 - x, r),
                         ("pow2", lambda x: x ** 2, r), ("not", lambda x: ~(x > 0), r), ("neg_int", lambda x: -x, ints),
                         ("cast_f2i", lambda x: (x * 10).long(), r), ("cast_i2f", lambda x: x.float() / 3, ints),
                         ("floordiv", lambda x: torch.div(x, 3, rounding_mode="floor"), ints),
                         ("truncdiv", lambda x: torch.div(x, 3, rounding_mode="trunc"), ints)]:
        case(name, fn, mk(*shape))

# int64 division, remainder and pow are exact over the whole int64 range (not through float32, exact
# only below 2^24): values near 2^40, 2^62 and the int64 extremes, negative operands, broadcasting
BIG = torch.tensor([2**40 + 3, -(2**40) - 3, 2**62 + 12345, -(2**63) + 1, 2**63 - 1, -(2**63), 7, -7, 0, 123456789012345678])
DIVISORS = torch.tensor([3, 7, -5, 2**31 + 11, -1, 2, 2**40, -(2**33), 9, -1000000007])
for name, fn in [("floordiv_i64", lambda a, b: torch.div(a, b, rounding_mode="floor")),
                 ("truncdiv_i64", lambda a, b: torch.div(a, b, rounding_mode="trunc")),
                 ("floor_divide_i64", torch.floor_divide), ("remainder_i64", torch.remainder)]:
    case(name, fn, BIG, DIVISORS)
    case(name + "_bcast", fn, torch.stack([BIG, -BIG.clamp(min=-(2**63) + 1)]), DIVISORS[:1].clone())
case("floordiv_i64_scalar", lambda a: a // 1000003, BIG)
case("truncdiv_i64_scalar", lambda a: torch.div(a, -(2**35), rounding_mode="trunc"), BIG)
case("remainder_i64_scalar", lambda a: a % -(2**33 + 1), BIG)
case("sample_counter", lambda n: (n * 48000 + 12345) // 480, torch.tensor([0, 1, 2**20, 2**30 + 7, 2**40 + 1]))
case("pow_i64", torch.pow, torch.tensor([2, 3, -3, 7, -2, 10, 1, 0, 5]), torch.tensor([62, 39, 5, 20, 63, 18, 100, 0, 3]))
# exp over the float32 range: overflow to inf past 88.7228, exactly 0 past -103.97 (inf and NaN
# themselves cannot go through the JSON fixtures of the wasm run, so the results are compared)
EXP_EDGES = torch.tensor([89.0, 100.0, 88.73, -104.0, -120.0, -200.0, 0.5, 88.7, 88.72, -103.0, -90.0, 3.0])
case("exp_overflows", lambda x: torch.exp(x) > 3.4e38, EXP_EDGES)
case("exp_underflows", lambda x: torch.exp(x) == 0, EXP_EDGES)
case("exp_denormal", lambda x: torch.exp(x) * 2.0**126, torch.tensor([-87.0, -87.5, -88.0, -89.0, -90.0, -92.0, -95.0, -97.0]))

for shape, dims in [((5,), 0), ((3, 17), -1), ((3, 17), 0), ((2, 3, 5), (0, 2)), ((4, 1, 6), 1),
                    ((2, 5, 7, 7), (2, 3)), ((3, 4, 5), (1, 2))]:  # trailing dims: one contiguous row per output
    case("sum", lambda x, d=dims: x.sum(d), r(*shape))
    case("sum_keep", lambda x, d=dims: x.sum(d, keepdim=True), r(*shape))
    case("mean", lambda x, d=dims: x.mean(d), r(*shape))
    case("amax", lambda x, d=dims: x.amax(d), r(*shape))
    case("amin_keep", lambda x, d=dims: x.amin(d, keepdim=True), r(*shape))
    case("sum_int", lambda x, d=dims: x.sum(d), ints(*shape))
    case("any", lambda x, d=dims: (x > 1).any(d if isinstance(d, int) else d[0]), r(*shape))
    case("all", lambda x, d=dims: (x > -1).all(d if isinstance(d, int) else d[0]), r(*shape))
case("sum_all", lambda x: x.sum(), r(3, 5))

for shape, dim in [((5,), 0), ((3, 17), -1), ((2, 7, 3), 1), ((2, 3, 4, 9), -1)]:
    case("softmax", lambda x, d=dim: torch.softmax(x, d), r(*shape) * 3)
    case("log_softmax", lambda x, d=dim: torch.log_softmax(x, d), r(*shape) * 3)
    case("argmax", lambda x, d=dim: x.argmax(d), r(*shape))
    case("argmin_keep", lambda x, d=dim: x.argmin(d, keepdim=True), r(*shape))
case("argmax_flat", lambda x: x.argmax(), r(4, 5))
# OpInfo samples that once exported into programs the runtime rejected
case("argmax_0d", lambda x: x.argmax(0, keepdim=True) + x.argmin(-1), r())
case("cat_all_empty", lambda a, b: torch.cat([a, b], 0) + 1, r(0), r(0))

for shape in [(5,), (3, 17), (2, 3, 33)]:
    case("layer_norm", lambda x: F.layer_norm(x, x.shape[-1:], torch.linspace(0.5, 1.5, x.shape[-1]), torch.linspace(-1, 1, x.shape[-1])), r(*shape))
    case("layer_norm_plain", lambda x: F.layer_norm(x, x.shape[-1:]), r(*shape))
case("layer_norm_2d", lambda x: F.layer_norm(x, x.shape[-2:]), r(2, 3, 5))

for m, k, n in [(1, 1, 1), (1, 17, 5), (3, 8, 33), (7, 16, 4), (1, 64, 64)]:
    case("matmul", torch.matmul, r(m, k), r(k, n))
    case("linear", lambda x, w, b: F.linear(x, w, b), r(m, k), r(n, k), r(n))
    case("addmm", lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), r(m, n), r(m, k), r(k, n))
case("bmm", torch.bmm, r(3, 4, 5), r(3, 5, 6))
case("matmul_bcast", torch.matmul, r(2, 3, 4, 5), r(5, 7))
case("matmul_bcast2", torch.matmul, r(1, 4, 5), r(3, 5, 2))

case("permute", lambda x: x.permute(2, 0, 1) + 0, r(2, 3, 5))
case("transpose", lambda x: x.t() + 0, r(3, 7))
case("slice_step", lambda x: x[:, 1:7:2] + 0, r(3, 9))
case("slice_inner", lambda x: x[..., 2:5] + 0, r(2, 3, 9))
case("select", lambda x: x[:, 2] + 0, r(3, 5, 2))
case("select_neg", lambda x: x[-1] + 0, r(4, 5))
case("split", lambda x: torch.stack([c.sum() for c in x.split(3, dim=1)]), r(2, 8))
case("chunk", lambda x: x.chunk(3, dim=-1)[1] * 2, r(2, 9))
case("cat", lambda a, b: torch.cat([a, b * 2, a], dim=1), r(2, 3, 4), r(2, 1, 4))
case("cat0", lambda a, b: torch.cat([a, b], 0), r(2, 3), r(5, 3))
case("expand", lambda x: x.expand(4, 3, 5) + 0, r(3, 1))
case("view", lambda x: x.view(5, 6).t().reshape(-1) * 1, r(2, 15))
case("unsqueeze", lambda x: x.unsqueeze(1).unsqueeze(-1) * 2, r(4, 3))
case("embedding", lambda i, w: F.embedding(i, w), ints(2, 5, lo=0, hi=10), r(10, 7))
case("index_select", lambda x, i: x.index_select(1, i), r(3, 6, 2), torch.tensor([5, 0, 2, 2]))
case("index_neg", lambda x, i: x[i], r(6, 4), torch.tensor([-1, 0, -6]))
case("index_put", lambda x, i, v: x.index_put((i,), v), r(6, 4), torch.tensor([4, 1]), r(2, 4))
case("index_put_acc", lambda x, i, v: x.index_put((i,), v, accumulate=True), r(6, 4), torch.tensor([4, 1, 4]), r(3, 4))
case("index_copy", lambda x, i, v: x.index_copy(1, i, v), r(2, 6, 3), torch.tensor([5, 0]), r(2, 2, 3))
case("slice_scatter", lambda x, v: torch.slice_scatter(x, v, dim=1, start=1, end=7, step=2), r(3, 8), r(3, 3))
case("select_scatter", lambda x, v: torch.select_scatter(x, v, 0, 2), r(4, 5), r(5))
case("full", lambda x: x + torch.full((3, 40), 2.5), r(3, 40))
case("zeros_like", lambda x: torch.zeros_like(x) + x, r(10, 10))
case("arange", lambda x: x * torch.arange(5), r(3, 5))

for q, k in [((1, 4, 1, 8), (1, 4, 16, 8)), ((2, 3, 5, 7), (2, 3, 9, 7)), ((1, 2, 6, 4), (1, 2, 6, 4))]:
    case("sdpa", lambda q_, k_, v_: F.scaled_dot_product_attention(q_, k_, v_), r(*q), r(*k), r(*k))
    case("sdpa_mask", lambda q_, k_, v_, m: F.scaled_dot_product_attention(q_, k_, v_, attn_mask=m), r(*q), r(*k), r(*k),
         torch.rand(q[-2], k[-2], generator=g) > 0.3)
    case("sdpa_fmask", lambda q_, k_, v_, m: F.scaled_dot_product_attention(q_, k_, v_, attn_mask=m, scale=0.3), r(*q), r(*k), r(*k),
         r(q[-2], k[-2]))
case("sdpa_causal", lambda q_, k_, v_: F.scaled_dot_product_attention(q_, k_, v_, is_causal=True), r(1, 2, 6, 4), r(1, 2, 6, 4), r(1, 2, 6, 4))
# masks broadcast along the keys (stride 0) and along the queries, and a decode-like step: one query
# over a long cache of which only the first keys are kept (the kernel runs exp/axpy on those only)
case("sdpa_fmask_bcast_keys", lambda q_, k_, v_, m: F.scaled_dot_product_attention(q_, k_, v_, attn_mask=m),
     r(1, 2, 5, 4), r(1, 2, 7, 4), r(1, 2, 7, 4), r(5, 1))
case("sdpa_decode_prefix", lambda q_, k_, v_, m: F.scaled_dot_product_attention(q_, k_, v_, attn_mask=m),
     r(1, 4, 1, 8), r(1, 4, 300, 8), r(1, 4, 300, 8), torch.arange(300)[None, :] <= 12)
# bool masks whose kept keys sit inside a run of masked ones, per query and per head (the op drops
# the blocks of four keys every head of a group masks: a sliding window's start, a cache's tail)
case("sdpa_decode_window", lambda q_, k_, v_, m: F.scaled_dot_product_attention(q_, k_, v_, attn_mask=m),
     r(1, 4, 3, 8), r(1, 4, 70, 8), r(1, 4, 70, 8),
     (torch.arange(70)[None, :] >= torch.tensor([[5], [9], [33]])) & (torch.arange(70)[None, :] < torch.tensor([[14], [11], [67]])))
case("sdpa_gqa_head_masks", lambda q_, k_, v_, m: F.scaled_dot_product_attention(q_, k_, v_, attn_mask=m, enable_gqa=True),
     r(1, 6, 1, 8), r(1, 2, 41, 8), r(1, 2, 41, 8),
     (torch.arange(41)[None, None, :] >= torch.tensor([0, 3, 7, 13, 21, 30])[:, None, None])
     & (torch.arange(41)[None, None, :] < torch.tensor([2, 9, 8, 40, 25, 41])[:, None, None]))
# an additive mask with -inf holes, D and Tk not multiples of 4 (the SIMD128 build takes keys four
# at a time where four in a row are kept, and never adds 0 * v for a key whose weight is 0)
case("sdpa_fmask_holes", lambda q_, k_, v_, m: F.scaled_dot_product_attention(q_, k_, v_, attn_mask=m),
     r(1, 3, 2, 10), r(1, 3, 37, 10), r(1, 3, 37, 10),
     torch.where(torch.rand(2, 37, generator=g) > 0.2, 0.0, float("-inf")))
# grouped-query attention: 6 query heads over 2 KV heads, as SDPA's enable_gqa and as transformers'
# repeat_kv (expand + reshape, which the exporter reads around instead of copying)


def _repeat_kv(x, n):
    b, h, t, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n, t, d).reshape(b, h * n, t, d)


case("sdpa_gqa", lambda q_, k_, v_: F.scaled_dot_product_attention(q_, k_, v_, enable_gqa=True),
     r(2, 6, 3, 8), r(2, 2, 5, 8), r(2, 2, 5, 8))
case("sdpa_repeat_kv", lambda q_, k_, v_, m: F.scaled_dot_product_attention(q_, _repeat_kv(k_, 3), _repeat_kv(v_, 3), attn_mask=m),
     r(1, 6, 4, 8), r(1, 2, 9, 8), r(1, 2, 9, 8), torch.rand(4, 9, generator=g) > 0.3)
case("sdpa_repeat_kv_causal", lambda q_, k_, v_: F.scaled_dot_product_attention(q_, _repeat_kv(k_, 2), _repeat_kv(v_, 2), is_causal=True),
     r(1, 4, 5, 4), r(1, 2, 5, 4), r(1, 2, 5, 4))
# layout permutes folded into the attention (fuse.py fold_permutes): time-first K/V
# (pocket-tts' cache), q, and y written time-first for an out projection
def _tf(x):
    return x.permute(0, 2, 1, 3)


case("sdpa_kv_time_first", lambda q_, k_, v_: F.scaled_dot_product_attention(q_, _tf(k_), _tf(v_)), r(1, 4, 3, 8), r(1, 7, 4, 8), r(1, 7, 4, 6))
case("sdpa_qkvy_time_first_mask", lambda q_, k_, v_, m: F.scaled_dot_product_attention(_tf(q_), _tf(k_), _tf(v_), attn_mask=m).transpose(1, 2),
     r(2, 5, 3, 8), r(2, 9, 3, 8), r(2, 9, 3, 8), torch.rand(2, 1, 5, 9, generator=g) > 0.3)
case("sdpa_gqa_time_first_causal", lambda q_, k_, v_: F.scaled_dot_product_attention(q_, _tf(k_), _tf(v_), is_causal=True, enable_gqa=True),
     r(1, 6, 5, 4), r(1, 5, 2, 4), r(1, 5, 2, 4))
case("sdpa_y_permuted_fmask", lambda q_, k_, v_, m: F.scaled_dot_product_attention(q_, k_, v_, attn_mask=m).permute(2, 0, 1, 3),
     r(2, 4, 3, 8), r(2, 4, 6, 8), r(2, 4, 6, 8), r(2, 1, 3, 6))

for cin, cout, k, stride, pad, dil, groups, length in [(3, 5, 3, 1, 0, 1, 1, 11), (4, 4, 5, 2, 2, 1, 4, 17), (2, 6, 3, 1, 2, 2, 2, 9)]:
    case("conv1d", lambda x, w, b, s=stride, p=pad, d=dil, gr=groups: F.conv1d(x, w, b, s, p, d, gr),
         r(2, cin, length), r(cout, cin // groups, k), r(cout))
for cin, cout, k, stride, pad, groups, hw in [(1, 4, 3, 1, 1, 1, (8, 9)), (4, 8, 3, 2, 0, 2, (11, 7)), (3, 3, (2, 3), 1, (1, 0), 3, (6, 6))]:
    case("conv2d", lambda x, w, b, s=stride, p=pad, gr=groups: F.conv2d(x, w, b, s, p, 1, gr),
         r(1, cin, *hw), r(cout, cin // groups, *((k, k) if isinstance(k, int) else k)), r(cout))
case("conv2d_nobias", lambda x, w: F.conv2d(x, w, padding=1, dilation=2), r(1, 2, 9, 9), r(3, 2, 3, 3))
# wide enough rows for the SIMD128 column blocks (16, then 4, then single columns, with borders),
# and 1×1 convolutions (the GEMM path, with and without bias, with tail sizes)
case("conv1d_pointwise", lambda x, w, b: F.conv1d(x, w, b), r(2, 13, 37), r(11, 13, 1), r(11))
case("conv2d_pointwise", lambda x, w: F.conv2d(x, w), r(1, 6, 5, 7), r(9, 6, 1, 1))
case("conv1d_depthwise_wide", lambda x, w, b: F.conv1d(x, w, b, padding=2, groups=8), r(1, 8, 70), r(8, 1, 5), r(8))
case("conv1d_dilated_wide", lambda x, w, b: F.conv1d(x, w, b, padding=3, dilation=3), r(1, 3, 41), r(4, 3, 3), r(4))
case("conv2d_wide", lambda x, w, b: F.conv2d(x, w, b, padding=1), r(1, 3, 6, 23), r(5, 3, 3, 3), r(5))
case("max_pool2d", lambda x: F.max_pool2d(x, 2), r(1, 3, 9, 8))
case("max_pool2d_pad", lambda x: F.max_pool2d(x, 3, stride=2, padding=1), r(2, 2, 7, 10))
case("max_pool1d", lambda x: F.max_pool1d(x, 3, stride=2), r(1, 4, 11))
case("avg_pool2d", lambda x: F.avg_pool2d(x, 2), r(1, 3, 8, 9))
case("avg_pool2d_pad", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), r(1, 2, 7, 7))
case("avg_pool2d_nopad", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False), r(1, 2, 7, 7))
case("avg_pool1d", lambda x: F.avg_pool1d(x, 4), r(2, 3, 13))
case("batch_norm", lambda x, m: m(x), r(2, 5, 4, 3), nn.BatchNorm2d(5).eval())

# im2col + GEMM (Cg·KH·KW >= 16 and 4 or more output channels per group): strides 1 to 4, dilation,
# padding, groups, output channels and positions on every tail of the 4 x 8 tiles, and positions
# over several im2col chunks (K·chunk about 256 Ki floats)
for cin, cout, k, stride, pad, dil, groups, length in [(4, 5, 5, 1, 2, 1, 1, 29), (8, 12, 8, 4, 0, 1, 1, 64), (6, 9, 3, 3, 1, 2, 3, 41),
                                                       (16, 8, 3, 1, 1, 3, 2, 37), (2, 4, 10, 5, 0, 1, 1, 100), (32, 7, 7, 1, 3, 1, 1, 20)]:
    # sums of up to 224 unit-variance products (outputs near 15) in another order than PyTorch's:
    # a few ulps of the largest partial sums, not float32's default 1.3e-6 relative
    case("conv1d_gemm", lambda x, w, b, s=stride, p=pad, d=dil, gr=groups: F.conv1d(x, w, b, s, p, d, gr),
         r(2, cin, length), r(cout, cin // groups, k), r(cout), rtol=2e-5, atol=5e-5)
for cin, cout, k, stride, pad, dil, groups, hw in [(3, 8, 3, 2, 1, 1, 1, (13, 11)), (8, 6, 3, 1, 1, 1, 2, (7, 9)), (4, 13, (3, 5), (2, 3), (1, 2), (2, 1), 1, (12, 14)),
                                                   (3, 4, 7, 2, 3, 1, 1, (20, 19))]:
    case("conv2d_gemm", lambda x, w, b, s=stride, p=pad, d=dil, gr=groups: F.conv2d(x, w, b, s, p, d, gr),
         r(1, cin, *hw), r(cout, cin // groups, *((k, k) if isinstance(k, int) else k)), r(cout), rtol=2e-5, atol=5e-5)
case("conv2d_gemm_chunks", lambda x, w: F.conv2d(x, w, padding=1), r(1, 32, 40, 30), r(8, 32, 3, 3) * 0.1)  # K 288: 3 chunks
case("conv2d_gemm_module", lambda x, m: m(x), r(1, 16, 9, 10), nn.Conv2d(16, 12, 3, stride=2, padding=1).eval())
# the direct kernel with stride 2 (depthwise, as MobileNet's), 16 then 4 columns then borders
case("conv2d_depthwise_s2", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=6), r(1, 6, 21, 45), r(6, 1, 3, 3), r(6))
case("conv2d_depthwise_5x5_s2", lambda x, w: F.conv2d(x, w, stride=2, padding=2, groups=4), r(1, 4, 17, 38), r(4, 1, 5, 5))
case("conv1d_depthwise_s2_dil", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=2, dilation=2, groups=5), r(1, 5, 77), r(5, 1, 3), r(5))
# depthwise on short rows (MobileNetV3's 14×14 and 7×7 maps): every row is mostly border columns,
# run over zero-padded rows; kernel 3 and 5, strides 1 and 2, odd widths
case("conv2d_depthwise_7x7_k5", lambda x, w, b: F.conv2d(x, w, b, padding=2, groups=6), r(1, 6, 7, 7), r(6, 1, 5, 5), r(6))
case("conv2d_depthwise_14x14_k5_s2", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=2, groups=5), r(1, 5, 14, 14), r(5, 1, 5, 5), r(5))
case("conv2d_depthwise_14x14_k3", lambda x, w: F.conv2d(x, w, padding=1, groups=3), r(2, 3, 14, 14), r(3, 1, 3, 3))
case("conv2d_depthwise_odd_k3_s2", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=4), r(1, 4, 9, 11), r(4, 1, 3, 3), r(4))
# an activation fused into the conv (its last attribute), on each path: 1×1 GEMM, im2col + GEMM,
# direct, direct over padded rows; and one the fusion must leave alone (the conv's output read twice)
case("conv_relu_pointwise", lambda x, w, b: F.relu(F.conv2d(x, w, b)), r(1, 6, 5, 7), r(9, 6, 1, 1), r(9))
case("conv_hardswish_gemm", lambda x, w, b: F.hardswish(F.conv2d(x, w, b, padding=1)), r(1, 4, 9, 10), r(8, 4, 3, 3), r(8))
case("conv_relu_direct_wide", lambda x, w: F.relu(F.conv2d(x, w, padding=1, groups=3)), r(1, 3, 6, 40), r(3, 1, 3, 3))
case("conv_hardswish_depthwise", lambda x, w, b: F.hardswish(F.conv2d(x, w, b, padding=2, groups=4)), r(1, 4, 7, 7), r(4, 1, 5, 5), r(4))
case("conv_relu_reused", lambda x, w: (lambda y: F.relu(y) + y)(F.conv2d(x, w, padding=1, groups=2)), r(1, 2, 5, 5), r(2, 1, 3, 3))
case("conv1d_depthwise_short", lambda x, w, b: F.conv1d(x, w, b, padding=2, groups=3), r(1, 3, 13), r(3, 1, 5), r(3))
case("conv1d_s3_direct", lambda x, w: F.conv1d(x, w, stride=3, padding=1), r(1, 2, 40), r(2, 2, 3))
# transposed convolution: GEMM then col2im; stride, padding, output padding, dilation, groups
for cin, cout, k, stride, pad, opad, dil, groups, length in [(4, 6, 3, 1, 0, 0, 1, 1, 9), (8, 4, 8, 4, 0, 0, 1, 1, 13), (6, 9, 5, 2, 2, 1, 1, 3, 11),
                                                             (4, 4, 3, 3, 1, 2, 2, 2, 7), (3, 2, 4, 2, 1, 0, 3, 1, 6)]:
    case("conv_transpose1d", lambda x, w, b, s=stride, p=pad, o=opad, d=dil, gr=groups: F.conv_transpose1d(x, w, b, s, p, o, gr, d),
         r(2, cin, length), r(cin, cout // groups, k), r(cout))
for cin, cout, k, stride, pad, opad, dil, groups, hw in [(4, 3, 3, 2, 1, 1, 1, 1, (5, 6)), (6, 4, (2, 4), (2, 3), (0, 1), (1, 0), 1, 2, (4, 7)),
                                                         (2, 5, 3, 1, 1, 0, 2, 1, (6, 5))]:
    case("conv_transpose2d", lambda x, w, b, s=stride, p=pad, o=opad, d=dil, gr=groups: F.conv_transpose2d(x, w, b, s, p, o, gr, d),
         r(1, cin, *hw), r(cin, cout // groups, *((k, k) if isinstance(k, int) else k)), r(cout))
case("conv_transpose1d_nobias", lambda x, w: F.conv_transpose1d(x, w, stride=5), r(1, 3, 8), r(3, 2, 10))
case("conv_transpose1d_module", lambda x, m: m(x), r(1, 16, 12), nn.ConvTranspose1d(16, 8, 8, stride=4).eval())
case("conv_transpose2d_module", lambda x, m: m(x), r(1, 8, 6, 5), nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1).eval())
# pooling rows 4 columns at a time (strides 1 and 2), borders, NaN-free random data
case("max_pool2d_s2_wide", lambda x: F.max_pool2d(x, 3, stride=2, padding=1), r(1, 3, 21, 45))
case("max_pool2d_s1_wide", lambda x: F.max_pool2d(x, 3, stride=1, padding=1), r(1, 2, 9, 37))
case("max_pool2d_dilated", lambda x: F.max_pool2d(x, 2, stride=1, dilation=2), r(1, 2, 9, 30))
case("avg_pool2d_s2_wide", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), r(1, 3, 15, 41))
case("avg_pool2d_s2_nopad_wide", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False), r(1, 3, 15, 41))
case("avg_pool1d_s1_wide", lambda x: F.avg_pool1d(x, 3, stride=1, padding=1), r(2, 3, 33))
case("elu", F.elu, r(3, 37) * 3)
case("elu_alpha", lambda x: F.elu(x, alpha=0.5), r(2, 17) * 3)


def with_random_params(m):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return m


# RMS norm (fused into rms_norm at export, python/tandem/fuse.py): with a weight, without, with the
# weight an input (fused without it), with the mean also read elsewhere (not fused), rows past the
# SIMD path's 4096
for shape in [(5,), (3, 17), (2, 3, 33)]:
    case("rms_norm_module", lambda x, m: m(x), r(*shape), with_random_params(nn.RMSNorm(shape[-1], eps=1e-6)))
case("rms_norm_plain", lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5), r(4, 9))
case("rms_norm_weight_input", lambda x, w: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w, r(4, 9), r(9))
case("rms_norm_mean_reused", lambda x: x * torch.rsqrt((m := (x * x).mean(-1, keepdim=True)) + 1e-6) + m, r(3, 12))
case("rms_norm_long", lambda x, m: m(x), r(2, 5000), with_random_params(nn.RMSNorm(5000)))
# layer norm over a dim that is not last, written with permutes (fused into one layer_norm with an
# axis): channels of [N, C, T] with T past a multiple of 4, rank 4, no affine; a permute back that
# is not the inverse (not fused)
case("channel_norm", lambda x, m: m(x.transpose(1, 2)).transpose(1, 2), r(2, 7, 33), with_random_params(nn.LayerNorm(7)))
case("channel_norm_4d", lambda x, m: m(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2), r(2, 5, 3, 6), with_random_params(nn.LayerNorm(5)))
case("channel_norm_plain", lambda x, m: m(x.transpose(1, 2)).transpose(1, 2), r(1, 6, 9), nn.LayerNorm(6, elementwise_affine=False))
case("channel_norm_not_inverse", lambda x, m: m(x.transpose(1, 2)).transpose(0, 1), r(2, 7, 5), with_random_params(nn.LayerNorm(7)))


# ---- log1p, repeat, var/std, cumsum, gather, topk/sort, constant padding, group norm,
# multi-index index_put, float64 fills, and int32 as a full dtype ----------------------------------
for shape in [(1,), (3, 17), (2, 3, 33)]:
    case("log1p", torch.log1p, pos(*shape) * 3 - 0.05)
    case("log1p_tiny", lambda x: torch.log1p(x) * 1e6, r(*shape) * 1e-6)  # log(1 + x) would lose these
    case("expm1", torch.expm1, r(*shape) * 3)
    case("expm1_tiny", lambda x: torch.expm1(x) * 1e6, r(*shape) * 1e-6)  # exp(x) - 1 would lose these
    case("max_all", lambda x: torch.max(x) + torch.min(x) * 2, r(*shape))
    case("max_all_int", lambda x: torch.max(x) * 100 + torch.min(x), ints(*shape).to(torch.int32))
    case("pow_scalar_base", lambda x: 2.5 ** x, r(*shape))
case("expm1_edges", torch.expm1, torch.tensor([0.0, -0.0, 1e-30, -1e-7, 0.999, -0.999, 1.0, -1.0, 88.0, 89.0, -100.0, 20.0]))
for shape in [(1,), (3, 17), (2, 3, 33)]:
    case("erfinv", torch.erfinv, torch.rand(shape, generator=g) * 1.9998 - 0.9999, rtol=1e-6, atol=1e-7)  # within 3e-7 of the result
# both polynomials and the switch between them (|x| near 0.9966), the tail, ±0; the results that
# are not finite compared as flags (they cannot go through the JSON fixtures of the wasm run)
case("erfinv_edges", torch.erfinv, torch.tensor([0.0, -0.0, 1e-30, 0.5, -0.9966, 0.99661, 0.999, -0.99999, 0.9999999, -0.9999999]),
     rtol=1e-6, atol=1e-7)
case("erfinv_not_finite", lambda x: torch.stack([torch.erfinv(x) > 3e38, torch.erfinv(x) < -3e38, torch.isnan(torch.erfinv(x))]),
     torch.tensor([1.0, -1.0, 1.0000001, -3.0, 0.5, 0.0]))
# torch.distributions' Normal validates its parameters (aten._is_all_true, an assertion) and its icdf
# is erfinv: all on constants, folded at export
case("normal_icdf_of_a_constant", lambda x: x * torch.distributions.Normal(0, 1).icdf(torch.tensor(0.95)), r(3, 5))
case("is_all_true", lambda x: torch.stack([torch._is_all_true(x > -2), torch._is_any_true(x > 1), torch._is_all_true(x > 0)]), r(3, 5))
case("log1p_edges", torch.log1p, torch.tensor([-0.9999999, -0.999999, 0.0, -0.0, 1e-30, 3e38, -1e-7]))
for shape, reps in [((3,), (2,)), ((2, 3), (2, 1)), ((2, 3), (1, 3, 2)), ((), (4, 2)), ((2, 1, 5), (3, 2, 1)), ((3, 2), (0, 2))]:
    case("repeat", lambda x, r_=reps: x.repeat(*r_) + 0, r(*shape))
case("repeat_int", lambda x: x.repeat(2, 3), ints(2, 3))
for shape, kw in [((5,), {}), ((3, 17), {"dim": 1}), ((3, 17), {"dim": 0, "correction": 0}), ((2, 3, 5), {"dim": (0, 2), "keepdim": True}),
                  ((4, 9), {"dim": -1, "correction": 2.5}), ((2, 4), {"dim": 0}), ((2, 3, 5), {"correction": 0.5})]:
    case("var", lambda x, k=kw: torch.var(x, **k), r(*shape) * 3 + 1)
    case("std", lambda x, k=kw: torch.std(x, **k), r(*shape) * 3 + 1)
case("var_mean", lambda x: torch.stack(torch.var_mean(x, 1, keepdim=True)), r(3, 7))
case("std_unbiased", lambda x: x.std(0, unbiased=False), r(6, 3))
for shape, dim in [((7,), 0), ((3, 17), 1), ((3, 17), 0), ((2, 3, 5), -2)]:
    case("cumsum", lambda x, d=dim: torch.cumsum(x, d), r(*shape))
    case("cumsum_int", lambda x, d=dim: torch.cumsum(x, d), ints(*shape))
case("cumsum_bool", lambda x: torch.cumsum(x > 0, 1), r(3, 9))
case("cumsum_long_rows", lambda x: torch.cumsum(x, -1), r(2, 5000))
for shape, dim, ishape in [((10, 5), 0, (5, 5)), ((10, 5), 1, (10, 2)), ((3, 4, 5), 2, (3, 2, 7)), ((3, 4, 5), 1, (2, 9, 5)), ((6,), 0, (11,))]:
    case("gather", lambda x, i, d=dim: torch.gather(x, d, i), r(*shape), ints(*ishape, lo=0, hi=shape[dim]))
case("gather_dup", lambda x, i: x.gather(1, i), r(3, 6), torch.tensor([[5, 0], [5, 5], [2, 2]]))
case("take_along_dim", lambda x: torch.take_along_dim(x, x.argsort(1, descending=True)[:, :3], 1), r(4, 9))
for shape, dim, k in [((9,), 0, 3), ((3, 17), 1, 5), ((3, 17), 0, 1), ((2, 5, 3), 1, 5), ((1, 300), -1, 50)]:
    case("topk", lambda x, d=dim, k_=k: torch.stack([v.float() for v in torch.topk(x, k_, d)]), r(*shape))
    case("topk_smallest", lambda x, d=dim, k_=k: torch.topk(x, k_, d, largest=False)[1], r(*shape))
    case("sort", lambda x, d=dim: torch.stack([v.float() for v in torch.sort(x, d)]), r(*shape))
    case("sort_desc", lambda x, d=dim: torch.sort(x, d, descending=True)[1], r(*shape))
# ties keep their order (stable), NaN sorts above every number, int64 and int32 values
case("sort_ties", lambda x: torch.sort(x, dim=1, stable=True)[1] * 10 + torch.sort(x, dim=1, descending=True, stable=True)[1], ints(4, 13, lo=0, hi=3))
case("topk_ties", lambda x: torch.topk(x, 4, 1)[0], ints(5, 11, lo=0, hi=3))  # which of equal values: unspecified
case("sort_nan", lambda x: torch.sort(x, 0)[1] * 100 + torch.sort(x, 0, descending=True)[1], torch.tensor([1.0, float("nan"), -2.0, float("nan"), 0.0, -0.0]))
case("sort_int64", lambda x: torch.sort(x, -1, descending=True)[0], ints(3, 8))
case("sort_int32", lambda x: torch.sort(x, 0)[0] * 2, ints(7, 2).int())
case("argsort", lambda x: torch.argsort(x, 1), r(3, 10))


# mixture-of-experts layers: expert GEMMs over groups of rows (torch._grouped_mm needs K and N multiples
# of 4 on CPU), tokens per expert (histc), max over a dim
class _Experts(nn.Module):
    def __init__(self, e, k, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(e, k, n, generator=g))


for S, E, K, N, offs in [(7, 4, 8, 12, [2, 2, 5, 7]), (1, 3, 16, 20, [0, 1, 1]), (9, 2, 4, 36, [4, 9]), (6, 5, 12, 8, [0, 0, 0, 0, 6])]:
    case("grouped_mm", lambda x, o, m: torch._grouped_mm(x, m.w, offs=o), r(S, K), torch.tensor(offs, dtype=torch.int32), _Experts(E, K, N))
case("histc", lambda x: torch.histc(x, bins=5, min=-1, max=1), r(3, 7))
case("histc_edges", lambda x: torch.histc(x, bins=4, min=0, max=3),
     torch.tensor([0.0, 1, 2, 3, 3, 0.75, 1.5, 2.25, -0.0, 3.0001, float("nan"), -1e-9]))
case("histc_expert_ids", lambda x: torch.histc(x.float(), bins=8, min=0, max=7), ints(13, lo=0, hi=8))
case("histc_one_expert", lambda x: torch.histc(x.float(), bins=1, min=0, max=0), ints(13, lo=0, hi=1))
case("histc_one_bin_data_range", lambda x: torch.histc(x, bins=1, min=0, max=0), r(3, 5))
case("max_dim", lambda x: torch.max(x, 1)[0], r(3, 7))
case("max_dim_indices", lambda x: torch.max(x, -1, keepdim=True)[1], r(4, 5))
case("min_dim", lambda x: torch.min(x, 0)[0] * 10 + torch.min(x, 0)[1], r(6, 3))
case("max_dim_int", lambda x: torch.max(x, 1)[0], ints(3, 5).int())
for shape, pad, value in [((3, 5), (1, 2), 0.0), ((2, 3, 4), (0, 1, 2, 0), 1.5), ((5, 3), (-1, -2, 1, 1), -2.0), ((1, 3, 4, 4), (-1, 1, -2, 1), 0.0),
                          ((2, 3), (1, 1, 1, 1), 3.0), ((2, 2, 3), (1, 1, 0, 0, 2, 1), 3.0), ((2, 70), (5, 0), 0.0)]:
    case("constant_pad", lambda x, p=pad, v=value: F.pad(x, p, value=v) * 1, r(*shape))
case("constant_pad_int", lambda x: torch.constant_pad_nd(x, (2, 1, 0, 1), 7), ints(2, 3))
for shape, groups, affine in [((2, 6), 3, True), ((2, 6, 5), 2, True), ((1, 4, 3, 3), 4, False), ((3, 6, 7), 1, True), ((2, 8, 2, 5), 2, True)]:
    case("group_norm", lambda x, gr=groups, a=affine: F.group_norm(x, gr, torch.linspace(0.5, 1.5, x.shape[1]) if a else None,
                                                                    torch.linspace(-1, 1, x.shape[1]) if a else None, 1e-5), r(*shape))
case("group_norm_module", lambda x, m: m(x), r(2, 6, 9), with_random_params(nn.GroupNorm(3, 6)))
# several index tensors, broadcast (x[i, j] = v as PyTorch writes it), negative indices,
# accumulation with repeats, indexed dims after a slice (x[:, i, j]) and apart (x[i, :, j]; moved first)
case("index2", lambda x, i, j: x[i, j], r(5, 6, 3), torch.tensor([0, 4, -1]), torch.tensor([5, -6, 2]))
case("index2_bcast", lambda x, i, j: x[i, j], r(5, 6), torch.tensor([[0], [3]]), torch.tensor([1, 2, -1]))
case("index2_inner", lambda x, i, j: x[:, i, j], r(2, 5, 6, 3), torch.tensor([1, 2]), torch.tensor([0, 5]))
case("index2_apart", lambda x, i, j: x[i, :, j], r(4, 3, 5), torch.tensor([1, 3]), torch.tensor([0, -1]))
case("index_put2", lambda x, i, j, v: torch.index_put(x, (i, j), v), r(5, 6, 3), torch.tensor([0, 4, -1]), torch.tensor([5, -6, 2]), r(3, 3))
case("index_put2_bcast", lambda x, i, j, v: torch.index_put(x, (i, j), v), r(5, 6), torch.tensor([[0], [3]]), torch.tensor([1, 2, -1]), r(3))
case("index_put2_acc", lambda x, i, j, v: torch.index_put(x, (i, j), v, accumulate=True), r(4, 5), torch.tensor([1, 1, 3, 1]), torch.tensor([2, 2, 0, 4]), r(4))


def setitem(x, key, v, acc=False):
    y = x.clone()
    if acc:
        y[key] += v
    else:
        y[key] = v
    return y


case("index_put2_inner", lambda x, i, j, v: setitem(x, (slice(None), i, j), v), r(2, 5, 6), torch.tensor([1, 2]), torch.tensor([0, 5]), r(2, 2))
case("index_put2_apart", lambda x, i, j, v: setitem(x, (i, slice(None), j), v), r(4, 3, 5), torch.tensor([1, 3]), torch.tensor([0, -1]), r(2, 3))
case("index_put2_apart_acc", lambda x, i, j, v: setitem(x, (i, slice(None), j), v, acc=True), r(4, 3, 5), torch.tensor([1, 3]), torch.tensor([0, -1]), r(3))
case("index_put_mask", lambda x, m: torch.index_put(x, (m,), torch.tensor(2.5)), r(4, 5), torch.rand(4, 5, generator=g) > 0.5)
case("index_put_mask_row_acc", lambda x, m, v: torch.index_put(x, (m,), v, accumulate=True), r(4, 5), torch.tensor([True, False, True, True]), r(5))
case("setitem2", lambda x, i, j: x.clone().index_put_((i, j), torch.tensor(-1.0)), r(3, 4), torch.tensor([0, 2]), torch.tensor([3, 1]))


def masked_map(x, m):
    """XmodOutput's language adapters: y = zeros; y[m] = f(x[m]), one row per selected element."""
    y = torch.zeros_like(x)
    y[m] = torch.tanh(x[m]) * 3 + 1
    return y + x


# boolean masks that are constants (computed in the method from no input): x[mask] indexes the
# true elements' positions, so its size, which torch leaves unknown, is known at export
case("index_constant_mask", lambda x: x[torch.arange(5) % 2 == 0] * 2, r(5, 3))
case("index_constant_mask_2d", lambda x: x[(torch.arange(12).view(3, 4) % 3) == 1] + 1, r(3, 4, 2))
case("index_constant_mask_inner", lambda x: x[:, torch.tensor([True, False, True])] * 3, r(2, 3, 2))
case("index_put_constant_mask_rows", lambda x: masked_map(x, torch.ones(x.shape[0]) * 2 == 2), r(1, 4, 6))
case("index_put_constant_mask_some", lambda x: masked_map(x, torch.arange(6) < 4), r(6, 2))
case("index_put_constant_mask_none", lambda x: masked_map(x, torch.arange(6) > 9), r(6, 2))


# scatter: any dim, src larger than the index (its leading corner is read), a value,
# int and bool dtypes, negative dims; moshi's ring-cache form (one row index expanded over the other
# dims, scatter_ on a view) becomes index_put
for shape, dim, ishape in [((5, 4), 0, (3, 4)), ((5, 4), 1, (5, 2)), ((3, 4, 6), 2, (2, 3, 3)), ((3, 4, 6), -2, (3, 2, 6)), ((7,), 0, (4,))]:
    n = shape[dim]
    perm = torch.stack([torch.randperm(n, generator=g)[:ishape[dim if dim >= 0 else dim + len(shape)]] for _ in range(math.prod(ishape) // ishape[dim])])
    idx = perm.reshape(*[s for d, s in enumerate(ishape) if d != (dim % len(shape))], -1).movedim(-1, dim % len(shape)).contiguous()
    case("scatter", lambda x, i, s, d=dim: torch.scatter(x, d, i, s), r(*shape), idx, r(*ishape))
    case("scatter_value", lambda x, i, d=dim: x.scatter(d, i, -2.5), r(*shape), idx)
    case("scatter_int", lambda x, i, s, d=dim: x.clone().scatter_(d, i, s), ints(*shape), idx, ints(*ishape))
case("scatter_big_src", lambda x, i, s: torch.scatter(x, 1, i, s), r(3, 5), torch.tensor([[4, 0], [1, 2], [3, 3]]), r(4, 6))
case("scatter_bool", lambda x, i: (x > 0).scatter(1, i, True), r(3, 5), torch.tensor([[4], [1], [0]]))
case("scatter_ring_rows", lambda c, i, k: c.clone()[0].scatter_(2, i.view(1, 1, -1, 1).expand(-1, 3, -1, 4), k) * 1,
     r(2, 1, 3, 6, 4), torch.tensor([5, 0]), r(1, 3, 2, 4))
SPECIAL = torch.tensor([0.0, -0.0, 1.5, float("nan"), float("inf"), -float("inf"), 3e38, -1e-45, float("-nan")])
case("isnan", torch.isnan, SPECIAL)
case("isinf", torch.isinf, SPECIAL)
case("isfinite", torch.isfinite, SPECIAL)
case("isnan_2d", lambda x: torch.isnan(x.log()) | torch.isinf(1 / x), r(3, 17))
case("isfinite_int", lambda x: torch.isfinite(x) & ~torch.isnan(x) & ~torch.isinf(x), ints(2, 5))
# torch.empty: scratch that must be written before it is read (an update's base starts at zeros)
case("empty_written", lambda a, b: (lambda e: (e.__setitem__(slice(0, 2), a), e.__setitem__(slice(2, 5), b), e)[-1])(torch.empty(5, 3)) + 1,
     r(2, 3), r(3, 3))
case("new_empty_scatter", lambda x, i, s: x.new_empty(x.shape).copy_(x).scatter_(1, i, s), r(3, 4), torch.tensor([[1], [3], [0]]), r(3, 1))
case("empty_like_index_copy", lambda x, i: torch.empty_like(x).index_copy_(0, i, x), r(3, 4), torch.tensor([2, 0, 1]))

# OpInfo samples that once failed: integer matmuls (exact, wrapping), 0-d softmax and
# index_select, mean and all over every dim, batch norm with statistics given at run time, a query
# whose batch dims broadcast against the keys'
case("mm_int", torch.mm, ints(3, 4), ints(4, 5))
case("matmul_int_bcast", torch.matmul, ints(2, 3, 4), ints(4, 2))
case("addmm_int", lambda c, a, b: torch.addmm(c, a, b, beta=2, alpha=3), ints(5), ints(3, 4), ints(4, 5))
case("linear_i32", lambda x, w: F.linear(x, w), ints(3, 4).int(), ints(2, 4).int())
case("softmax_0d", lambda x: torch.softmax(x, 0) + torch.log_softmax(x, -1), r())
case("index_select_0d", lambda x, i: x.index_select(0, i) * 2, r(), torch.tensor([0]))
case("mean_all", lambda x: x.mean(), r(3, 5))
case("all_dims", lambda x: torch.stack([(x > -2).all(), (x > 1).any()]), r(3, 5))
case("batch_norm_stats_inputs", lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, eps=1e-3), r(2, 4, 5), r(4), pos(4), r(4), r(4))
case("sdpa_q_bcast", lambda q_, k_, v_: F.scaled_dot_product_attention(q_, k_, v_), r(4, 3, 8), r(2, 4, 6, 8), r(2, 4, 6, 8))
# float64 made inside a method is computed in float32; float64 constants are stored as float32
case("full_float64", lambda x: (x + torch.full((3, 40), 0.25, dtype=torch.float64)).float(), r(3, 40))
case("double_math", lambda x: (x.double() * 3 + 1).float(), r(4, 5))

# int32: arithmetic wraps like PyTorch's, division and remainder exact, index tensors may be int32
I32 = torch.tensor([2**31 - 1, -(2**31), 7, -7, 0, 123456789, -1, 2**30 + 5], dtype=torch.int32)
I32B = torch.tensor([2, 3, -5, 2**16 + 1, -1, 7, 2**31 - 1, -(2**31)], dtype=torch.int32)
for name, fn in [("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("maximum", torch.maximum), ("minimum", torch.minimum),
                 ("floordiv", lambda a, b: torch.div(a, b, rounding_mode="floor")), ("truncdiv", lambda a, b: torch.div(a, b, rounding_mode="trunc")),
                 ("floor_divide", torch.floor_divide), ("remainder", torch.remainder), ("lt", torch.lt), ("eq", torch.eq), ("ge", torch.ge),
                 ("where", lambda a, b: torch.where(a > b, a, b)), ("truediv", torch.div)]:
    case(f"{name}_i32", fn, I32, I32B)
    case(f"{name}_i32_bcast", fn, I32.reshape(2, 4), I32B[1:2].clone())
case("pow_i32", torch.pow, torch.tensor([2, 3, -3, 7, 10], dtype=torch.int32), torch.tensor([31, 20, 5, 11, 9], dtype=torch.int32))
case("unary_i32", lambda x: torch.stack([-x, x.abs(), torch.relu(x), x * 2 + 1, x // 3, x % 4]), I32)
case("cast_i32", lambda x: torch.stack([x.float(), (x.float() * 0.7).int().float(), x.long().float()]), I32[2:].clone())
case("cast_to_i32", lambda x, y: (x * 100).int() + y.int(), r(8), torch.tensor([2**40 + 5, -(2**33) - 1, 3, -3, 0, 1, 2, 2**31], dtype=torch.int64))
case("sum_i32", lambda x: x.sum(0), ints(5, 3).int())
case("amax_i32", lambda x: x.amax(1) - x.amin(1), ints(5, 3).int())
case("argmax_i32", lambda x: x.argmax(1), ints(5, 7).int())
case("cumsum_i32", lambda x: torch.cumsum(x, 0, dtype=torch.int32), I32)
case("flip", lambda x: x.flip(0, 2) * 2, r(3, 4, 5))
case("flip_int", lambda x: torch.flip(x, (-1,)), ints(2, 7))
# Longformer's / LED's overlapping chunks: as_strided over a contiguous tensor, and over a transposed one
# (its strides count the storage as the transpose lays it out)
case("as_strided_chunks", lambda x: x.as_strided((3, 4, 4), (8, 4, 1)) + 1, r(4, 8))
case("as_strided_offset", lambda x: x.as_strided((2, 3), (1, 5), 2) * 3, r(3, 5))
case("as_strided_transposed", lambda x: x.transpose(0, 1).as_strided((3, 2, 2), (2, 1, 4)) * 1.5, r(2, 6))
case("index_select_i32", lambda x, i: x.index_select(1, i), r(3, 6, 2), torch.tensor([5, 0, 4, 2], dtype=torch.int32))
case("gather_i32", lambda x, i: x.gather(1, i), r(4, 6), ints(4, 3, lo=0, hi=6).int())
case("embedding_i32", lambda i, w: F.embedding(i, w), ints(2, 5, lo=0, hi=10).int(), r(10, 7))
case("index_put_i32", lambda x, i, v: x.index_put((i,), v, accumulate=True), ints(6, 2).int(), torch.tensor([4, 1, 4], dtype=torch.int32), ints(3, 2).int())
case("roll", lambda x: torch.roll(x, 2, -1), r(3, 5))
case("roll_dims", lambda x: torch.roll(x, (-1, 3), (0, 1)), r(4, 6))
case("fmod_scalar", lambda x: torch.fmod(x, -1.5), r(3, 7) * 4)
case("full_i32", lambda x: x + torch.full((3, 70), 5, dtype=torch.int32), ints(3, 70).int())
case("cat_i32", lambda a, b: torch.cat([a, b.permute(1, 0)], 0)[1::2], ints(3, 4).int(), ints(4, 5).int())
# A streaming step of a causal conv (Mimi's SEANet): at most 4 output positions, the dot-product
# kernel over rows of w (1 to 4 positions, every tail of its 8/4/2-row tiles, K % 4 tails, strides
# up to 8, dilation, groups, a fused relu), and transposed convs on 1 to 4 input positions with
# strides 4 to 8 (and Mimi's depthwise upsampling); 2- and 3-row linear layers (25 Hz steps)
for cin, cout, k, stride, dil, groups, length in [(512, 19, 4, 2, 1, 1, 4), (24, 13, 16, 8, 1, 1, 24), (9, 6, 3, 1, 2, 1, 7),
                                                   (8, 12, 3, 1, 1, 2, 5), (5, 9, 7, 1, 1, 1, 8), (33, 8, 1, 1, 1, 1, 1)]:
    case("conv1d_stream", lambda x, w, b, s=stride, d=dil, gr=groups: F.conv1d(x, w, b, s, 0, d, gr),
         r(1, cin, length), r(cout, cin // groups, k), r(cout), rtol=1e-5, atol=1e-4)  # K up to 2048: float32 sums' order
    # (outputs ~45 in size: one ulp is 4e-6, and a sum of 2048 terms in another order moves by ~sqrt(K) ulps)
case("conv1d_stream_relu", lambda x, w: torch.relu(F.conv1d(x, w, stride=4)), r(1, 20, 12), r(10, 20, 8))
case("conv1d_stream_1x1", lambda x, w, b: F.conv1d(x, w, b), r(1, 70, 1), r(21, 70, 1), r(21))
for cin, cout, k, stride, groups, length in [(32, 12, 16, 8, 1, 2), (10, 6, 12, 6, 1, 1), (7, 5, 8, 4, 1, 3), (8, 8, 4, 2, 8, 1),
                                            (6, 4, 10, 5, 2, 4)]:
    case("conv_transpose1d_stream", lambda x, w, b, s=stride, gr=groups: F.conv_transpose1d(x, w, b, s, groups=gr),
         r(1, cin, length), r(cin, cout // groups, k), r(cout))
case("conv1d_elu", lambda x, w, b: F.elu(F.conv1d(x, w, b, padding=1)), r(1, 6, 300), r(8, 6, 3), r(8))  # im2col + GEMM
case("conv1d_elu_direct", lambda x, w: F.elu(F.conv1d(x, w, groups=4)), r(1, 4, 1031) * 3, r(4, 1, 3))  # depthwise, blocks of 256
case("conv1d_elu_stream", lambda x, w: F.elu(F.conv1d(x, w, stride=2)), r(1, 16, 4), r(12, 16, 4))  # 1 position: dot kernel
# 1-d k3 convs without padding, stride 1, 32+ input channels, constant weights (Mimi's SEANet residual units):
# Winograd F(2,3) through the packed GEMM with U = G w made at load (conv_wino.c): odd and even lengths, tile
# tails, channels not a multiple of 4, no bias, a batch of 2, a fused ELU, a long row in several chunks of
# tiles (O > C: [32, 100, 3000]); and weights passed as an input (not transformed: the direct path). From 64
# outputs F(4,3), whose transforms scale by up to 8: within 1e-4 at outputs of about 10 (randn weights, C 32-64)
WINO_ATOL = 1e-4
for cin, cout, length, bias in [(32, 16, 11, True), (37, 19, 40, True), (33, 8, 7, False), (64, 32, 130, True), (36, 5, 2001, True), (32, 100, 3002, True)]:
    case("conv1d_wino", lambda x, m: m(x), r(1, cin, length), with_random_params(nn.Conv1d(cin, cout, 3, bias=bias)).eval(), rtol=1e-5, atol=WINO_ATOL)
case("conv1d_wino_batch", lambda x, m: m(x), r(2, 40, 23), with_random_params(nn.Conv1d(40, 12, 3)).eval(), rtol=1e-5, atol=WINO_ATOL)
case("conv1d_wino_elu", lambda x, m: F.elu(m(x)), r(1, 48, 99), with_random_params(nn.Conv1d(48, 24, 3)).eval(), rtol=1e-5, atol=WINO_ATOL)
def _with_inf(t, at):
    t[at] = float("inf")
    return t


# an infinity in x: torch's ±inf at the 3 outputs per channel that read it, finite elsewhere (the transforms
# would spread inf - inf over its tiles, so such an x takes the direct path)
case("conv1d_wino_inf", lambda x, m: m(x), _with_inf(r(1, 36, 70), (0, 5, 33)), with_random_params(nn.Conv1d(36, 8, 3)).eval(), rtol=1e-5, atol=WINO_ATOL)
# convs and transposed convs with kernel 2s and stride s, 32+ channels once split by phase, constant weights
# (Mimi's SEANet down- and upsampling): Winograd F(3,2) or F(2,2) over x split by phase (conv_wino.c), where
# its GEMMs cover at most 0.9 of the direct GEMM's panels in two or more panels of tiles (F(2,2): the
# second and third shapes, the transposed batch): a trailing sample past the last window, odd tile tails,
# no bias, a batch of 2, a fused ELU, a transposed conv with 97 outputs a phase, an infinity in x
for cin, cout, s, length, bias in [(16, 12, 4, 244, True), (12, 8, 3, 99, True), (64, 20, 2, 93, False), (64, 128, 4, 964, True)]:
    case("conv1d_wino_strided", lambda x, m: m(x), r(1, cin, length), with_random_params(nn.Conv1d(cin, cout, 2 * s, stride=s, bias=bias)).eval(),
         rtol=1e-5, atol=WINO_ATOL)
case("conv1d_wino_strided_batch_elu", lambda x, m: F.elu(m(x)), r(2, 20, 3 * 61 + 2), with_random_params(nn.Conv1d(20, 24, 6, stride=3)).eval(),
     rtol=1e-5, atol=WINO_ATOL)
for cin, cout, s, length, bias in [(40, 6, 4, 60, True), (33, 5, 5, 96, True), (32, 16, 2, 200, False), (128, 64, 4, 120, True)]:
    case("conv_transpose1d_wino", lambda x, m: m(x), r(1, cin, length),
         with_random_params(nn.ConvTranspose1d(cin, cout, 2 * s, stride=s, bias=bias)).eval(), rtol=1e-5, atol=WINO_ATOL)
case("conv_transpose1d_wino_batch", lambda x, m: m(x), r(2, 36, 30), with_random_params(nn.ConvTranspose1d(36, 10, 6, stride=3)).eval(),
     rtol=1e-5, atol=WINO_ATOL)
case("conv1d_wino_strided_inf", lambda x, m: m(x), _with_inf(r(1, 16, 244), (0, 3, 77)),
     with_random_params(nn.Conv1d(16, 8, 8, stride=4)).eval(), rtol=1e-5, atol=WINO_ATOL)
case("conv_transpose1d_wino_inf", lambda x, m: m(x), _with_inf(r(1, 40, 60), (0, 7, 21)),
     with_random_params(nn.ConvTranspose1d(40, 6, 8, stride=4)).eval(), rtol=1e-5, atol=WINO_ATOL)
case("conv1d_k3_input_weights", lambda x, w, b: F.conv1d(x, w, b), r(1, 37, 40), r(19, 37, 3), r(19), rtol=1e-5, atol=2e-5)
case("linear_2rows", lambda x, m: m(x), r(1, 2, 70), nn.Linear(70, 45))
case("linear_3rows", lambda x, m: m(x), r(3, 64), nn.Linear(64, 100, bias=False))
# where with one condition per row (moshi's streaming state: where(exec_mask, new, old)): the whole row from
# either side, or a broadcast value; then int64 and bool values, one condition per element and per row
case("where_row_cond", lambda c, a, b: torch.where(c > 0, a, b), torch.tensor([[[1.0]], [[-1.0]]]), r(2, 5, 9), r(2, 5, 9))
case("where_row_cond_bcast", lambda c, a, b: torch.where(c > 0, a, b), torch.tensor([[[-1.0]], [[1.0]]]), r(2, 5, 9), r(1, 1, 9))
case("where_scalar_value", lambda c, a: torch.where(c > 0, a, 0.5), torch.tensor([[1.0], [-1.0], [1.0]]), r(3, 7))
case("where_i64", lambda c, a, b: torch.where(c > 0, a, b), r(3, 1), torch.arange(12).reshape(3, 4) - 5, torch.arange(4) * 7)
case("where_bool", lambda c, a, b: torch.where(c > 0, a > 0, b > 0), r(4, 6), r(4, 6), r(1, 6))

# torch.cond: a branch in the program; the weight of the matmul in a branch is laid out as the method's own
_gc = torch.Generator().manual_seed(45)  # its own generator: the other cases' inputs stay what they were
_COND_W = torch.randn(6, 4, generator=_gc)


def _cond(x):
    def linear(x):
        return torch.tanh(x @ _COND_W), x.amax(-1)

    def other(x):
        return x[:, :4] * 2, torch.cond(x[0, 0] > 0, lambda y: y.sum(-1), lambda y: y.mean(-1), (x,))

    a, b = torch.cond(x.sum() > 0, linear, other, (x,))  # two outputs, one result (the recorded cases have one)
    return a + b[:, None]


case("cond_then", _cond, torch.randn(3, 6, generator=_gc).abs())
case("cond_else", _cond, -torch.randn(3, 6, generator=_gc).abs())
case("cond_else_nested", _cond, torch.cat([torch.ones(1, 6), -torch.randn(2, 6, generator=_gc).abs() * 9], 0))


class _Steps(nn.Module):
    """A Python int the method counts and branches on: versions that start with `when_in` (its run of values)."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.n += 1
        return x * 2 if self.n > 2 else x + 1


class _First(nn.Module):
    """A Python bool the method branches on and clears: versions that start with `when` (its value)."""

    def __init__(self):
        super().__init__()
        self.first = True

    def forward(self, x):
        y = x - 1 if self.first else x * 3
        self.first = False
        return y


case("when_in_steps", lambda x, m: m(x), r(3, 4), _Steps())
case("when_first", lambda x, m: m(x), r(3, 4), _First())


class Fn(nn.Module):
    def __init__(self, fn, modules):
        super().__init__()
        self.fn = fn
        self.mods = nn.ModuleList(modules)

    def forward(self, *xs):
        return self.fn(*xs, *self.mods)


def _record(request, program: bytes, inputs, want, rtol, atol):
    """With TANDEM_OPS_FIXTURES set, keeps the case for the wasm run (tests/js/ops.test.js)."""
    out = os.environ.get("TANDEM_OPS_FIXTURES")
    if not out:
        return
    from fixtures.make import tensor_json
    Path(out).mkdir(parents=True, exist_ok=True)
    name = request.node.callspec.id
    (Path(out) / f"{name}.tandem").write_bytes(program)
    (Path(out) / f"{name}.json").write_text(json.dumps({"inputs": [tensor_json(x) for x in inputs], "output": tensor_json(want),
                                                        "rtol": rtol, "atol": atol}))


def export_case(fn, inputs):
    """A case's module (its float buffers, e.g. batch norm's statistics, drawn in [0.5, 1.5]), its
    tensor inputs and its exported program (scripts/fixture_hashes.py exports the cases with it too)."""
    tensors = tuple(x for x in inputs if isinstance(x, torch.Tensor))
    modules = [x for x in inputs if isinstance(x, nn.Module)]
    for m in modules:
        with torch.no_grad():
            for b in m.buffers():
                if b.dtype.is_floating_point:
                    b.uniform_(0.5, 1.5)
    module = Fn(fn, modules)
    return module, tensors, tandem.export(module, {"forward": tensors}).to_bytes()


@pytest.mark.parametrize("fn,inputs,rtol,atol", CASES)
def test_op_matches_eager(request, fn, inputs, rtol, atol):
    module, tensors, program = export_case(fn, inputs)
    got = tandem.load(program).forward(*tensors)
    with torch.no_grad():
        want = module(*tensors)
    kw = {} if rtol is None else {"rtol": rtol, "atol": atol}
    torch.testing.assert_close(got, want, **kw)
    _record(request, program, tensors, want, rtol, atol)


def test_repeat_kv_is_read_around_not_copied():
    """Grouped-query attention written with repeat_kv exports as one attention op over the KV
    heads: no expand materializes the repeated keys and values."""
    q, k, v = r(1, 6, 1, 8), r(1, 2, 32, 8), r(1, 2, 32, 8)
    module = Fn(lambda q_, k_, v_: F.scaled_dot_product_attention(q_, _repeat_kv(k_, 3), _repeat_kv(v_, 3)), [])
    program = tandem.export(module, {"forward": (q, k, v)})
    assert [op.name for op in program.method("forward").ops] == ["attention"]
    torch.testing.assert_close(tandem.load(program.to_bytes()).forward(q, k, v), module(q, k, v))


# Attention written out: [repeat_kv ->] matmul(q, kᵀ) [· scale] [+ mask] -> softmax -> matmul(., v),
# as transformers' eager_attention_forward and hand-written models do. Fused into one attention op
# over the KV heads when the scores and probabilities have no other reader; against eager always.
def _eager(q, k, v, mask=None, groups=1, scale_on="scores", transpose="t23"):
    k, v = _repeat_kv(k, groups), _repeat_kv(v, groups)
    kt = {"t23": lambda: k.transpose(2, 3), "t-1-2": lambda: k.transpose(-1, -2), "mT": lambda: k.mT,
          "permute": lambda: k.permute(0, 1, 3, 2)}[transpose]()
    c = 1 / math.sqrt(q.shape[-1])
    if scale_on == "q":
        s = (q * c) @ kt
    elif scale_on == "div":
        s = torch.matmul(q, kt) / math.sqrt(q.shape[-1])
    elif scale_on == "none":
        s = torch.matmul(q, kt)
    else:
        s = torch.matmul(q, kt) * c
    if mask is not None:
        s = s + mask
    return torch.matmul(F.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype), v)


def _causal_mask(tq, tk, fill=float("-inf")):
    """[1, 1, tq, tk]: row i sees keys up to tk - tq + i (a decode or prefill over a cache)."""
    i, j = torch.arange(tq)[:, None], torch.arange(tk)[None, :]
    return torch.where(j <= tk - tq + i, 0.0, fill)[None, None]


EAGER = []
for groups, tq, tk, d in [(3, 1, 32, 8), (3, 5, 13, 7), (2, 4, 9, 64), (1, 3, 6, 5), (4, 1, 1, 3)]:
    for form in [dict(), dict(scale_on="q"), dict(scale_on="div", transpose="t-1-2"), dict(scale_on="none", transpose="mT"),
                 dict(transpose="permute")]:
        for masked in (False, True):
            EAGER.append(pytest.param(groups, tq, tk, d, form, masked,
                                      id=f"g{groups}_tq{tq}_tk{tk}_d{d}_{'_'.join(form.values()) or 'default'}_{'mask' if masked else 'nomask'}"))


@pytest.mark.parametrize("groups,tq,tk,d,form,masked", EAGER)
def test_eager_attention_is_one_attention_op_over_the_kv_heads(request, groups, tq, tk, d, form, masked):
    hkv = 2
    q, k, v = r(1, hkv * groups, tq, d), r(1, hkv, tk, d), r(1, hkv, tk, d)
    mask = _causal_mask(tq, tk, fill=torch.finfo(torch.float32).min if tq > 1 else float("-inf"))
    inputs = (q, k, v, mask) if masked else (q, k, v)
    module = Fn(lambda *xs: _eager(*xs[:3], mask=xs[3] if masked else None, groups=groups, **form), [])
    program = tandem.export(module, {"forward": inputs})
    ops = program.method("forward").ops
    assert [op.name for op in ops] == ["attention"]
    assert ops[0].ins[1].shape == (1, hkv, tk, d) and ops[0].outs[1].numel == groups * tk  # k read over its own heads
    with torch.no_grad():
        want = module(*inputs)
    torch.testing.assert_close(tandem.load(program.to_bytes()).forward(*inputs), want)
    _record(request, program.to_bytes(), inputs, want, None, None)  # and in wasm (tests/js/ops.test.js)


def test_eager_attention_with_its_weights_read_stays_as_written():
    """Where the probabilities or the scores are also returned, nothing is fused, and values match."""
    q, k, v, mask = r(1, 6, 3, 8), r(1, 2, 10, 8), r(1, 2, 10, 8), _causal_mask(3, 10)

    def weights_too(q_, k_, v_, m_):
        kr, vr = _repeat_kv(k_, 3), _repeat_kv(v_, 3)
        s = q_ @ kr.transpose(2, 3) * 0.3 + m_
        p = F.softmax(s, dim=-1)
        return p @ vr, p, s.amax(-1)

    module = Fn(weights_too, [])
    program = tandem.export(module, {"forward": (q, k, v, mask)})
    assert "attention" not in [op.name for op in program.method("forward").ops]
    got = tandem.load(program.to_bytes()).forward(q, k, v, mask)
    for a, b in zip(got, module(q, k, v, mask)):
        torch.testing.assert_close(a, b)


def test_eager_attention_with_the_mask_scaled_too_is_not_fused():
    """(q kᵀ + mask) · c scales the mask as well: the attention op adds the mask after the scale,
    so this order is left as written (and still matches)."""
    q, k, v, mask = r(1, 4, 2, 8), r(1, 4, 6, 8), r(1, 4, 6, 8), r(1, 1, 2, 6)
    module = Fn(lambda q_, k_, v_, m_: F.softmax((q_ @ k_.transpose(-1, -2) + m_) * 0.5, dim=-1) @ v_, [])
    program = tandem.export(module, {"forward": (q, k, v, mask)})
    assert "attention" not in [op.name for op in program.method("forward").ops]
    torch.testing.assert_close(tandem.load(program.to_bytes()).forward(q, k, v, mask), module(q, k, v, mask))


# ---- quantized weights (tandem.export(quantize=...), docs/ops.md "Quantized weights") ------------
# Against a reference quantization computed here with the same scheme (the module run in float64
# with each quantized parameter replaced by its dequantized value), not against float32 eager: the
# runtime must match it to float32 accuracy. Linear layers over N % 8, K % 32 and K < 32 and one or
# several rows (the GEMV and the GEMM paths), an embedding with odd K, a tied table, a skipped layer.

def ref_dequantize(w: torch.Tensor, mode: str, group: int = 32) -> torch.Tensor:
    """w [N, K] as the module holds it (a Linear's weight, an embedding table) -> q · scale in
    float64: int8 per row (output channel), int4 per row and group of `group` along K, symmetric
    (docs/ops.md, "Quantized weights")."""
    w = w.detach().float()
    N, K = w.shape
    G = K if mode == "int8" else group
    NG = -(-K // G)
    wg = torch.cat([w, torch.zeros(N, NG * G - K)], 1).reshape(N, NG, G)
    amax = wg.abs().amax(2, keepdim=True)

    def codes(d, lo, hi):
        s = amax / d  # float32, as stored
        return torch.where(s > 0, wg / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(wg)).round().clamp(lo, hi), s

    if mode == "int8":
        q, s = codes(127, -127, 127)
    else:
        # each group's scale: amax / d for the d in 7, 7.1, ..., 8.5 with the least squared error
        # (float32 sums, the first d on ties), codes in [-8, 7]
        cands = [codes(7.0 + 0.1 * i, -8, 7) for i in range(16)]
        err = torch.stack([((q * s - wg) ** 2).sum(2, keepdim=True) for q, s in cands])
        pick = err.argmin(0)  # [N, NG, 1]
        q = torch.stack([q for q, _ in cands]).gather(0, pick.expand(N, NG, G)[None])[0]
        s = torch.stack([s for _, s in cands]).gather(0, pick[None])[0]
    return (q.double() * s.double()).reshape(N, NG * G)[:, :K]


def ref_quantize_activations(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    """What matmul_q8 (block 32) and matmul_q4 (block = its weight group) do to an activation row
    before their integer dot products (docs/ops.md, "Integer dot products"): x [..., K] in blocks
    along K, scale = max|x| / 127 in float32, q = round-half-even(x / scale) in [-127, 127] (0 where
    the scale is 0) -> q · scale in float64."""
    x = x.detach().float()
    K, NB = x.shape[-1], -(-x.shape[-1] // block)
    xb = torch.cat([x, x.new_zeros(*x.shape[:-1], NB * block - K)], -1).reshape(*x.shape[:-1], NB, block)
    s = xb.abs().amax(-1, keepdim=True) / 127
    q = torch.where(s > 0, xb / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(xb)).round().clamp(-127, 127)
    return (q.double() * s.double()).reshape(*x.shape[:-1], NB * block)[..., :K]


class _RoundsInputs(nn.Parameter):
    """A Linear's weight whose every F.linear rounds the rows `self.rows(x)` selects of its input
    (ref_quantize_activations, blocks of `self.block`): in the Linear's forward and wherever a model
    passes the weight to F.linear itself (moshi's gating does), as the runtime's integer dot products
    see every product with a quantized weight."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is F.linear and len(args) > 1 and isinstance(args[1], _RoundsInputs):
            x, w = args[0], args[1]
            sel = w.rows(x).unsqueeze(-1)
            args = (torch.where(sel, ref_quantize_activations(x, w.block).to(x.dtype), x),) + tuple(args[1:])
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


def quantize_linear_inputs(model: nn.Module, rows, skip=(), block: int = 32) -> list:
    """Makes model's Linears (except those whose weight name contains a `skip` substring) pass the
    rows `rows(x)` selects ([..., K] -> bool [...]) of their inputs through ref_quantize_activations
    (blocks of `block`), as the runtime does for the rows it runs on integer dot products: each weight
    becomes a _RoundsInputs (in every module that holds it: ties are kept). Returns those Linears."""
    linears = [(name, mod) for name, mod in model.named_modules()
               if isinstance(mod, nn.Linear) and not any(s in f"{name}.weight" for s in skip)]
    wrapped = {}
    for _, mod in linears:
        w = mod.weight
        if id(w) not in wrapped:
            wrapped[id(w)] = _RoundsInputs(w.detach(), requires_grad=w.requires_grad)
            wrapped[id(w)].rows, wrapped[id(w)].block = rows, block
    for mod in model.modules():
        for key, p in list(mod._parameters.items()):
            if p is not None and id(p) in wrapped:
                mod._parameters[key] = wrapped[id(p)]
    return [mod for _, mod in linears]


def dot_rows(x: torch.Tensor) -> torch.Tensor:
    """Which rows of x [..., K] matmul_q8 runs on integer dot products (docs/ops.md, "Integer dot
    products"): all of them (in blocks of up to 8 rows whose int8 copies fit 8192 int16) when K
    rounded up to even is at most 8192, else none."""
    K = x.shape[-1]
    return torch.full(x.shape[:-1], K + K % 2 <= 8192, dtype=torch.bool)


def q4_dot_rows(group: int):
    """The same for matmul_q4 with weight groups of `group` ("Integer dot products for int4"): every
    row when K <= 8192 and the group is at least 16 and a multiple of 8, else none."""
    return lambda x: torch.full(x.shape[:-1], x.shape[-1] <= 8192 and group >= 16 and group % 8 == 0, dtype=torch.bool)


def ref_quantized_output(module: nn.Module, inputs, mode: str, group: int = 32, skip=()):
    """module's output in float64 with its 2-d parameters dequantized (except names containing a
    `skip` substring), as float32. A Linear's input rows get quantized as the runtime does
    (ref_quantize_activations) where matmul_q8 / matmul_q4 run them on integer dot products (dot_rows,
    q4_dot_rows)."""
    import copy
    m = copy.deepcopy(module).double()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() == 2 and not any(s in name for s in skip):
                p.copy_(ref_dequantize(p.float(), mode, group))
        if mode == "int8":
            quantize_linear_inputs(m, dot_rows, skip)
        else:
            quantize_linear_inputs(m, q4_dot_rows(group), skip, group)
        out = m(*[x.double() if x.is_floating_point() else x for x in inputs])
    return out.float()


class Tied(nn.Module):
    def __init__(self, n, k):
        super().__init__()
        self.emb = nn.Embedding(n, k)
        self.head = nn.Linear(k, n, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, i):
        return self.head(torch.tanh(self.emb(i)))


QCASES = []
for mode in ("int8", "int4"):
    for K, N, rows in [(45, 29, 1), (45, 29, 3), (7, 9, 5), (32, 8, 1), (33, 17, 4), (64, 40, 1), (100, 65, 2), (31, 33, 1), (40, 24, 12), (8195, 5, 3)]:
        # 12 rows: two blocks of the integer rows kernel (WebGPU: int4 on the dequantizing tiles); K = 8195: past
        # the stack buffer, the float tiles (WebGPU: dequantizing tiles)
        QCASES.append(pytest.param(nn.Linear(K, N), (r(rows, K),), mode, 32, (), id=f"{mode}_linear_{K}x{N}_m{rows}"))
    QCASES.append(pytest.param(nn.Embedding(37, 45), (ints(2, 5, lo=0, hi=37),), mode, 32, (), id=f"{mode}_embedding"))
    QCASES.append(pytest.param(Tied(50, 33), (ints(1, 6, lo=0, hi=50),), mode, 32, (), id=f"{mode}_tied"))
    QCASES.append(pytest.param(nn.Sequential(nn.Linear(20, 24), nn.GELU(), nn.Linear(24, 9)), (r(3, 20),), mode, 32, ("2.",),
                               id=f"{mode}_skip_last_layer"))
QCASES.append(pytest.param(nn.Linear(40, 19), (r(2, 40),), "int4", 8, (), id="int4_group8_linear"))
QCASES.append(pytest.param(nn.Linear(40, 19), (r(1, 40),), "int4", 2, (), id="int4_group2_gemv"))
QCASES.append(pytest.param(nn.Linear(60, 19), (r(3, 60),), "int4", 20, (), id="int4_group20_float_path"))


@pytest.mark.parametrize("module,inputs,mode,group,skip", QCASES)
def test_quantized_op_matches_reference_quantization(request, module, inputs, mode, group, skip):
    module = module.eval()
    program = tandem.export(module, {"forward": inputs}, quantize=mode, quantize_group=group, quantize_skip=list(skip))
    names = {op.name for op in program.method("forward").ops}
    assert names & {"matmul_q8", "matmul_q4", "embedding_q8", "embedding_q4"}, names
    assert not names & {"matmul_packed", "embedding_packed", "index_select"} or skip, names
    got = tandem.load(program.to_bytes()).forward(*inputs)
    want = ref_quantized_output(module, inputs, mode, group, skip)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    with torch.no_grad():  # and it is a different model from float32: the test can tell them apart
        assert (module(*inputs) - want).abs().max() > 1e-4
    _record(request, program.to_bytes(), inputs, want, 1e-5, 1e-5)


# torch.cdist (p = 2) against a constant codebook, as vector quantizers search it (moshi's Mimi):
# torch decomposes it (more than 25 points) into cat([x·-2, Σx², 1]) @ cat([C, 1, ΣC²])ᵀ, which would
# rebuild and transpose the codebook on every call. It runs as one matmul_packed against C packed
# at export, plus the two norms, and a lookup of C's rows in another method reads the same packed
# constant (stored once).
class _Codebook(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.register_buffer("emb", torch.randn(n, d, generator=g))

    def forward(self, x):
        return torch.cdist(x, self.emb)

    def nearest(self, x):  # moshi's EuclideanCodebook._quantize
        return torch.cdist(x[None], self.emb[None], p=2)[0].argmin(-1)

    def lookup(self, codes):
        return F.embedding(codes, self.emb)


@pytest.mark.parametrize("n,d,rows", [(64, 16, 3), (2048, 256, 1), (37, 5, 2), (30, 8, 30), (40, 8, 100)])  # 100 rows: the ones column is a fill op
def test_cdist_against_a_constant_codebook_is_one_packed_matmul(n, d, rows):
    cb = _Codebook(n, d)
    x = r(rows, d)
    x3 = r(2, rows, d)
    program = tandem.export(None, {"forward": tandem.Method(cb.forward, (x3,)), "nearest": tandem.Method(cb.nearest, (x,)),
                                   "lookup": tandem.Method(cb.lookup, (torch.arange(5),))})
    for name in ("forward", "nearest"):
        ops = [op.name for op in program.method(name).ops]
        assert "matmul_packed" in ops and "cat" not in ops and "permute" not in ops and "matmul" not in ops, ops
    assert [op.name for op in program.method("lookup").ops][-1:] == ["embedding_packed"]
    blob = program.to_bytes()
    assert len(blob) < 1.5 * cb.emb.numel() * 4 + 200_000  # the codebook once (packed), not twice
    m = tandem.load(blob)
    torch.testing.assert_close(m.forward(x3), cb(x3), rtol=1e-5, atol=1e-5)
    xs = cb.emb[torch.randint(0, n, (rows,), generator=g)] + 0.01 * r(rows, d)  # near a centroid: a clear nearest
    want = cb.nearest(xs)
    assert torch.equal(m.nearest(xs), want)
    assert torch.equal(m.nearest(x), cb.nearest(x))
    codes = torch.tensor([0, n - 1, 3, 1, 2])
    torch.testing.assert_close(m.lookup(codes), cb.lookup(codes), rtol=0, atol=0)


def test_cdist_between_two_inputs_stays_general():
    """Points that are not constants: the decomposition as written (cat, matmul), against eager."""
    a, b = r(2, 30, 7), r(2, 40, 7)
    module = Fn(lambda x, y: torch.cdist(x, y), [])
    program = tandem.export(module, {"forward": (a, b)})
    assert "matmul_packed" not in [op.name for op in program.method("forward").ops]
    torch.testing.assert_close(tandem.load(program.to_bytes()).forward(a, b), torch.cdist(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", ["gemm", "direct", "stream"])
def test_conv_then_elu_is_one_conv_with_the_same_floats(form):
    """SEANet's ELU after a conv (lowered as minimum, exp, sub, maximum) is fused into the conv as its
    activation: one op, giving the four ops' result (which a program that also returns the conv's
    output gives, as a separate elu op of those four kernels): the same kernels in the same order, except that the last
    n % 4 values of each block the conv hands over take the scalar expf where the separate exp may
    have used its 4-lane polynomial (within its 5e-7 relative error; exact for the rest)."""
    x, w, kw = {"gemm": (r(1, 6, 300), r(8, 6, 3), {"padding": 1}), "direct": (r(1, 4, 1031) * 3, r(4, 1, 3), {"groups": 4}),
                "stream": (r(1, 16, 4), r(12, 16, 4), {"stride": 2})}[form]
    fused = tandem.export(Fn(lambda a, b: F.elu(F.conv1d(a, b, **kw)), []), {"forward": (x, w)})
    assert [op.name for op in fused.method("forward").ops] == ["conv"]
    plain = tandem.export(Fn(lambda a, b: (lambda y: (F.elu(y), y))(F.conv1d(a, b, **kw)), []), {"forward": (x, w)})
    assert [op.name for op in plain.method("forward").ops] == ["conv", "elu"]  # the ELU then is the elu op (test_elu_fusion.py)
    got, (want, _) = tandem.load(fused.to_bytes()).forward(x, w), tandem.load(plain.to_bytes()).forward(x, w)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
    if form != "stream":  # all but block tails: the same floats (a one-position step's 12 values are
        # handed over in blocks too short for the 4-lane exp: each may be 1 ulp off, as in the docstring)
        assert (got == want).float().mean() > 0.99
    torch.testing.assert_close(got, F.elu(F.conv1d(x, w, **kw)))
