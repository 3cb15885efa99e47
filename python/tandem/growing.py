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
from .snapshot import _get

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
    step = after - before[dim] if isinstance(after, int) else None
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


def check_bounds(state_bounds: Mapping[str, int], growing: dict) -> None:
    for path in state_bounds:
        if path not in growing:
            known = ", ".join(f"'{p}'" for p in growing) or "none"
            raise ExportError(
                f"state_bounds names '{path}', which no method grows (state that grows: {known}); state_bounds "
                "gives the capacity of a state that a method grows with torch.cat"
            )
