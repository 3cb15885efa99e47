"""transformers models as they ship, through tandem.transformers.export_causal_lm and through
tandem.export on transformers' own static-cache module: small seeded random-weight configs (no
downloads), natively, against the same model run over the whole sequence in eager."""

import pytest
import torch

import tandem
import tandem.transformers as tt

transformers = pytest.importorskip("transformers")

SMALL = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64)


def _llama():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL, num_key_value_heads=2, tie_word_embeddings=True))


def _llama_eager():
    """Attention written out (eager_attention_forward: repeat_kv, matmul, softmax, matmul)."""
    return transformers.LlamaForCausalLM(
        transformers.LlamaConfig(**SMALL, num_key_value_heads=2, tie_word_embeddings=True, attn_implementation="eager")
    )


def _qwen2():
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**SMALL, num_key_value_heads=2))


def _gemma():
    return transformers.GemmaForCausalLM(transformers.GemmaConfig(**SMALL, num_key_value_heads=1, head_dim=8))


def _phi3():
    return transformers.Phi3ForCausalLM(transformers.Phi3Config(**SMALL, num_key_value_heads=4, pad_token_id=0))


def _gpt2():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64))


FAMILIES = {"llama_gqa": _llama, "llama_eager": _llama_eager, "qwen2": _qwen2, "gemma_mqa": _gemma, "phi3": _phi3, "gpt2": _gpt2}


def _model(family):
    torch.manual_seed(0)
    return FAMILIES[family]().eval()


def _full_logits(model, tokens):
    with torch.no_grad():
        return model(tokens).logits[0]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_causal_lm_recipe_matches_eager(family):
    model = _model(family)
    program = tt.export_causal_lm(model, max_cache_len=32, max_prompt_len=8)
    m = tandem.load(program.to_bytes())
    g = torch.Generator().manual_seed(1)
    a, b = torch.randint(0, 64, (1, 20), generator=g), torch.randint(0, 64, (1, 12), generator=g)
    want_a, want_b = _full_logits(model, a), _full_logits(model, b)
    # prefills of 4, 1 and 2 tokens (one method, a dynamic length); then decodes
    assert m.dims["prefill"] == {"n": (1, 8)} and "prefill_8" not in m.methods
    pos = 0
    for n in (4, 1, 2):
        got = m.prefill(a[:, pos : pos + n])
        pos += n
        torch.testing.assert_close(got[0], want_a[pos - 1])
    for i in range(7, 20):
        torch.testing.assert_close(m.decode(a[:, i : i + 1])[0], want_a[i])
    m.reset()
    torch.testing.assert_close(m.prefill(b[:, :8])[0], want_b[7])
    for i in range(8, 12):
        torch.testing.assert_close(m.decode(b[:, i : i + 1])[0], want_b[i])


def test_writing_past_the_cache_fails_with_the_state_unchanged():
    model = _model("llama_gqa")
    m = tandem.load(tt.export_causal_lm(model, max_cache_len=10, max_prompt_len=8).to_bytes())
    tokens = torch.randint(0, 64, (1, 10))
    m.prefill(tokens[:, :8])
    m.prefill(tokens[:, 8:10])  # exactly full
    before = [m.read_state(f"cache.layers.{i}.{k}").clone() for i in range(2) for k in ("keys", "values", "cumulative_length")]
    with pytest.raises(tandem.TandemError) as e:
        m.decode(tokens[:, :1])
    assert e.value.code == "TDM_ERR_INDEX"
    with pytest.raises(tandem.TandemError) as e:
        m.prefill(tokens[:, :3])
    assert e.value.code == "TDM_ERR_INDEX"
    after = [m.read_state(f"cache.layers.{i}.{k}") for i in range(2) for k in ("keys", "values", "cumulative_length")]
    for x, y in zip(before, after):
        assert torch.equal(x, y)


def test_decode_writes_only_new_rows_and_never_repeats_kv():
    """Every layer's cache is updated in place (row writes), grouped KV heads are read, not copied."""
    model = _model("llama_gqa")
    program = tt.export_causal_lm(model, max_cache_len=256, max_prompt_len=4)
    decode = program.method("decode")
    names = [op.name for op in decode.ops]
    assert "expand" not in names and names.count("attention") == 2
    cache_numel = 2 * 256 * 8
    row_updates = 0
    for op in decode.ops:
        for v in op.outs:
            if v.numel >= cache_numel:
                assert op.name == "index_put" and v.storage.kind == 2 and op.ins[0].storage.state is v.storage.state
                row_updates += 1
    assert row_updates == 4  # K and V of both layers


def test_eager_attention_decodes_over_the_kv_heads():
    """transformers' eager attention (repeat_kv, matmul, softmax, matmul) exports as one attention op
    per layer over the KV heads: no expand, no matmul over the cache, and no op in decode writes a
    tensor the size of a layer's cache except the in-place row updates; prefill materializes no
    [heads, n, capacity] scores. Values: test_causal_lm_recipe_matches_eager[llama_eager]."""
    model = _model("llama_eager")
    assert model.config._attn_implementation == "eager"
    program = tt.export_causal_lm(model, max_cache_len=256, max_prompt_len=8)
    cache_numel = 2 * 256 * 8  # one layer's K: [1, Hkv, 256, head dim]
    for method in ("decode", "prefill"):
        ops = program.method(method).ops
        names = [op.name for op in ops]
        assert names.count("attention") == 2 and "expand" not in names and "softmax" not in names and "matmul" not in names
        for op in ops:
            if op.name == "attention":
                q, k, v = op.ins[:3]
                assert q.shape[1] == 4 and k.shape[1] == v.shape[1] == 2 and op.outs[1].numel == 2 * 256  # 2 query heads per KV head
            for v in op.outs:
                if v.numel >= cache_numel:
                    assert op.name == "index_put" and v.storage.kind == 2 and op.ins[0].storage.state is v.storage.state


def test_transformers_static_cache_module_exports_as_shipped():
    """transformers' own TorchExportableModuleWithStaticCache: its cache tensors are held by the
    StaticCache object (and registered as buffers): they become state, shared by the methods."""
    from transformers import GenerationConfig
    from transformers.integrations.executorch import TorchExportableModuleWithStaticCache

    model = _model("llama_gqa")
    model.generation_config = GenerationConfig(
        use_cache=True, cache_implementation="static", cache_config={"batch_size": 1, "max_cache_len": 32}
    )
    wrapper = TorchExportableModuleWithStaticCache(model, batch_size=1, max_cache_len=32)
    step = tandem.Method(wrapper, (torch.zeros(1, 1, dtype=torch.long), None, torch.zeros(1, dtype=torch.long)))
    program = tandem.export(None, {"step": step})
    assert {s.name for s in program.states} >= {"key_cache_0", "value_cache_1", "cumulative_length_0"}
    m = tandem.load(program.to_bytes())
    tokens = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(2))
    want = _full_logits(model, tokens)
    for i in range(6):
        torch.testing.assert_close(m.step(tokens[:, i : i + 1], torch.tensor([i]))[0, -1], want[i])


def test_metadata_is_stored_and_prefill_runs_any_prompt_length():
    model = _model("qwen2")
    program = tt.export_causal_lm(model, max_cache_len=32, max_prompt_len=8, metadata={"chat_template": "<|{role}|>"})
    m = tandem.load(program.to_bytes())
    assert m.metadata == program.metadata
    assert m.metadata["max_cache_len"] == 32 and m.metadata["max_prompt_len"] == 8 and "prefill_chunks" not in m.metadata
    assert m.metadata["model_type"] == "qwen2" and m.metadata["chat_template"] == "<|{role}|>"
    assert m.metadata["sample_top_k"] == 64 and "decode_topk" in m.methods  # the default K
    tokens = torch.randint(0, 64, (1, 7), generator=torch.Generator().manual_seed(5))
    want = _full_logits(model, tokens)
    torch.testing.assert_close(tt.prefill(m, tokens)[0], want[6])  # one prefill of 7
    assert int(m.read_state(m.metadata["position_state"])) == 7
    with pytest.raises(tandem.TandemError) as e:  # longer than max_prompt_len is fed in pieces, if it fits
        tt.prefill(m, torch.zeros(1, 30, dtype=torch.long))
    assert e.value.code == "TDM_ERR_INDEX" and int(m.read_state(m.metadata["position_state"])) == 7


def test_decode_topk_appends_like_decode_and_returns_the_k_best_logits():
    """decode_topk shares decode's state and returns float32 values and int64 ids: decode's logits
    sorted largest first, equal values by the lower id, cut to K."""
    model = _model("llama_gqa")
    program = tt.export_causal_lm(model, max_cache_len=32, max_prompt_len=8, sample_top_k=10)
    assert program.metadata["sample_top_k"] == 10
    full, top = tandem.load(program.to_bytes()), tandem.load(program.to_bytes())
    tokens = torch.randint(0, 64, (1, 12), generator=torch.Generator().manual_seed(3))
    want = _full_logits(model, tokens)
    full.prefill(tokens[:, :4])
    top.prefill(tokens[:, :4])
    for i in range(4, 12):
        logits = full.decode(tokens[:, i : i + 1])
        values, ids = top.decode_topk(tokens[:, i : i + 1])
        assert (values.dtype, ids.dtype, values.shape, ids.shape) == (torch.float32, torch.int64, (1, 10), (1, 10))
        order = torch.sort(logits, dim=-1, descending=True, stable=True)
        assert torch.equal(ids, order.indices[:, :10]) and torch.equal(values, order.values[:, :10])
        torch.testing.assert_close(values[0], want[i][ids[0]])
    assert int(top.read_state(top.metadata["position_state"])) == 12
    # K is at most the vocabulary; None: no decode_topk
    assert tt.export_causal_lm(model, max_cache_len=8, max_prompt_len=4, sample_top_k=1000).metadata["sample_top_k"] == 64
    plain = tt.export_causal_lm(model, max_cache_len=8, max_prompt_len=4, sample_top_k=None)
    assert "sample_top_k" not in plain.metadata and [m.name for m in plain.methods] == ["prefill", "decode", "reset"]
    with pytest.raises(tandem.ExportError, match="sample_top_k must be a positive int"):
        tt.export_causal_lm(model, max_cache_len=8, max_prompt_len=4, sample_top_k=0)


def test_metadata_values_must_be_json_data():
    module = torch.nn.Linear(2, 2)
    with pytest.raises(tandem.ExportError, match="metadata 'bad'"):
        tandem.export(module, {"forward": (torch.ones(2),)}, metadata={"bad": torch.ones(1)})
    program = tandem.export(module, {"forward": (torch.ones(2),)}, metadata={"n": 3, "xs": [1.5, "a", None, True]})
    assert tandem.load(program.to_bytes()).metadata == {"n": 3, "xs": [1.5, "a", None, True]}


# Whisper (encoder-decoder) and Mamba (recurrent state), natively and on the wasm backend (the same
# tandem.wasm the browser runs, through wasmtime).


def _whisper():
    torch.manual_seed(0)
    config = transformers.WhisperConfig(
        vocab_size=64,
        num_mel_bins=8,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_source_positions=16,
        max_target_positions=32,
        decoder_start_token_id=3,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    return transformers.WhisperForConditionalGeneration(config).eval()


def _whisper_eager(model, features, tokens):
    with torch.no_grad():
        return model(input_features=features, decoder_input_ids=tokens).logits[0]


def test_seq2seq_recipe_matches_eager(backend):
    model = _whisper()
    program = tt.export_seq2seq(model, max_cache_len=12)
    m = tandem.load(program.to_bytes())
    assert list(m.methods) == ["encode", "decode", "reset"]
    md = m.metadata
    assert (md["model_type"], md["vocab_size"], md["max_cache_len"], md["num_layers"]) == ("whisper", 64, 12, 2)
    assert (md["bos_token_id"], md["eos_token_id"], md["decoder_start_token_id"]) == (1, 2, 3)
    assert md["encoder_input_shape"] == [1, 8, 32]
    g = torch.Generator().manual_seed(1)
    audio = [torch.randn(1, 8, 32, generator=g) for _ in range(2)]
    text = [torch.cat([torch.tensor([[3]]), torch.randint(4, 64, (1, 9), generator=g)], dim=1) for _ in range(2)]
    # encode, decodes; encode new audio (restarts the decode), decodes; reset, encode, decodes
    for k, n in ((0, 10), (1, 6), (0, 4)):
        if n == 4:
            m.reset()
            for s in program.states:
                assert not m.read_state(s.name).any(), s.name
        m.encode(audio[k])
        assert int(m.read_state(md["position_state"])) == 0
        want = _whisper_eager(model, audio[k], text[k][:, :n])
        for i in range(n):
            torch.testing.assert_close(m.decode(text[k][:, i : i + 1])[0], want[i], msg=lambda s: f"audio {k} token {i}: {s}")
        assert int(m.read_state(md["position_state"])) == n


def test_seq2seq_reset_empties_every_cache_and_a_full_cache_fails_with_the_state_unchanged(backend):
    model = _whisper()
    program = tt.export_seq2seq(model, max_cache_len=4)
    m = tandem.load(program.to_bytes())
    names = [s.name for s in program.states]
    assert any("cross_attention_cache" in n for n in names) and any("self_attention_cache" in n for n in names)
    features = torch.randn(1, 8, 32, generator=torch.Generator().manual_seed(3))
    tokens = torch.tensor([[3, 7, 9, 11]])
    m.encode(features)
    for i in range(4):
        m.decode(tokens[:, i : i + 1])
    before = {n: m.read_state(n).clone() for n in names}
    with pytest.raises(tandem.TandemError) as e:
        m.decode(tokens[:, :1])
    assert e.value.code == "TDM_ERR_INDEX"
    for n in names:
        assert torch.equal(m.read_state(n), before[n]), n
    m.reset()
    for n in names:
        assert not m.read_state(n).any(), n
    m.encode(features)  # a new decode after a full one: the same logits as the first time
    want = _whisper_eager(model, features, tokens)
    torch.testing.assert_close(m.decode(tokens[:, :1])[0], want[0])


def test_seq2seq_recipe_refuses_what_it_cannot_export():
    with pytest.raises(tandem.ExportError, match="max_target_positions=32"):
        tt.export_seq2seq(_whisper(), max_cache_len=33)
    with pytest.raises(tandem.ExportError, match="LlamaForCausalLM is not an encoder-decoder"):
        tt.export_seq2seq(_model("llama_gqa"), max_cache_len=8)


def _mamba():
    torch.manual_seed(0)
    config = transformers.MambaConfig(
        vocab_size=64, hidden_size=32, state_size=8, num_hidden_layers=2, conv_kernel=4, expand=2, time_step_rank=4, eos_token_id=2
    )
    model = transformers.MambaForCausalLM(config).eval()
    with torch.no_grad():  # matrices large enough that the logits differ clearly from token to token
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
    return model


def test_mamba_through_the_causal_lm_recipe_matches_eager(backend):
    model = _mamba()
    program = tt.export_causal_lm(model, max_cache_len=None, max_prompt_len=8)
    assert {s.name for s in program.states} == {"position", "states.0.conv", "states.0.ssm", "states.1.conv", "states.1.ssm"}
    m = tandem.load(program.to_bytes())
    md = m.metadata
    assert (md["model_type"], md["max_cache_len"], md["eos_token_id"]) == ("mamba", None, 2) and "prefill_chunks" not in md
    assert list(m.methods) == ["prefill", "decode", "decode_topk", "reset"] and m.dims["prefill"] == {"n": (1, 8)}
    g = torch.Generator().manual_seed(1)
    a, b = torch.randint(0, 64, (1, 30), generator=g), torch.randint(0, 64, (1, 12), generator=g)
    with torch.no_grad():  # eager over the whole sequence at once (transformers' own slow path)
        want_a, want_b = model(a, use_cache=False).logits[0], model(b, use_cache=False).logits[0]
    # prompts of 7, 8 and 1 tokens through the one prefill, each continuing the last; then decodes
    torch.testing.assert_close(tt.prefill(m, a[:, :7])[0], want_a[6])
    torch.testing.assert_close(m.prefill(a[:, 7:15])[0], want_a[14])
    torch.testing.assert_close(m.prefill(a[:, 15:16])[0], want_a[15])
    assert int(m.read_state("position")) == 16  # the steps past each prompt were undone
    for i in range(16, 30):
        torch.testing.assert_close(m.decode(a[:, i : i + 1])[0], want_a[i], msg=lambda s: f"token {i}: {s}")
    assert int(m.read_state("position")) == 30
    m.reset()
    assert int(m.read_state("position")) == 0 and not m.read_state("states.1.ssm").any()
    torch.testing.assert_close(m.prefill(b[:, :8])[0], want_b[7])
    for i in range(8, 11):
        torch.testing.assert_close(m.decode(b[:, i : i + 1])[0], want_b[i])
    values, ids = m.decode_topk(b[:, 11:12])  # K = 64, the whole vocabulary, sorted
    assert md["sample_top_k"] == 64 and ids.dtype == torch.int64 and sorted(ids[0].tolist()) == list(range(64))
    torch.testing.assert_close(values[0], want_b[11][ids[0]])
    assert torch.all(values[0, :-1] >= values[0, 1:])


def test_causal_lm_recipe_says_which_max_cache_len_a_model_needs():
    # a Mamba LM takes max_cache_len like every family (tests/python/test_tracing.py); a KV-cache LM needs one
    with pytest.raises(tandem.ExportError, match="KV cache"):
        tt.export_causal_lm(_model("llama_gqa"), max_cache_len=None, max_prompt_len=8)


def test_transformers_is_imported_only_when_a_recipe_is_called():
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys; import tandem, tandem.transformers, tandem.export; "
        "print(sorted(m for m in sys.modules if m == 'transformers' or m.startswith('transformers.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "python"), "PATH": ""},
    )
    assert out.stdout.strip() == "[]"
