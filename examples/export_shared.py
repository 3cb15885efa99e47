"""Export the model of the original report: Module1 adds to a buffer of a shared submodule,
Module2 clears it. One .tandem file, one state slot, two methods."""

import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import tandem  # noqa: E402


class SharedModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("_v", torch.ones(1))


class Module1(nn.Module):
    def __init__(self, shared_module):
        super().__init__()
        self.shared_module = shared_module

    def forward(self, x):
        self.shared_module._v[:] = self.shared_module._v + x
        return self.shared_module._v


class Module2(nn.Module):
    def __init__(self, shared_module):
        super().__init__()
        self.shared_module = shared_module

    def forward(self, x):
        self.shared_module._v.fill_(0.0)
        return x


shared = SharedModule()
example = (torch.randn(1),)
program = tandem.export(None, {"forward1": tandem.Method(Module1(shared), example), "forward2": tandem.Method(Module2(shared), example)})
out = sys.argv[1] if len(sys.argv) > 1 else "shared.tandem"
program.save(out)
print(f"exported {program} to {out} ({len(program.to_bytes())} bytes)")
