"""What the runtime refuses, and says why: truncated and corrupted files, calls with wrong inputs (the
model still works after), and an export the runtime's verifier would reject (refused at export)."""

import pytest
import torch
from torch import nn

import tandem
from cases import CASES


@pytest.mark.parametrize("cut", [0, 3, 31, 100, -1])
def test_truncated_file_fails_cleanly(cut):
    module, spec, _, _ = CASES["accumulator"]()
    data = tandem.export(module, spec).to_bytes()
    with pytest.raises(tandem.TandemError) as e:
        tandem.load(data[:cut] if cut >= 0 else data[:-1])
    assert e.value.code in ("TDM_ERR_TRUNCATED", "TDM_ERR_BAD_MAGIC")
    assert "truncated" in str(e.value) or "TNDM" in str(e.value)


def test_corrupted_header_fails_cleanly():
    module, spec, _, _ = CASES["accumulator"]()
    data = bytearray(tandem.export(module, spec).to_bytes())
    bad_magic = bytes(b"XNDM" + data[4:])
    with pytest.raises(tandem.TandemError) as e:
        tandem.load(bad_magic)
    assert e.value.code == "TDM_ERR_BAD_MAGIC"
    data[4] = 99  # version
    with pytest.raises(tandem.TandemError) as e:
        tandem.load(bytes(data))
    assert e.value.code == "TDM_ERR_VERSION" and "version 99" in str(e.value)


def test_wrong_inputs_are_rejected_with_expected_and_given():
    module, spec, _, _ = CASES["accumulator"]()
    model = tandem.load(tandem.export(module, spec).to_bytes())
    with pytest.raises(tandem.TandemError, match=r"expected float32\[3\], given torch.float32\[4\]"):
        model.forward(torch.ones(4))
    with pytest.raises(tandem.TandemError, match="takes 1 inputs, 0 given"):
        model.forward()
    torch.testing.assert_close(model.forward(torch.ones(3)), torch.full((3,), 2.0))


class _ArgmaxOfScalar(nn.Module):
    def forward(self, x):
        return torch.argmax(x, dim=0, keepdim=True)


def test_export_runs_the_runtime_verifier(monkeypatch):
    """An export the runtime would reject fails at export, naming the op and the user's line.
    (A 0-d argmax once exported as an argmax op the verifier rejects; the lowering is forced back
    to that here.)"""
    from tandem import lowering
    from tandem.ir import I64

    def old_argmax(L, node, args, kwargs):
        return L.emit("argmax", [args[0]], I64, (), iattr=[0])

    monkeypatch.setitem(lowering.HANDLERS, torch.ops.aten.argmax.default, old_argmax)
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(_ArgmaxOfScalar(), {"forward": (torch.tensor(2.0),)})
    msg = str(e.value)
    assert "verifier" in msg and "argmax" in msg and "test_rejected_files_and_calls.py" in msg and "TDM_ERR_OP_RULE" in msg
