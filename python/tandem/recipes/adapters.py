"""Per-class adapters for transformers models whose own code cannot be traced into a fixed graph,
each computing what the model's code computes (checked against eager in tests/python/test_adapters.py),
applied to a model's modules for the duration of a block (`adapted(model)`), so the model itself is
left as it was.

- JetMoE's mixture-of-experts layers (JetMoeMoE, and JetMoeMoA's attention experts): the router
  counts the tokens per expert and reads the counts into Python (`expert_size.tolist()`) to split the
  grouped rows among the experts (`inputs.split(expert_size)`), a split whose sizes are known only at
  run time. Adapted: the counts stay a tensor, and the experts' products are one grouped matrix
  product over the rows sorted by expert (transformers' `grouped_mm_fallback`, offsets the counts'
  cumulative sum), which tandem runs as `matmul_grouped`.
- LongCat-Flash's experts (LongcatFlashExperts): a Python loop over the experts its tokens hit (read
  with `.item()`), with "zero" experts past the routed ones that return their input. Adapted: every
  token's choices in one grouped product over the rows sorted by expert (a zero expert's rows are
  computed by the last routed expert and weighted 0), plus the zero experts' weights times the input.
- Switch Transformers' top-1 router replaces its classifier inside forward (`self.classifier =
  self.classifier.to(dtype)`, a module swap torch.export cannot trace), and its experts loop over the
  experts that have tokens (`nonzero`, then `torch.where` per expert: sizes known only at run time).
  Adapted: the classifier's weight is cast where it is used, and every expert runs on every token, its
  output kept where the router's one-hot dispatch mask selects it (the rows an expert's capacity drops
  get none, as in the model's code), times the router's probability.
- FSMT's attention (with any cache) and LED's decoder attention (for one token) build no self-attention
  mask: they rely on a DynamicCache holding exactly the positions written, so over a static cache their
  queries would also attend the unwritten rows. Adapted: over a static self-attention layer each is given
  the mask a dynamic cache implies (each query sees the positions written before it and itself), and
  otherwise runs as it is.
- ProphetNet's decoder (ProphetNetDecoder) branches in Python on its cache length (`get_seq_length() != 0`:
  the first step takes relative position buckets and masks of its own), and its n-gram self-attention
  computes the relative positions of its main and predict streams from the number of keys, each key a
  position written (the predict stream's own key last). Adapted: over a static self-attention layer, one
  token's position, buckets and masks (hiding the unwritten rows) follow from the layer's length as a
  tensor, with the first step's the same as later ones' (as its own buffered ones are); a pad id other
  than 0, which its own cached decode refuses, is refused.
- Mimi's convolutions (MimiConv1d, the codec of Kyutai's speech-to-text) keep their stride, kernel size and
  paddings as int64 buffers and compute the padding of their input from them, so each padding is a tensor
  value that becomes a size. Adapted (without a padding cache): the same paddings in Python ints from the
  convolution's own stride, kernel size and dilation.
"""

from __future__ import annotations

import contextlib
import types

import torch
from torch import nn


def _jetmoe_router(self, hidden_states):
    """JetMoeTopKGating.forward with the tokens per expert as a tensor [num_experts]."""
    logits = self.layer(hidden_states).float()
    top_k_logits, top_k_indices = logits.topk(self.top_k, dim=1)
    top_k_gates = torch.softmax(top_k_logits, dim=1).type_as(hidden_states)
    zeros = torch.zeros([top_k_gates.size(0), self.num_experts], dtype=top_k_gates.dtype, device=top_k_gates.device)
    expert_size = zeros.scatter(1, top_k_indices, 1).long().sum(0)
    _, index_sorted_experts = top_k_indices.flatten().sort(0)
    batch_index = index_sorted_experts.div(self.top_k, rounding_mode="trunc")
    batch_gates = top_k_gates.flatten()[index_sorted_experts]
    return index_sorted_experts, batch_index, batch_gates, expert_size, logits


def _jetmoe_experts(self, inputs, expert_size):
    """JetMoeParallelExperts.forward: rows grouped by expert (expert_size [num_experts] of them each),
    each group times its expert's weight [out, in] transposed, as one grouped product."""
    from transformers.integrations import moe  # noqa: F401  (registers transformers::grouped_mm_fallback)

    offsets = expert_size.cumsum(0).to(torch.int32)
    return torch.ops.transformers.grouped_mm_fallback(inputs, self.weight.transpose(1, 2), offsets)


def _longcat_experts(self, hidden_states, top_k_index, top_k_weights):
    """LongcatFlashExperts.forward: hidden_states [T, H], top_k_index and top_k_weights [T, K]; experts
    from num_routed_experts on are the identity."""
    from transformers.integrations import moe  # noqa: F401  (registers transformers::grouped_mm_fallback)

    n, k = self.num_routed_experts, top_k_index.shape[-1]
    ids = top_k_index.reshape(-1)
    routed = ids < n
    weights = top_k_weights.reshape(-1) * routed  # a zero expert's row: weight 0 here
    ids_sorted, perm = torch.sort(ids.clamp(max=n - 1))
    offsets = torch.histc(ids_sorted.float(), bins=n, min=0, max=n - 1).cumsum(0).to(torch.int32)
    rows = hidden_states[perm // k]
    gate, up = torch.ops.transformers.grouped_mm_fallback(rows, self.gate_up_proj[:n].transpose(1, 2), offsets).chunk(2, dim=-1)
    out = torch.ops.transformers.grouped_mm_fallback(self.act_fn(gate) * up, self.down_proj.transpose(1, 2), offsets)
    out = (out * weights[perm, None])[torch.argsort(perm)]  # back in the tokens' order
    zero = (top_k_weights * (top_k_index >= n)).sum(-1, keepdim=True)
    return (out.view(-1, k, out.shape[-1]).sum(1) + zero * hidden_states).to(hidden_states.dtype)


def _switch_router(self, hidden_states):
    """SwitchTransformersTop1Router.forward with the classifier's weight cast where it is used."""
    input_dtype = hidden_states.dtype
    hidden_states = hidden_states.to(self.dtype)
    if self.training and self.jitter_noise > 0:
        hidden_states = hidden_states * torch.empty_like(hidden_states).uniform_(1.0 - self.jitter_noise, 1.0 + self.jitter_noise)
    bias = None if self.classifier.bias is None else self.classifier.bias.to(self.dtype)
    router_logits = torch.nn.functional.linear(hidden_states, self.classifier.weight.to(self.dtype), bias)
    router_probs = torch.softmax(router_logits, dim=-1, dtype=self.dtype).to(input_dtype)
    expert_index = torch.nn.functional.one_hot(torch.argmax(router_probs, dim=-1), num_classes=self.num_experts)
    expert_index = expert_index * (torch.cumsum(expert_index, dim=-2) <= self.expert_capacity)  # over capacity: dropped
    return expert_index, torch.max(router_probs, dim=-1).values.unsqueeze(-1), router_logits


def _switch_experts(self, hidden_states, selected_experts, routing_weights):
    """SwitchTransformersExperts.forward: hidden_states [N, D], selected_experts [N, 1, E] (one-hot, or
    zero where capacity dropped the token), routing_weights [N, 1]; each expert's output where it is selected."""
    out = torch.zeros_like(hidden_states)
    for e in range(self.num_experts):
        weight = selected_experts[:, 0, e, None].to(hidden_states.dtype) * routing_weights
        out = out + self[f"expert_{e}"](hidden_states) * weight
    return out


def _static_self_mask(cache, layer_idx: int, queries: int, dtype):
    """The additive mask [1, 1, queries, max_cache_len] of a static self-attention cache layer about to
    take `queries` positions: each query sees the positions written before it and its own; None where
    `cache` is no EncoderDecoderCache over a static layer."""
    from transformers.cache_utils import StaticLayer

    cache = getattr(cache, "self_attention_cache", None)
    layer = cache.layers[layer_idx] if cache is not None else None
    if not isinstance(layer, StaticLayer):
        return None
    last = layer.cumulative_length + torch.arange(queries)[:, None]  # the last position each query sees
    hidden = torch.arange(layer.max_cache_len)[None, :] > last
    return torch.zeros(1, 1, *hidden.shape, dtype=dtype).masked_fill(hidden, torch.finfo(dtype).min)


def _fsmt_attention(self, query, key, key_padding_mask=None, layer_state=None, attn_mask=None, output_attentions=False, **kwargs):
    """FSMT's Attention.forward (query [tgt, batch, dim]) with the static cache's mask."""
    if not self.encoder_decoder_attention and attn_mask is None:
        attn_mask = _static_self_mask(layer_state, self.layer_idx, query.shape[0], query.dtype)
    return type(self).forward(self, query, key, key_padding_mask, layer_state, attn_mask, output_attentions, **kwargs)


def _led_decoder_attention(self, hidden_states, key_value_states=None, cache=None, attention_mask=None, output_attentions=False):
    """LEDDecoderAttention.forward (hidden_states [batch, tgt, dim]) with the static cache's mask."""
    if key_value_states is None and attention_mask is None:
        attention_mask = _static_self_mask(cache, self.layer_idx, hidden_states.shape[1], hidden_states.dtype)
    return type(self).forward(self, hidden_states, key_value_states, cache, attention_mask, output_attentions)


def _prophetnet_decoder(
    self,
    input_ids=None,
    attention_mask=None,
    encoder_hidden_states=None,
    encoder_attention_mask=None,
    cache=None,
    inputs_embeds=None,
    use_cache=None,
    output_attentions=None,
    output_hidden_states=None,
    return_dict=None,
    **kwargs,
):
    """ProphetNetDecoder.forward for one token over a static self-attention cache: the position, relative
    position buckets and masks its own code derives from the cache length (`get_seq_length()` != 0 in Python)
    and from keys that are exactly the positions written, computed from the cache's length as a tensor.
    Any other call (no static cache, a decoder mask, attentions or hidden states asked for) runs its own code."""
    from transformers.cache_utils import StaticLayer
    from transformers.models.prophetnet.modeling_prophetnet import ProphetNetDecoderModelOutput, compute_relative_buckets

    layers = getattr(getattr(cache, "self_attention_cache", None), "layers", None)
    own = not layers or not isinstance(layers[0], StaticLayer) or attention_mask is not None or output_attentions or output_hidden_states
    if own:
        return type(self).forward(
            self,
            input_ids=input_ids,
            attention_mask=attention_mask,
            encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask,
            cache=cache,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=return_dict,
            **kwargs,
        )
    embeds = self.word_embeddings(input_ids) if inputs_embeds is None else inputs_embeds
    batch, tokens = embeds.shape[:2]
    past, length = layers[0].cumulative_length, layers[0].max_cache_len
    pad, table = self.position_embeddings.padding_idx, self.position_embeddings.num_embeddings
    if tokens != 1 or pad != 0 or length + 2 > table:
        # its own cached step takes one token at position past + 1 (its predict stream checks it: pad id 0),
        # and the predict stream reads the position after it from the table
        raise ValueError(
            f"ProphetNet's decoder over a cache takes 1 token (got {tokens}) at positions past + 1 (pad id 0, got {pad}) "
            f"up to {length + 1} of its {table} position embeddings"
        )
    position_ids = (past + 1).reshape(1, 1)  # first step: the cumulative sum of a mask of ones; later: past + 1
    keys = torch.arange(length)
    # the query's position less each key's: main keys are the cache's rows (position = row + 1), and each
    # predict stream also sees its own key, at the query's position
    main = (keys + 1 - position_ids).expand(batch, 1, length)
    predict = (torch.cat([keys, past.reshape(1) + 1]) - position_ids).expand(batch, 1, length + 1)
    main = compute_relative_buckets(self.num_buckets, self.relative_max_distance, main, False)
    predict = compute_relative_buckets(self.num_buckets, self.relative_max_distance, predict, False)
    unwritten = keys > past  # rows of the static cache a dynamic cache would not have (the current token's is written)
    masked = torch.zeros(length + 1, dtype=embeds.dtype).masked_fill(
        torch.cat([unwritten, torch.zeros(1, dtype=torch.bool)]), torch.finfo(embeds.dtype).min
    )
    main_mask, predict_mask = masked[:length].view(1, 1, 1, length), masked.view(1, 1, 1, 1, length + 1)

    hidden_states = embeds + self.position_embeddings._forward(position_ids)
    predicting = self.position_embeddings._forward(position_ids + 1)
    ngram_embeddings = self.ngram_embeddings.weight
    ngram_hidden_states = [(ngram_embeddings[ngram - 1] + predicting).repeat(batch, 1, 1) for ngram in range(self.ngram)]
    encoder_mask = None
    if encoder_attention_mask is not None:
        heads = self.config.num_decoder_attention_heads
        encoder_mask = ((1.0 - encoder_attention_mask[:, None, None, :].repeat(1, heads, 1, 1)) * torch.finfo(self.dtype).min).to(
            embeds.dtype
        )
    hidden_states = torch.cat([hidden_states] + ngram_hidden_states, 1)
    if self.embeddings_layer_norm:
        hidden_states = self.embeddings_layer_norm(hidden_states)
    hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
    for decoder_layer in self.layers:
        hidden_states = decoder_layer(
            hidden_states,
            main_mask,
            encoder_hidden_states,
            encoder_attn_mask=encoder_mask,
            extended_predict_attention_mask=predict_mask,
            main_relative_position_buckets=main,
            predict_relative_position_buckets=predict,
            position_ids=position_ids,
            cache=cache,
            use_cache=use_cache,
        )[0]
    out = ProphetNetDecoderModelOutput(
        last_hidden_state=hidden_states[:, :tokens], last_hidden_state_ngram=hidden_states[:, tokens:], cache=cache
    )
    return out if (return_dict if return_dict is not None else self.config.return_dict) else out.to_tuple()


def _mimi_conv1d(self, hidden_states, padding_cache=None):
    """MimiConv1d.forward with its paddings as Python ints (a padding cache: its own forward)."""
    if padding_cache is not None:
        return type(self).forward(self, hidden_states, padding_cache)
    conv = self.conv
    kernel, stride = (conv.kernel_size[0] - 1) * conv.dilation[0] + 1, conv.stride[0]
    total = kernel - stride
    length = hidden_states.shape[-1]
    frames = -(-(length - kernel + total) // stride)  # ceil((length - kernel + total) / stride + 1) - 1
    extra = frames * stride + kernel - total - length
    left = total if self.causal else total - total // 2
    right = extra if self.causal else total // 2 + extra
    return conv(self._pad1d(hidden_states, (left, right), mode=self.pad_mode))


ADAPTERS = {  # class name (or module and name, for a name other models use too) -> {method name: replacement}
    "JetMoeTopKGating": {"forward": _jetmoe_router},
    "JetMoeParallelExperts": {"forward": _jetmoe_experts},
    "LongcatFlashExperts": {"forward": _longcat_experts},
    "SwitchTransformersTop1Router": {"forward": _switch_router},
    "SwitchTransformersExperts": {"forward": _switch_experts},
    "transformers.models.fsmt.modeling_fsmt.Attention": {"forward": _fsmt_attention},
    "LEDDecoderAttention": {"forward": _led_decoder_attention},
    "ProphetNetDecoder": {"forward": _prophetnet_decoder},
    "MimiConv1d": {"forward": _mimi_conv1d},
}


@contextlib.contextmanager
def adapted(model: nn.Module):
    """Within the block every module of `model` whose class ADAPTERS names runs the adapter's methods."""
    patched = []
    for module in model.modules():
        cls = type(module)
        for name, fn in (ADAPTERS.get(f"{cls.__module__}.{cls.__name__}") or ADAPTERS.get(cls.__name__, {})).items():
            patched.append((module, name, module.__dict__.get(name)))
            setattr(module, name, types.MethodType(fn, module))
    try:
        yield
    finally:
        for module, name, own in reversed(patched):
            if own is None:
                delattr(module, name)
            else:
                setattr(module, name, own)
