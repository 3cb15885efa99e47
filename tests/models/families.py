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
        self.context.copy_(x[:, :, -(self.k - 1) :])
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
            nn.Conv2d(1, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
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


# ---- streaming neural audio codec ------------------------------------------------------------


class StreamingConv1d(nn.Module):
    """Causal Conv1d for streaming (as Moshi/Mimi's): the last span - stride input frames of the
    previous chunk are kept in a buffer and put in front of the next chunk, so chunk by chunk the
    outputs equal those of the whole signal left-padded with span - stride zeros."""

    def __init__(self, cin, cout, k, stride=1, dilation=1, groups=1):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, k, stride, dilation=dilation, groups=groups)
        self.context = dilation * (k - 1) + 1 - stride
        if self.context > 0:
            self.register_buffer("previous", torch.zeros(1, cin, self.context))

    def forward(self, x, full=False):
        if self.context <= 0:
            return self.conv(x)
        if full:
            return self.conv(F.pad(x, (self.context, 0)))
        x = torch.cat([self.previous, x], dim=2)
        self.previous.copy_(x[:, :, -self.context :])
        return self.conv(x)

    def reset(self):
        if self.context > 0:
            self.previous.zero_()


class StreamingConvTranspose1d(nn.Module):
    """Causal ConvTranspose1d for streaming: the last k - stride output frames overlap the next
    chunk's first ones, so they are kept (without the bias) and added there; the whole signal's
    equivalent trims them from the end."""

    def __init__(self, cin, cout, k, stride):
        super().__init__()
        self.convtr = nn.ConvTranspose1d(cin, cout, k, stride)
        self.trim = k - stride
        self.register_buffer("partial", torch.zeros(1, cout, self.trim))

    def forward(self, x, full=False):
        y = self.convtr(x)
        end = y.shape[2] - self.trim
        if full:
            return y[:, :, :end]
        head = y[:, :, : self.trim] + self.partial
        self.partial.copy_(y[:, :, end:] - self.convtr.bias[None, :, None])
        return torch.cat([head, y[:, :, self.trim : end]], dim=2)

    def reset(self):
        self.partial.zero_()


class SEAResidualUnit(nn.Module):
    def __init__(self, dim, dilation):
        super().__init__()
        self.block1 = StreamingConv1d(dim, dim // 2, 3, dilation=dilation)
        self.block2 = StreamingConv1d(dim // 2, dim, 1)

    def forward(self, x, full=False):
        return x + self.block2(F.elu(self.block1(F.elu(x), full)), full)


class SEAEncoder(nn.Module):
    """SEANet encoder: a k=7 conv, then per ratio residual units and a strided conv (k = 2·ratio)
    doubling the channels, then ELU and a k=3 conv to the latent dim. All convs causal."""

    def __init__(self, channels, ratios, dim, dilations):
        super().__init__()
        self.conv_in = StreamingConv1d(1, channels, 7)
        self.stages = nn.ModuleList()
        c = channels
        for r in ratios:
            units = nn.ModuleList(SEAResidualUnit(c, d) for d in dilations)
            self.stages.append(nn.ModuleDict({"units": units, "down": StreamingConv1d(c, 2 * c, 2 * r, stride=r)}))
            c *= 2
        self.conv_out = StreamingConv1d(c, dim, 3)

    def forward(self, x, full=False):
        x = self.conv_in(x, full)
        for st in self.stages:
            for u in st["units"]:
                x = u(x, full)
            x = st["down"](F.elu(x), full)
        return self.conv_out(F.elu(x), full)


class SEADecoder(nn.Module):
    """The mirror: a k=7 conv from the latent dim, then per ratio a causal ConvTranspose1d halving
    the channels and residual units, then ELU and a k=7 conv to one audio channel."""

    def __init__(self, channels, ratios, dim, dilations):
        super().__init__()
        c = channels * 2 ** len(ratios)
        self.conv_in = StreamingConv1d(dim, c, 7)
        self.stages = nn.ModuleList()
        for r in reversed(ratios):
            units = nn.ModuleList(SEAResidualUnit(c // 2, d) for d in dilations)
            self.stages.append(nn.ModuleDict({"up": StreamingConvTranspose1d(c, c // 2, 2 * r, r), "units": units}))
            c //= 2
        self.conv_out = StreamingConv1d(c, 1, 7)

    def forward(self, x, full=False):
        x = self.conv_in(x, full)
        for st in self.stages:
            x = st["up"](F.elu(x), full)
            for u in st["units"]:
                x = u(x, full)
        return self.conv_out(F.elu(x), full)


class WindowedAttention(nn.Module):
    """Self-attention over the last `window` frames with RoPE. Streaming, the keys and values live in
    a ring buffer of window + chunk slots (slot = position % capacity), with the position each slot
    holds, so a query sees exactly the keys of positions (t - window, t]."""

    def __init__(self, d, heads, window, chunk):
        super().__init__()
        self.heads, self.dh, self.window = heads, d // heads, window
        self.capacity = window + chunk
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, self.dh, 2).float() / self.dh)))
        self.register_buffer("k_cache", torch.zeros(1, heads, self.capacity, self.dh))
        self.register_buffer("v_cache", torch.zeros(1, heads, self.capacity, self.dh))
        self.register_buffer("slot_pos", torch.full((self.capacity,), -(10**9), dtype=torch.long))

    def forward(self, x, positions, full=False):
        B, T, D = x.shape
        q, k, v = (t.view(B, T, self.heads, self.dh).transpose(1, 2) for t in self.qkv(x).split(D, dim=-1))
        angles = positions.float()[:, None] * self.inv_freq[None, :]
        cos, sin = angles.cos(), angles.sin()
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if full:
            keys = positions
        else:
            slots = positions % self.capacity
            self.k_cache.index_copy_(2, slots, k)
            self.v_cache.index_copy_(2, slots, v)
            self.slot_pos.index_copy_(0, slots, positions)
            k, v, keys = self.k_cache, self.v_cache, self.slot_pos
        mask = (keys[None, :] <= positions[:, None]) & (keys[None, :] > positions[:, None] - self.window)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(B, T, D))

    def reset(self):
        self.k_cache.zero_()
        self.v_cache.zero_()
        self.slot_pos.fill_(-(10**9))


class CodecTransformerLayer(nn.Module):
    def __init__(self, d, heads, window, chunk):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = WindowedAttention(d, heads, window, chunk)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, positions, full=False):
        x = x + self.attn(self.norm1(x), positions, full)
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class StreamingTransformer(nn.Module):
    """Layers over [1, C, T] frames (transposed to [1, T, C]); counts the frames it has seen."""

    def __init__(self, d, heads, layers, window, chunk):
        super().__init__()
        self.layers = nn.ModuleList(CodecTransformerLayer(d, heads, window, chunk) for _ in range(layers))
        self.register_buffer("offset", torch.zeros((), dtype=torch.long))

    def forward(self, x, full=False):
        T = x.shape[2]
        positions = torch.arange(T) if full else self.offset + torch.arange(T)
        h = x.transpose(1, 2)
        for layer in self.layers:
            h = layer(h, positions, full)
        if not full:
            self.offset.add_(T)
        return h.transpose(1, 2)

    def reset(self):
        self.offset.zero_()
        for layer in self.layers:
            layer.attn.reset()


class StreamingCodec(nn.Module):
    """A small Mimi-like neural audio codec: SEANet encoder -> windowed transformer -> latents
    [1, dim, frames]; latents -> windowed transformer -> SEANet decoder -> audio. Every conv keeps
    its own context, so `encode_step(chunk)` / `decode_step(latents)` run chunk by chunk, and
    `encode(signal)` / `decode(latents)` are the same over the whole signal at once."""

    def __init__(self, channels=16, ratios=(4, 5, 6, 4), dim=128, heads=4, layers=2, window=32, chunk_frames=4, dilations=(1,)):
        super().__init__()
        self.hop = math.prod(ratios)
        self.chunk = self.hop * chunk_frames
        self.encoder = SEAEncoder(channels, ratios, dim, dilations)
        self.encoder_transformer = StreamingTransformer(dim, heads, layers, window, chunk_frames)
        self.decoder_transformer = StreamingTransformer(dim, heads, layers, window, chunk_frames)
        self.decoder = SEADecoder(channels, ratios, dim, dilations)

    def encode_step(self, chunk):
        return self.encoder_transformer(self.encoder(chunk))

    def decode_step(self, latents):
        return self.decoder(self.decoder_transformer(latents))

    def reset(self):
        for m in self.modules():
            if m is not self and hasattr(m, "reset"):
                m.reset()

    def encode(self, signal):
        return self.encoder_transformer(self.encoder(signal, full=True), full=True)

    def decode(self, latents):
        return self.decoder(self.decoder_transformer(latents, full=True), full=True)


def small_codec():
    """The test size: 2 frames of 40 samples per chunk, a window of 5 frames (the ring wraps within
    a few calls), dilations 1 and 3."""
    torch.manual_seed(5)
    return StreamingCodec(channels=8, ratios=(2, 4, 5), dim=32, heads=2, layers=2, window=5, chunk_frames=2, dilations=(1, 3)).eval()


def make_codec():
    m = small_codec()
    e = copy.deepcopy(m)
    g = torch.Generator().manual_seed(8)
    chunks = [torch.randn(1, 1, m.chunk, generator=g) for _ in range(7)]
    lat = [torch.randn(1, 32, m.chunk // m.hop, generator=g) for _ in range(7)]
    calls = []
    for i in range(5):
        calls += [("encode_step", (chunks[i],)), ("decode_step", (lat[i],))]
    calls += [("reset", ()), ("encode_step", (chunks[5],)), ("decode_step", (lat[5],)), ("encode_step", (chunks[6],))]
    spec = {"encode_step": (chunks[0],), "decode_step": (lat[0],), "reset": ()}
    return m, spec, {k: getattr(e, k) for k in spec}, calls


MODELS = {
    "transformer": make_transformer,
    "lstm": make_lstm,
    "gru_layer": make_gru,
    "streaming_conv": make_streaming_conv,
    "cnn": make_cnn,
    "codec": make_codec,
}
