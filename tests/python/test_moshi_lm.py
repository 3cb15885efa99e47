"""moshi's streaming LM (the model behind Moshi, Kyutai STT and Kyutai TTS) exported as moshi's own API
is called: `LMGen.step` inside `lm_gen.streaming(1)`, with `reset_streaming`, on a small seeded
`LMModel` from moshi's loader (a depformer with weights per step, delays). `step` branches on the
Python int `offset_cpu` (None for its first `max_delay` steps): the program has a version per run of
its values (tests/python/test_int_versions.py). Greedy tokens equal moshi's eager streaming token for
token over a sequence with a reset, natively and on the wasm backend."""

from __future__ import annotations

import pytest
import torch

import tandem

loaders = pytest.importorskip("moshi.models.loaders")
from moshi.models.lm import LMGen  # noqa: E402

SMALL = dict(
    dim=64, text_card=100, existing_text_padding_id=3, n_q=4, dep_q=2, card=32, num_heads=4, num_layers=2, hidden_scale=2,
    context=16, depformer_dim=32, depformer_dim_feedforward=64, depformer_num_heads=2, depformer_num_layers=1,
    depformer_context=4, delays=[0, 0, 2, 1, 2],
)  # fmt: skip


def _lm_gen() -> LMGen:
    torch.manual_seed(0)
    lm = loaders.get_moshi_lm(None, lm_kwargs={**loaders._lm_kwargs, **SMALL}, dtype=torch.float32)
    for p in lm.parameters():
        p.data.normal_(0, 0.2)  # moshi's init leaves many weights at zero: every token would tie
    return LMGen(lm, use_sampling=False)


def _inputs(n: int, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, SMALL["card"], (1, SMALL["n_q"] - SMALL["dep_q"], 1), generator=g) for _ in range(n)]


@pytest.fixture(scope="module")
def exported():
    gen = _lm_gen()
    with torch.no_grad(), gen.streaming(1):
        methods = {"step": tandem.Method(gen.step, tuple(_inputs(1, 0))), "reset": tandem.Method(gen.reset_streaming, ())}
        program = tandem.export(None, methods)
    calls = _inputs(9, 1) + [None] + _inputs(5, 2)
    eager, twin = [], _lm_gen()
    with torch.no_grad(), twin.streaming(1):
        for x in calls:
            if x is None:
                twin.reset_streaming()
            else:
                out = twin.step(x)
                eager.append(None if out is None else out.clone())
    return program, calls, eager


def _stream(program, calls, eager):
    model = tandem.load(program.to_bytes())
    assert sorted(model.methods) == ["reset", "step"]
    got = []
    for x in calls:
        if x is None:
            model.reset()
        else:
            got.append(model.step(x))
    max_delay = max(SMALL["delays"])
    delayed = [True] * max_delay + [False] * (9 - max_delay) + [True] * max_delay + [False] * (5 - max_delay)
    assert [g is None for g in got] == [e is None for e in eager] == delayed
    for i, (g, e) in enumerate(zip(got, eager)):
        if e is not None:
            assert torch.equal(g, e), f"step {i}: tandem {g.flatten().tolist()}, moshi {e.flatten().tolist()}"


def test_lm_gen_step_exports_as_written_in_versions(exported):
    program, _, _ = exported
    names = sorted(m.name for m in program.methods)
    assert names == ["reset", "step", "step#1"], names
    step = {m.name: m for m in program.methods}
    assert [len(step["step"].outputs), len(step["step#1"].outputs)] == [1, 0]  # tokens, and None while the delays fill


def test_lm_gen_step_streams_equal_to_moshi_eager(exported):
    _stream(*exported)


def test_lm_gen_step_streams_equal_to_moshi_eager_on_wasm(exported, monkeypatch, wasm_lib):
    import tandem.runtime as runtime

    monkeypatch.setattr(runtime, "_lib", wasm_lib)
    monkeypatch.setattr(runtime, "BACKEND", "wasm")
    _stream(*exported)
