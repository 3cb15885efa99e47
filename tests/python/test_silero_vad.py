"""Silero VAD rebuilt as a plain nn.Module (demo/vad_model.py) from the weights the installed
silero-vad package ships: it gives the shipped TorchScript model's probabilities, and so does the
shipped ONNX model (onnxruntime) and the exported program on the runtime, chunk by chunk, state
carried, after a reset too."""
import sys

import numpy as np
import pytest
import torch

from conftest import ROOT

sys.path.insert(0, str(ROOT / "demo"))
pytest.importorskip("silero_vad")
import vad_model as vad  # noqa: E402

import tandem  # noqa: E402


@pytest.fixture(scope="module")
def audio():
    noise = 0.05 * torch.randn(vad.RATE, generator=torch.Generator().manual_seed(5))
    return torch.cat([vad.test_audio(3.0), noise])


@pytest.fixture(scope="module")
def shipped(audio):
    p = vad.shipped_probabilities(audio)
    assert p.min() < 0.1 and p.max() > 0.9, "the test audio has both speech-like and quiet parts"
    return p


def test_the_rebuild_gives_the_shipped_torchscript_models_probabilities(audio, shipped):
    m = vad.from_shipped()
    assert vad.check_against_shipped(m, audio) <= 1e-5
    with torch.no_grad():
        again = torch.cat([m(c) for c in vad.chunks_with_context(audio)]).flatten()
    torch.testing.assert_close(again, shipped, atol=1e-5, rtol=0)


def test_the_shipped_onnx_model_agrees(audio, shipped):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(vad.shipped_onnx_path()), providers=["CPUExecutionProvider"])
    state, out = np.zeros((2, 1, 128), np.float32), []
    for c in vad.chunks_with_context(audio):  # its input is the chunk with its 64 context samples
        p, state = session.run(None, {"input": c.numpy(), "state": state, "sr": np.array(vad.RATE, np.int64)})
        out.append(p[0, 0])
    np.testing.assert_allclose(np.array(out), shipped.numpy(), atol=1e-5, rtol=0)


def test_the_exported_program_runs_it_on_the_runtime(audio, shipped, tmp_path):
    path = tmp_path / "silero_vad.tandem"
    vad.export(path)
    m = tandem.load(path)
    assert m.metadata["sample_rate"] == 16000 and m.metadata["context"] == 64 and m.metadata["chunk"] == 512
    chunks = vad.chunks_with_context(audio)
    got = torch.cat([m.forward(c) for c in chunks]).flatten()
    torch.testing.assert_close(got, shipped, atol=1e-5, rtol=0)
    m.reset()
    torch.testing.assert_close(m.forward(chunks[0]).flatten(), shipped[:1], atol=1e-5, rtol=0)
