"""torch.cond as a branch in the program (docs/ops.md, "Values known at run time"), natively and in
wasm, against eager: a call runs the branch its predicate picks; a check inside a branch fails the
call with the state unchanged; a known predicate exports one branch; torch.while_loop is unrolled
when its trip count is known at export, else refused naming the line. The call sequences over state
(a counter, a buffer's value, nested conds, a reset) are tests/cases.py's `branches`."""

import copy

import pytest
import torch
from torch import nn

import tandem
from tandem.format import file_ops


class Lookup(nn.Module):
    """A branch that indexes with an input (a check_index inside it) beside a state write."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.register_buffer("table", torch.arange(12.0).reshape(4, 3))

    def forward(self, x, idx):
        self.calls.add_(1)

        def pick(t, i, v):
            return t.index_select(0, i) * v.sum()

        def skip(t, i, v):
            return t[:2] - v.sum()

        return torch.cond(x.sum() > 0, pick, skip, (self.table, idx, x)), self.calls * 1


def test_a_call_runs_the_branch_its_predicate_picks_and_a_failing_check_changes_nothing(backend):
    model = Lookup()
    eager = copy.deepcopy(model)
    program = tandem.export(model, {"forward": (torch.ones(3), torch.tensor([0, 1]))})
    names = [op.name for op in file_ops(program.method("forward"))]
    assert "cond" in names and "check_index" in names
    m = tandem.load(program.to_bytes())
    for x, i in [([1.0, 2, 3], [3, 0]), ([-1.0, 0, 0], [1, 2]), ([0.5, 0, 0], [2, 2])]:
        args = (torch.tensor(x), torch.tensor(i))
        for g, w in zip(m.forward(*args), eager(*args)):
            torch.testing.assert_close(g, w)
    with pytest.raises(tandem.TandemError) as e:  # the picking branch, an index out of range: eager raises too
        m.forward(torch.ones(3), torch.tensor([4, 0]))
    assert e.value.code == "TDM_ERR_INDEX"
    torch.testing.assert_close(m.read_state("calls"), torch.tensor(3))
    out, calls = m.forward(-torch.ones(3), torch.tensor([4, 0]))  # the other branch reads no index (eager torch.cond runs both)
    torch.testing.assert_close(out, eager.table[:2] + 3)
    torch.testing.assert_close(calls, torch.tensor(4))


class Dynamic(nn.Module):
    """Branches over an input with a dynamic dim, on a counter: results whose shape follows the dim."""

    def __init__(self):
        super().__init__()
        self.register_buffer("n", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.n.add_(1)

        def every_third(x, n):
            return x * 2 + n, x.sum(0)

        def otherwise(x, n):
            return x.tanh(), x.amax(0)

        return torch.cond(self.n % 3 == 0, every_third, otherwise, (x, self.n))


def test_branches_follow_a_dynamic_dim(backend):
    model = Dynamic()
    eager = copy.deepcopy(model)
    t = torch.export.Dim("t", min=1, max=8)
    m = tandem.load(tandem.export(model, {"forward": tandem.Method(model, (torch.ones(4, 2),), dynamic_shapes=({0: t},))}).to_bytes())
    g = torch.Generator().manual_seed(0)
    for n in (3, 1, 8, 5, 2, 7):
        x = torch.randn(n, 2, generator=g)
        for got, want in zip(m.forward(x), eager(x)):
            torch.testing.assert_close(got, want)


class Results(nn.Module):
    def forward(self, x):
        def a(x):
            return x + 1, (x * 2).sum()

        def b(x):
            return x.exp(), x.sum()

        return torch.cond(x[0] > 0, a, b, (x,))


def test_each_branch_computes_its_results_in_place_of_the_conds_outputs():
    program = tandem.export(Results(), {"forward": (torch.ones(3),)})
    names = [op.name for op in file_ops(program.method("forward"))]
    assert names.count("cond") == 1 and "copy" not in names
    m = tandem.load(program.to_bytes())
    for x in (torch.tensor([1.0, 2, 3]), torch.tensor([-1.0, 2, 3])):
        for g, w in zip(m.forward(x), Results()(x)):
            torch.testing.assert_close(g, w)


class Known(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.ones(3))

    def forward(self, x):
        return torch.cond(self.w.sum() > 0, lambda x: x + 1, lambda x: x - 1, (x,))


def test_a_predicate_the_export_knows_exports_the_branch_it_picks():
    program = tandem.export(Known(), {"forward": (torch.ones(3),)})
    assert "cond" not in [op.name for op in file_ops(program.method("forward"))]
    torch.testing.assert_close(tandem.load(program.to_bytes()).forward(torch.ones(3)), torch.full((3,), 2.0))


class Loop(nn.Module):
    """torch.while_loop from a constant start to a constant end (its trip count known at export),
    reading a state that the method then changes."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(3))

    def forward(self, x):
        def more(i, y):
            return i < 3

        def step(i, y):
            return i + 1, y * 2 + self.acc

        i, y = torch._higher_order_ops.while_loop(more, step, (torch.tensor(0), x))
        self.acc.add_(y)
        return y, i


def test_a_while_loop_whose_trip_count_the_export_knows_is_unrolled(backend):
    model = Loop()
    eager = copy.deepcopy(model)
    m = tandem.load(tandem.export(model, {"forward": (torch.ones(3),)}).to_bytes())
    g = torch.Generator().manual_seed(1)
    for _ in range(4):
        x = torch.randn(3, generator=g)
        for got, want in zip(m.forward(x), eager(x)):
            torch.testing.assert_close(got, want)
    torch.testing.assert_close(m.read_state("acc"), eager.acc)


class RunTimeLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("n", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.n.add_(1)
        return torch._higher_order_ops.while_loop(lambda i, y: i < self.n, lambda i, y: (i + 1, y * 2), (torch.tensor(0), x))[1]


def test_a_while_loop_whose_trip_count_is_known_only_at_run_time_is_refused_naming_the_line():
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(RunTimeLoop(), {"forward": (torch.ones(3),)})
    msg = str(e.value)
    assert "torch.while_loop" in msg and "test_runtime_branches.py" in msg and "range" in msg


class WritesInBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k", torch.zeros(3))

    def forward(self, x):
        def write(x, k):
            k.add_(x)
            return x + 1

        def local(x, k):
            y = x * 1
            y.add_(k)  # in place on a value of the branch: functional as torch requires
            return y

        return torch.cond(x.sum() > 0, write, local, (x, self.k))


def test_a_branch_that_writes_state_in_place_is_refused_naming_the_line():
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(WritesInBranch(), {"forward": (torch.ones(3),)})
    msg = str(e.value)
    assert "torch.cond" in msg and "test_runtime_branches.py" in msg and "copy_(new)" in msg
