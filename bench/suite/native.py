"""tandem from Python, single thread, in one process: the native library built scalar
(build/native-scalar, -DTDM_NATIVE_SIMD=OFF), the native library as shipped (build/native: the SIMD128
kernels through SIMDe, AVX2+FMA GEMM/GEMV where the CPU has them), the same library with
TANDEM_NATIVE_ISA=simd128 (the SIMD128 kernels alone, SSE2 through SIMDe), the wasm backend (web/tandem.wasm
under wasmtime) and PyTorch eager (torch.set_num_threads(1)), on three programs:

  - linear: nn.Linear(512, 512) on a [64, 512] input (33.6 MFLOP);
  - decode: one decode step of a 4-layer Llama-style TinyLM (width 256, 4 heads, KV cache of 512,
    SiLU MLP, tied head; tests/models/families.py), positions 16 to 16 + STEPS after a prefill;
  - vad: a Silero-VAD-v5-shaped streaming step: 512 new samples plus 64 kept from the last call,
    an STFT as a strided convolution (258 filters of 256 taps, stride 128), magnitude, four conv +
    ReLU layers (129→128→64→64→128 channels, two of stride 2), an LSTM cell of 128 carried
    between calls, a 1×1 convolution and a sigmoid;
  - the weight widths: nn.Linear(1024, 4096) on one row (a decode step's GEMV, 16 MiB of float32
    weights) and the decode step above, each exported float32, with quantize="int8" (matmul_q8:
    int8 activations and integer dot products for one row) and "int4" (matmul_q4: the same, per
    weight group), and the int8 linear on 64 rows (the GEMM tiles). PyTorch eager runs
    the float module for all (it has no int8 path of its own here); the quantized rows' error is
    the quantization's.

Each cell is the best over ROUNDS rounds (interleaved across the backends, timeit's rule: the
machine may be shared) of the mean time per call; the ratio columns divide native SIMD's time by
PyTorch's and by wasm's.
Also checks every backend's outputs against eager's (max |diff|).

    bash bench/suite/run.sh with TANDEM_BENCH=native, or directly:
    PYTHONPATH=python:tests ~/.cache/tandem-venv/bin/python bench/suite/native.py
"""

import copy
import ctypes
import gc
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "tests")]
warnings.filterwarnings("ignore")
import tandem  # noqa: E402
import tandem.runtime as runtime  # noqa: E402
from models.families import TinyLM  # noqa: E402

torch.set_num_threads(1)
ROUNDS = int(os.environ.get("TANDEM_BENCH_ROUNDS", "7"))


class SileroShaped(nn.Module):
    def __init__(self):
        super().__init__()
        self.stft = nn.Conv1d(1, 258, 256, stride=128, bias=False)
        self.enc = nn.ModuleList(
            [
                nn.Conv1d(129, 128, 3, padding=1),
                nn.Conv1d(128, 64, 3, stride=2, padding=1),
                nn.Conv1d(64, 64, 3, stride=2, padding=1),
                nn.Conv1d(64, 128, 3, padding=1),
            ]
        )
        self.lstm = nn.LSTMCell(128, 128)
        self.out = nn.Conv1d(128, 1, 1)
        self.register_buffer("context", torch.zeros(1, 64))
        self.register_buffer("h", torch.zeros(1, 128))
        self.register_buffer("c", torch.zeros(1, 128))

    def forward(self, x):
        s = torch.cat([self.context, x], dim=1)  # [1, 576]
        self.context.copy_(x[:, -64:])
        s = F.pad(s, (0, 64))[:, None, :]  # [1, 1, 640]
        z = self.stft(s)  # [1, 258, 4]
        re, im = z[:, :129], z[:, 129:]
        m = torch.sqrt(re * re + im * im)
        for conv in self.enc:
            m = torch.relu(conv(m))
        h, c = self.lstm(m[:, :, -1], (self.h, self.c))
        self.h.copy_(h)
        self.c.copy_(c)
        return torch.sigmoid(self.out(torch.relu(h)[:, :, None]))[:, 0]

    def reset(self):
        self.context.zero_()
        self.h.zero_()
        self.c.zero_()


def time_round(setup, call, calls):
    """Mean seconds per call over `calls` calls (setup runs, untimed, first)."""
    setup()
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - t0) / calls


def cases():
    torch.manual_seed(0)
    lin = nn.Linear(512, 512).eval()
    x = torch.randn(64, 512)
    lm = TinyLM(vocab=96, d=256, heads=4, layers=4, capacity=512, chunk=16).eval()
    prompt = torch.randint(0, 96, (1, 16))
    tok = torch.tensor([[5]])
    vad = SileroShaped().eval()
    chunk = torch.randn(1, 512) * 0.1
    wide = nn.Linear(1024, 4096).eval()
    row = torch.randn(1, 1024)
    rows = torch.randn(64, 1024)
    return [
        ("linear 64x512x512", lin, {"forward": (x,)}, 50, lambda m: None, lambda m: m.forward(x)),
        (
            "LM decode step (4 layers, d 256)",
            lm,
            {"prefill": (prompt,), "decode": (tok,), "reset": ()},
            200,
            lambda m: (m.reset(), m.prefill(prompt)),
            lambda m: m.decode(tok),
        ),
        ("VAD step (Silero-v5-shaped)", vad, {"forward": (chunk,), "reset": ()}, 300, lambda m: m.reset(), lambda m: m.forward(chunk)),
        ("linear 1x1024x4096 float32", wide, {"forward": (row,)}, 100, lambda m: None, lambda m: m.forward(row)),
        ("linear 1x1024x4096 int8", wide, {"forward": (row,)}, 100, lambda m: None, lambda m: m.forward(row), "int8"),
        ("linear 1x1024x4096 int4", wide, {"forward": (row,)}, 100, lambda m: None, lambda m: m.forward(row), "int4"),
        ("linear 64x1024x4096 float32", wide, {"forward": (rows,)}, 10, lambda m: None, lambda m: m.forward(rows)),
        ("linear 64x1024x4096 int8", wide, {"forward": (rows,)}, 10, lambda m: None, lambda m: m.forward(rows), "int8"),
        (
            "LM decode step int8",
            lm,
            {"prefill": (prompt,), "decode": (tok,), "reset": ()},
            200,
            lambda m: (m.reset(), m.prefill(prompt)),
            lambda m: m.decode(tok),
            "int8",
        ),
        (
            "LM decode step int4",
            lm,
            {"prefill": (prompt,), "decode": (tok,), "reset": ()},
            200,
            lambda m: (m.reset(), m.prefill(prompt)),
            lambda m: m.decode(tok),
            "int4",
        ),
    ]


def backends():
    from tandem.wasm import WasmLibrary

    out = []
    scalar = ROOT / "build" / "native-scalar" / "libtandem-scalar.so"
    if scalar.exists():
        out.append(("native scalar", lambda: runtime.NativeLibrary(scalar)))
    out.append(("native SIMD", lambda: runtime.NativeLibrary(ROOT / "build" / "native" / "libtandem.so")))
    if ctypes.CDLL(str(ROOT / "build" / "native" / "libtandem.so")).tdm_build_features() & 8:
        # the same library without its AVX2+FMA kernels: a copy (its own process-wide choice),
        # loaded with TANDEM_NATIVE_ISA=simd128 and asked once while the variable is set
        copy_path = ROOT / "build" / "native" / "libtandem-simd128.so"
        shutil.copyfile(ROOT / "build" / "native" / "libtandem.so", copy_path)

        def simd128_only():
            os.environ["TANDEM_NATIVE_ISA"] = "simd128"
            assert not ctypes.CDLL(str(copy_path)).tdm_build_features() & 8
            del os.environ["TANDEM_NATIVE_ISA"]
            return runtime.NativeLibrary(copy_path)

        out.insert(len(out) - 1, ("native SIMD128 (SSE2)", simd128_only))
    out.append(("wasm SIMD128", lambda: WasmLibrary(runtime._wasm_path())))
    return out


def main():
    libs = [(name, make()) for name, make in backends()]
    print(f"tandem from Python, 1 thread; torch {torch.__version__}, {torch.get_num_threads()} thread; best of {ROUNDS} interleaved rounds")
    rows = []
    only = os.environ.get("TANDEM_NATIVE_CASES")  # e.g. "1024,int8": the programs whose title has one of these
    for title, module, spec, calls, setup, call, *quantize in cases():
        if only and not any(w.strip() in title for w in only.split(",")):
            continue
        data = tandem.export(copy.deepcopy(module), spec, quantize=quantize[0] if quantize else None).to_bytes()
        eager = copy.deepcopy(module)
        runners = [("eager", eager)]
        for name, lib in libs:
            runtime._lib = lib
            runners.append((name, tandem.load(data)))
        row = {}
        with torch.no_grad():
            setup(eager)
            ref = call(eager)
            for name, m in runners[1:]:
                setup(m)
                row[name + " err"] = (torch.as_tensor(call(m)) - ref).abs().max().item()
            # the export's garbage is collected and everything alive frozen, so the cyclic GC that
            # every backend's allocations trigger does not walk it (the same for all of them)
            gc.collect()
            gc.freeze()
            for name, m in runners:  # warm-up
                time_round(lambda: setup(m), lambda: call(m), max(3, calls // 10))
            times = {name: [] for name, _ in runners}
            for r in range(ROUNDS):  # interleaved, the order rotating, so load on the machine hits every backend alike
                for name, m in runners[r % len(runners) :] + runners[: r % len(runners)]:
                    times[name].append(time_round(lambda: setup(m), lambda: call(m), calls))
            gc.unfreeze()
        for name, ts in times.items():
            row[name] = min(ts)
        rows.append((title, row))
    names = [n for n, _ in libs]
    head = "| program | " + " | ".join(names) + " | PyTorch eager | native SIMD / eager | native SIMD / wasm |"
    print()
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for title, r in rows:
        cells = [f"{r[n] * 1e3:.3f} ms" for n in names]
        print(
            f"| {title} | " + " | ".join(cells) + f" | {r['eager'] * 1e3:.3f} ms | "
            f"{r['native SIMD'] / r['eager']:.2f}x | {r['native SIMD'] / r['wasm SIMD128']:.2f}x |"
        )
    print()
    for title, r in rows:
        print(f"{title}: max |y - eager| " + ", ".join(f"{n} {r[n + ' err']:.2e}" for n in names))


if __name__ == "__main__":
    main()
