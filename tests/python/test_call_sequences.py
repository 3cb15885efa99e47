"""The stateful cases of tests/cases.py through the native runtime, against PyTorch eager over call
sequences; and what state is: buffers, shared by identity across modules, left as they were by the
export; a parameter changed in place is an export error naming it."""

import pytest
import torch

import tandem
from cases import CASES, as_tuple, original_report, run_eager


def run_native(model, calls):
    return [as_tuple(getattr(model, name)(*inputs)) for name, inputs in calls]


@pytest.mark.parametrize("case", sorted(CASES))
def test_sequence_matches_eager(case):
    module, spec, eager, calls = CASES[case]()
    program = tandem.export(module, spec)
    model = tandem.load(program.to_bytes())
    got, want = run_native(model, calls), run_eager(eager, calls)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert len(g) == len(w), f"call {i} {calls[i][0]}: {len(g)} outputs, eager gives {len(w)}"
        for a, b in zip(g, w):
            torch.testing.assert_close(a, b, msg=lambda m: f"call {i} {calls[i][0]}: {m}")


def test_state_is_shared_by_identity_across_modules():
    _, spec, _, _ = original_report()
    program = tandem.export(None, spec)
    assert [s.name for s in program.states] == ["shared_module._v"]
    model = tandem.load(program.to_bytes())
    model.forward1(torch.tensor([3.0]))
    torch.testing.assert_close(model.read_state("shared_module._v"), torch.tensor([4.0]))
    model.forward2(torch.tensor([0.0]))
    torch.testing.assert_close(model.read_state("shared_module._v"), torch.tensor([0.0]))


def test_export_leaves_module_buffers_untouched():
    module, spec, _, _ = CASES["initialized"]()
    before = module.v.clone()
    tandem.export(module, spec)
    torch.testing.assert_close(module.v, before)


def test_parameter_mutation_is_an_export_error_naming_it():
    _, spec, _, _ = original_report(as_parameter=True)
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(None, spec)
    msg = str(e.value)
    assert "_v" in msg and "register_buffer" in msg and "forward1" in msg
    assert "cases.py" in msg  # the user's source line


class _Acc(torch.nn.Module):
    def __init__(self, n, dtype=torch.float32):
        super().__init__()
        self.register_buffer("s", torch.zeros(n, dtype=dtype))

    def forward(self, x):
        self.s.add_(x)
        return self.s * 1


def test_saved_state_carries_the_header_js_writes_and_another_programs_bytes_are_refused():
    """save_state's bytes are JS saveState's format (schema.SAVED_STATE: magic, format, the layout
    fingerprint, the program id, the byte count, then the state), so a program with another state
    layout of the same size refuses them, and a refused load leaves the state as it was."""
    import struct

    from tandem import schema
    from tandem.runtime import TandemError

    head = schema.SAVED_STATE
    m = tandem.load(tandem.export(_Acc(4), {"forward": (torch.ones(4),)}).to_bytes())
    m.forward(torch.full((4,), 2.0))
    saved = m.save_state()
    magic, fmt, _, _, nbytes = struct.unpack(head.fmt, saved[: head.size])
    assert (magic, fmt, nbytes, len(saved)) == (schema.SAVED_STATE_MAGIC, schema.SAVED_STATE_FORMAT, 16, head.size + 16)
    assert torch.equal(torch.frombuffer(bytearray(saved[head.size :]), dtype=torch.float32), torch.full((4,), 2.0))
    m.forward(torch.ones(4))
    m.load_state(saved)
    torch.testing.assert_close(m.forward(torch.zeros(4)), torch.full((4,), 2.0))

    other = tandem.load(tandem.export(_Acc(2, torch.int64), {"forward": (torch.ones(2, dtype=torch.int64),)}).to_bytes())
    other.forward(torch.full((2,), 7, dtype=torch.int64))
    with pytest.raises(TandemError, match="another state layout"):
        other.load_state(saved)  # 16 bytes of state too, but int64[2], not float32[4]
    assert torch.equal(other.forward(torch.zeros(2, dtype=torch.int64)), torch.full((2,), 7, dtype=torch.int64))
    for bad, why in ((saved[:-1], "bytes of state"), (b"TDMS", "not saved tandem state"), (b"x" * 64, "not saved tandem state")):
        with pytest.raises(TandemError, match=why):
            m.load_state(bad)
    torch.testing.assert_close(m.forward(torch.zeros(4)), torch.full((4,), 2.0))
