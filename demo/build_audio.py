"""Builds the audio demo's files into OUT (default build/demo), each only when missing:

- silero_vad.tandem: Silero VAD from the installed silero-vad package's shipped weights, rebuilt
  (demo/vad_model.py), checked against the shipped TorchScript model, exported;
- recording.wav: a 16 kHz mono 16-bit recording made here: espeak-ng speech (Debian's espeak-ng),
  with silences and background noise between the sentences;
- recording.json: the reference, the shipped ONNX model (onnxruntime) on that recording: its
  probability per 512-sample chunk and its speech segments by the package's own
  get_speech_timestamps_from_probs (threshold 0.5), which the page's must equal;
- codec.tandem: Kyutai's Mimi codec from the `moshi` package, small (tests/python/packaged_models.py
  `mimi(small=True)`: 2 transformer layers, narrow convs, the real SEANet strides, so one frame is
  1920 samples, 80 ms at 24 kHz) with seeded RANDOM weights (no trained weights exist offline),
  exported as moshi's streaming API is used: encode_step = mimi.encode, decode_step = mimi.decode,
  reset = mimi.reset_streaming, inside `with mimi.streaming(1)`, so the conv buffers and the KV
  caches of the encoder and the decoder stay in the program between frames. Its export takes about
  half a minute, once;
- stt.tandem: Kyutai's streaming speech-to-text, small (tests/python/packaged_models.py
  `stt(small=True)`: that Mimi and moshi's LMModel with the STT structure, seeded RANDOM weights),
  one `step` per 80 ms frame: Mimi's streaming encode, then LMGen.step on its codes (a greedy text
  token), and `reset`.

    python demo/build_audio.py [OUT]        (npm start and scripts/test.sh run it)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "python")]
import vad_model as vad  # noqa: E402

SENTENCES = [
    "Tandem runs exported PyTorch models in the browser.",
    "This recording has speech, silence and noise.",
    "Each chunk of thirty two milliseconds goes through the model as it arrives.",
]


def speak(text: str) -> tuple:
    """espeak-ng's speech for `text`: (samples as float64 in [-1, 1], rate)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.wav"
        try:
            subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "-w", str(path), text], check=True, capture_output=True)
        except FileNotFoundError:
            raise SystemExit("build_audio: espeak-ng is missing: apt-get install espeak-ng (scripts/setup.sh espeak-ng)") from None
        with wave.open(str(path)) as w:
            assert w.getsampwidth() == 2 and w.getnchannels() == 1
            return np.frombuffer(w.readframes(w.getnframes()), np.int16) / 32768.0, w.getframerate()


def recording() -> np.ndarray:
    """Silence, sentence, noise, sentence, ...: int16 samples at 16 kHz."""
    from scipy.signal import resample_poly

    rng = np.random.default_rng(2026)
    parts = [np.zeros(int(0.7 * vad.RATE))]
    for i, text in enumerate(SENTENCES):
        speech, rate = speak(text)
        g = np.gcd(rate, vad.RATE)
        parts.append(0.8 * resample_poly(speech, vad.RATE // g, rate // g))
        gap = int((1.0 + 0.4 * i) * vad.RATE)
        parts.append(0.02 * rng.standard_normal(gap) if i % 2 == 0 else np.zeros(gap))
    x = np.concatenate(parts)
    x += 0.003 * rng.standard_normal(x.size)  # a little noise floor throughout
    return np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16)


def reference(samples: np.ndarray) -> dict:
    import onnxruntime as ort
    import torch
    from silero_vad.utils_vad import get_speech_timestamps_from_probs

    audio = torch.from_numpy(samples.astype(np.float32) / 32768)
    session = ort.InferenceSession(str(vad.shipped_onnx_path()), providers=["CPUExecutionProvider"])
    state, probs = np.zeros((2, 1, 128), np.float32), []
    for c in vad.chunks_with_context(audio):
        p, state = session.run(None, {"input": c.numpy(), "state": state, "sr": np.array(vad.RATE, np.int64)})
        probs.append(float(p[0, 0]))
    segments = get_speech_timestamps_from_probs(probs, sampling_rate=vad.RATE, threshold=0.5, audio_length_samples=samples.size)
    return {
        "model": "silero_vad.onnx (onnxruntime)",
        "threshold": 0.5,
        "samples": int(samples.size),
        "probs": probs,
        "segments": [[s["start"], s["end"]] for s in segments],
    }


CODEC_RATE, CODEC_FRAME = 24000, 1920


def export_codec(path: Path) -> None:
    """The small Mimi, run one frame eagerly first (moshi registers its codebook buffers lazily),
    then exported in streaming mode; the page resets it before each run."""
    import torch

    import tandem

    sys.path.insert(0, str(HERE.parent / "tests" / "python"))
    from packaged_models import mimi

    model = mimi(small=True)
    x = torch.zeros(1, 1, CODEC_FRAME)
    with torch.no_grad(), model.streaming(1):
        codes = model.encode(x)
        model.decode(codes)
    with torch.no_grad(), model.streaming(1):
        program = tandem.export(
            None,
            {
                "encode_step": tandem.Method(model.encode, (x,)),
                "decode_step": tandem.Method(model.decode, (codes,)),
                "reset": tandem.Method(model.reset_streaming, ()),
            },
            metadata={"sample_rate": CODEC_RATE, "chunk": CODEC_FRAME, "model": "Mimi (moshi), small, random seeded weights"},
        )
    path.write_bytes(program.to_bytes())
    print(f"{path}: {path.stat().st_size / 1e6:.1f} MB")


def export_stt(path: Path) -> None:
    """The small Kyutai STT (Mimi's encode + LMGen.step as one `step`), exported in streaming mode."""
    import torch

    import tandem

    sys.path.insert(0, str(HERE.parent / "tests" / "python"))
    from packaged_models import stt

    t = stt(small=True)
    with torch.no_grad(), t.mimi.streaming(1), t.lm_gen.streaming(1):
        methods = {"step": tandem.Method(t.step, (torch.zeros(1, 1, CODEC_FRAME),)), "reset": tandem.Method(t.reset, ())}
        meta = {"sample_rate": CODEC_RATE, "chunk": CODEC_FRAME, "model": "Kyutai STT (moshi), small, random seeded weights"}
        program = tandem.export(None, methods, metadata=meta)
    path.write_bytes(program.to_bytes())
    print(f"{path}: {path.stat().st_size / 1e6:.1f} MB")


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model = out / "silero_vad.tandem"
    if not model.exists():
        vad.export(model)
    if not (out / "codec.tandem").exists():
        export_codec(out / "codec.tandem")
    if not (out / "stt.tandem").exists():
        export_stt(out / "stt.tandem")
    wav, ref = out / "recording.wav", out / "recording.json"
    if not wav.exists() or not ref.exists():
        samples = recording()
        with wave.open(str(wav), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(vad.RATE)
            w.writeframes(samples.tobytes())
        ref.write_text(json.dumps(reference(samples)))
        print(f"{wav}: {samples.size / vad.RATE:.2f} s; {ref}: {len(json.loads(ref.read_text())['segments'])} speech segments")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else HERE.parent / "build" / "demo"))
