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
