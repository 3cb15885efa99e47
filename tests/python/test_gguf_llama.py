"""bench/models/gguf_llama.py, the GGUF writer of the LLM benchmark: a tiny Llama written and read back
with the gguf package's reader (skipped where gguf, a benchmark requirement, is not installed)."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "models"))
import gguf_llama  # noqa: E402


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=320,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(cfg).eval()


def read(path):
    r = gguf.GGUFReader(str(path))
    return r, {t.name: t for t in r.tensors}


def test_rope_interleave_pairs_the_halves_of_each_head():
    w = np.arange(2 * 8 * 3).reshape(16, 3)  # 2 heads of dim 8, 3 inputs
    got = gguf_llama.rope_interleave(w, 2)
    for h in range(2):
        for j in range(4):
            np.testing.assert_array_equal(got[h * 8 + 2 * j], w[h * 8 + j])
            np.testing.assert_array_equal(got[h * 8 + 2 * j + 1], w[h * 8 + 4 + j])


def test_f32_file_holds_the_weights_under_llama_cpp_names(tmp_path):
    hf = tiny_llama()
    gguf_llama.write(hf, tmp_path / "m.gguf", "F32", context_length=64)
    r, t = read(tmp_path / "m.gguf")
    names = {"token_embd.weight", "output_norm.weight"} | {
        f"blk.0.{n}.weight"
        for n in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")
    }
    assert set(t) == names  # tied: no output.weight
    a = hf.model.layers[0].self_attn
    np.testing.assert_array_equal(t["blk.0.attn_v.weight"].data, a.v_proj.weight.detach().numpy())
    np.testing.assert_array_equal(t["blk.0.attn_q.weight"].data, gguf_llama.rope_interleave(a.q_proj.weight.detach().numpy(), 4))
    np.testing.assert_array_equal(t["blk.0.attn_k.weight"].data, gguf_llama.rope_interleave(a.k_proj.weight.detach().numpy(), 2))
    np.testing.assert_array_equal(t["token_embd.weight"].data, hf.model.embed_tokens.weight.detach().numpy())
    field = r.get_field("tokenizer.ggml.tokens")
    tokens = [bytes(field.parts[i]).decode() for i in field.data]
    assert len(tokens) == len(set(tokens)) == 320
    assert all(len(tokens[i]) == 1 and tokens[i] == gguf_llama.piece(i) for i in range(gguf_llama.FIRST, 320))
    assert r.get_field("llama.attention.head_count_kv").contents() == 2


# the largest error per block, as a fraction of the block's max |w|: half a step of max/127 for
# Q8_0; for Q4_0 (codes -8..7 times a scale of -max/8 signed by the largest weight) a whole step of
# max/8, at a weight of the opposite sign to the largest, whose -8 clamps to 7
@pytest.mark.parametrize("qtype, worst", [("Q8_0", 0.5 / 127), ("Q4_0", 1 / 8)])
def test_quantized_matrices_dequantize_to_the_weights(tmp_path, qtype, worst):
    hf = tiny_llama()
    gguf_llama.write(hf, tmp_path / "m.gguf", qtype, context_length=64)
    _, t = read(tmp_path / "m.gguf")
    w = hf.model.layers[0].mlp.down_proj.weight.detach().numpy()  # [64, 96]: 3 blocks of 32 per row
    got = gguf.quants.dequantize(t["blk.0.ffn_down.weight"].data, getattr(gguf.GGMLQuantizationType, qtype)).reshape(w.shape)
    amax = np.abs(w.reshape(64, 3, 32)).max(axis=2, keepdims=True)
    assert (np.abs(got - w).reshape(64, 3, 32) <= amax * (worst + 1e-3)).all()  # + the float16 scale's rounding
    assert t["blk.0.ffn_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
