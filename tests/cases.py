"""The stateful cases, shared by the Python tests (native runtime) and the fixture
generator (wasm, from Node). Each case builds fresh modules and gives the export spec, the eager
callables and a sequence of calls that crosses methods."""

from __future__ import annotations

import copy

import torch
from torch import nn

import tandem


class SharedModule(nn.Module):
    def __init__(self, as_parameter: bool = False):
        super().__init__()
        if as_parameter:
            self._v = nn.Parameter(torch.ones(1), requires_grad=False)
        else:
            self.register_buffer("_v", torch.ones(1))


class Module1(nn.Module):
    def __init__(self, shared_module):
        super().__init__()
        self.shared_module = shared_module

    def forward(self, x):
        self.shared_module._v[:] = self.shared_module._v + x
        return self.shared_module._v


class Module2(nn.Module):
    def __init__(self, shared_module):
        super().__init__()
        self.shared_module = shared_module

    def forward(self, x):
        self.shared_module._v.fill_(0.0)
        return x


def original_report(as_parameter: bool = False):
    shared = SharedModule(as_parameter)
    m1, m2 = Module1(shared), Module2(shared)
    ex = (torch.randn(1),)
    spec = {"forward1": tandem.Method(m1, ex), "forward2": tandem.Method(m2, ex)}
    e1, e2 = copy.deepcopy((m1, m2))
    calls = [
        ("forward1", (torch.tensor([1.0]),)),
        ("forward1", (torch.tensor([2.0]),)),
        ("forward2", (torch.tensor([0.0]),)),
        ("forward1", (torch.tensor([5.0]),)),
    ]
    return None, spec, {"forward1": e1, "forward2": e2}, calls


class Accumulator(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(3))

    def forward(self, x):
        self.state.add_(x)
        return self.state * 2

    def reset(self):
        self.state.zero_()


def accumulator():
    m = Accumulator()
    e = copy.deepcopy(m)
    calls = [
        ("forward", (torch.tensor([1.0, 2.0, 3.0]),)),
        ("forward", (torch.tensor([0.5, -1.0, 4.0]),)),
        ("reset", ()),
        ("forward", (torch.tensor([7.0, 8.0, 9.0]),)),
        ("forward", (torch.tensor([1.0, 1.0, 1.0]),)),
    ]
    return m, {"forward": (torch.randn(3),), "reset": ()}, {"forward": e.forward, "reset": e.reset}, calls


class StateIO(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("h", torch.zeros(2, 4))

    def set_state(self, t):
        self.h.copy_(t)

    def get_state(self):
        return self.h

    def forward(self, x):
        self.h.mul_(0.5).add_(x)
        return self.h.sum(dim=1)


def state_io():
    m = StateIO()
    e = copy.deepcopy(m)
    g = torch.Generator().manual_seed(1)
    t = torch.randn(2, 4, generator=g)
    x = torch.randn(2, 4, generator=g)
    calls = [
        ("get_state", ()),
        ("set_state", (t,)),
        ("get_state", ()),
        ("forward", (x,)),
        ("get_state", ()),
        ("forward", (x * 2,)),
        ("set_state", (torch.zeros(2, 4),)),
        ("get_state", ()),
    ]
    spec = {"set_state": (torch.randn(2, 4),), "get_state": (), "forward": (torch.randn(2, 4),)}
    return m, spec, {"set_state": e.set_state, "get_state": e.get_state, "forward": e.forward}, calls


class StreamingGRU(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.cell = nn.GRUCell(16, 32)
        self.register_buffer("h", torch.zeros(1, 32))

    def forward(self, x):
        h = self.cell(x, self.h)
        self.h.copy_(h)
        return h

    def reset(self):
        self.h.zero_()


def gru():
    m = StreamingGRU()
    e = copy.deepcopy(m)
    g = torch.Generator().manual_seed(2)
    xs = [torch.randn(1, 16, generator=g) for _ in range(20)]
    calls = [("forward", (x,)) for x in xs[:10]] + [("reset", ())] + [("forward", (x,)) for x in xs[10:]]
    return m, {"forward": (torch.randn(1, 16),), "reset": ()}, {"forward": e.forward, "reset": e.reset}, calls


class Initialized(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("v", torch.arange(4.0))
        self.register_buffer("v0", torch.arange(4.0))  # never mutated: a constant

    def forward(self, x):
        self.v.mul_(x)
        return self.v + 0

    def reset(self):
        self.v.copy_(self.v0)


def initialized():
    m = Initialized()
    e = copy.deepcopy(m)
    calls = [
        ("forward", (torch.tensor([2.0, 2.0, 2.0, 2.0]),)),
        ("forward", (torch.tensor([1.0, -1.0, 0.5, 3.0]),)),
        ("reset", ()),
        ("forward", (torch.tensor([1.0, 1.0, 1.0, 1.0]),)),
    ]
    return m, {"forward": (torch.ones(4),), "reset": ()}, {"forward": e.forward, "reset": e.reset}, calls


class BigWeights(nn.Module):
    """Weights (4 MiB) much larger than the state (4 KiB): for sessions sharing one program."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.lin = nn.Linear(1024, 1024)
        self.register_buffer("h", torch.zeros(1, 1024))

    def forward(self, x):
        self.h.copy_(torch.tanh(self.lin(x) + self.h))
        return self.h


def big_weights():
    m = BigWeights()
    e = copy.deepcopy(m)
    g = torch.Generator().manual_seed(8)
    calls = [("forward", (torch.randn(1, 1024, generator=g),)) for _ in range(3)]
    return m, {"forward": (torch.randn(1, 1024),)}, {"forward": e.forward}, calls


class HugeState(nn.Module):
    """256 MiB of state whose head a method updates in place: for out-of-memory handling."""

    def __init__(self):
        super().__init__()
        self.register_buffer("big", torch.zeros(64 * 1024 * 1024))

    def forward(self, x):
        self.big[:4] += x
        return self.big[:4] * 1


def huge_state():
    m = HugeState()
    e = copy.deepcopy(m)
    calls = [("forward", (torch.tensor([1.0, 2.0, 3.0, 4.0]),)), ("forward", (torch.tensor([1.0, 1.0, 1.0, 1.0]),))]
    return m, {"forward": (torch.ones(4),)}, {"forward": e.forward}, calls


class Int32Counter(nn.Module):
    """int32 state: a step counter that wraps past 2^31 - 1 like PyTorch's, and a running total
    with int32 arithmetic (floor division, remainder, comparisons, casts both ways)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.tensor([2**31 - 3, 5], dtype=torch.int32))
        self.register_buffer("total", torch.zeros(3, dtype=torch.int32))

    def forward(self, x):
        self.count.add_(1)
        self.total.add_(x * 3 - 1)
        q = torch.div(self.total, 7, rounding_mode="floor")
        r = torch.remainder(self.total, -5)
        pos = torch.where(self.total > 0, self.total, -self.total)
        return self.count + 0, q, r, pos, x.float() * 0.5, (self.total.float() / 4).int()

    def reset(self):
        self.count.zero_()
        self.total.zero_()


def int32_counter():
    m = Int32Counter()
    e = copy.deepcopy(m)
    xs = [[1, -2, 3], [100000, -7, 0], [-(2**20), 5, 2**29], [2**29, 2**29, -(2**29)]]
    calls = [("forward", (torch.tensor(x, dtype=torch.int32),)) for x in xs[:3]] + [("reset", ())]
    calls += [("forward", (torch.tensor(x, dtype=torch.int32),)) for x in xs[1:]]
    spec = {"forward": (torch.zeros(3, dtype=torch.int32),), "reset": ()}
    return m, spec, {"forward": e.forward, "reset": e.reset}, calls


class Appender(nn.Module):
    """A method with a bounded dynamic dim n (its input x [1, n, 4], 1 <= n <= 8) over a KV-cache-like
    state: writes x's rows at the position, returns sizes that depend on n (n + 1 rows, 4 n - 1
    elements), the cache's running sum, x's last row and the position plus n."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("pos", torch.zeros((), dtype=torch.long))
        self.register_buffer("cache", torch.zeros(1, 16, 4))

    def forward(self, x):
        n = x.shape[1]
        idx = self.pos + torch.arange(n)
        self.cache.index_put_((torch.zeros_like(idx), idx), self.lin(x)[0])
        self.pos.add_(n)
        y = torch.cat([x, x[:, :1]], 1) * 2
        return y, x.reshape(-1)[1:], self.cache.sum(1), x[:, -1], self.pos + n

    def reset(self):
        self.pos.zero_()
        self.cache.zero_()


def dynamic_appender():
    torch.manual_seed(0)
    m = Appender()
    e = copy.deepcopy(m)
    n = torch.export.Dim("n", min=1, max=8)
    spec = {"forward": tandem.Method(m, (torch.randn(1, 3, 4),), dynamic_shapes=({1: n},)), "reset": ()}
    g = torch.Generator().manual_seed(1)
    calls = [("forward", (torch.randn(1, k, 4, generator=g),)) for k in (3, 1, 8)] + [("reset", ())]
    calls += [("forward", (torch.randn(1, k, 4, generator=g),)) for k in (5, 2)]
    return m, spec, {"forward": e.forward, "reset": e.reset}, calls


class Gated(nn.Module):
    """A Python branch on a tensor value (pocket-tts: `if pad is not None and bool((pad > 0).any()):`),
    specialized at export on the way it went then (no padding) with a guard: a call whose pad makes
    it go the other way fails with TDM_ERR_GUARD and leaves the state unchanged."""

    def __init__(self):
        super().__init__()
        self.register_buffer("pad", torch.zeros(2, dtype=torch.long))
        self.register_buffer("acc", torch.zeros(3))

    def forward(self, x, pad):
        self.pad.copy_(pad)
        if self.pad is not None and bool((self.pad > 0).any()):
            self.acc.add_(x)
        else:
            self.acc.sub_(x * 2)
        return self.acc + 1


def branch_guard():
    m = Gated()
    e = copy.deepcopy(m)
    spec = {"forward": (torch.randn(3), torch.zeros(2, dtype=torch.long))}
    g = torch.Generator().manual_seed(2)
    calls = [("forward", (torch.randn(3, generator=g), torch.tensor(p))) for p in ([0, 0], [-1, 0], [0, -5])]
    return m, spec, {"forward": e.forward}, calls


class Streaming(nn.Module):
    """Streaming state as people write it by hand: a Python bool first-frame flag steering a branch (a
    version of forward per value), a float clock and an int ring position computed with (state the
    program reads each call), a buffer reassigned instead of written in place, and a tensor the first
    call creates where None was."""

    def __init__(self):
        super().__init__()
        self.first = True
        self.t = 0.0
        self.pos = 0
        self.register_buffer("ring", torch.zeros(3, 2))
        self.register_buffer("avg", torch.zeros(2))
        self.h = None  # created by the first call

    def forward(self, x):
        if self.first:
            self.first = False
            self.avg = x.clone()
        else:
            self.avg = self.avg * 0.5 + x * 0.5
        self.ring[self.pos % 3] = x
        self.pos += 1
        self.t += 0.5
        self.h = torch.tanh(x) if self.h is None else torch.tanh(x + self.h * 0.5)
        return self.avg * self.t + self.ring.sum(0) + self.h

    def reset(self):
        self.h = None
        self.first = True
        self.t = 0.0
        self.pos = 0
        self.ring.zero_()


def python_values():
    m = Streaming()
    e = copy.deepcopy(m)
    g = torch.Generator().manual_seed(3)
    xs = [torch.randn(2, generator=g) for _ in range(6)]
    calls = [("forward", (x,)) for x in xs[:4]] + [("reset", ())] + [("forward", (x,)) for x in xs[4:]]
    return m, {"forward": (torch.zeros(2),), "reset": ()}, {"forward": e.forward, "reset": e.reset}, calls


class Delayed(nn.Module):
    """Nothing for the first `delay` calls (a Python int it counts and branches on, as moshi's LMGen
    returns None until its delays fill), then the state: a version per run of the int's values, one of
    them without outputs."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(2))
        self.offset = 0
        self.delay = 2

    def forward(self, x):
        self.acc.add_(x)
        self.offset += 1
        if self.offset <= self.delay:
            return None
        return self.acc * 2

    def reset(self):
        self.acc.zero_()
        self.offset = 0


def delayed():
    m = Delayed()
    e = copy.deepcopy(m)
    g = torch.Generator().manual_seed(4)
    xs = [torch.randn(2, generator=g) for _ in range(7)]
    calls = [("forward", (x,)) for x in xs[:4]] + [("reset", ())] + [("forward", (x,)) for x in xs[4:]]
    return m, {"forward": (torch.zeros(2),), "reset": ()}, {"forward": e.forward, "reset": e.reset}, calls


class Periods(nn.Module):
    """Two Python ints it counts and branches on, wrapping with periods 3 and 2 (the calls repeat every
    6): a version per box of their runs of values, each picked by two `when_in` ops."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(2))
        self.a = 0
        self.b = 0

    def forward(self, x):
        y = x * 3 if self.a == 2 else x
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


def periods():
    m = Periods()
    e = copy.deepcopy(m)
    g = torch.Generator().manual_seed(7)
    xs = [torch.randn(2, generator=g) for _ in range(11)]
    calls = [("forward", (x,)) for x in xs[:8]] + [("reset", ())] + [("forward", (x,)) for x in xs[8:]]
    return m, {"forward": (torch.zeros(2),), "reset": ()}, {"forward": e.forward, "reset": e.reset}, calls


class Writes(nn.Module):
    """A method that changes its inputs in place (x.add_(1), a slice of y written) beside a state:
    eager's caller sees the new values, and so does tandem's (written back after the call)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(3))

    def forward(self, x, y):
        x.add_(1)
        y[1:] = x[1:] * 2
        self.acc += x
        return x * 2 + self.acc


class Branches(nn.Module):
    """torch.cond as branches in the program: on a counter kept in state (even and odd calls), on a
    buffer's value (the running sum's sign) with a cond nested in one branch, and on an input; a
    branch's result becomes state, and reset starts the counter and the sum over."""

    def __init__(self):
        super().__init__()
        self.register_buffer("n", torch.zeros((), dtype=torch.long))
        self.register_buffer("acc", torch.zeros(3))
        self.register_buffer("w", torch.tensor([0.5, -1.0, 2.0]))

    def forward(self, x):
        self.n.add_(1)

        def even(a, b):
            return a + b

        def odd(a, b):
            return a - 2 * b

        y = torch.cond(self.n % 2 == 0, even, odd, (x, self.acc))

        def big(u):
            return u * 2

        def small(u):
            return u + 1

        def up(a, b):
            return torch.cond(a.amax() > 1, big, small, (a,)) + b

        def down(a, b):
            return a * b - 1

        z = torch.cond(self.acc.sum() > 0, up, down, (y, self.w))
        self.acc.copy_(z * 0.5)

        def sin(t):
            return t.sin()

        def cos(t):
            return t.cos()

        return torch.cond(x.sum() > 0, sin, cos, (z,)), self.n * 1

    def reset(self):
        self.n.zero_()
        self.acc.zero_()


def branches():
    m = Branches()
    e = copy.deepcopy(m)
    g = torch.Generator().manual_seed(5)
    xs = [torch.randn(3, generator=g) * 2 for _ in range(16)]
    calls = [("forward", (x,)) for x in xs[:10]] + [("reset", ())] + [("forward", (x,)) for x in xs[10:]]
    return m, {"forward": (torch.zeros(3),), "reset": ()}, {"forward": e.forward, "reset": e.reset}, calls


class HistoryWindow(nn.Module):
    """A history of the last 3 inputs, kept as `torch.cat([self.hist, x[None]])[-3:]` from an empty
    one: state that grows to a window (python/tandem/growing.py)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("hist", torch.zeros(0, 2))

    def forward(self, x):
        self.hist = torch.cat([self.hist, x[None]])[-3:]
        return self.hist.sum(0) * 2 + self.hist[0]

    def reset(self):
        self.hist = torch.zeros(0, 2)


def history_window():
    m = HistoryWindow()
    e = copy.deepcopy(m)
    g = torch.Generator().manual_seed(5)
    xs = [torch.randn(2, generator=g) for _ in range(7)]
    calls = [("forward", (x,)) for x in xs[:5]] + [("reset", ())] + [("forward", (x,)) for x in xs[5:]]
    return m, {"forward": (torch.zeros(2),), "reset": ()}, {"forward": e.forward, "reset": e.reset}, calls


class LastInputs(nn.Module):
    """A Python list of the last 3 inputs, appended to and popped (`pop(0)` past 3): state that grows
    to a bound the code gives, its length steering the code (python/tandem/growing.py)."""

    def __init__(self):
        super().__init__()
        self.xs = []

    def forward(self, x):
        self.xs.append(x * 2)
        if len(self.xs) > 3:
            self.xs.pop(0)
        return torch.stack(self.xs).mean(0) + len(self.xs)

    def reset(self):
        self.xs.clear()


def last_inputs():
    m = LastInputs()
    e = copy.deepcopy(m)
    g = torch.Generator().manual_seed(6)
    xs = [torch.randn(2, generator=g) for _ in range(7)]
    calls = [("forward", (x,)) for x in xs[:5]] + [("reset", ())] + [("forward", (x,)) for x in xs[5:]]
    return m, {"forward": (torch.zeros(2),), "reset": ()}, {"forward": e.forward, "reset": e.reset}, calls


CASES = {
    "original_report": original_report,
    "accumulator": accumulator,
    "state_io": state_io,
    "gru": gru,
    "initialized": initialized,
    "big_weights": big_weights,
    "huge_state": huge_state,
    "int32_counter": int32_counter,
    "dynamic_appender": dynamic_appender,
    "branch_guard": branch_guard,
    "python_values": python_values,
    "delayed": delayed,
    "periods": periods,
    "branches": branches,
    "history_window": history_window,
    "last_inputs": last_inputs,
}


def as_tuple(out):
    if out is None:
        return ()
    if isinstance(out, torch.Tensor):
        return (out,)
    return tuple(out)


def run_eager(eager: dict, calls: list) -> list:
    """Outputs of the eager sequence, each a tuple of tensors (cloned: state may change later)."""
    with torch.no_grad():
        return [tuple(t.detach().clone() for t in as_tuple(eager[name](*inputs))) for name, inputs in calls]
