"""Nothing a call changes is frozen at its traced value (python/tandem/tracing.py, Traced._after):
a buffer a method reassigns, `.data =`, a number or bool kept on a module, in a container or in a
global of the user's code is state; a value that cannot become state, or a bool that steers the
program, is an ExportError naming it. Each program that exports is checked against PyTorch eager
over a call sequence with a reset in between, natively and on the wasm backend."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from torch import nn

import tandem
from cases import Writes

COUNTS = {"calls": 0}
STEP = 0


class Reassign(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(3))

    def forward(self, x):
        self.buf = self.buf + 1
        return x + self.buf

    def reset(self):
        self.buf = torch.zeros(3)


class ReassignFromInput(Reassign):
    def forward(self, x):
        self.buf = self.buf * 0.5 + x
        return x + self.buf


class Setattr(Reassign):
    def forward(self, x):
        setattr(self, "buf", self.buf - x)
        return self.buf * 2


class DataAssign(Reassign):
    def forward(self, x):
        self.buf.data = self.buf * 0.5 + x
        return self.buf + 0

    def reset(self):
        self.buf.data.copy_(torch.zeros(3))


class Clock(nn.Module):
    """A Python float advanced each call and computed with."""

    def __init__(self):
        super().__init__()
        self.t = 0.0

    def forward(self, x):
        before = self.t
        self.t += 0.25
        return x * self.t + before

    def reset(self):
        self.t = 0.0


class Ring(nn.Module):
    """A Python int used as a ring index and in arithmetic."""

    def __init__(self):
        super().__init__()
        self.register_buffer("ring", torch.zeros(4, 3))
        self.i = 0

    def forward(self, x):
        self.ring[self.i % 4] = x
        self.i += 1
        return self.ring.sum(0) * (self.i % 4) + self.ring[(self.i + 3) % 4]

    def reset(self):
        self.ring.zero_()
        self.i = 0


class GlobalCounters(nn.Module):
    """A counter in a module-level dict and a module-level int."""

    def forward(self, x):
        global STEP
        COUNTS["calls"] += 1
        STEP += 2
        return x * COUNTS["calls"] - STEP

    def reset(self):
        global STEP
        COUNTS["calls"] = 0
        STEP = 0


class Quiet(nn.Module):
    """Values that change but do not change the program: a bool set once, a string mode set once,
    a call count nobody reads."""

    def __init__(self):
        super().__init__()
        self.warned = False
        self.mode = "fresh"
        self.calls = 0

    def forward(self, x):
        self.warned = True
        self.mode = "used"
        self.calls += 1
        return x * 2

    def reset(self):
        self.calls = 0


class FirstFrame(nn.Module):
    """A Python bool "first frame" flag steering a branch: a version of forward per value."""

    def __init__(self):
        super().__init__()
        self.first = True
        self.register_buffer("prev", torch.zeros(3))

    def forward(self, x):
        if self.first:
            self.first = False
            y = x * 2
        else:
            y = x + self.prev
        self.prev.copy_(x)
        return y

    def reset(self):
        self.first = True
        self.prev.zero_()


class NestedFlag(nn.Module):
    """The same flag held on a submodule."""

    def __init__(self):
        super().__init__()
        self.inner = FirstFrame()

    def forward(self, x):
        return self.inner(x) + 1

    def reset(self):
        self.inner.reset()


class Armed(nn.Module):
    """A flag that one method sets and another reads (and clears), and a second flag beside it."""

    def __init__(self):
        super().__init__()
        self.armed = False
        self.loud = False

    def forward(self, x):
        y = x * 10 if self.armed else x
        if self.loud:
            y = y + 100
        self.armed = False
        self.loud = not self.loud
        return y

    def reset(self):
        self.armed = True


class Recurrent(nn.Module):
    """State the first call creates: `self.hc = None`, then `out, self.hc = self.lstm(x, self.hc)`; a
    reset sets it back to None, so the next call starts from zeros again, as eager does."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(3, 4, batch_first=True)
        self.hc = None
        self.memo = {}

    def forward(self, x):
        out, self.hc = self.lstm(x[None, None], self.hc)
        y = out[0, 0, :3]
        if "last" in self.memo:  # a dict entry the first call creates
            y = y + self.memo["last"]
        self.memo["last"] = y * 0.5
        return y

    def reset(self):
        self.hc = None
        self.memo.clear()


@dataclasses.dataclass
class Carry:
    h: torch.Tensor
    n: int


class Rebuilt(nn.Module):
    """A dataclass of state replaced by a new one each call, and a dict of state rebuilt with the same
    keys: the new fields are the state's new values."""

    def __init__(self):
        super().__init__()
        self.reset()

    def forward(self, x):
        self.carry = Carry(self.carry.h * 0.9 + x, self.carry.n + 1)
        self.stats = {"sum": self.stats["sum"] + x, "max": torch.maximum(self.stats["max"], x)}
        return self.carry.h * self.carry.n + self.stats["sum"] - self.stats["max"]

    def reset(self):
        self.carry = Carry(torch.zeros(3), 0)
        self.stats = {"sum": torch.zeros(3), "max": torch.full((3,), -1.0)}


CASES = [
    Reassign,
    ReassignFromInput,
    Setattr,
    DataAssign,
    Clock,
    Ring,
    GlobalCounters,
    Quiet,
    FirstFrame,
    NestedFlag,
    Armed,
    Recurrent,
    Rebuilt,
]


@pytest.mark.parametrize("cls", CASES, ids=lambda c: c.__name__)
def test_values_a_call_changes_are_state(backend, cls):
    global STEP
    torch.manual_seed(0)
    m = cls()
    eager = copy.deepcopy(m)
    kept = copy.deepcopy(vars(m)), dict(COUNTS), STEP
    program = tandem.export(m, {"forward": (torch.randn(3),), "reset": ()})
    assert (dict(COUNTS), STEP) == kept[1:], "the export changed a global"
    for k, v in kept[0].items():
        if isinstance(v, (bool, int, float, str)) or v is None:
            assert vars(m)[k] == v, f"the export changed '{k}'"
    model = tandem.load(program.to_bytes())
    xs = [torch.randn(3) for _ in range(8)]
    try:
        for i, x in enumerate(xs[:3] + [None] + xs[3:5] + [None, None] + xs[5:]):
            if x is None:
                eager.reset()
                model.reset()
                continue
            with torch.no_grad():
                want = eager(x.clone())
            got = model.forward(x.clone())
            torch.testing.assert_close(got, want, msg=lambda s: f"call {i}: {s}")
    finally:
        COUNTS["calls"], STEP = kept[1]["calls"], kept[2]


class Flip(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        y = self.drop(x) if self.training else x * 3
        self.train(not self.training)
        return y


class Mode(nn.Module):
    def __init__(self):
        super().__init__()
        self.mode = "warmup"

    def forward(self, x):
        out = x * 0 if self.mode == "warmup" else x
        self.mode = "run"
        return out


class Grows(nn.Module):
    """A list of numbers that grows each call and steers the program (len() of it)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def forward(self, x):
        self.calls.append(1)
        return x * 2 if len(self.calls) > 2 else x


@pytest.mark.parametrize(
    "cls, words, unchanged",
    [
        (Flip, "switches (at test_python_values.py:", lambda m: m.training and m.drop.training),
        (Mode, "changes the Python value 'mode' (from 'warmup' to 'run') (at test_python_values.py:", lambda m: m.mode == "warmup"),
        (Grows, "grows the Python list 'calls', and a call that finds the new value runs another program", lambda m: m.calls == []),
    ],
    ids=lambda c: getattr(c, "__name__", ""),
)
def test_a_value_that_steers_the_program_is_an_error_naming_it(cls, words, unchanged):
    m = cls()
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(m, {"forward": (torch.ones(3),)})
    assert words in str(e.value)
    assert unchanged(m), "the export left the module changed"


class ViewOfBuffer(nn.Module):
    """An attribute that is a view of a buffer (a row of it), written in place: the buffer's state."""

    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(2, 3))
        self.row = self.buf[1]

    def forward(self, x):
        self.row.add_(x)
        return self.buf * 1

    def reset(self):
        self.buf.zero_()


class TrainingNorms(nn.Module):
    """BatchNorm and InstanceNorm in training mode: each call normalizes with the batch's statistics
    and updates the running ones (state, as eager does)."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(3)
        self.inorm = nn.InstanceNorm1d(3, track_running_stats=True)

    def forward(self, x):
        return self.inorm(self.bn(x))

    def reset(self):
        self.bn.reset_running_stats()
        self.inorm.reset_running_stats()


@pytest.mark.parametrize("cls", [ViewOfBuffer, TrainingNorms], ids=lambda c: c.__name__)
def test_views_of_buffers_and_training_statistics_are_state(backend, cls):
    torch.manual_seed(0)
    shape = (3,) if cls is ViewOfBuffer else (4, 3, 5)
    m = cls().train()
    eager = copy.deepcopy(m)
    program = tandem.export(m, {"forward": (torch.randn(shape),), "reset": ()})
    model = tandem.load(program.to_bytes())
    for i in range(5):
        if i == 3:
            eager.reset()
            model.reset()
        x = torch.randn(shape)
        with torch.no_grad():
            want = eager(x)
        torch.testing.assert_close(model.forward(x), want, msg=lambda s: f"call {i}: {s}")
    for name, t in eager.named_buffers():
        torch.testing.assert_close(model.read_state(name), t, msg=lambda s: f"state '{name}': {s}")


class Bounded(nn.Module):
    """ExecuTorch's KVCache pattern: a position read with .item(), bounded with torch._check_is_size
    and torch._check, then a slice written at it."""

    def __init__(self):
        super().__init__()
        self.register_buffer("pos", torch.zeros((), dtype=torch.long))
        self.register_buffer("cache", torch.zeros(6, 3))

    def forward(self, x):
        p = self.pos.item()
        torch._check_is_size(p)
        torch._check(p + x.shape[0] <= self.cache.shape[0])
        self.cache[p : p + x.shape[0]] = x
        self.pos += x.shape[0]
        return self.cache.sum(0)


def test_torch_check_on_a_value_read_from_a_tensor_is_a_check_the_program_runs(backend):
    m, eager = Bounded(), Bounded()
    program = tandem.export(m, {"forward": (torch.zeros(2, 3),)})
    model = tandem.load(program.to_bytes())
    for _ in range(3):
        x = torch.randn(2, 3)
        torch.testing.assert_close(model.forward(x), eager(x))
    with pytest.raises(tandem.TandemError) as e:  # a fourth write would pass the cache's end: eager's _check raises too
        model.forward(torch.ones(2, 3))
    assert e.value.code in ("TDM_ERR_GUARD", "TDM_ERR_INDEX")
    assert model.read_state("pos").item() == 6 and torch.equal(model.read_state("cache"), eager.cache)
    with pytest.raises(RuntimeError):
        eager(torch.ones(2, 3))


def test_inputs_a_method_changes_are_written_back_to_the_callers_tensors(backend):
    program = tandem.export(Writes(), {"forward": (torch.ones(3), torch.zeros(3))})
    model, eager = tandem.load(program.to_bytes()), Writes()
    assert [name for name, *_ in program.method("forward").outputs] == ["output", "x!", "y!"]
    for _ in range(3):
        x, y = torch.randn(3), torch.randn(3)
        x2, y2 = x.clone(), y.clone()
        torch.testing.assert_close(model.forward(x2, y2), eager(x, y))
        torch.testing.assert_close(x2, x)
        torch.testing.assert_close(y2, y)
    x, before = torch.ones(3), model.read_state("acc")
    with pytest.raises(tandem.TandemError):  # a call that fails leaves the inputs and the state as they were
        model.forward(x, torch.zeros(4))
    assert torch.equal(x, torch.ones(3)) and torch.equal(model.read_state("acc"), before)


class Cond(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("n", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.n += 1
        return torch.cond(self.n > 2, lambda x: x * 2, lambda x: x + 1, (x,))


def test_torch_cond_on_a_counter_in_state_is_a_branch_in_the_program():
    model = tandem.load(tandem.export(Cond(), {"forward": (torch.ones(3),)}).to_bytes())
    eager = Cond()
    for k in range(5):  # x + 1 twice, then x * 2
        x = torch.full((3,), float(k))
        torch.testing.assert_close(model.forward(x), eager(x))
    torch.testing.assert_close(model.read_state("n"), torch.tensor(5))


SCRIPT = """
class Ticks(nn.Module):
    def forward(self, x):
        global TICKS
        TICKS += 1
        return x * TICKS

    def reset(self):
        global TICKS
        TICKS = 0
"""


def test_a_global_of_a_script_run_with_its_own_globals_is_state(backend):
    """A script run by runpy, `python -m cProfile` or exec() has a globals dict of its own, not that of
    sys.modules[its __name__]: its globals are the dict its functions hold."""
    scope = {"__name__": "__main__", "__file__": __file__, "nn": nn, "TICKS": 0}
    exec(compile(SCRIPT, __file__, "exec"), scope)
    m = scope["Ticks"]()
    program = tandem.export(m, {"forward": (torch.ones(2),), "reset": ()})
    assert scope["TICKS"] == 0, "the export changed the global"
    model = tandem.load(program.to_bytes())
    for k in range(3):
        x = torch.full((2,), float(k + 1))
        torch.testing.assert_close(model.forward(x), m(x.clone()))
    model.reset()
    m.reset()
    torch.testing.assert_close(model.forward(torch.ones(2)), m(torch.ones(2)))
    assert scope["TICKS"] == 1
