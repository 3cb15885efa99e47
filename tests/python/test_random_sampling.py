"""Random sampling: torch.randn / rand / normal_ / uniform_ / bernoulli / multinomial /
randint from the program's own generator (Philox4x32-10 keyed by the `__rng__` state slot).

The stream is not torch's, so values are checked against an independent reference: a numpy
implementation of the stream docs/ops.md specifies ("Random sampling"), tests/random_reference.py,
bit for bit, natively and in wasm. Distributions are checked over 100k draws, and the structure
(shapes, dtypes, {0, 1}, valid and distinct indices) against torch eager."""

import math

import numpy as np
import pytest
import torch
from torch import nn

import tandem
from random_reference import philox, ref_multinomial, ref_normal, ref_randint, ref_uniform
from tandem.ir import ExportError

# ---- models -----------------------------------------------------------------------------------


class Noise(nn.Module):
    """A flow-LM-like step: a state that accumulates, plus noise drawn as the user writes it."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(4))

    def forward(self, x):
        eps = torch.randn(2, 5)
        y = x.clone().normal_(1.0, 0.5)
        self.acc.add_(1.0)
        return eps, y, self.acc.clone()

    def reset(self):
        self.acc.zero_()


def export_noise(**kw):
    m = Noise()
    return tandem.export(m, {"forward": (torch.zeros(3, 7),), "reset": ()}, **kw)


def test_philox_matches_the_published_answers():
    # Random123's known-answer vectors for philox4x32-10 (the C kernel is checked on the same ones in tests/c/test_philox.c).
    got = philox(*[np.uint64(x) for x in (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344, 0xA4093822, 0x299F31D0)])
    assert [int(x) for x in got] == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]
    got = philox(*[np.uint64(0)] * 6)
    assert [int(x) for x in got] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]


def test_randn_and_normal_equal_the_reference_stream(backend):
    m = tandem.load(export_noise().to_bytes())
    assert m.read_state("__rng__").tolist() == [0, 0]
    for calls in range(3):
        eps, y, acc = m.forward(torch.zeros(3, 7))
        assert np.array_equal(eps.numpy().reshape(-1), ref_normal(10, calls=calls, stream=0))
        assert np.array_equal(y.numpy().reshape(-1), ref_normal(21, 1.0, 0.5, calls=calls, stream=1))
        assert acc.tolist() == [calls + 1.0] * 4
        assert m.read_state("__rng__").tolist() == [0, calls + 1]
    m.reset()  # the module's own reset does not touch the generator
    assert m.read_state("__rng__").tolist() == [0, 3]


def test_seed_state_and_reset_reproduce_the_stream(backend):
    data = export_noise().to_bytes()
    m = tandem.load(data)
    first = m.forward(torch.zeros(3, 7))[0]
    saved = m.save_state()
    second = m.forward(torch.zeros(3, 7))[0]
    assert not torch.equal(first, second)
    m.load_state(saved)
    assert torch.equal(m.forward(torch.zeros(3, 7))[0], second)  # loadState: the same stream again
    m.reset_state()
    assert torch.equal(m.forward(torch.zeros(3, 7))[0], first)  # reset to the initial state restarts it
    assert torch.equal(tandem.load(data).forward(torch.zeros(3, 7))[0], first)  # as a fresh load does
    m.seed(1234)
    seeded = m.forward(torch.zeros(3, 7))[0]
    assert np.array_equal(seeded.numpy().reshape(-1), ref_normal(10, seed=1234))
    m.seed(1234)
    assert torch.equal(m.forward(torch.zeros(3, 7))[0], seeded)
    m.seed(2**64 - 1)  # a seed is 64 bits (stored as int64)
    assert np.array_equal(m.forward(torch.zeros(3, 7))[0].numpy().reshape(-1), ref_normal(10, seed=2**64 - 1))
    with pytest.raises(tandem.TandemError, match="64-bit"):
        m.seed(2**64)


def test_export_seed_is_the_initial_state(backend):
    m = tandem.load(export_noise(seed=77).to_bytes())
    assert m.read_state("__rng__").tolist() == [77, 0]
    assert np.array_equal(m.forward(torch.zeros(3, 7))[0].numpy().reshape(-1), ref_normal(10, seed=77))


def test_native_and_wasm_streams_are_bit_identical(wasm_lib, monkeypatch):
    import tandem.runtime as runtime

    class Big(nn.Module):
        def forward(self, x):
            return torch.randn(100_003), torch.rand(100_001) + x

    data = tandem.export(Big(), {"forward": (torch.zeros(1),)}).to_bytes()
    native = tandem.load(data)
    outs_native = [native.forward(torch.zeros(1)) for _ in range(2)]
    monkeypatch.setattr(runtime, "_lib", wasm_lib)
    wasm = tandem.load(data)
    outs_wasm = [wasm.forward(torch.zeros(1)) for _ in range(2)]
    for a, b in zip(outs_native, outs_wasm):
        for x, y in zip(a, b):
            assert torch.equal(x, y)
    # and both are the reference, all 100k values
    assert np.array_equal(outs_native[1][0].numpy(), ref_normal(100_003, calls=1, stream=0))
    assert np.array_equal(outs_native[1][1].numpy(), ref_uniform(100_001, calls=1, stream=1))


def test_distributions_over_100k_draws():
    class Draws(nn.Module):
        def forward(self, x):
            return (
                torch.randn(100_000),
                torch.rand(100_000),
                torch.empty(100_000).uniform_(-2.0, 3.0),
                torch.bernoulli(torch.full((100_000,), 0.3)),
                torch.randint(3, 10, (100_000,)),
            )

    m = tandem.load(tandem.export(Draws(), {"forward": (torch.zeros(1),)}).to_bytes())
    z, u, v, b, r = m.forward(torch.zeros(1))
    n = 100_000
    assert abs(z.mean().item()) < 5 / math.sqrt(n) and abs(z.var().item() - 1) < 0.02
    assert abs(z.abs().max().item()) < 6.0  # Box-Muller with 24-bit U1: |z| <= sqrt(2 ln 2^24) = 5.77

    def ks(sample, cdf):
        s = np.sort(sample.double().numpy())
        f = cdf(s)
        i = np.arange(1, len(s) + 1)
        return max(np.max(i / len(s) - f), np.max(f - (i - 1) / len(s)))

    bound = 1.95 / math.sqrt(n)  # KS at 0.1%
    assert ks(z, lambda s: 0.5 * (1 + torch.erf(torch.from_numpy(s) / math.sqrt(2)).numpy())) < bound
    assert ks(u, lambda s: s) < bound and u.min() >= 0 and u.max() < 1
    assert ks(v, lambda s: (s + 2) / 5) < bound and v.min() >= -2 and v.max() < 3
    assert set(b.unique().tolist()) == {0.0, 1.0} and abs(b.mean().item() - 0.3) < 5 * math.sqrt(0.21 / n)
    assert r.dtype == torch.int64 and r.min() == 3 and r.max() == 9
    counts = torch.bincount(r - 3, minlength=7).double()
    assert ((counts - n / 7) ** 2 / (n / 7)).sum() < 30  # chi-square, 6 degrees of freedom, far beyond 0.1%


def test_ops_equal_the_reference_and_torch_structure(backend):
    class All(nn.Module):
        def forward(self, x, p, w):
            return (
                torch.rand(3, 4),
                torch.randn_like(x),
                torch.rand_like(x),
                x.clone().uniform_(-1.0, 1.0),
                torch.bernoulli(p),
                torch.bernoulli(x, 0.25),
                torch.multinomial(w, 3),
                torch.multinomial(w, 5, replacement=True),
                torch.randint(-4, 4, (2, 3)),
                torch.normal(x, 2.0),
                torch.randint_like(x, 6),
            )

    args = (torch.zeros(2, 5), torch.full((2, 5), 0.5), torch.tensor([[1.0, 2, 3, 4, 0], [0, 0, 5, 1, 1]]))
    eager = All()(*args)
    m = tandem.load(tandem.export(All(), {"forward": args}).to_bytes())
    out = m.forward(*args)
    for e, o in zip(eager, out):
        assert e.shape == o.shape and e.dtype == o.dtype
    assert np.array_equal(out[0].numpy().reshape(-1), ref_uniform(12, stream=0))
    assert np.array_equal(out[1].numpy().reshape(-1), ref_normal(10, stream=1))
    assert np.array_equal(out[2].numpy().reshape(-1), ref_uniform(10, stream=2))
    assert np.array_equal(out[3].numpy().reshape(-1), ref_uniform(10, -1.0, 1.0, stream=3))
    assert np.array_equal(out[4].numpy().reshape(-1), (ref_uniform(10, stream=4) < 0.5).astype(np.float32))
    assert np.array_equal(out[5].numpy().reshape(-1), (ref_uniform(10, stream=5) < np.float32(0.25)).astype(np.float32))
    w = args[2].numpy()
    assert np.array_equal(out[6].numpy(), ref_multinomial(w, 3, False, stream=6))
    assert np.array_equal(out[7].numpy(), ref_multinomial(w, 5, True, stream=7))
    for row, wr in zip(out[6].tolist(), w):
        assert len(set(row)) == 3 and all(wr[i] > 0 for i in row)  # without replacement: distinct, positive weight
    assert all(w[r][i] > 0 for r, row in enumerate(out[7].tolist()) for i in row)
    assert np.array_equal(out[8].numpy().reshape(-1), ref_randint(6, -4, 4, stream=8))
    assert np.array_equal(out[9].numpy().reshape(-1), (ref_normal(10, stream=9) * np.float32(2.0)).astype(np.float32))
    assert np.array_equal(out[10].numpy().reshape(-1), ref_randint(10, 0, 6, stream=10).astype(np.float32))


def test_multinomial_rejects_bad_weights_and_leaves_state(backend):
    class Pick(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", torch.zeros((), dtype=torch.long))

        def forward(self, w):
            self.n.add_(1)
            return torch.multinomial(w, 2)

    m = tandem.load(tandem.export(Pick(), {"forward": (torch.ones(4),)}).to_bytes())
    m.forward(torch.ones(4))
    before = m.save_state()
    for bad, why in (
        (torch.tensor([1.0, -1, 1, 1]), "finite and >= 0"),
        (torch.zeros(4), "sum to 0"),
        (torch.tensor([0.0, 0, 1, 0]), "fewer than"),
        (torch.tensor([1.0, float("nan"), 1, 1]), "finite"),
    ):
        with pytest.raises(tandem.TandemError, match=why):
            m.forward(bad)
        assert m.save_state() == before  # neither the counter nor the buffer moved


def test_a_torch_generator_is_refused():
    class Gen(nn.Module):
        def forward(self, x):
            return torch.randn(3, generator=torch.Generator().manual_seed(0)) + x

    with pytest.raises(ExportError, match="torch.Generator"):
        tandem.export(Gen(), {"forward": (torch.zeros(3),)})


def test_a_program_without_randomness_has_no_generator():
    class Plain(nn.Module):
        def forward(self, x):
            return x + 1

    m = tandem.load(tandem.export(Plain(), {"forward": (torch.zeros(3),)}).to_bytes())
    with pytest.raises(tandem.TandemError, match="draws no random numbers"):
        m.seed(1)


def test_pocket_tts_noise_and_methods_share_one_counter(backend):
    # pocket-tts' flow LM: noise = torch.empty(shape); torch.nn.init.normal_(noise, mean=0.0, std=temp ** 0.5),
    # with a dynamic batch; a second method that draws, and one that does not (it leaves the counter).
    from torch.export import Dim

    class Flow(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("steps", torch.zeros((), dtype=torch.long))

        def forward(self, h):
            noise = torch.empty(h.shape[:-1] + (8,), dtype=h.dtype)
            torch.nn.init.normal_(noise, mean=0.0, std=0.7**0.5)
            self.steps.add_(1)
            return h[..., :8] + noise

        def coin(self, p):
            return torch.bernoulli(p)

        def plain(self, x):
            return x * 2

    f = Flow()
    program = tandem.export(
        f,
        {
            "forward": tandem.Method(f.forward, (torch.zeros(4, 16),), ({0: Dim("b", min=1, max=4)},)),
            "coin": (torch.full((6,), 0.5),),
            "plain": (torch.zeros(2),),
        },
    )
    m = tandem.load(program.to_bytes())
    std = np.float64(0.7**0.5)
    y = m.forward(torch.zeros(3, 16))  # a batch below the maximum: the first 24 numbers of the stream
    assert y.shape == (3, 8) and np.array_equal(y.numpy().reshape(-1), ref_normal(24, 0.0, std, calls=0))
    c = m.coin(torch.full((6,), 0.5))
    assert np.array_equal(c.numpy(), (ref_uniform(6, calls=1) < 0.5).astype(np.float32))
    m.plain(torch.zeros(2))
    assert m.read_state("__rng__").tolist() == [0, 2]  # a method that draws nothing leaves the generator
    y = m.forward(torch.zeros(4, 16))
    assert np.array_equal(y.numpy().reshape(-1), ref_normal(32, 0.0, std, calls=2))
    assert m.read_state("steps").item() == 2


def test_inspect_names_the_generator(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "noise.tandem"
    export_noise().save(path)
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "tandem", "inspect", str(path)],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(__import__("pathlib").Path(tandem.__file__).parents[1])},
    )
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if "__rng__" in ln)
    assert "int64[2]" in line.replace(" ", "") and "not torch's stream" in line
