"""State that grows (python/tandem/growing.py): a KV cache grown with torch.cat, a history kept to a
window, each a slot of bounded capacity plus its current length as int64 state, natively and in wasm
against eager over calls with a reset between; the refusal that names state_bounds; a call past the
capacity fails typed with the state unchanged; a call's work follows the current length."""

import copy

import pytest
import torch
from torch import nn

import tandem
from cases import HistoryWindow, LastInputs, as_tuple, run_eager


class CatAttention(nn.Module):
    """One attention head by hand, its keys and values kept as `self.k = torch.cat([self.k, k], dim=2)`."""

    def __init__(self, d=8, heads=2):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.register_buffer("k", torch.zeros(1, heads, 0, d // heads))
        self.register_buffer("v", torch.zeros(1, heads, 0, d // heads))

    def forward(self, x):  # x [1, 1, d]: one token
        q, k, v = self.qkv(x).view(1, 1, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        self.k = torch.cat([self.k, k], dim=2)
        self.v = torch.cat([self.v, v], dim=2)
        att = torch.softmax(q @ self.k.transpose(-1, -2) / self.hd**0.5, dim=-1)
        return self.out((att @ self.v).transpose(1, 2).reshape(1, 1, -1))

    def reset(self):
        self.k = torch.zeros(1, self.heads, 0, self.hd)
        self.v = torch.zeros(1, self.heads, 0, self.hd)


def _calls(n_before: int, n_after: int, shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    calls = [("forward", (torch.randn(*shape, generator=g),)) for _ in range(n_before)] + [("reset", ())]
    return calls + [("forward", (torch.randn(*shape, generator=g),)) for _ in range(n_after)]


def _run(model, eager, calls, read=()):
    for i, (name, args) in enumerate(calls):
        (w,) = run_eager(eager, [(name, args)])
        got = as_tuple(model.call(name, *args))
        assert len(got) == len(w), f"call {i}"
        for a, b in zip(got, w):
            torch.testing.assert_close(a, b, msg=lambda m: f"call {i} {name}: {m}")
        for path, value in read:  # the state at its current length, as eager holds it
            torch.testing.assert_close(model.read_state(path), value())


def test_kv_cache_grown_with_cat_matches_eager(backend):
    torch.manual_seed(0)
    m = CatAttention()
    e = copy.deepcopy(m)
    program = tandem.export(m, {"forward": (torch.randn(1, 1, 8),), "reset": ()}, state_bounds={"k": 16, "v": 16})
    states = {s.name: s.shape for s in program.states}
    assert states == {"k": (1, 2, 16, 4), "v": (1, 2, 16, 4), "k.length": ()}  # one length for keys and values
    assert m.k.shape == (1, 2, 0, 4)  # the module is as it was
    model = tandem.load(program.to_bytes())
    assert model.read_state("k").shape == (1, 2, 0, 4)
    _run(model, {"forward": e, "reset": e.reset}, _calls(6, 4, (1, 1, 8)), read=[("k", lambda: e.k), ("v", lambda: e.v)])
    assert int(model.read_state("k.length")) == 4
    model.reset_state()
    assert model.read_state("v").shape == (1, 2, 0, 4)


def test_a_window_of_a_history_matches_eager(backend):
    """`torch.cat([self.hist, x[None]])[-w:]`: the window is the capacity, found from the code; the
    method has a version per length of the window (filling, then full)."""
    m = HistoryWindow()
    e = copy.deepcopy(m)
    program = tandem.export(m, {"forward": (torch.zeros(2),), "reset": ()})
    assert {s.name: s.shape for s in program.states} == {"hist": (3, 2), "hist.length": ()}
    assert sorted(x.name for x in program.methods if x.name.startswith("forward")) == ["forward", "forward#1", "forward#2", "forward#3"]
    model = tandem.load(program.to_bytes())
    _run(model, {"forward": e, "reset": e.reset}, _calls(5, 2, (2,), seed=1), read=[("hist", lambda: e.hist)])


def test_a_list_appended_to_and_popped_matches_eager(backend):
    """A Python list of tensors: the slot's rows, its length int64 state, a version of each method per
    length (its `len()` steers the code); read_state gives the items stacked."""
    m = LastInputs()
    e = copy.deepcopy(m)
    program = tandem.export(m, {"forward": (torch.zeros(2),), "reset": ()})
    assert {s.name: s.shape for s in program.states} == {"xs": (3, 2), "xs.length": ()}
    assert m.xs == []
    model = tandem.load(program.to_bytes())
    items = [("xs", lambda: torch.stack(e.xs) if e.xs else torch.zeros(0, 2))]
    _run(model, {"forward": e, "reset": e.reset}, _calls(5, 2, (2,), seed=2), read=items)


class Log(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        self.seen.append(x + 1)
        return torch.stack(self.seen).sum(0)


def test_an_unbounded_list_is_refused_naming_state_bounds_then_exports_with_it(backend):
    m = Log()
    with pytest.raises(tandem.ExportError, match=r"appends to the list of tensors 'seen' .*state_bounds=\{'seen': N\}"):
        tandem.export(m, {"forward": (torch.zeros(2),)})
    model = tandem.load(tandem.export(m, {"forward": (torch.zeros(2),)}, state_bounds={"seen": 4}).to_bytes())
    e = copy.deepcopy(m)
    xs = [torch.full((2,), float(i)) for i in range(5)]
    for x in xs[:4]:
        torch.testing.assert_close(model.forward(x), e(x))
    with pytest.raises(tandem.TandemError) as err:
        model.forward(xs[4])
    assert err.value.code == "TDM_ERR_GUARD"  # no version of the method at a length past the capacity
    torch.testing.assert_close(model.read_state("seen"), torch.stack(e.seen))


def test_an_unbounded_growth_is_refused_naming_state_bounds_then_exports_with_it():
    m = CatAttention()
    with pytest.raises(tandem.ExportError, match=r"grows state 'k' along dim 2 .*state_bounds=\{'k': N, 'v': N\}"):
        tandem.export(m, {"forward": (torch.randn(1, 1, 8),)})
    assert m.k.shape == (1, 2, 0, 4)
    with pytest.raises(tandem.ExportError, match="state_bounds names 'w', which no method grows"):
        tandem.export(m, {"forward": (torch.randn(1, 1, 8),)}, state_bounds={"k": 4, "v": 4, "w": 4})
    tandem.export(m, {"forward": (torch.randn(1, 1, 8),)}, state_bounds={"k": 4, "v": 4})


def test_a_call_past_the_capacity_fails_typed_with_the_state_unchanged(backend):
    torch.manual_seed(1)
    m = CatAttention()
    e = copy.deepcopy(m)
    model = tandem.load(tandem.export(m, {"forward": (torch.randn(1, 1, 8),), "reset": ()}, state_bounds={"k": 3, "v": 3}).to_bytes())
    xs = [torch.randn(1, 1, 8) for _ in range(5)]
    for x in xs[:3]:
        torch.testing.assert_close(model.forward(x), e(x))
    k, v = model.read_state("k"), model.read_state("v")
    with pytest.raises(tandem.TandemError) as err:
        model.forward(xs[3])
    assert err.value.code == "TDM_ERR_INDEX" and "'k.length' is 3" in str(err.value)
    torch.testing.assert_close(model.read_state("k"), k)
    torch.testing.assert_close(model.read_state("v"), v)
    assert int(model.read_state("k.length")) == 3
    model.reset()
    e.reset()
    torch.testing.assert_close(model.forward(xs[4]), e(xs[4]))


def test_the_work_of_a_call_follows_the_current_length():
    """The cache is planned at its capacity, but its length is a dim of the method read from the state
    at the start of each call: the ops over the cache run at the current length (docs/ops.md)."""
    import time

    m = CatAttention(d=256, heads=1)
    program = tandem.export(m, {"forward": (torch.randn(1, 1, 256),)}, state_bounds={"k": 4096, "v": 4096})
    model = tandem.load(program.to_bytes())
    assert model.dims["forward"] == {"k.length": (0, 4095)}
    x = torch.randn(1, 1, 256)

    def best():
        times = []
        for _ in range(5):
            t = time.perf_counter()
            model.forward(x)
            times.append(time.perf_counter() - t)
        return min(times)

    short = best()  # lengths 0..4
    model.write_state("k.length", torch.tensor(3000))
    long = best()  # lengths 3000..3004
    assert long > 3 * short  # at capacity throughout, the two would take the same time


class PromptCache(nn.Module):
    """Keys and values of a prompt of any length 1..4 (a dynamic dim), appended with torch.cat."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)
        self.register_buffer("ck", torch.zeros(1, 0, 4))
        self.register_buffer("cv", torch.zeros(1, 0, 4))

    def forward(self, x):  # x [1, T, 4]
        self.ck = torch.cat([self.ck, self.k(x)], dim=1)
        self.cv = torch.cat([self.cv, self.v(x)], dim=1)
        return torch.softmax(self.q(x) @ self.ck.transpose(1, 2) / 2, -1) @ self.cv


def test_a_cache_grown_by_a_dynamic_number_of_rows(backend):
    """The rows a call adds may be a dim of its inputs: the length's maximum is the capacity minus the
    dim's maximum, so a call at a longer length fails with TDM_ERR_INDEX, the state unchanged."""
    torch.manual_seed(2)
    m = PromptCache()
    e = copy.deepcopy(m)
    T = torch.export.Dim("T", min=1, max=4)
    spec = {"forward": tandem.Method(m, (torch.randn(1, 2, 4),), dynamic_shapes=({1: T},))}
    model = tandem.load(tandem.export(m, spec, state_bounds={"ck": 10, "cv": 10}).to_bytes())
    assert model.dims["forward"] == {"T": (1, 4), "ck.length": (0, 6)}
    for n in (3, 1, 2):
        x = torch.randn(1, n, 4)
        torch.testing.assert_close(model.forward(x), e(x))
        torch.testing.assert_close(model.read_state("cv"), e.cv)
    model.forward(torch.randn(1, 1, 4))  # length 7: past 10 - 4
    with pytest.raises(tandem.TandemError) as err:
        model.forward(torch.randn(1, 1, 4))
    assert err.value.code == "TDM_ERR_INDEX" and model.read_state("ck").shape == (1, 7, 4)
