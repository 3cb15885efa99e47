"""transformers families through the recipes, found from the models' own cache classes: encoder-decoders
over an EncoderDecoderCache (T5, BART, Marian, Pegasus with token ids; Speech2Text with features) and
recurrent LMs over transformers' linear-attention cache layers (Mamba2, FalconMamba), each a tiny seeded
config, natively and on the wasm backend, over call sequences against eager PyTorch on whole sequences.
Families whose state is not a transformers Cache (XLNet's growing mems, xLSTM) are refused by name
without a max_cache_len (with one they go through the uncached recipe: test_uncached_lm.py);
RWKV's state, a forward argument of fixed shapes, is program state."""

import functools

import pytest
import torch

import tandem
import tandem.transformers as tt
from tandem.recipes.causal_lm import is_recurrent

transformers = pytest.importorskip("transformers")


# ---- encoder-decoders ----------------------------------------------------------------------------

BART_LIKE = dict(
    vocab_size=64,
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_position_embeddings=32,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
    decoder_start_token_id=2,
)

SEQ2SEQ = {
    "t5": lambda: transformers.T5ForConditionalGeneration(
        transformers.T5Config(
            vocab_size=64,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            relative_attention_num_buckets=8,
            decoder_start_token_id=0,
            pad_token_id=0,
            eos_token_id=1,
        )
    ),
    "bart": lambda: transformers.BartForConditionalGeneration(transformers.BartConfig(**BART_LIKE)),
    "marian": lambda: transformers.MarianMTModel(transformers.MarianConfig(**BART_LIKE)),
    "pegasus": lambda: transformers.PegasusForConditionalGeneration(transformers.PegasusConfig(**BART_LIKE)),
    "speech_to_text": lambda: transformers.Speech2TextForConditionalGeneration(
        transformers.Speech2TextConfig(
            vocab_size=64,
            d_model=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            max_source_positions=64,
            max_target_positions=32,
            input_feat_per_channel=8,
            input_channels=1,
            conv_channels=16,
            num_conv_layers=2,
            decoder_start_token_id=2,
            pad_token_id=1,
            eos_token_id=2,
            bos_token_id=0,
        )
    ),
    # FSMT builds no self-attention mask over a cache (its adapter gives the one a dynamic cache implies)
    "fsmt": lambda: transformers.FSMTForConditionalGeneration(
        transformers.FSMTConfig(
            **{k: v for k, v in BART_LIKE.items() if k not in ("vocab_size", "decoder_start_token_id")},
            langs=["en", "de"],
            src_vocab_size=64,
            tgt_vocab_size=64,
            decoder_start_token_id=2,
        )
    ),
    # LED pads its source to a multiple of its local attention's window and takes overlapping chunks (as_strided)
    "led": lambda: transformers.LEDForConditionalGeneration(
        transformers.LEDConfig(
            **{k: v for k, v in BART_LIKE.items() if k != "max_position_embeddings"},
            attention_window=[8, 8],
            max_encoder_position_embeddings=32,
            max_decoder_position_embeddings=32,
        )
    ),
    # a mixture of experts routed top-1 (its adapter: no module swap, every expert on every token, masked);
    # a capacity above any call's tokens, so that no token is dropped in eager's whole sequence either
    "switch_transformers": lambda: transformers.SwitchTransformersForConditionalGeneration(
        transformers.SwitchTransformersConfig(
            vocab_size=64,
            d_model=32,
            d_kv=8,
            d_ff=64,
            expert_capacity=64,
            num_layers=2,
            num_sparse_encoder_layers=1,
            num_decoder_layers=2,
            num_sparse_decoder_layers=1,
            num_heads=4,
            num_experts=4,
            relative_attention_num_buckets=8,
            decoder_start_token_id=0,
            pad_token_id=0,
            eos_token_id=1,
        )
    ),
    # a BERT encoder and a BERT decoder: the decoder's positions given from the cache length
    "encoder-decoder": lambda: _bert2bert(),
}
MAX_SOURCE, FEATURES = 16, (1, 24, 8)


def _bert2bert():
    bert = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, max_position_embeddings=32)
    config = transformers.EncoderDecoderConfig.from_encoder_decoder_configs(
        transformers.BertConfig(**bert), transformers.BertConfig(**bert, is_decoder=True, add_cross_attention=True)
    )
    config.decoder_start_token_id, config.pad_token_id = 2, 0
    return transformers.EncoderDecoderModel(config=config)


def _seeded(make):
    torch.manual_seed(0)
    return make().eval()


@functools.lru_cache(maxsize=None)
def _seq2seq(family):
    model = _seeded(SEQ2SEQ[family])
    if family == "speech_to_text":
        program = tt.export_seq2seq(model, max_cache_len=10, encoder_input_shape=FEATURES)
    else:
        program = tt.export_seq2seq(model, max_cache_len=10, max_source_len=MAX_SOURCE)
    return model, program.to_bytes(), [s.name for s in program.states]


def _source(family, n, g):
    if family == "speech_to_text":
        return torch.randn(FEATURES, generator=g)
    return torch.randint(3, 64, (1, n), generator=g)


def _eager_seq2seq(model, source, target):
    key = model.main_input_name
    with torch.no_grad():
        return model(**{key: source}, decoder_input_ids=target, use_cache=False).logits[0]


@pytest.mark.parametrize("family", sorted(SEQ2SEQ))
def test_seq2seq_family_matches_eager(family, backend):
    model, data, states = _seq2seq(family)
    m = tandem.load(data)
    md = m.metadata
    assert list(m.methods) == ["encode", "decode", "reset"]
    assert md["model_type"] == model.config.model_type and md["encoder_input"] == model.main_input_name
    start = md["decoder_start_token_id"]
    g = torch.Generator().manual_seed(1)
    # encode, decodes; a longer source (restarts the decode); reset, a short source
    for step, (n, steps) in enumerate(((7, 8), (MAX_SOURCE, 5), (3, 3))):
        if step == 2:
            m.reset()
            for s in states:
                assert not m.read_state(s).any(), s
        source = _source(family, n, g)
        target = torch.cat([torch.tensor([[start]]), torch.randint(3, 64, (1, steps - 1), generator=g)], dim=1)
        m.encode(source)
        assert int(m.read_state(md["position_state"])) == 0
        want = _eager_seq2seq(model, source, target)
        for i in range(steps):
            torch.testing.assert_close(m.decode(target[:, i : i + 1])[0], want[i], msg=lambda s: f"source {step} token {i}: {s}")
        assert int(m.read_state(md["position_state"])) == steps


@pytest.mark.parametrize("family", ["t5", "bart"])
def test_seq2seq_text_source_length_is_checked(family):
    model, data, _ = _seq2seq(family)
    m = tandem.load(data)
    assert m.metadata["max_source_len"] == MAX_SOURCE and m.dims["encode"] == {"source": (1, MAX_SOURCE)}
    with pytest.raises(tandem.TandemError):
        m.encode(torch.ones(1, MAX_SOURCE + 1, dtype=torch.long))
    assert int(m.read_state("source_length")) == 0  # nothing ran


def test_seq2seq_refusals_name_the_model():
    with pytest.raises(tandem.ExportError, match="takes token ids of any length; give max_source_len"):
        tt.export_seq2seq(_seeded(SEQ2SEQ["bart"]), max_cache_len=8, encoder_input_shape=(1, 8))
    with pytest.raises(tandem.ExportError, match="Speech2TextForConditionalGeneration takes input_features; give encoder_input_shape"):
        tt.export_seq2seq(_seeded(SEQ2SEQ["speech_to_text"]), max_cache_len=8)
    with pytest.raises(tandem.ExportError, match="max_target_positions=32"):
        tt.export_seq2seq(_seeded(SEQ2SEQ["marian"]), max_cache_len=33, max_source_len=8)


# ---- recurrent LMs -------------------------------------------------------------------------------

RECURRENT = {
    "mamba2": lambda: transformers.Mamba2ForCausalLM(
        transformers.Mamba2Config(
            vocab_size=64,
            hidden_size=32,
            state_size=8,
            num_hidden_layers=2,
            num_heads=4,
            head_dim=16,
            n_groups=1,
            expand=2,
            conv_kernel=4,
            chunk_size=8,
            eos_token_id=2,
        )
    ),
    "falcon_mamba": lambda: transformers.FalconMambaForCausalLM(
        transformers.FalconMambaConfig(
            vocab_size=64, hidden_size=32, state_size=8, num_hidden_layers=2, conv_kernel=4, expand=2, time_step_rank=4, eos_token_id=2
        )
    ),
}


@functools.lru_cache(maxsize=None)
def _recurrent(family):
    model = _seeded(RECURRENT[family])
    with torch.no_grad():  # weights large enough that the logits differ clearly from token to token
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
    assert is_recurrent(model)
    program = tt.export_causal_lm(model, max_cache_len=None, max_prompt_len=4, sample_top_k=16)
    return model, program.to_bytes(), [s.name for s in program.states]


@pytest.mark.parametrize("family", sorted(RECURRENT))
def test_recurrent_family_matches_eager(family, backend):
    model, data, states = _recurrent(family)
    m = tandem.load(data)
    md = m.metadata
    assert (md["model_type"], md["max_cache_len"]) == (model.config.model_type, None) and m.dims["prefill"] == {"n": (1, 4)}
    assert all(".conv_states." in s or ".recurrent_states." in s or s == "position" for s in states)
    g = torch.Generator().manual_seed(1)
    a, b = torch.randint(0, 64, (1, 20), generator=g), torch.randint(0, 64, (1, 8), generator=g)
    with torch.no_grad():
        want_a, want_b = model(a, use_cache=False).logits[0], model(b, use_cache=False).logits[0]
    torch.testing.assert_close(tt.prefill(m, a[:, :3])[0], want_a[2])  # 3 of at most 4 tokens
    torch.testing.assert_close(m.prefill(a[:, 3:7])[0], want_a[6])  # a second prompt continues the first
    for i in range(7, 20):
        torch.testing.assert_close(m.decode(a[:, i : i + 1])[0], want_a[i], msg=lambda s: f"token {i}: {s}")
    assert int(m.read_state("position")) == 20
    m.reset()
    assert int(m.read_state("position")) == 0 and not any(m.read_state(s).any() for s in states)
    torch.testing.assert_close(m.prefill(b[:, :1])[0], want_b[0])
    torch.testing.assert_close(m.prefill(b[:, 1:2])[0], want_b[1])
    for i in range(2, 7):
        torch.testing.assert_close(m.decode(b[:, i : i + 1])[0], want_b[i])
    values, ids = m.decode_topk(b[:, 7:8])
    order = torch.sort(want_b[7], descending=True)
    torch.testing.assert_close(values[0], order.values[:16])
    assert set(ids[0].tolist()) == set(order.indices[:16].tolist())


def test_recurrent_refusals_name_the_model_and_what_is_unsupported():
    # XLNet's `mems` grow by the tokens of each call: not a state of fixed shapes (RWKV's `state` is one); without a
    # max_cache_len there is no token buffer for the uncached recipe either
    xlnet = transformers.XLNetLMHeadModel(transformers.XLNetConfig(vocab_size=64, d_model=32, n_layer=2, n_head=4, d_inner=64))
    with pytest.raises(tandem.ExportError, match="XLNetLMHeadModel: its forward takes no transformers Cache .*'mems'"):
        tt.export_causal_lm(xlnet, max_cache_len=None, max_prompt_len=4)
    xlstm = transformers.xLSTMForCausalLM(transformers.xLSTMConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_heads=2))
    with pytest.raises(tandem.ExportError, match="xLSTMForCausalLM: its forward's 'cache' is a xLSTMCache, not a transformers Cache"):
        tt.export_causal_lm(xlstm, max_cache_len=None, max_prompt_len=4)


# ---- lowering ------------------------------------------------------------------------------------


def test_a_count_set_to_a_dynamic_length_is_computed_at_run_time():
    """zero_() then add_(n) for a dynamic n: torch's graph is add(full_like(0), n), all of whose
    tensor inputs are constants; it was folded at export with n at its maximum (16 for every call)."""

    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", torch.zeros((), dtype=torch.long))

        def set(self, x):
            self.n.zero_()
            self.n.add_(x.shape[1])
            return x * 2

    c = Counter()
    method = tandem.Method(c.set, (torch.ones(1, 5),), dynamic_shapes=({1: torch.export.Dim("k", min=1, max=16)},))
    m = tandem.load(tandem.export(c, {"set": method}).to_bytes())
    for k in (7, 1, 16):
        m.set(torch.ones(1, k))
        assert int(m.read_state("n")) == k


# ---- the export command picks these recipes from the config ---------------------------------------


@pytest.mark.parametrize("family,recipe", [("bart", "seq2seq"), ("mamba2", "recurrent")])
def test_export_pretrained_picks_the_recipe_from_the_config(family, recipe, tmp_path):
    from tandem.recipes.pretrained import tolerance

    model = _seeded(SEQ2SEQ[family]) if family in SEQ2SEQ else _seeded(RECURRENT[family])
    model.save_pretrained(tmp_path)
    kwargs = {"max_cache_len": 8, "max_source_len": 8} if recipe == "seq2seq" else {"max_prompt_len": 2}
    program, report = tt.export_pretrained(tmp_path, tmp_path / "out.tandem", **kwargs)
    assert report["recipe"] == recipe and report["model_type"] == family and report["tokenizer"] is None
    assert report["verify"]["top1_equal"] and report["verify"]["max_abs_diff"] <= tolerance(report)
    m = tandem.load((tmp_path / "out.tandem").read_bytes())
    assert list(m.methods) == (["encode", "decode", "reset"] if recipe == "seq2seq" else ["prefill", "decode", "decode_topk", "reset"])


# ---- KV caches of the widths the model writes -----------------------------------------------------

CACHE_SHAPES = {
    # multi-query attention: one KV head whatever num_kv_heads says
    "falcon_multi_query": lambda: transformers.FalconForCausalLM(
        transformers.FalconConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, multi_query=True, new_decoder_architecture=False
        )
    ),
    # multi-head latent attention: keys of qk_nope + qk_rope widths, values of v_head_dim
    "deepseek_v3_latent": lambda: transformers.DeepseekV3ForCausalLM(
        transformers.DeepseekV3Config(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            first_k_dense_replace=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            q_lora_rank=24,
            kv_lora_rank=16,
            qk_nope_head_dim=8,
            qk_rope_head_dim=4,
            v_head_dim=12,
            max_position_embeddings=64,
        )
    ),
}


# a forward that counts positions its own way when given none (RoBERTa: from its padding index + 1)
POSITIONS = {
    "roberta": lambda: transformers.RobertaForCausalLM(
        transformers.RobertaConfig(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
            is_decoder=True,
            pad_token_id=1,
        )
    )
}


# models that size their mask or count their positions from the cache length when given none (a
# size from a value in the state: torch.export refused them): OPT (a cumulative sum over a mask of
# past + n ones, and sdpa's branch on its length), BioGPT (torch.ones(past + n)), XGLM (positions
# from past), MVP (arange(past, past + n)); each built from its config class shrunk (tests/models/zoo.py)
FROM_STATE = ["OPTForCausalLM", "BioGptForCausalLM", "XGLMForCausalLM", "MvpForCausalLM"]
# DeepSeek sparse attention: each layer keeps its indexer's keys beside its keys and values (transformers'
# StaticIndexedLayer), which a plain static layer in its place lacked ('update_indexer')
OWN_CACHES = ["DeepseekV32ForCausalLM"]


def _shrunk(name):
    from models import zoo

    cls = getattr(transformers, name)
    config = cls.config_class()
    zoo.shrink(config, 64, {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "decoder_start_token_id": 1})
    return cls(config)


@functools.lru_cache(maxsize=None)
def _greedy(m, prompt, n: int) -> list:
    """n greedy tokens after the prompt (prefilled in max_prompt_len pieces), as generate picks them."""
    logits, got = tt.prefill(m, prompt), []
    while len(got) < n:
        got.append(int(logits.argmax()))
        logits = m.decode(torch.tensor([[got[-1]]]))
    return got


def _cache_shapes(family):
    made = {**CACHE_SHAPES, **POSITIONS, **ARGUMENT_STATE, **CAUSAL_TABLES}
    make = functools.partial(_shrunk, family) if family.endswith("ForCausalLM") else made[family]
    model = _seeded(make)
    prompt = torch.randint(3, 64, (1, 10), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=8, eos_token_id=None)
    program = tt.export_causal_lm(model, max_cache_len=24, max_prompt_len=6)
    return program.to_bytes(), prompt, want[0, prompt.shape[1] :].tolist()


@pytest.mark.parametrize("family", sorted(CACHE_SHAPES) + OWN_CACHES)
def test_caches_are_sized_from_what_the_model_writes(family, backend):
    """A KV cache sized from the config's head counts cannot take a multi-query layer's one KV head or a
    latent-attention layer's keys and values of their own widths (prefill failed in index_copy_);
    sized from one eager call, greedy generation equals transformers' generate token for token."""
    data, prompt, want = _cache_shapes(family)
    m = tandem.load(data)
    assert _greedy(m, prompt, len(want)) == want  # the prompt in two calls: 6 + 4 tokens


# ---- hybrids through the command -----------------------------------------------------------------


def test_a_hybrid_exports_through_the_command_with_max_cache_len_as_its_attention_layers_capacity(tmp_path, wasm_lib):
    """Falcon-H1 (Mamba2 mixers beside attention in every layer) through `python -m tandem export DIR
    --max-cache-len 32`: the command refused a cache length for any model with recurrent layers. A tiny
    seeded checkpoint with a tokenizer (tests/models/zoo.py); greedy generation equals transformers'
    generate, natively and in wasm, and the attention layers hold 32 positions."""
    import tandem.runtime as runtime
    from models import zoo
    from tandem.cli import main as cli

    model, tokenizer = zoo.make_checkpoint("FalconH1ForCausalLM", tmp_path / "ckpt")
    ids = tokenizer(zoo.PROMPT)["input_ids"][:6]
    want = zoo.reference(model, ids)
    out = tmp_path / "h1.tandem"
    # --max-prompt-len 1: prompts go through decode, one token per call (the export stays small)
    assert cli(["export", str(tmp_path / "ckpt"), "-o", str(out), "-q", "--max-cache-len", "32", "--max-prompt-len", "1"]) == 0
    md = tandem.load(out).metadata
    assert md["max_cache_len"] == 32 and "unused_options" not in md
    for lib in (runtime._library(), wasm_lib):
        saved = runtime._lib
        runtime._lib = lib
        try:
            with tandem.load(out) as m:
                assert zoo.greedy(m, ids) == want
        finally:
            runtime._lib = saved


def test_state_in_module_attributes_is_state_and_a_local_window_reads_a_full_length_cache(backend):
    """RecurrentGemma keeps its recurrent blocks' conv window and recurrent state in module attributes,
    not in its cache: they are state, zeroed by reset(); its local-attention layer (a window of 16
    positions) keeps all 24 cache positions and its mask keeps the window, so a generation of 18
    tokens, past the window, equals transformers' generate, and again after reset()."""
    data, prompt, want = _cache_shapes("RecurrentGemmaForCausalLM")
    m = tandem.load(data)
    for _ in range(2):
        m.reset()
        assert _greedy(m, prompt, len(want)) == want


def test_a_hybrid_prefill_of_any_length_fills_its_attention_cache_exactly(backend, tmp_path):
    """Falcon-H1 (Mamba2 mixers beside attention) exported with one prefill of 1 to 4 tokens: each call
    runs 4 one-token steps and undoes those past the prompt (recurrent state, lengths, and the row a
    padding step writes), so prompts of 3, 4 and 1 tokens continue one another and fill the 8 attention
    positions exactly; then a decode past them fails with TDM_ERR_INDEX and changes nothing."""
    from models import zoo

    model = zoo.make_checkpoint("FalconH1ForCausalLM", tmp_path / "ckpt")[0]
    m = tandem.load(tt.export_causal_lm(model, max_cache_len=8, max_prompt_len=4).to_bytes())
    assert list(m.methods) == ["prefill", "decode", "decode_topk", "reset"] and m.metadata["max_cache_len"] == 8
    a = torch.randint(1, 64, (1, 8), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = model(a, use_cache=False).logits[0]
    for start, end in ((0, 3), (3, 7), (7, 8)):
        torch.testing.assert_close(m.prefill(a[:, start:end])[0], want[end - 1], atol=2e-4, rtol=2e-4, msg=lambda s: f"to {end}: {s}")
    assert int(m.read_state("position")) == 8
    with pytest.raises(tandem.TandemError) as e:
        m.decode(a[:, :1])
    assert e.value.code == "TDM_ERR_INDEX" and int(m.read_state("position")) == 8


@pytest.mark.parametrize("family", sorted(POSITIONS) + FROM_STATE)
def test_positions_are_the_ones_transformers_generate_gives(family, backend):
    """transformers' generate gives every forward that takes position_ids the positions 0, 1, ... of
    the sequence, and an attention mask; RoBERTa's own default counts from its padding index + 1, and
    the FROM_STATE models derive sizes from the cache length when given neither, so the recipe passes
    both as generate does over a static cache, computed from the cache length in the state: greedy
    generation equals generate token for token."""
    data, prompt, want = _cache_shapes(family)
    m = tandem.load(data)
    assert _greedy(m, prompt, len(want)) == want


# a forward that takes its past as an argument and gives it back under the same name (RWKV's `state`)
ARGUMENT_STATE = {
    "rwkv": lambda: transformers.RwkvForCausalLM(
        transformers.RwkvConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32, intermediate_size=64)
    )
}


def test_a_state_the_forward_takes_as_an_argument_is_program_state(backend):
    """RWKV's forward takes its state (five tensors per model, the running maximum starting at -1e30)
    as the argument `state` and gives it back, not as a transformers Cache (the recipe refused it): the
    tensors are program state, a prefill of up to 6 tokens runs 6 one-token steps, and reset() restores
    the state the model starts from, so greedy generation equals transformers' generate twice."""
    data, prompt, want = _cache_shapes("rwkv")
    m = tandem.load(data)
    assert list(m.methods) == ["prefill", "decode", "decode_topk", "reset"]
    assert m.metadata["unused_options"] == {"max_cache_len": 24} and m.metadata["max_cache_len"] is None
    for _ in range(2):
        m.reset()
        assert _greedy.__wrapped__(m, prompt, len(want)) == want  # not the cached tokens: run again


# attention that slices its own causal table [1, 1, P, P] at rows key_length - query_length .. key_length
# (GPT-Neo's local layers: a band of window_size positions)
CAUSAL_TABLES = {
    "gpt_neo": lambda: transformers.GPTNeoForCausalLM(
        transformers.GPTNeoConfig(
            vocab_size=64,
            hidden_size=32,
            num_layers=2,
            num_heads=4,
            attention_types=[[["global", "local"], 1]],
            window_size=4,
            max_position_embeddings=64,
        )
    )
}


def test_a_causal_table_sliced_from_the_keys_length_reads_the_rows_of_the_positions_written(backend):
    """GPT-Neo slices its causal table at rows key_length - query_length .. key_length, the queries'
    positions where the keys are the past and the new tokens; over a static cache of 24 positions those
    rows were 24 - n .. 24, so its local layer (a window of 4) saw no key of a short sequence. The recipe
    gives each such table the rows of the positions being written there, so greedy generation past the
    window equals transformers' generate."""
    data, prompt, want = _cache_shapes("gpt_neo")
    m = tandem.load(data)
    assert _greedy(m, prompt, len(want)) == want


def test_a_model_that_writes_positions_of_its_own_into_its_cache_is_refused_naming_it():
    """CPM-Ant puts its 32 prompt positions into its cache ahead of the tokens on every call, so one token
    writes 33 positions, past a static cache of 24: refused naming the class and why (index_copy_ failed
    with an IndexError)."""
    from tandem.ir import ExportError

    model = _shrunk("CpmAntForCausalLM").eval()
    with pytest.raises(ExportError, match=r"CpmAntForCausalLM: one token .* past the cache's 24 positions .* positions of its own"):
        tt.export_causal_lm(model, max_cache_len=24, max_prompt_len=4)
