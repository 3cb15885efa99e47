"""Issue #23's "the package-layout cache as fast as a hand layout", for pocket-tts' flow LM: the same
full-size flow LM (bench/models/pocket.py's seeded weights, its prompt, capacity 64) exported with
prompt + step as the package's _run_flow_lm_and_increment_step calls them, in three cache layouts:
  pkg:  as the package ships it: one [2, B, T, H, D] cache per layer in its ModelState, cache[0] and
        cache[1] written separately at `offset` and read as cache[:, :, :offset + t] (moshi-style);
        bench/models/pocket.py's pocket[_int8].tandem holds the same step;
  hand: the same model with each layer's attention swapped for HandAttention below: its own K and V
        buffers, heads-first [B, H, T, D], written by slice assignment at the offset (a buffer of its
        own), attention by F.scaled_dot_product_attention over the prefix k[:, :, :offset + t];
  handwhole: the same, attending over the whole buffers with the unwritten rows masked (as a static
        cache does), no prefix slice.
All take the same weights; their eager latents are checked equal to the package's here, the exports'
by bench/probes/pocket_layout.mjs (which times them interleaved). Writes
OUT/layout_{pkg,hand,handwhole}[_int8].tandem and OUT/layout_frames.json (the prompt, the package's
latents, each step's op counts). Usage: python bench/probes/pocket_layout.py OUT [frames = 12]
[variants = float32,int8] [layouts = pkg,hand,handwhole] [small: the small config, to check the probe]."""

import copy
import functools
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "tests" / "python"))
from pocket_tts.modules.attention import StreamingMultiheadAttention  # noqa: E402
from pocket_tts.modules.stateful_module import init_states  # noqa: E402

import tandem  # noqa: E402
from packaged_models import pocket  # noqa: E402

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "build/layout")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 12
VARIANTS = [v for v in (sys.argv[3] if len(sys.argv) > 3 else "float32,int8").split(",") if v]
WHICH = (sys.argv[4] if len(sys.argv) > 4 else "pkg,hand,handwhole").split(",")  # which layouts to export
SMALL = len(sys.argv) > 5 and sys.argv[5] == "small"  # a quick check of the probe itself
OUT.mkdir(parents=True, exist_ok=True)
torch.set_num_threads(1)
PROMPT = torch.tensor([[17, 250, 3, 999, 42, 7, 1200, 64]]) % (40 if SMALL else 4001)
CAP = 64


class HandAttention(nn.Module):
    """One layer's attention with a hand-written cache: the package module's projections and rope,
    K and V as two heads-first [B, H, CAP, D] buffers and the write offset as an int64 buffer."""

    def __init__(self, attn: StreamingMultiheadAttention, cap: int, whole: bool):
        super().__init__()
        self.whole = whole  # attend over the whole buffer, the unwritten rows masked, rather than its prefix
        self.in_proj, self.out_proj, self.rope = attn.in_proj, attn.out_proj, attn.rope
        self.h, self.hkv, self.d, self.qdim = attn.num_heads, attn.num_kv_heads, attn.dim_per_head, attn.attn_dim
        self.register_buffer("k", torch.zeros(1, self.hkv, cap, self.d))
        self.register_buffer("v", torch.zeros(1, self.hkv, cap, self.d))
        self.register_buffer("offset", torch.zeros(1, dtype=torch.long))

    def forward(self, query, model_state=None, attn_mask=None):
        b, t, _ = query.shape
        projected = self.in_proj(query)
        q = projected[..., : self.qdim].view(b, t, self.h, self.d)
        k, v = projected[..., self.qdim :].view(b, t, 2, self.hkv, self.d).unbind(2)
        q, k = self.rope(q, k, offset=self.offset[0])
        off = int(self.offset[0].item())
        self.k[:, :, off : off + t] = k.transpose(1, 2)
        self.v[:, :, off : off + t] = v.transpose(1, 2)
        keys, values = (self.k, self.v) if self.whole else (self.k[:, :, : off + t], self.v[:, :, : off + t])
        if self.hkv != self.h:
            keys = keys.repeat_interleave(self.h // self.hkv, dim=1)
            values = values.repeat_interleave(self.h // self.hkv, dim=1)
        pos_q = self.offset + torch.arange(t)  # the package's mask: key position <= query position
        mask = torch.arange(keys.shape[2])[None, :] <= pos_q[:, None]
        x = F.scaled_dot_product_attention(q.transpose(1, 2), keys, values, mask)
        self.offset += t
        return self.out_proj(x.transpose(1, 2).reshape(b, t, self.h * self.d))


def hand_copy(model, whole=False):
    hand = copy.deepcopy(model)
    for layer in hand.flow_lm.transformer.layers:
        layer.self_attn = HandAttention(layer.self_attn, CAP, whole)
    return hand


def hand_step(model, text_tokens=None, backbone_input_latents=None):
    """The package's step on the hand-layout copy: its model state is empty (no StatefulModule
    is left in its flow LM), the caches are the HandAttention buffers."""
    return model._run_flow_lm_and_increment_step({}, text_tokens, backbone_input_latents)


def generate(model, frames):
    """The package's loop (as bench/models/pocket.py's): the prompt, then one LM step per frame."""
    state = init_states(model.flow_lm, batch_size=1, sequence_length=CAP)
    out = []
    with torch.no_grad():
        model._run_flow_lm_and_increment_step(model_state=state, text_tokens=PROMPT)
        x = torch.full((1, 1, model.flow_lm.ldim), float("nan"))
        for _ in range(frames):
            t0 = time.perf_counter()
            latent, eos = model._run_flow_lm_and_increment_step(model_state=state, backbone_input_latents=x)
            out.append((latent, eos, time.perf_counter() - t0))
            x = latent
    return out


def main():
    model = pocket(small=SMALL, temp=0.0)
    models = {"pkg": model, "hand": hand_copy(model), "handwhole": hand_copy(model, whole=True)}
    want = generate(model, N + 2)
    meta = {"prompt": PROMPT.reshape(-1).tolist(), "latents": [a.reshape(-1).tolist() for a, _, _ in want], "eager_step_ms": {}}
    for name, m in models.items():
        got = want if name == "pkg" else generate(m, N + 2)
        diff = max((a - b).abs().max().item() for (a, _, _), (b, _, _) in zip(want, got))
        print(f"eager: {name} vs the package's latents, max |diff| {diff:.3g}", file=sys.stderr)
        assert diff < 1e-4, (name, diff)
        meta["eager_step_ms"][name] = 1000 * sum(t for *_, t in got[2:]) / N
        if name != "pkg":
            for layer in m.flow_lm.transformer.layers:  # the exports' initial state: empty caches at offset 0
                for b in (layer.self_attn.k, layer.self_attn.v, layer.self_attn.offset):
                    b.zero_()
    for variant in VARIANTS:
        for name, m in models.items():
            if name not in WHICH:
                continue
            t0 = time.perf_counter()
            bos = torch.full((1, 1, m.flow_lm.ldim), float("nan"))
            tokens = {1: Dim("tokens", min=1, max=16)}
            if name == "pkg":  # the package's own ModelState
                state = init_states(m.flow_lm, batch_size=1, sequence_length=CAP)
                fn, prompt, step = m._run_flow_lm_and_increment_step, (state, PROMPT), (state, None, bos)
                dyn = (None, tokens)
            else:
                fn, prompt, step, dyn = functools.partial(hand_step, m), (PROMPT,), (None, bos), (tokens,)
            program = tandem.export(
                None,
                {"prompt": tandem.Method(fn, prompt, dynamic_shapes=dyn), "step": tandem.Method(fn, step)},
                quantize=None if variant == "float32" else variant,
            )
            path = OUT / f"layout_{name}{'' if variant == 'float32' else '_' + variant}.tandem"
            program.save(path)
            ops = [op.name for op in program.method("step").ops]
            meta[f"{path.stem}_step_ops"] = {k: ops.count(k) for k in sorted(set(ops))}
            print(f"{path} ({len(ops)} step ops) in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    (OUT / "layout_frames.json").write_text(json.dumps(meta))


if __name__ == "__main__":
    main()
