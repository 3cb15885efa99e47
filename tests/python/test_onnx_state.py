"""bench/models/onnx_state.py's wrapper (the state of a streaming step as explicit inputs and outputs, what
TANDEM_BENCH=field-peers exports to ONNX for onnxruntime-web), run eagerly on the small configs: fed its
own returned state frame after frame, it gives what the package's own streaming gives. The ONNX export
itself needs the bench's packages (onnx) and runs in bench/models/mimi.py, pocket.py and stt.py, each
checked there against eager over every frame."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "models"))
pytest.importorskip("moshi")
import onnx_state  # noqa: E402

from packaged_models import FRAME, mimi, pocket, stt  # noqa: E402


def run_io(fn, slots, inputs, start):
    """fn through StateIO from `start`, each call fed the state the last one returned."""
    io, state, outs = onnx_state.StateIO(fn, slots, 1, torch.nn.Module()), start, []
    with torch.no_grad():
        for x in inputs:
            y = io(x, *state)
            outs.append(y[: len(y) - len(slots)])
            state = list(y[len(y) - len(slots) :])
    return outs


def chunks(n):
    g = torch.Generator().manual_seed(3)
    return [torch.randn(1, 1, FRAME, generator=g) * 0.3 for _ in range(n)]


def test_mimi_steps_with_state_as_inputs_and_outputs():
    m, xs = mimi(small=True), chunks(8)
    with torch.no_grad(), m.streaming(1):
        codes = [m.encode(x) for x in xs]
        pcm = [m.decode(c) for c in codes]
    with torch.no_grad(), m.streaming(1):
        slots = onnx_state.state_slots(*onnx_state.moshi_states(m))
        enc = [slots[i] for i in onnx_state.changed_slots(m.encode, (xs[0],), slots)]
        dec = [slots[i] for i in onnx_state.changed_slots(m.decode, (codes[0],), slots)]
        assert enc and dec and not {id(c) + hash(k) for c, k in enc} & {id(c) + hash(k) for c, k in dec}
        got_codes = run_io(m.encode, enc, xs, onnx_state.state_values(enc))
        got_pcm = run_io(m.decode, dec, codes, onnx_state.state_values(dec))
    assert all(torch.equal(g[0], w) for g, w in zip(got_codes, codes))
    assert len({tuple(c.flatten().tolist()) for c in codes}) > 1  # the codes move: the state is used
    for g, w in zip(got_pcm, pcm):
        torch.testing.assert_close(g[0], w, rtol=0, atol=1e-6)


def test_stt_step_with_state_as_inputs_and_outputs():
    t, xs = stt(small=True), chunks(24)  # past the small LM's context of 16: its ring cache wraps
    with torch.no_grad(), t.mimi.streaming(1), t.lm_gen.streaming(1):
        want = [t.step(x) for x in xs]
    with onnx_state.moshi_patches(), torch.no_grad(), t.mimi.streaming(1), t.lm_gen.streaming(1):
        slots = onnx_state.state_slots(*onnx_state.moshi_states(t.mimi), *onnx_state.moshi_states(t.lm_gen))
        slots = [slots[i] for i in onnx_state.changed_slots(t.step, (xs[0],), slots)]
        got = run_io(t.step, slots, xs, onnx_state.state_values(slots))
    assert [int(g[0]) for g in got] == [int(w) for w in want]
    assert len({int(w) for w in want}) > 3


def test_pocket_step_with_state_as_inputs_and_outputs():
    from pocket_tts.modules.stateful_module import init_states

    model = pocket(small=True, temp=0.0)
    lm = model.flow_lm

    def frames(state, n):
        x, out = torch.full((1, 1, lm.ldim), float("nan")), []
        for _ in range(n):
            latent, eos = model._run_flow_lm_and_increment_step(model_state=state, backbone_input_latents=x)
            out.append(latent)
            x = latent
        return out

    prompt = torch.tensor([[3, 9, 4, 7]])
    with torch.no_grad():
        state = init_states(lm, batch_size=1, sequence_length=32)
        model._run_flow_lm_and_increment_step(model_state=state, text_tokens=prompt)
        start = onnx_state.state_values(onnx_state.state_slots(state))
        want = frames(state, 6)
        state = init_states(lm, batch_size=1, sequence_length=32)
        slots = onnx_state.state_slots(state)

    def step(x):
        return model._run_flow_lm_and_increment_step(model_state=state, backbone_input_latents=x)

    with onnx_state.pocket_patches():
        inputs = [torch.full((1, 1, lm.ldim), float("nan"))] + want[:-1]
        got = run_io(step, slots, inputs, start)
    for g, w in zip(got, want):
        torch.testing.assert_close(g[0], w, rtol=1e-5, atol=1e-5)
