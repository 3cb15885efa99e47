"""Python branches on tensor values while tracing (`if (x > 0).item():`, `if flag:`), shared by
runtime_values.RuntimeValues and export: which torch calls are such a branch, the user's line a
call came from, and the eager recorder of the way each branch went (export runs the method eagerly
on a copy when the first trace raises NeedBranches).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import os
import traceback

import torch

# frames of tandem's tracing modes, skipped when looking for the caller of a torch function
_OWN = {__file__, os.path.join(os.path.dirname(__file__), "runtime_values.py")}


def _user_line() -> str:
    """' (at file.py:12: code)' for the innermost frame of the user's code on the current stack."""
    from .lowering.provenance import is_user_file

    for f in reversed(traceback.extract_stack()):
        if is_user_file(f.filename):
            return f" (at {f.filename.split('/')[-1]}:{f.lineno}: {(f.line or '').strip()})"
    return ""


def _called_from_user() -> bool:
    """Whether the torch function being handled was called by the user's code, not by torch's own
    (which may branch on a value and catch the error itself)."""
    from .lowering.provenance import is_user_file

    for f in reversed(traceback.extract_stack()[:-1]):
        if f.filename in _OWN or f.filename.endswith("torch/overrides.py"):
            continue
        return is_user_file(f.filename)
    return False


class NeedBranches(Exception):
    """Raised by the first trace at a Python branch on a tensor value: export then runs the method
    eagerly on a copy of the module to learn which way each branch goes (BranchRecorder)."""


class BranchRecorder(torch.overrides.TorchFunctionMode):
    """Eager: records bool() of each one-element tensor, in order."""

    def __init__(self):
        super().__init__()
        self.values: list = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if _is_branch(func, args) and _called_from_user():
            self.values.append(bool(out))
        return out


def _one_element(t: torch.Tensor) -> bool:
    """Whether t has one element, False when that depends on a size bound from the state."""
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    return guard_or_false(t.numel() == 1)


def _is_branch(func, args) -> bool:
    """bool(t) of a one-element tensor, or .item() of a one-element bool tensor (`if (s > 0).item():`)."""
    if not args or not isinstance(args[0], torch.Tensor) or not _one_element(args[0]):
        return False
    return func is torch.Tensor.__bool__ or (func is torch.Tensor.item and args[0].dtype == torch.bool)


def _line_number(line: str) -> int:
    """12 of ' (at file.py:12: code)', else 0."""
    try:
        return int(line.split(":")[1])
    except (IndexError, ValueError):
        return 0


_PYTHON_MIN_MAX = {"max": builtins.max, "min": builtins.min}


def _min_max(traced, python, use, seen, *args, **kwargs):
    """builtins.max / min while tracing. Of a one-element integer tensor and a Python int (counted in
    `seen`): torch.export's own (`traced`), torch.clamp's tensor, a value at run time; or with `use`,
    Python's own, which compares them (a branch on the tensor's value: RuntimeValues takes it as it went
    eagerly and guards it at run time) and gives one of the two as eager does (`max(0, 1 - past - n)` is
    the int 0, a slice start that keeps the slice's size static). Anything else as torch.export gives it."""
    if len(args) == 2 and not kwargs:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        ints = [a for a in args if type(a) is int]
        t = tensors[0] if len(tensors) == 1 and len(ints) == 1 else None
        if t is not None and not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool and _one_element(t):
            seen.append(_user_line())
            if use:
                return python(*args)
    return traced(*args, **kwargs)


@contextlib.contextmanager
def python_min_max(use: bool, seen: list):
    """Within the block builtins.max and min of a one-element integer tensor and an int go through
    _min_max (Python's own with `use`), over whatever torch.export installed."""
    saved = builtins.max, builtins.min
    builtins.max = functools.partial(_min_max, saved[0], _PYTHON_MIN_MAX["max"], use, seen)
    builtins.min = functools.partial(_min_max, saved[1], _PYTHON_MIN_MAX["min"], use, seen)
    try:
        yield
    finally:
        builtins.max, builtins.min = saved
