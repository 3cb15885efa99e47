"""tandem.export: PyTorch module + methods -> one Program with a program-scoped state region.

Each method is exported with torch.export and lowered to Core ATen. State is every buffer that any
method mutates, identified by the tensor itself (its storage), so several methods of one module and
several modules sharing a submodule bind to the same state slot.
"""

from __future__ import annotations

import functools
import inspect
import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Union

import torch
from torch import nn
from torch.export.graph_signature import InputKind, OutputKind

from .decompose import decompose
from .format import file_ops, lay_out_program
from .fuse import fuse_method, tie_embeddings
from .growing import add_growing, check_bounds, growing_entry, steering_bounds, window_versions
from .ir import DTYPE_CODE, SUPPORTED_DTYPES, ExportError, StateSpec
from .layout import layout_methods
from .lowering import is_user_file, lower_method, source_line
from .lowering.random import add_rng_state
from .names import check_method_name
from .plan import plan_method
from .program import Program
from .python_values import check_counters, check_settled, scopes
from .quantize import Skip, quantize_methods
from .runtime import TandemError, verify
from .runtime_values import RuntimeValues
from .schema import QUANT_GROUP
from .snapshot import tensor_key as _tensor_key
from .snapshot import zeros_of
from .steering import add_whens
from .tracing import Snapshot, Traced, _tensors_in, arg_names, is_held, traced
from .value_branches import BranchRecorder, NeedBranches


@dataclass
class Method:
    """One entry point: `fn` is an nn.Module (its forward) or a bound method of one.

    dynamic_shapes: torch.export's, one entry per input (a dict {dim index: torch.export.Dim}, or
    None), e.g. `({1: Dim("n", min=1, max=512)},)`. Every Dim needs a `max`: memory is planned at
    the maximum, and each call runs at its actual size."""

    fn: Union[nn.Module, Callable]
    example_inputs: tuple = ()
    dynamic_shapes: Any = None


def _trace_values(name: str, root, inputs, dynamic):
    """torch.export of root with RuntimeValues (python/tandem/runtime_values.py) entered inside the
    trace (so it sees indexing before torch.export's own modes do). When the method reads ints from
    tensors, it is traced again with those ints made up differently: a graph that changes used one
    of them in Python (range(off), a list index), frozen at a made-up value."""

    def trace(mode):
        own = root.__dict__.get("forward")
        inner = root.forward

        @functools.wraps(inner)
        def forward(*args, **kwargs):
            with mode:
                return inner(*args, **kwargs)

        # the bound signature (without self): wraps copied the function's own __signature__, if any
        forward.__signature__ = inspect.signature(inner)
        root.forward = forward
        import logging

        shapes_log = logging.getLogger("torch.fx.experimental.symbolic_shapes")
        level = shapes_log.level  # its warning for each unbacked size (a dim bound from the state) is noise here
        shapes_log.setLevel(logging.ERROR)
        try:
            return torch.export.export(root, inputs, strict=False, dynamic_shapes=dynamic)
        finally:
            shapes_log.setLevel(level)
            if own is None:
                del root.forward
            else:
                root.forward = own

    modes = []

    def attempt(eager_min_max: bool):
        modes.append(RuntimeValues(eager_min_max=eager_min_max))
        try:
            return trace(modes[-1]), None
        except NeedBranches:  # a Python branch on a tensor value: which way does each go, eagerly?
            branches = _eager_branches(root, inputs)
            modes.append(RuntimeValues(branches=branches, eager_min_max=eager_min_max))
            return trace(modes[-1]), branches

    try:
        ep, branches = attempt(False)
    except Exception as e:
        first, ep = modes[-1], None
        if first.min_max and not getattr(root, "perturb", None):
            # max / min of a state value and an int is torch.clamp's tensor, a value at run time; where
            # the trace fails (a slice it starts is sized only at run time), Python's own: a branch
            # taken as eager takes it, guarded in each call
            try:
                ep, branches = attempt(True)
            except Exception:
                pass
        if ep is None:
            if isinstance(e, ExportError) or first.reads or getattr(root, "perturb", None):
                # (a trace with a Python int moved, python_values.check_counters: its failure is the finding)
                raise
            # torch traces some programs differently under any torch-function mode (x[mask] + 1 guards
            # on the mask's count); one that needed none of the mode's rewrites is traced as torch would
            return torch.export.export(root, inputs, strict=False, dynamic_shapes=dynamic)
    mode = modes[-1]
    ep._tandem_limits = [(u.node.expr, cap, n, line) for u, cap, n, line in mode.limits]
    if mode.reads:
        other = trace(RuntimeValues(bias=1, branches=branches, eager_min_max=mode.eager_min_max))

        def code(e):  # without unused size arithmetic (`off + T` computed in Python, then only sliced with)
            e.graph_module.graph.eliminate_dead_code()
            e.graph_module.recompile()
            return e.graph_module.code

        if code(other) != code(ep):
            raise ExportError(
                f"method '{name}' reads an int from a tensor (.item() / int()) and uses it in Python itself "
                f"(range(), a list index, arithmetic after int()), so the export would freeze it"
                f"{''.join(dict.fromkeys(mode.reads))}; use it only in tensor arithmetic and slices "
                "(off = t.item(); cache[:, off:off + T], off % capacity)"
            )
    return ep


def _eager_branches(root, inputs) -> list:
    """The values bool() of one-element tensors gives, in order, when the method runs eagerly on a
    copy of its owner and held containers (their state as it is now) with the example inputs: the
    branches export specializes on."""
    import copy

    owner, args, fn = copy.deepcopy((root.owner, root._tandem_args, root._tandem_fn))
    recorder = BranchRecorder()
    with torch.no_grad(), recorder:
        owner(*args) if root._tandem_call_owner else fn(*args)
    return recorder.values


def _normalize(module: Optional[nn.Module], methods: Mapping[str, Any]) -> dict:
    if not methods:
        raise ExportError("no methods given: pass {'forward': (example_input, ...)} or {'name': tandem.Method(fn, inputs)}")
    out = {}
    for name, spec in methods.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ExportError(f"method name {name!r} must be a Python identifier")
        check_method_name(name)
        dynamic = None
        if isinstance(spec, Method):
            fn, inputs, dynamic = spec.fn, spec.example_inputs, spec.dynamic_shapes
        else:
            if module is None:
                raise ExportError(f"method '{name}': module is None, so give tandem.Method(fn, example_inputs)")
            fn = module if name == "forward" else getattr(module, name, None)
            if fn is None:
                raise ExportError(f"method '{name}': {type(module).__name__} has no method '{name}'")
            inputs = spec
        if isinstance(inputs, torch.Tensor):
            inputs = (inputs,)
        inputs = tuple(inputs)
        for i, x in enumerate(inputs):
            if x is None:
                continue  # passed as None while tracing; not an input of the exported method
            if is_held(x):
                continue  # a container of tensors (pocket-tts' model state): state the method is given, not an input
            if not isinstance(x, torch.Tensor):
                raise ExportError(
                    f"method '{name}': example input {i} is a {type(x).__name__}; inputs must be tensors "
                    "(or None for an optional argument the method does not take, or a dict, list, tuple "
                    "or object holding state tensors that every call of the method is given)"
                )
            if x.dtype not in DTYPE_CODE:
                raise ExportError(
                    f"method '{name}': example input {i} has dtype {x.dtype}; tandem supports {SUPPORTED_DTYPES} "
                    "(convert with .float(), .long() or .int())"
                )
        out[name] = (fn, inputs, dynamic)
    return out


def _method_dims(name: str, ep) -> list:
    """[(dim name, min, max, sympy symbol)] of an exported method's dynamic dims, named after the
    user's torch.export.Dim (the symbol's name otherwise); an unbounded dim is an ExportError."""
    import sympy

    names = {}
    users = [s for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    for i, spec in enumerate(users):  # in the order of the example inputs
        node = next((n for n in ep.graph.nodes if n.name == spec.arg.name), None)
        val = node.meta.get("val") if node is not None else None
        for d, size in enumerate(getattr(val, "shape", ())):
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                names.setdefault(size.node.expr, (i, d, spec.arg.name))
    dims = []
    for sym, src in names.items():  # symbols of the inputs' sizes (not unbacked ones, e.g. of .item())
        vr = ep.range_constraints.get(sym)
        label = _dim_names.get((name, src[:2])) or str(sym)
        lo, hi = (vr.lower, vr.upper) if vr is not None else (0, None)
        bounded = isinstance(hi, int) or bool(getattr(hi, "is_Integer", False))
        if not bounded or int(hi) >= 2**31:
            raise ExportError(
                f"method '{name}': dynamic dim '{label}' (input '{src[2]}' dim {src[1]}) has no maximum; tandem "
                f"plans memory at the maximum, so give one: torch.export.Dim('{label}', min=1, max=...)"
            )
        dims.append((label, max(int(lo), 0), int(hi), sym))
    return dims


_dim_names: dict = {}  # (method, (input index, dim)) -> the user's Dim name, filled while exporting

# aten ops through which a `.item()` may read one element of a state tensor (offset.view(-1)[0])
_ELEMENT_CHAIN = {
    "view",
    "_unsafe_view",
    "reshape",
    "select",
    "squeeze",
    "unsqueeze",
    "_to_copy",
    "clone",
    "alias",
    "slice",
    "expand",
    "flatten",
}


def _state_dims(name: str, ep, root: Traced, limits: list, dims: list, name_of: dict) -> list:
    """The method's dims bound from the state (runtime_values._Reads.prefix): each `.item()` of a
    state tensor whose value is the unbacked size of a slice's length, [(name, min, max, symbol)];
    the tensor each one reads is recorded in ep._tandem_dim_tensors for the lowering (the file
    stores its state's index: the runtime reads its first element at the start of every call).
    The maximum is the tightest `off + n <= size` of the slices, at the largest n of the dims."""
    if not limits:
        return []
    buffers = {s.arg.name: s.target for s in ep.graph_signature.input_specs if s.kind == InputKind.BUFFER}
    out, tensors = [], {}
    for node in ep.graph.nodes:
        if node.target is not torch.ops.aten._local_scalar_dense.default:
            continue
        val = node.meta.get("val")
        expr = getattr(getattr(val, "node", None), "expr", None)
        mine = [(cap, n) for e, cap, n, _ in limits if e == expr]
        if not mine:
            continue
        src, where = node.args[0], next(line for e, _, _, line in limits if e == expr)
        while isinstance(src, torch.fx.Node) and src.op == "call_function":
            op = getattr(src.target, "__name__", "").split(".")[0]
            if op not in _ELEMENT_CHAIN or (op == "select" and src.args[2] != 0) or (op == "slice" and src.args[2] not in (0, None)):
                raise ExportError(
                    f"method '{name}' slices a length read with .item() / int() from a value tandem cannot bind "
                    f"at the start of a call{where}; it binds a state tensor's first element "
                    f"(offset.view(-1)[0].item()): read it directly from the state"
                )
            src = src.args[0]
        target = buffers.get(getattr(src, "name", None))
        if target is None:
            raise ExportError(
                f"method '{name}' slices a length read with .item() / int() from a tensor that is not state "
                f"(an input or a value it computes){where}; tandem binds such lengths only from state tensors "
                "at the start of a call"
            )
        t = root.get_buffer(target)
        if t.dtype != torch.long:
            raise ExportError(
                f"method '{name}' slices a length read from '{name_of.get(_tensor_key(t), target)}', of dtype "
                f"{t.dtype}{where}; keep the offset an int64 tensor (torch.long)"
            )
        hi = None
        for cap, n_max in mine:
            if n_max is None:
                raise ExportError(f"method '{name}' slices cache[:off + n] with an n that has no maximum{where}")
            hi = cap - n_max if hi is None else min(hi, cap - n_max)
        if hi < 0:
            raise ExportError(
                f"method '{name}': a slice cache[:off + n]{where} is longer than the tensor ({mine[0][0]}) at the largest n: no offset fits"
            )
        label = name_of.get(_tensor_key(t), target)
        out.append((label, 0, hi, expr))
        tensors[expr] = (t, where)
    ep._tandem_dim_tensors = tensors
    return out


def _parameters(modules: list) -> list:
    """(name, tensor) for every parameter of the modules, under each of its names."""
    return [(n.removeprefix("owner."), p) for m in modules for n, p in m.named_parameters(remove_duplicate=False) if n.startswith("owner.")]


def export(
    module: Optional[nn.Module],
    methods: Mapping[str, Any],
    metadata: Optional[dict] = None,
    *,
    quantize: Optional[str] = None,
    quantize_group: int = QUANT_GROUP,
    quantize_skip: Skip = None,
    quantize_convs: Union[bool, str] = False,
    seed: int = 0,
    state_bounds: Optional[Mapping[str, Union[int, tuple]]] = None,
) -> Program:
    """Export `methods` (name -> example inputs, or name -> tandem.Method) into one Program, with
    `metadata` (name -> bool, int, float, string, or lists/dicts of them) stored beside them.
    A constant method (no inputs, changes no state, returns only Python constants, e.g.
    `def get_max_seq_len(self): return 128`) is stored as the metadata entry of its name.

    quantize: None (float32 weights), "int8" (per output channel) or "int4" (per output channel and
    group of `quantize_group` k, default 32): the weights of linear layers and embedding tables
    that are parameters are stored quantized (python/tandem/quantize.py); `quantize_skip` keeps
    some in float32: name substrings, or a function (parameter name, shape) -> True to skip.
    quantize_convs: True / "int8" (with "int8"), "bf16" or "int16" (any quantize): the big convs too (docs/ops.md)

    seed: the initial seed of the program's random generator (the `__rng__` state slot, added when a
    method draws random numbers: torch.randn, x.normal_(), ...; docs/ops.md, Random sampling).

    state_bounds: state path -> capacity, for state that a method grows (`self.k = torch.cat([self.k, k],
    dim=2)`) where the code gives it no bound (docs/ops.md, State that grows); for a Python int a method
    branches on, path -> (lo, hi) or hi, the values calls may reach (a call beyond them fails typed)."""
    specs = _normalize(module, methods)
    roots = {name: _traced(name, fn, inputs) for name, (fn, inputs, _) in specs.items()}
    for fn, _, _ in specs.values():
        _keep_source_lines(fn)
    users = ([module] if module is not None else []) + [r.owner for r in roots.values()]
    held_scopes = scopes(users, [fn for fn, _, _ in specs.values()])
    # The user's modules (and containers given as inputs, and the globals their code keeps) exactly as
    # they are now: put back after every trace, whether it returns or raises.
    before = Snapshot(users, tuple((f"{n}.{i}", c) for n, r in roots.items() for i, c in r._tandem_held.items()), held_scopes)
    try:
        # A number or bool that a method changes becomes state (tracing.Traced._after finds them): the
        # methods are traced again with a tensor standing for each one found.
        wanted: frozenset = frozenset()
        lazy: dict = {}  # place -> (holder, key, path, value before, slots, presence) of state the first call creates
        growing: dict = {}  # path -> growing.Growing: state a method grows (torch.cat onto it)
        for rounds in range(6):
            counters = {}  # (holder, key) -> the tensor standing for a Python number, shared by the methods
            for r in roots.values():
                r.growing.clear()
                r.growing.update(growing)
                r.bind(counters, wanted, held_scopes, lazy)
            name_of = _names_of(module, list(roots.values()))
            exported, constants, created = {}, {}, []

            def again(last=rounds == 5, wanted=wanted):  # state found that is not bound: this round's traces are not kept
                return not last and any(p not in wanted for r in roots.values() for p in r.discovered)

            for name, (fn, inputs, dynamic) in specs.items():
                try:
                    exported[name] = _export_one(name, roots[name], inputs, dynamic, name_of, constants, again)
                finally:
                    before.restore()
            found = {place for r in roots.values() for place in r.discovered}
            new_lazy = {place: c for r in roots.values() for place, c in r.created_later.items() if place not in lazy}
            new_grown = add_growing(growing, roots, state_bounds or {})  # state a method grows (growing.py)
            for r in roots.values():
                r.discovered.clear()
                r.created_later.clear()
            if found <= wanted and not new_lazy and not new_grown:
                break
            wanted = wanted | found
            # State a first call creates (self.hc = None, then `out, self.hc = self.lstm(x, self.hc)`): slots
            # of the shapes it makes, and whether it exists yet, a bool the methods are versions of.
            for place, (holder, key, path, absent, shapes) in new_lazy.items():
                lazy[place] = (holder, key, path, absent, zeros_of(shapes), {"exists": False})
        params = _parameters(list(roots.values())) if quantize is not None or quantize_convs else []
        bounds = {p: b for p, b in (state_bounds or {}).items() if p not in growing}  # Python ints' values (steering.py)
        whens = check_counters(_export_one, specs, roots, exported, name_of, constants, before, steering_bounds(bounds))
        check_bounds(state_bounds or {}, growing, whens)
        window_versions(_export_one, specs, roots, growing, exported, whens, name_of, constants, before)
        check_settled(_export_one, specs, roots, name_of, before)
        for name, root in roots.items():
            created += [(name, *c) for c in root.created]
        exported = {name: e for name, e in exported.items() if e is not None}
    finally:
        before.restore()
        for r in roots.values():
            r.forget()

    # State = every buffer any method mutates; one slot per tensor, shared by every method.
    states: dict = {}
    for name, (ep, tensors, mutated, _) in exported.items():
        for t in mutated.values():
            key = _tensor_key(t)
            if key not in states:
                if t.dtype not in DTYPE_CODE:
                    raise ExportError(
                        f"state '{name_of.get(key, '?')}' has dtype {t.dtype}; tandem supports {SUPPORTED_DTYPES}: "
                        "register it with one of those dtypes"
                    )
                states[key] = StateSpec(
                    name=name_of.get(key, f"state{len(states)}"),
                    tensor=t,
                    init=t.detach().clone().contiguous(),
                    dtype=DTYPE_CODE[t.dtype],
                    shape=tuple(t.shape),
                )

    add_rng_state(states, exported, seed)  # the random generator's slot, when a method draws (lowering/random.py)
    for method, path, line, deps in created:
        for key in deps:
            if key in states:
                raise ExportError(
                    f"method '{method}' creates '{path}' while it is traced{line}, from state '{states[key].name}', which "
                    "a method changes: eager keeps the value computed at the first call, a program would compute it in "
                    "every call. Create it before the export (run the code that creates it once), or keep it as state"
                )
    lowered = [lower_method(name, ep, tensors, states, _tensor_key, dims) for name, (ep, tensors, mutated, dims) in exported.items()]
    for ir in lowered:
        if ir.name in whens:
            add_whens(ir, whens[ir.name], states)
    tie_embeddings(lowered)
    quantize_methods(lowered, quantize, params, quantize_group, quantize_skip, quantize_convs)
    layout_methods(lowered)
    for ir in lowered:
        fuse_method(ir)
        plan_method(ir)
    for name in constants:
        if name in (metadata or {}):
            raise ExportError(f"constant method '{name}' and metadata entry '{name}' share a name: rename one of them")
    if not lowered:
        raise ExportError(
            f"every method ({', '.join(constants)}) returns constants only; a program needs at least one "
            "method that computes: give one, or store the constants with tandem.export(..., metadata={...})"
        )
    entries = growing_entry({**constants, **(metadata or {})}, growing, states)
    program = Program(list(states.values()), lowered, entries)
    _verify(program)
    return program


def _export_one(name: str, root: Traced, inputs: tuple, dynamic, name_of: dict, constants: dict, again=None):
    """torch.export of one method: (exported program, placeholder -> tensor, mutated placeholder ->
    tensor, dims), or None for a constant method (its value put in constants). again: a function that
    says, after the trace, whether the methods will be traced again (the trace found new state): then
    the trace is not lowered, and the result is None."""
    runtime = tuple(x for i, x in enumerate(inputs) if i not in root._tandem_held)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*erase_node.*")
        try:
            ep = _trace_values(name, root, runtime, _dynamic_for(name, root, inputs, dynamic))
            root.code = ep.graph_module.code
            if (root.perturb or root.preset) and not getattr(root, "keep", False):
                return None  # a check of the graph only (python_values)
            limits = getattr(ep, "_tandem_limits", [])
            _check_cond_branches(name, ep.graph_module)
            if again is not None and again():
                return None
            ep = decompose(ep)
            dims = _method_dims(name, ep)
            dims += _state_dims(name, ep, root, limits, dims, name_of)
        except ExportError:
            raise
        except Exception as e:  # torch's messages are long; keep the first lines
            inner = _export_error_in(e)
            if inner is not None:
                raise inner from None
            first = "\n".join(str(e).strip().splitlines()[:6])
            hint = ""
            low = str(e).lower()
            if "dynamic" in low or "data-dependent" in low or "guard" in low or "unbacked" in low:
                hint = (
                    " This usually means the method's control flow or shapes depend on input values (an "
                    "`if` on a tensor, .item(), .tolist(), nonzero, x[mask]); tandem exports a fixed graph: "
                    "use torch.where(cond, a, b) instead of `if`, and keep values as tensors."
                )
            raise ExportError(f"method '{name}': torch.export failed{_user_frame(e)}: {type(e).__name__}: {first}.{hint}") from e
    tensors = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.PARAMETER:
            tensors[spec.arg.name] = root.get_parameter(spec.target)
        elif spec.kind == InputKind.BUFFER:
            tensors[spec.arg.name] = root.get_buffer(spec.target)
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            tensors[spec.arg.name] = ep.constants[spec.target]
    mutated = {}
    for spec in ep.graph_signature.output_specs:
        if spec.kind == OutputKind.PARAMETER_MUTATION:
            t = root.get_parameter(spec.target)
            node = next(n for n in ep.graph.nodes if n.name == spec.arg.name)
            pname = spec.target.split(".")[-1]
            raise ExportError(
                f"method '{name}' mutates parameter '{name_of.get(_tensor_key(t), spec.target)}'"
                f"{source_line(node)}. Parameters are constants in tandem; register mutable state as "
                f"a buffer instead: self.register_buffer('{pname}', tensor)"
            )
        if spec.kind == OutputKind.BUFFER_MUTATION:
            mutated[spec.arg.name] = root.get_buffer(spec.target)
    if not runtime and not mutated and _constant_result(name, ep, constants):
        return None
    return ep, tensors, mutated, dims


def _check_cond_branches(name: str, gm) -> None:
    """torch.cond's branches are functional: one that writes one of its operands in place (a buffer, an
    input, or a view of one) is an ExportError naming the cond's line (torch's own error names neither)."""

    def operand(n) -> bool:
        while isinstance(n, torch.fx.Node) and n.op == "call_function" and getattr(n.target, "is_view", False):
            n = n.args[0]
        return isinstance(n, torch.fx.Node) and n.op == "placeholder"

    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not torch.ops.higher_order.cond:
            continue
        for branch in node.args[1:3]:
            sub = getattr(gm, branch.target)
            for n in sub.graph.nodes:
                schema = getattr(n.target, "_schema", None) if n.op == "call_function" else None
                if schema is not None and schema.is_mutable and n.args and operand(n.args[0]):
                    raise ExportError(
                        f"method '{name}': a branch of torch.cond writes a tensor in place ({n.target.__name__})"
                        f"{source_line(node)}; torch.cond's branches are functional: return the new value from both "
                        "branches and write it after the cond (self.buf.copy_(new))"
                    )
            _check_cond_branches(name, sub)


def _export_error_in(e: BaseException):
    """An ExportError that torch wrapped in its own exception while tracing, or None."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, ExportError):
            return e
        e = e.__cause__ or e.__context__
    return None


def _traced(name: str, fn, inputs: tuple) -> Traced:
    """The wrapper torch.export traces for one method (tracing.Traced)."""
    if isinstance(fn, nn.Module):
        owner, call_owner, target = fn, True, fn.forward
    else:
        owner = getattr(fn, "__self__", None)
        if owner is None and isinstance(fn, functools.partial):
            # a function of a module: functools.partial(increment_steps, model.mimi, increment=16)
            owner = next((a for a in list(fn.args) + list(fn.keywords.values()) if isinstance(a, nn.Module)), None)
        if not isinstance(owner, nn.Module):
            raise ExportError(
                f"method '{name}': {fn!r} is neither an nn.Module nor a bound method of one; "
                "pass tandem.Method(module, inputs), tandem.Method(module.some_method, inputs), or for a function "
                "that takes the module, tandem.Method(functools.partial(function, module), inputs)"
            )
        call_owner, target = getattr(fn, "__name__", None) == "forward", fn
    held = {i: x for i, x in enumerate(inputs) if is_held(x)}
    return traced(name, fn, owner, call_owner, inputs, held, arg_names(target))


def _names_of(module: Optional[nn.Module], roots: list) -> dict:
    """tensor key -> the first name it has: under the user's module, then under each method's
    owner (parameters, buffers, then tensors held in objects and containers, by their path)."""
    names = {}
    if module is not None:
        for n, t in list(module.named_buffers(remove_duplicate=False)) + list(module.named_parameters(remove_duplicate=False)):
            names.setdefault(_tensor_key(t), n)
    for r in roots:
        for n, t in list(r.named_buffers(remove_duplicate=False)) + list(r.named_parameters(remove_duplicate=False)):
            if n.startswith("owner."):
                names.setdefault(_tensor_key(t), n.removeprefix("owner."))
    if module is not None:
        for _, _, v, path in Snapshot([module]).tensors:
            for p, t in _tensors_in(v, path):
                names.setdefault(_tensor_key(t), p)
    for r in roots:
        for name, path in r._held_names.values():
            names.setdefault(_tensor_key(r.get_buffer(name)), path)
    return names


def _dynamic_for(name: str, root: Traced, inputs: tuple, dynamic):
    """The dynamic_shapes torch.export takes for `root` (whose forward takes the inputs in order),
    and each Dim's name recorded for _method_dims."""
    if dynamic is None:
        return None
    if isinstance(dynamic, dict):  # by argument name: in the order of the method's parameters
        params = root._arg_names
        unknown = set(dynamic) - set(params)
        if unknown:
            raise ExportError(f"method '{name}': dynamic_shapes names {sorted(unknown)}, which are not arguments of the method {params}")
        dynamic = tuple(dynamic.get(p) for p in params[: len(inputs)])
    dynamic = tuple(dynamic)
    if len(dynamic) != len(inputs):
        raise ExportError(
            f"method '{name}': dynamic_shapes has {len(dynamic)} entries for {len(inputs)} inputs; give one per input "
            "(None for a static one)"
        )
    held = [i for i in root._tandem_held]
    for i in held:
        if dynamic[i] is not None:
            raise ExportError(
                f"method '{name}': dynamic_shapes gives input {i} a dynamic dim, but that input is state "
                "held by the method (a container of tensors), not a run-time input: give None for it"
            )
    dynamic = tuple(d for i, d in enumerate(dynamic) if i not in root._tandem_held)
    for i, spec in enumerate(dynamic):
        items = spec.items() if isinstance(spec, dict) else enumerate(spec or ())
        for d, dim in items:
            if dim is not None and hasattr(dim, "__name__"):
                _dim_names[(name, (i, int(d)))] = dim.__name__
                hi = getattr(dim, "max", None)
                if hi is None or not isinstance(hi, int) or hi >= 2**31:
                    raise ExportError(
                        f"method '{name}': dynamic dim '{dim.__name__}' (input {i} dim {d}) has no maximum; tandem "
                        f"plans memory at the maximum, so give one: torch.export.Dim('{dim.__name__}', "
                        f"min={getattr(dim, 'min', 1)}, max=...) (below 2^31)"
                    )
    if type(root).forward is Traced.forward:  # forward(self, *args)
        return {"args": dynamic}
    import inspect

    params = list(inspect.signature(root.forward).parameters.values())
    for k, p in enumerate(params):  # forward(self, a, *rest): torch.export takes rest's specs as one tuple
        if p.kind == inspect.Parameter.VAR_POSITIONAL:
            return dynamic[:k] + (dynamic[k:],)
    return dynamic


def _constant_result(name: str, ep, constants: dict) -> bool:
    """A method whose outputs are all Python constants (no tensors, at least one value): puts its
    value (the returned structure, tuples as lists) in constants[name] and says True."""
    from torch.export.graph_signature import ConstantArgument
    from torch.utils import _pytree as pytree

    from .program import check_metadata

    specs = [s for s in ep.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
    if not specs or not all(isinstance(s.arg, ConstantArgument) for s in specs) or all(s.arg.value is None for s in specs):
        return False
    value = pytree.tree_unflatten([s.arg.value for s in specs], ep.call_spec.out_spec)
    try:
        constants.update(check_metadata({name: _as_json(value)}))
    except ExportError as e:
        raise ExportError(f"constant method '{name}' returns {value!r}, which tandem cannot store: {e}") from None
    return True


def _as_json(value):
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    return value


def _keep_source_lines(fn) -> None:
    """torch.export records, for each op, only the stack frames of functions named `forward`: also
    keep those of an exported method with another name, so errors can name its lines."""
    register = getattr(torch.fx.proxy, "_register_stack_trace_anchor", None)
    func = getattr(fn, "__func__", None)
    if register is not None and func is not None and func.__name__ != "forward":
        register(func)


def _user_frame(e: BaseException) -> str:
    """' (at file.py:12: code)' for the innermost frame of the user's code in e's traceback (the
    line whose tracing failed), or ''."""
    import traceback

    seen = set()
    while e is not None and id(e) not in seen:  # torch may re-raise: look through the causes too
        seen.add(id(e))
        frames = [f for f in traceback.extract_tb(e.__traceback__) if is_user_file(f.filename)]
        if frames:
            break
        e = e.__cause__ or e.__context__
    else:
        return ""
    f = frames[-1]
    return f" (at {f.filename.split('/')[-1]}:{f.lineno}: {(f.line or '').strip()})"


def _verify(program: Program) -> None:
    """Run the runtime's verifier on the file, so an export never returns a program that the
    runtime would reject; a rejection names the method, the op and the user's source line."""
    try:
        verify(lay_out_program(program.states, program.methods, program.metadata))
    except TandemError as e:
        where = ""
        m = re.search(r"method '([^']+)' op (\d+)", str(e))
        if m:
            ops = file_ops(program.method(m.group(1)))
            k = int(m.group(2))
            if k < len(ops):
                where = f" (tandem op '{ops[k].name}'{ops[k].where})"
        raise ExportError(
            f"the exported program does not pass the runtime's verifier{where}: {e}. This is a bug in "
            "tandem's exporter; please report it with the model"
        ) from e
