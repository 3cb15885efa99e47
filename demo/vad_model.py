"""Silero VAD (PyPI `silero-vad`, MIT) rebuilt as a plain nn.Module with its shipped weights, for
tandem.export: `forward(x)` takes one 16 kHz chunk with its context, [1, 64 + 512] samples, and
returns the speech probability [1, 1], carrying the LSTM's (h, c) between calls as buffers;
`reset()` clears them. The context is the caller's (streamAudio's `context: 64`), as the shipped
model's wrapper keeps it.

The network, as the package's TorchScript model (silero_vad.jit, its 16 kHz branch) computes it:
reflection-pad 64 samples on the right, an STFT as a strided conv1d with the shipped basis
(258 × 256, hop 128) to a 129-bin magnitude, four conv1d(k=3, pad 1) + ReLU layers (strides 1, 2,
2, 1), an LSTM cell (128), ReLU, conv1d(128 → 1) and a sigmoid.

    python demo/vad_model.py OUT.tandem   # checks the rebuild against the shipped model, exports it
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

CONTEXT, CHUNK, RATE = 64, 512, 16000


def shipped_jit_path() -> Path:
    return Path(str(resources.files("silero_vad") / "data" / "silero_vad.jit"))


def shipped_onnx_path() -> Path:
    return Path(str(resources.files("silero_vad") / "data" / "silero_vad.onnx"))


class SileroVad(nn.Module):
    def __init__(self):
        super().__init__()
        n = CONTEXT + CHUNK
        self.register_buffer("basis", torch.zeros(258, 1, 256))
        # reflection padding of 64 on the right: padded[n + j] = x[n - 2 - j]
        self.register_buffer("reflect", torch.arange(n - 2, n - 2 - CONTEXT, -1))
        self.convs = nn.ModuleList(
            [
                nn.Conv1d(129, 128, 3, padding=1),
                nn.Conv1d(128, 64, 3, stride=2, padding=1),
                nn.Conv1d(64, 64, 3, stride=2, padding=1),
                nn.Conv1d(64, 128, 3, padding=1),
            ]
        )
        self.lstm = nn.LSTMCell(128, 128)
        self.out = nn.Conv1d(128, 1, 1)
        self.register_buffer("h", torch.zeros(1, 128))
        self.register_buffer("c", torch.zeros(1, 128))

    def forward(self, x):
        padded = torch.cat([x, x.index_select(1, self.reflect)], 1)
        spec = F.conv1d(padded.unsqueeze(1), self.basis, stride=128)
        magnitude = torch.sqrt(spec[:, :129] ** 2 + spec[:, 129:] ** 2)
        y = magnitude
        for conv in self.convs:
            y = torch.relu(conv(y))
        h, c = self.lstm(y.squeeze(-1), (self.h, self.c))
        self.h.copy_(h)
        self.c.copy_(c)
        return torch.sigmoid(self.out(torch.relu(h).unsqueeze(-1))).squeeze(-1)

    def reset(self):
        self.h.zero_()
        self.c.zero_()


def from_shipped() -> SileroVad:
    """The rebuild with the weights of the installed package's silero_vad.jit (16 kHz model)."""
    shipped = torch.jit.load(str(shipped_jit_path()), map_location="cpu")._model.state_dict()
    m = SileroVad()
    with torch.no_grad():
        m.basis.copy_(shipped["stft.forward_basis_buffer"])
        for i, conv in enumerate(m.convs):
            conv.weight.copy_(shipped[f"encoder.{i}.reparam_conv.weight"])
            conv.bias.copy_(shipped[f"encoder.{i}.reparam_conv.bias"])
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(m.lstm, name).copy_(shipped[f"decoder.rnn.{name}"])
        m.out.weight.copy_(shipped["decoder.decoder.2.weight"])
        m.out.bias.copy_(shipped["decoder.decoder.2.bias"])
    return m.eval()


def chunks_with_context(audio: torch.Tensor) -> list:
    """[1, 576] chunks of 16 kHz mono audio: 64 samples before (zeros at the start) and 512 new,
    the last padded with zeros, as streamAudio cuts them."""
    n = -(-audio.numel() // CHUNK) * CHUNK
    padded = torch.zeros(CONTEXT + n)
    padded[CONTEXT : CONTEXT + audio.numel()] = audio
    return [padded[i : i + CONTEXT + CHUNK].unsqueeze(0) for i in range(0, n, CHUNK)]


def shipped_probabilities(audio: torch.Tensor) -> torch.Tensor:
    """The shipped TorchScript model's probabilities, chunk by chunk (its wrapper keeps the context)."""
    jit = torch.jit.load(str(shipped_jit_path()), map_location="cpu").eval()
    with torch.no_grad():
        return torch.cat([jit(c[:, CONTEXT:], RATE) for c in chunks_with_context(audio)]).flatten()


def check_against_shipped(model: SileroVad, audio: torch.Tensor, atol: float = 1e-5) -> float:
    """Raises unless the rebuild gives the shipped TorchScript model's probabilities on `audio`;
    returns the largest difference."""
    model.reset()
    with torch.no_grad():
        ours = torch.cat([model(c) for c in chunks_with_context(audio)]).flatten()
    model.reset()
    theirs = shipped_probabilities(audio)
    worst = float((ours - theirs).abs().max())
    if worst > atol:
        raise AssertionError(f"the Silero VAD rebuild differs from the shipped silero_vad.jit by {worst} (tolerance {atol})")
    return worst


def test_audio(seconds: float = 4.0, seed: int = 0) -> torch.Tensor:
    """A deterministic 16 kHz signal with voiced-like bursts between quiet noise."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(int(seconds * RATE)) / RATE
    voiced = sum(
        torch.sin(2 * torch.pi * f * t * (1 + 0.05 * torch.sin(2 * torch.pi * 3 * t))) / k
        for k, f in enumerate([140, 280, 420, 700, 1100], 1)
    )
    gate = ((t % 1.0) < 0.5).float()
    return (0.3 * voiced * gate + 0.01 * torch.randn(t.shape, generator=g)).float()


def export(path: Path) -> None:
    import tandem

    model = from_shipped()
    worst = check_against_shipped(model, test_audio())
    program = tandem.export(
        model,
        {"forward": (torch.zeros(1, CONTEXT + CHUNK),), "reset": ()},
        metadata={"sample_rate": RATE, "chunk": CHUNK, "context": CONTEXT, "model": "silero-vad 16 kHz"},
    )
    program.save(path)
    print(f"{path}: Silero VAD from the installed silero-vad package (matches silero_vad.jit within {worst:.1e})")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    export(Path(sys.argv[1] if len(sys.argv) > 1 else "build/demo/silero_vad.tandem"))
