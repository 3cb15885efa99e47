"""Recipes for Hugging Face transformers models (imports transformers only when called).

    program = tandem.transformers.export_causal_lm(model, max_cache_len=512, max_prompt_len=64)

A decoder-only LM becomes one program whose state is its static KV cache (transformers'
StaticCache, exported as it is: the cache object's tensors are state):
- `prefill(tokens [1, n])`, 1 <= n <= max_prompt_len (a dynamic dim 'n'): appends n tokens to the
  cache and returns the last position's logits [1, vocab]; each call runs at its own length;
- `decode(token [1, 1])`: appends one token, returns its logits [1, vocab];
- `decode_topk(token [1, 1])`: appends one token like decode (same state), returns its K largest
  logits, values float32 [1, K] and their token ids int64 [1, K], largest first, equal values by
  the lower id (the runtime's `topk`), so sampling reads K numbers instead of the vocabulary;
- `reset()`: empties the cache.
The position lives in state: callers never pass it. A call that would write past max_cache_len
fails with TDM_ERR_INDEX and leaves the state unchanged.

Metadata (`model.metadata`; `metadata=` adds entries): model_type, vocab_size, num_layers,
max_cache_len (None for Mamba), max_prompt_len, prefill_chunks (Mamba only), sample_top_k (K of
decode_topk; absent with sample_top_k=None), position_state (the state tensor holding the number
of positions in use), bos_token_id, eos_token_id.

A Mamba LM (MambaForCausalLM) goes through the same recipe; its state is each layer's convolution
window and SSM state (no KV cache: any length fits, so max_cache_len is None), plus a count of the
tokens seen (position_state). Its selective scan steps through the tokens one by one, a loop of n
steps that a fixed graph cannot have for a dynamic n, so its prefill is `prefill_<n>(tokens [1, n])`
for fixed n (max_prompt_len and the powers of two below it, listed largest first in the metadata
entry `prefill_chunks`); `decode`, `decode_topk` and `reset` as above, and `prefill()` below splits a
prompt into them.

    program = tandem.transformers.export_seq2seq(model, max_cache_len=64)

An encoder-decoder (Whisper: WhisperForConditionalGeneration) becomes
- `encode(features [1, mel, frames])`: runs the encoder, writes every decoder layer's
  cross-attention keys and values into state, and starts a new decode (the self-attention cache
  is emptied, its position back to 0);
- `decode(token [1, 1])`: appends one token, returns its logits [1, vocab];
- `reset()`: empties both caches.
"""
from __future__ import annotations

import torch
from torch import nn

from .export import Method, export
from .ir import ExportError
from .program import Program


def prefill_chunks(max_prompt_len: int) -> list[int]:
    """The lengths of prefill_<n> methods, largest first (1 is decode's): a Mamba program's, and a
    KV-cache LM's exported before prefill had a dynamic length; `prefill()` runs such programs."""
    sizes = {max_prompt_len} if max_prompt_len > 1 else set()
    n = 2
    while n < max_prompt_len:
        sizes.add(n)
        n *= 2
    return sorted(sizes, reverse=True)


def split_prompt(n: int, chunks: list[int]) -> list[int]:
    """n as a sum of chunk lengths, largest first, ending with 1s (decode's)."""
    out = []
    for c in list(chunks) + [1]:
        while n >= c:
            out.append(c)
            n -= c
    return out


class CausalLM(nn.Module):
    """A decoder-only LM with its StaticCache: prefill/decode append to the cache, reset empties it."""

    def __init__(self, model: nn.Module, max_cache_len: int):
        super().__init__()
        from transformers import StaticCache
        from transformers.cache_utils import StaticLayer
        from transformers.configuration_utils import get_head_shapes

        self.model = model
        config = model.config.get_text_config(decoder=True)
        self.cache = StaticCache(config=config, max_cache_len=max_cache_len)
        for i, layer in enumerate(self.cache.layers):
            if type(layer) is not StaticLayer:  # sliding-window and shared-KV layers: a plain static layer
                self.cache.layers[i] = StaticLayer(max_cache_len)
        heads, head_dim = get_head_shapes(config)
        self.cache.early_initialization(1, heads, head_dim, torch.float32, torch.device("cpu"))

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=tokens, cache=self.cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1]

    def step_topk(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _topk(self.step(tokens), self.top_k)

    def reset(self) -> None:
        for layer in self.cache.layers:
            layer.keys.zero_()
            layer.values.zero_()
            layer.cumulative_length.zero_()


def _topk(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k largest logits [1, k] and their ids [1, k], largest first. tandem's topk orders equal
    values by the lower id (eager PyTorch leaves their order unspecified)."""
    values, ids = torch.topk(logits, k, dim=-1)
    return values, ids


class _MambaLayerState(nn.Module):
    def __init__(self, channels: int, kernel: int, state_size: int):
        super().__init__()
        self.register_buffer("conv", torch.zeros(1, channels, kernel - 1))  # the last kernel-1 inputs of the conv
        self.register_buffer("ssm", torch.zeros(1, channels, state_size))


class MambaLM(nn.Module):
    """A Mamba LM (transformers MambaForCausalLM) with its recurrent state as buffers: a step of n
    tokens continues from the state, so n tokens in any chunks equal them in one call (transformers'
    own prefill starts the SSM from zero, so it cannot continue a sequence). The math is transformers'
    slow path (MambaMixer without kernels), on the model's own modules and weights."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        c = model.config
        self.states = nn.ModuleList(_MambaLayerState(c.intermediate_size, c.conv_kernel, c.state_size)
                                    for _ in range(c.num_hidden_layers))
        self.register_buffer("position", torch.zeros((), dtype=torch.long))  # tokens seen since reset

    def _mixer(self, mixer: nn.Module, state: _MambaLayerState, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        h, gate = mixer.in_proj(x).transpose(1, 2).chunk(2, dim=1)  # [1, channels, n] each
        window = torch.cat([state.conv, h], dim=-1)
        state.conv.copy_(window[:, :, n:])
        h = nn.functional.conv1d(window, mixer.conv1d.weight, mixer.conv1d.bias, groups=mixer.intermediate_size)
        h = mixer.act(h)  # [1, channels, n]
        dt, B, C = torch.split(mixer.x_proj(h.transpose(1, 2)),
                               [mixer.time_step_rank, mixer.ssm_state_size, mixer.ssm_state_size], dim=-1)
        dt = mixer.dt_proj.weight @ dt.transpose(1, 2)
        if mixer.dt_proj.bias is not None:
            dt = dt + mixer.dt_proj.bias[:, None]
        dt = nn.functional.softplus(dt)  # [1, channels, n]
        A = -torch.exp(mixer.A_log.float())  # [channels, state_size]
        dA = torch.exp(A[None, :, None, :] * dt[:, :, :, None])  # [1, channels, n, state_size]
        dBx = dt[:, :, :, None] * B[:, None, :, :] * h[:, :, :, None]
        ssm, ys = state.ssm, []
        for t in range(n):
            ssm = dA[:, :, t] * ssm + dBx[:, :, t]
            ys.append(torch.matmul(ssm, C[:, t, :, None])[:, :, 0])
        state.ssm.copy_(ssm)
        y = (torch.stack(ys, dim=-1) + h * mixer.D[None, :, None]) * nn.functional.silu(gate)
        return mixer.out_proj(y.transpose(1, 2))

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        backbone = self.model.backbone
        x = backbone.embeddings(tokens)
        for block, state in zip(backbone.layers, self.states):
            residual = x.float() if block.residual_in_fp32 else x
            x = residual + self._mixer(block.mixer, state, block.norm(x))
        self.position.add_(tokens.shape[1])
        return self.model.lm_head(backbone.norm_f(x[:, -1:]))[:, -1]

    def step_topk(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _topk(self.step(tokens), self.top_k)

    def reset(self) -> None:
        for state in self.states:
            state.conv.zero_()
            state.ssm.zero_()
        self.position.zero_()


def export_causal_lm(model: nn.Module, max_cache_len: int | None, max_prompt_len: int, metadata: dict | None = None,
                     sample_top_k: int | None = 64, **options) -> Program:
    """Export a transformers decoder-only LM (e.g. LlamaForCausalLM, Qwen2, Gemma, Phi-3, GPT-2) as
    prefill (of 1 to max_prompt_len tokens), decode, decode_topk and reset over its static KV cache,
    or a MambaForCausalLM (max_cache_len=None: no cache to fill) as prefill_<n> chunks, decode,
    decode_topk and reset over its recurrent state; see the module's docstring for the methods and
    the metadata. decode_topk returns the K = min(sample_top_k, vocab_size) largest logits and their
    ids (the JS generate() samples from them when it needs no more than K); sample_top_k=None: no
    decode_topk.
    `options` go to tandem.export, e.g. quantize="int8" | "int4", quantize_group, quantize_skip."""
    model = model.eval().float()
    config = model.config.get_text_config(decoder=True)
    model_type = getattr(config, "model_type", "")
    if sample_top_k is not None and (isinstance(sample_top_k, bool) or not isinstance(sample_top_k, int) or sample_top_k < 1):
        raise ExportError(f"sample_top_k must be a positive int (the K of decode_topk) or None (no decode_topk), "
                          f"got {sample_top_k!r}")
    top_k = None if sample_top_k is None else min(sample_top_k, int(config.vocab_size))
    if model_type == "mamba":
        if max_cache_len is not None:
            raise ExportError(f"max_cache_len={max_cache_len}: a Mamba model keeps a fixed-size state, not a KV cache, so "
                              "any number of tokens fits; pass max_cache_len=None")
        if max_prompt_len < 1:
            raise ExportError(f"max_prompt_len must be at least 1, got {max_prompt_len}")
        # The selective scan steps through the tokens one at a time (a Python loop unrolled at
        # export); tandem has no loop op and an affine size cannot stand for a count of unrolled
        # steps, so a Mamba prefill keeps fixed lengths: power-of-two prefill_<n> chunks.
        lm, position_state = MambaLM(model), "position"
        chunks = prefill_chunks(max_prompt_len)
        methods = {f"prefill_{n}": Method(lm.step, (torch.zeros(1, n, dtype=torch.long),)) for n in chunks}
        extra = {"prefill_chunks": chunks}
    else:
        if max_cache_len is None:
            raise ExportError(f"max_cache_len=None: a {model_type or type(model).__name__} model keeps its past in a KV "
                              "cache of max_cache_len positions; pass the length you need, e.g. max_cache_len=512")
        if not 1 <= max_prompt_len <= max_cache_len:
            raise ExportError(f"max_prompt_len must be in [1, max_cache_len={max_cache_len}], got {max_prompt_len}")
        lm, position_state = CausalLM(model, max_cache_len), "cache.layers.0.cumulative_length"
        example = min(max(max_prompt_len - 1, 2), max_prompt_len)  # not 1: torch.export would specialize the dim to it
        n = torch.export.Dim("n", min=1, max=max_prompt_len)
        methods = {"prefill": Method(lm.step, (torch.zeros(1, example, dtype=torch.long),), dynamic_shapes=({1: n},))}
        extra = {}
    methods["decode"] = Method(lm.step, (torch.zeros(1, 1, dtype=torch.long),))
    if top_k is not None:
        lm.top_k = top_k
        methods["decode_topk"] = Method(lm.step_topk, (torch.zeros(1, 1, dtype=torch.long),))
        extra["sample_top_k"] = top_k
    methods["reset"] = Method(lm.reset, ())
    return export(None, methods, metadata={
        "model_type": model_type,
        "vocab_size": int(config.vocab_size),
        "num_layers": int(config.num_hidden_layers),
        "max_cache_len": None if max_cache_len is None else int(max_cache_len),
        "max_prompt_len": int(max_prompt_len),
        **extra,
        "position_state": position_state,
        "bos_token_id": _token_id(getattr(config, "bos_token_id", None)),
        "eos_token_id": _token_id(getattr(config, "eos_token_id", None)),
        **(metadata or {}),
    }, **options)


class Seq2Seq(nn.Module):
    """A Whisper-style encoder-decoder with a static self-attention cache and its cross-attention
    keys/values as state: encode fills the cross-attention state and restarts the decode."""

    def __init__(self, model: nn.Module, max_cache_len: int):
        super().__init__()
        from transformers.cache_utils import Cache, EncoderDecoderCache, StaticLayer

        self.model = model
        c = model.config
        self.heads = c.decoder_attention_heads
        self.head_dim = c.d_model // self.heads
        layers = c.decoder_layers
        self_attention = Cache(layers=[StaticLayer(max_cache_len) for _ in range(layers)])
        cross_attention = Cache(layers=[StaticLayer(c.max_source_positions) for _ in range(layers)])
        for cache in (self_attention, cross_attention):
            cache.early_initialization(1, self.heads, self.head_dim, torch.float32, torch.device("cpu"))
        self.cache = EncoderDecoderCache(self_attention, cross_attention)

    def encode(self, features: torch.Tensor) -> None:
        hidden = self.model.get_encoder()(features).last_hidden_state  # [1, max_source_positions, d_model]
        layers = self.model.get_decoder().layers
        for layer, cross in zip(layers, self.cache.cross_attention_cache.layers):
            attn = layer.encoder_attn
            cross.keys.copy_(attn.k_proj(hidden).view(1, -1, self.heads, self.head_dim).transpose(1, 2))
            cross.values.copy_(attn.v_proj(hidden).view(1, -1, self.heads, self.head_dim).transpose(1, 2))
        for layer in self.cache.self_attention_cache.layers:
            layer.keys.zero_()
            layer.values.zero_()
            layer.cumulative_length.zero_()

    def decode(self, token: torch.Tensor) -> torch.Tensor:
        cross = self.cache.cross_attention_cache.layers
        for i in range(len(cross)):
            self.cache.is_updated[i] = True  # the decoder reads the cross-attention keys/values from the cache
        # encoder_hidden_states only tells the decoder layers to run cross-attention: its values are not read
        out = self.model.get_decoder()(input_ids=token, encoder_hidden_states=cross[0].keys, cache=self.cache,
                                       use_cache=True)
        return self.model.get_output_embeddings()(out.last_hidden_state[:, -1])

    def reset(self) -> None:
        for layer in self.cache.self_attention_cache.layers:
            layer.cumulative_length.zero_()
        for layer in list(self.cache.self_attention_cache.layers) + list(self.cache.cross_attention_cache.layers):
            layer.keys.zero_()
            layer.values.zero_()


def export_seq2seq(model: nn.Module, max_cache_len: int, encoder_input_shape: tuple | None = None,
                   metadata: dict | None = None, **options) -> Program:
    """Export a Whisper-style encoder-decoder (transformers WhisperForConditionalGeneration) as
    encode(features), decode(token) and reset() over its caches (see the module's docstring).
    encoder_input_shape defaults to the model's [1, num_mel_bins, 2 * max_source_positions].
    `options` go to tandem.export, e.g. quantize="int8"."""
    model = model.eval().float()
    config = model.config
    if getattr(config, "model_type", "") != "whisper":
        raise ExportError(f"export_seq2seq: a {getattr(config, 'model_type', type(model).__name__)!r} model; this "
                          "recipe exports Whisper-style encoder-decoders (WhisperForConditionalGeneration)")
    if not 1 <= max_cache_len <= config.max_target_positions:
        raise ExportError(f"max_cache_len must be in [1, max_target_positions={config.max_target_positions}] (the "
                          f"decoder has that many position embeddings), got {max_cache_len}")
    if encoder_input_shape is None:
        encoder_input_shape = (1, config.num_mel_bins, 2 * config.max_source_positions)
    encoder_input_shape = tuple(int(d) for d in encoder_input_shape)
    s2s = Seq2Seq(model, max_cache_len)
    methods = {
        "encode": Method(s2s.encode, (torch.zeros(encoder_input_shape),)),
        "decode": Method(s2s.decode, (torch.zeros(1, 1, dtype=torch.long),)),
        "reset": Method(s2s.reset, ()),
    }
    return export(None, methods, metadata={
        "model_type": config.model_type,
        "vocab_size": int(config.vocab_size),
        "num_layers": int(config.decoder_layers),
        "num_encoder_layers": int(config.encoder_layers),
        "max_cache_len": int(max_cache_len),
        "encoder_input_shape": list(encoder_input_shape),
        "position_state": "cache.self_attention_cache.layers.0.cumulative_length",
        "bos_token_id": _token_id(getattr(config, "bos_token_id", None)),
        "eos_token_id": _token_id(getattr(config, "eos_token_id", None)),
        "decoder_start_token_id": _token_id(getattr(config, "decoder_start_token_id", None)),
        **(metadata or {}),
    }, **options)


def _token_id(v):
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v]
    return None if v is None else int(v)


def prefill(model, tokens: torch.Tensor) -> torch.Tensor:
    """Append tokens [1, n] (1 <= n <= max_prompt_len) to a loaded model's cache (tandem.load) with one
    `prefill` call (a program without one, Mamba's or one of an earlier version: its prefill_<n>
    chunks, then decode for a last single token); returns the last position's logits. A prompt that does not fit in the cache raises
    TDM_ERR_INDEX before anything runs."""
    from .runtime import TandemError

    md = model.metadata
    n = tokens.shape[-1]
    if not 1 <= n <= md["max_prompt_len"]:
        raise TandemError("TDM_ERR_INVALID_ARGUMENT", f"prefill: {n} tokens; give 1 to {md['max_prompt_len']} (max_prompt_len)")
    used = int(model.read_state(md["position_state"]))
    if md["max_cache_len"] is not None and used + n > md["max_cache_len"]:
        raise TandemError("TDM_ERR_INDEX", f"prefill: {n} tokens do not fit: {used} of {md['max_cache_len']} cache positions "
                          "are in use (call reset())")
    if "prefill" in model.methods:
        return model.call("prefill", tokens.reshape(1, -1))
    at, logits = 0, None
    for c in split_prompt(n, md["prefill_chunks"]):
        logits = model.call("decode" if c == 1 else f"prefill_{c}", tokens.reshape(1, -1)[:, at:at + c])
        at += c
    return logits


def export_pretrained(path, output=None, **kwargs):
    """Export a local transformers checkpoint folder, its tokenizer and chat template included: see
    tandem/pretrained.py (`python -m tandem export DIR -o FILE` runs it). Returns (program, report)."""
    from .pretrained import export_pretrained as run

    return run(path, output, **kwargs)
