"""State that grows: a tensor a method replaces by a longer one along one dim (a KV cache grown with
`torch.cat`, a history trimmed to a window, `torch.cat([self.hist, x])[-w:]`) is a slot of bounded
capacity plus its current length, an int64 state `<path>.length`. While a method is traced the state
is the part of the slot its length says (tracing.Traced._grow_views): a dim of the method bound from
the length state, so a call's work follows the current length; the new value is written into the
start of the slot and the length moves by the rows it added (Traced._grow_back). The capacity comes
from the code where the code bounds it (the length stops growing when the method runs eagerly again
and again: a window), else from `tandem.export(..., state_bounds={path: capacity})`."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import torch

from .ir import ExportError
from .runtime_values import _upper
from .snapshot import _get, tensor_key

EAGER_CALLS = 64  # eager calls that look for the window a method keeps a growing state to
GROWING_ENTRY = "growing_state"  # metadata: state name -> [its length state's name, its dim]
MAX_WINDOW = 16  # a window is exported as a version of the method per length it can have


class PastCapacity(ExportError):
    """A version of a method traced at a length from which its call grows the state past its capacity:
    no such version (a call at that length fails with TDM_ERR_GUARD, the state unchanged)."""


@dataclass
class Growing:
    path: str
    holder: Any  # the dict that holds it (a module's _buffers or __dict__, a container)
    key: Any
    dim: int
    capacity: int
    window: bool  # the code bounds it: versions at the lengths near the capacity (export.py)
    slot: torch.Tensor  # the state: the initial value, then zeros up to the capacity along dim
    length: torch.Tensor  # 0-d int64 state: the current length along dim
    steps: dict = field(default_factory=dict)  # method -> rows a call adds
    kind: str = "tensor"  # or "list": a Python list of tensors, the slot's rows its items

    def __post_init__(self):
        self.initial_length = int(self.length)  # a plain int: the real tensor read while tracing would be a constant


def growing_state(
    method: str, root, path: str, found: tuple, state_bounds: Mapping[str, int], growing: dict, unbounded: tuple = ()
) -> Growing:
    """The Growing for a state that `method` (traced by `root`) was seen to grow: found = (holder, key,
    dim, shape before, length after); `unbounded`: every path found growing that state_bounds does not name."""
    if found[0] == "list":
        return _growing_list(method, root, path, found, state_bounds, growing, unbounded)
    holder, key, dim, before, after = found
    initial = _get(holder, key)
    step = (after if isinstance(after, int) else _upper(after)) - before[dim]  # (a dynamic one at its largest)
    if path in state_bounds:
        capacity, window = int(state_bounds[path]), False
    else:
        capacity = _window(root, holder, key, dim) if step is not None and step > 0 else None
        window = True
        if capacity is None:
            named = ", ".join(f"'{p}': N" for p in unbounded or (path,))
            raise ExportError(
                f"method '{method}' grows state '{path}' along dim {dim} (from {before[dim]} to {after} in one call: "
                f"torch.cat onto it, or an append) and the code gives it no bound (it still grew after {EAGER_CALLS} "
                f"calls; a window such as [-w:] bounds it): give its capacity, tandem.export(..., "
                f"state_bounds={{{named}}}); a call that would grow it past N then fails with TDM_ERR_INDEX, the "
                "state unchanged"
            )
    if window and capacity > MAX_WINDOW:
        raise ExportError(
            f"method '{method}' keeps state '{path}' to a window of {capacity} along dim {dim}; tandem exports a "
            f"version of the method per length of a window, for windows of at most {MAX_WINDOW}: keep a longer "
            "history in a fixed-size buffer written at a position (a ring)"
        )
    if capacity < before[dim]:
        raise ExportError(f"state_bounds gives '{path}' a capacity of {capacity}, below its length now ({before[dim]})")
    shape = list(initial.shape)
    shape[dim] = capacity
    slot = torch.zeros(shape, dtype=initial.dtype)
    slot.narrow(dim, 0, before[dim]).copy_(initial.detach())
    steps = {method: step} if step is not None else {}
    # State grown in step with another (a KV cache's keys and values) shares its length: one dim of the
    # method, so the shapes that follow from both agree (attention over keys and values of one length).
    twin = next(
        (o for o in growing.values() if (o.capacity, int(o.length), o.window, o.steps) == (capacity, before[dim], window, steps)), None
    )
    length = twin.length if twin is not None else torch.tensor(before[dim], dtype=torch.long)
    return Growing(path, holder, key, dim, capacity, window, slot, length, steps)


def add_growing(growing: dict, roots: dict, state_bounds: Mapping[str, int]) -> dict:
    """Adds to `growing` what the last traces of the methods (tracing.Traced, `roots`) saw grow that it
    lacks, and sets the length each is traced at where that is static (a window, a list); returns them."""
    new = {path: (n, r, g) for n, r in roots.items() for path, g in r.grown.items() if path not in growing}
    for r in roots.values():
        r.grown.clear()
    unbounded = tuple(p for p in new if p not in state_bounds)
    for path, (name, root, found) in new.items():
        g = growing[path] = growing_state(name, root, path, found, state_bounds, growing, unbounded)
        if g.window:  # traced at the window's length (versions at the others: window_versions)
            for other in roots.values() if g.kind == "list" else (root,):
                other.regime[path] = g.initial_length
    return new


def growing_entry(entries: dict, growing: dict, states: dict) -> dict:
    """The program's metadata with the entry that says which states grow: name -> [its length's state,
    its dim] (read_state / readState give such a state at its length)."""
    grown = {g.path: [states[tensor_key(g.length)].name, g.dim] for g in growing.values() if tensor_key(g.slot) in states}
    if grown:
        if GROWING_ENTRY in entries:
            raise ExportError(f"the metadata entry '{GROWING_ENTRY}' is tandem's own (state that grows): rename it")
        entries[GROWING_ENTRY] = grown
    return entries


def _growing_list(method: str, root, path: str, found: tuple, state_bounds, growing: dict, unbounded: tuple) -> Growing:
    """A Python list of tensors that a method appends to (and pops, or trims): rows of a slot, with the
    list's length as state, and a version of every method per length (so each sees a list of that many
    tensors); found = ("list", holder of the list, its key, item shape, dtype, length before, after)."""
    _, holder, key, shape, dtype, before, after = found
    if path in state_bounds:
        capacity = int(state_bounds[path])
    else:
        capacity = _window(root, holder, key, None) if after > before else None
        if capacity is None:
            named = ", ".join(f"'{p}': N" for p in unbounded or (path,))
            raise ExportError(
                f"method '{method}' appends to the list of tensors '{path}' and the code gives it no bound (it still "
                f"grew after {EAGER_CALLS} calls; a pop(0) past a length bounds it): give its capacity, "
                f"tandem.export(..., state_bounds={{{named}}})"
            )
    if capacity > MAX_WINDOW or capacity < before:
        raise ExportError(
            f"the list of tensors '{path}' has a capacity of {capacity}; tandem exports a version of each method per "
            f"length of such a list, for lists of at most {MAX_WINDOW} (and no shorter than they are at export): keep "
            "a longer history in a tensor (torch.cat onto it)"
        )
    slot = torch.zeros((capacity, *shape), dtype=dtype)
    items = _get(holder, key)
    if items:
        slot[: len(items)] = torch.stack([t.detach() for t in items])
    return Growing(path, holder, key, 0, capacity, True, slot, torch.tensor(before, dtype=torch.long), {method: after - before}, "list")


def _window(root, holder, key, dim) -> Optional[int]:
    """The length the state stays at when the method runs eagerly again and again (on copies of its
    module and inputs), or None when it still grows after EAGER_CALLS calls; dim None: a list's length."""
    memo: dict = {}
    owner, args, fn = copy.deepcopy((root.owner, root._tandem_args, root._tandem_fn), memo)
    live = memo.get(id(holder))
    if live is None:  # a module's own __dict__ (deepcopy copies it through __getstate__)
        module = next((m for m in root.owner.modules() if vars(m) is holder), None)
        live = vars(memo[id(module)]) if module is not None and id(module) in memo else None
    if live is None:
        return None

    def size(v):
        return len(v) if dim is None else v.shape[dim]

    lengths = [size(_get(live, key))]
    with torch.no_grad():
        for _ in range(EAGER_CALLS):
            owner(*args) if root._tandem_call_owner else fn(*args)
            now = _get(live, key)
            if not isinstance(now, list if dim is None else torch.Tensor):
                return None
            lengths.append(size(now))
            if len(lengths) > 4 and lengths[-1] == lengths[-2] == lengths[-3] == max(lengths) > lengths[0]:
                return lengths[-1]
    return None


def steering_bounds(bounds: Mapping) -> dict:
    """state_bounds' entries for Python ints a method branches on (steering.py): path -> (lo, hi), the
    values calls may reach (an int N: up to N)."""
    out = {}
    for path, b in bounds.items():
        pair = (float("-inf"), b) if isinstance(b, int) and not isinstance(b, bool) else b
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in pair)):
            raise ExportError(f"state_bounds gives '{path}' {b!r}: give a capacity (an int) or, for a Python int, (lo, hi)")
        if pair[0] > pair[1]:
            raise ExportError(f"state_bounds gives '{path}' the values {pair[0]}..{pair[1]}, which hold none")
        out[path] = pair
    return out


def check_bounds(state_bounds: Mapping, growing: dict, whens: dict) -> None:
    """Every path state_bounds names is state a method grows or a Python int a method branches on."""
    steering = {p: t for ws in whens.values() for t, v, p in ws if isinstance(v, tuple)}
    for path, b in state_bounds.items():
        if path in growing:
            continue
        if path not in steering:
            known = ", ".join(f"'{p}'" for p in growing) or "none"
            ints = ", ".join(f"'{p}'" for p in steering) or "none"
            raise ExportError(
                f"state_bounds names '{path}', which no method grows (state that grows: {known}) and no method branches "
                f"on as a Python int (such ints: {ints}); state_bounds gives the capacity of a state that a method grows "
                "with torch.cat, or the values (lo, hi) calls may reach of an int a method branches on"
            )
        start = int(steering[path].item())
        lo, hi = steering_bounds({path: b})[path]
        if not lo <= start <= hi:
            raise ExportError(f"state_bounds gives '{path}' the values {lo}..{hi}, which leave out its value now ({start})")


def window_versions(export_one, specs, roots, growing: dict, exported: dict, whens: dict, name_of, constants, before) -> None:
    """A method that grows a state the code keeps to a window (`torch.cat([self.hist, x])[-w:]`) is
    exported once per length of the window (static shapes: the window filling, then full), as versions
    'name', 'name#1', ... that start with a `when_in` on the length (python_values.add_whens)."""
    for g in growing.values():
        if not g.window:
            continue
        # every method sees a list at each of its lengths; a tensor window only in the methods growing it
        names = [n for n in exported if "#" not in n] if g.kind == "list" else [n for n, step in g.steps.items() if step > 0]
        for name in names:
            if name not in exported or exported[name] is None:
                continue
            if name in whens:
                raise ExportError(
                    f"method '{name}' keeps '{g.path}' to a window and also branches on Python values or another "
                    "window; tandem makes versions of a method over one of them"
                )
            fn, inputs, dynamic = specs[name]
            root = roots[name]
            first = int(g.length)
            whens[name] = [(g.length, (first, first), f"{g.path}.length")]
            j = 0
            for k in range(g.capacity + 1):
                if k == first:
                    continue
                root.regime, root.keep = {g.path: k}, True
                try:
                    ep = export_one(name, root, inputs, dynamic, name_of, constants)
                except PastCapacity:
                    continue  # a call at this length would grow it past the capacity: TDM_ERR_GUARD
                finally:
                    root.regime, root.keep = {g.path: first}, False
                    before.restore()
                j += 1
                exported[f"{name}#{j}"] = ep
                whens[f"{name}#{j}"] = [(g.length, (k, k), f"{g.path}.length")]


# While a method is traced (self: its tracing.Traced).


def hold_growing(self, names: dict) -> None:
    """Registers the slot and the length of each state that grows as buffers of the tracing.Traced."""
    for g in self.growing.values():
        for p, t in ((g.path, g.slot), (f"{g.path}.length", g.length)):
            if id(t) not in names:
                names[id(t)] = f"_tandem_held_{len(self._held_names)}"
                self.register_buffer(names[id(t)], t, persistent=False)
            self._held_names.setdefault(id(t), (names[id(t)], p))


def grew(self, installed: torch.Tensor, now, path: str, holder, key) -> bool:
    """Whether a state tensor was replaced by one of its dtype and rank that differs along one dim,
    recorded in self.grown: path -> (holder, key, dim, shape before, length after)."""
    if not isinstance(now, torch.Tensor) or now.dtype != installed.dtype or now.dim() != installed.dim():
        return False
    differ = [i for i, (a, b) in enumerate(zip(now.shape, installed.shape)) if not (isinstance(a, int) and a == b)]
    if len(differ) != 1:
        return False
    self.grown[path] = (holder, key, differ[0], tuple(installed.shape), now.shape[differ[0]])
    return True


def growing_views(self) -> dict:
    """Each state that grows stands, while the method runs, as the part of its slot its length says:
    `slot[:n]` along its dim with n read from the length state (a dim bound from the state,
    runtime_values._Reads.prefix), or, for a version at a static length (self.regime), that many rows."""
    views = {}
    for path, g in self.growing.items():
        slot = self.get_buffer(self._held_names[id(g.slot)][0])
        length = self.get_buffer(self._held_names[id(g.length)][0])
        d, n = g.dim, None
        if g.kind == "list":  # a Python list of tensors: a version per length, its items views of the slot
            k = self.regime[path] if path in self.regime else g.initial_length  # (the real tensor is no constant)
            items = _get(g.holder, g.key)
            view = [slot[i] for i in range(k)]
            views[path] = (view, slot, length, list(items), items)  # the list keeps its identity
            items[:] = view
            continue
        if path not in self.regime:
            n = length.item()  # under runtime_values.RuntimeValues: a value read from the state
            view = slot[(slice(None),) * d + (slice(None, n),)]
            step = g.steps.get(self._tandem_method, 0)
            if step > 0:
                torch._check(view.shape[d] + step <= g.capacity)  # the call that would grow past it fails first
        else:
            view = slot.narrow(d, 0, self.regime[path])
        views[path] = (view, slot, length, n, _get(g.holder, g.key))
        g.holder[g.key] = view
    return views


def growing_back(self, views: dict) -> None:
    """The new value of each state that grows (torch.cat onto it, a window of it) is written into the
    start of its slot, and its length into the length state."""
    method = self._tandem_method
    moved: dict = {}  # id of a length (shared by state grown in step) -> the rows added
    for path, (view, slot, length, n, was) in views.items():
        g = self.growing[path]
        now = _get(g.holder, g.key)
        g.holder[g.key] = was
        if g.kind == "list":
            now = list(now) if isinstance(now, list) else now
            was[:] = n  # the items it held before the call
            _list_back(self, path, g, view, now, slot, length, moved)
            continue
        if now is view:
            continue
        d = g.dim
        if (
            not isinstance(now, torch.Tensor)
            or now.dtype != view.dtype
            or now.dim() != view.dim()
            or any(not (isinstance(a, int) and a == b) for i, (a, b) in enumerate(zip(now.shape, slot.shape)) if i != d)
        ):
            raise ExportError(
                f"method '{method}' replaces state '{path}' ({slot.dtype}, growing along dim {d}) with a value of "
                "another dtype, rank or size along its other dims; state that grows keeps them"
            )
        m = now.shape[d]
        if isinstance(m, torch.SymInt) and m.node.expr.is_number:
            m = int(m.node.expr)
        if isinstance(m, int):  # set to a static length (a reset, a window that is full)
            if m > g.capacity:
                raise PastCapacity(f"method '{method}' makes state '{path}' {m} long along dim {d}, past its capacity {g.capacity}")
            slot.narrow(d, 0, m).copy_(now)
            change = ("set", m)
        else:
            if n is None:
                raise ExportError(f"method '{method}' makes state '{path}' {m} long along dim {d}: a length tandem cannot follow")
            shift = m - view.shape[d]
            expr = shift.node.expr if isinstance(shift, torch.SymInt) else shift
            if isinstance(view.shape[d], torch.SymInt) and view.shape[d].node.expr in getattr(expr, "free_symbols", ()):
                raise ExportError(
                    f"method '{method}' changes the length of state '{path}' along dim {d} by {expr}, an amount that "
                    "depends on the length itself; tandem follows state that grows by the rows a call adds (torch.cat "
                    "onto it: a fixed number, or a dim of the inputs), a window of it, or that a method sets to a fixed length"
                )
            step = int(expr) if getattr(expr, "is_number", False) else shift  # a number, or a size of the inputs
            g.steps.setdefault(method, step if isinstance(step, int) else _upper(step))
            dst = slot[(slice(None),) * d + (slice(None, n + step),)]  # a limit: n + step <= capacity
            dst.copy_(now)
            change = ("add", step)
        if id(length) in moved:
            if str(moved[id(length)]) != str(change):  # (sizes compared as expressions, not values)
                raise ExportError(f"method '{method}' changes the length of '{path}' unlike the state that shares it")
            continue
        moved[id(length)] = change
        if change[0] == "set":
            length.fill_(change[1])
        else:
            length.add_(change[1])


def _list_back(self, path: str, g, view: list, now, slot, length, moved: dict) -> None:
    """A list of tensors that grows (appended to, popped): its items stacked into the slot, its length."""
    method = self._tandem_method
    if isinstance(now, list) and len(now) == len(view) and all(a is b for a, b in zip(now, view)):
        return
    if not isinstance(now, list) or any(
        not isinstance(t, torch.Tensor) or t.dtype != slot.dtype or tuple(t.shape) != tuple(slot.shape[1:]) for t in now
    ):
        raise ExportError(
            f"method '{method}' puts into the list '{path}' something other than {slot.dtype} tensors of shape "
            f"{list(slot.shape[1:])}; a list of tensors that grows holds tensors like its first"
        )
    if len(now) > g.capacity:
        raise PastCapacity(f"method '{method}' makes the list '{path}' {len(now)} long, past its capacity {g.capacity}")
    if now:
        slot.narrow(0, 0, len(now)).copy_(torch.stack(now))
    if moved.setdefault(id(length), ("set", len(now))) != ("set", len(now)):
        raise ExportError(f"method '{method}' changes the length of '{path}' unlike the state that shares it")
    length.fill_(len(now))


def grown_lists(self, tree) -> set:
    """The ids of the lists of tensors (all of one shape and dtype) whose length the method changed,
    each recorded in `grown` as ("list", holder of the list, its key, item shape, dtype, length
    before, length after)."""
    out = set()
    growing = {id(_get(g.holder, g.key)) for g in self.growing.values()}
    for obj, saved, path in tree.holders:
        if not isinstance(obj, list) or id(obj) in growing:
            continue
        if len(obj) == len(saved):  # unchanged, or items replaced: state tensors held in a list (tracing.py)
            continue
        items = list(obj) + list(saved)
        if not all(isinstance(t, torch.Tensor) for t in items) or len({(tuple(t.shape), t.dtype) for t in items}) != 1:
            continue
        parent = next(((vars(m), k) for m, *_ in tree.modules for k, v in vars(m).items() if v is obj), None)
        if parent is None:
            parent = next(((h, k) for h, saved_h, _ in tree.holders for k, v in _items(saved_h) if v is obj), None)
        if parent is None:
            continue
        self.grown[path] = ("list", parent[0], parent[1], tuple(items[0].shape), items[0].dtype, len(saved), len(obj))
        out.add(id(obj))
    return out


def _items(container):
    return enumerate(container) if isinstance(container, list) else container.items()
