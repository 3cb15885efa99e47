"""Causal LMs whose cache cannot be exported (GPT-1's forward takes none), through the uncached recipe
(python/tandem/recipes/uncached.py): the token ids seen so far as state, the model's own forward over a
fixed buffer of max_cache_len ids per call. Tiny seeded models against eager PyTorch and transformers'
generate, natively and in wasm; a model that is not causal (its logits read later positions), or whose
forward without a cache does not give generate's logits, is refused by name."""

import contextlib
import functools
import io

import pytest
import torch

import tandem
import tandem.runtime as runtime
import tandem.transformers as tt
from tandem.recipes.uncached import NotCausal

transformers = pytest.importorskip("transformers")


def _gpt1(cls=None):
    torch.manual_seed(0)
    config = transformers.OpenAIGPTConfig(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    model = (cls or transformers.OpenAIGPTLMHeadModel)(config).eval()
    with torch.no_grad():  # weights large enough that the logits differ clearly from token to token
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
    return model


@functools.lru_cache(maxsize=None)
def _exported():
    model = _gpt1()
    return model, tt.export_causal_lm(model, max_cache_len=12, max_prompt_len=4, sample_top_k=8).to_bytes()


def test_a_model_without_a_cache_runs_its_forward_over_the_token_buffer(backend):
    """Prefills of 3, 4 and 1 tokens and decodes continue one another and equal the model's logits over
    the whole sequence; reset() empties the buffer; a call past max_cache_len fails with TDM_ERR_INDEX and
    changes nothing; decode_topk appends like decode."""
    model, data = _exported()
    m = tandem.load(data)
    md = m.metadata
    assert list(m.methods) == ["prefill", "decode", "decode_topk", "reset"] and m.dims["prefill"] == {"n": (1, 4)}
    assert (md["max_cache_len"], md["max_prompt_len"], md["position_state"]) == (12, 4, "position")
    assert md["uncached"] == "its forward takes no transformers Cache"
    g = torch.Generator().manual_seed(1)
    a, b = torch.randint(0, 64, (1, 12), generator=g), torch.randint(0, 64, (1, 6), generator=g)
    with torch.no_grad():
        want_a, want_b = model(a).logits[0], model(b).logits[0]
    for start, end in ((0, 3), (3, 7), (7, 8)):
        torch.testing.assert_close(m.prefill(a[:, start:end])[0], want_a[end - 1], msg=lambda s: f"to {end}: {s}")
    for i in range(8, 11):
        torch.testing.assert_close(m.decode(a[:, i : i + 1])[0], want_a[i])
    values, ids = m.decode_topk(a[:, 11:12])
    order = torch.sort(want_a[11], descending=True)
    torch.testing.assert_close(values[0], order.values[:8])
    assert ids[0].tolist() == order.indices[:8].tolist()
    assert int(m.read_state("position")) == 12 and torch.equal(m.read_state("tokens"), a)
    for call in (lambda: m.decode(b[:, :1]), lambda: m.prefill(b[:, :2])):  # the buffer is full
        with pytest.raises(tandem.TandemError) as e:
            call()
        assert e.value.code == "TDM_ERR_INDEX"
    assert int(m.read_state("position")) == 12 and torch.equal(m.read_state("tokens"), a)
    m.reset()
    assert int(m.read_state("position")) == 0 and not m.read_state("tokens").any()
    torch.testing.assert_close(m.prefill(b[:, :4])[0], want_b[3])
    torch.testing.assert_close(m.decode(b[:, 4:5])[0], want_b[4])


def test_the_command_exports_a_checkpoint_without_a_cache_and_generates_as_transformers(tmp_path, wasm_lib):
    """`python -m tandem export DIR` on a tiny seeded OpenAIGPT checkpoint (its forward takes no cache:
    the command refused it) says it uses the uncached recipe and why; greedy generation equals
    transformers' generate token for token, natively and in wasm."""
    from models import zoo
    from tandem.cli import main as cli

    model, tokenizer = zoo.make_checkpoint("OpenAIGPTLMHeadModel", tmp_path / "ckpt")
    ids = tokenizer(zoo.PROMPT)["input_ids"]
    want = zoo.reference(model, ids)
    out = tmp_path / "gpt1.tandem"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        rc = cli(["export", str(tmp_path / "ckpt"), "-o", str(out), "--max-cache-len", "32", "--max-prompt-len", "4"])
    text = stdout.getvalue()
    assert rc == 0, text
    assert "a openai-gpt model through the uncached recipe" in text
    assert "no usable cache: its forward takes no transformers Cache" in text
    assert "each prefill and decode runs the model's whole forward over all 32 positions" in text
    assert "the token ids of up to 32 positions, no cache" in text and "same top token: yes" in text
    for lib in (runtime._library(), wasm_lib):
        saved = runtime._lib
        runtime._lib = lib
        try:
            with tandem.load(out) as m:
                assert m.metadata["uncached"] == "its forward takes no transformers Cache"
                assert zoo.greedy(m, ids) == want
        finally:
            runtime._lib = saved


def test_a_model_that_attends_to_later_positions_is_refused():
    """GPT-1 with its causal mask filled with ones attends to every position: the logits of a prompt's
    positions change with the padding after them, so the uncached recipe refuses it; so does XLNet
    (no transformers Cache, and bidirectional without generate's permutation mask)."""
    model = _gpt1()
    for module in model.modules():
        if isinstance(getattr(module, "bias", None), torch.Tensor) and module.bias.dim() == 4:  # the [1, 1, n, n] causal mask
            module.bias.fill_(1)
    with pytest.raises(NotCausal, match=r"^OpenAIGPTLMHeadModel is not a causal LM: the logits of its first 6 positions change by"):
        tt.export_causal_lm(model, max_cache_len=12, max_prompt_len=4)
    torch.manual_seed(0)
    xlnet = transformers.XLNetLMHeadModel(transformers.XLNetConfig(vocab_size=64, d_model=32, n_layer=2, n_head=4, d_inner=64))
    with pytest.raises(
        NotCausal,
        match=r"^XLNetLMHeadModel is not a causal LM: .*; and its own cache cannot be used: its forward takes no transformers Cache "
        r"\(it passes its state as 'mems'\)$",
    ):
        tt.export_causal_lm(xlnet, max_cache_len=12, max_prompt_len=4)
    with pytest.raises(tandem.ExportError, match=r"max_cache_len=None: XLNetLMHeadModel: .* pass the length you need"):
        tt.export_causal_lm(xlnet, max_cache_len=None, max_prompt_len=4)


class _LengthDependent(transformers.OpenAIGPTLMHeadModel):
    """Causal, but its logits depend on the length of the sequence it is given, so its forward over a
    fixed buffer is not what generate computes."""

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        out = super().forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        out.logits = out.logits + 0.1 * input_ids.shape[1]
        return out


def test_a_forward_that_does_not_give_generates_logits_over_the_buffer_is_refused():
    with pytest.raises(NotCausal, match=r"^_LengthDependent: its forward over a padded buffer of token ids \(no cache\) gives logits"):
        tt.export_causal_lm(_gpt1(_LengthDependent), max_cache_len=12, max_prompt_len=4)
