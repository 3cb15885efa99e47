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


ADAPTERS = {  # class name -> {method name: replacement}
    "JetMoeTopKGating": {"forward": _jetmoe_router},
    "JetMoeParallelExperts": {"forward": _jetmoe_experts},
    "LongcatFlashExperts": {"forward": _longcat_experts},
}


@contextlib.contextmanager
def adapted(model: nn.Module):
    """Within the block every module of `model` whose class ADAPTERS names runs the adapter's methods."""
    patched = []
    for module in model.modules():
        for name, fn in ADAPTERS.get(type(module).__name__, {}).items():
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
