"""A Python int that a method changes and branches on (a delay, a warm-up phase, moshi's
`offset_cpu <= max_delay`): the method is exported in versions, one per run of the int's values that
takes one path (python/tandem/probe.py finds the runs from the comparisons the method makes), and the
runtime runs the version the state holds (`when_in`). A version may return None where the others
return tensors. An int the method also computes with (`x * n`, a slice start into state, `n % 4`) is
read from the state at run time inside each version. Each program is checked against PyTorch eager
over a call sequence with resets, natively and on the wasm backend; an int used where a value read at
run time cannot be (a float, a list index, a comparison of a product) is an ExportError naming it and
the line (several ints: tests/python/test_int_combinations.py)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import tandem
from tandem.runtime import TandemError


class Phases(nn.Module):
    """Three phases of a stream: x below 3 calls, 2x from 3 to 5, 3x after."""

    def __init__(self):
        super().__init__()
        self.register_buffer("h", torch.zeros(3))
        self.n = 0

    def forward(self, x):
        if self.n < 3:
            y = x
        elif self.n <= 5:
            y = x * 2
        else:
            y = x * 3
        self.n += 1
        self.h.add_(y)
        return self.h.clone()

    def reset(self):
        self.n = 0
        self.h.zero_()


class Delayed(nn.Module):
    """Nothing for the first `delay` calls (moshi's LMGen returns None until its delays are filled)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(3))
        self.offset = 0
        self.delay = 2

    def forward(self, x):
        self.acc.add_(x)
        self.offset += 1
        if not self.offset > self.delay:
            return None
        return self.acc * 2

    def reset(self):
        self.acc.zero_()
        self.offset = 0


class Countdown(nn.Module):
    """An int counted down from 4 and set back by reset: versions below the value of the export too."""

    def __init__(self):
        super().__init__()
        self.register_buffer("h", torch.zeros(3))
        self.left = 4

    def forward(self, x):
        self.left -= 1
        self.h.mul_(0.5).add_(x if self.left > 0 else -x)
        return self.h + (1 if self.left == 0 else 0)

    def reset(self):
        self.left = 4
        self.h.zero_()


class Shifted(nn.Module):
    """The int compared after arithmetic that keeps it an int plus a constant, and set by a method."""

    def __init__(self):
        super().__init__()
        self.t = 0

    def forward(self, x):
        first = self.t + 3 <= 4  # t <= 1
        self.t = self.t + 1
        return x.neg() if first else x * 5

    def reset(self):
        self.t = 0


class FirstCall(nn.Module):
    """The first call after a reset differs (`calls == 0`): runs [0, 0] and [1, inf), nothing below 0."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        y = x.exp() if self.calls == 0 else x
        self.calls += 1
        return y

    def reset(self):
        self.calls = 0


def _run(model, eager, calls):
    for i, x in enumerate(calls):
        if x is None:
            eager.reset()
            model.reset()
            continue
        with torch.no_grad():
            want = eager(x.clone())
        got = model.forward(x.clone())
        if want is None:
            assert got is None, f"call {i}: eager gives None, tandem {got}"
        else:
            assert got is not None, f"call {i}: eager gives {want}, tandem None"
            torch.testing.assert_close(got, want, msg=lambda s: f"call {i}: {s}")


STEERED = [(Phases, 3), (Delayed, 2), (Countdown, 3), (Shifted, 2), (FirstCall, 2)]


@pytest.mark.parametrize("cls, versions", STEERED, ids=lambda c: getattr(c, "__name__", ""))
def test_an_int_that_steers_the_program_gives_versions_equal_to_eager(backend, cls, versions):
    check_versions(cls, versions, 12, (8, 11))


def check_versions(cls, versions: int, ncalls: int, resets: tuple) -> None:
    """cls exported (forward, reset) has forward in `versions` versions and, loaded, equals eager over ncalls
    seeded calls with a reset before call resets[0] and two before call resets[1]; the export changes no int."""
    torch.manual_seed(0)
    m = cls()
    eager = copy.deepcopy(m)
    kept = copy.deepcopy(vars(m))
    program = tandem.export(m, {"forward": (torch.randn(3),), "reset": ()})
    assert [k for k in vars(m) if isinstance(kept[k], int) and vars(m)[k] != kept[k]] == [], "the export changed an int"
    names = sorted(x.name for x in program.methods if x.name.startswith("forward"))
    assert names == ["forward"] + [f"forward#{k}" for k in range(1, versions)]
    model = tandem.load(program.to_bytes())
    assert sorted(model.methods) == ["forward", "reset"]
    xs = [torch.randn(3) for _ in range(ncalls)]
    a, b = resets
    _run(model, eager, xs[:a] + [None] + xs[a:b] + [None, None] + xs[b:])


def test_a_value_no_version_was_traced_for_fails_typed_with_the_state_unchanged(backend):
    """State written by hand below every value a call reaches: no version fits, the call fails, the state stays."""
    program = tandem.export(FirstCall(), {"forward": (torch.ones(3),), "reset": ()})
    assert sorted(m.name for m in program.methods) == ["forward", "forward#1", "reset"]
    model = tandem.load(program.to_bytes())
    model.forward(torch.ones(3))
    model.write_state("calls", torch.tensor(-5))
    before = model.save_state()
    with pytest.raises(TandemError) as e:
        model.forward(torch.ones(3))
    assert e.value.code == "TDM_ERR_GUARD" and "finds -5" in str(e.value)
    assert model.save_state() == before


class Scaled(nn.Module):
    """Branches on the int and multiplies the input by it: each version computes with the value it reads."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.n += 1
        return x * self.n if self.n > 2 else x

    def reset(self):
        self.n = 0


class Written(nn.Module):
    """moshi's offsets: the int is the start of a slice written into state while `pos <= 4`, then a scale."""

    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(8))
        self.pos = 0

    def forward(self, x):
        if self.pos <= 4:
            self.buf[self.pos : self.pos + 2] = x
            self.pos += 2
        else:
            self.buf.mul_(0.5)
        return self.buf * self.pos

    def reset(self):
        self.pos = 0
        self.buf.zero_()


class Ring(nn.Module):
    """A ring index (`n % 4`) into state, and the mean once the ring is full (`n >= 4`)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("ring", torch.zeros(4, 3))
        self.n = 0

    def forward(self, x):
        self.ring[self.n % 4] = x
        self.n += 1
        if self.n >= 4:
            return self.ring.mean(0)
        return self.ring[0] * (self.n - 1)

    def reset(self):
        self.n = 0
        self.ring.zero_()


COMPUTED = [(Scaled, torch.randn(3)), (Written, torch.randn(2)), (Ring, torch.randn(3))]


@pytest.mark.parametrize("cls, example", COMPUTED, ids=lambda c: getattr(c, "__name__", ""))
def test_an_int_that_steers_and_is_computed_with_is_read_at_run_time_in_each_version(backend, cls, example):
    torch.manual_seed(1)
    m = cls()
    eager = copy.deepcopy(m)
    program = tandem.export(m, {"forward": (example,), "reset": ()})
    assert sorted(x.name for x in program.methods) == ["forward", "forward#1", "reset"]
    model = tandem.load(program.to_bytes())
    xs = [torch.randn_like(example) for _ in range(14)]
    # past every value a version was traced at: the values computed with come from the state
    _run(model, eager, xs[:9] + [None] + xs[9:12] + [None] + xs[12:])
    key = "pos" if cls is Written else "n"
    assert model.read_state(key).item() == getattr(eager, key) == (4 if cls is Written else 2)


class Split(nn.Module):
    """One method counts the int up and branches on it from below (the first run unbounded below),
    another computes with it."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.n += 1
        return x.exp() if self.n > 2 else x

    def scale(self, x):
        return x * self.n

    def reset(self):
        self.n = 0


def test_an_int_one_method_branches_on_and_another_computes_with_matches_eager(backend):
    m = Split()
    eager = copy.deepcopy(m)
    program = tandem.export(m, {"forward": (torch.ones(3),), "scale": (torch.ones(3),), "reset": ()})
    assert sorted(x.name for x in program.methods) == ["forward", "forward#1", "reset", "scale"]
    model = tandem.load(program.to_bytes())
    for i in range(14):
        name = ("forward", "scale", "forward", "scale", "forward", "reset")[i % 6]
        x = () if name == "reset" else (torch.randn(3),)
        want = getattr(eager, name)(*x)
        got = model.call(name, *x)
        if want is not None:
            torch.testing.assert_close(got, want, msg=lambda s: f"call {i} {name}: {s}")


class Indexed(nn.Module):
    """Branches on the int and indexes a Python list with it (a use the probe cannot see)."""

    def __init__(self):
        super().__init__()
        self.n = 0
        self.scales = [1.0, 2.0, 3.0, 4.0, 5.0]

    def forward(self, x):
        self.n += 1
        if self.n < 4:
            return x * self.scales[self.n]
        return x


class Floated(nn.Module):
    """Branches on the int and makes a float of it in Python."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.n += 1
        if self.n > 1:
            return x * float(self.n)
        return x


class Doubled(nn.Module):
    """Branches on a product of the int: a comparison no run of the int's values answers."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.n += 1
        if self.n > 1 and self.n * 2 > 6:
            return x * self.n
        return x


@pytest.mark.parametrize(
    "cls, words",
    [
        (Indexed, "branches on the Python int 'n', and traced at 2 it gives another program than at 0"),
        (Floated, "branches on the Python int 'n' and also uses it in a way a value read at run time cannot take (at "),
        (Doubled, "branches on the Python int 'n' and computes with it; traced for its values 1..inf with it read from"),
    ],
    ids=lambda c: getattr(c, "__name__", ""),
)
def test_an_int_used_beyond_what_versions_take_is_an_error_naming_it(cls, words):
    m = cls()
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(m, {"forward": (torch.ones(3),)})
    assert words in str(e.value)
    assert "test_int_versions.py:" in str(e.value) or cls is Indexed, "the message names the user's line"
    assert m.n == 0, "the export left the module changed"
