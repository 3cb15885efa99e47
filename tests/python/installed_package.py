"""Run by test_wasm_backend.py with the python of a fresh venv where `pip install ./python` put
tandem, from a folder outside the clone (cases.py copied beside this file): exports with the
installed package, runs on its tandem.wasm, and compares with PyTorch eager. Prints 'OK' last."""
import sys
from pathlib import Path

import torch
import transformers

import tandem
import tandem.runtime
import tandem.transformers as tt
from cases import as_tuple, original_report, run_eager

assert "site-packages" in tandem.__file__, tandem.__file__
assert tandem.runtime.BACKEND == "wasm", tandem.runtime.BACKEND
assert (Path(tandem.__file__).parent / "tandem.wasm").exists()
out = Path(sys.argv[1])

# The original report's model: two modules sharing one buffer, over a call sequence.
_, spec, eager, calls = original_report()
program = tandem.export(None, spec)
program.save(out / "original.tandem")
m = tandem.load(out / "original.tandem")
for i, (got, want) in enumerate(zip([as_tuple(m.call(n, *a)) for n, a in calls], run_eager(eager, calls))):
    assert len(got) == len(want), i
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, msg=lambda s: f"original report, call {i}: {s}")
torch.testing.assert_close(m.read_state("shared_module._v"), torch.tensor([5.0]))
m.reset_state()
torch.testing.assert_close(m.read_state("shared_module._v"), torch.tensor([1.0]))

# The transformers recipe on two families (small random weights): prompt chunks, decodes, reset.
small = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64)
families = {
    "llama": lambda: transformers.LlamaForCausalLM(transformers.LlamaConfig(**small, num_key_value_heads=2)),
    "gpt2": lambda: transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64)),
}
for family, make in families.items():
    torch.manual_seed(0)
    model = make().eval()
    program = tt.export_causal_lm(model, max_cache_len=16, max_prompt_len=8)
    program.save(out / f"{family}.tandem")
    lm = tandem.load(out / f"{family}.tandem")
    assert lm.metadata == program.metadata and lm.dims["prefill"] == {"n": (1, 8)}
    tokens = torch.randint(0, 64, (1, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(tokens).logits[0]
    lm.prefill(tokens[:, :4])
    got = lm.prefill(tokens[:, 4:7])
    torch.testing.assert_close(got[0], want[6], msg=lambda s: f"{family} prompt: {s}")
    for i in range(7, 16):
        torch.testing.assert_close(lm.decode(tokens[:, i:i + 1])[0], want[i], msg=lambda s: f"{family} decode {i}: {s}")
    try:  # the cache is full: the runtime's error comes through with its code
        lm.decode(tokens[:, :1])
        raise AssertionError(f"{family}: decoding past the cache did not fail")
    except tandem.TandemError as e:
        assert e.code == "TDM_ERR_INDEX", e
    lm.reset()
    torch.testing.assert_close(lm.prefill(tokens[:, :8])[0], want[7], msg=lambda s: f"{family} after reset: {s}")
print("OK")
