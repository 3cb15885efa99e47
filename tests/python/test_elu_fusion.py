"""ELU (alpha 1) of a value no conv produced, as SEANet applies it after each residual add (moshi's
Mimi), fused from its four-op lowering (minimum, exp, sub, maximum) into one `elu` op
(python/tandem/fuse.py `_elu`, src/kernels/elementwise.c): checked against eager torch, and left
unfused where an intermediate has another reader."""

import torch
import torch.nn.functional as F
from torch import nn

import tandem


class Residual(nn.Module):
    """SEANet's residual unit (true skip), then the ELU the next unit starts with; the sum y is read
    both by that ELU and by the next skip."""

    def __init__(self, c=16):
        super().__init__()
        self.conv1 = nn.Conv1d(c, c // 2, 3, padding=1)
        self.conv2 = nn.Conv1d(c // 2, c, 1)

    def forward(self, x):
        y = x + self.conv2(F.elu(self.conv1(F.elu(x))))
        return y + self.conv1.weight.new_ones(()) * F.elu(y)


def _ops(program):
    return [op.name for op in program.method("forward").ops]


def test_elu_after_residual_add_is_one_op_equal_to_eager():
    torch.manual_seed(0)
    model = Residual().eval()
    x = torch.randn(2, 16, 300) * 3  # both signs, large negatives (exp near 0) and positives
    program = tandem.export(model, {"forward": (x,)})
    names = _ops(program)
    # elu(x) (an input) and elu(y) (after the add) as elu ops; conv1's ELU fused into the conv
    assert names.count("elu") == 2 and "exp" not in names and "minimum" not in names and "maximum" not in names, names
    got = tandem.load(program.to_bytes()).forward(x)
    with torch.no_grad():
        torch.testing.assert_close(got, model(x), rtol=2e-6, atol=2e-6)


def test_elu_op_on_a_large_tensor_equals_eager():
    """nn.ELU alone (above 64 Ki floats, where the op splits over threads in 256-float blocks)."""
    x = torch.randn(1, 64, 2000) * 4
    program = tandem.export(nn.ELU(), {"forward": (x,)})
    assert _ops(program) == ["elu"], _ops(program)
    torch.testing.assert_close(tandem.load(program.to_bytes()).forward(x), F.elu(x), rtol=2e-6, atol=2e-6)


class Written(nn.Module):
    """ELU written out, with the minimum also returned: it cannot be fused."""

    def forward(self, x):
        t = torch.minimum(x, torch.zeros(()))
        return torch.maximum(x, torch.exp(t) - 1), t


def test_chain_with_another_reader_stays_as_written():
    x = torch.randn(4, 50)
    program = tandem.export(Written(), {"forward": (x,)})
    assert "elu" not in _ops(program) and "exp" in _ops(program), _ops(program)
    y, t = tandem.load(program.to_bytes()).forward(x)
    torch.testing.assert_close(y, F.elu(x), rtol=2e-6, atol=2e-6)
    assert torch.equal(t, x.clamp(max=0))
