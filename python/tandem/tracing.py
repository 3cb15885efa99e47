"""The tracing contract of tandem.export: what a method sees while torch.export traces it, and
what the user's module looks like afterwards.

- Parameters stay parameters and buffers stay buffers (`self.parameters()`, `self.buffers()`,
  `named_*` answer as in eager).
- A tensor the code keeps anywhere (a module attribute, a buffer, an object's attribute, an entry
  of a dict or list, an element of a tuple, nested; moshi's `_streaming_state` objects,
  pocket-tts' dict of dicts) is seen by torch.export as a buffer of the traced wrapper, so an
  in-place write to it, or a new tensor of the same shape stored in its place, is a state update.
  The tensor object is the state: one slot, shared by every method that reaches it.
- Whatever the code registers, assigns or replaces while it is traced is undone before torch
  sees the module again, and the whole tree is put back when the export returns or raises
  (`Snapshot`), so the module after export is the module before: the same objects in every
  attribute, buffer, parameter and container.
- A tensor the code creates and stores while traced (a buffer registered lazily, on first read) is
  computed by the program (a constant when it comes from weights and unchanged buffers); one
  that is computed from the method's inputs, changed in place after it is stored, or computed
  from state that a method changes would differ from eager after the first call: ExportError.
- A Python int kept beside the tensors that a method changes (an offset, a step counter) would
  stay at its traced value in every call: ExportError naming it.
"""

from __future__ import annotations

import inspect
import traceback
from typing import Any, Callable, Optional

import torch
from torch import nn

from .ir import ExportError

_MODULE_INTERNALS = frozenset(vars(nn.Module()))
_ATOMS = (str, bytes, bool, int, float, complex, type(None), type, torch.dtype, torch.device, torch.Size)
_MAX_DEPTH = 16


def _is_fake(t) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def _plain_object(obj) -> bool:
    """An object whose attributes are followed: a dataclass, a cache object, a state object (not a
    module, tensor, function or anything of Python's or torch's own)."""
    mod = type(obj).__module__ or ""
    return (
        hasattr(obj, "__dict__")
        and not callable(obj)
        and not isinstance(obj, (nn.Module, torch.Tensor, type))
        and mod.split(".")[0] not in ("builtins", "torch", "numpy", "sympy", "functools", "typing", "abc")
    )


def _has_tensor(v) -> bool:
    """A tensor (not a parameter), or a tuple holding one (through tuples)."""
    if isinstance(v, torch.Tensor):
        return not isinstance(v, nn.Parameter)
    return isinstance(v, tuple) and any(_has_tensor(x) for x in v)


def _tensors_in(v, path: str, depth: int = 0, seen: Optional[set] = None):
    """(path, tensor) for every tensor inside v: tuples, lists, dicts, plain objects."""
    seen = set() if seen is None else seen
    if isinstance(v, torch.Tensor):
        if not isinstance(v, nn.Parameter):
            yield path, v
        return
    if depth > _MAX_DEPTH or id(v) in seen or isinstance(v, _ATOMS + (nn.Module,)):
        return
    seen.add(id(v))
    if isinstance(v, (list, tuple)):
        items = enumerate(v)
    elif isinstance(v, dict):
        items = v.items()
    elif _plain_object(v):
        items = vars(v).items()
    else:
        return
    for k, x in list(items):
        yield from _tensors_in(x, f"{path}.{k}", depth + 1, seen)


class Snapshot:
    """Every place in a tree of modules (and of the containers given as `held`) that holds a
    value: each module's attributes, parameters, buffers and submodules, and the lists, dicts and
    plain objects reachable from its attributes (through tuples too). `restore()` puts every one
    back as it was; `tensors` lists the tensors kept outside parameters and buffers, `ints` the
    Python ints kept beside them."""

    def __init__(self, modules: list, held: tuple = ()):
        self.modules = []  # (module, path, __dict__, _parameters, _buffers, _modules, non-persistent names)
        self.holders = []  # (list or dict (an object's __dict__ too), copy of it, path)
        self.tensors = []  # (holder, key, value, path): a tensor, or a tuple holding tensors
        self.ints = []  # (holder, key, value, path)
        self.counters = []  # the ints of objects and containers (not of modules' own attributes)
        self._in_module = False
        self._seen: set = set()
        self._keep = []  # the walked objects, alive while ids are compared
        mods = set()
        for top in modules:
            for mname, mod in top.named_modules():
                if id(mod) in mods:
                    continue
                mods.add(id(mod))
                prefix = f"{mname}." if mname else ""
                for kind in ("_parameters", "_buffers"):
                    for k, t in getattr(mod, kind).items():
                        if t is not None and _is_fake(t):
                            raise ExportError(
                                f"module tensor '{prefix}{k}' is a FakeTensor (left in the module by an earlier trace of "
                                "another tool, or of a tandem older than this one); rebuild the module, or load its "
                                "state_dict again, before exporting"
                            )
                self.modules.append(
                    (
                        mod,
                        mname,
                        dict(vars(mod)),
                        dict(mod._parameters),
                        dict(mod._buffers),
                        dict(mod._modules),
                        set(mod._non_persistent_buffers_set),
                    )
                )
                d = vars(mod)
                for k, v in list(d.items()):
                    if k not in _MODULE_INTERNALS:
                        self._in_module = True
                        self._slot(d, k, v, prefix + k, 0)
        for path, obj in held:
            self._walk(obj, path, 0)

    def _slot(self, holder, key, v, path: str, depth: int) -> None:
        if isinstance(v, nn.Parameter):
            return
        if _has_tensor(v):
            for p, t in _tensors_in(v, path):
                if _is_fake(t):
                    raise ExportError(
                        f"'{path}' holds a FakeTensor (left by an earlier trace of another tool, or of a "
                        "tandem older than this one); rebuild the module or its state before exporting"
                    )
            self.tensors.append((holder, key, v, path))
            if isinstance(v, tuple):
                self._walk(v, path, depth)
            return
        if isinstance(v, int) and not isinstance(v, bool):
            self.ints.append((holder, key, v, path))
            if not self._in_module:
                self.counters.append((holder, key, v, path))
            return
        self._walk(v, path, depth)

    def _walk(self, obj, path: str, depth: int) -> None:
        self._in_module = False
        if depth > _MAX_DEPTH or isinstance(obj, _ATOMS + (nn.Module, torch.Tensor)) or id(obj) in self._seen:
            return
        self._seen.add(id(obj))
        self._keep.append(obj)
        if isinstance(obj, tuple):
            for i, x in enumerate(obj):
                if not isinstance(x, torch.Tensor):
                    self._walk(x, f"{path}.{i}", depth + 1)
            return
        if isinstance(obj, list):
            holder = obj
            self.holders.append((obj, list(obj), path))
            items = list(enumerate(obj))
        elif isinstance(obj, dict):
            holder = obj
            self.holders.append((obj, dict(obj), path))
            items = list(obj.items())
        elif _plain_object(obj):
            holder = vars(obj)
            self.holders.append((holder, dict(holder), path))
            items = list(holder.items())
        else:
            return
        for k, x in items:
            self._slot(holder, k, x, f"{path}.{k}", depth + 1)

    def restore(self, tracing: bool = False) -> None:
        """Put every place back. tracing=True (inside torch.export's trace, whose stand-ins for the
        parameters and buffers are in the modules): of the parameters, buffers and submodules
        only those registered during the trace are removed (or set back to None)."""
        for holder, saved, _ in self.holders:
            if isinstance(holder, list):
                if len(holder) != len(saved) or any(a is not b for a, b in zip(holder, saved)):
                    holder[:] = saved
            else:
                _restore_dict(holder, saved)
        for mod, _, d, params, buffers, modules, npb in self.modules:
            for live, saved in ((mod._parameters, params), (mod._buffers, buffers), (mod._modules, modules)):
                if tracing:
                    for k in [k for k in live if k not in saved]:
                        del live[k]
                    for k, v in saved.items():
                        if v is None and live.get(k) is not None:
                            live[k] = None
                else:
                    _restore_dict(live, saved)
            if mod._non_persistent_buffers_set != npb:
                mod._non_persistent_buffers_set.clear()
                mod._non_persistent_buffers_set.update(npb)
            live = vars(mod)
            for k in [k for k in live if k not in d]:
                del live[k]
            for k, v in d.items():
                if live.get(k, _MISSING) is not v and (not tracing or k not in _MODULE_INTERNALS):
                    live[k] = v

    def changes(self):
        """(holder, key, path, value before, value now) for every place whose value is not the one it had
        (tensors compared by identity), including places added since."""
        out = []
        for holder, saved, path in self.holders:
            keys = range(max(len(holder), len(saved))) if isinstance(holder, list) else set(saved) | set(holder)
            for k in keys:
                before = _get(saved, k)
                now = _get(holder, k)
                if before is not now:
                    out.append((holder, k, f"{path}.{k}", before, now))
        for mod, mname, d, params, buffers, modules, _ in self.modules:
            prefix = f"{mname}." if mname else ""
            for live, saved in ((vars(mod), d), (mod._parameters, params), (mod._buffers, buffers)):
                for k in set(saved) | set(live):
                    if live is vars(mod) and k in _MODULE_INTERNALS:
                        continue
                    before, now = saved.get(k, _MISSING), live.get(k, _MISSING)
                    if before is not now:
                        out.append((live, k, prefix + k, before, now))
        return out


class _Missing:
    def __repr__(self):
        return "(absent)"


_MISSING = _Missing()


def _get(container, k):
    if isinstance(container, list):
        return container[k] if k < len(container) else _MISSING
    return container.get(k, _MISSING)


def _restore_dict(live: dict, saved: dict) -> None:
    for k in [k for k in live if k not in saved]:
        del live[k]
    for k, v in saved.items():
        if live.get(k, _MISSING) is not v:
            live[k] = v


def _subst(v, fakes: dict):
    """v with each tensor that has a stand-in replaced by it (tuples rebuilt)."""
    if isinstance(v, torch.Tensor):
        return fakes.get(id(v), v)
    if isinstance(v, tuple):
        items = [_subst(x, fakes) for x in v]
        if all(a is b for a, b in zip(items, v)):
            return v
        return type(v)(*items) if hasattr(v, "_fields") else type(v)(items)
    return v


def _proxy_node(t, tracer):
    """The FX node torch.export's tracer has for tensor t, or None."""
    if tracer is None or not isinstance(t, torch.Tensor):
        return None
    from torch.fx.experimental import proxy_tensor

    try:
        return proxy_tensor.get_proxy_slot(t, tracer).proxy.node
    except Exception:
        return None


def _tracer():
    from torch.fx.experimental import proxy_tensor

    try:
        mode = proxy_tensor.get_proxy_mode()
    except Exception:
        return None
    return getattr(mode, "tracer", None)


def _placeholders_of(node) -> set:
    """The placeholder nodes a node's value is computed from."""
    out, todo, seen = set(), [node], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "placeholder":
            out.add(n)
        todo.extend(n.all_input_nodes)
    return out


def _node_line(node) -> str:
    from .lowering.provenance import source_line

    return source_line(node)


def _stack_line() -> str:
    from .lowering.provenance import is_user_file

    frames = [f for f in traceback.extract_stack() if is_user_file(f.filename)]
    if not frames:
        return ""
    f = frames[-1]
    return f" (at {f.filename.split('/')[-1]}:{f.lineno}: {(f.line or '').strip()})"


_FOUND: dict = {}  # token of a Traced -> what its traces found
_TOKENS = __import__("itertools").count()


class Traced(nn.Module):
    """What torch.export traces for one method: its forward takes the method's tensor inputs and
    calls the method with the containers given among its example inputs; the owner's parameters
    and buffers are under 'owner.', and every tensor held outside them (Snapshot.tensors) is a
    buffer '_tandem_held_<i>' that the forward puts in its place while the method runs."""

    def __init__(self, method: str, fn: Callable, owner: nn.Module, call_owner: bool, args: tuple, held: dict, arg_names: list):
        super().__init__()
        self.owner = owner
        self._tandem_method = method
        self.__dict__["_tandem_fn"] = fn  # not a submodule, even when fn is the owner
        self._tandem_call_owner = call_owner
        self.tree = None  # set by bind()
        # What each trace found, kept outside the module: torch.export puts back the attributes of the
        # module it traces (copies of them) after the trace. So are the example inputs and the held
        # containers, which must stay the very objects the user gave (a copy of a dict of state
        # would not see the stand-ins put in the original during a second trace).
        self._tandem_token = next(_TOKENS)
        # args: the example inputs (tensors/None are run-time inputs, the rest held); held: position ->
        # the container given there
        _FOUND[self._tandem_token] = {"created": [], "observed": {}, "args": args, "held": held}
        self._arg_names = arg_names
        self.perturb: dict = {}  # place -> amount added to that int for this trace
        self.fill: set = set()  # places whose int the method sets (to a constant), not counts up
        self.code = ""  # the last trace's graph code (before decompositions)

    @property
    def _tandem_args(self) -> tuple:
        return _FOUND[self._tandem_token]["args"]

    @property
    def _tandem_held(self) -> dict:
        return _FOUND[self._tandem_token]["held"]

    @property
    def created(self) -> list:
        """(path, source line, real keys of the buffers it was computed from) of each tensor created
        and stored while traced."""
        return _FOUND[self._tandem_token]["created"]

    @property
    def observed(self) -> dict:
        """place -> (value at the start, value at the end) of each int the last trace changed."""
        return _FOUND[self._tandem_token]["observed"]

    def forget(self) -> None:
        _FOUND.pop(self._tandem_token, None)

    def bind(self, counters: Optional[dict] = None) -> dict:
        """Snapshot the owner and the held containers, register their tensors as buffers of this
        wrapper; returns {id(tensor): buffer name} (buffers of the owner keep their names)."""
        held = [(self._arg_names[i] if i < len(self._arg_names) else f"arg{i}", c) for i, c in self._tandem_held.items()]
        tree = Snapshot([self.owner], tuple(held))
        object.__setattr__(self, "tree", tree)
        names = {id(t): n for n, t in self.named_buffers(remove_duplicate=False)}
        self._held_names = {}
        for _, _, v, path in tree.tensors:
            for p, t in _tensors_in(v, path):
                if id(t) not in names:
                    names[id(t)] = f"_tandem_held_{len(self._held_names)}"
                    self.register_buffer(names[id(t)], t, persistent=False)
                self._held_names.setdefault(id(t), (names[id(t)], p))
        # Python ints of state objects: each has an int64 tensor, shared by every method (`counters`),
        # which becomes state when a method changes the int.
        self._counters = {}
        counters = {} if counters is None else counters
        for holder, key, v, path in tree.counters:
            t = counters.setdefault((id(holder), key), torch.tensor(v, dtype=torch.long))
            if id(t) not in self._held_names:
                name = f"_tandem_held_{len(self._held_names)}"
                self.register_buffer(name, t, persistent=False)
                self._held_names[id(t)] = (name, path)
            self._counters[(id(holder), key)] = (t, path)
        self._real_keys = {n: t for n, t in self.named_buffers(remove_duplicate=False)}
        return {name: path for name, path in self._held_names.values()}

    def counter_names(self) -> dict:
        """buffer name -> path of the int64 tensors standing for ints."""
        return {self._held_names[id(t)][0]: path for t, path in self._counters.values()}

    def forward(self, *args):
        return self._trace(*args)

    def _trace(self, *inputs):
        tree = self.tree
        tracer = _tracer()
        fakes = {i: self.get_buffer(name) for i, (name, _) in self._held_names.items()}
        input_nodes = {n for n in (_proxy_node(x, tracer) for x in inputs) if n is not None}
        buffer_nodes = {}
        for name, b in self.named_buffers(remove_duplicate=False):
            node = _proxy_node(b, tracer)
            if node is not None:
                buffer_nodes[node] = self._real_keys[name]
        self._stand_ins = {id(t) for t in list(self.parameters()) + list(self.buffers())}
        installed = {}
        for holder, key, v, path in tree.tensors:
            new = _subst(v, fakes)
            holder[key] = new
            installed[(id(holder), key)] = (new, path)
        for holder, key, v, path in tree.counters:
            if (id(holder), key) in self.perturb:
                holder[key] = v + self.perturb[(id(holder), key)]
        it = iter(inputs)
        args = [_subst(self._tandem_held[i], fakes) if i in self._tandem_held else next(it) for i in range(len(self._tandem_args))]
        versions: dict = {}

        def on_register(module, name, tensor):
            if isinstance(tensor, torch.Tensor):
                versions[id(tensor)] = (tensor._version, _stack_line())

        handle = nn.modules.module.register_module_buffer_registration_hook(on_register)
        try:
            if self._tandem_call_owner:
                out = self.owner(*args)
            else:
                out = self._tandem_fn(*args)
            handle.remove()
            self._after(tree, installed, versions, tracer, input_nodes, buffer_nodes)
        finally:
            handle.remove()
            tree.restore(tracing=True)
        return out

    def _after(self, tree: Snapshot, installed: dict, versions: dict, tracer, input_nodes, buffer_nodes) -> None:
        method = self._tandem_method
        # A state tensor replaced by a new one (state["first"] = torch.zeros_like(...)): a write. Every
        # new value is read before any is written (a swap of two state tensors stays a swap).
        writes = []
        for holder, key, _, path in tree.tensors:
            new, _ = installed[(id(holder), key)]
            self._write_back(new, _get(holder, key), path, writes)
        sources = [src.clone() if id(src) in self._stand_ins else src for _, src in writes]
        for (dst, _), src in zip(writes, sources):
            dst.copy_(src)  # the state slot takes the new value
        # Python ints changed by the method.
        self.observed.clear()  # in place: torch.export puts back attributes assigned while tracing
        for holder, key, before, path in tree.counters:
            place = (id(holder), key)
            start = before + self.perturb.get(place, 0)
            now = _get(holder, key)
            if type(now) is int and now == start and place not in self.fill:
                continue
            if type(now) is not int:
                raise ExportError(
                    f"method '{method}' sets the Python int '{path}' to {now!r}; an int kept beside the state can become "
                    "int64 state only when the method sets it to an int or adds an int to it"
                )
            self.observed[place] = (start, now)
            t = self.get_buffer(self._held_names[id(self._counters[place][0])][0])
            if place in self.fill:
                t.fill_(now)
            else:
                t.add_(now - start)
        for holder, key, before, path in tree.ints:
            now = _get(holder, key)
            if (id(holder), key) in self._counters:
                continue
            if now is not before and not (type(now) is int and now == before):
                raise ExportError(
                    f"method '{method}' changes the Python int '{path}' (from {before} to {now!r}); a program is traced "
                    f"once, so it would stay {before} in every call. Keep it in a tensor beside the state (e.g. "
                    f"torch.zeros((), dtype=torch.long), or a buffer) and update it in place (+= / copy_)"
                )
        # Tensors stored while traced: computed by the program, if that is what eager keeps.
        state_places = {(id(h), k) for h, k, _, _ in tree.tensors}
        for holder, key, path, before, now in tree.changes():
            if now is _MISSING or (id(holder), key) in state_places:
                continue
            for p, t in _tensors_in(now, path):
                if id(t) in self._stand_ins or (t._base is not None and id(t._base) in self._stand_ins):
                    continue  # a stand-in of a parameter, buffer or state, or a view of one
                self._created(p, t, versions, tracer, input_nodes, buffer_nodes)

    def _write_back(self, installed, now, path: str, writes: list) -> None:
        """Appends (state stand-in, new value) to writes when the place holds a new tensor."""
        method = self._tandem_method
        if now is installed:
            return
        if isinstance(installed, torch.Tensor):
            if isinstance(now, torch.Tensor) and now.shape == installed.shape and now.dtype == installed.dtype:
                writes.append((installed, now))
                return
            what = (
                f"a {now.dtype} tensor of shape {list(now.shape)}"
                if isinstance(now, torch.Tensor)
                else f"a {type(now).__name__}"
                if now is not _MISSING
                else "nothing (it was removed)"
            )
            raise ExportError(
                f"method '{method}' replaces state '{path}' ({installed.dtype}{list(installed.shape)}) with {what}; state "
                "keeps its dtype and shape: write into it in place (copy_, slice assignment) or store a tensor like it"
            )
        if isinstance(now, tuple) and len(now) == len(installed):
            for i, (a, b) in enumerate(zip(installed, now)):
                self._write_back(a, b, f"{path}.{i}", writes)
            return
        raise ExportError(
            f"method '{method}' replaces '{path}' (a tuple of state tensors) with "
            f"{type(now).__name__}; keep its structure and store tensors like its own"
        )

    def _created(self, path: str, t: torch.Tensor, versions: dict, tracer, input_nodes, buffer_nodes) -> None:
        method = self._tandem_method
        v0, line = versions.get(id(t), (0, ""))
        node = _proxy_node(t, tracer)
        line = line or _node_line(node)
        if t._version > v0 and t._base is None:
            raise ExportError(
                f"method '{method}' creates '{path}' while it is traced{line} and then changes it in place; state must "
                "exist before the export: create it in __init__ (register_buffer), or run the code that creates it "
                "once before tandem.export"
            )
        if node is None:
            return
        sources = _placeholders_of(node)
        if sources & input_nodes:
            raise ExportError(
                f"method '{method}' creates '{path}' from its inputs while it is traced{line}: eager keeps the value "
                "of the first call, a program computes it in every call. Create it before the export (in __init__, "
                "or by running the code once), or keep it as state that the method updates"
            )
        deps = {buffer_nodes[n] for n in sources if n in buffer_nodes}
        self.created.append((path, line, deps))


def traced(method: str, fn: Callable, owner: nn.Module, call_owner: bool, args: tuple, held: dict, names: list) -> Traced:
    """A Traced whose forward has the parameter names of the method's run-time inputs when it is a
    module's forward (so the exported inputs keep the user's names, e.g. `tokens`); `args_<i>`
    for another method, as torch.export names varargs."""
    if (
        not call_owner
        or len(names) < len(args)
        or any(
            p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            for p in _params(fn if isinstance(fn, nn.Module) else fn)[: len(args)]
        )
    ):
        return Traced(method, fn, owner, call_owner, args, held, names)
    runtime = [names[i] for i in range(len(args)) if i not in held]

    def forward(self, *inputs):
        return self._trace(*inputs)

    P = inspect.Parameter
    forward.__signature__ = inspect.Signature([P("self", P.POSITIONAL_OR_KEYWORD)] + [P(n, P.POSITIONAL_OR_KEYWORD) for n in runtime])
    cls = type("Traced", (Traced,), {"forward": forward})
    return cls(method, fn, owner, call_owner, args, held, names)


def _params(fn) -> list:
    try:
        target = fn.forward if isinstance(fn, nn.Module) else fn
        return list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return []


def arg_names(fn) -> list:
    try:
        return [p for p in inspect.signature(fn).parameters]
    except (TypeError, ValueError):
        return []


def is_held(x: Any) -> bool:
    """An example input that is state given to the method (a container of tensors), not a run-time input."""
    return not isinstance(x, (torch.Tensor, type(None))) and any(True for _ in _tensors_in(x, ""))
