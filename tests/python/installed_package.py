"""Run by test_wheel.py with the python of a fresh venv where the wheel of `npm run wheel` was
installed, from a folder outside the clone (cases.py copied beside this file):
`python installed_package.py OUT VENV VERSION`. Exports with the installed package, runs on its
tandem.wasm, and compares with PyTorch eager; runs the CLI. Prints 'OK' last. (The transformers
recipe is tested in the clone, tests/python/test_transformers.py: importing transformers here would
take longer than everything else.)"""

import importlib.metadata
import re
import sys
from pathlib import Path

import torch

import tandem
import tandem.runtime
from cases import as_tuple, original_report, run_eager

out, venv, version = Path(sys.argv[1]), Path(sys.argv[2]).resolve(), sys.argv[3]
package = Path(tandem.__file__).resolve().parent
assert package.is_relative_to(venv) and package.parent.name == "site-packages", tandem.__file__
assert tandem.runtime.BACKEND == "wasm", tandem.runtime.BACKEND
assert tandem.runtime._wasm_path() == package / "tandem.wasm"
assert tandem.__version__ == version, (tandem.__version__, version)
assert importlib.metadata.version("tandem-runtime") == version


def _version_tuple(v: str) -> tuple:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:3])


# Every dependency the wheel declares (outside extras) is installed at a version it allows (all are ">=").
for req in importlib.metadata.requires("tandem-runtime"):
    if "extra ==" in req:
        continue
    name, minimum = re.fullmatch(r"([\w-]+)\s*>=\s*([\d.]+)", req).groups()
    have = importlib.metadata.version(name)
    assert _version_tuple(have) >= _version_tuple(minimum), f"{name} {have} does not satisfy {req}"

# The original report's model: two modules sharing one buffer, over a call sequence.
_, spec, eager, calls = original_report()
program = tandem.export(None, spec)
program.save(out / "original.tandem")
m = tandem.load(out / "original.tandem")
for i, (got, want) in enumerate(zip([as_tuple(m.call(n, *a)) for n, a in calls], run_eager(eager, calls))):
    assert len(got) == len(want), i
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, msg=lambda s: f"original report, call {i}: {s}")
torch.testing.assert_close(m.read_state("shared_module._v"), torch.tensor([5.0]))
m.reset_state()
torch.testing.assert_close(m.read_state("shared_module._v"), torch.tensor([1.0]))


# A small streaming model (a causal conv over chunks, its context and a running state carried
# between calls; a reset): prefill-free streaming, on the wasm runtime, against eager.
class Streaming(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(2, 4, 3)
        self.register_buffer("context", torch.zeros(1, 2, 2))
        self.register_buffer("total", torch.zeros(1, 4))

    def forward(self, x):
        y = self.conv(torch.cat([self.context, x], -1))
        self.context.copy_(x[:, :, -2:])
        self.total.add_(y.sum(-1))
        return torch.tanh(y) + self.total.unsqueeze(-1)

    def reset(self):
        self.context.zero_()
        self.total.zero_()


torch.manual_seed(0)
module = Streaming()
eager = Streaming()
eager.load_state_dict(module.state_dict())
chunks = torch.randn(5, 1, 2, 8, generator=torch.Generator().manual_seed(1))
tandem.export(module, {"forward": (chunks[0],), "reset": ()}, metadata={"sample_rate": 16000}).save(out / "streaming.tandem")
s = tandem.load(out / "streaming.tandem")
assert s.metadata == {"sample_rate": 16000}, s.metadata
with torch.no_grad():
    for i, c in enumerate(chunks):
        if i == 3:
            s.reset()
            eager.reset()
        torch.testing.assert_close(s.forward(c), eager(c), msg=lambda m: f"streaming chunk {i}: {m}")

# The command line, in this process (a subprocess would import torch again): inspect and check.
import contextlib  # noqa: E402
import io  # noqa: E402

import tandem.cli  # noqa: E402

for argv, want in [
    (["inspect", str(out / "original.tandem")], ["shared_module._v  float32[1]", "forward1: 1 op, 1 input, 1 output"]),
    (["check", str(out / "streaming.tandem")], ["forward: OK", "reset: OK"]),
]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert tandem.cli.main(argv) == 0, argv
    assert all(w in printed.getvalue() for w in want), printed.getvalue()
print("OK")
