"""Writes a transformers LlamaForCausalLM as a GGUF file of llama.cpp's `llama` architecture, with
the gguf package's writer and its quants module (for @wllama/wllama in bench/suite/llm.mjs).

What llama.cpp expects, and what this writes:
- tensors `token_embd`, `output_norm`, and per block `attn_norm`, `attn_q`/`attn_k`/`attn_v`/
  `attn_output`, `ffn_norm`, `ffn_gate`/`ffn_up`/`ffn_down` (`.weight`), each [out, in] as
  nn.Linear holds it; no `output` tensor when the embeddings are tied (llama.cpp then reads
  `token_embd` as the output head, as for SmolLM);
- q and k rows reordered per head from transformers' rotate-half rotary layout (dims i and
  i + head_dim/2 form a pair) to the interleaved pairs (2i, 2i + 1) of llama.cpp's `llama` rope;
- matrices in F32, Q8_0 or Q4_0 (blocks of 32 along the input dim: one float16 scale each; Q4_0
  codes in [-8, 7]); the norms' vectors stay F32, as llama.cpp's own converter leaves them;
- a synthetic SentencePiece-style vocabulary of the model's size: <unk>, <s>, </s>, the 256 byte
  tokens, then one CJK ideograph per token (`piece(i)`; no space prefix). llama.cpp will not load a
  model without a vocabulary, and @wllama/wllama 3 takes prompts as text only: with one character
  per token, which no merge joins (no two-character piece exists), a prompt of token ids is written
  as the string of their pieces and tokenizes back to exactly those ids (bench/suite/llm-page.js writes
  them the same way and checks the prompt's token count).
"""

from pathlib import Path

import numpy as np

QTYPES = {"F32": ("F32", "ALL_F32"), "Q8_0": ("Q8_0", "MOSTLY_Q8_0"), "Q4_0": ("Q4_0", "MOSTLY_Q4_0")}


def rope_interleave(w: np.ndarray, heads: int) -> np.ndarray:
    """[heads·head_dim, in] rows of a q or k projection: per head, row j of the first half and row
    j of the second half become rows 2j and 2j + 1."""
    rows = w.shape[0]
    return w.reshape(heads, 2, rows // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


FIRST = 259  # token ids below: <unk>, <s>, </s> and the 256 byte tokens
EXT_B = 0x2A6E0 - 0x20000  # CJK Unified Ideographs Extension B, U+20000..U+2A6DF


def piece(i: int) -> str:
    """Token i's piece (i >= FIRST): U+20000 + (i - FIRST) through Extension B, then U+4E00 on."""
    j = i - FIRST
    return chr(0x20000 + j if j < EXT_B else 0x4E00 + j - EXT_B)


def vocabulary(n: int) -> tuple[list[str], list[float], list[int]]:
    """A synthetic SentencePiece vocabulary of n tokens: (pieces, scores, token types)."""
    import gguf

    T = gguf.TokenType
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [T.UNKNOWN, T.CONTROL, T.CONTROL] + [T.BYTE] * 256
    if n < len(pieces):
        raise ValueError(f"a vocabulary of {n} tokens has no room for the 259 special and byte tokens")
    if n - FIRST > EXT_B + (0x9FFF - 0x4E00 + 1):
        raise ValueError(f"a vocabulary of {n} tokens has more tokens than the ideographs piece() uses")
    pieces += [piece(i) for i in range(FIRST, n)]
    types += [T.NORMAL] * (n - len(types))
    return pieces, [-float(i) for i in range(n)], [int(t) for t in types]


def write(hf, path: Path, qtype: str = "F32", context_length: int = 2048) -> None:
    """Writes `hf` (a LlamaForCausalLM with tied embeddings) to `path` with its matrices in `qtype`
    ("F32", "Q8_0" or "Q4_0")."""
    import gguf

    tensor_type, file_type = QTYPES[qtype]
    qt = getattr(gguf.GGMLQuantizationType, tensor_type)
    cfg = hf.config
    if not cfg.tie_word_embeddings:
        raise ValueError("gguf_llama.write writes tied embeddings only (no output.weight)")
    H, Hkv, D = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("smollm-135m-shape-random")
    w.add_context_length(context_length)
    w.add_embedding_length(D)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(H)
    w.add_head_count_kv(Hkv)
    w.add_rope_dimension_count(D // H)
    w.add_rope_freq_base(float(cfg.rope_theta if hasattr(cfg, "rope_theta") else cfg.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(float(cfg.rms_norm_eps))
    w.add_vocab_size(cfg.vocab_size)
    w.add_file_type(getattr(gguf.LlamaFileType, file_type))
    pieces, scores, types = vocabulary(cfg.vocab_size)
    w.add_tokenizer_model("llama")
    w.add_token_list(pieces)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(False)
    w.add_add_space_prefix(False)

    def put(name: str, t) -> None:
        a = t if isinstance(t, np.ndarray) else t.detach().to("cpu").float().numpy()
        if a.ndim == 2 and qt != gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, gguf.quants.quantize(a, qt), raw_dtype=qt)
        else:
            w.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))

    m = hf.model
    put("token_embd.weight", m.embed_tokens.weight)
    put("output_norm.weight", m.norm.weight)
    for i, layer in enumerate(m.layers):
        a, f = layer.self_attn, layer.mlp
        put(f"blk.{i}.attn_norm.weight", layer.input_layernorm.weight)
        put(f"blk.{i}.attn_q.weight", rope_interleave(a.q_proj.weight.detach().float().numpy(), H))
        put(f"blk.{i}.attn_k.weight", rope_interleave(a.k_proj.weight.detach().float().numpy(), Hkv))
        put(f"blk.{i}.attn_v.weight", a.v_proj.weight)
        put(f"blk.{i}.attn_output.weight", a.o_proj.weight)
        put(f"blk.{i}.ffn_norm.weight", layer.post_attention_layernorm.weight)
        put(f"blk.{i}.ffn_gate.weight", f.gate_proj.weight)
        put(f"blk.{i}.ffn_up.weight", f.up_proj.weight)
        put(f"blk.{i}.ffn_down.weight", f.down_proj.weight)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
