"""Several Python ints that a method changes and branches on (a first-frame flag and a warm-up
counter, counters that wrap with different periods, a branch on one int inside a branch on
another): the method is exported in versions, one per box of the ints' values that takes one path
(python/tandem/steering.py), each starting with a `when_in` per int, and the runtime runs the version
the state holds. Each program is checked against PyTorch eager over many calls with resets, natively
and on the wasm backend; a state no version was traced for fails typed with the state unchanged;
more boxes than tandem makes versions of is an ExportError naming the ints and `state_bounds`, and
with `state_bounds` the program runs within the bounds and fails typed beyond them."""

from __future__ import annotations

import copy

import pytest
import torch
from test_int_versions import _run, check_versions
from torch import nn

import tandem
from tandem.runtime import TandemError


class FirstFrameWarmup(nn.Module):
    """An int first-frame flag (set once) and a warm-up counter, both branched on."""

    def __init__(self):
        super().__init__()
        self.register_buffer("h", torch.zeros(3))
        self.started = 0
        self.n = 0

    def forward(self, x):
        if self.started == 0:
            self.h.copy_(x)
            self.started = 1
        y = self.h * 0.5 + x
        if self.n < 3:
            y = y * 2
        self.n += 1
        self.h.copy_(y)
        return y

    def reset(self):
        self.h.zero_()
        self.started = 0
        self.n = 0


class Periods(nn.Module):
    """Two counters that wrap with periods 3 and 2, each steering a branch: calls cycle with period 6."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(3))
        self.a = 0
        self.b = 0

    def forward(self, x):
        y = x.exp() if self.a == 2 else x
        if self.b == 1:
            y = -y
        self.a += 1
        if self.a == 3:
            self.a = 0
        self.b += 1
        if self.b >= 2:
            self.b = 0
        self.acc.mul_(0.5).add_(y)
        return self.acc.clone()

    def reset(self):
        self.acc.zero_()
        self.a = 0
        self.b = 0


class Nested(nn.Module):
    """A branch on one int inside a branch on another, a countdown, and an int computed with
    (`x * self.n`, read from the state at run time in each version)."""

    def __init__(self):
        super().__init__()
        self.n = 0
        self.left = 4

    def forward(self, x):
        self.n += 1
        self.left -= 1
        if self.n > 2:
            if self.left < 0:
                return x * self.n
            return x + self.n
        return x

    def reset(self):
        self.n = 0
        self.left = 4


# (module, versions of forward): the boxes that take different paths (Periods: 3 runs of a times 3 of b,
# the values past a wrap among them, which no call reaches)
STEERED = [(FirstFrameWarmup, 4), (Periods, 9), (Nested, 3)]


@pytest.mark.parametrize("cls, versions", STEERED, ids=lambda c: getattr(c, "__name__", ""))
def test_two_ints_that_steer_the_program_give_versions_equal_to_eager(backend, cls, versions):
    check_versions(cls, versions, 20, (13, 17))


def test_ints_no_version_was_traced_for_fail_typed_with_the_state_unchanged(backend):
    """The flag written by hand below every value a call reaches (0 and 1): no version fits."""
    program = tandem.export(FirstFrameWarmup(), {"forward": (torch.ones(3),), "reset": ()})
    model = tandem.load(program.to_bytes())
    model.forward(torch.ones(3))
    model.write_state("started", torch.tensor(-5))
    before = model.save_state()
    with pytest.raises(TandemError) as e:
        model.forward(torch.ones(3))
    assert e.value.code == "TDM_ERR_GUARD" and "finds -5" in str(e.value)
    assert model.save_state() == before


class Steps(nn.Module):
    """Two ints with a path for each of their first values: 5 runs each, 25 boxes."""

    def __init__(self):
        super().__init__()
        self.a = 0
        self.b = 0

    def forward(self, x):
        for k in range(4):
            if self.a == k:
                x = x + k
            if self.b == k:
                x = x * (k + 2)
        self.a += 1
        self.b += 2
        return x

    def reset(self):
        self.a = 0
        self.b = 0


def test_more_boxes_than_versions_is_an_error_naming_the_ints_and_state_bounds():
    m = Steps()
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(m, {"forward": (torch.ones(3),), "reset": ()})
    text = str(e.value)
    assert "method 'forward' branches on 2 Python ints that calls change" in text
    assert "'a' (at test_int_combinations.py:" in text and "'b' (at test_int_combinations.py:" in text
    assert "state_bounds={'a': (lo, hi), 'b': (lo, hi)}" in text
    assert m.a == 0 and m.b == 0, "the export left the module changed"


def test_state_bounds_bound_the_ints_and_a_call_beyond_fails_typed(backend):
    m = Steps()
    eager = copy.deepcopy(m)
    program = tandem.export(m, {"forward": (torch.ones(3),), "reset": ()}, state_bounds={"a": (0, 2)})
    # a in 0, 1, 2 (its bound) times b in 0, 1, 2, 3, 4.. (b counts by 2, so 1 and 3 are never reached but traced)
    assert len([x for x in program.methods if x.name.startswith("forward")]) == 15
    model = tandem.load(program.to_bytes())
    xs = [torch.randn(3) for _ in range(8)]
    _run(model, eager, xs[:3] + [None] + xs[3:6] + [None] + xs[6:])
    # a is 2 after three calls: the fourth finds 3, past the bound
    model.reset()
    for x in xs[:3]:
        model.forward(x)
    before = model.save_state()
    with pytest.raises(TandemError) as e:
        model.forward(xs[3])
    assert e.value.code == "TDM_ERR_GUARD" and "finds 3" in str(e.value)
    assert model.save_state() == before


@pytest.mark.parametrize(
    "bounds, words",
    [
        ({"c": 4}, "state_bounds names 'c', which no method grows (state that grows: none) and no method branches on"),
        ({"a": (3, 5)}, "state_bounds gives 'a' the values 3..5, which leave out its value now (0)"),
        ({"a": (5, 3)}, "state_bounds gives 'a' the values 5..3, which hold none"),
        ({"a": "x"}, "state_bounds gives 'a' 'x': give a capacity"),
    ],
)
def test_state_bounds_of_an_int_that_cannot_be_are_errors_naming_it(bounds, words):
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(Periods(), {"forward": (torch.ones(3),), "reset": ()}, state_bounds=bounds)
    assert words in str(e.value)
