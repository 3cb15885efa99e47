"""The audio-LM recipe (python/tandem/recipes/audio_lm.py): a decoder-only model that merges its audio
encoder's output into its token stream, exported by `python -m tandem export DIR --encoder-input-shape`
with its audio as an argument of prefill_audio, generates what transformers' generate does on the same
ids and audio, natively and in wasm; a call with another number of placeholders fails its guard with the
state unchanged. The models are tiny and seeded (tests/models/zoo.py, tests/models/audio.py)."""

import pytest
import torch

import tandem
import tandem.runtime as runtime
from tandem.cli import main as cli

pytest.importorskip("transformers")

from models import audio, zoo  # noqa: E402

NEW = 6


@pytest.fixture(scope="module", params=["VoxtralForConditionalGeneration", "Qwen2AudioForConditionalGeneration"])
def exported(request, tmp_path_factory):
    """(folder, the exported file, prompt ids, audio, transformers' greedy tokens) of one class."""
    folder = tmp_path_factory.mktemp(request.param)
    model, tok = zoo.make_checkpoint(request.param, folder / "checkpoint", audio_lm=True)
    features = audio.audio_input(model, folder / "checkpoint")
    ids, inputs = audio.prompt(model, tok, zoo.PROMPT, features)
    want = zoo.reference(model, ids, inputs, NEW)
    out = folder / "model.tandem"
    shape = ",".join(map(str, next(iter(features.values())).shape))
    args = ["export", str(folder / "checkpoint"), "-o", str(out), "--quiet", "--max-prompt-len", "4", "--encoder-input-shape", shape]
    assert cli([*args, "--max-cache-len", str(len(ids) + NEW)]) == 0
    return folder, out, ids, features, want


@pytest.mark.parametrize("backend", ["native", "wasm"])
def test_an_audio_lm_generates_from_its_audio_as_transformers(exported, backend, wasm_lib):
    folder, out, ids, features, want = exported
    saved = runtime._lib, runtime.BACKEND
    if backend == "wasm":
        runtime._lib, runtime.BACKEND = wasm_lib, "wasm"
    try:
        with tandem.load(out) as m:
            md = m.metadata
            assert {"prefill_audio", "prefill", "decode", "decode_topk", "reset"} <= set(m.methods)
            assert md["audio_input"] == "input_features" and md["audio_input_shape"] == [1, 128, 100]
            assert md["audio_tokens"] == 25 and ids.count(md["audio_token_id"]) == 25  # 50 encoder positions, pooled by 2
            assert md["max_audio_prompt_len"] == 25 + 4
            assert audio.greedy(m, ids, features, NEW) == want
            other = audio.greedy(m, ids, {"x": torch.zeros(1, 128, 100)}, NEW)
            assert other != want  # the audio is read: silence gives other tokens
    finally:
        runtime._lib, runtime.BACKEND = saved


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
    ids, inputs = audio.prompt(model, tok, zoo.PROMPT, features)
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
