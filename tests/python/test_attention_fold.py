"""Layout permutes folded into attention: a `permute` that only feeds an attention
and keeps the last dim last becomes the attention's perm for that operand, and the attention reads
the permute's input in place by strides (src/kernels/attention.c). Against PyTorch eager natively and
on the wasm backend: time-first K/V (pocket-tts' cache layout), a time-first q, grouped-query
attention, repeat_kv over a permuted cache, and a time-first cache state sliced at an offset bound
from the state; permutes that cannot be folded stay and stay right. (Files whose perms are not
permutations keeping the last dim last are refused at load: test_rejected_files_and_calls.py.)"""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tandem
from tandem.ir import STATE

g = torch.Generator().manual_seed(5)


def r(*shape):
    return torch.randn(shape, generator=g)


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _repeat_kv(x, n):  # transformers' repeat_kv: [B, Hkv, T, D] -> [B, Hkv * n, T, D]
    b, h, t, d = x.shape
    return x[:, :, None].expand(b, h, n, t, d).reshape(b, h * n, t, d)


def _tf(x):  # time-first [B, T, H, D] -> heads-first [B, H, T, D], as pocket-tts' permute(0, 2, 1, 3)
    return x.permute(0, 2, 1, 3)


CASES = {
    # name: (fn, inputs, attention perms expected [q, k, v]; None = identity)
    "kv_time_first": (lambda q, k, v: F.scaled_dot_product_attention(q, _tf(k), _tf(v)), (r(1, 4, 3, 8), r(1, 7, 4, 8), r(1, 7, 4, 6))),
    "qkv_time_first_mask": (
        lambda q, k, v, m: F.scaled_dot_product_attention(_tf(q), _tf(k), _tf(v), attn_mask=m),
        (r(2, 5, 3, 8), r(2, 9, 3, 8), r(2, 9, 3, 8), torch.rand(2, 1, 5, 9, generator=g) > 0.3),
    ),
    "kv_time_first_causal": (
        lambda q, k, v: F.scaled_dot_product_attention(q, _tf(k), _tf(v), is_causal=True),
        (r(1, 2, 6, 5), r(1, 6, 2, 5), r(1, 6, 2, 5)),
    ),
    "gqa_time_first": (
        lambda q, k, v: F.scaled_dot_product_attention(q, _tf(k), _tf(v), enable_gqa=True),
        (r(1, 6, 2, 8), r(1, 11, 2, 8), r(1, 11, 2, 8)),
    ),
    "repeat_kv_time_first": (
        lambda q, k, v: F.scaled_dot_product_attention(q, _repeat_kv(_tf(k), 3), _repeat_kv(_tf(v), 3)),
        (r(1, 6, 1, 4), r(1, 13, 2, 4), r(1, 13, 2, 4)),
    ),
    "y_time_first_out_proj": (  # pocket-tts' and moshi's x.transpose(1, 2).reshape(b, t, h * d) -> out_proj
        lambda q, k, v, w: F.scaled_dot_product_attention(_tf(q), _tf(k), _tf(v)).transpose(1, 2).reshape(1, 5, 12) @ w,
        (r(1, 5, 3, 4), r(1, 9, 3, 4), r(1, 9, 3, 4), r(12, 7)),
    ),
    "y_permuted_gqa_mask": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, _tf(k), _tf(v), attn_mask=m, enable_gqa=True).permute(2, 0, 1, 3),
        (r(2, 4, 3, 8), r(2, 6, 2, 8), r(2, 6, 2, 8), r(2, 1, 3, 6)),
    ),
    "five_d_heads_middle": (  # [B, T, X, H, D] read as [B, X, H, T, D]
        lambda q, k, v: F.scaled_dot_product_attention(q, k.permute(0, 2, 3, 1, 4), v.permute(0, 2, 3, 1, 4)),
        (r(2, 3, 2, 4, 5), r(2, 7, 3, 2, 5), r(2, 7, 3, 2, 5)),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_permute_into_attention_is_folded_and_equals_eager(name, backend):
    fn, inputs = CASES[name]
    module = Fn(fn)
    program = tandem.export(module, {"forward": inputs})
    ops = program.method("forward").ops
    assert "permute" not in [op.name for op in ops], [op.name for op in ops]
    (att,) = [op for op in ops if op.name == "attention"]
    rank = len(inputs[0].shape)
    assert len(att.iattr) == 2 + (4 if name.startswith("y_") else 3) * rank, att.iattr
    got = tandem.load(program.to_bytes()).forward(*inputs)
    with torch.no_grad():
        want = module(*inputs)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_permutes_that_cannot_be_folded_stay_and_equal_eager(backend):
    """A permute that moves the last dim (K given as [B, H, D, T]) or that something else reads too
    (returned) stays a permute; the attention reads the copy."""
    q, kt, k2, v = r(1, 2, 3, 4), r(1, 2, 4, 6), r(1, 6, 2, 4), r(1, 2, 6, 4)

    def fn(q, kt, k2, v):
        kk = _tf(k2)
        return F.scaled_dot_product_attention(q, kt.transpose(-1, -2), v) + F.scaled_dot_product_attention(q, kk, v), kk

    module = Fn(fn)
    program = tandem.export(module, {"forward": (q, kt, k2, v)})
    assert [op.name for op in program.method("forward").ops].count("permute") == 2
    got = tandem.load(program.to_bytes()).forward(q, kt, k2, v)
    with torch.no_grad():
        want = module(q, kt, k2, v)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


class TimeFirstCache(nn.Module):
    """pocket-tts' linear KV cache in its own layout: [2, B, capacity, H, D], written at `offset`,
    read as `cache[:, :, :offset + T]` then permuted heads-first for SDPA (its complete_kv)."""

    def __init__(self, cap=12, heads=2, kv_heads=1, d=8):
        super().__init__()
        self.h, self.hkv, self.d = heads, kv_heads, d
        self.proj = nn.Linear(heads * d, (heads + 2 * kv_heads) * d)
        self.register_buffer("cache", torch.zeros(2, 1, cap, kv_heads, d))
        self.register_buffer("offset", torch.zeros(1, dtype=torch.long))

    def forward(self, x):
        b, t, _ = x.shape
        p = self.proj(x)
        q = p[..., : self.h * self.d].view(b, t, self.h, self.d).transpose(1, 2)
        k, v = torch.unbind(p[..., self.h * self.d :].view(b, t, 2, self.hkv, self.d), dim=2)
        off = int(self.offset.view(-1)[0].item())
        self.cache[0, :, off : off + t] = k
        self.cache[1, :, off : off + t] = v
        valid = self.cache[:, :, : off + t]
        kk, vv = valid[0].permute(0, 2, 1, 3), valid[1].permute(0, 2, 1, 3)
        pos_k = torch.arange(kk.shape[2])
        pos_q = off + torch.arange(t)
        mask = (pos_q[:, None] >= pos_k[None, :])[None, None]
        y = F.scaled_dot_product_attention(q, kk, vv, mask, enable_gqa=True)
        self.offset.add_(t)
        return y.transpose(1, 2).reshape(b, t, self.h * self.d)


@pytest.mark.parametrize("kv_heads", [2, 1])
def test_time_first_cache_with_a_state_bound_prefix_is_read_in_place(kv_heads, backend):
    torch.manual_seed(1)
    module = TimeFirstCache(kv_heads=kv_heads)
    twin = copy.deepcopy(module)
    program = tandem.export(module, {"forward": (r(1, 1, 16),)})
    ops = program.method("forward").ops
    assert "permute" not in [op.name for op in ops if op.ins and op.ins[0].storage.kind == STATE], [op.name for op in ops]
    (att,) = [op for op in ops if op.name == "attention"]
    assert att.ins[1].storage.kind == STATE and att.ins[2].storage.kind == STATE  # the cache's halves, in place
    m = tandem.load(program.to_bytes())
    for step in range(10):
        x = r(1, 1, 16)
        with torch.no_grad():
            want = twin(x)
        torch.testing.assert_close(m.forward(x), want, rtol=1e-5, atol=1e-5, msg=lambda s: f"step {step}: {s}")
    torch.testing.assert_close(m.read_state("cache"), twin.cache, rtol=1e-5, atol=1e-5)
