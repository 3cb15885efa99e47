"""The codec-LM recipe (python/tandem/recipes/codec_lm.py): transformers' Kyutai speech-to-text, whose
every position reads its text token and a frame of its codec's (Mimi's) codes, exported by
`python -m tandem export DIR --encoder-input-shape` with `encode(audio)` beside the causal LM's methods,
generates what transformers' generate does on the same audio, token for token over every frame of the
audio, natively and in wasm; a call past the audio's frames fails its guard with the state unchanged.
The model is tiny and seeded (tests/models/zoo.py, tests/models/codec.py), its codec's codebooks seeded
too (a built model's are zero, so every frame would have the same codes)."""

import pytest
import torch

import tandem
import tandem.runtime as runtime
from tandem.cli import main as cli

transformers = pytest.importorskip("transformers")

from models import codec, zoo  # noqa: E402

CLASS = "KyutaiSpeechToTextForConditionalGeneration"
FRAMES = 25  # 1 s of audio and the 1 s of silence its feature extractor pads after it, at 12.5 frames a second


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(the exported file, the audio input, prompt ids, transformers' greedy tokens over every frame)."""
    folder = tmp_path_factory.mktemp("kyutai")
    model, _ = zoo.make_checkpoint(CLASS, folder / "checkpoint", audio_lm=True, consistent=True)  # the walk's first shrink that builds
    g = torch.Generator().manual_seed(1)
    for m in model.codec_model.modules():
        if hasattr(m, "embed_sum"):  # the codebooks: seeded, so the codes differ from frame to frame
            m.embed_sum.copy_(torch.randn(m.embed_sum.shape, generator=g))
            m._embed = None
    model.save_pretrained(folder / "checkpoint")
    inputs = codec.audio_input(model, folder / "checkpoint")
    ids = [model.config.bos_token_id]
    want = zoo.reference(model, ids, inputs, FRAMES)  # generate goes on to the audio's last frame
    assert len(want) == FRAMES and len(set(want)) > FRAMES // 3, f"degenerate tokens: the test would prove little: {want}"
    longer = [*ids, 5, 6, 7]  # a prompt of more than the start token: one prefill reads the codes of three frames
    tokens, how = torch.tensor([longer]), transformers.GenerationConfig(do_sample=False, eos_token_id=None, pad_token_id=0)
    with torch.no_grad():  # (its max_new_tokens as an argument: generate takes no other)
        out = model.generate(
            tokens, attention_mask=torch.ones_like(tokens), generation_config=how, max_new_tokens=FRAMES + 1 - len(longer), **inputs
        )
    prompts = {tuple(ids): want, tuple(longer): out[0, len(longer) :].tolist()}
    out = folder / "model.tandem"
    shape = ",".join(map(str, inputs["input_values"].shape))
    args = ["export", str(folder / "checkpoint"), "-o", str(out), "--quiet", "--max-prompt-len", "4", "--encoder-input-shape", shape]
    assert cli([*args, "--max-cache-len", str(FRAMES + 4)]) == 0  # room past the audio: the guard refuses, not the cache
    return out, inputs, ids, want, prompts


def test_kyutai_generates_from_its_audio_as_transformers(exported, backend):
    out, inputs, ids, want, prompts = exported
    with tandem.load(out) as m:
        md = m.metadata
        assert set(m.methods) == {"encode", "prefill", "decode", "decode_topk", "reset"}
        assert md["audio_input"] == "input_values" and md["audio_input_shape"] == [1, 1, 48000]
        assert md["audio_frames"] == FRAMES and md["frame_size"] == 1920 and md["num_codebooks"] == 32
        for prompt, tokens in prompts.items():
            assert codec.greedy(m, list(prompt), inputs, len(tokens)) == tokens, prompt
        m.reset()
        m.encode(inputs["input_values"])
        values, top = m.decode_topk(torch.tensor([ids]))  # decode_topk reads the codes as decode does
        assert int(top[0, 0]) == want[0] and values.shape == top.shape
        silence = codec.greedy(m, ids, {"input_values": torch.zeros(1, 1, 48000)}, FRAMES)
        assert silence != want  # the audio is read
        assert codec.greedy(m, ids, inputs, FRAMES) == want  # encode starts a new decode


def test_a_call_past_the_audio_fails_with_the_state_unchanged(exported):
    out, inputs, ids, want, prompts = exported
    with tandem.load(out) as m:
        codec.greedy(m, ids, inputs, FRAMES)  # positions 0 .. FRAMES - 1 written
        m.decode(torch.tensor([[want[-1]]]))  # position FRAMES reads the last frame
        before = m.save_state()
        with pytest.raises(runtime.TandemError, match="TDM_ERR_GUARD") as e:
            m.decode(torch.tensor([[5]]))  # position FRAMES + 1 would read a frame the audio does not have
        assert e.value.code == "TDM_ERR_GUARD"
        assert m.save_state() == before
        m.reset()  # no audio: position 0 (which reads the start codes) only
        m.prefill(torch.tensor([ids]))
        before = m.save_state()
        with pytest.raises(runtime.TandemError, match="TDM_ERR_GUARD"):
            m.decode(torch.tensor([[5]]))
        assert m.save_state() == before


@pytest.mark.parametrize("causal", [True, False])
def test_the_mimi_conv_adapter_pads_as_its_own_forward(causal):
    """adapters.py's MimiConv1d: the paddings in Python ints give the module's own output at every length."""
    from transformers.models.mimi.modeling_mimi import MimiConfig, MimiConv1d

    from tandem.recipes.adapters import adapted

    config = MimiConfig(use_causal_conv=causal)
    torch.manual_seed(0)
    conv = MimiConv1d(config, 3, 4, kernel_size=7, stride=4, dilation=1)
    for length in range(20, 29):
        x = torch.randn(1, 3, length)
        want = conv(x)
        with adapted(conv):
            got = conv(x)
        assert got.shape == want.shape and torch.equal(got, want), length
