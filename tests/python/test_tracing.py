"""The tracing contract (python/tandem/tracing.py): what a method sees while tandem traces it, the
module after an export (returned or raised) is the module before, and state kept in any container
(dicts, lists, tuples, dataclasses, plain objects, a dict given to the method). Each exported
program is checked against PyTorch eager over call sequences, natively and on the wasm backend."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

import tandem


def _outs(out):
    if out is None:
        return ()
    if isinstance(out, torch.Tensor):
        return (out.detach().clone(),)
    return tuple(o.detach().clone() for o in out)


def check_against_eager(program, eager: dict, calls: list):
    """Runs the call sequence on the loaded program and on eager (name -> callable), comparing
    every output."""
    model = tandem.load(program.to_bytes())
    for i, (name, args) in enumerate(calls):
        with torch.no_grad():
            want = _outs(eager[name](*args))
        got = _outs(model.call(name, *args))
        assert len(got) == len(want), f"call {i} {name}"
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, msg=lambda m: f"call {i} {name}: {m}")
    return model


# ---------------------------------------------------------------------------------------------
# A snapshot of everything a module tree holds, to compare before and after an export.


def snapshot(*roots) -> dict:
    """path -> description of every value reachable from the roots: modules' attributes,
    parameters, buffers, submodules, and the lists, dicts, tuples and plain objects under them.
    Objects are described by identity and type, tensors also by dtype, shape, values and whether
    they are FakeTensors."""
    from torch._subclasses.fake_tensor import FakeTensor

    out, seen = {}, set()

    def visit(path, v, depth=0):
        if isinstance(v, torch.Tensor):
            fake = isinstance(v, FakeTensor)
            out[path] = (
                "tensor",
                id(v),
                type(v).__name__,
                v.dtype,
                tuple(v.shape),
                fake,
                None if fake else v.detach().clone(),
                v.requires_grad,
            )
            return
        out[path] = (type(v).__name__, id(v)) if not isinstance(v, (int, float, str, bool, type(None))) else ("value", v)
        if depth > 12 or id(v) in seen:
            return
        if isinstance(v, nn.Module):
            seen.add(id(v))
            for k, x in vars(v).items():
                if k in ("_parameters", "_buffers", "_modules"):
                    for kk, xx in x.items():
                        visit(f"{path}.{k}[{kk}]", xx, depth + 1)
                elif k == "_non_persistent_buffers_set":
                    out[f"{path}.{k}"] = ("set", frozenset(x))
                elif not k.startswith("_forward") and not k.startswith("_backward") and not k.endswith("hooks"):
                    visit(f"{path}.{k}", x, depth + 1)
        elif isinstance(v, (list, tuple)):
            seen.add(id(v))
            for i, x in enumerate(v):
                visit(f"{path}[{i}]", x, depth + 1)
        elif isinstance(v, dict):
            seen.add(id(v))
            for k, x in v.items():
                visit(f"{path}[{k!r}]", x, depth + 1)
        elif (
            hasattr(v, "__dict__")
            and not callable(v)
            and type(v).__module__ not in ("builtins",)
            and not type(v).__module__.startswith("torch")
        ):
            seen.add(id(v))
            for k, x in vars(v).items():
                visit(f"{path}.{k}", x, depth + 1)

    for i, r in enumerate(roots):
        visit(f"root{i}", r)
    return out


def assert_same(before: dict, after: dict):
    assert set(before) == set(after), f"added: {sorted(set(after) - set(before))}, removed: {sorted(set(before) - set(after))}"
    for k, b in before.items():
        a = after[k]
        if b[0] == "tensor":
            assert not a[5], f"{k} is a FakeTensor after the export"
            assert a[:5] == b[:5] and a[7] == b[7], f"{k}: {a[:5]} != {b[:5]}"
            assert torch.equal(a[6], b[6]) or (
                a[6].dtype.is_floating_point and torch.allclose(a[6], b[6], equal_nan=True) and torch.isnan(a[6]).equal(torch.isnan(b[6]))
            ), f"{k}: values changed"
        else:
            assert a == b, f"{k}: {a} != {b}"


# ---------------------------------------------------------------------------------------------
# 1. Parameters stay parameters while tracing.


class Generic(nn.Module):
    """forward reads next(self.parameters()) (pocket-tts' device/dtype idiom) and records what
    named_parameters()/named_buffers() answer; reset zeroes every buffer."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 2, 3)
        self.register_buffer("acc", torch.zeros(1, 2, 4))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        self.seen = []

    def forward(self, x):
        p = next(self.parameters())
        self.seen.append(
            (
                [n for n, _ in self.named_parameters()],
                [n for n, _ in self.named_buffers()],
                len(list(self.parameters())),
                len(list(self.buffers())),
            )
        )
        y = self.conv(x.to(p.dtype))
        self.acc.add_(y)
        self.count.add_(1)
        return self.acc * 2

    def reset(self):
        for b in self.buffers():
            b.zero_()


def test_parameters_and_buffers_answer_as_in_eager_while_tracing(backend):
    torch.manual_seed(0)
    m = Generic()
    eager = Generic()
    eager.load_state_dict(m.state_dict())
    x = [torch.randn(1, 2, 6) for _ in range(3)]
    m.forward(x[0])  # eager
    want = m.seen[-1]
    m.reset()
    program = tandem.export(m, {"forward": (x[0],), "reset": ()})
    assert m.seen[-1] == want == (["conv.weight", "conv.bias"], ["acc", "count"], 2, 2)
    assert sorted(s.name for s in program.states) == ["acc", "count"]
    check_against_eager(
        program,
        {"forward": eager, "reset": eager.reset},
        [("forward", (x[0],)), ("forward", (x[1],)), ("reset", ()), ("forward", (x[2],)), ("forward", (x[1],))],
    )


def test_a_reset_that_zeroes_the_parameters_is_an_error_naming_one():
    class ZeroAll(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x)

        def reset(self):
            for p in self.parameters():
                p.zero_()

    m = ZeroAll()
    before = snapshot(m)
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(m, {"forward": (torch.ones(1, 2),), "reset": ()})
    msg = str(e.value)
    assert "method 'reset' mutates parameter 'lin." in msg and "register_buffer" in msg
    assert "test_tracing.py" in msg and "p.zero_()" in msg  # the user's source line
    assert_same(before, snapshot(m))


# ---------------------------------------------------------------------------------------------
# 2. The module after export is the module before, whether export returns or raises.


class Codebook(nn.Module):
    """moshi's EuclideanCodebook pattern: `_embedding` is registered as None, and the first read of
    `embedding` registers a tensor derived from two other buffers."""

    def __init__(self, n=8, d=4):
        super().__init__()
        self.register_buffer("cluster_usage", torch.rand(n) + 0.5)
        self.register_buffer("embedding_sum", torch.randn(n, d))
        self.register_buffer("_embedding", None, persistent=False)
        self._cached_initialized = False

    @property
    def embedding(self):
        if self._embedding is None:
            self.register_buffer("_embedding", self.embedding_sum / self.cluster_usage[:, None], persistent=False)
        return self._embedding


class Quantizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.codebook = Codebook()
        self.register_buffer("frames", torch.zeros((), dtype=torch.long))

    def encode(self, x):  # [n, d] -> nearest code [n]
        d = ((x[:, None, :] - self.codebook.embedding[None]) ** 2).sum(-1)
        self.frames.add_(1)
        return d.argmin(-1)

    def decode(self, codes):
        return self.codebook.embedding[codes]

    def reset(self):
        self.frames.zero_()


def test_a_buffer_registered_while_traced_is_a_constant_and_is_removed_afterwards(backend):
    torch.manual_seed(0)
    q = Quantizer()
    before = snapshot(q)
    spec = {
        "encode": tandem.Method(q.encode, (torch.randn(3, 4),)),
        "decode": tandem.Method(q.decode, (torch.zeros(3, dtype=torch.long),)),
        "reset": tandem.Method(q.reset, ()),
    }
    program = tandem.export(None, spec)
    assert_same(before, snapshot(q))
    assert q.codebook._embedding is None
    assert [s.name for s in program.states] == ["frames"]
    program2 = tandem.export(None, spec)  # a second export of the same module
    assert program2.to_bytes() == program.to_bytes()
    assert_same(before, snapshot(q))
    x = [torch.randn(3, 4) for _ in range(2)]
    model = check_against_eager(
        program,
        {"encode": q.encode, "decode": q.decode, "reset": q.reset},
        [("encode", (x[0],)), ("decode", (torch.tensor([1, 7, 0]),)), ("encode", (x[1],))],
    )
    assert int(model.read_state("frames")) == 2 == int(q.frames)
    assert type(q.codebook._embedding) is torch.Tensor  # eager registered it, a real tensor


class LazyState(nn.Module):
    """Creates its accumulator on first use and then adds to it: state that does not exist before
    the export."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        if not hasattr(self, "acc"):
            self.register_buffer("acc", torch.zeros(3))
        self.acc.add_(self.lin(x))
        return self.acc * 1


def test_state_created_while_traced_is_an_error_and_leaves_the_module_as_it_was():
    m = LazyState()
    before = snapshot(m)
    for _ in range(2):  # a second attempt fails the same way, not with torch's "data pointer" error
        with pytest.raises(tandem.ExportError) as e:
            tandem.export(m, {"forward": (torch.ones(3),)})
        msg = str(e.value)
        assert "method 'forward' creates 'acc' while it is traced" in msg and "changes it in place" in msg
        assert "test_tracing.py" in msg and "register_buffer" in msg
        assert_same(before, snapshot(m))
    m(torch.ones(3))  # eager creates it; now the export works and goes on from its value
    assert type(m.acc) is torch.Tensor
    program = tandem.export(m, {"forward": (torch.ones(3),)})
    eager = LazyState()
    eager.register_buffer("acc", m.acc.clone())
    eager.load_state_dict(m.state_dict())
    check_against_eager(program, {"forward": eager}, [("forward", (torch.randn(3),)) for _ in range(3)])


def test_a_tensor_the_first_call_caches_from_its_inputs_is_state(backend):
    class FirstFrame(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = None

        def forward(self, x):
            if self.first is None:
                self.first = x * 2  # eager keeps the first call's frame
            return x - self.first

    m = FirstFrame()
    program = tandem.export(m, {"forward": (torch.ones(3),)})
    assert m.first is None
    check_against_eager(program, {"forward": FirstFrame()}, [("forward", (torch.randn(3),)) for _ in range(3)])


def test_a_failed_export_leaves_the_module_as_it_was_and_a_second_export_works():
    class Unsupported(Quantizer):
        def spectrum(self, x):
            return torch.fft.rfft(x + self.codebook.embedding[0]).abs()

    torch.manual_seed(0)
    q = Unsupported()
    before = snapshot(q)
    bad = {"encode": tandem.Method(q.encode, (torch.randn(3, 4),)), "spectrum": tandem.Method(q.spectrum, (torch.randn(4),))}
    with pytest.raises(tandem.ExportError, match="method 'spectrum'"):
        tandem.export(None, bad)
    assert_same(before, snapshot(q))
    with pytest.raises(tandem.ExportError, match="method 'spectrum'"):
        tandem.export(None, bad)
    assert_same(before, snapshot(q))
    program = tandem.export(None, {"encode": tandem.Method(q.encode, (torch.randn(3, 4),))})
    assert_same(before, snapshot(q))
    x = torch.randn(3, 4)
    check_against_eager(program, {"encode": q.encode}, [("encode", (x,))])


def test_attributes_assigned_while_traced_are_put_back():
    class Memo(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("v", torch.ones(2))
            self.cache = {}
            self.calls = []
            self.mode = "a"

        def forward(self, x):
            self.cache["k"] = "seen"
            self.calls.append(1)  # a log nothing reads: the program is the same however long it grows
            self.mode = "b"
            self.extra = 3
            self.v.mul_(x)
            return self.v + 0

    m = Memo()
    before = snapshot(m)
    program = tandem.export(m, {"forward": (torch.full((2,), 2.0),)})
    assert_same(before, snapshot(m))
    assert m.cache == {} and m.calls == [] and m.mode == "a" and not hasattr(m, "extra")
    eager = Memo()
    check_against_eager(program, {"forward": eager}, [("forward", (torch.full((2,), 3.0),))] * 3)


# ---------------------------------------------------------------------------------------------
# 3. State in any container.


@dataclasses.dataclass
class StreamState:
    previous: torch.Tensor
    steps: torch.Tensor
    history: list


class Holder:
    def __init__(self):
        self.table = {"scale": torch.ones(4)}


class Containers(nn.Module):
    """State in a dict of dicts, a list, a tuple, a dataclass and a plain object; one tensor held
    in two places is one state; a dict entry replaced by a new tensor is a write."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        shared = torch.zeros(4)
        self.state = {"enc": {"h": torch.zeros(1, 4), "n": torch.zeros((), dtype=torch.long)}, "shared": shared}
        self.ring = [torch.zeros(4), torch.zeros(4)]
        self.pair = (torch.zeros(2, 4), shared)
        self.stream = StreamState(previous=torch.zeros(1, 4), steps=torch.zeros(1, dtype=torch.int32), history=[torch.zeros(3, 4)])
        self.holder = Holder()

    def step(self, x):
        enc = self.state["enc"]
        h = torch.tanh(self.lin(x) + enc["h"] + self.stream.previous)
        enc["h"].copy_(h)
        enc["n"] = enc["n"] + 1  # a new tensor stored in place of the state: a write
        self.ring[0], self.ring[1] = self.ring[1].clone(), h[0] * 2
        self.pair[0][1:] = self.pair[0][:-1].clone()  # a tuple's element, written in place
        self.pair[0][0] = h[0]
        self.state["shared"].add_(1)  # the same tensor as self.pair[1]
        self.stream.previous[:] = x
        self.stream.steps += 1
        hist = self.stream.history[0]
        hist.copy_(torch.cat([hist[1:], h], 0))
        self.holder.table["scale"].mul_(1.5)
        return h * self.holder.table["scale"] + self.pair[1], enc["n"]

    def reset(self):
        self.state["enc"]["h"].zero_()
        self.state["enc"]["n"].zero_()
        for t in self.ring + [self.pair[0], self.pair[1], self.stream.previous, self.stream.history[0]]:
            t.zero_()
        self.stream.steps.zero_()
        self.holder.table["scale"].fill_(1.0)

    def peek(self):
        return self.ring[0] + self.ring[1], self.pair[0].sum(0), self.stream.history[0], self.stream.steps


def _containers():
    torch.manual_seed(0)
    m, eager = Containers(), Containers()
    eager.load_state_dict(m.state_dict())
    return m, eager


def test_state_in_dicts_lists_tuples_dataclasses_and_objects_matches_eager(backend):
    m, eager = _containers()
    before = snapshot(m)
    spec = {"step": tandem.Method(m.step, (torch.zeros(1, 4),)), "reset": tandem.Method(m.reset, ()), "peek": tandem.Method(m.peek, ())}
    program = tandem.export(None, spec)
    assert_same(before, snapshot(m))
    names = sorted(s.name for s in program.states)
    assert names == sorted(
        [
            "state.enc.h",
            "state.enc.n",
            "state.shared",
            "ring.0",
            "ring.1",
            "pair.0",
            "stream.previous",
            "stream.steps",
            "stream.history.0",
            "holder.table.scale",
        ]
    ), names
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(1, 4, generator=g) for _ in range(4)]
    calls = [("step", (xs[0],)), ("step", (xs[1],)), ("peek", ()), ("reset", ()), ("step", (xs[2],)), ("step", (xs[3],)), ("peek", ())]
    model = check_against_eager(program, {"step": eager.step, "reset": eager.reset, "peek": eager.peek}, calls)
    assert int(model.read_state("state.enc.n")) == 2 and int(eager.state["enc"]["n"]) == 2


def test_a_dict_of_state_given_to_the_method_is_state():
    """pocket-tts' step functions take their model state (a dict of dicts of tensors) as an
    argument: given among the example inputs, it is state, and the method takes only the rest."""

    class Stateful(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def init_state(self):
            return {"layer": {"offset": torch.zeros(1, dtype=torch.long), "cache": torch.zeros(1, 6, 4)}}

        def step(self, model_state, x):
            st = model_state["layer"]
            cache = st["cache"]
            cache.copy_(torch.cat([cache[:, 1:], self.proj(x)[:, None]], 1))
            st["offset"] = st["offset"] + 1
            return cache.sum(1), st["offset"]

    torch.manual_seed(0)
    m = Stateful()
    state = m.init_state()
    before = snapshot(m, state)
    program = tandem.export(None, {"step": tandem.Method(m.step, (state, torch.zeros(1, 4)))})
    assert_same(before, snapshot(m, state))
    assert sorted(s.name for s in program.states) == ["model_state.layer.cache", "model_state.layer.offset"]
    model = tandem.load(program.to_bytes())
    assert len(model.methods["step"][1]) == 1  # one input: x
    eager_state = m.init_state()
    for i in range(8):
        x = torch.randn(1, 4)
        with torch.no_grad():
            want = m.step(eager_state, x)
        got = model.step(x)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, msg=lambda s: f"step {i}: {s}")


def test_a_changed_python_int_is_state_the_program_computes_with(backend):
    """An int in a container, in an object, or a module's own attribute, that a method changes and
    computes with (a slice offset, arithmetic, another method's read) is int64 state: each call
    computes with its value, as eager does; the module is left as it was."""

    class Offsets(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(8))
            self.info = {"offset": 0}

        def forward(self, x):
            at = self.info["offset"]
            self.cache[at : at + 2] = x
            self.info["offset"] = at + 2
            return self.cache + 0

    class ModuleOffset(Offsets):
        def __init__(self):
            super().__init__()
            self.at = 0

        def forward(self, x):
            self.at += 1
            return self.cache + self.at

    class Steps(nn.Module):
        def __init__(self):
            super().__init__()
            self.state = StreamState(previous=torch.zeros(2), steps=torch.zeros(1), history=[])
            self.state.count = 0

        def forward(self, x):
            self.state.count += 1
            return x * 2

        def peek(self, x):
            return x + self.state.count  # another method computes with it

    m = Offsets()
    program = tandem.export(m, {"forward": (torch.ones(2),)})
    assert m.info == {"offset": 0} and not m.cache.any()
    calls = [("forward", (torch.full((2,), float(i)),)) for i in range(1, 5)]
    check_against_eager(program, {"forward": Offsets()}, calls)
    model = tandem.load(program.to_bytes())
    with pytest.raises(tandem.TandemError):  # a fifth write would start past the cache's end
        for name, args in calls + calls[:1]:
            model.call(name, *args)

    m = Steps()
    program = tandem.export(m, {"forward": (torch.ones(2),), "peek": (torch.ones(2),)})
    assert m.state.count == 0
    eager = Steps()
    check_against_eager(
        program, {"forward": eager.forward, "peek": eager.peek}, [("forward", (torch.ones(2),)), ("peek", (torch.ones(2),))] * 3
    )
    m = ModuleOffset()
    program = tandem.export(m, {"forward": (torch.ones(2),)})
    assert m.at == 0
    check_against_eager(program, {"forward": ModuleOffset()}, [("forward", (torch.ones(2),))] * 4)


def test_a_state_grown_without_a_bound_is_refused_naming_state_bounds():
    """A tensor in a dict grown with torch.cat: state that grows (tests/python/test_growing_state.py);
    with no bound in the code, the refusal names state_bounds, and with it the export matches eager."""

    class Grows(nn.Module):
        def __init__(self):
            super().__init__()
            self.state = {"h": torch.zeros(2)}

        def forward(self, x):
            self.state["h"] = torch.cat([self.state["h"], x])
            return self.state["h"].sum(0, keepdim=True)

    m = Grows()
    with pytest.raises(tandem.ExportError, match=r"grows state 'state.h' along dim 0 \(from 2 to 3 .*state_bounds=\{'state.h': N\}"):
        tandem.export(m, {"forward": (torch.ones(1),)})
    assert m.state["h"].shape == (2,)
    model = tandem.load(tandem.export(m, {"forward": (torch.ones(1),)}, state_bounds={"state.h": 5}).to_bytes())
    for i in range(3):
        torch.testing.assert_close(model.forward(torch.tensor([float(i)])), m(torch.tensor([float(i)])))
    torch.testing.assert_close(model.read_state("state.h"), m.state["h"])


def test_moshi_streaming_module_state_matches_eager(backend):
    """moshi's own StreamingModule and State (a dataclass with an exec_mask), exported inside
    `with module.streaming(1):` as moshi's streaming API is used."""
    streaming = pytest.importorskip("moshi.modules.streaming")

    @dataclasses.dataclass
    class ConvState(streaming.State):
        previous: torch.Tensor
        offset: torch.Tensor
        offset_cpu: int = 0  # moshi's transformer layers keep such a Python int beside their state

        def reset(self, reset_mask):
            super().reset(reset_mask)
            self.offset_cpu = 0
            self.previous[:] = torch.where(reset_mask.view(-1, 1, 1), torch.zeros_like(self.previous), self.previous)
            self.offset[:] = torch.where(reset_mask, torch.zeros_like(self.offset), self.offset)

    class CausalConv(streaming.StreamingModule[ConvState]):
        def __init__(self, channels):
            super().__init__()
            self.conv = nn.Conv1d(channels, 3, 3)

        def _init_streaming_state(self, batch_size):
            c = self.conv.in_channels
            return ConvState(
                batch_size, torch.device("cpu"), previous=torch.zeros(batch_size, c, 2), offset=torch.zeros(batch_size, dtype=torch.long)
            )

        def forward(self, x):
            state = self._streaming_state
            x = torch.cat([state.previous, x], dim=-1)
            y = self.conv(x)
            state.previous[:] = torch.where(state.exec_mask.view(-1, 1, 1), x[..., -2:], state.previous)
            state.offset[:] = state.offset + y.shape[-1]
            state.offset_cpu += y.shape[-1]  # counted up, set by reset, never computed with: int64 state
            return y, state.offset

    class Model(streaming.StreamingModule):
        def __init__(self):
            super().__init__()
            self.a, self.b = CausalConv(2), CausalConv(3)

        def _init_streaming_state(self, batch_size):
            return streaming.State(batch_size, torch.device("cpu"))

        def forward(self, x):
            y, _ = self.a(x)
            return self.b(y)

    torch.manual_seed(0)
    model, eager = Model(), Model()
    eager.load_state_dict(model.state_dict())
    with model.streaming(1), eager.streaming(1):
        before = snapshot(model)
        program = tandem.export(
            None, {"step": tandem.Method(model, (torch.zeros(1, 2, 4),)), "reset": tandem.Method(model.reset_streaming, ())}
        )
        assert_same(before, snapshot(model))
        assert {"a._streaming_state.previous", "b._streaming_state.previous", "a._streaming_state.offset"} <= {
            s.name for s in program.states
        }
        xs = [torch.randn(1, 2, 4) for _ in range(4)]
        m = check_against_eager(
            program,
            {"step": eager, "reset": eager.reset_streaming},
            [("step", (xs[0],)), ("step", (xs[1],)), ("reset", ()), ("step", (xs[2],)), ("step", (xs[3],)), ("step", (xs[0],))],
        )
        for conv in ("a", "b"):  # 4 frames out per step, 3 steps since the reset
            assert int(m.read_state(f"{conv}._streaming_state.offset_cpu")) == 12
            assert getattr(eager, conv)._streaming_state.offset_cpu == 12


# ---------------------------------------------------------------------------------------------
# 4. The recipes take the same arguments for every family; prefill feeds long prompts in pieces.


def _tiny_mamba():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.MambaConfig(
        vocab_size=32, hidden_size=16, state_size=4, num_hidden_layers=1, conv_kernel=3, expand=2, time_step_rank=2
    )
    return transformers.MambaForCausalLM(config).eval()


def _tiny_llama():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return transformers.LlamaForCausalLM(config).eval()


def test_a_mamba_lm_takes_the_arguments_of_every_lm(backend):
    import tandem.transformers as tt

    model = _tiny_mamba()
    program = tt.export_causal_lm(model, max_cache_len=512, max_prompt_len=4, sample_top_k=None)
    m = tandem.load(program.to_bytes())
    md = m.metadata
    assert md["unused_options"] == {"max_cache_len": 512} and md["max_cache_len"] is None
    tokens = torch.randint(0, 32, (1, 11), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = model(tokens, use_cache=False).logits[0]
    torch.testing.assert_close(tt.prefill(m, tokens)[0], want[-1])  # 11 tokens: pieces of 4, 4, 3
    assert int(m.read_state("position")) == 11


def test_recipes_name_an_argument_they_do_not_take():
    import tandem.transformers as tt

    with pytest.raises(tandem.ExportError, match="export_causal_lm: unknown argument max_cache_length"):
        tt.export_causal_lm(_tiny_mamba(), max_cache_len=None, max_prompt_len=4, max_cache_length=9)
    with pytest.raises(tandem.ExportError, match="max_prompt_len must be an int, got '8'"):
        tt.export_causal_lm(_tiny_llama(), max_cache_len=16, max_prompt_len="8")


def test_python_prefill_feeds_a_prompt_longer_than_max_prompt_len_in_pieces(backend):
    import tandem.transformers as tt

    model = _tiny_llama()
    program = tt.export_causal_lm(model, max_cache_len=24, max_prompt_len=4, sample_top_k=None)
    m = tandem.load(program.to_bytes())
    tokens = torch.randint(0, 32, (1, 22), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = model(tokens).logits[0]
    torch.testing.assert_close(tt.prefill(m, tokens[:, :10])[0], want[9], atol=2e-5, rtol=1e-4)  # 4 + 4 + 2
    torch.testing.assert_close(tt.prefill(m, tokens[:, 10:21])[0], want[20], atol=2e-5, rtol=1e-4)
    assert int(m.read_state(m.metadata["position_state"])) == 21
    with pytest.raises(tandem.TandemError) as e:  # 21 + 4 > 24: refused before anything runs
        tt.prefill(m, tokens[:, :4])
    assert e.value.code == "TDM_ERR_INDEX" and int(m.read_state(m.metadata["position_state"])) == 21
    torch.testing.assert_close(m.decode(tokens[:, 21:22])[0], want[21], atol=2e-5, rtol=1e-4)


def test_swapping_two_state_tensors_and_a_plain_tensor_attribute_match_eager(backend):
    class Swap(nn.Module):
        def __init__(self):
            super().__init__()
            self.bufs = [torch.zeros(3), torch.ones(3)]
            self.plain = torch.zeros(3)  # a tensor attribute of a module, neither parameter nor buffer

        def forward(self, x):
            self.bufs[0], self.bufs[1] = self.bufs[1], self.bufs[0]
            self.bufs[0].add_(x)
            self.plain += self.bufs[1]
            return self.bufs[0] * 1, self.plain * 1

    m, eager = Swap(), Swap()
    before = snapshot(m)
    program = tandem.export(m, {"forward": (torch.ones(3),)})
    assert_same(before, snapshot(m))
    assert sorted(s.name for s in program.states) == ["bufs.0", "bufs.1", "plain"]
    check_against_eager(program, {"forward": eager}, [("forward", (torch.randn(3),)) for _ in range(4)])


def test_a_submodule_held_by_two_parents_is_one_state_that_methods_change_through_either(backend):
    """`left.inner is right.inner`: its buffer is one state slot, written through either parent (in
    place, through the parent's forward, reassigned) and read through the other, as in eager."""

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("acc", torch.zeros(3))

        def forward(self, x):
            self.acc.mul_(0.5).add_(x)
            return self.acc * 1.0

    class Parent(nn.Module):
        def __init__(self, inner, scale):
            super().__init__()
            self.inner, self.scale = inner, scale

        def forward(self, x):
            return self.inner(x * self.scale)

    class Top(nn.Module):
        def __init__(self):
            super().__init__()
            inner = Inner()
            self.left, self.right = Parent(inner, 1.0), Parent(inner, -2.0)

        def forward(self, x):
            return self.right(x) + self.left.inner.acc

        def swap(self, x):
            self.left.inner.acc = torch.tanh(self.right.inner.acc + x)  # the registered buffer reassigned
            return self.left(x)

    m, eager = Top(), Top()
    before = snapshot(m)
    program = tandem.export(m, {"forward": (torch.ones(3),), "swap": (torch.ones(3),)})
    assert_same(before, snapshot(m))
    assert [s.name for s in program.states] == ["left.inner.acc"]
    calls = [(("forward", "swap")[i % 3 == 2], (torch.randn(3),)) for i in range(7)]
    model = check_against_eager(program, {"forward": eager.forward, "swap": eager.swap}, calls)
    torch.testing.assert_close(model.read_state("left.inner.acc"), eager.right.inner.acc)
