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


def test_the_demo_pages_segmenter_is_the_packages(tmp_path):
    """demo/segments.js (the page's speech segments) against silero-vad's own
    get_speech_timestamps_from_probs on random probability sequences (runs and flickers around the
    thresholds, segments near each other and near the ends)."""
    import json
    import subprocess

    from silero_vad.utils_vad import get_speech_timestamps_from_probs

    rng = np.random.default_rng(3)
    cases = []
    for _ in range(300):
        n = int(rng.integers(1, 120))
        levels = rng.choice([0.05, 0.3, 0.4, 0.6, 0.95], size=n, p=[0.35, 0.1, 0.1, 0.1, 0.35])
        runs = np.repeat(levels, rng.integers(1, 12, size=n))[:n]
        length = n * 512 - int(rng.integers(0, 512))
        want = get_speech_timestamps_from_probs(runs.tolist(), sampling_rate=16000, threshold=0.5, audio_length_samples=length)
        cases.append({"probs": runs.tolist(), "length": length, "want": [[s["start"], s["end"]] for s in want]})
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    script = (
        f"import {{ speechSegments }} from {json.dumps((ROOT / 'demo' / 'segments.js').as_uri())};\n"
        f"import {{ readFileSync }} from 'node:fs';\n"
        f"const cases = JSON.parse(readFileSync({json.dumps(str(tmp_path / 'cases.json'))}, 'utf8'));\n"
        "console.log(JSON.stringify(cases.map((c) => speechSegments(c.probs, { length: c.length }))));\n"
    )
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert sum(len(c["want"]) for c in cases) > 300, "the cases have segments"
    for i, (g, c) in enumerate(zip(got, cases)):
        assert g == c["want"], f"case {i}: {c['probs']} (length {c['length']}): page {g}, package {c['want']}"
