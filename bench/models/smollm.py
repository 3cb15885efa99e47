"""The SmolLM-135M-shaped benchmark model: a transformers LlamaForCausalLM (30 layers, width 576,
9 heads over 3 KV heads, MLP 1536, vocabulary 49152, tied embeddings) with seeded random float32
weights, exported twice from the same weights:

- smollm.tandem: tandem.transformers.export_causal_lm(max_cache_len=512, max_prompt_len=128), the
  static KV cache as state;
- smollm.onnx: one decode step for onnxruntime-web, with the KV cache as inputs and outputs the way
  Optimum / transformers.js export decoder LMs (past_key_values.<i>.key / .value [1, 3, P, 64] in,
  present.<i>.key / .value [1, 3, P + 1, 64] out, P dynamic, position_ids in), grouped-query
  attention as a broadcast matmul (no repeated KV heads);
- smollm.json: what the benchmark needs to know (weight bytes read per token, new KV bytes per
  token, the state's names).

    python bench/models/smollm.py OUT_DIR [--tandem-only] [--layers N]   (also called by bench/models/make_models.py)
"""

import json
import sys
import time
import warnings
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "python")]
warnings.filterwarnings("ignore")

CONFIG = dict(
    num_hidden_layers=30,
    hidden_size=576,
    num_attention_heads=9,
    num_key_value_heads=3,
    intermediate_size=1536,
    vocab_size=49152,
    tie_word_embeddings=True,
    max_position_embeddings=2048,
    rope_theta=10000.0,
    rms_norm_eps=1e-5,
    bos_token_id=1,
    eos_token_id=2,
)
MAX_CACHE, MAX_PROMPT = 512, 128


def make_model(layers: int | None = None):
    """The benchmark model (seeded: every call gives the same weights); `layers` overrides the
    depth for quick runs while developing the benchmark (`--layers N`)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**{**CONFIG, **({"num_hidden_layers": layers} if layers else {})})).eval().float()


class StepIO(nn.Module):
    """One decode step of a LlamaForCausalLM with the KV cache passed in and out (for ONNX)."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, token, position_ids, *past):
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        m, cfg = self.hf.model, self.hf.config
        H, Hkv = cfg.num_attention_heads, cfg.num_key_value_heads
        Dh = cfg.hidden_size // H
        x = m.embed_tokens(token)  # [1, 1, D]
        cos, sin = m.rotary_emb(x, position_ids)
        present = []
        for i, layer in enumerate(m.layers):
            a = layer.self_attn
            h = layer.input_layernorm(x)
            q = a.q_proj(h).view(1, 1, H, Dh).transpose(1, 2)
            k = a.k_proj(h).view(1, 1, Hkv, Dh).transpose(1, 2)
            v = a.v_proj(h).view(1, 1, Hkv, Dh).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            kc, vc = torch.cat([past[2 * i], k], dim=2), torch.cat([past[2 * i + 1], v], dim=2)  # [1, Hkv, P + 1, Dh]
            qg = q.reshape(1, Hkv, H // Hkv, Dh)  # query heads grouped by the KV head they read
            w = torch.softmax(qg @ kc.transpose(2, 3) * a.scaling, dim=-1)
            y = (w @ vc).reshape(1, H, 1, Dh).transpose(1, 2).reshape(1, 1, H * Dh)
            x = x + a.o_proj(y)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
            present += [kc, vc]
        return (self.hf.lm_head(m.norm(x)), *present)  # logits [1, 1, V], as Optimum's (transformers.js slices [:, -1])


class PrefillIO(nn.Module):
    """A prompt of n tokens (n dynamic) into an empty KV cache, returning the last position's
    logits and the cache (present.<i>.key / .value [1, 3, n, 64]) for the decode step above: the
    prefill onnxruntime-web runs (bench/suite/threads.mjs times it beside tandem's)."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, tokens, position_ids):
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        m, cfg = self.hf.model, self.hf.config
        H, Hkv = cfg.num_attention_heads, cfg.num_key_value_heads
        Dh = cfg.hidden_size // H
        n = tokens.shape[1]
        x = m.embed_tokens(tokens)  # [1, n, D]
        cos, sin = m.rotary_emb(x, position_ids)
        pos = torch.arange(n)
        causal = pos[None, :] <= pos[:, None]  # [n, n]: query i sees keys 0..i
        present = []
        for layer in m.layers:
            a = layer.self_attn
            h = layer.input_layernorm(x)
            q = a.q_proj(h).view(1, n, H, Dh).transpose(1, 2)
            k = a.k_proj(h).view(1, n, Hkv, Dh).transpose(1, 2)
            v = a.v_proj(h).view(1, n, Hkv, Dh).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            qg = q.reshape(1, Hkv, H // Hkv, n, Dh)  # query heads grouped by their KV head
            s = (qg @ k.unsqueeze(2).transpose(3, 4)) * a.scaling  # [1, Hkv, G, n, n]
            w = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)
            y = (w @ v.unsqueeze(2)).reshape(1, H, n, Dh).transpose(1, 2).reshape(1, n, H * Dh)
            x = x + a.o_proj(y)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
            present += [k, v]
        return (self.hf.lm_head(m.norm(x[:, -1:]))[:, -1], *present)


def export_onnx_prefill(hf, path):
    cfg = hf.config
    L = cfg.num_hidden_layers
    g = torch.Generator().manual_seed(2)
    prompt = torch.randint(0, cfg.vocab_size, (1, 11), generator=g)
    with torch.no_grad():
        want = hf(input_ids=prompt).logits[:, -1]
        got = PrefillIO(hf)(prompt, torch.arange(11)[None])[0]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    names_out = [f"present.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
    with torch.no_grad():
        torch.onnx.export(
            PrefillIO(hf),
            (torch.zeros(1, 4, dtype=torch.long), torch.arange(4)[None]),
            str(path),
            dynamo=False,
            opset_version=17,
            input_names=["input_ids", "position_ids"],
            output_names=["logits", *names_out],
            dynamic_axes={"input_ids": {1: "n"}, "position_ids": {1: "n"}, **{o: {2: "n"} for o in names_out}},
        )


def export_onnx(hf, path):
    cfg = hf.config
    L, Hkv, Dh = cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
    # check the step against transformers' own cached forward before exporting it
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, cfg.vocab_size, (1, 9), generator=g)
    with torch.no_grad():
        out = hf(input_ids=prompt[:, :8], use_cache=True)
        past = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
        want = hf(input_ids=prompt[:, 8:], past_key_values=out.past_key_values, use_cache=True).logits[:, -1:]
        got = StepIO(hf)(prompt[:, 8:], torch.tensor([[8]]), *past)[0]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    names_in = [f"past_key_values.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
    names_out = [f"present.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
    past = [torch.randn(1, Hkv, 8, Dh) for _ in names_in]
    with torch.no_grad():
        torch.onnx.export(
            StepIO(hf),
            (torch.zeros(1, 1, dtype=torch.long), torch.tensor([[8]]), *past),
            str(path),
            dynamo=False,
            opset_version=17,
            input_names=["input_ids", "position_ids", *names_in],
            output_names=["logits", *names_out],
            dynamic_axes={**{n: {2: "past"} for n in names_in}, **{n: {2: "past_1"} for n in names_out}},
        )


def write_transformers_js(hf, out: Path):
    """The folder transformers.js loads smollm.onnx from offline (bench/suite/webgpu-page.js:
    env.localModelPath, no hub): smollm-tjs/config.json and generation_config.json from the model's
    own configs, onnx/model.onnx a link to smollm.onnx (its fp32 file name)."""
    d = out / "smollm-tjs"
    (d / "onnx").mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(hf.config.to_json_string())
    (d / "generation_config.json").write_text(hf.generation_config.to_json_string())
    link = d / "onnx" / "model.onnx"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(Path("..") / ".." / "smollm.onnx")


def main(out: Path, onnx: bool = True, layers: int | None = None):
    import tandem
    import tandem.transformers

    out.mkdir(parents=True, exist_ok=True)
    hf = make_model(layers)
    cfg = hf.config
    t0 = time.time()
    program = tandem.transformers.export_causal_lm(hf, max_cache_len=MAX_CACHE, max_prompt_len=MAX_PROMPT)
    program.save(out / "smollm.tandem")
    t1 = time.time()
    if onnx:
        export_onnx(hf, out / "smollm.onnx")
        export_onnx_prefill(hf, out / "smollm_prefill.onnx")
        write_transformers_js(hf, out)
    t2 = time.time()
    L, Hkv, Dh = cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
    params = {id(p): p for p in hf.parameters()}  # the tied table once
    info = {
        "config": {**CONFIG, "num_hidden_layers": L},
        "max_cache_len": MAX_CACHE,
        "max_prompt_len": MAX_PROMPT,
        "parameters": sum(p.numel() for p in params.values()),
        # every weight is read once per token; the embedding table too (as the tied output head;
        # its lookup reads one row more)
        "weight_bytes_per_token": 4 * sum(p.numel() for p in params.values()),
        "untied_weight_bytes": 4 * sum(p.numel() for p in hf.state_dict().values()),
        "new_kv_bytes_per_token": L * 2 * Hkv * Dh * 4,
        "positions": [s.name for s in program.states if "cumulative_length" in s.name],
        "export_seconds": {"tandem": round(t1 - t0, 1), "onnx": round(t2 - t1, 1)},
    }
    (out / "smollm.json").write_text(json.dumps(info, indent=1))
    print(f"smollm: tandem export {t1 - t0:.0f} s, onnx {t2 - t1:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    args = sys.argv[1:]
    layers = int(args[args.index("--layers") + 1]) if "--layers" in args else None
    paths = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] != "--layers")]
    main(Path(paths[0] if paths else "build/bench"), onnx="--tandem-only" not in args, layers=layers)
