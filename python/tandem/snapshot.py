"""Every place a tree of modules (and the containers and globals beside it) holds a value, and
how to put each one back: the record the tracing contract (tracing.py) compares and restores."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from .ir import ExportError

_MODULE_INTERNALS = frozenset(vars(nn.Module()))
_ATOMS = (str, bytes, bool, int, float, complex, type(None), type, torch.dtype, torch.device, torch.Size)
_MAX_DEPTH = 16
_SCALARS = (bool, int, float)  # Python values that can become state (int64, or float32 for a float)
_VALUES = (str, bytes, bool, int, float, complex, type(None))  # compared by value: a change is state or an ExportError


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
    back as it was; `tensors` lists the tensors kept outside parameters and buffers, `values` every
    number, bool, string and None, `counters` the ints of objects and containers."""

    def __init__(self, modules: list, held: tuple = (), scopes: tuple = ()):
        self.values = []  # (holder, key, value, path): every str, number, bool or None kept anywhere walked
        self.modules = []  # (module, path, __dict__, _parameters, _buffers, _modules, non-persistent names)
        self.holders = []  # (list or dict (an object's __dict__ too), copy of it, path)
        self.tensors = []  # (holder, key, value, path): a tensor, or a tuple holding tensors
        self.counters = []  # the ints of objects and containers (not of modules' own attributes)
        self.scopes = []  # (globals dict, {name: value} of the names walked)
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
                self.values.append((d, "training", d["training"], prefix + "training"))
                for k, v in list(d.items()):
                    if k not in _MODULE_INTERNALS:
                        self._in_module = True
                        self._slot(d, k, v, prefix + k, 0)
        for path, obj in held:
            self._walk(obj, path, 0)
        for path, scope in scopes:
            self._scope(scope, path)

    def _scope(self, scope: dict, path: str) -> None:
        """The values of a Python module's globals (or a function's closure, as a dict): numbers,
        strings, and the dicts and lists of them it holds (not its modules, functions, classes or
        other objects)."""
        saved = {}
        for k, v in list(scope.items()):
            if k.startswith("__") or type(v) not in _VALUES + (dict, list, tuple):
                continue
            if isinstance(v, _VALUES):
                self.values.append((scope, k, v, f"{path}.{k}"))
                saved[k] = v
            elif not any(True for _ in _tensors_in(v, "")):
                saved[k] = v
                self._atoms(v, f"{path}.{k}", 1)
        self.scopes.append((scope, saved))

    def _atoms(self, obj, path: str, depth: int) -> None:
        if depth > 3 or id(obj) in self._seen:
            return
        self._seen.add(id(obj))
        self._keep.append(obj)
        if isinstance(obj, tuple):
            for i, x in enumerate(obj):
                if type(x) in (dict, list, tuple):
                    self._atoms(x, f"{path}.{i}", depth + 1)
            return
        self.holders.append((obj, list(obj) if isinstance(obj, list) else dict(obj), path))
        for k, x in list(enumerate(obj) if isinstance(obj, list) else obj.items()):
            if type(x) in _VALUES:
                self.values.append((obj, k, x, f"{path}.{k}"))
            elif type(x) in (dict, list, tuple):
                self._atoms(x, f"{path}.{k}", depth + 1)

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
        if isinstance(v, _VALUES):
            self.values.append((holder, key, v, path))
        if isinstance(v, int) and not isinstance(v, bool):
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
        for scope, saved in self.scopes:
            for k, v in saved.items():
                if scope.get(k, _MISSING) is not v:
                    scope[k] = v
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


def _same_value(a, b) -> bool:
    """Whether a Python value is unchanged: the same object, or an equal value of the same type."""
    if a is b:
        return True
    if type(a) is not type(b) or not isinstance(a, _VALUES):
        return False
    return a == b or (isinstance(a, float) and a != a and b != b)


class _Missing:
    def __repr__(self):
        return "(absent)"


_MISSING = _Missing()


def _get(container, k):
    if isinstance(container, list):
        return container[k] if k < len(container) else _MISSING
    return dict.get(container, k, _MISSING)


def _restore_dict(live: dict, saved: dict) -> None:
    for k in [k for k in live if k not in saved]:
        del live[k]
    for k, v in saved.items():
        if live.get(k, _MISSING) is not v:
            live[k] = v


def tensor_key(t: torch.Tensor) -> tuple:
    """Identity of a module tensor: the bytes it views, not the Python object."""
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def _structure(v):
    """(dtype, shape) of a tensor, or ("tuple", items) for a tuple of them (through tuples), when every
    size is static; else None."""
    if isinstance(v, torch.Tensor):
        return (v.dtype, tuple(v.shape)) if all(type(d) is int for d in v.shape) and not isinstance(v, nn.Parameter) else None
    if type(v) is tuple and v:
        items = [_structure(x) for x in v]
        return None if any(x is None for x in items) else ("tuple", tuple(items))
    return None


def zeros_of(structure):
    """Zero tensors of a _structure: the slots of state the first call creates."""
    if structure[0] == "tuple":
        return tuple(zeros_of(x) for x in structure[1])
    return torch.zeros(structure[1], dtype=structure[0])


def _storage(t: torch.Tensor):
    """(address of t's bytes, dtype): tensors that view the same bytes share it (None for no bytes)."""
    st = t.untyped_storage()
    return (st.data_ptr(), t.dtype) if st.nbytes() else None
