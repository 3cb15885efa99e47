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
  Stored where None (or no dict entry) was, it is state the first call creates (`created_later`;
  export.py gives it slots and an `exists` bool the methods are versions of).
- A registered buffer the code replaces (`self.buf = self.buf + 1`, `setattr`, `.data =`) is a
  write of the new value into its state slot, as any state tensor replaced by a new one is.
- Every other value the code changes (a number, a bool, a string, None, in a module's attributes,
  its `training` flag, a container, or a global of the user's modules) is found by comparing them
  all around the trace: a number or bool becomes state (python_values.check_counters: counted, set,
  computed with at run time, or, for a bool the program branches on, one version of the method per
  value); anything else must leave the program the same from its new value (python_values.check_settled),
  else ExportError naming it. Nothing a call changes stays at its traced value.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

import torch
from torch import nn

from . import probe
from .growing import grew, growing_back, growing_views, grown_lists, hold_growing
from .ir import ExportError
from .runtime_values import TensorInt
from .runtime_values import _same as _same_read
from .snapshot import (  # noqa: F401 (_tensors_in: export's too)
    _MISSING,
    _MODULE_INTERNALS,
    _SCALARS,
    _VALUES,
    Snapshot,
    _get,
    _has_tensor,
    _plain_object,
    _same_value,
    _storage,
    _structure,
    _tensors_in,
)
from .watching import _stack_line, _watching


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
        _FOUND[self._tandem_token] = {
            "created": [],
            "observed": {},
            "probed": {},
            "discovered": {},
            "settled": {},
            "counters": {},
            "runtime": set(),
            "aliases": {},
            "lines": {},
            "lazy": {},
            "created_later": {},
            "grown": {},
            "growing": {},
            "args": args,
            "held": held,
        }
        self._arg_names = arg_names
        self.perturb: dict = {}  # place -> the value that number or bool has at the start of this trace
        self.fill: set = set()  # places whose int the method sets (to a constant), not counts up
        self.toggle: set = set()  # places whose bool the method negates
        self.preset: dict = {}  # place -> (holder, key, value) set before this trace (python_values.check_settled)
        self.code = ""  # the last trace's graph code (before decompositions)
        self.ranges: dict = {}  # place of a number read at run time -> the run (lo, hi) of its values this version is traced for
        self.regime: dict = {}  # path -> the static length a version is traced at (a window); else read from the state

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
    def probed(self) -> dict:
        """place of an int traced as a probe (steering._boxes) -> ("add", amount) or ("set", value):
        what the last trace did to it."""
        return _FOUND[self._tandem_token]["probed"]

    @property
    def observed(self) -> dict:
        """place -> (value at the start, value at the end) of each int the last trace changed."""
        return _FOUND[self._tandem_token]["observed"]

    @property
    def runtime(self) -> set:
        """The places of numbers that the methods compute with: each is a 0-d tensor (int64 or
        float32) while traced, read from its state slot and written back (python_values.check_counters)."""
        return _FOUND[self._tandem_token]["runtime"]

    @property
    def created_later(self) -> dict:
        """place -> (holder, key, path, value before, the structure of tensors it holds now) of each place
        that held None (or no dict entry) and a trace saw the method store tensors in (export: lazy state)."""
        return _FOUND[self._tandem_token]["created_later"]

    @property
    def lines(self) -> dict:
        """place -> the user's line that set a module attribute found changed (for messages)."""
        return _FOUND[self._tandem_token]["lines"]

    @property
    def settled(self) -> dict:
        """place -> (holder, key, path, value before, value after, line) of each other value (a string,
        None) that the last trace saw the method change."""
        return _FOUND[self._tandem_token]["settled"]

    @property
    def _counters(self) -> dict:
        """place -> (tensor, path, holder, key, value at bind) of each number standing as a tensor (kept
        outside the module: torch.export puts back copies of the traced module's attributes)."""
        return _FOUND[self._tandem_token]["counters"]

    @property
    def discovered(self) -> dict:
        """place -> path of each number or bool without a tensor that a trace saw the method change."""
        return _FOUND[self._tandem_token]["discovered"]

    # path -> growing.Growing: state that grows (set before bind); path -> what the last trace saw grow
    growing = property(lambda self: _FOUND[self._tandem_token]["growing"])
    grown = property(lambda self: _FOUND[self._tandem_token]["grown"])

    def forget(self) -> None:
        _FOUND.pop(self._tandem_token, None)

    def bind(
        self, counters: Optional[dict] = None, wanted: frozenset = frozenset(), scopes: tuple = (), lazy: Optional[dict] = None
    ) -> dict:
        """Snapshot the owner, the held containers and the scopes (globals), register their tensors as
        buffers of this wrapper; returns {id(tensor): buffer name} (buffers of the owner keep their
        names). The ints of state objects and the places in `wanted` (numbers and bools that a method
        was seen to change) get a tensor each (`counters`, shared by the methods)."""
        held = [(self._arg_names[i] if i < len(self._arg_names) else f"arg{i}", c) for i, c in self._tandem_held.items()]
        tree = Snapshot([self.owner], tuple(held), scopes)
        object.__setattr__(self, "tree", tree)
        names = {id(t): n for n, t in self.named_buffers(remove_duplicate=False)}
        storages = {_storage(t): (n, t) for n, t in reversed(list(self.named_buffers(remove_duplicate=False))) if _storage(t)}
        self._held_names = {}
        aliases = _FOUND[self._tandem_token]["aliases"] = {}  # id of a held tensor viewing a buffer -> (its name, the view)
        for _, _, v, path in tree.tensors:
            for p, t in _tensors_in(v, path):
                base = storages.get(_storage(t))
                if id(t) not in names and base is not None and base[1] is not t:  # self.v = self.buf[0]
                    if not (t.is_contiguous() and base[1].is_contiguous()):
                        raise ExportError(
                            f"'{p}' is a view of '{base[0].removeprefix('owner.')}' that is not one contiguous part of it "
                            "(a transpose, a strided slice); tandem follows views of a buffer kept as attributes when they "
                            "are a contiguous part (self.v = self.buf[0], self.buf[2:4]): keep such a view, or index the buffer "
                            "where it is used"
                        )
                    names[id(t)] = base[0]
                    aliases[id(t)] = (base[0], t)
                elif id(t) not in names:
                    names[id(t)] = f"_tandem_held_{len(self._held_names)}"
                    self.register_buffer(names[id(t)], t, persistent=False)
                    storages.setdefault(_storage(t), (names[id(t)], t))
                self._held_names.setdefault(id(t), (names[id(t)], p))
        # State the first call creates (export.py, lazy): its slots are held tensors, and whether it
        # exists yet is a bool (a counter below) that the methods branch on.
        _FOUND[self._tandem_token]["lazy"] = dict(lazy or {})
        for place, (holder, key, path, absent, slots, presence) in (lazy or {}).items():
            for p, t in _tensors_in(slots, path):
                if id(t) not in names:
                    names[id(t)] = f"_tandem_held_{len(self._held_names)}"
                    self.register_buffer(names[id(t)], t, persistent=False)
                self._held_names.setdefault(id(t), (names[id(t)], p))
        hold_growing(self, names)  # state that grows: a slot of its capacity and its length (growing.py)
        # Python ints of state objects: each has an int64 tensor, shared by every method (`counters`),
        # which becomes state when a method changes the int.
        _FOUND[self._tandem_token]["counters"] = {}
        counters = {} if counters is None else counters
        places = {(id(h), k): (h, k, v, path) for h, k, v, path in tree.counters}
        for h, k, v, path in tree.values:
            if (id(h), k) in wanted and type(v) in _SCALARS:
                places[(id(h), k)] = (h, k, v, path)
        for _, _, path, _, _, presence in (lazy or {}).values():
            places[(id(presence), "exists")] = (presence, "exists", False, f"{path}.exists")
        for place, (holder, key, v, path) in places.items():
            t = counters.setdefault(place, torch.tensor(v, dtype=torch.float32 if type(v) is float else torch.long))
            if id(t) not in self._held_names:
                name = f"_tandem_held_{len(self._held_names)}"
                self.register_buffer(name, t, persistent=False)
                self._held_names[id(t)] = (name, path)
            self._counters[place] = (t, path, holder, key, v)
        self._real_keys = {n: t for n, t in self.named_buffers(remove_duplicate=False)}
        return {name: path for name, path in self._held_names.values()}

    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """Each submodule once, under its first name, also where torch.export asks for every name: a
        submodule held by two parents (`left.inner is right.inner`) would give each of its buffers two
        inputs of the graph, and a method that changes one could not be traced (torch's
        functionalization refuses a mutated input passed twice)."""
        return super().named_modules(memo, prefix, remove_duplicate=True)

    def counter_names(self) -> dict:
        """buffer name -> path of the int64 tensors standing for ints."""
        return {self._held_names[id(t)][0]: path for t, path, *_ in self._counters.values()}

    def forward(self, *args):
        return self._trace(*args)

    def _trace(self, *inputs):
        tree = self.tree
        tree.restore(tracing=True)  # torch.export puts back copies of attributes after a trace: the user's own objects again
        tracer = _tracer()
        fakes = {i: self.get_buffer(name) for i, (name, _) in self._held_names.items()}
        for i, (name, t) in _FOUND[self._tandem_token]["aliases"].items():  # a view of a buffer: that part of its stand-in
            b = self.get_buffer(name)
            at = t.storage_offset() - self._real_keys[name].storage_offset()
            fakes[i] = b.view(-1)[at : at + t.numel()].view(t.shape)
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
        for place, value in self.perturb.items():
            _, _, holder, key, _ = self._counters[place]
            holder[key] = value
        for holder, key, value in self.preset.values():
            if key == "*" and isinstance(holder, list):
                holder[:] = value
            else:
                holder[key] = value
        self.settled.clear()
        # place -> what stands for that number while the method runs: an int is read from its slot
        # (runtime_values.TensorInt: offsets and arithmetic at run time), a float is a 0-d tensor
        numbers = {}
        for place in self.runtime:
            t0, _, holder, key, _ = self._counters[place]
            slot = self.get_buffer(self._held_names[id(t0)][0])
            value = slot.clone() if slot.is_floating_point() else slot.item()
            if place in self.ranges and isinstance(value, TensorInt):
                value.span = self.ranges[place]  # comparisons the whole run answers alike are Python bools
            numbers[place] = holder[key] = value
        # as the method finds them (torch.export may have set some, e.g. training, before calling it)
        start = {(id(h), k): _get(h, k) for h, k, _, _ in tree.values}
        lazy_slots = {}  # place of state the first call creates -> its stand-ins
        for place, (holder, key, path, absent, slots, presence) in _FOUND[self._tandem_token]["lazy"].items():
            presence["exists"] = self.perturb.get((id(presence), "exists"), False)  # not yet created, at export
            start[(id(presence), "exists")] = presence["exists"]
            lazy_slots[place] = _subst(slots, fakes)
            if presence["exists"]:
                holder[key] = lazy_slots[place]
            elif absent is _MISSING:
                holder.pop(key, None)
            else:
                holder[key] = absent
        buffers = {(id(m), k): b for m, *_ in tree.modules for k, b in m._buffers.items()}
        it = iter(inputs)
        args = [_subst(self._tandem_held[i], fakes) if i in self._tandem_held else next(it) for i in range(len(self._tandem_args))]
        versions: dict = {}

        def on_register(module, name, tensor):
            if isinstance(tensor, torch.Tensor):
                versions[id(tensor)] = (tensor._version, _stack_line())

        views = growing_views(self)
        handle = nn.modules.module.register_module_buffer_registration_hook(on_register)
        lines: dict = {}  # (id(module __dict__), name) -> the user's line that set a value there
        try:
            with _watching(lines, {id(t) for t in numbers.values() if isinstance(t, torch.Tensor)}), probe.recording_user_code():
                if self._tandem_call_owner:
                    out = self.owner(*args)
                else:
                    out = self._tandem_fn(*args)
            handle.remove()
            growing_back(self, views)
            self._after(tree, installed, versions, tracer, input_nodes, buffer_nodes, start, buffers, lines, numbers, lazy_slots)
        finally:
            handle.remove()
            tree.restore(tracing=True)
        return out

    def _after(
        self, tree: Snapshot, installed: dict, versions: dict, tracer, input_nodes, buffer_nodes, start, buffers, lines, numbers, lazy_slots
    ) -> None:
        method = self._tandem_method
        # A state object replaced by one like it (self.st = State(self.st.h * 0.9 + x, self.st.n + 1), a dict
        # of state by one with the same keys): its fields are the state's new values, written into the old
        # object, which stays in place (so each field is the write below, or a number's state).
        for holder, key, path, was, now in tree.changes():
            if was is _MISSING or now is _MISSING or was is now or type(was) is not type(now):
                continue
            if _plain_object(was) and set(vars(was)) == set(vars(now)):
                vars(was).update(vars(now))
            elif type(was) is dict and set(was) == set(now) and any(True for _ in _tensors_in(was, "")):
                was.update(now)
            else:
                continue
            holder[key] = was
        # A state tensor replaced by a new one (state["first"] = torch.zeros_like(...), self.buf = self.buf + 1,
        # a registered buffer too): a write. Every new value is read before any is written (a swap of two
        # state tensors stays a swap).
        writes = []
        for holder, key, _, path in tree.tensors:
            new, _ = installed[(id(holder), key)]
            self._write_back(new, _get(holder, key), path, writes, holder, key)
        for mod, mname, *_ in tree.modules:
            for k, now in list(mod._buffers.items()):
                was = buffers.get((id(mod), k))
                if was is None or now is was:
                    continue
                self._write_back(was, now if now is not None else _MISSING, f"{mname}.{k}" if mname else k, writes, mod._buffers, k)
                mod._buffers[k] = was  # torch.export sees its own stand-in, written in place
        lazy = _FOUND[self._tandem_token]["lazy"]
        for place, (holder, key, path, absent, slots, presence) in lazy.items():
            now = _get(holder, key)
            if now is None or now is _MISSING:
                presence["exists"] = False  # back to "not yet created" (a reset): the next call creates it again
                continue
            presence["exists"] = True
            self._write_back(lazy_slots[place], now, path, writes)
        sources = [src.clone() if id(src) in self._stand_ins else src for _, src in writes]
        for (dst, _), src in zip(writes, sources):
            dst.copy_(src)  # the state slot takes the new value
        # Python ints changed by the method.
        self.observed.clear()  # in place: torch.export puts back attributes assigned while tracing
        self.probed.clear()
        for place, (t0, path, holder, key, _) in self._counters.items():
            if place in numbers:
                now = _get(holder, key)
                self._number_back(place, path, now, numbers[place], lines)
                if place in self.ranges:  # what the call does to it (steering._boxes: the values calls reach)
                    read = numbers[place]
                    if isinstance(now, TensorInt) and _same_read(now.root, read.root) and type(now.shift) is int:
                        self.probed[place] = ("add", now.shift - read.shift)
                    else:
                        self.probed[place] = ("set", now) if type(now) is int else ("any", None)
                continue
            begin = start[place] if place in start else self.perturb.get(place, _get(holder, key))
            now = _get(holder, key)
            # an int traced as a probe (steering.versions): shifted by the method, or set to a plain value
            shifted = isinstance(begin, probe.Probe) and isinstance(now, probe.Probe) and now._cell is begin._cell
            set_plain = isinstance(begin, probe.Probe) and not shifted
            if isinstance(now, probe.Probe):
                holder[key] = now = probe.plain(now)
            begin = probe.plain(begin)
            if shifted or set_plain:
                self.probed[place] = ("set", now) if set_plain else ("add", now - begin)
            if _same_value(now, begin) and place not in self.fill and place not in self.toggle:
                continue
            if type(now) not in _SCALARS or (type(now) is bool) != (type(begin) is bool) or (type(now) is float) != t0.is_floating_point():
                raise ExportError(
                    f"method '{method}' sets the Python {type(begin).__name__} '{path}' to {now!r}{lines.get(place, '')}; "
                    f"a {type(begin).__name__} kept beside the state becomes state only when the method sets it to a "
                    f"{type(begin).__name__} or adds to it"
                )
            self.observed[place] = (begin, now)
            t = self.get_buffer(self._held_names[id(t0)][0])
            if place in self.toggle:
                t.copy_(1 - t)
            elif place in self.fill or type(now) is bool or set_plain:
                t.fill_(now)
            else:
                t.add_(now - begin)
        # Every other value the method changed (a number, a bool, a string, None; in an attribute of any
        # module, training included, a container, an object, a global): a program is traced once, so it
        # would keep the traced value. A number or bool becomes state (export traces again with it,
        # python_values.check_counters); anything else is an ExportError naming it.
        for holder, key, before, path in tree.values:
            place = (id(holder), key)
            if place in self._counters:
                continue
            before = start.get(place, before)
            now = _get(holder, key)
            if _same_value(now, before) or isinstance(now, torch.Tensor) or _has_tensor(now):
                continue  # unchanged, or a tensor stored where a value was (below)
            if type(before) in _SCALARS and type(now) in _SCALARS and (type(now) is bool) == (type(before) is bool):
                self.discovered[place] = path
                if lines.get(place):
                    _FOUND[self._tandem_token]["lines"][place] = lines[place]
                continue
            # another value (a string, None): export traces again from the new value (python_values.check_settled)
            self.settled[place] = (holder, key, path, before, now, lines.get(place, ""))
        # Entries added to a container, an object or a module (a new attribute, dict key or list element that
        # holds no tensor; those are below): traced again from the container as it is now, likewise.
        known = {(id(h), k) for h, k, _, _ in tree.values}
        for holder, key, path, was, now in tree.changes():
            if was is not _MISSING or now is _MISSING or (id(holder), key) in known or _has_tensor(now):
                continue
            if isinstance(now, _VALUES) or (type(now) in (list, tuple, dict) and not any(True for _ in _tensors_in(now, ""))):
                preset = self.preset.get((id(holder), "*" if isinstance(holder, list) else key))
                if preset is not None and (list(holder) == preset[2] if isinstance(holder, list) else now == preset[2]):
                    continue  # traced from this value already, and set to it again
                if isinstance(holder, list):  # appended to: traced again with what was appended many times over
                    saved = next((s for h, s, _ in tree.holders if h is holder), [])
                    grown = list(saved) + list(holder)[len(saved) :] * 64
                    self.settled[(id(holder), "*")] = (holder, "*", path.rsplit(".", 1)[0], list(saved), grown, "")
                elif not (isinstance(key, str) and key in _MODULE_INTERNALS):
                    self.settled[(id(holder), key)] = (holder, key, path, was, now, lines.get((id(holder), key), ""))
        lists = grown_lists(self, tree)  # lists of tensors a method appends to, pops or empties (growing.py)
        # Tensors stored while traced: computed by the program, if that is what eager keeps.
        state_places = {(id(h), k) for h, k, _, _ in tree.tensors} | set(lazy)
        for holder, key, path, before, now in tree.changes():
            if now is _MISSING or (id(holder), key) in state_places or id(holder) in lists:
                continue
            if before is None or before is _MISSING:  # state the first call creates (self.h = None, then a tensor)
                shapes = _structure(now)
                held = any(
                    id(t) in self._stand_ins or (t._base is not None and id(t._base) in self._stand_ins) for _, t in _tensors_in(now, path)
                )
                registry = any(holder is m._buffers or holder is m._parameters for m, *_ in tree.modules)
                if shapes is not None and not held and not registry and not isinstance(holder, list):
                    self.created_later[(id(holder), key)] = (holder, key, path, before, shapes)
                    continue
            for p, t in _tensors_in(now, path):
                if id(t) in self._stand_ins or (t._base is not None and id(t._base) in self._stand_ins):
                    continue  # a stand-in of a parameter, buffer or state, or a view of one
                self._created(p, t, versions, tracer, input_nodes, buffer_nodes)

    def _number_back(self, place, path: str, now, installed: torch.Tensor, lines: dict) -> None:
        """The state slot of a number the method computes with takes its new value: a tensor of one
        element (computed from it), a number (set to a constant), or a value read from a tensor."""
        t = self.get_buffer(self._held_names[id(self._counters[place][0])][0])
        if isinstance(now, TensorInt):
            if now is installed:
                return
            now = now.tensor
        if isinstance(now, torch.Tensor) and now.numel() == 1 and not now.is_complex():
            if now is not installed or now._version:
                t.copy_(now.reshape(()).to(t.dtype))
            return
        if type(now) in (int, float) and (type(now) is float) <= t.is_floating_point():
            t.fill_(now)
            return
        what = f"a tensor of shape {list(now.shape)}" if isinstance(now, torch.Tensor) else repr(now)
        raise ExportError(
            f"method '{self._tandem_method}' sets the number '{path}' to {what}{lines.get(place, '')}; a number a method "
            "computes with is state of one element: set it to a number, or to a value computed from it"
        )

    def _write_back(self, installed, now, path: str, writes: list, holder=None, key=None) -> None:
        """Appends (state stand-in, new value) to writes when the place holds a new tensor; a tensor of
        the state's dtype and rank that differs along one dim is state that grows (`grown`)."""
        method = self._tandem_method
        if now is installed:
            return
        if isinstance(installed, torch.Tensor):
            if isinstance(now, torch.Tensor) and now.shape == installed.shape and now.dtype == installed.dtype:
                writes.append((installed, now))
                return
            if holder is not None and grew(self, installed, now, path, holder, key):
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
