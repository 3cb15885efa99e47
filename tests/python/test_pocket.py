"""pocket-tts 4.0.1 exported as the package's own streaming API calls it: its TTSModel's
`_run_flow_lm_and_increment_step` over its flow LM's ModelState (the text prompt, then one call per
generated latent) and its Mimi's `decode_from_latent` + `increment_steps` over the Mimi's ModelState
(the decode worker's loop), with no wrapper and no flag changed on its objects; equal to the
package's eager streaming over several frames, natively and on the wasm backend.

The KV caches are the package's own ([2, B, capacity, H, D], written at `offset` and read as
`cache[:, :, :offset + T]`): the offset is a dim bound from the state in each call. The model runs at
temperature 0 (its noise is exactly its mean), so the program equals eager: at another temperature
it exports too, but draws from tandem's generator in the program's state, not torch's stream."""

import copy
import functools

import pytest
import torch
from torch.export import Dim

import tandem
from packaged_models import pocket
from tandem.ir import STATE

pytest.importorskip("pocket_tts")
from pocket_tts.modules.stateful_module import increment_steps, init_states  # noqa: E402

LM_CAP, FRAMES, MIMI_CAP = 16, 4, 4 * 16  # cache rows: the LM's (prompt + frames), the Mimi's (16 per frame)
PROMPT = torch.tensor([[3, 7, 1, 9, 4]])


def _export(model, quantize=None):
    lm_state = init_states(model.flow_lm, batch_size=1, sequence_length=LM_CAP)
    mimi_state = init_states(model.mimi, batch_size=1, sequence_length=MIMI_CAP)
    bos = torch.full((1, 1, model.flow_lm.ldim), float("nan"))  # the package's first backbone input
    steps = int(model.mimi.encoder_frame_rate / model.mimi.frame_rate)
    return tandem.export(
        None,
        {
            "prompt": tandem.Method(
                model._run_flow_lm_and_increment_step, (lm_state, PROMPT), dynamic_shapes=(None, {1: Dim("tokens", min=1, max=8)})
            ),
            "step": tandem.Method(model._run_flow_lm_and_increment_step, (lm_state, None, bos)),
            "decode": tandem.Method(model.mimi.decode_from_latent, (torch.zeros(1, 1, model.flow_lm.ldim), mimi_state)),
            "advance": tandem.Method(functools.partial(increment_steps, model.mimi, increment=steps), (mimi_state,)),
        },
        quantize=quantize,
    ), steps


def _eager(model, steps):
    """The package's generation, frame by frame: _generate's prompt, _autoregressive_generation's
    steps and _decode_audio_worker's decode + increment_steps (max_decoder_frames_per_call = 1)."""
    lm_state = init_states(model.flow_lm, batch_size=1, sequence_length=LM_CAP)
    mimi_state = init_states(model.mimi, batch_size=1, sequence_length=MIMI_CAP)
    out = []
    with torch.no_grad():
        model._run_flow_lm_and_increment_step(model_state=lm_state, text_tokens=PROMPT)
        x = torch.full((1, 1, model.flow_lm.ldim), float("nan"))
        for _ in range(FRAMES):
            latent, eos = model._run_flow_lm_and_increment_step(model_state=lm_state, backbone_input_latents=x)
            audio = model.mimi.decode_from_latent(latent * model.flow_lm.emb_std + model.flow_lm.emb_mean, mimi_state)
            increment_steps(model.mimi, mimi_state, increment=steps)
            out.append((latent, eos, audio))
            x = latent
    return out


@pytest.fixture(scope="module")
def exported():
    model = pocket(small=True, temp=0.0)
    with torch.no_grad():  # the latent statistics are buffers the package loads: not ones and zeros here
        g = torch.Generator().manual_seed(3)
        model.flow_lm.emb_std.copy_(0.5 + torch.rand(model.flow_lm.ldim, generator=g))
        model.flow_lm.emb_mean.copy_(torch.randn(model.flow_lm.ldim, generator=g) * 0.1)
    twin = copy.deepcopy(model)
    program, steps = _export(model)
    want = _eager(twin, steps)
    assert len({round(float(a.abs().max()), 3) for _, _, a in want}) > 1, "degenerate audio: the test would prove little"
    return program, want, model


def _run(m, model, want):
    m.prompt(PROMPT)
    x = torch.full((1, 1, model.flow_lm.ldim), float("nan"))
    for i, (latent, eos, audio) in enumerate(want):
        got_latent, got_eos = m.step(x)
        torch.testing.assert_close(got_latent, latent, rtol=1e-4, atol=1e-5, msg=lambda s: f"frame {i} latent: {s}")
        assert torch.equal(got_eos, eos), f"frame {i}: is_eos differs"
        got_audio = m.decode(latent * model.flow_lm.emb_std + model.flow_lm.emb_mean)
        m.advance()
        torch.testing.assert_close(got_audio, audio, rtol=1e-4, atol=1e-5, msg=lambda s: f"frame {i} audio: {s}")
        x = latent


def test_pocket_streaming_equals_the_package_eager(exported, backend):
    program, want, model = exported
    _run(tandem.load(program.to_bytes()), model, want)


def test_the_offsets_are_dims_bound_from_the_state_and_a_full_cache_fails_cleanly(exported):
    program, want, model = exported
    dims = {n: (lo, hi) for n, lo, hi, _ in program.method("step").dims}
    assert dims == {f"model_state.transformer.layers.{i}.self_attn.offset": (0, LM_CAP - 1) for i in range(2)}, dims
    m = tandem.load(program.to_bytes())
    _run(m, model, want)  # 5 prompt rows + 4 frames of 16
    x = want[-1][0]
    for _ in range(LM_CAP - len(PROMPT[0]) - FRAMES):
        m.step(x)
    before = {s.name: m.read_state(s.name).clone() for s in program.states}
    with pytest.raises(tandem.TandemError) as e:
        m.step(x)  # the LM cache is full: the package's eager raises too
    assert e.value.code == "TDM_ERR_INDEX"
    for name, v in before.items():
        torch.testing.assert_close(m.read_state(name), v, equal_nan=True, msg=lambda s: f"{name} changed: {s}")


def test_the_kv_cache_prefix_is_read_in_place(exported):
    """`valid = cache[:, :, :offset + T]; valid[0], valid[1]` reads the cache's K and V halves as
    views of the state (no slice op copies the prefix of both halves, twice, per layer per step), and
    their `permute(0, 2, 1, 3)` is folded into the attention (no copy of the prefix heads-first)."""
    program, _, _ = exported
    for name in ("prompt", "step"):
        copies = [op for op in program.method(name).ops if op.name in ("slice", "permute") and op.ins[0].storage.kind == STATE]
        assert not copies, f"{name}: {[(op.name, op.ins[0].storage.state.name) for op in copies]}"
        # nor is each half put heads-first: attention reads the time-first [B, T, H, D] halves by strides
        att = [op for op in program.method(name).ops if op.name == "attention"]
        assert att and all(op.ins[1].storage.kind == STATE and op.ins[2].storage.kind == STATE and len(op.iattr) in (14, 18) for op in att)


def _snr_db(got, want):
    return float(10 * torch.log10(want.pow(2).sum() / (got - want).pow(2).sum().clamp_min(1e-30)))


def test_pocket_int8_stays_close_to_the_package_eager(exported):
    """quantize="int8" (the linear layers' weights per output channel; the convs stay float32),
    natively, fed the package's latents frame by frame (as bench/suite/pocket.mjs does) so each frame's
    error is one step's, not the drift of a different generated sequence. Tolerances: int8 rounding
    adds noise of about step/sqrt(12), 0.6% of the rms of each quantized matmul's output (gaussian
    weights: max|w| ~ 2.5 sigma over 64 rows, step = max|w| / 127); some ten matmuls in series in the
    LM and flow net give ~2% (34 dB) on the latent, measured 28-32 dB here: asserted above 20 dB.
    The decoder's transformer is a small part of the Mimi decode: measured ~60 dB, asserted above 40."""
    program, want, model = exported
    q8 = _export(model, quantize="int8")[0]
    assert "matmul_q8" in {op.name for op in q8.method("step").ops}
    m = tandem.load(q8.to_bytes())
    m.prompt(PROMPT)
    x = torch.full((1, 1, model.flow_lm.ldim), float("nan"))
    for i, (latent, eos, audio) in enumerate(want):
        got_latent, _ = m.step(x)
        got_audio = m.decode(latent * model.flow_lm.emb_std + model.flow_lm.emb_mean)
        m.advance()
        snr_latent, snr_audio = _snr_db(got_latent, latent), _snr_db(got_audio, audio)
        print(f"frame {i}: latent SNR {snr_latent:.1f} dB, audio SNR {snr_audio:.1f} dB")
        assert snr_latent > 20, f"frame {i}: latent SNR {snr_latent:.1f} dB"
        assert snr_audio > 40, f"frame {i}: audio SNR {snr_audio:.1f} dB"
        x = latent
