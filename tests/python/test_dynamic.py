"""Bounded dynamic dims: tandem.Method(..., dynamic_shapes=...) against PyTorch eager at several
sizes, natively and in wasm; sizes out of range fail with TDM_ERR_SHAPE and the state unchanged;
unbounded or non-affine sizes are export errors."""

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.export import Dim

import tandem
import tandem.runtime as runtime
from cases import Appender

ROOT = Path(__file__).resolve().parents[2]


def _export(model):
    n = Dim("n", min=1, max=8)
    return tandem.export(model, {"forward": tandem.Method(model, (torch.randn(1, 3, 4),), dynamic_shapes=({1: n},)), "reset": ()})


def _check_sizes(m, eager):
    torch.manual_seed(1)
    for n in (3, 1, 8, 2):
        x = torch.randn(1, n, 4)
        got, want = m.forward(x), eager(x)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape, n
            torch.testing.assert_close(g, w)
    torch.testing.assert_close(m.read_state("cache"), eager.cache)
    assert int(m.read_state("pos")) == int(eager.pos) == 14


def test_method_with_a_dim_matches_eager_at_each_size():
    torch.manual_seed(0)
    model = Appender()
    program = _export(model)
    assert [(n, lo, hi) for n, lo, hi, _ in program.method("forward").dims] == [("n", 1, 8)]
    m = tandem.load(program.to_bytes())
    assert m.dims == {"forward": {"n": (1, 8)}, "reset": {}}
    _, ins, outs = m.methods["forward"]
    assert ins[0].exprs == ("", "n", "") and ins[0].shape == (1, 8, 4)
    assert [o.exprs for o in outs][:2] == [("", "n + 1", ""), ("4*n - 1",)]
    _check_sizes(m, model)  # model's own state started at zero, as the program's did


def test_out_of_range_size_is_a_typed_error_and_the_state_is_unchanged():
    torch.manual_seed(0)
    model = Appender()
    m = tandem.load(_export(model).to_bytes())
    m.forward(torch.randn(1, 5, 4))
    before = (m.read_state("cache").clone(), m.read_state("pos").clone())
    for n in (9, 0):
        with pytest.raises(tandem.TandemError) as e:
            m.forward(torch.randn(1, n, 4))
        assert e.value.code == "TDM_ERR_SHAPE" and "'n'" in str(e.value) and "between 1 and 8" in str(e.value)
    with pytest.raises(tandem.TandemError) as e:
        m.forward(torch.randn(1, 3, 5))  # a static dim
    assert e.value.code == "TDM_ERR_INVALID_ARGUMENT" and "[1, 'n', 4]" in str(e.value)
    with pytest.raises(tandem.TandemError) as e:
        m.forward(torch.randn(3, 4))  # another rank
    assert e.value.code == "TDM_ERR_INVALID_ARGUMENT" and "[1, 'n', 4]" in str(e.value)
    torch.testing.assert_close(m.read_state("cache"), before[0])
    assert int(m.read_state("pos")) == int(before[1]) == 5


def test_unbounded_dim_is_an_export_error_asking_for_a_max():
    model = Appender()
    with pytest.raises(tandem.ExportError, match=r"dynamic dim 'n'.*has no maximum.*max="):
        tandem.export(model, {"forward": tandem.Method(model, (torch.randn(1, 3, 4),), dynamic_shapes=({1: Dim("n", min=1)},))})


def test_a_size_that_is_not_affine_is_an_export_error_naming_it():
    class Square(nn.Module):
        def forward(self, x):
            return torch.outer(x, x).reshape(-1)

    with pytest.raises(tandem.ExportError, match=r"n\*\*2.*not an integer affine form"):
        tandem.export(None, {"forward": tandem.Method(Square(), (torch.randn(3),), dynamic_shapes=({0: Dim("n", min=2, max=6)},))})


def test_llama_prefill_at_several_lengths_then_decode_equals_eager():
    transformers = pytest.importorskip("transformers")
    from tandem.recipes.causal_lm import CausalLM

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    lm = CausalLM(model, 24)
    program = tandem.export(
        None,
        {
            "prefill": tandem.Method(lm.step, (torch.zeros(1, 4, dtype=torch.long),), dynamic_shapes=({1: Dim("n", min=1, max=8)},)),
            "decode": tandem.Method(lm.step, (torch.zeros(1, 1, dtype=torch.long),)),
            "reset": tandem.Method(lm.reset, ()),
        },
    )
    m = tandem.load(program.to_bytes())
    prompt = torch.randint(6, 64, (1, 16), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full = model(prompt).logits[0]
    at = 0
    for name, c in [("prefill", 5), ("prefill", 1), ("prefill", 8), ("decode", 1), ("decode", 1)]:
        out = m.call(name, prompt[:, at : at + c])
        at += c
        torch.testing.assert_close(out[0], full[at - 1], atol=1e-4, rtol=1e-4)
    m.reset()
    torch.testing.assert_close(m.prefill(prompt[:, :7])[0], full[6], atol=1e-4, rtol=1e-4)


def test_sizes_on_the_wasm_backend(monkeypatch):
    pytest.importorskip("wasmtime")
    from tandem.wasm import WasmLibrary

    wasm = ROOT / "web" / "tandem.wasm"
    assert wasm.exists(), "web/tandem.wasm is missing: run `npm run build`"
    torch.manual_seed(0)
    model = Appender()
    program = _export(model)
    monkeypatch.setattr(runtime, "_lib", WasmLibrary(wasm))
    monkeypatch.setattr(runtime, "BACKEND", "wasm")
    m = tandem.load(program.to_bytes())
    assert m.dims["forward"] == {"n": (1, 8)}
    _check_sizes(m, model)
    with pytest.raises(tandem.TandemError) as e:
        m.forward(torch.randn(1, 9, 4))
    assert e.value.code == "TDM_ERR_SHAPE"


class _Varargs(nn.Module):
    """forward(*xs): torch.export takes the specs of *xs as one tuple."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(4))

    def forward(self, *xs):
        self.acc.add_(sum(x.sum(0) for x in xs))
        return self.acc * 1.0


def test_varargs_forward_takes_dynamic_shapes_per_input():
    n = Dim("n", min=1, max=8)
    model = _Varargs()
    program = tandem.export(
        model, {"forward": tandem.Method(model, (torch.randn(3, 4), torch.randn(3, 4)), dynamic_shapes=({0: n}, {0: n}))}
    )
    m, eager = tandem.load(program.to_bytes()), _Varargs()
    for k in (2, 7, 1):
        xs = torch.randn(k, 4), torch.randn(k, 4)
        torch.testing.assert_close(m.forward(*xs), eager(*xs))


@pytest.mark.parametrize("backend", ["native", "wasm"])
def test_convs_over_a_dynamic_length(monkeypatch, backend):
    """A conv's and a transposed conv's workspace over a dynamic length (im2col panels: ceil(n / 8), not
    an affine size) is planned at the length's maximum, so the model exports and equals eager at every
    length in its bounds, down to a partial panel."""
    if backend == "wasm":
        pytest.importorskip("wasmtime")
        from tandem.wasm import WasmLibrary

        monkeypatch.setattr(runtime, "_lib", WasmLibrary(ROOT / "web" / "tandem.wasm"))
        monkeypatch.setattr(runtime, "BACKEND", "wasm")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(16, 64, 3, padding=1), nn.ELU(), nn.ConvTranspose1d(64, 8, 4, stride=2), nn.Conv1d(8, 8, 3, groups=8))
    model.eval()
    method = tandem.Method(model.forward, (torch.randn(1, 16, 40),), dynamic_shapes=({2: Dim("n", min=3, max=100)},))
    program = tandem.export(model, {"forward": method})
    assert {"conv", "conv_transpose"} <= {o.name for o in program.method("forward").ops}
    m = tandem.load(program.to_bytes())
    for n in (3, 8, 9, 57, 100):
        x = torch.randn(1, 16, n)
        with torch.no_grad():
            torch.testing.assert_close(m.forward(x), model(x), rtol=1e-5, atol=1e-5)


class Prefix(nn.Module):
    """A prefix of a state written at a dynamic length (`buf[0:n] = x`): only those rows change."""

    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(8, 3))

    def forward(self, x):
        self.buf[0 : x.shape[0]] = x
        return self.buf.sum(0)


def test_a_prefix_of_the_state_written_at_a_dynamic_length(backend):
    m = Prefix()
    n = Dim("n", min=1, max=8)
    program = tandem.export(m, {"forward": tandem.Method(m, (torch.ones(3, 3),), dynamic_shapes=({0: n},))})
    model, eager = tandem.load(program.to_bytes()), Prefix()
    for k in (5, 2, 8, 1):
        x = torch.randn(k, 3)
        torch.testing.assert_close(model.forward(x), eager(x))
    torch.testing.assert_close(model.read_state("buf"), eager.buf)
