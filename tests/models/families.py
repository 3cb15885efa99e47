"""Model families people bring, written the way people write them in PyTorch. Each `make_*`
returns (module, export spec, eager callables, call sequence) like tests/cases.py."""
from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn


# ---- transformer decoder LM with a KV cache ---------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate(x, cos, sin):
    """Rotary embedding on pairs (x1, x2) = halves of the last dim; cos/sin [T, Dh/2]."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    """own_length: the layer keeps its own count of cached positions and writes at it (as
    transformers' StaticLayer does with cumulative_length); otherwise it writes at `positions`."""

    def __init__(self, d, heads, capacity, own_length=False):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.register_buffer("k_cache", torch.zeros(1, heads, capacity, self.dh))
        self.register_buffer("v_cache", torch.zeros(1, heads, capacity, self.dh))
        self.own_length = own_length
        if own_length:
            self.register_buffer("length", torch.zeros((), dtype=torch.long))

    def forward(self, x, positions, cos, sin, mask):
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q = q.view(B, T, self.heads, self.dh).transpose(1, 2)
        k = k.view(B, T, self.heads, self.dh).transpose(1, 2)
        v = v.view(B, T, self.heads, self.dh).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if self.own_length:
            positions = self.length + torch.arange(T)
            self.length.add_(T)
        self.k_cache.index_copy_(2, positions, k)
        self.v_cache.index_copy_(2, positions, v)
        y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(B, T, D))

    def reset(self):
        self.k_cache.zero_()
        self.v_cache.zero_()
        if self.own_length:
            self.length.zero_()

    def forward_full(self, x, cos, sin):
        """The same attention over a whole sequence at once (training), without the cache."""
        B, T, D = x.shape
        q, k, v = (t.view(B, T, self.heads, self.dh).transpose(1, 2) for t in self.qkv(x).split(D, dim=-1))
        y = F.scaled_dot_product_attention(rotate(q, cos, sin), rotate(k, cos, sin), v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(B, T, D))


class Block(nn.Module):
    def __init__(self, d, heads, capacity, act, own_length=False):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        self.attn = Attention(d, heads, capacity, own_length)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.act = act

    def forward(self, x, positions, cos, sin, mask):
        x = x + self.attn(self.norm1(x), positions, cos, sin, mask)
        return x + self.down(self.act(self.up(self.norm2(x))))

    def forward_full(self, x, cos, sin):
        x = x + self.attn.forward_full(self.norm1(x), cos, sin)
        return x + self.down(self.act(self.up(self.norm2(x))))


class TinyLM(nn.Module):
    """Character LM: prefill(tokens [1, chunk]) and decode(token [1, 1]) return the last position's
    logits [1, vocab]; reset() clears the caches and the position."""

    def __init__(self, vocab=48, d=64, heads=4, layers=2, capacity=64, chunk=8, act=None, own_length=False):
        super().__init__()
        self.capacity, self.chunk = capacity, chunk
        self.emb = nn.Embedding(vocab, d)
        nn.init.normal_(self.emb.weight, std=0.02)  # tied output head: keep initial logits small
        self.blocks = nn.ModuleList(Block(d, heads, capacity, act or nn.SiLU(), own_length) for _ in range(layers))
        self.norm = RMSNorm(d)
        dh = d // heads
        inv = 1.0 / (10000 ** (torch.arange(0, dh, 2).float() / dh))
        angles = torch.arange(capacity).float()[:, None] * inv[None, :]
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())
        self.register_buffer("pos", torch.zeros((), dtype=torch.long))

    def _step(self, tokens):
        T = tokens.shape[1]
        positions = self.pos + torch.arange(T)
        cos, sin = self.cos[positions], self.sin[positions]
        mask = torch.arange(self.capacity)[None, :] <= positions[:, None]
        x = self.emb(tokens)
        for blk in self.blocks:
            x = blk(x, positions, cos, sin, mask)
        self.pos.add_(T)
        x = self.norm(x[:, -1])
        return x @ self.emb.weight.t()

    def forward(self, tokens):
        """Training path: logits [B, T, vocab] for every position, causal, no cache."""
        T = tokens.shape[1]
        x = self.emb(tokens)
        for blk in self.blocks:
            x = blk.forward_full(x, self.cos[:T], self.sin[:T])
        return self.norm(x) @ self.emb.weight.t()

    def prefill(self, tokens):
        return self._step(tokens)

    def decode(self, token):
        return self._step(token)

    def reset(self):
        for blk in self.blocks:
            blk.attn.reset()
        self.pos.zero_()


def make_transformer(capacity=64, **kw):
    torch.manual_seed(0)
    m = TinyLM(capacity=capacity, **kw).eval()
    e = copy.deepcopy(m)
    g = torch.Generator().manual_seed(3)
    V = m.emb.num_embeddings
    p1 = torch.randint(0, V, (1, m.chunk), generator=g)
    p2 = torch.randint(0, V, (1, m.chunk), generator=g)
    toks = torch.randint(0, V, (25,), generator=g)
    calls = [("prefill", (p1,))] + [("decode", (toks[i].view(1, 1),)) for i in range(20)]
    calls += [("reset", ()), ("prefill", (p2,))] + [("decode", (toks[20 + i].view(1, 1),)) for i in range(5)]
    spec = {"prefill": (p1,), "decode": (toks[:1].view(1, 1),), "reset": ()}
    return m, spec, {"prefill": e.prefill, "decode": e.decode, "reset": e.reset}, calls


# ---- recurrent -------------------------------------------------------------------------------

class StreamingLSTM(nn.Module):
    def __init__(self, i=12, h=20):
        super().__init__()
        self.cell = nn.LSTMCell(i, h)
        self.register_buffer("h", torch.zeros(1, h))
        self.register_buffer("c", torch.zeros(1, h))

    def forward(self, x):
        h, c = self.cell(x, (self.h, self.c))
        self.h.copy_(h)
        self.c.copy_(c)
        return h

    def reset(self):
        self.h.zero_()
        self.c.zero_()

    def get_state(self):
        return self.h, self.c

    def set_state(self, h, c):
        self.h.copy_(h)
        self.c.copy_(c)


class StreamingGRU(nn.Module):
    def __init__(self, i=12, h=20):
        super().__init__()
        self.gru = nn.GRU(i, h, num_layers=1, batch_first=True)
        self.register_buffer("h", torch.zeros(1, 1, h))

    def forward(self, x):  # x [1, 1, i]: one time step
        y, h = self.gru(x, self.h)
        self.h.copy_(h)
        return y

    def reset(self):
        self.h.zero_()

    def get_state(self):
        return self.h

    def set_state(self, h):
        self.h.copy_(h)


def _recurrent_calls(step_shape, state_shapes, g):
    xs = [torch.randn(*step_shape, generator=g) for _ in range(12)]
    saved = [torch.randn(*s, generator=g) for s in state_shapes]
    calls = [("forward", (x,)) for x in xs[:5]] + [("get_state", ()), ("reset", ())]
    calls += [("forward", (x,)) for x in xs[5:8]] + [("set_state", tuple(saved)), ("get_state", ())]
    calls += [("forward", (x,)) for x in xs[8:]] + [("get_state", ())]
    return calls


def make_lstm():
    torch.manual_seed(1)
    m = StreamingLSTM()
    e = copy.deepcopy(m)
    calls = _recurrent_calls((1, 12), [(1, 20), (1, 20)], torch.Generator().manual_seed(4))
    spec = {"forward": (torch.randn(1, 12),), "reset": (), "get_state": (), "set_state": (torch.randn(1, 20), torch.randn(1, 20))}
    return m, spec, {k: getattr(e, k) for k in spec}, calls


def make_gru():
    torch.manual_seed(2)
    m = StreamingGRU()
    e = copy.deepcopy(m)
    calls = _recurrent_calls((1, 1, 12), [(1, 1, 20)], torch.Generator().manual_seed(5))
    spec = {"forward": (torch.randn(1, 1, 12),), "reset": (), "get_state": (), "set_state": (torch.randn(1, 1, 20),)}
    return m, spec, {k: getattr(e, k) for k in spec}, calls


# ---- streaming convolution -------------------------------------------------------------------

class CausalConvBlock(nn.Module):
    """Depthwise causal conv (kernel k) -> GELU -> LayerNorm over channels -> pointwise conv.
    `forward(chunk)` keeps the last k-1 input frames in a buffer; `full(signal)` is the same block
    run over a whole signal at once (left zero padding), the non-streaming reference."""

    def __init__(self, channels=8, out=6, k=5, chunk=16):
        super().__init__()
        self.k, self.chunk = k, chunk
        self.depthwise = nn.Conv1d(channels, channels, k, groups=channels)
        self.norm = nn.LayerNorm(channels)
        self.pointwise = nn.Conv1d(channels, out, 1)
        self.register_buffer("context", torch.zeros(1, channels, k - 1))

    def _block(self, x):
        y = F.gelu(self.depthwise(x))
        y = self.norm(y.transpose(1, 2)).transpose(1, 2)
        return self.pointwise(y)

    def forward(self, chunk):
        x = torch.cat([self.context, chunk], dim=2)
        self.context.copy_(x[:, :, -(self.k - 1):])
        return self._block(x)

    def reset(self):
        self.context.zero_()

    def full(self, signal):
        return self._block(F.pad(signal, (self.k - 1, 0)))


def make_streaming_conv():
    torch.manual_seed(3)
    m = CausalConvBlock()
    e = copy.deepcopy(m)
    g = torch.Generator().manual_seed(6)
    chunks = [torch.randn(1, 8, m.chunk, generator=g) for _ in range(6)]
    calls = [("forward", (c,)) for c in chunks[:4]] + [("reset", ())] + [("forward", (c,)) for c in chunks[4:]]
    spec = {"forward": (chunks[0],), "reset": ()}
    return m, spec, {"forward": e.forward, "reset": e.reset}, calls


# ---- stateless conv net ----------------------------------------------------------------------

class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(16 * 6 * 6, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def make_cnn():
    torch.manual_seed(4)
    m = SmallCNN()
    with torch.no_grad():  # non-trivial running statistics, as after training
        for bn in (m.features[1], m.features[5]):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    m.eval()
    e = copy.deepcopy(m)
    g = torch.Generator().manual_seed(7)
    calls = [("forward", (torch.randn(1, 1, 28, 28, generator=g),)) for _ in range(3)]
    return m, {"forward": (torch.randn(1, 1, 28, 28),)}, {"forward": e.forward}, calls


MODELS = {
    "transformer": make_transformer,
    "lstm": make_lstm,
    "gru_layer": make_gru,
    "streaming_conv": make_streaming_conv,
    "cnn": make_cnn,
}
