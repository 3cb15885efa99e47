"""The audio-LM recipe (python/tandem/recipes/audio_lm.py): a decoder-only model that merges its audio
encoder's output into its token stream, exported by `python -m tandem export DIR --encoder-input-shape`
with its audio as an argument of prefill_audio, generates what transformers' generate does on the same
ids and audio, natively and in wasm; a call with another number of placeholders fails its guard with the
state unchanged. A model that streams its audio with every token (VoxtralRealtime) is exported with no
audio shape, as prefill_audio and decode_audio that take each token's mel frames, and gives generate's
logits at every step; a forward's random draw is turned off by its argument for it, or refused. The
models are tiny and seeded (tests/models/zoo.py, tests/models/audio.py)."""

import pytest
import torch

import tandem
import tandem.runtime as runtime
from tandem.cli import main as cli
from tandem.ir import ExportError
from tandem.transformers import export_audio_lm

pytest.importorskip("transformers")

from models import audio, zoo  # noqa: E402

NEW = 6


@pytest.fixture(scope="module", params=["VoxtralForConditionalGeneration", "Qwen2AudioForConditionalGeneration"])
def exported(request, tmp_path_factory):
    """(folder, the exported file, prompt ids, audio, transformers' greedy tokens) of one class."""
    folder = tmp_path_factory.mktemp(request.param)
    model, tok = zoo.make_checkpoint(request.param, folder / "checkpoint", audio_lm=True)
    features = audio.audio_input(model, folder / "checkpoint")
    ids, inputs = audio.prompt(model, tok, zoo.PROMPT, features, NEW)
    want = zoo.reference(model, ids, inputs, NEW)
    out = folder / "model.tandem"
    shape = ",".join(map(str, next(iter(features.values())).shape))
    args = ["export", str(folder / "checkpoint"), "-o", str(out), "--quiet", "--max-prompt-len", "4", "--encoder-input-shape", shape]
    assert cli([*args, "--max-cache-len", str(len(ids) + NEW)]) == 0
    return folder, out, ids, features, want


def test_an_audio_lm_generates_from_its_audio_as_transformers(exported, backend):
    folder, out, ids, features, want = exported
    with tandem.load(out) as m:
        md = m.metadata
        assert {"prefill_audio", "prefill", "decode", "decode_topk", "reset"} <= set(m.methods)
        assert md["audio_input"] == "input_features" and md["audio_input_shape"] == [1, 128, 100]
        assert md["audio_tokens"] == 25 and ids.count(md["audio_token_id"]) == 25  # 50 encoder positions, pooled by 2
        assert md["max_audio_prompt_len"] == 25 + 4
        assert md["audio_options"] == {}  # nothing to turn off
        assert audio.greedy(m, ids, features, NEW) == want
        other = audio.greedy(m, ids, {"x": torch.zeros(1, 128, 100)}, NEW)
        assert other != want  # the audio is read: silence gives other tokens


def test_another_number_of_placeholders_fails_the_call_with_the_state_unchanged(exported):
    folder, out, ids, features, want = exported
    with tandem.load(out) as m:
        md = m.metadata
        m.reset()
        tandem.transformers.prefill(m, torch.tensor([ids[:2]]))
        before = m.read_state(md["position_state"]).clone()
        placeholders = [md["audio_token_id"]] * (md["audio_tokens"] - 1) + [5, 6]
        with pytest.raises(runtime.TandemError, match="TDM_ERR_GUARD"):
            m.prefill_audio(torch.tensor([placeholders]), next(iter(features.values())))
        assert torch.equal(m.read_state(md["position_state"]), before)
        with pytest.raises(runtime.TandemError):  # fewer tokens than the placeholders: the shape is refused
            m.prefill_audio(torch.tensor([placeholders[:3]]), next(iter(features.values())))


def test_an_audio_lm_needs_its_audio_shape_and_no_source_length(exported, tmp_path, capsys):
    folder = exported[0] / "checkpoint"
    out = str(tmp_path / "x.tandem")
    assert cli(["export", str(folder), "-o", out, "--quiet"]) == 1
    assert "give audio_input_shape (--encoder-input-shape)" in capsys.readouterr().err
    assert cli(["export", str(folder), "-o", out, "--quiet", "--max-source-len", "8"]) == 1
    assert "takes audio of a fixed shape" in capsys.readouterr().err
    assert cli(["export", str(folder), "-o", out, "--quiet", "--encoder-input-shape", "1,128,100", "--max-cache-len", "20"]) == 1
    assert "max_cache_len=20 cannot hold audio of shape [1, 128, 100]: its 25 placeholder tokens" in capsys.readouterr().err


STREAMING = "VoxtralRealtimeForConditionalGeneration"


@pytest.fixture(scope="module")
def streamed(tmp_path_factory):
    """(folder, the exported file, prompt ids, audio, transformers' greedy tokens and their logits) of a
    streaming audio LM."""
    from transformers import GenerationConfig

    folder = tmp_path_factory.mktemp(STREAMING)
    model, tok = zoo.make_checkpoint(STREAMING, folder / "checkpoint", audio_lm=True)
    features = audio.audio_input(model, folder / "checkpoint")
    ids, inputs = audio.prompt(model, tok, zoo.PROMPT, features, NEW)
    greedy = dict(do_sample=False, max_new_tokens=NEW, eos_token_id=None, pad_token_id=0)
    how = GenerationConfig(**greedy, output_logits=True, return_dict_in_generate=True)
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long), generation_config=how, **inputs)
    want = out.sequences[0, len(ids) :].tolist()
    assert want == zoo.reference(model, ids, inputs, NEW)
    path = folder / "model.tandem"
    args = ["export", str(folder / "checkpoint"), "-o", str(path), "--quiet", "--max-prompt-len", "4"]
    assert cli([*args, "--max-cache-len", str(len(ids) + NEW)]) == 0
    return folder, path, ids, inputs, want, [x[0] for x in out.logits]


def test_a_streaming_audio_lm_takes_each_tokens_audio_and_gives_generates_logits(streamed, backend):
    folder, out, ids, features, want, logits = streamed
    with tandem.load(out) as m:
        md = m.metadata
        assert set(m.methods) == {"prefill_audio", "decode_audio", "decode_audio_topk", "reset"}
        assert md["audio_streaming"] and md["audio_input"] == "input_features"
        assert md["audio_frames_per_token"] == 8 and md["audio_chunk_shape"] == [1, 128, 8] and md["num_delay_tokens"] == 6
        assert features["input_features"].shape[-1] == (len(ids) + NEW) * 8
        seen = []
        assert audio.greedy(m, ids, features, NEW, seen) == want
        for got, ref in zip(seen, logits, strict=True):
            assert float((got[0] - ref).abs().max()) < 1e-4 * float(ref.abs().max())
        silence = []
        audio.greedy(m, ids, {"x": torch.zeros_like(features["input_features"])}, NEW, silence)
        assert float((silence[0] - seen[0]).abs().max()) > 1e-3  # the audio is read


def test_a_streaming_audio_lm_refuses_audio_of_another_length_and_an_audio_shape(streamed, tmp_path, capsys):
    folder, out, ids, features, want, logits = streamed
    x = features["input_features"]
    with tandem.load(out) as m:
        md = m.metadata
        m.reset()
        m.prefill_audio(torch.tensor([ids[:2]]), x[..., :16])
        before = m.read_state(md["position_state"]).clone()
        with pytest.raises(runtime.TandemError):  # 3 tokens with the audio of 2
            m.prefill_audio(torch.tensor([ids[2:5]]), x[..., 16:32])
        with pytest.raises(runtime.TandemError):
            m.decode_audio(torch.tensor([ids[2:3]]), x[..., 16:20])
        assert torch.equal(m.read_state(md["position_state"]), before)
    args = ["export", str(folder / "checkpoint"), "-o", str(tmp_path / "x.tandem"), "--quiet", "--encoder-input-shape", "1,128,100"]
    assert cli(args) == 1
    assert "takes the audio of each token with it (8 mel frames a token): leave audio_input_shape" in capsys.readouterr().err


def _noisy(model, switch: bool):
    """The model, its forward adding noise from torch's generator to its features: unless given sample=False
    where `switch` (as VibeVoice ASR's does to its acoustic latents), else in every call."""
    forward = type(model).forward.__get__(model)

    def with_switch(input_ids=None, input_features=None, feature_attention_mask=None, sample=True, **kwargs):
        if sample and input_features is not None:
            input_features = input_features + torch.randn_like(input_features)
        return forward(input_ids=input_ids, input_features=input_features, feature_attention_mask=feature_attention_mask, **kwargs)

    def always(input_ids=None, input_features=None, feature_attention_mask=None, **kwargs):
        return with_switch(input_ids, input_features, feature_attention_mask, **kwargs)

    model.forward = with_switch if switch else always
    return model


def test_a_random_draw_in_the_forward_is_turned_off_by_its_argument_or_refused(tmp_path):
    model, _ = zoo.make_checkpoint("Qwen2AudioForConditionalGeneration", tmp_path / "checkpoint", audio_lm=True)
    x = audio.audio_input(model, tmp_path / "checkpoint")["input_features"]
    how = dict(max_cache_len=40, max_prompt_len=4, sample_top_k=None)
    with pytest.raises(ExportError, match=r"draws random numbers from torch's generator .*\(sample=False\)"):
        export_audio_lm(_noisy(model, switch=False), x.shape, **how)
    program = export_audio_lm(_noisy(model, switch=True), x.shape, **how)
    with tandem.load(program.to_bytes()) as m:
        md = m.metadata
        assert md["audio_options"] == {"sample": False}
        tokens = torch.tensor([[md["audio_token_id"]] * md["audio_tokens"] + [5, 6]])
        got = m.prefill_audio(tokens, x)
    masks = {k: torch.ones(s, dtype=torch.long) for k, s in md["audio_masks"].items()}
    with torch.no_grad():
        want = model(input_ids=tokens, input_features=x, **masks, sample=False).logits[:, -1]
        noisy = model(input_ids=tokens, input_features=x, **masks).logits[:, -1]
    assert float((got - want).abs().max()) < 1e-4 * max(1.0, float(want.abs().max()))
    assert float((noisy - want).abs().max()) > 1e-2  # the noise the argument turns off changes the logits


def test_a_recurrent_audio_lm_steps_its_merged_embeddings_as_transformers_generates(tmp_path):
    """Nemotron 3.5 Transcribe: features [1, frames, mel bins] (the mel bins from a nested sub-config) padded
    to a multiple of its subsampling_factor as its processor pads them, a mask over those frames, and a
    language model with Mamba layers: prefill_audio's steps (eager, two of them past the tokens and undone)
    and then decode give transformers' greedy tokens."""
    from tandem.recipes.audio_lm import RecurrentAudioLM, audio_inputs, audio_lm

    model, tok = zoo.make_checkpoint("Nemotron3_5TranscribeForConditionalGeneration", tmp_path, audio_lm=True, consistent=True)
    features = audio.audio_input(model, tmp_path)
    x = features["input_features"]
    assert list(x.shape) == [1, 104, 128] and x[:, 101:].abs().max() == 0  # 101 frames of 1 s, padded to 13 * 8
    inputs, count = audio_inputs(model, "input_features", x)
    assert count == 13 and torch.equal(inputs["input_features_mask"], torch.ones(1, 104, dtype=torch.long))
    ids, inputs = audio.prompt(model, tok, zoo.PROMPT, features, NEW)
    want = zoo.reference(model, ids, inputs, NEW)
    masks = {"input_features_mask": (1, 104)}
    lm = audio_lm(model, len(ids) + NEW, 4, "input_features", masks, x, count)[0]
    assert isinstance(lm, RecurrentAudioLM)
    end = audio.BEFORE + count + audio.AFTER
    with torch.no_grad():
        lm.step(torch.tensor([ids[: audio.BEFORE]]))
        lm.step_audio(torch.tensor([ids[audio.BEFORE : end]]), x)  # 13 + 2 tokens in 13 + 4 steps
        logits = lm.step(torch.tensor([ids[end:]]))
        got = []
        while len(got) < NEW:
            got.append(int(logits.argmax()))
            logits = lm.step(torch.tensor([[got[-1]]]))
    assert int(lm.position) == len(ids) + NEW
    assert got == want


def test_the_recipes_patches_of_torch_tensor_leave_it_as_it_was():
    """fixed_counts (a torch function mode) and the tracer's watch leave torch.Tensor as it was: a
    `__getitem__` set on it, even when the inherited one is put back, makes 0-d tensors sequences to
    CPython, and torch.tensor([t0, t1]) then fails (transformers' Kyutai generate builds its window so)."""
    from tandem.recipes.audio_lm import fixed_counts
    from tandem.watching import _watching

    before = dict(torch.Tensor.__dict__)
    with fixed_counts(None):
        torch.zeros(3)[torch.tensor([True, False, True])]
    with fixed_counts([2]):
        pass
    with _watching({}):
        pass
    assert dict(torch.Tensor.__dict__) == before
    assert torch.tensor([torch.tensor(0), torch.tensor(1)]).tolist() == [0, 1]
