"""Per-class adapters (python/tandem/recipes/adapters.py) for transformers models whose own code cannot be
traced into a fixed graph: each computes what the model's code computes in eager, and the model exported
through the causal-LM recipe generates as transformers' generate, natively and in wasm."""

import functools

import pytest
import torch

import tandem
import tandem.transformers as tt
from tandem.recipes.adapters import adapted

transformers = pytest.importorskip("transformers")


@functools.lru_cache(maxsize=None)
def _jetmoe():
    from models import zoo

    config = transformers.JetMoeConfig()
    zoo.shrink(config, 64, {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "decoder_start_token_id": 1})
    torch.manual_seed(0)
    return transformers.JetMoeForCausalLM(config).eval()


def test_jetmoe_routing_adapted_computes_what_its_own_code_does():
    """JetMoE's router reads its tokens per expert into Python (.tolist()) to split the rows among the experts;
    adapted, the counts stay a tensor and the experts' products are one grouped product: the same logits
    over a sequence, and the model runs its own code again after the block."""
    model = _jetmoe()
    x = torch.randint(3, 64, (1, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(x).logits
        with adapted(model):
            got = model(x).logits
        again = model(x).logits
    torch.testing.assert_close(got, want)
    assert torch.equal(again, want) and "forward" not in vars(model.model.layers[0].mlp.router)


@functools.lru_cache(maxsize=None)
def _program(make):
    """(the model's export, a prompt, transformers' 8 greedy tokens after it) for a model from `make`."""
    model = make()
    prompt = torch.randint(3, 64, (1, 10), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=8, eos_token_id=None)
    return tt.export_causal_lm(model, max_cache_len=24, max_prompt_len=6).to_bytes(), prompt, want[0, prompt.shape[1] :].tolist()


def _greedy(data: bytes, prompt: torch.Tensor, n: int) -> list[int]:
    """The runtime's greedy tokens: the prompt in prefills, then decode."""
    m = tandem.load(data)
    logits, got = tt.prefill(m, prompt), []
    while len(got) < n:
        got.append(int(logits.argmax()))
        logits = m.decode(torch.tensor([[got[-1]]]))
    return got


def test_jetmoe_exports_and_generates_as_transformers(backend):
    """The export failed at 'split' taking the counts read with .tolist(); with the adapter greedy generation
    (the prompt in two prefills, then decode) equals transformers' generate token for token."""
    data, prompt, want = _program(_jetmoe)
    assert _greedy(data, prompt, len(want)) == want


@functools.lru_cache(maxsize=None)
def _longcat():
    from models import zoo

    config = transformers.LongcatFlashConfig()
    zoo.shrink(config, 64, {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "decoder_start_token_id": 1})
    config.zero_expert_num = 2  # 4 routed experts and 2 zero ones: a sequence's tokens choose both kinds
    torch.manual_seed(0)
    return transformers.LongcatFlashForCausalLM(config).eval()


def test_longcat_experts_adapted_compute_what_their_own_code_does():
    """LongCat-Flash loops over the experts its tokens hit (read with .item()), and its "zero" experts past the
    routed ones return their input; adapted, one grouped product over the sorted rows plus the zero experts'
    weighted input: the same logits over a sequence whose tokens choose both kinds, and its own code again after."""
    model = _longcat()
    chosen = []
    experts = [m for m in model.modules() if type(m).__name__ == "LongcatFlashExperts"]
    hooks = [m.register_forward_pre_hook(lambda mod, args: chosen.append(args[1] < mod.num_routed_experts)) for m in experts]
    x = torch.randint(3, 64, (1, 13), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(x).logits
        with adapted(model):
            got = model(x).logits
        again = model(x).logits
    for h in hooks:
        h.remove()
    routed = torch.cat([c.reshape(-1) for c in chosen])
    assert routed.any() and not routed.all()  # routed and zero experts both chosen
    torch.testing.assert_close(got, want)
    assert torch.equal(again, want) and "forward" not in vars(experts[0])


def test_longcat_exports_and_generates_as_transformers(backend):
    """The export failed at the experts loop's .item(); with the adapter greedy generation (the prompt in two
    prefills, then decode) equals transformers' generate token for token."""
    data, prompt, want = _program(_longcat)
    assert _greedy(data, prompt, len(want)) == want


def test_switch_transformers_routing_adapted_computes_what_its_own_code_does():
    """Switch Transformers' router swaps its classifier inside forward and its experts loop over the experts
    that have tokens (nonzero); adapted, every expert runs on every token, kept where the one-hot dispatch
    selects it: the same logits, also where a capacity of 2 tokens per expert drops tokens (their expert
    output is zero in both)."""
    from models import zoo

    config = transformers.SwitchTransformersConfig()
    zoo.shrink(config, 64, {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "decoder_start_token_id": 0})
    config.expert_capacity = 2
    torch.manual_seed(0)
    model = transformers.SwitchTransformersForConditionalGeneration(config).eval()
    x = torch.randint(3, 64, (1, 11), generator=torch.Generator().manual_seed(1))
    target = torch.tensor([[0, 5, 9, 7]])
    with torch.no_grad():
        routed = model.encoder.block[1].layer[-1].mlp.router(torch.randn(1, 11, config.d_model))[0]
        want = model(input_ids=x, decoder_input_ids=target).logits
        with adapted(model):
            got = model(input_ids=x, decoder_input_ids=target).logits
    assert routed.sum() < 11  # some tokens dropped by the capacity
    torch.testing.assert_close(got, want)
    assert "forward" not in vars(model.encoder.block[1].layer[-1].mlp.router)
