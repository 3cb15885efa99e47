"""Kyutai's streaming speech-to-text (moshi's `LMModel` with the STT config: Mimi's codes in, text
tokens out, no depformer) exported as moshi runs it: one program whose `step` is Mimi's streaming
`encode` of an 80 ms frame followed by `LMGen.step` on its codes (also as two methods, `encode` and
`lm_step`), and `reset`; small config, seeded
weights (tests/python/packaged_models.py's `stt`). Over a stream with a reset, the greedy text tokens
equal moshi's eager streaming token for token at float32, natively and on the wasm backend; with int8
weights they agree with eager run on the same quantized weights (int4: bench/models/stt.py)."""

from __future__ import annotations

import pytest
import torch

import tandem

pytest.importorskip("moshi")
from packaged_models import FRAME, as_quantized, stt  # noqa: E402

FRAMES, RESET_AT = 14, 9


def _chunks(n: int, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, 1, FRAME, generator=g) * 0.3 for _ in range(n)]


def _export(quantize=None):
    t = stt(small=True)
    with torch.no_grad(), t.mimi.streaming(1), t.lm_gen.streaming(1):
        methods = {
            "step": tandem.Method(t.step, (_chunks(1, 0)[0],)),
            "reset": tandem.Method(t.reset, ()),
            "force_text": tandem.Method(t.force_text, (torch.zeros(1, 1, 1, dtype=torch.long),)),
            "encode": tandem.Method(t.encode, (_chunks(1, 0)[0],)),
            "lm_step": tandem.Method(t.lm_step, (torch.zeros(1, t.lm_gen.lm_model.num_audio_codebooks, 1, dtype=torch.long),)),
        }
        return tandem.export(None, methods, quantize=quantize)


def _eager(chunks, quantize=None, forced=None) -> list:
    """moshi's own streaming, frame by frame, with a reset before frame RESET_AT; with `forced`,
    teacher-forced: after frame i the next step reads forced[i] as the previous text token."""
    t = stt(small=True)
    if quantize:
        as_quantized(t, quantize)
    out = []
    with torch.no_grad(), t.mimi.streaming(1), t.lm_gen.streaming(1):
        for i, x in enumerate(chunks):
            if i == RESET_AT:
                t.reset()
            out.append(int(t.step(x)))
            if forced is not None:
                t.force_text(torch.tensor(forced[i]).reshape(1, 1, 1))
    return out


def _stream(program, chunks, forced=None) -> list:
    model = tandem.load(program.to_bytes())
    out = []
    for i, x in enumerate(chunks):
        if i == RESET_AT:
            model.reset()
        tok = model.step(x)
        assert tok.shape == (1, 1, 1) and tok.dtype == torch.int64
        out.append(int(tok))
        if forced is not None:
            model.force_text(torch.tensor(forced[i]).reshape(1, 1, 1))
    return out


@pytest.fixture(scope="module")
def exported():
    chunks = _chunks(FRAMES, 1)
    want = _eager(chunks)
    assert len(set(want)) > FRAMES // 2, f"degenerate tokens: the test would prove little: {want}"
    return _export(), chunks, want


def test_stt_step_is_one_program_of_mimi_encode_and_lm_step(exported):
    program, _, _ = exported
    assert sorted(m.name for m in program.methods) == ["encode", "force_text", "lm_step", "reset", "step"]  # delays 0: never None
    ops = [op.name for op in program.method("step").ops]
    assert "conv" in ops and "attention" in ops and "argmax" in ops, sorted(set(ops))


def test_stt_streams_equal_to_moshi_eager(exported):
    program, chunks, want = exported
    assert _stream(program, chunks) == want


def test_stt_teacher_forced_tokens_equal_moshi_eager_at_float32(exported):
    """Teacher forcing (what bench/models/stt.py's agreement figure counts): a reference token stream is
    fed back in place of each frame's own token, into moshi's eager streaming and into the program
    (`force_text` after every `step`); at float32 every frame's greedy token is eager's. The stream
    fed here is seeded and unlike the model's own, so each frame's token depends on it."""
    program, chunks, free = exported
    forced = torch.randint(0, 100, (FRAMES,), generator=torch.Generator().manual_seed(2)).tolist()
    want = _eager(chunks, forced=forced)
    assert sum(a != b for a, b in zip(want, free)) >= FRAMES // 3, (want, free)  # forcing changes the tokens
    got = _stream(program, chunks, forced)
    assert sum(a == b for a, b in zip(got, want)) == FRAMES, (got, want)


def test_stt_streams_equal_to_moshi_eager_on_wasm(exported, monkeypatch, wasm_lib):
    import tandem.runtime as runtime

    monkeypatch.setattr(runtime, "_lib", wasm_lib)
    monkeypatch.setattr(runtime, "BACKEND", "wasm")
    program, chunks, want = exported
    assert _stream(program, chunks) == want


def test_int4_reference_rounds_activations_as_matmul_q4():
    """as_quantized's int4 model (the reference bench/models/stt.py checks the 1B's tokens against)
    computes what matmul_q4 does: on a Linear over rows of 2048, within float32 rounding of the
    program's output, where dequantized weights alone (the activations unrounded) are off by ~1e-3."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(2048, 64, bias=False)
    x = torch.randn(3, 2048)
    program = tandem.export(lin, {"forward": (x,)}, quantize="int4")
    assert "matmul_q4" in [op.name for op in program.method("forward").ops]
    got = tandem.load(program.to_bytes()).forward(x)
    as_quantized(lin, "int4")
    with torch.no_grad():
        want = lin(x)
    err = ((got - want).abs().max() / want.abs().max()).item()
    assert err < 2e-5, err


def _text_logits(t, codes: torch.Tensor) -> torch.Tensor:
    """LMGen.step on codes, returning the text logits it picks its greedy token from."""
    box = []
    t.lm_gen.on_text_logits_hook = box.append
    t.lm_gen.step(codes)
    t.lm_gen.on_text_logits_hook = None
    return box[0].reshape(-1)


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_stt_quantized_text_logits_equal_the_reference_within_float32_rounding(mode):
    """The LM's text logits at int8 / int4, frame by frame on the same codes (teacher-forced on the
    reference's tokens), equal as_quantized's eager model within float32 rounding: every weight
    dequantized and every int8 rounding of a Linear's input as the program's, including the gating's
    two Linears, whose weights moshi passes to F.linear itself (a reference that rounded only inputs
    that go through the Linears' forward is off by ~1e-2 of the logits' scale; this one by ~1e-7)."""
    import functools

    t = stt(small=True)
    g = torch.Generator().manual_seed(2)
    n_q = t.lm_gen.lm_model.num_audio_codebooks
    codes = [torch.randint(0, t.lm_gen.lm_model.card, (1, n_q, 1), generator=g) for _ in range(6)]
    with torch.no_grad(), t.lm_gen.streaming(1):
        methods = {"logits": tandem.Method(functools.partial(_text_logits, t), (codes[0],)),
                   "force_text": tandem.Method(t.force_text, (torch.zeros(1, 1, 1, dtype=torch.long),))}  # fmt: skip
        program = tandem.export(None, methods, quantize=mode)
    kinds = [op.name for op in program.method("logits").ops]
    assert kinds.count(f"matmul_q{mode[-1]}") == 2 * 4 + 1, sorted(set(kinds))  # 2 layers of 4 matrices, the text head
    model = tandem.load(program.to_bytes())
    as_quantized(t, mode)
    with torch.no_grad(), t.lm_gen.streaming(1):
        for c in codes:
            want, got = _text_logits(t, c), model.logits(c).reshape(-1)
            assert ((got - want).abs().max() / want.abs().max()).item() < 2e-5
            token = want.argmax().reshape(1, 1, 1)
            t.force_text(token)
            model.force_text(token)


def test_stt_int8_agrees_with_eager_on_the_same_weights():
    """int8 weights (Mimi's and the LM's linear layers and embeddings): the tokens agree with
    moshi's eager streaming run on the dequantized weights (and, at int8, the Linears' inputs quantized
    as matmul_q8 does) on all but near ties, and the program reads int8 codes in place of float32."""
    mode = "int8"
    chunks = _chunks(FRAMES, 1)
    program = _export(mode)
    kinds = [op.name for op in program.method("step").ops]
    # Mimi's encoder transformer and the LM: 2 layers of 4 matrices each, and the text head
    assert kinds.count("matmul_q8") >= 2 * 4 + 2 * 4 + 1 and "embedding_q8" in kinds, sorted(set(kinds))
    got, want = _stream(program, chunks), _eager(chunks, mode)
    same = sum(a == b for a, b in zip(got, want))
    assert same >= FRAMES - 1, (got, want)


def test_stt_step_as_its_two_halves_and_the_lm_on_given_codes(exported):
    """`encode` (Mimi's codes of a frame) then `lm_step` (LMGen.step on codes) is `step`, over the
    same state; the LM given other codes (each frame's shifted by one entry, as an RVQ near-tie would
    flip them) gives moshi's eager tokens on those codes."""
    program, chunks, want = exported
    model = tandem.load(program.to_bytes())
    got, codes = [], []
    for i, x in enumerate(chunks):
        if i == RESET_AT:
            model.reset()
        codes.append(model.encode(x))
        got.append(int(model.lm_step(codes[-1])))
    assert got == want
    t = stt(small=True)
    card = t.lm_gen.lm_model.card
    other = [(c + 1) % card for c in codes]
    eager = []
    with torch.no_grad(), t.mimi.streaming(1), t.lm_gen.streaming(1):
        for i, x in enumerate(chunks):
            if i == RESET_AT:
                t.reset()
            assert torch.equal(t.encode(x), codes[i]), i  # Mimi's codes are eager's
        for c in other:
            eager.append(int(t.lm_step(c)))
    model.reset()
    assert [int(model.lm_step(c)) for c in other] == eager != want  # the codes are read
