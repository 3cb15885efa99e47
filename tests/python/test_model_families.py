"""The model families of tests/models/families.py through the native runtime against PyTorch eager over
call sequences: streaming chunk by chunk equals the whole signal (conv block, codec, after a reset too),
and an index out of range fails the call and leaves the state as it was."""

import pytest
import torch

import tandem
from cases import as_tuple, run_eager
from models.families import MODELS, CausalConvBlock, make_transformer, small_codec


@pytest.mark.parametrize("family", sorted(MODELS))
def test_family_matches_eager(family):
    module, spec, eager, calls = MODELS[family]()
    model = tandem.load(tandem.export(module, spec).to_bytes())
    want = run_eager(eager, calls)
    for i, ((name, inputs), w) in enumerate(zip(calls, want)):
        got = as_tuple(getattr(model, name)(*inputs))
        assert len(got) == len(w)
        for a, b in zip(got, w):
            torch.testing.assert_close(a, b, msg=lambda m: f"call {i} {name}: {m}")


def test_streaming_equals_whole_signal():
    torch.manual_seed(0)
    block = CausalConvBlock()
    signal = torch.randn(1, 8, block.chunk * 5)
    model = tandem.load(tandem.export(block, {"forward": (signal[:, :, : block.chunk],)}).to_bytes())
    streamed = torch.cat([model.forward(signal[:, :, i : i + block.chunk]) for i in range(0, signal.shape[2], block.chunk)], dim=2)
    with torch.no_grad():
        whole = block.full(signal)
    torch.testing.assert_close(streamed, whole)


def test_codec_streaming_equals_whole_signal():
    """The codec exported with encode_step / decode_step / reset: chunk by chunk, through the
    runtime, equals the eager model run over the whole signal at once (its convs' contexts, the
    transposed convs' overlaps and the attention's ring buffer carried in state across calls, the
    ring wrapping several times), and again after reset."""
    codec = small_codec()
    frames = codec.chunk // codec.hop
    g = torch.Generator().manual_seed(11)
    signal = torch.randn(1, 1, codec.chunk * 9, generator=g)
    latents = torch.randn(1, 32, frames * 9, generator=g)
    spec = {"encode_step": (signal[:, :, : codec.chunk],), "decode_step": (latents[:, :, :frames],), "reset": ()}
    model = tandem.load(tandem.export(codec, spec).to_bytes())
    with torch.no_grad():
        whole_enc, whole_dec = codec.encode(signal), codec.decode(latents)
    for _ in range(2):
        enc = torch.cat([model.encode_step(signal[:, :, i : i + codec.chunk]) for i in range(0, signal.shape[2], codec.chunk)], dim=2)
        dec = torch.cat([model.decode_step(latents[:, :, i : i + frames]) for i in range(0, latents.shape[2], frames)], dim=2)
        torch.testing.assert_close(enc, whole_enc)
        torch.testing.assert_close(dec, whole_dec)
        model.reset()


def test_out_of_range_index_fails_the_call_and_leaves_state():
    module, spec, _, _ = make_transformer(capacity=16)
    model = tandem.load(tandem.export(module, spec).to_bytes())
    model.prefill(torch.zeros(1, 8, dtype=torch.long))
    before = model.read_state("blocks.0.attn.k_cache").clone()
    with pytest.raises(tandem.TandemError) as e:
        model.decode(torch.tensor([[1000]]))  # token id past the vocabulary
    assert e.value.code == "TDM_ERR_INDEX" and "1000" in str(e.value)
    torch.testing.assert_close(model.read_state("blocks.0.attn.k_cache"), before)
    torch.testing.assert_close(model.read_state("pos"), torch.tensor(8))
