"""The foundation's cases through the native runtime, against PyTorch eager over call sequences."""

import pytest
import torch
from torch import nn

import tandem
from cases import CASES, as_tuple, original_report, run_eager
from tandem.ir import CONST


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


def test_constants_are_stored_once_across_methods():
    from torch import nn

    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(64, 64)
            self.register_buffer("s", torch.zeros(1, 64))

        def forward(self, x):
            self.s.copy_(self.lin(x))
            return self.s + 0

        def again(self, x):
            return self.lin(x) + self.s

    m = TwoHeads()
    one = tandem.export(m, {"forward": (torch.randn(1, 64),)}).to_bytes()
    two = tandem.export(m, {"forward": (torch.randn(1, 64),), "again": (torch.randn(1, 64),)}).to_bytes()
    weight_bytes = 64 * 64 * 4
    assert len(two) - len(one) < weight_bytes // 2, "the second method must not store the weights again"


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
    assert "verifier" in msg and "argmax" in msg and "test_foundation.py" in msg and "TDM_ERR_OP_RULE" in msg


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


class _WithConstantMethods(nn.Module):
    """ExecuTorch-style constant methods beside a stateful forward."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(2))
        self.max_seq_len = 128

    def forward(self, x):
        self.total.add_(x)
        return self.total * 2

    def get_max_seq_len(self):
        return self.max_seq_len

    def info(self):
        return {"name": "acc", "sizes": (2, 3), "scale": 0.5, "ok": True}

    def reset(self):
        self.total.zero_()
        return 0


def test_constant_methods_are_stored_as_metadata():
    module = _WithConstantMethods()
    program = tandem.export(module, {"forward": (torch.ones(2),), "get_max_seq_len": (), "info": ()}, metadata={"author": "me"})
    assert [m.name for m in program.methods] == ["forward"]
    want = {"get_max_seq_len": module.get_max_seq_len(), "info": {"name": "acc", "sizes": [2, 3], "scale": 0.5, "ok": True}, "author": "me"}
    m = tandem.load(program.to_bytes())
    assert program.metadata == m.metadata == want
    assert not hasattr(m, "get_max_seq_len")  # read from m.metadata, not called
    torch.testing.assert_close(m.forward(torch.ones(2)), torch.full((2,), 2.0))


def test_what_is_not_a_constant_method_says_so():
    module = _WithConstantMethods()
    # reset changes state, so its 0 is an output of a computing method: refused, with the rule
    with pytest.raises(tandem.ExportError, match="method 'reset' returns 0.*returns only constants is stored as metadata"):
        tandem.export(module, {"forward": (torch.ones(2),), "reset": ()})
    with pytest.raises(tandem.ExportError, match="constant method 'info' and metadata entry 'info' share a name"):
        tandem.export(module, {"forward": (torch.ones(2),), "info": ()}, metadata={"info": 1})
    with pytest.raises(tandem.ExportError, match="returns constants only; a program needs at least one method"):
        tandem.export(module, {"get_max_seq_len": ()})


class _EmptyThenWritten(nn.Module):
    def forward(self, a, b):
        e = torch.empty(5, 3)
        e[0:2] = a
        e[2:5] = b
        return e + 1


def test_torch_empty_is_never_stored_as_a_constant():
    """torch.empty() has no inputs, so it once counted as constant and was run at export: its
    uninitialized memory went into the file as a constant (different bytes in every export). It is
    scratch filled with zeros before the first update, and the file holds no 5x3 constant."""
    a, b = torch.randn(2, 3), torch.randn(3, 3)
    program = tandem.export(_EmptyThenWritten(), {"forward": (a, b)})
    ops = program.method("forward").ops
    assert not [op.name for op in ops for v in op.ins if v.storage.kind == CONST and tuple(v.shape) == (5, 3)]
    assert ops[0].name == "fill"
    torch.testing.assert_close(tandem.load(program.to_bytes()).forward(a, b), torch.cat([a, b]) + 1)


class _CatAfterEmpty(nn.Module):
    def forward(self, x):
        none = torch.empty((1, 0, x.shape[2]))  # pocket-tts' absent backbone_input_latents
        return torch.cat([none, x], dim=1) * 2


def test_an_empty_tensor_concatenated_reads_nothing():
    """torch.empty((1, 0, d)) beside real rows in torch.cat adds no elements: not a read of unwritten
    memory (it was an ExportError once torch.empty became scratch, and pocket-tts' step failed)."""
    x = torch.randn(1, 3, 4)
    program = tandem.export(_CatAfterEmpty(), {"forward": (x,)})
    torch.testing.assert_close(tandem.load(program.to_bytes()).forward(x), x * 2)


class _SliceThenSelect(nn.Module):
    def forward(self, cache):
        valid = cache[:, :, :5]  # pocket-tts' complete_kv: the cache prefix, then its K and V halves
        return valid[0] + 2 * valid[1]


def test_a_select_of_a_slice_along_another_dim_is_a_view():
    """cache[:, :, :n][0] is cache[0][:, :n], a view of cache's bytes: no slice op copies the
    prefix of both halves (8.4 ms of pocket-tts' full-size step before)."""
    cache = torch.randn(2, 1, 8, 3, 4)
    program = tandem.export(_SliceThenSelect(), {"forward": (cache,)})
    assert "slice" not in [op.name for op in program.method("forward").ops]
    torch.testing.assert_close(tandem.load(program.to_bytes()).forward(cache), cache[0, :, :5] + 2 * cache[1, :, :5])
