"""What a file stores as constants: weights once across methods and once when the embedding is tied to
the output head; never torch.empty's uninitialized memory; methods that return only constants as
metadata, and what is not such a method refused with the rule."""

import pytest
import torch
from torch import nn

import tandem
from cases import as_tuple, run_eager
from models.families import make_transformer
from tandem.ir import CONST


def test_constants_are_stored_once_across_methods():
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


def test_tied_embedding_is_stored_once():
    """The embedding table is also the output head's weight: the file stores it once (packed for
    the head), the lookup reads rows from the packed panels, and outputs still match eager."""
    module, spec, eager, calls = make_transformer(capacity=64)
    program = tandem.export(module, spec)
    table = module.emb.weight.detach()
    consts = {id(v.storage): v.storage.tensor for m in program.methods for op in m.ops for v in op.ins if v.storage.kind == 1}
    same_size = [t for t in consts.values() if t.numel() == table.numel()]
    assert not any(t.shape == table.shape and torch.equal(t, table) for t in same_size)
    assert {tuple(t.shape) for t in same_size} == {(table.shape[0] // 8, table.shape[1], 8)}
    assert "embedding_packed" in [op.name for op in program.method("decode").ops]
    model, want = tandem.load(program.to_bytes()), run_eager(eager, calls)
    for (name, inputs), w in zip(calls, want):
        for a, b in zip(as_tuple(getattr(model, name)(*inputs)), w):
            torch.testing.assert_close(a, b)


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


class _EmptyFilledBySlices(nn.Module):
    def forward(self, a, b):  # DeepSeek-V3's expand_kv: the last dim of an empty tensor filled in two parts
        e = a.new_empty(*a.shape[:-1], a.shape[-1] + b.shape[-1])
        e[..., : a.shape[-1]].copy_(a)
        e[..., a.shape[-1] :].copy_(b)
        return e * 2


class _EmptyReadBeforeWritten(nn.Module):
    def forward(self, a):
        e = a.new_empty(a.shape)
        y = e * 2  # before anything wrote e
        e.copy_(a)
        return y + e


def test_slices_of_an_empty_tensor_that_copy_writes_read_nothing():
    """x[..., :k].copy_(a) on torch.empty() takes the slice for its shape alone: the export fills the
    tensor slice by slice and equals eager, while a product of it before anything wrote it is still refused."""
    a, b = torch.randn(2, 3, 5), torch.randn(2, 3, 4)
    program = tandem.export(_EmptyFilledBySlices(), {"forward": (a, b)})
    torch.testing.assert_close(tandem.load(program.to_bytes()).forward(a, b), torch.cat([a, b], -1) * 2)
    with pytest.raises(tandem.ExportError, match="reads the contents of torch.empty"):
        tandem.export(_EmptyReadBeforeWritten(), {"forward": (torch.randn(2, 3),)})
