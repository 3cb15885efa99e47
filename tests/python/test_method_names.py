"""Method names a program may not use (python/tandem/names.py): the names the model objects answer to
themselves are refused at export, every public name of the Python model is in the list, and a file
that uses one anyway (written directly) still reaches the method through call()."""

import pytest
import torch

import tandem
from cases import CASES


@pytest.mark.parametrize("name", ["then", "call", "fork", "dispose", "state", "methods", "readState", "run", "_hidden"])
def test_method_names_the_model_uses_for_itself_are_refused(name):
    module, spec, _, _ = CASES["accumulator"]()
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(None, {"forward": tandem.Method(module, spec["forward"]), name: tandem.Method(module.reset, ())})
    msg = str(e.value)
    assert f"method '{name}'" in msg and "rename" in msg
    assert ("reserved word" in msg) if not name.startswith("_") else ("starting with '_'" in msg)


def test_every_public_name_of_the_python_model_is_reserved():
    from tandem.names import RESERVED

    module, spec, _, _ = CASES["accumulator"]()
    model = tandem.load(tandem.export(module, spec).to_bytes())
    public = {n for n in dir(model) if not n.startswith("_")} - set(model.methods)
    assert public <= RESERVED, f"not in python/tandem/names.py: {sorted(public - RESERVED)}"
    assert {"call", "run", "methods", "read_state", "reset_state", "profile", "then"} <= RESERVED


def test_a_method_named_like_the_model_api_is_reachable_by_call():
    # A file tandem.export would refuse (written by the format writer directly): the model's own
    # call() stays, and reaches the method.
    module, spec, _, _ = CASES["accumulator"]()
    program = tandem.export(module, spec)
    program.method("reset").name = "call"
    model = tandem.load(tandem.Program(program.states, program.methods).to_bytes())
    torch.testing.assert_close(model.call("forward", torch.ones(3)), torch.full((3,), 2.0))
    assert model.call("call") is None  # the renamed reset
    torch.testing.assert_close(model.forward(torch.ones(3)), torch.full((3,), 2.0))
