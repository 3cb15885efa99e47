"""Random stateful programs for differential testing.

A program is a *plan*: 1-4 state tensors (float32, int64, bool; rank 1-3) and 1-3 methods, each a
list of steps over a pool of values. `Planned(plan)` is an ordinary nn.Module that interprets the
plan in eager PyTorch; tandem exports it like any user module (torch.export traces the concrete ops
each step makes), so eager and the runtime compute the same program by construction and any
difference is the runtime's or the exporter's.

Steps name the values they read by index modulo the pool's size, so deleting any step leaves a
valid plan: that is what `shrink` relies on to reduce a failing plan to a minimal one.

    python tests/programs.py --count 2000          # npm run fuzz:programs
    python tests/programs.py --seed 123 --show     # one plan, printed
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
import re
import sys
import time
import types
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "tests"))

import tandem  # noqa: E402

# ---- the plan --------------------------------------------------------------------------------
# A plan is plain data (dicts, lists, ints, strings), JSON-serialisable, so a failure prints as a
# reproducible value.
#   {"d": D, "states": [{"dtype": "f32"|"i64"|"bool", "shape": [...]}, ...],
#    "params": [[D, D], ...],
#    "methods": [{"name": str, "inputs": [[n, D], ...], "dynamic": bool, "steps": [...], "outputs": [k, ...]}]}
# Every float value in a method's pool ends in dim D, so any two combine after `_to_row`.

UNARY = ["tanh", "sigmoid", "relu", "neg", "abs", "sin", "affine", "clamp", "square_tanh"]
BINARY = ["add", "sub", "mul", "maximum", "minimum", "where"]
FLOAT_STEPS = [
    "unary",
    "binary",
    "linear",
    "reduce",
    "softmax",
    "cat",
    "slice_cat",
    "transpose",
    "select",
    "read_state",
    "read_counter",
    "read_flag",
    "cumsum",
    "norm",
]
UPDATES = ["copy", "add_", "mix", "row", "slice", "index_copy", "shift", "zero", "fill", "scatter_rows"]


def make_plan(seed: int) -> dict:
    rnd = random.Random(seed)
    d = rnd.randint(1, 6)
    states = []
    for _ in range(rnd.randint(1, 4)):
        kind = rnd.choices(["f32", "i64", "bool"], [6, 2, 1])[0]
        if kind == "f32":
            shape = rnd.choice([[d], [rnd.randint(1, 5), d], [2, rnd.randint(1, 4), d]])
        else:
            shape = rnd.choice([[1], [rnd.randint(1, 4)]])
        states.append({"dtype": kind, "shape": shape})
    params = [[d, d] for _ in range(rnd.randint(0, 2))]
    methods = []
    names = ["forward", "step", "reset", "update", "peek"]
    rnd.shuffle(names)
    for m in range(rnd.randint(1, 3)):
        n_in = rnd.randint(0, 2) if m else rnd.randint(1, 2)
        dynamic = n_in > 0 and rnd.random() < 0.3
        n = rnd.randint(2, 5)  # an example size of 1 would be specialized by torch.export
        inputs = [[n if dynamic else rnd.randint(1, 5), d] for _ in range(n_in)]
        steps = []
        for _ in range(rnd.randint(1, 9)):
            if rnd.random() < 0.35:
                steps.append(
                    {
                        "op": "update",
                        "kind": rnd.choice(UPDATES),
                        "state": rnd.randrange(len(states)),
                        "a": rnd.randrange(64),
                        "k": rnd.randrange(64),
                    }
                )
            else:
                op = rnd.choice(FLOAT_STEPS)
                steps.append(
                    {
                        "op": op,
                        "a": rnd.randrange(64),
                        "b": rnd.randrange(64),
                        "k": rnd.randrange(64),
                        "fn": rnd.choice(UNARY if op == "unary" else BINARY),
                    }
                )
        outputs = [rnd.randrange(64) for _ in range(rnd.choice([0, 1, 1, 2, 3]))]
        methods.append({"name": names[m], "inputs": inputs, "dynamic": dynamic, "steps": steps, "outputs": outputs})
    plan = {"seed": seed, "d": d, "states": states, "params": params, "methods": methods}
    if (seed // 7) % 2:
        _python_values(plan, random.Random(seed * 7919 + 1))
    if seed % 5 == 3:
        _conds(plan, random.Random(seed * 104729 + 2))
    if seed % 6 == 2:
        _shared(plan, random.Random(seed * 15485863 + 3))
    if seed % 6 == 4:
        _steering(plan, random.Random(seed * 32452843 + 4))
    return plan


def _shared(plan: dict, rnd: random.Random) -> None:
    """One submodule held by two parent submodules (`left.inner is right.inner`), in a sixth of the
    seeds (a stream of its own): steps write its buffer through either parent (in place, through the
    parents' forward, or reassigned) and read it through either."""
    for m in plan["methods"]:
        for _ in range(rnd.randint(1, 3)):
            op = rnd.choice(["shared_write", "shared_write", "shared_call", "shared_read"])
            st = {"op": op, "a": rnd.randrange(64), "k": rnd.randrange(64)}
            m["steps"].insert(rnd.randint(0, len(m["steps"])), st)


def _steering(plan: dict, rnd: random.Random) -> None:
    """A Python int counter that methods branch on and compute with (`if n <= t:` and `x * n`, a row
    index `n % rows`), in a sixth of the seeds (a stream of its own): kept in a module attribute, a
    dict attribute or a global, counted up and reset by the methods."""
    plan["steer"] = {"where": rnd.choice(["attr", "dict", "global"])}
    for i, m in enumerate(plan["methods"]):
        ops = ["steer_count", "steer_use"] if i == 0 else []
        ops += [
            rnd.choice(["steer_count", "steer_use", "steer_use", "steer_row", "steer_add", "steer_reset"]) for _ in range(rnd.randint(0, 2))
        ]
        for op in ops:
            st = {"op": op, "a": rnd.randrange(64), "k": rnd.randrange(64), "state": rnd.randrange(len(plan["states"]))}
            m["steps"].insert(rnd.randint(0, len(m["steps"])), st)


def _conds(plan: dict, rnd: random.Random) -> None:
    """torch.cond steps, in a fifth of the seeds (a stream of their own, so the other seeds' plans
    stay what they were): a branch in the program on a counter, a float state's value, a flag or a
    value of the method, one of its branches holding another cond in some."""
    for m in plan["methods"]:
        for _ in range(rnd.randint(1, 2)):
            st = {"op": "cond", "a": rnd.randrange(64), "b": rnd.randrange(64), "k": rnd.randrange(64), "nested": rnd.random() < 0.3}
            m["steps"].insert(rnd.randint(0, len(m["steps"])), st)


def _python_values(plan: dict, rnd: random.Random) -> None:
    """State kept as people write it by hand, in every other run of 7 seeds (a stream of its own,
    so the other seeds' plans stay what they were): Python ints, floats and bools in a module
    attribute, a dict attribute or a global of this file, changed and computed with (an int as a row
    index too, a bool branched on), and buffers reassigned instead of written in place."""
    kinds = [rnd.choice(["int", "float", "bool"]) for _ in range(rnd.randint(1, 3))]
    while kinds.count("bool") > 2:
        kinds[kinds.index("bool")] = "int"
    plan["py"] = [{"kind": k, "where": rnd.choice(["attr", "dict", "global"])} for k in kinds]
    n = len(plan["py"])
    for m in plan["methods"]:
        for _ in range(rnd.randint(1, 4)):
            op = rnd.choice(["py_set", "py_use", "py_use", "py_row", "reassign"])
            st = {
                "op": op,
                "p": rnd.randrange(n),
                "a": rnd.randrange(64),
                "k": rnd.randrange(64),
                "state": rnd.randrange(len(plan["states"])),
            }
            m["steps"].insert(rnd.randint(0, len(m["steps"])), st)


# ---- the module that runs a plan --------------------------------------------------------------
DTYPES = {"f32": torch.float32, "i64": torch.int64, "bool": torch.bool}


class Inner(nn.Module):
    """The submodule two parents share (_shared): a buffer its owner's methods change."""

    def __init__(self, d: int, g: torch.Generator):
        super().__init__()
        self.register_buffer("acc", torch.randn(d, generator=g) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.acc.mul_(0.5).add_(torch.tanh(x))
        return self.acc * 1.0


class Parent(nn.Module):
    """One of the two parents holding the same Inner."""

    def __init__(self, inner: Inner, scale: float):
        super().__init__()
        self.inner = inner
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x * self.scale)


class Planned(nn.Module):
    """Runs a plan's methods in eager PyTorch; every state is a buffer `s<i>`."""

    def __init__(self, plan: dict):
        super().__init__()
        self.plan = plan
        g = torch.Generator().manual_seed(plan["seed"])
        for i, s in enumerate(plan["states"]):
            shape = s["shape"]
            if s["dtype"] == "f32":
                init = torch.randn(shape, generator=g) * 0.5
            elif s["dtype"] == "i64":
                init = torch.randint(0, 4, shape, generator=g)
            else:
                init = torch.randint(0, 2, shape, generator=g).bool()
            self.register_buffer(f"s{i}", init)
        self.ws = nn.ParameterList([nn.Parameter(torch.randn(p, generator=g) / max(p[0], 1) ** 0.5) for p in plan["params"]])
        self.pyd = {}
        for j, v in enumerate(plan.get("py", [])):
            self.set_py(j, {"int": 1, "float": 0.5, "bool": True}[v["kind"]])
        if any(st["op"].startswith("shared_") for m in plan["methods"] for st in m["steps"]):
            inner = Inner(plan["d"], g)
            self.left, self.right = Parent(inner, 1.0), Parent(inner, -0.5)  # one Inner, held twice
        if "steer" in plan:
            self.set_steer(0)
        for m in plan["methods"]:
            setattr(self, m["name"], _bind(self, m))

    def state(self, i: int) -> torch.Tensor:
        return getattr(self, f"s{i}")

    def py(self, j: int):
        where = self.plan["py"][j]["where"]
        key = f"p{j}"
        return getattr(self, key) if where == "attr" else self.pyd[key] if where == "dict" else PY_GLOBALS[key]

    def set_py(self, j: int, v) -> None:
        where = self.plan["py"][j]["where"]
        key = f"p{j}"
        if where == "attr":
            setattr(self, key, v)
        elif where == "dict":
            self.pyd[key] = v
        else:
            PY_GLOBALS[key] = v

    def steer(self) -> int:
        where = self.plan["steer"]["where"]
        return self.q if where == "attr" else self.pyd["q"] if where == "dict" else PY_GLOBALS["q"]

    def set_steer(self, v) -> None:
        where = self.plan["steer"]["where"]
        if where == "attr":
            self.q = v
        elif where == "dict":
            self.pyd["q"] = v
        else:
            PY_GLOBALS["q"] = v


PY_GLOBALS = {}  # the plans' Python values kept as globals (each Planned sets its own at the start)


def _bind(module: Planned, method: dict):
    def run(self, *xs):
        return _run(self, method, xs)

    run.__name__ = method["name"]
    return types.MethodType(run, module)  # a bound method of the module, as tandem.Method takes


def _to_row(v: torch.Tensor, d: int) -> torch.Tensor:
    """Any float value of the pool -> [d] (mean over its leading dims)."""
    return v.reshape(-1, d).mean(0) if v.dim() != 1 else v


def _fit(v: torch.Tensor, shape, d: int, dynamic: bool = False) -> torch.Tensor:
    """A float value -> `shape` (which ends in d): broadcast when it can, else through a row. In a
    method with a dynamic dim always through a row: the choice must not depend on a size that is
    symbolic while tracing (it would be a guard on the dim)."""
    shape = list(shape)
    if dynamic:
        return torch.broadcast_to(_to_row(v, d), shape)
    try:  # decided on the shapes alone (plain ints), so tracing takes the same branch as eager
        if list(torch.broadcast_shapes(tuple(v.shape), tuple(shape))) == shape:
            return torch.broadcast_to(v, shape)
    except RuntimeError:
        pass
    return torch.broadcast_to(_to_row(v, d), shape)


def _run(mod: Planned, method: dict, xs):
    plan, d = mod.plan, mod.plan["d"]
    dyn = method["dynamic"]
    pool = [x for x in xs]
    states = plan["states"]
    float_states = [i for i, s in enumerate(states) if s["dtype"] == "f32"]
    counters = [i for i, s in enumerate(states) if s["dtype"] == "i64"]
    flags = [i for i, s in enumerate(states) if s["dtype"] == "bool"]
    if not pool:
        pool.append(torch.full((d,), 0.25))

    def pick(j):
        return pool[j % len(pool)]

    for st in method["steps"]:
        op = st["op"]
        a = pick(st["a"])
        if op == "unary":
            fn = st["fn"]
            v = {
                "tanh": torch.tanh,
                "sigmoid": torch.sigmoid,
                "relu": torch.relu,
                "neg": torch.neg,
                "abs": torch.abs,
                "sin": torch.sin,
                "affine": lambda t: t * 0.75 + 0.1,
                "clamp": lambda t: t.clamp(-0.6, 0.8),
                "square_tanh": lambda t: torch.tanh(t * t),
            }[fn](a)
        elif op == "binary":
            b = pick(st["b"])
            if dyn or a.shape != b.shape:
                a, b = _to_row(a, d), _to_row(b, d)
            fn = st["fn"]
            v = {
                "add": torch.add,
                "sub": torch.sub,
                "mul": torch.mul,
                "maximum": torch.maximum,
                "minimum": torch.minimum,
                "where": lambda p, q: torch.where(p > q, p, q * 0.5),
            }[fn](a, b)
        elif op == "linear":
            if not mod.ws:
                continue
            v = torch.tanh(a @ mod.ws[st["k"] % len(mod.ws)])
        elif op == "reduce":
            kind = st["k"] % 3
            r = a.sum(-1, keepdim=True) if kind == 0 else a.mean(-1, keepdim=True) if kind == 1 else a.amax(-1, keepdim=True)
            v = torch.tanh(a - r)
        elif op == "softmax":
            v = torch.softmax(a, -1)
        elif op == "cumsum":
            v = torch.tanh(torch.cumsum(a, -1))
        elif op == "norm":
            v = a / (a.pow(2).mean(-1, keepdim=True) + 1e-3).sqrt()
        elif op == "cat":
            b = pick(st["b"])
            a2, b2 = a.reshape(-1, d), b.reshape(-1, d)
            v = torch.cat([a2, b2], 0)
        elif op == "slice_cat":
            if d < 2:
                continue
            k = 1 + st["k"] % (d - 1)
            v = torch.cat([a[..., :k] * 0.5, torch.tanh(a[..., k:])], -1)
        elif op == "transpose":
            if a.dim() < 2:
                continue
            v = (a.transpose(0, 1) * 1.5).transpose(0, 1).contiguous()
        elif op == "select":
            if a.dim() < 2:
                continue
            v = a[0 if dyn else st["k"] % a.shape[0]]
        elif op == "read_state":
            if not float_states:
                continue
            v = mod.state(float_states[st["k"] % len(float_states)]) * 1.0
        elif op == "read_counter":
            if not counters:
                continue
            c = mod.state(counters[st["k"] % len(counters)])
            v = a + (c.sum() % 5).float() * 0.1
        elif op == "read_flag":
            if not flags:
                continue
            f = mod.state(flags[st["k"] % len(flags)])
            v = torch.where(f.any(), a, -a)
        elif op == "update":
            _update(mod, st, a, d, xs, dyn)
            continue
        elif op == "cond":
            v = _cond_step(mod, st, a, pick(st["b"]), d)
        elif op.startswith("py_") or op == "reassign":
            v = _python_step(mod, st, a, d, dyn)
            if v is None:
                continue
        elif op.startswith("shared_"):
            v = _shared_step(mod, st, a, d)
            if v is None:
                continue
        elif op.startswith("steer_"):
            v = _steer_step(mod, st, a, d)
            if v is None:
                continue
        else:
            raise ValueError(op)
        pool.append(v)
    outs = tuple(pool[j % len(pool)] * 1.0 for j in method["outputs"])
    if not outs:
        return None
    return outs[0] if len(outs) == 1 else outs


def _python_step(mod: Planned, st: dict, a: torch.Tensor, d: int, dyn: bool):
    """A step of _python_values: sets a Python value, computes with one (a new pool value), writes a
    state row at an int, or reassigns a float state."""
    j, k, op = st["p"], st["k"], st["op"]
    kind = mod.plan["py"][j]["kind"]
    v = mod.py(j)
    if op == "py_set":
        if kind == "bool":
            mod.set_py(j, (not v) if k % 2 else k % 4 == 0)
        elif k % 5 == 0:
            mod.set_py(j, 0 if kind == "int" else 0.0)
        else:
            mod.set_py(j, v + (1 + k % 3) * (1 if kind == "int" else 0.25))
        return None
    if op == "py_use":
        if kind == "bool":
            return a * 0.5 if v else torch.tanh(a)
        return a * 0.5 + (v % 4 if kind == "int" else v * 0.125)
    spec = mod.plan["states"][st["state"]]
    if spec["dtype"] != "f32":
        return None
    s = mod.state(st["state"])
    if op == "reassign":
        setattr(mod, f"s{st['state']}", torch.tanh(s * 0.5 + _fit(a, spec["shape"], d, dyn)))
        return None
    if kind == "int" and len(spec["shape"]) == 2:  # py_row
        s[v % spec["shape"][0]] = torch.tanh(_to_row(a, d))
    return None


def _shared_step(mod: Planned, st: dict, a: torch.Tensor, d: int):
    """A step of _shared: the shared buffer written through one parent (in place, through the parent's
    forward, or reassigned) or read through one (a new pool value)."""
    k, op = st["k"], st["op"]
    parent = mod.left if k % 2 else mod.right
    row = _to_row(a, d)
    if op == "shared_call":
        return parent(row)
    if op == "shared_read":
        return a * 0.5 + parent.inner.acc
    if k % 3 == 2:
        parent.inner.acc = torch.tanh(parent.inner.acc * 0.5 + row)  # a registered buffer reassigned
    else:
        parent.inner.acc.mul_(0.75).add_(torch.tanh(row) * parent.scale)
    return None


def _steer_step(mod: Planned, st: dict, a: torch.Tensor, d: int):
    """A step of _steering: counts the int up, resets it, branches on it and computes with it (a new
    pool value), computes with it only, or writes a state row at it."""
    k, op = st["k"], st["op"]
    n = mod.steer()
    if op == "steer_count":
        mod.set_steer(n + 1 + k % 2)
        return None
    if op == "steer_reset":
        mod.set_steer(0)
        return None
    if op == "steer_add":
        return a * 0.5 + n % 4
    if op == "steer_use":
        t = k % 5
        if (n <= t) if k % 2 else (n > t):
            return a * n * 0.25 if k % 3 else a - n
        return torch.tanh(a) * (n % 3)
    spec = mod.plan["states"][st["state"]]  # steer_row
    if spec["dtype"] != "f32" or len(spec["shape"]) != 2:
        return None
    if n >= k % 3:
        mod.state(st["state"])[n % spec["shape"][0]] = torch.tanh(_to_row(a, d))
    return None


def _then(x, y):
    return torch.tanh(x) + y * 0.5


def _else(x, y):
    return x * y - 0.25


# the margins of torch.cond's float predicates (a sum against 0) in eager_trace's calls; None elsewhere
_MARGINS: list | None = None


def _over_zero(total: torch.Tensor) -> torch.Tensor:
    """total > 0, its distance from 0 noted while eager_trace runs: a sum that is 0 in exact arithmetic
    (tanh(x - mean) over two elements) takes a branch that rounding decides, so no runtime can agree."""
    if _MARGINS is not None:
        _MARGINS.append(abs(float(total)))
    return total > 0


def _nested(x, y):
    return torch.cond(y.sum() > 0, _then, _else, (x * 0.5, y)) + 1  # (its margin: _cond_step's)


def _cond_step(mod: Planned, st: dict, a: torch.Tensor, b: torch.Tensor, d: int) -> torch.Tensor:
    """torch.cond on a counter's parity, a float state's sum, a flag or a's sum (k picks which)."""
    a, b = _to_row(a, d), _to_row(b, d)
    states = mod.plan["states"]
    k = st["k"]
    of = [i for i, s in enumerate(states) if s["dtype"] == ("i64", "f32", "bool")[k % 3]]
    if k % 4 == 3 or not of:
        pred = _over_zero(a.sum())
    else:
        s = mod.state(of[k // 4 % len(of)])
        pred = (s.sum() % 2 == 0) if k % 3 == 0 else _over_zero(s.sum()) if k % 3 == 1 else s.any()
    if st["nested"] and _MARGINS is not None:
        _over_zero(b.sum())  # _nested's predicate, noted here: torch.cond traces its branches
    return torch.cond(pred, _nested if st["nested"] else _then, _else, (a, b))


def _update(mod: Planned, st: dict, a: torch.Tensor, d: int, xs, dyn: bool) -> None:
    i = st["state"]
    spec = mod.plan["states"][i]
    s = mod.state(i)
    kind, k = st["kind"], st["k"]
    if spec["dtype"] == "i64":
        if kind in ("zero", "fill"):
            s.zero_()
        elif kind == "index_copy" and xs:
            s.add_(xs[0].shape[0])  # a size as a value: the dynamic dim at run time
        else:
            s.add_(1 + k % 3)
        return
    if spec["dtype"] == "bool":
        if kind in ("zero", "fill"):
            s.fill_(kind == "fill")
        else:
            s.copy_((_to_row(a, d).sum() > 0).expand(s.shape))
        return
    shape = spec["shape"]
    if kind == "copy":
        s.copy_(torch.tanh(_fit(a, shape, d, dyn)))
    elif kind == "add_":
        s.mul_(0.5).add_(torch.tanh(_fit(a, shape, d, dyn)))
    elif kind == "mix":
        s.copy_(torch.tanh(s * 0.5 + _fit(a, shape, d, dyn)))
    elif kind == "zero":
        s.zero_()
    elif kind == "fill":
        s.fill_(0.125 * (k % 5))
    elif kind == "row":
        if len(shape) < 2:
            s.copy_(torch.tanh(_fit(a, shape, d, dyn)))
        elif len(shape) == 2:
            s[k % shape[0]] = torch.tanh(_to_row(a, d))
        else:
            s[k % shape[0], k % shape[1]] = torch.tanh(_to_row(a, d))
    elif kind == "slice":
        if d < 2:
            s.mul_(0.5)
        else:
            lo = k % (d - 1)
            s[..., lo : lo + 1 + k % (d - lo)] = torch.tanh(_fit(a, shape, d, dyn))[..., lo : lo + 1 + k % (d - lo)]
    elif kind == "index_copy":
        if len(shape) < 2:
            s.index_copy_(0, torch.tensor([k % d]), torch.tanh(_to_row(a, d))[k % d : k % d + 1])
        else:
            idx = torch.tensor([k % shape[0]])
            s.index_copy_(0, idx, torch.tanh(_fit(a, shape, d, dyn))[:1])
    elif kind == "shift":  # a streaming buffer: drop the oldest row, append the newest
        if len(shape) == 2:
            s.copy_(torch.cat([s[1:], torch.tanh(_to_row(a, d))[None]], 0))
        else:
            s.copy_(torch.tanh(s.roll(1, -1) + _fit(a, shape, d, dyn) * 0.25))
    elif kind == "scatter_rows":
        if len(shape) == 2 and shape[0] > 1:
            rows = torch.tensor([k % shape[0], (k + 1) % shape[0]])
            s.index_put_((rows,), torch.tanh(_fit(a, [2, d], d, dyn)) * 0.5, accumulate=True)
            s.copy_(torch.tanh(s))
        else:
            s.mul_(-0.5)
    else:
        raise ValueError(kind)


# ---- running a plan --------------------------------------------------------------------------
def method_specs(plan: dict, module: Planned) -> dict:
    specs = {}
    g = torch.Generator().manual_seed(plan["seed"] + 1)
    for m in plan["methods"]:
        xs = tuple(torch.randn(shape, generator=g) for shape in m["inputs"])
        dyn = None
        if m["dynamic"] and xs:
            dim = torch.export.Dim(f"n_{m['name']}", min=1, max=8)
            dyn = tuple({0: dim} for _ in xs)  # one dim shared by every input
        specs[m["name"]] = tandem.Method(getattr(module, m["name"]), xs, dynamic_shapes=dyn)
    return specs


def call_sequence(plan: dict, length: int = 7) -> list:
    """[(method name, inputs)]: every method at least once, then random ones; dynamic methods at
    several sizes of their dim."""
    rnd = random.Random(plan["seed"] + 2)
    g = torch.Generator().manual_seed(plan["seed"] + 3)
    methods = plan["methods"]
    order = [m for m in methods] + [rnd.choice(methods) for _ in range(max(0, length - len(methods)))]
    calls = []
    for m in order:
        n = rnd.randint(1, 8) if m["dynamic"] else None
        xs = [torch.randn([n if n is not None else s[0], *s[1:]], generator=g) for s in m["inputs"]]
        calls.append((m["name"], xs))
    return calls


def eager_trace(plan: dict, calls: list, margins: list | None = None) -> tuple[list, dict]:
    """Outputs of each call and the final states, in eager PyTorch; `margins` (a list) gets each call's
    smallest distance of a torch.cond float predicate from its threshold (inf where none)."""
    global _MARGINS
    mod = Planned(plan)
    outs = []
    with torch.no_grad():
        for name, xs in calls:
            _MARGINS = []
            try:
                y = getattr(mod, name)(*[x.clone() for x in xs])
            finally:
                seen, _MARGINS = _MARGINS, None
            if margins is not None:
                margins.append(min(seen, default=math.inf))
            outs.append([] if y is None else list(y) if isinstance(y, tuple) else [y])
    states = {f"s{i}": mod.state(i).clone() for i in range(len(plan["states"]))}
    if hasattr(mod, "left"):
        states["left.inner.acc"] = mod.left.inner.acc.clone()
    return outs, states


class Mismatch(AssertionError):
    pass


class Tie(Exception):
    """A difference from eager after a call whose torch.cond predicate was within rounding of its
    threshold in eager (TIE): the branch is rounding's choice, not a finding."""


TIE = 1e-5


def check_plan(plan: dict, calls: list | None = None, rtol=1e-4, atol=1e-5) -> bytes:
    """Exports the plan, runs its call sequence in this process's runtime backend, and raises
    Mismatch naming the first difference from eager. Returns the program's bytes."""
    calls = call_sequence(plan) if calls is None else calls
    margins = []
    want, want_state = eager_trace(plan, calls, margins)
    try:
        return _compare(plan, calls, want, want_state, rtol, atol)
    except Mismatch as e:
        at = int(m[1]) if (m := re.match(r"call (\d+) ", str(e))) else len(calls)
        if min(margins[: at + 1], default=math.inf) < TIE:
            raise Tie(f"{e} (after a torch.cond predicate within {TIE} of its threshold in eager)") from None
        raise


def _compare(plan: dict, calls: list, want: list, want_state: dict, rtol: float, atol: float) -> bytes:
    module = Planned(plan)
    program = tandem.export(module, method_specs(plan, module)).to_bytes()
    model = tandem.load(program)
    for c, ((name, xs), w) in enumerate(zip(calls, want)):
        got = model.call(name, *xs)
        got = [] if got is None else list(got) if isinstance(got, tuple) else [got]
        if len(got) != len(w):
            raise Mismatch(f"call {c} {name}: {len(got)} outputs, eager {len(w)}")
        for k, (a, b) in enumerate(zip(got, w)):
            try:
                torch.testing.assert_close(a, b, rtol=rtol, atol=atol)
            except AssertionError as e:
                raise Mismatch(f"call {c} {name} output {k}: {str(e).splitlines()[0]}") from None
    for sname, w in want_state.items():
        try:
            got = model.read_state(sname)
        except tandem.TandemError:
            continue  # never mutated: a constant, not state
        try:
            torch.testing.assert_close(got, w, rtol=rtol, atol=atol)
        except AssertionError as e:
            raise Mismatch(f"final state {sname}: {str(e).splitlines()[0]}") from None
    return program


def failure(plan: dict) -> str | None:
    """The failure of a plan as one line (None when it passes). An ExportError is a failure too:
    every plan uses only what tandem supports."""
    return outcome(plan)[0]


def outcome(plan: dict) -> tuple[str | None, bytes | None]:
    """(failure, None) or (None, the program's bytes): failure() that keeps the program it exported."""
    calls = call_sequence(plan)
    eager_trace(plan, calls)  # a plan eager cannot run is the generator's bug: raise, not a finding
    try:
        return None, check_plan(plan, calls)
    except Exception as e:  # noqa: BLE001 - any exception is a finding
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", None


def shrink(plan: dict, fails=failure, budget: float = 120.0) -> dict:
    """A smaller plan that still fails the same way (same exception type): removes methods, steps,
    outputs and states while the failure persists, then shrinks dims."""
    first = fails(plan)
    assert first is not None, "shrink: the plan passes"
    kind = first.split(":")[0]
    start = time.time()

    def still(p):
        if time.time() - start > budget:
            return False
        try:
            f = fails(p)
        except Exception:  # noqa: BLE001
            return False
        return f is not None and f.split(":")[0] == kind

    changed = True
    while changed:
        changed = False
        for mi in range(len(plan["methods"]) - 1, -1, -1):
            if len(plan["methods"]) > 1:
                p = copy.deepcopy(plan)
                del p["methods"][mi]
                if still(p):
                    plan, changed = p, True
                    continue
            for field in ("steps", "outputs", "inputs"):
                for si in range(len(plan["methods"][mi][field]) - 1, -1, -1):
                    p = copy.deepcopy(plan)
                    del p["methods"][mi][field][si]
                    if still(p):
                        plan, changed = p, True
            if plan["methods"][mi]["dynamic"]:
                p = copy.deepcopy(plan)
                p["methods"][mi]["dynamic"] = False
                if still(p):
                    plan, changed = p, True
        if plan["d"] > 1:
            p = copy.deepcopy(plan)
            p["d"] = 1
            for s in p["states"]:
                if s["dtype"] == "f32":
                    s["shape"][-1] = 1
            for m in p["methods"]:
                for s in m["inputs"]:
                    s[-1] = 1
            p["params"] = [[1, 1] for _ in p["params"]]
            if still(p):
                plan, changed = p, True
    return plan


# ---- recording for the wasm runs (tests/js/random-programs.test.js) -----------------------------------
def record(plan: dict, program: bytes, out: Path) -> None:
    from fixtures.make import tensor_json

    calls = call_sequence(plan)
    want, want_state = eager_trace(plan, calls)
    name = f"program_{plan['seed']}"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.tandem").write_bytes(program)
    seq = [
        {"method": m, "inputs": [tensor_json(x) for x in xs], "outputs": [tensor_json(y) for y in ys]} for (m, xs), ys in zip(calls, want)
    ]
    (out / f"{name}.json").write_text(
        json.dumps({"case": name, "plan": plan, "calls": seq, "state": {k: tensor_json(v) for k, v in want_state.items()}})
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1000, help="how many programs (seeds first..first+count-1)")
    ap.add_argument("--first", type=int, default=100000, help="first seed (the test suite uses 0..)")
    ap.add_argument("--seed", type=int, help="check one seed")
    ap.add_argument("--show", action="store_true", help="print the plan")
    ap.add_argument("--record", type=Path, help="also write each passing program for tests/js/random-programs.test.js")
    args = ap.parse_args()
    seeds = [args.seed] if args.seed is not None else range(args.first, args.first + args.count)
    bad, ties, t0 = [], [], time.time()
    for s in seeds:
        plan = make_plan(s)
        if args.show:
            print(json.dumps(plan))
        f, program = outcome(plan)
        if f is not None and f.startswith("Tie:"):
            print(f"seed {s}: undecided: {f}", flush=True)
            ties.append(s)
            continue
        if f is None:
            if args.record:
                record(plan, program, args.record)
            continue
        small = shrink(plan)
        print(f"seed {s}: {f}\n  minimal plan: {json.dumps(small)}", flush=True)
        bad.append(s)
    n = len(seeds)
    tied = f", {len(ties)} undecided (a torch.cond predicate at its threshold)" if ties else ""
    took = f"{time.time() - t0:.0f} s, backend {tandem.runtime.BACKEND}"
    print(f"programs: {n - len(bad) - len(ties)} passed, {len(bad)} failed{tied} ({took})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
