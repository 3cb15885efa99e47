"""The driver: lower_method walks one exported graph node by node, folding what is constant, handing
each call to its handler (core.HANDLERS), computing sizes used as values per call, and ends with the
write-back of every mutated state and the check that nothing reads torch.empty() before it is written."""

from __future__ import annotations

import operator

import torch
from torch.export.graph_signature import InputKind, OutputKind

from .. import schema
from ..ir import BOOL, DTYPE_CODE, DTYPE_SIZE, F32, I64, STATE, ExportError, MethodIR, Op, Storage, SymDim, Value, same_shape
from .complex_pairs import lower_complex
from .core import (
    _BOUND,
    _DIM_MAX,
    _DIM_MIN,
    _DIM_NAMES,
    FOLD_MAX_NUMEL,
    HANDLERS,
    Lowering,
    _dtype_of,
    _has_size,
    _meta,
    _require_static,
    _shape_of,
    _size,
    aten,
    bind_sizes,
    handles,
    unbound_sizes,
)
from .elementwise import COMPARE
from .provenance import source_line
from .shape import EMPTY, FOLDABLE_EXTRA


@handles(aten._assert_tensor_metadata.default, aten._assert_scalar.default)
def _assertion(L, node, args, kwargs):
    return None  # export-time shape/dtype assertions: the verifier checks these at load


@handles(aten._assert_async.msg, aten._assert_async.default)
def _assert_async(L, node, args, kwargs):
    """A runtime assertion: a `guard` op, failing the call (TDM_ERR_GUARD, before any state write)
    unless cond is true. tandem writes one for each Python branch on a tensor value it specialized
    (python/tandem/runtime_values.py), with the branch's line in the message."""
    cond = args[0]
    msg = args[1] if len(args) > 1 else ""
    line = int(msg.split()[-1]) if isinstance(msg, str) and msg.startswith("tandem-guard ") else 0
    if not isinstance(cond, Value):
        cond = L.scalar(bool(cond), BOOL)
    if cond.numel != 1:
        L.fail(f"an assertion on {cond.numel} values; it takes one")
    if cond in L.const_tensor:
        if bool(L.const_tensor[cond].reshape(())):
            return None  # holds in every call
        L.fail("a branch on a tensor value goes, in every call, the other way than when it was exported")
    cond = L.cast(L.reshape(cond, ()), BOOL)
    L.ops.append(Op("guard", [cond], [], [line], [], source_line(node)))
    return None


def _fold(L: Lowering, node, args, kwargs):
    """Run the node with torch on constant inputs; returns a Value or None."""

    def conv(a):
        if isinstance(a, Value):
            return L.const_tensor[a]
        if isinstance(a, (list, tuple)):
            return type(a)(conv(x) for x in a)
        return a

    if _meta(node) is not None and unbound_sizes(node):  # x[mask] of constants: its size is the folded result's
        if _has_size((args, kwargs)) or _has_symdim((args, kwargs)):
            return None
        res = node.target(*conv(args), **{k: conv(v) for k, v in kwargs.items()})
        bind_sizes(node, res.shape)
    shape = _shape_of(node) if _meta(node) is not None else ()
    if _has_size((args, kwargs)) and not (node.target in FOLDABLE_EXTRA and any(isinstance(d, SymDim) for d in shape)):
        return None  # a size used as a value: computed per call by the handler, never frozen at the maximum
    if any(isinstance(d, SymDim) for d in shape):
        # A result whose size depends on a dim is folded only when the result at any size is the
        # start of the result at the maximum: arange with a static start and step, a dynamic end.
        end = 0 if node.target == aten.arange.default else 1
        others = [a for i, a in enumerate(args) if i != end] + list(kwargs.values())
        if node.target not in FOLDABLE_EXTRA or any(isinstance(a, SymDim) for a in others):
            return None
        res = node.target(*conv(args), **{k: conv(v) for k, v in kwargs.items()})
        return L.const(res.contiguous()).view(shape)
    if _has_symdim((args, kwargs)):
        # a value that depends on a dynamic dim (e.g. a count plus n): torch would see the dim's
        # maximum (a SymDim is an int at the maximum), so it is computed by the runtime, not here
        return None
    res = node.target(*conv(args), **{k: conv(v) for k, v in kwargs.items()})
    if isinstance(res, torch.Tensor):
        if res.numel() > FOLD_MAX_NUMEL and not any(isinstance(a, Value) for a in args):
            return None
        return L.const(res)
    return None


# Ops whose result may have a size torch could not know (x[mask]) that the handler, or folding, computes
# from constants (bind_sizes); the handler calls _require_static where it cannot.
SIZES_FROM_CONSTANTS = {aten.index.Tensor}


# Python arithmetic on sizes that gives a float (n / 2, n * 0.5) or a bool (n > 3): computed per call.
SIZE_OPS = {
    operator.mul: "mul",
    operator.add: "add",
    operator.sub: "sub",
    operator.truediv: "div",
    operator.neg: "neg",
    operator.gt: "gt",
    operator.ge: "ge",
    operator.lt: "lt",
    operator.le: "le",
    operator.eq: "eq",
    operator.ne: "ne",
    torch.sym_float: None,
}


def _size_op(L, node, args) -> Value:
    name = SIZE_OPS[node.target]
    if name is None:  # sym_float(n)
        return L.operand(args[0], F32)
    if name in COMPARE:
        cd = F32 if any(isinstance(a, float) or isinstance(a, Value) and a.dtype == F32 for a in args) else I64
        return L.emit(name, [L.operand(a, cd) for a in args], BOOL, ())
    return L.emit(name, [L.operand(a, F32) for a in args], F32, ())


def _unread_items(graph) -> set:
    """`.item()` nodes whose value reaches only torch's own assertions on it (through size
    arithmetic), with those nodes: what is left of a bool() that tandem specialized with a guard
    (runtime_values.py) after torch read the value; nothing a method computes depends on them."""
    out = set()
    for node in graph.nodes:
        if node.target is not aten._local_scalar_dense.default:
            continue
        chain, todo, ok = {node}, list(node.users), True
        while todo and ok:
            u = todo.pop()
            if u in chain:
                continue
            chain.add(u)
            if u.target is aten._assert_scalar.default:
                continue
            ok = isinstance(u.meta.get("val"), (torch.SymInt, torch.SymBool, torch.SymFloat))
            todo.extend(u.users)
        if ok:
            out |= chain
    return out


def lower_method(name: str, ep, tensors: dict, states: dict, key_of, dims: list = ()) -> MethodIR:
    """Lower one exported (and decomposed) program to a MethodIR with unplanned scratch. `dims`:
    the method's dynamic dims, [(name, min, max, sympy symbol)]."""
    _DIM_MAX.clear()
    _DIM_MAX.update({sym: mx for _, _, mx, sym in dims})
    _DIM_MIN.clear()
    _DIM_MIN.update({sym: mn for _, mn, _, sym in dims})
    _DIM_NAMES.clear()
    _DIM_NAMES.update({sym: n for n, _, _, sym in dims})
    _BOUND.clear()
    L = Lowering(name, states, key_of)
    gm = ep.graph_module
    sig = ep.graph_signature
    kinds = {s.arg.name: s for s in sig.input_specs}
    env: dict = {}
    L.env = env  # FX node -> its Value: for handlers that recognize a pattern of nodes (_cdist_matmul)
    inputs = []
    state_values: dict = {}  # StateSpec -> Value of its old contents
    unread = _unread_items(gm.graph)
    L.lower_subgraph = lambda sub, operands: _lower_subgraph(L, sub, operands, dim_states)
    dim_states = {}  # a dim bound from the state at the start of a call (export._state_dims): its .item() is no op
    for sym, (t, where) in getattr(ep, "_tandem_dim_tensors", {}).items():
        if key_of(t) not in states:
            raise ExportError(
                f"method '{name}' slices a length read from a tensor that no method changes"
                f"{where}; tandem binds such a length from the state "
                "at the start of each call: keep the offset in state that a method advances, or slice a "
                "fixed length"
            )
        dim_states[sym] = states[key_of(t)]
    lower_complex(name, gm.graph)
    for node in gm.graph.nodes:
        L.node = node
        if node.op == "placeholder":
            spec = kinds.get(node.name)
            if (spec is None or spec.kind == InputKind.USER_INPUT) and node.meta.get("val") is None:
                env[node] = None  # an example input given as None: not an input of the method
            elif spec is None or spec.kind == InputKind.USER_INPUT:
                v = L.new(_dtype_of(node), _shape_of(node))
                v.storage.is_input = True
                env[node] = v
                inputs.append((node.name, v))
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                t = tensors[node.name]
                st = states.get(key_of(t))
                if t.is_complex():  # read as its pairs (lowering/complex_pairs.py); complex state is refused earlier
                    t = torch.view_as_real(t.resolve_conj())
                if st is not None:
                    v = Value(st.dtype, st.shape, Storage(STATE, st.nbytes, state=st))
                    state_values[st] = v
                    env[node] = v
                elif not node.users:
                    env[node] = None  # held by the module, not read by this method: not stored
                else:
                    L.node = next(iter(node.users))  # an error names the first line that reads it
                    env[node] = L.const(t, f"tensor '{spec.target}'")
            else:
                L.fail(f"input kind {spec.kind.name} is not supported")
        elif node.op == "call_function":
            _lower_call(L, node, env, unread, dim_states)
        elif node.op == "output":
            outs = node.args[0]
        elif node.op == "get_attr":  # a subgraph: a branch of torch.cond (lowering/control.py), the body of torch.while_loop
            env[node] = getattr(gm, node.target)
        else:
            L.fail(f"graph node kind '{node.op}' is not supported")
    if L.unsupported:
        raise ExportError(
            f"method '{name}' uses operators tandem does not support yet:\n"
            + "\n".join(L.unsupported)
            + "\nSee docs/ops.md for the supported set."
        )

    L.node = None
    _check_empty_reads(L, {v.storage for o in (outs or []) if isinstance(o, torch.fx.Node) and o in env for v in _values_in(env[o])})
    user_outputs, mutations, written = [], [], []
    for spec, o in zip(sig.output_specs, outs):
        if spec.kind == OutputKind.USER_OUTPUT:
            if o is None:
                continue
            if not isinstance(o, torch.fx.Node):
                raise ExportError(
                    f"method '{name}' returns {o!r}; methods return tensors, a tuple of tensors or None (a method "
                    "that takes no inputs, changes no state and returns only constants is stored as metadata)"
                )
            v = env[o]
            if isinstance(v, int) and not isinstance(v, bool):  # a size returned: a 0-d int64 tensor of its value per call
                L.node = o
                v = L.scalar(v, I64)
                L.node = None
            user_outputs.append((spec.arg.name, v))
        elif spec.kind == OutputKind.BUFFER_MUTATION:
            t = tensors[next(s.arg.name for s in sig.input_specs if s.target == spec.target)]
            mutations.append((states[key_of(t)], env[o]))
        elif spec.kind == OutputKind.USER_INPUT_MUTATION:  # x.add_(1): the caller's x takes the new value
            v = env[o]
            if v.storage.is_input:
                L.ops.append(Op("copy", [v], [c := L.new(v.dtype, v.shape)]))
                v = c
            written.append((f"{spec.target}!", v))
        else:
            L.fail(f"output kind {spec.kind.name} is not supported")
    mutations += [finish() for finish in L.at_end]
    _finish(L, user_outputs, mutations)
    _finish(L, written, [])
    # the method's results, then one output '<input>!' per input it changes (written back to the
    # caller's tensor by the JS and Python model objects, docs/format.md)
    outputs = [("output" if len(user_outputs) == 1 else f"output{i}", v) for i, (_, v) in enumerate(user_outputs)] + written
    return MethodIR(name, inputs, outputs, L.ops, dims=list(dims), dim_states=dim_states)


def _lower_call(L: Lowering, node, env: dict, unread: set, dim_states: dict) -> None:
    """Lower one call_function node of a method's graph, or of a branch of torch.cond, into env[node]."""
    args = torch.fx.node.map_arg(node.args, lambda n: env[n])
    kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
    val = node.meta.get("val")
    if node in unread:  # read and unused (a branch tandem specialized, runtime_values.py)
        env[node] = None
        return
    if node.target is aten._local_scalar_dense.default and getattr(getattr(val, "node", None), "expr", None) in dim_states:
        env[node] = _size(val, node)  # bound by the runtime before the first op
        return
    if node.target is aten._local_scalar_dense.default:
        _require_static(node)  # .item(): says what to do instead
    if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool) and node.target is not operator.getitem:
        L.node = node
        env[node] = _size(val, node)  # a size (sym_size, n + 1, ...): an int or a SymDim
        return
    if isinstance(val, (torch.SymFloat, torch.SymBool)) and node.target in SIZE_OPS:
        L.node = node  # a float or a comparison computed from sizes: a 0-d value per call
        env[node] = _size_op(L, node, args)
        return
    if isinstance(val, torch.SymBool) or node.target in (torch.ops.aten.sym_constrain_range_for_size.default,):
        env[node] = None  # a guard on sizes: the verifier checks sizes over the dims' bounds
        return
    if node.target is operator.getitem:
        r = args[0][args[1]]
        if r is None:
            L.fail("uses an auxiliary output (e.g. layer norm's mean/rstd) that tandem does not produce")
        env[node] = r
        return
    if node.target not in SIZES_FROM_CONSTANTS:
        _require_static(node)
    all_const = all(v in L.const_tensor for v in _values_in((args, kwargs)))
    handler = HANDLERS.get(node.target) or HANDLERS.get(str(node.target))  # a library's own op by its name
    if torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ()) or isinstance(node.target, torch._ops.HigherOrderOperator):
        all_const = False  # a random op draws in every call: never folded into a constant; torch.cond lowers its branches
    # torch.empty() has no inputs but is no constant: run here, its uninitialized bytes would be stored
    if all_const and (handler is not None or node.target in FOLDABLE_EXTRA) and _meta(node) is not None and node.target not in EMPTY:
        folded = _fold(L, node, args, kwargs)
        if folded is not None:
            env[node] = folded
            return
    if handler is None:
        L.unsupported.append(f"  {node.target}{source_line(node)}")
        env[node] = _stand_in(L, node.meta.get("val"))  # lets lowering go on to list every unsupported op
        return
    env[node] = handler(L, node, args, kwargs)


def _lower_subgraph(L: Lowering, gm, operands: list, dim_states: dict) -> list:
    """Lower a subgraph (a branch of torch.cond) whose placeholders take `operands`, appending its
    ops to L.ops; returns its results (Values, or ints for sizes)."""
    env: dict = {}
    unread = _unread_items(gm.graph)
    places = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(places) != len(operands):
        L.fail(f"a branch takes {len(places)} operands and is given {len(operands)}: a bug in tandem's exporter")
    outs = ()
    for node in gm.graph.nodes:
        L.node = node
        if node.op == "placeholder":
            env[node] = operands[places.index(node)]
        elif node.op == "call_function":
            _lower_call(L, node, env, unread, dim_states)
        elif node.op == "get_attr":
            env[node] = getattr(gm, node.target)
        elif node.op == "output":
            outs = node.args[0]
        else:
            L.fail(f"graph node kind '{node.op}' is not supported")
    outs = [outs] if isinstance(outs, torch.fx.Node) else outs
    return [env[o] if isinstance(o, torch.fx.Node) else o for o in outs]


def _stand_in(L, val):
    if isinstance(val, (list, tuple)):
        return [_stand_in(L, v) for v in val]
    if isinstance(val, torch.Tensor):
        return L.new(DTYPE_CODE.get(val.dtype, F32), tuple(int(d) for d in val.shape))
    return L.new(F32, ())


def _has_symdim(obj) -> bool:
    if isinstance(obj, SymDim):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_has_symdim(x) for x in obj)
    if isinstance(obj, dict):
        return any(_has_symdim(x) for x in obj.values())
    return False


def _values_in(obj):
    if isinstance(obj, Value):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _values_in(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _values_in(x)


def _finish(L: Lowering, user_outputs: list, mutations: list):
    """Write each mutated buffer's new value into its state slot, at the end of the method.

    Values that still point at an old state slot (an output, or the source of another state's
    write) are copied to scratch first, so every write reads the values of before the writes.
    """
    written = {st for st, _ in mutations}

    def materialize(v: Value) -> Value:
        if v.storage.kind == STATE and v.storage.state in written:
            copy = L.new(v.dtype, v.shape)
            L.ops.append(Op("copy", [v], [copy]))
            return copy
        return v

    for i, (n, v) in enumerate(user_outputs):
        user_outputs[i] = (n, materialize(v))
    sources = [(st, materialize(v)) for st, v in mutations]
    for st, v in sources:
        if v.storage.kind == STATE and v.storage.state is st and v.offset == 0 and v.nbytes == st.nbytes:
            continue  # written back unchanged
        if v.dtype != st.dtype or not same_shape(v.shape, st.shape):
            v = L.expand(L.cast(v, st.dtype), st.shape)
        dst = Value(st.dtype, st.shape, Storage(STATE, st.nbytes, state=st))
        L.ops.append(Op("copy", [v], [dst], where="(write-back of state '%s')" % st.name))


def _check_empty_reads(L, kept: set) -> None:
    """A torch.empty() value is read only as the base of an update (x[:2] = a, x.scatter_(..),
    x.index_copy_(..)): it is filled with zeros first (any contents are what torch.empty may give),
    so the bytes the update does not write are defined. Any other read is an ExportError naming the
    line, since its result would depend on bytes nothing wrote. A read whose result nothing uses (the
    slice `x[..., :k].copy_(a)` takes of torch.empty() for its shape alone) is dropped: it reads nothing
    that matters. `kept`: the storages of the method's outputs and state writes."""
    if not L.empty:
        return
    live, used = set(kept), set()  # storages read by an op that is itself used, or kept
    for op in reversed(L.ops):
        if any(o.storage in live for o in op.outs):
            used.add(id(op))
            live.update(v.storage for v in op.ins)
    ops, filled = [], set()
    for op in L.ops:
        if id(op) not in used and any(v.storage in L.empty and v.storage not in filled for v in op.ins):
            continue
        for i, v in enumerate(op.ins):
            s = v.storage
            if s not in L.empty or s in filled or v.nbytes == 0:
                continue  # reading no bytes reads nothing undefined
            if i == 0 and op.name in schema.IN_PLACE_FIRST:
                whole = Value(v.dtype, (int(s.nbytes) // DTYPE_SIZE[v.dtype],), s)
                ops.append(Op("fill", [], [whole], [] if v.dtype == F32 else [0], [0.0] if v.dtype == F32 else [], op.where))
                filled.add(s)
            else:
                raise ExportError(
                    f"method '{L.method}': op '{op.name}' reads the contents of torch.empty() (or "
                    f"new_empty/empty_like) before anything wrote them{op.where}: its result would be "
                    "undefined; write every element first, or use torch.zeros"
                )
        ops.append(op)
    L.ops[:] = ops
