"""The encoder-decoder recipe (imports transformers only when called); users call it as
tandem.transformers.export_seq2seq.

    program = tandem.transformers.export_seq2seq(model, max_cache_len=64)

An encoder-decoder over transformers' EncoderDecoderCache (Whisper, T5, BART, Marian, Pegasus,
Speech2Text, ...) becomes
- `encode(input)`: the model's own encoder on what its forward takes (token ids [1, n] of a dynamic
  length up to max_source_len, or features of a fixed shape), its output kept as state, every decoder
  layer's cross-attention keys and values written by the layer itself, and a new decode started
  (the self-attention cache is emptied, its position back to 0);
- `decode(token [1, 1])`: appends one token, returns its logits [1, vocab];
- `reset()`: empties both caches.
"""

from __future__ import annotations

import torch
from torch import nn

from ..export import Method, export
from ..ir import ExportError
from ..program import Program
from .adapters import adapted
from .checks import check_options, token_id


class Seq2Seq(nn.Module):
    """An encoder-decoder (any whose decoder takes transformers' EncoderDecoderCache: Whisper, T5, BART,
    Marian, Pegasus, Speech2Text, ...) with a static self-attention cache and its cross-attention keys
    and values as state. encode runs the model's own encoder on whatever its forward takes (token ids,
    features, samples: its encoder's `main_input_name`), keeps its output (at most `source_capacity` rows, the
    rest zero and masked) and runs one decoder step with the cross-attention cache not yet filled, so
    each layer's own cross-attention writes its keys and values (whatever its projections are named);
    then the self-attention cache is emptied. decode runs the model's own forward (its head, scaling
    and final bias included) over the caches, given the decoder's positions from the cache length where
    its forward takes them (so no decoder slices a position table at a length read into Python). The
    cache tensors are created by one eager call. A module whose own code cannot be traced runs its
    adapter (adapters.py)."""

    def __init__(self, model: nn.Module, max_cache_len: int, example: torch.Tensor, masked: bool, source_capacity=None, padded=False):
        super().__init__()
        from transformers.cache_utils import Cache, EncoderDecoderCache, StaticLayer

        self.model = model
        self.input_name = encoder_input_name(model)
        self.masked = masked
        self.padded = padded  # token ids padded to source_capacity, with an attention mask: the encoder sees one shape
        self.capacity = source_capacity
        c = model.config
        layers = (
            getattr(c, "decoder_layers", None)
            or getattr(c, "num_decoder_layers", None)
            or c.get_text_config(decoder=True).num_hidden_layers
        )
        self.positions = _takes_decoder_positions(model)
        start = decoder_start(model)
        start = start if start is not None else 0
        self.register_buffer("start", torch.tensor([[start]]), persistent=False)
        with torch.no_grad(), adapted(model):
            out = self.model.get_encoder()(**self._encoder_args(example))
        # the decoder is given the encoder's output as the encoder gives it (its own output class: some
        # decoders read more of it than last_hidden_state, as None), with last_hidden_state from state
        self._encoded = type(out) if not isinstance(out, tuple) else None
        hidden = out[0]
        capacity = int(source_capacity or hidden.shape[1])
        self.register_buffer("hidden", torch.zeros(1, capacity, hidden.shape[2]))  # the encoder's output
        self.register_buffer("source_length", torch.zeros((), dtype=torch.long))  # its rows in use
        self.cache = EncoderDecoderCache(
            Cache(layers=[StaticLayer(max_cache_len) for _ in range(layers)]), Cache(layers=[StaticLayer(capacity) for _ in range(layers)])
        )
        with torch.no_grad():  # transformers creates the cache tensors at their first update
            self.encode(example)
        self.reset()

    def _encoder_args(self, x) -> dict:
        if not self.padded:
            return {self.input_name: x}
        n = x.shape[1]
        pad = int(getattr(self.model.config, "pad_token_id", None) or 0)
        ids = torch.full((1, self.capacity), pad, dtype=x.dtype).index_copy(1, torch.arange(n), x)
        return {self.input_name: ids, "attention_mask": (torch.arange(self.capacity) < n)[None].long()}

    def _encoder(self, x):
        with adapted(self.model):
            return self.model.get_encoder()(**self._encoder_args(x))[0]  # last_hidden_state (also of an encoder that gives a tuple)

    def _run(self, token: torch.Tensor, cross_ready: bool) -> torch.Tensor:
        for i in range(len(self.cache.cross_attention_cache.layers)):
            self.cache.is_updated[i] = cross_ready  # False: the cross-attention computes and writes its keys/values
        kwargs = {}
        if self.masked:  # rows past the source length are padding
            kwargs["attention_mask"] = (torch.arange(self.hidden.shape[1]) < self.source_length)[None].long()
        if self.positions:  # the decoder's positions from the cache length (not a slice from a length read into Python)
            start = self.cache.self_attention_cache.layers[0].cumulative_length.reshape(1, 1)
            kwargs["decoder_position_ids"] = start + torch.arange(token.shape[1])[None]
        encoded = (self.hidden,) if self._encoded is None else self._encoded(last_hidden_state=self.hidden)
        with adapted(self.model):
            out = self.model(encoder_outputs=encoded, decoder_input_ids=token, cache=self.cache, use_cache=True, **kwargs)
        return out.logits[:, -1]

    def _empty(self, caches) -> None:
        for cache in caches:
            for layer in cache.layers:
                if layer.keys is not None:
                    layer.keys.zero_()
                    layer.values.zero_()
                layer.cumulative_length.zero_()

    def encode(self, x: torch.Tensor) -> None:
        hidden = self._encoder(x)
        n = x.shape[1] if self.padded else hidden.shape[1]
        if not self.masked or self.padded:  # a fixed shape: every row (past n: padding, masked)
            self.hidden.copy_(hidden)
        else:
            self.hidden.zero_()
            self.hidden.index_copy_(1, torch.arange(n), hidden)
        self.source_length.zero_()
        self.source_length.add_(n)
        # both caches emptied first: the one decoder step below (which makes each layer write its cross-attention
        # keys and values) must find room even when the previous audio's decode filled the self-attention cache
        self._empty([self.cache.self_attention_cache, self.cache.cross_attention_cache])
        self._run(self.start, cross_ready=False)
        self._empty([self.cache.self_attention_cache])

    def decode(self, token: torch.Tensor) -> torch.Tensor:
        return self._run(token, cross_ready=True)

    def reset(self) -> None:
        self._empty([self.cache.self_attention_cache, self.cache.cross_attention_cache])
        self.hidden.zero_()
        self.source_length.zero_()


def encoder_input_name(model: nn.Module) -> str:
    """What the model's encoder takes by name: the encoder's main_input_name where its forward takes it
    (a composite of an encoder and a decoder, SpeechEncoderDecoderModel, names its own input `inputs`),
    else the model's."""
    import inspect

    encoder = model.get_encoder()
    name = getattr(encoder, "main_input_name", None)
    return name if name and name in inspect.signature(encoder.forward).parameters else model.main_input_name


def _takes_decoder_positions(model: nn.Module) -> bool:
    """Whether the forward takes the decoder's positions: it names decoder_position_ids, or it is a composite
    of an encoder model and a decoder model (its config has a decoder config: EncoderDecoderModel) that hands
    its decoder_ arguments to a decoder whose forward takes position_ids."""
    import inspect

    from transformers import PretrainedConfig

    if "decoder_position_ids" in inspect.signature(model.forward).parameters:
        return True
    decoder = getattr(model, "decoder", None)
    composite = isinstance(getattr(model.config, "decoder", None), PretrainedConfig) and isinstance(decoder, nn.Module)
    return composite and "position_ids" in inspect.signature(decoder.forward).parameters


def decoder_start(model: nn.Module) -> int | None:
    """The token a decode starts from, as transformers' generate picks it: the generation config's
    decoder_start_token_id, else the model config's, else a bos_token_id."""
    gen, config = getattr(model, "generation_config", None), model.config
    for source, key in (
        (gen, "decoder_start_token_id"),
        (config, "decoder_start_token_id"),
        (gen, "bos_token_id"),
        (config, "bos_token_id"),
    ):
        t = token_id(getattr(source, key, None)) if source is not None else None
        if t is not None:
            return t[0] if isinstance(t, list) else t
    return None


def export_seq2seq(
    model: nn.Module,
    max_cache_len: int,
    encoder_input_shape: tuple | None = None,
    metadata: dict | None = None,
    max_source_len: int | None = None,
    max_prompt_len: int | None = None,
    sample_top_k: int | None = None,
    **options,
) -> Program:
    """Export a transformers encoder-decoder whose decoder uses an EncoderDecoderCache (Whisper, T5,
    BART, Marian, mBART, Pegasus, Speech2Text, ...) as encode(input), decode(token) and reset() over its
    caches (see the module's docstring). The encoder input is what the model's forward takes
    (its encoder's `main_input_name`): token ids [1, n] with 1 <= n <= max_source_len (a dynamic length;
    default min(max_position_embeddings, 512)), or features / samples of a fixed encoder_input_shape
    (Whisper's default: [1, num_mel_bins, 2 * max_source_positions]; other audio models: give it).
    max_prompt_len and sample_top_k (export_causal_lm's; this recipe has no prefill and no
    decode_topk) are accepted and recorded in the metadata entry `unused_options`.
    `options` go to tandem.export, e.g. quantize="int8"; any other name is an ExportError."""
    from transformers.cache_utils import EncoderDecoderCache  # noqa: F401  (the decoder's cache class)

    check_options("export_seq2seq", options)
    unused = {k: v for k, v in (("max_prompt_len", max_prompt_len), ("sample_top_k", sample_top_k)) if v is not None}
    model = model.eval().float()
    config = model.config
    name = type(model).__name__
    if not getattr(config, "is_encoder_decoder", False) or not hasattr(model, "get_encoder"):
        raise ExportError(
            f"export_seq2seq: {name} is not an encoder-decoder (its config has no is_encoder_decoder); "
            "export a decoder-only LM with export_causal_lm"
        )
    import inspect

    params = inspect.signature(model.forward).parameters
    if "encoder_outputs" not in params or not ({"cache", "past_key_values"} & set(params)):
        raise ExportError(
            f"export_seq2seq: {name}.forward takes no encoder_outputs and cache, so its decoder cannot "
            "run over an EncoderDecoderCache kept as state"
        )
    limit = getattr(config, "max_target_positions", None) or getattr(config, "max_position_embeddings", None)
    if max_cache_len < 1 or (limit is not None and max_cache_len > limit):
        raise ExportError(
            f"max_cache_len must be in [1, max_target_positions={limit}] (the decoder has that many "
            f"position embeddings), got {max_cache_len}"
        )
    input_name = encoder_input_name(model)
    extra, dynamic = {}, None
    if input_name == "input_ids":  # a text encoder: any source length up to max_source_len
        if encoder_input_shape is not None:
            raise ExportError(f"encoder_input_shape: {name} takes token ids of any length; give max_source_len instead")
        src_limit = getattr(config, "max_position_embeddings", None)
        max_source_len = int(max_source_len or min(src_limit or 512, 512))
        if max_source_len < 2 or (src_limit is not None and max_source_len > src_limit):
            raise ExportError(f"max_source_len must be in [2, max_position_embeddings={src_limit}], got {max_source_len}")
        example = torch.ones(1, max_source_len - 1 if max_source_len > 2 else 2, dtype=torch.long)
        dynamic = ({1: torch.export.Dim("source", min=1, max=max_source_len)},)
        extra = {"max_source_len": max_source_len}
    else:  # features or samples of one shape
        if max_source_len is not None:
            raise ExportError(f"max_source_len: {name} takes {input_name} of a fixed shape; give encoder_input_shape")
        if encoder_input_shape is None:
            if getattr(config, "model_type", "") != "whisper":
                raise ExportError(
                    f"export_seq2seq: {name} takes {input_name}; give encoder_input_shape=(1, ...) "
                    "(the shape of one input as its forward takes it)"
                )
            encoder_input_shape = (1, config.num_mel_bins, 2 * config.max_source_positions)
        encoder_input_shape = tuple(int(d) for d in encoder_input_shape)
        example = torch.zeros(encoder_input_shape)
        extra = {"encoder_input_shape": list(encoder_input_shape)}
    try:
        return _export(model, max_cache_len, example, dynamic, extra, unused, metadata, options, padded=False)
    except ExportError as first:
        if dynamic is None:
            raise
        try:  # an encoder whose code branches on the source length: run it on one padded length, masked
            return _export(model, max_cache_len, example, dynamic, extra, unused, metadata, options, padded=True)
        except ExportError:
            raise first from None


def _export(model, max_cache_len, example, dynamic, extra, unused, metadata, options, padded: bool) -> Program:
    config, name, input_name = model.config, type(model).__name__, encoder_input_name(model)
    try:
        s2s = Seq2Seq(model, max_cache_len, example, masked=dynamic is not None, source_capacity=extra.get("max_source_len"), padded=padded)
    except Exception as e:
        raise ExportError(f"export_seq2seq: {name} does not run over a static EncoderDecoderCache ({type(e).__name__}: {e})") from e
    methods = {
        "encode": Method(s2s.encode, (example,), dynamic_shapes=dynamic),
        "decode": Method(s2s.decode, (torch.zeros(1, 1, dtype=torch.long),)),
        "reset": Method(s2s.reset, ()),
    }
    text = config.get_text_config(decoder=True)
    layers = len(s2s.cache.self_attention_cache.layers)
    enc_layers = getattr(config, "encoder_layers", None) or getattr(config, "num_layers", None)
    return export(
        None,
        methods,
        metadata={
            "model_type": config.model_type,
            "vocab_size": int(getattr(config, "vocab_size", None) or text.vocab_size),
            "num_layers": int(layers),
            "num_encoder_layers": None if enc_layers is None else int(enc_layers),
            "max_cache_len": int(max_cache_len),
            "encoder_input": input_name,
            **extra,
            "position_state": "cache.self_attention_cache.layers.0.cumulative_length",
            "bos_token_id": token_id(getattr(config, "bos_token_id", None)),
            "eos_token_id": token_id(getattr(config, "eos_token_id", None)),
            "decoder_start_token_id": decoder_start(model),
            **({"unused_options": unused} if unused else {}),
            **(metadata or {}),
        },
        **options,
    )
