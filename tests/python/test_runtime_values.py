"""Values only known at run time (docs/ops.md, "Values known at run time"), natively and in wasm,
against PyTorch eager:

1. A symbolic size used as a value (fill_(n), += x.shape[1], arange(n) + pos, new_full(..., n),
   full((2,), n), a size written into state or returned, n - 1, 2*n, n // 2, arange(pos, pos + n)) is
   computed per call;
   each case runs at the minimum, a middle value and the maximum of the dim (and more), so a size
   frozen at its maximum fails.
"""

import copy

import pytest
import torch
from torch import nn
from torch.export import Dim

import tandem

LO, HI = 1, 32
SIZES = (3, LO, HI, 17, 2, 3)  # the minimum, a middle value, the maximum, and repeats


class SizeCase(nn.Module):
    """forward(x [1, n, 4]) over an int64 position, an int32 counter, a float vector and a cache."""

    def __init__(self, body):
        super().__init__()
        self.body = body
        self.register_buffer("pos", torch.zeros((), dtype=torch.long))
        self.register_buffer("cnt", torch.zeros(2, dtype=torch.int32))
        self.register_buffer("f", torch.zeros(3))
        self.register_buffer("cache", torch.zeros(1, HI + 2, 4))

    def forward(self, x):
        return self.body(self, x, x.shape[1])


def _fill(s, x, n):
    s.pos.fill_(n)
    return x * 2


def _add(s, x, n):
    s.pos += x.shape[1]
    s.cnt.add_(n)
    return s.pos + 0


def _arange_pos(s, x, n):
    y = torch.arange(n) + s.pos
    s.pos.add_(n)
    return y


def _new_full(s, x, n):
    return x.new_full((3,), n), x.new_full((2, 2), n - 1, dtype=torch.long)


def _full(s, x, n):
    return torch.full((2,), n), torch.full((100,), 2 * n, dtype=torch.float32), torch.full((n,), n)


def _into_state(s, x, n):
    s.f[0] = n
    s.f[2] = n // 2
    s.cnt[1] = n * 3 - 1
    return s.f * 1


def _returned(s, x, n):
    return x + 1, n, 2 * n - 1, n // 2, n % 5


def _arith(s, x, n):
    return x.sum() * (2 * n) + n // 2, x * (n - 1), x / n, (x * 0).long() + n * n


def _mean_by_hand(s, x, n):
    return x.sum(1) / x.shape[1], x.var(1), x.std(1, correction=0)


def _cache_at_size(s, x, n):
    s.cache[:, n - 1 : n] = x[:, :1]  # the row at n - 1 (a symbolic start)
    s.cache[:, n + 1 : n + 2] = x[:, -1:]
    return s.cache[:, :n].sum(1), x[:, n - 1]


def _arange_start(s, x, n):
    return torch.arange(n, 2 * n), torch.arange(1, n + 1, dtype=torch.float32) * 0.5, torch.arange(n - 1, HI + 3)


def _range_from_pos(s, x, n):
    past = s.pos * 1  # a one-element tensor, as a cache's length is
    y = torch.arange(past, past + n, dtype=torch.long)
    z = torch.arange(past + 2, past + 2 + x.shape[1]) * 2 - 1  # a start shifted too
    s.pos.add_(n)
    return y, z


def _numel(s, x, n):
    return x.numel() + s.pos, torch.scalar_tensor(x.shape[1] - 1)


def _split(s, x, n):
    a, b = torch.split(s.cache, [n, HI + 2 - n], 1)
    return a.sum(1) + 1, b.sum(1) - 1


def _group_norm(s, x, n):
    return torch.nn.functional.group_norm(x.transpose(1, 2), 2)


def _float_of_size(s, x, n):
    s.f += x.shape[1] * 0.5
    return x.new_full((2,), n / 2), x * (n / 4), torch.full((3,), n > 3), x.sum() * (n * n) + (n % 4) + max(n, 3)


def _decreasing(s, x, n):
    s.cnt[0] = HI - n
    s.cache[:, n:] += 1  # a size that shrinks as n grows: planned for n's minimum
    return s.cache[:, HI - n] + 1, torch.full((2,), -n), s.cache[:, n:] * 2


CASES = {
    "float_of_size": _float_of_size,
    "decreasing": _decreasing,
    "fill": _fill,
    "add": _add,
    "arange_pos": _arange_pos,
    "new_full": _new_full,
    "full": _full,
    "into_state": _into_state,
    "returned": _returned,
    "arith": _arith,
    "mean_by_hand": _mean_by_hand,
    "cache_at_size": _cache_at_size,
    "arange_start": _arange_start,
    "range_from_pos": _range_from_pos,
    "numel": _numel,
    "split": _split,
    "group_norm": _group_norm,
}
STATES = ("pos", "cnt", "f", "cache")


def _check_case(body, sizes=SIZES):
    torch.manual_seed(0)
    model = SizeCase(body)
    eager = copy.deepcopy(model)
    program = tandem.export(
        model, {"forward": tandem.Method(model, (torch.randn(1, 5, 4),), dynamic_shapes=({1: Dim("n", min=LO, max=HI)},))}
    )
    m = tandem.load(program.to_bytes())
    states = [n for n in STATES if any(st.name == n for st in program.states)]
    for n in sizes:
        x = torch.randn(1, n, 4)
        got, want = m.forward(x), eager(x)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        assert len(got) == len(want), n
        for i, (g, w) in enumerate(zip(got, want)):
            w = torch.as_tensor(w)
            assert g.dtype == w.dtype and g.shape == w.shape, (n, i, g, w)
            torch.testing.assert_close(g, w, equal_nan=True, atol=1e-4, rtol=1e-4, msg=lambda s: f"n={n} output {i}: {s}")
        for name in states:
            torch.testing.assert_close(m.read_state(name), getattr(eager, name), msg=lambda s: f"n={n} state {name}: {s}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_size_used_as_a_value_is_computed_per_call(case, backend):
    _check_case(CASES[case])


def _topk_by_size(s, x, n):
    return torch.topk(x.flatten(), n)[0]


def _strided_arange(s, x, n):
    return torch.arange(n - 1, HI + 3, 3)


def _index_at_size(s, x, n):
    s.cache[:, n - 1] = x[:, 0]
    return x * 1


REFUSED = {
    "topk_by_size": (_topk_by_size, r"k of topk is the size n, which depends on a dynamic dim"),
    "strided_arange": (_strided_arange, r"\(38 - n\)//3.*not an integer affine form"),
    "index_at_size": (_index_at_size, r"torch.export failed.*Constraints violated \(n\)"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_size_tandem_cannot_compute_per_call_is_an_export_error(case):
    body, message = REFUSED[case]
    with pytest.raises(tandem.ExportError, match=message):
        _check_case(body)


# ---- 2. ints read from state (.item(), int()) as offsets ------------------------------------------

CAP = 8


class OffsetCache(nn.Module):
    """pocket-tts' linear KV cache: the write offset read with int(offset.view(-1)[0].item()), rows
    written with cache[i, :, off:off + T] = k, and the new rows read back at the same offset."""

    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.zeros(1, dtype=torch.long))
        self.register_buffer("cache", torch.zeros(2, 1, CAP, 4))

    def forward(self, k):
        off = int(self.offset.view(-1)[0].item())
        self.cache[0, :, off : off + k.shape[1]] = k
        self.cache[1, :, off : off + k.shape[1]] = -2 * k
        rows = self.cache[:, :, off : off + k.shape[1]]
        self.offset += k.shape[1]
        return rows * 3, self.cache.sum(2)

    def reset(self):
        self.offset.zero_()
        self.cache.zero_()


class RingCache(nn.Module):
    """A ring buffer: the position read with .item() (kept a TensorInt), written at pos % capacity;
    and rows read back by an index built from the same value (arange + off)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("pos", torch.zeros((), dtype=torch.long))
        self.register_buffer("ring", torch.zeros(CAP, 3))

    def forward(self, x):
        at = self.pos.item() % CAP
        self.ring[at : at + 1] = x
        back = self.ring.index_select(0, (torch.arange(2) + at + CAP - 1) % CAP)
        self.pos.add_(1)
        return back, torch.tensor(at) * 10


def _calls(m, eager, name, inputs, states):
    for x in inputs:
        got, want = getattr(m, name)(x), getattr(eager, name)(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            torch.testing.assert_close(g, torch.as_tensor(w))
        for s in states:
            torch.testing.assert_close(m.read_state(s), getattr(eager, s))


def test_an_offset_read_with_item_writes_and_reads_the_cache_at_run_time(backend):
    torch.manual_seed(0)
    model = OffsetCache()
    eager = copy.deepcopy(model)
    program = tandem.export(
        model, {"forward": tandem.Method(model, (torch.randn(1, 2, 4),), dynamic_shapes=({1: Dim("t", min=1, max=CAP)},)), "reset": ()}
    )
    m = tandem.load(program.to_bytes())
    _calls(m, eager, "forward", [torch.randn(1, t, 4) for t in (3, 1, 2)], ("offset", "cache"))
    # 6 rows written of 8: 3 more do not fit; eager raises, tandem fails the call and changes nothing
    before = (m.read_state("offset").clone(), m.read_state("cache").clone())
    with pytest.raises(RuntimeError):
        copy.deepcopy(eager)(torch.randn(1, 3, 4))
    with pytest.raises(tandem.TandemError) as e:
        m.forward(torch.randn(1, 3, 4))
    assert e.value.code == "TDM_ERR_INDEX"
    torch.testing.assert_close(m.read_state("offset"), before[0])
    torch.testing.assert_close(m.read_state("cache"), before[1])
    _calls(m, eager, "forward", [torch.randn(1, 2, 4)], ("offset", "cache"))  # exactly fills it
    m.reset()
    eager.reset()
    _calls(m, eager, "forward", [torch.randn(1, CAP, 4)], ("offset", "cache"))


def test_a_ring_position_read_with_item_wraps_at_run_time(backend):
    torch.manual_seed(0)
    model = RingCache()
    eager = copy.deepcopy(model)
    m = tandem.load(tandem.export(model, {"forward": (torch.randn(1, 3),)}).to_bytes())
    _calls(m, eager, "forward", [torch.randn(1, 3) for _ in range(CAP * 2 + 3)], ("pos", "ring"))


class LlamaKVCache(nn.Module):
    """ExecuTorch's llama KVCache.update: the start read from an input with .item(), bounded with
    torch._check_is_size / torch._check, and the new rows written through a view at that start,
    `k_cache.narrow(2, start, seq_len).copy_(k_val)`; plus a view read before a later write to its base
    (eager's view sees the write) and a slice view written in place."""

    def __init__(self):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, 2, CAP, 3))
        self.register_buffer("v_cache", torch.zeros(1, 2, CAP, 3))

    def forward(self, input_pos, k_val, v_val):
        start = input_pos[0].item()
        torch._check_is_size(start)
        torch._check(start < CAP)
        seq_len = k_val.size(2)
        narrowed_k = self.k_cache.narrow(2, start, seq_len)
        narrowed_k.copy_(k_val)
        before = self.v_cache.narrow(2, start, seq_len)
        self.v_cache[:, :, start : start + seq_len].copy_(v_val)
        self.v_cache[:, :, start : start + seq_len][:, 0].mul_(2)
        return self.k_cache * 1, before * 1


def test_writes_through_a_view_at_an_item_offset_reach_the_state_and_checks_run(backend):
    torch.manual_seed(0)
    model = LlamaKVCache()
    eager = copy.deepcopy(model)
    ex = (torch.tensor([0]), torch.randn(1, 2, 2, 3), torch.randn(1, 2, 2, 3))
    m = tandem.load(tandem.export(model, {"forward": ex}).to_bytes())
    for pos in (0, 2, 5, 1):
        args = (torch.tensor([pos]), torch.randn(1, 2, 2, 3), torch.randn(1, 2, 2, 3))
        got, want = m.forward(*args), eager(*args)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
        torch.testing.assert_close(m.read_state("k_cache"), eager.k_cache)
        torch.testing.assert_close(m.read_state("v_cache"), eager.v_cache)
    # torch._check_is_size and torch._check fail the call (eager raises), the state unchanged
    before = m.read_state("k_cache").clone(), m.read_state("v_cache").clone()
    for pos in (-1, CAP):
        with pytest.raises(RuntimeError):
            copy.deepcopy(eager)(torch.tensor([pos]), torch.randn(1, 2, 2, 3), torch.randn(1, 2, 2, 3))
        with pytest.raises(tandem.TandemError) as e:
            m.forward(torch.tensor([pos]), torch.randn(1, 2, 2, 3), torch.randn(1, 2, 2, 3))
        assert e.value.code == "TDM_ERR_GUARD" and "line" in str(e.value)
        torch.testing.assert_close(m.read_state("k_cache"), before[0])
        torch.testing.assert_close(m.read_state("v_cache"), before[1])
    # inside the checks but past the end (eager raises in narrow): an index error, the state unchanged
    with pytest.raises(tandem.TandemError) as e:
        m.forward(torch.tensor([CAP - 1]), torch.randn(1, 2, 2, 3), torch.randn(1, 2, 2, 3))
    assert e.value.code == "TDM_ERR_INDEX"
    torch.testing.assert_close(m.read_state("k_cache"), before[0])


class PrefixCache(nn.Module):
    """pocket-tts' attention over its linear cache: the new rows written at the offset read from the
    state, then the cache read up to the offset plus the new rows, `cache[:, :, :off + T]` (a length
    known only in each call), attended over with a mask built from arange of that length; T is a
    dynamic dim too."""

    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.zeros(1, dtype=torch.long))
        self.register_buffer("cache", torch.full((2, 1, CAP, 2, 4), float("nan")))

    def forward(self, q, k):
        off = int(self.offset.view(-1)[0].item())
        self.cache[0, :, off : off + k.shape[1]] = k
        self.cache[1, :, off : off + k.shape[1]] = k * -0.5
        valid = self.cache[:, :, : off + k.shape[1]]
        keys, values = valid[0].transpose(1, 2), valid[1].transpose(1, 2)
        pos_k = torch.arange(keys.shape[2]).view(1, -1)
        pos_q = self.offset.view(-1, 1) + torch.arange(q.shape[2]).view(1, -1)
        mask = (pos_q[:, :, None] >= pos_k[:, None, :])[:, None]
        out = torch.nn.functional.scaled_dot_product_attention(q, keys, values, mask)
        self.offset += k.shape[1]
        return out, valid.sum(2), torch.tensor(keys.shape[2])


def test_a_cache_prefix_up_to_an_offset_from_the_state_is_a_dim_bound_in_each_call(backend):
    torch.manual_seed(0)
    model = PrefixCache()
    eager = copy.deepcopy(model)
    t = Dim("t", min=1, max=3)
    program = tandem.export(
        model, {"forward": tandem.Method(model, (torch.randn(1, 2, 2, 4), torch.randn(1, 2, 2, 4)), dynamic_shapes=({2: t}, {1: t}))}
    )
    # the offset is a dim bound from the state: off + t <= CAP at the largest t
    assert [(n, lo, hi) for n, lo, hi, _ in program.method("forward").dims] == [("t", 1, 3), ("offset", 0, CAP - 3)]
    m = tandem.load(program.to_bytes())
    for n in (2, 1, 2, 3):  # offsets 0, 2, 3, 5 (the largest, with t = 3 fills all 8 rows)
        q, k = torch.randn(1, 2, n, 4), torch.randn(1, n, 2, 4)
        got, want = m.forward(q, k), eager(q, k)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
        torch.testing.assert_close(m.read_state("offset"), eager.offset)
        torch.testing.assert_close(m.read_state("cache"), eager.cache, equal_nan=True)
    # at offset 8 (above CAP - 3): the call fails before any op, the state unchanged
    before = (m.read_state("offset").clone(), m.read_state("cache").clone())
    with pytest.raises(tandem.TandemError) as e:
        m.forward(torch.randn(1, 2, 1, 4), torch.randn(1, 1, 2, 4))
    assert e.value.code == "TDM_ERR_INDEX" and "offset" in str(e.value)
    torch.testing.assert_close(m.read_state("offset"), before[0])
    torch.testing.assert_close(m.read_state("cache"), before[1], equal_nan=True)


def test_a_dim_bound_from_a_state_that_is_not_an_int64_state_is_malformed(backend):
    import struct

    model = PrefixCache()
    t = Dim("t", min=1, max=3)
    program = tandem.export(
        model, {"forward": tandem.Method(model, (torch.randn(1, 2, 2, 4), torch.randn(1, 2, 2, 4)), dynamic_shapes=({2: t}, {1: t}))}
    )
    names = [s.name for s in program.states]
    data = program.to_bytes()
    record = struct.pack("<Iqq", names.index("offset") + 1, 0, CAP - 3)  # source, min, max of the offset's dim
    assert data.count(record) == 1
    tandem.load(data)
    for source in (names.index("cache") + 1, len(names) + 1):  # a float32 state; no such state
        bad = data.replace(record, struct.pack("<Iqq", source, 0, CAP - 3))
        with pytest.raises(tandem.TandemError) as e:
            tandem.load(bad)
        assert e.value.code == "TDM_ERR_MALFORMED" and "not an int64 state" in str(e.value), str(e.value)


def test_a_prefix_offset_held_in_a_dict_of_state_advanced_by_another_method(backend):
    """pocket-tts' layout: the offset and cache in a dict of dicts given to the step function, the
    offset advanced by a separate function of the module (increment_steps); the method that reads
    the offset is traced twice (the ints it reads moved), and both traces see the same state
    (it failed so: torch.export put a copy of the dict back after the first trace)."""
    import functools

    class Step(nn.Module):
        def forward(self, k, state):
            st = state["attn"]
            off = int(st["offset"].view(-1)[0].item())
            st["cache"][0, :, off : off + k.shape[1]] = k
            valid = st["cache"][:, :, : off + k.shape[1]]
            return valid[0].sum(1) * 2, torch.arange(valid.shape[2]).sum()

    def advance(module, state, increment):
        state["attn"]["offset"] += increment

    def init():
        return {"attn": {"offset": torch.zeros(1, dtype=torch.long), "cache": torch.zeros(2, 1, 4, 3)}}

    step, state, eager_state = Step(), init(), init()
    program = tandem.export(
        None,
        {
            "step": tandem.Method(step.forward, (torch.zeros(1, 1, 3), state)),
            "advance": tandem.Method(functools.partial(advance, step, increment=1), (state,)),
        },
    )
    assert [(n, lo, hi) for n, lo, hi, _ in program.method("step").dims] == [("state.attn.offset", 0, 3)]
    m = tandem.load(program.to_bytes())
    for i in range(4):
        k = torch.randn(1, 1, 3)
        for g, w in zip(m.step(k), step(k, eager_state)):
            torch.testing.assert_close(g, w, msg=lambda s: f"step {i}: {s}")
        m.advance()
        advance(step, eager_state, 1)
    with pytest.raises(tandem.TandemError) as e:
        m.step(torch.randn(1, 1, 3))
    assert e.value.code == "TDM_ERR_INDEX"


class _Reader(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body
        self.register_buffer("off", torch.zeros(1, dtype=torch.long))
        self.register_buffer("cache", torch.zeros(1, CAP, 4))

    def forward(self, k):
        return self.body(self, k)


def _variable_length(s, k):
    off = int(s.off[0].item())
    s.cache[:, off : off + 2] = k
    return s.cache[:, : off + 2]


def _int_then_mod(s, k):
    off = int(s.off[0].item()) % CAP
    s.cache[:, off : off + 2] = k
    return k * 1


def _as_fill_value(s, k):
    off = s.off[0].item()
    return torch.full((2,), off)


def _branch(s, k):
    off = s.off[0].item()
    if off > 3:
        return k * 2
    return k


def _python_loop(s, k):
    off = int(s.off[0].item())
    return sum(k for _ in range(off % 3))  # Python reads the int itself


READ_REFUSED = {
    "variable_length": (
        _variable_length,
        r"slices a length read from a tensor that no method changes.*"
        r"at test_runtime_values.py:\d+: return s.cache\[:, :\s*off \+ 2\]",
    ),
    "int_then_mod": (_int_then_mod, r"uses it in Python itself.*at test_runtime_values.py:\d+: off = int\(s.off\[0\].item\(\)\) % CAP"),
    "as_fill_value": (
        _as_fill_value,
        r"'full' takes a value read from a tensor.*at test_runtime_values.py:\d+: "
        r"return torch.full\(\(2,\), off\)",
    ),
    "branch": (_branch, r"decides something in Python.*at test_runtime_values.py:\d+: if off > 3:"),
    "python_loop": (_python_loop, r"uses it in Python itself.*at test_runtime_values.py:\d+: off = int"),
}


@pytest.mark.parametrize("case", sorted(READ_REFUSED))
def test_an_int_read_from_a_tensor_used_otherwise_is_an_export_error_naming_the_line(case):
    body, message = READ_REFUSED[case]
    model = _Reader(body)
    with pytest.raises(tandem.ExportError, match=message):
        tandem.export(model, {"forward": (torch.randn(1, 2, 4),)})


# ---- 3. a Python branch on a tensor value: specialized, with a guard ---------------------------


def test_a_branch_on_a_tensor_value_is_specialized_and_guarded(backend):
    import cases

    module, spec, eager, calls = cases.branch_guard()
    program = tandem.export(module, spec)
    ops = [op.name for op in program.method("forward").ops]
    assert ops.index("guard") < min(
        i for i, op in enumerate(program.method("forward").ops) if any(v.storage.kind == 2 for v in op.outs)
    )  # before the first state write
    m = tandem.load(program.to_bytes())
    twin = copy.deepcopy(eager["forward"].__self__)
    for name, inputs in calls:  # the exported way: equal to eager
        torch.testing.assert_close(m.call(name, *inputs), eager[name](*inputs))
        twin(*inputs)
    before = (m.read_state("pad").clone(), m.read_state("acc").clone())
    x = torch.randn(3)
    with pytest.raises(tandem.TandemError) as e:  # pad > 0: eager would take the other branch
        m.forward(x, torch.tensor([0, 3]))
    assert e.value.code == "TDM_ERR_GUARD" and "other way" in str(e.value)
    assert f"line {cases.Gated.forward.__code__.co_firstlineno + 2}" in str(e.value)
    torch.testing.assert_close(m.read_state("pad"), before[0])
    torch.testing.assert_close(m.read_state("acc"), before[1])
    torch.testing.assert_close(m.forward(x, torch.tensor([0, 0])), twin(x, torch.tensor([0, 0])))  # still usable


class _Twice(nn.Module):
    """Two branches, the second on a value computed after a state update."""

    def __init__(self):
        super().__init__()
        self.register_buffer("n", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.n += 1
        y = x * 2 if self.n > 1 else x * 3  # eager at export: n becomes 1, so x * 3
        if (y.sum() > 100).item():
            return y - 100
        return y


def test_each_branch_gets_a_guard_on_the_value_it_saw_at_export(backend):
    model = _Twice()
    m = tandem.load(tandem.export(model, {"forward": (torch.ones(2),)}).to_bytes())
    torch.testing.assert_close(m.forward(torch.ones(2)), torch.full((2,), 3.0))  # n: 0 -> 1, x * 3
    with pytest.raises(tandem.TandemError) as e:  # n: 1 -> 2 would take x * 2
        m.forward(torch.ones(2))
    assert e.value.code == "TDM_ERR_GUARD"
    assert int(m.read_state("n")) == 1


class _EmptyInner(nn.Module):
    """A product over an empty inner dim (K = 0) is all zeros, run after another method has left
    values in the scratch the result reuses."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(0, 6)
        with torch.no_grad():
            self.lin.bias.copy_(torch.arange(6.0))
        self.big = nn.Linear(16, 6)

    def full(self, x):
        return self.big(x) * 3 + 1

    def empty(self, x, a, b):
        return self.lin(x), a @ b


def test_a_product_over_an_empty_inner_dim_is_zeros_not_stale_scratch(backend):
    """matmul_packed computed no rows when K = 0 and matmul left y unwritten: the outputs were
    whatever an earlier call had left there (silently wrong, natively and in wasm)."""
    torch.manual_seed(0)
    m = _EmptyInner()
    x, e, a, b = torch.randn(4, 16), torch.randn(4, 0), torch.randn(2, 4, 0), torch.randn(2, 0, 5)
    program = tandem.export(m, {"full": tandem.Method(m.full, (x,)), "empty": tandem.Method(m.empty, (e, a, b))})
    model = tandem.load(program.to_bytes())
    for _ in range(2):
        model.full(x)
        y1, y2 = model.empty(e, a, b)
        torch.testing.assert_close(y1, m.lin(e), rtol=0, atol=0)
        torch.testing.assert_close(y2, a @ b, rtol=0, atol=0)


class BiasFromCacheLength(nn.Module):
    """MPT's ALiBi slice: a table [heads, 1, keys] sliced at rows max(0, 1 - (n + past)), with past a
    length in the state: the int 0 in eager, a tensor torch.export's max makes (torch.clamp)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("length", torch.zeros((), dtype=torch.long))
        self.register_buffer("bias", torch.arange(8.0).reshape(2, 1, 4))

    def forward(self, x):  # x [1, 2, n, 4]
        self.length.add_(x.shape[2])
        start = max(0, self.bias.size(1) - (x.shape[2] + self.length))
        last = min(self.length, 3)  # a tensor while the length is below 3
        return x + self.bias[:, start:, :] * last


def test_max_and_min_of_a_state_value_and_an_int_are_python_s_as_eager_takes_them(backend):
    """builtins.max / min of a one-element integer tensor and an int compare them as Python does (a branch
    taken as it went eagerly, checked by a guard in each call), so max(0, 1 - (n + past)) is the int 0 and
    the slice it starts keeps its static size (torch.export's own max made a clamped tensor, a slice sized
    at run time that could not broadcast); a call in which a branch would go the other way fails with
    TDM_ERR_GUARD."""
    from tandem.format import file_ops

    model = BiasFromCacheLength()
    eager = copy.deepcopy(model)
    n = Dim("n", min=1, max=4)
    program = tandem.export(model, {"forward": tandem.Method(model.forward, (torch.zeros(1, 2, 3, 4),), dynamic_shapes=({2: n},))})
    assert "guard" in [op.name for op in file_ops(program.method("forward"))]
    m = tandem.load(program.to_bytes())
    g = torch.Generator().manual_seed(0)
    for k in (1, 1):  # past 0 and 1: min(length, 3) is the length
        x = torch.randn(1, 2, k, 4, generator=g)
        torch.testing.assert_close(m.forward(x), eager(x))
    with pytest.raises(tandem.TandemError) as e:  # past 2 + 2 > 3: min takes the int, the other way
        m.forward(torch.zeros(1, 2, 2, 4))
    assert e.value.code == "TDM_ERR_GUARD"
    torch.testing.assert_close(m.read_state("length"), torch.tensor(2))


class ClampedCount(nn.Module):
    """min / max of a state value and an int used only in arithmetic: a value at run time, past the calls
    where the comparison turns the other way."""

    def __init__(self):
        super().__init__()
        self.register_buffer("length", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.length.add_(1)
        return x * min(self.length, 3) + max(self.length, 2)


def test_max_and_min_of_a_state_value_and_an_int_in_arithmetic_stay_values_at_run_time(backend):
    """Where the trace needs no static size from them, max / min of a state value and an int are
    torch.export's own (a clamp computed in each call): six calls cross both comparisons and equal
    eager, with no guard in the program."""
    from tandem.format import file_ops

    model = ClampedCount()
    eager = copy.deepcopy(model)
    program = tandem.export(model, {"forward": tandem.Method(model.forward, (torch.zeros(4),))})
    assert "guard" not in [op.name for op in file_ops(program.method("forward"))]
    m = tandem.load(program.to_bytes())
    g = torch.Generator().manual_seed(1)
    for _ in range(6):
        x = torch.randn(4, generator=g)
        torch.testing.assert_close(m.forward(x), eager(x))
