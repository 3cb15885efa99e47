"""Random sampling: torch.randn / rand / normal_ / uniform_ / bernoulli / multinomial /
randint -> the runtime's `random` and `multinomial` ops, drawing from a counter-based generator
(Philox4x32-10, src/kernels/random.c) whose key and counter are the program's state slot `__rng__`
(int64 [2] = [seed, calls]).

Every random op of a method gets its own stream number (its order in the method) and reads the
slot; the method's state write-back adds 1 to `calls`, so each call draws new numbers, and
saveState/loadState, fork({state: 'copy'}) and resetState reproduce or restart the stream like any
other state. The numbers are not torch's (torch's CPU generator is a Mersenne Twister, stateful in
the process); docs/ops.md ("Random sampling") specifies tandem's stream bit for bit.
"""

from __future__ import annotations

import torch

from ..ir import F32, I32, I64, STATE, ExportError, StateSpec, Storage, Value
from .core import HANDLERS, _dtype_of, _shape_of, handles
from .provenance import source_line

aten = torch.ops.aten

RNG_STATE = "__rng__"  # the state slot's name (inspect shows it)
RNG_KEY = ("tandem", RNG_STATE)  # its key in the exporter's states dict (buffers are keyed by storage)
UNIFORM, NORMAL, INTEGERS = 0, 1, 2  # the random op's kinds (src/kernels/random.c)
NOT_TORCH = (
    "tandem's generator is Philox4x32-10 in the program's state, so the numbers differ from torch's own "
    "generator for the same seed (docs/ops.md, Random sampling)"
)


def _random_targets() -> set:
    return {t for t, h in HANDLERS.items() if getattr(h, "_random", False)}


def uses_random(ep) -> bool:
    """Whether an exported (decomposed) program draws random numbers through an op lowered here."""
    targets = _random_targets()
    return any(n.op == "call_function" and n.target in targets for n in ep.graph.nodes)


def add_rng_state(states: dict, exported: dict, seed: int = 0) -> None:
    """Add the `__rng__` slot ([seed, 0]) to the program's states when any method draws random numbers."""
    targets = _random_targets()
    for method, e in exported.items():
        for n in e[0].graph.nodes:
            if (
                n.op == "call_function"
                and (n.target in targets or torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ()))
                and n.kwargs.get("generator") is not None
            ):
                raise ExportError(
                    f"method '{method}': '{n.target}' is given a torch.Generator{source_line(n)}; a tandem program "
                    f"draws from its own generator (the '{RNG_STATE}' state, seeded with model.seed(n) or "
                    f"tandem.export(..., seed=n)), not from a torch.Generator: drop generator=. Note: {NOT_TORCH}"
                )
    if not any(uses_random(e[0]) for e in exported.values()):
        return
    for st in states.values():
        if st.name == RNG_STATE:
            raise ExportError(f"state '{RNG_STATE}' is tandem's random generator; a buffer of that name cannot be state: rename it")
    seed = int(seed)
    if not -(2**63) <= seed < 2**64:
        raise ExportError(f"seed {seed} does not fit 64 bits")
    seed = seed - 2**64 if seed >= 2**63 else seed
    t = torch.tensor([seed, 0], dtype=torch.long)
    states[RNG_KEY] = StateSpec(name=RNG_STATE, tensor=t, init=t.clone(), dtype=I64, shape=(2,))


def _rng(L) -> Value:
    """The `__rng__` slot as a Value, and the next stream number; the first use in a method adds the
    counter's advance to the method's state write-back."""
    st = L.states.get(RNG_KEY)
    if st is None:  # add_rng_state did not see this op: a bug, never the user's fault
        L.fail("a random op was found only while lowering; this is a bug in tandem's exporter, please report it")
    v = Value(I64, (2,), Storage(STATE, st.nbytes, state=st))
    if not hasattr(L, "rng_streams"):
        L.rng_streams = 0

        def advance():
            old = Value(I64, (2,), Storage(STATE, st.nbytes, state=st))
            return st, L.emit("add", [old, L.const(torch.tensor([0, 1], dtype=torch.long))], I64, (2,))

        L.at_end.append(advance)
    stream = L.rng_streams
    L.rng_streams += 1
    return v, stream


def _no_generator(L, kwargs):
    if kwargs.get("generator") is not None:
        L.fail(
            f"a torch.Generator is passed; a tandem program draws from its own generator (the '{RNG_STATE}' state, "
            f"seeded with model.seed(n)), not from a torch.Generator: drop generator=. Note: {NOT_TORCH}"
        )


def _draw(L, kind: int, shape, a: float = 0.0, b: float = 1.0, lo: int = 0, hi: int = 0, dtype: int = F32) -> Value:
    rng, stream = _rng(L)
    return L.emit("random", [rng], dtype, shape, iattr=[kind, stream, lo, hi], fattr=[a, b])


def _float_out(L, node, v: Value) -> Value:
    """v (float32) as the node's dtype (float64 is float32 in tandem)."""
    return L.cast(v, _dtype_of(node))


def _static_float(L, x, what: str) -> float:
    if isinstance(x, (bool, int, float)):
        return float(x)
    L.fail(f"{what} must be a Python number here; pass a tensor as mean/std of torch.normal(mean, std) instead")


def random_handler(*targets):
    def deco(fn):
        fn._random = True
        return handles(*targets)(fn)

    return deco


@random_handler(aten.randn.default, aten.randn_like.default)
def _randn(L, node, args, kwargs):
    _no_generator(L, kwargs)
    return _float_out(L, node, _draw(L, NORMAL, _shape_of(node)))


@random_handler(aten.rand.default, aten.rand_like.default)
def _rand(L, node, args, kwargs):
    _no_generator(L, kwargs)
    return _float_out(L, node, _draw(L, UNIFORM, _shape_of(node)))


@random_handler(aten.normal_functional.default, aten.normal.float_float)
def _normal_scalars(L, node, args, kwargs):
    """x.normal_(mean, std) (functionalized: normal_functional(x, mean, std)), torch.normal(m, s, size)."""
    _no_generator(L, kwargs)
    if node.target == aten.normal.float_float:
        mean, std = args[0], args[1]
    else:
        mean = args[1] if len(args) > 1 else kwargs.get("mean", 0.0)
        std = args[2] if len(args) > 2 else kwargs.get("std", 1.0)
    mean, std = _static_float(L, mean, "mean"), _static_float(L, std, "std")
    if std < 0:
        L.fail(f"normal_ with std {std}: std must be >= 0")
    return _float_out(L, node, _draw(L, NORMAL, _shape_of(node), mean, std))


@random_handler(aten.normal.Tensor_float, aten.normal.float_Tensor, aten.normal.Tensor_Tensor)
def _normal_tensors(L, node, args, kwargs):
    """torch.normal(mean, std) with a tensor mean or std: mean + std * N(0, 1), broadcast."""
    _no_generator(L, kwargs)
    shape = _shape_of(node)
    z = _draw(L, NORMAL, shape)
    mean = L.operand(args[0] if len(args) > 0 else kwargs.get("mean", 0.0), F32)
    std = L.operand(args[1] if len(args) > 1 else kwargs.get("std", 1.0), F32)
    y = L.emit("add", [L.emit("mul", [z, std], F32, shape), mean], F32, shape)
    return _float_out(L, node, y)


@random_handler(aten.uniform.default)
def _uniform(L, node, args, kwargs):
    """x.uniform_(a, b) (functionalized: uniform(x, a, b))."""
    _no_generator(L, kwargs)
    a = args[1] if len(args) > 1 else kwargs.get("from", 0.0)
    b = args[2] if len(args) > 2 else kwargs.get("to", 1.0)
    a, b = _static_float(L, a, "from"), _static_float(L, b, "to")
    if not a <= b:
        L.fail(f"uniform_ from {a} to {b}: from must be <= to")
    return _float_out(L, node, _draw(L, UNIFORM, _shape_of(node), a, b))


@random_handler(aten.bernoulli.p, aten.bernoulli.default, aten.bernoulli.Tensor)
def _bernoulli(L, node, args, kwargs):
    """torch.bernoulli(p) / x.bernoulli_(p): 1 where U < p, else 0 (U uniform in [0, 1))."""
    _no_generator(L, kwargs)
    shape = _shape_of(node)
    if node.target == aten.bernoulli.default:
        p = args[0]
    else:
        p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
    if not isinstance(p, Value) and not 0.0 <= float(p) <= 1.0:
        L.fail(f"bernoulli with p = {p}: p must be in [0, 1]")
    u = _draw(L, UNIFORM, shape)
    hit = L.emit("lt", [u, L.operand(p, F32)], 3, shape)
    return L.cast(hit, _dtype_of(node))


@random_handler(aten.randint.low, aten.randint.default, aten.randint_like.default, aten.randint_like.low_dtype)
def _randint(L, node, args, kwargs):
    """torch.randint(low, high, size) / randint_like: integers in [low, high), int64 (cast to the dtype asked for)."""
    _no_generator(L, kwargs)
    if node.target == aten.randint.low or node.target == aten.randint_like.low_dtype:
        lo, hi = args[1], args[2]
        if node.target == aten.randint.low:
            lo, hi = args[0], args[1]
    else:
        lo, hi = 0, args[0] if node.target == aten.randint.default else args[1]
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (lo, hi)):
        L.fail("randint's low and high must be Python ints (not sizes that depend on a dynamic dim, not tensors)")
    if hi <= lo:
        L.fail(f"randint({lo}, {hi}): high must be above low")
    dt = _dtype_of(node)
    out = I32 if dt == I32 and -(2**31) <= lo and hi - 1 < 2**31 else I64
    return L.cast(_draw(L, INTEGERS, _shape_of(node), lo=lo, hi=hi, dtype=out), dt)


@random_handler(aten.multinomial.default)
def _multinomial(L, node, args, kwargs):
    """torch.multinomial(w, k, replacement=False): k indices per row of w [n] or [B, n], drawn in
    proportion to the weights (without replacement: each index once)."""
    _no_generator(L, kwargs)
    w = args[0]
    k = args[1]
    replacement = bool(args[2] if len(args) > 2 else kwargs.get("replacement", False))
    if not isinstance(k, int) or isinstance(k, bool):
        L.fail("multinomial's num_samples must be a Python int")
    if len(w.shape) not in (1, 2):
        L.fail(f"multinomial of a {len(w.shape)}-d tensor; torch takes [n] or [B, n]")
    rng, stream = _rng(L)
    shape = _shape_of(node)
    return L.emit("multinomial", [rng, L.cast(w, F32)], I64, shape, iattr=[stream, int(replacement)])
