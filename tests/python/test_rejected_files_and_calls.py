"""What the runtime refuses, and says why: truncated and corrupted files, calls with wrong inputs (the
model still works after), and an export the runtime's verifier would reject (refused at export)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tandem
from cases import CASES
from tandem.format import write_program


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


class _TimeFirstKV(nn.Module):
    def forward(self, q, k, v):  # k and v time-first [B, T, H, D]: the permutes fold into the attention
        return F.scaled_dot_product_attention(q, k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3))


def _tampered(program, perm_of):
    """The program's bytes with the attention's iattr replaced by perm_of(iattr)."""
    (att,) = [op for op in program.method("forward").ops if op.name == "attention"]
    assert len(att.iattr) == 14, att.iattr  # [has_mask, is_causal] + three perms of rank 4
    att.iattr = perm_of(list(att.iattr))
    return write_program(program.states, program.methods, program._metadata)


@pytest.mark.parametrize(
    "what,edit",
    [
        ("a repeated dim", lambda ia: ia[:6] + [0, 0, 2, 3] + ia[10:]),
        ("a dim out of range", lambda ia: ia[:6] + [0, 9, 1, 3] + ia[10:]),
        ("a negative dim", lambda ia: ia[:6] + [-1, 2, 1, 3] + ia[10:]),
        ("the last dim moved", lambda ia: ia[:6] + [0, 1, 3, 2] + ia[10:]),
        ("perms for another rank", lambda ia: ia[:2] + [0, 1, 2] * 3),
        ("shapes that no longer match", lambda ia: ia[:6] + [0, 1, 2, 3] + ia[10:]),
        ("a perm y that repeats a dim", lambda ia: ia + [0, 2, 2, 3]),
        ("a perm y that gives another shape", lambda ia: ia + [0, 2, 1, 3]),
        ("a fifth perm", lambda ia: ia + [0, 1, 2, 3] * 2),
    ],
)
def test_attention_with_bad_perms_is_refused_at_load(what, edit):
    """attention's perms (q, k, v each read as x.permute(perm) by strides over x's own shape) must
    be permutations that keep the last dim last and give shapes that fit: a hostile file is refused
    with OP_RULE naming the op, before any call could read outside an operand."""
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(s, generator=g) for s in ((1, 4, 3, 8), (1, 7, 4, 8), (1, 7, 4, 6)))
    program = tandem.export(_TimeFirstKV(), {"forward": (q, k, v)})
    good = write_program(program.states, program.methods, program._metadata)
    tandem.load(good)  # the untouched file loads
    with pytest.raises(tandem.TandemError) as e:
        tandem.load(_tampered(program, edit))
    assert e.value.code == "TDM_ERR_OP_RULE", what
    assert "attention" in str(e.value), str(e.value)
