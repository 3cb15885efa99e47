"""What a method sees while it is traced (tracing.py): the user's line that sets a non-tensor
attribute of a module, `tensor.data` as the user's code means it, and `n += 1` on a tensor standing
for a Python number giving a new value, as for the number."""

from __future__ import annotations

import traceback

import torch
from torch import nn

from .ir import ExportError


def restore(cls: type, name: str, own) -> None:
    """Put back an attribute of `cls` replaced for a while, `own` what the class's own __dict__ held
    (cls.__dict__.get(name)): where it held none the replacement is deleted, so the base class's shows
    through again as before. Assigning the inherited value back instead would leave a Python-level slot:
    `__getitem__` set on torch.Tensor makes every tensor, 0-d ones too, a sequence to CPython, and
    torch.tensor([t0, t1]) of 0-d tensors then fails with 'len() of a 0-d tensor'."""
    if own is None:
        delattr(cls, name)
    else:
        setattr(cls, name, own)


class _watching:
    """While the method runs: the user's line that sets a non-tensor attribute of a module, and
    `tensor.data` as the user's code means it (`.data` read: the tensor itself, detached; `.data =
    value`: an in-place copy into it, so a buffer's new value is a state write)."""

    def __init__(self, lines: dict, numbers: set = frozenset()):
        self.lines = lines
        self.numbers = set(numbers)

    def __enter__(self):
        lines, setattr_, numbers = self.lines, nn.Module.__setattr__, self.numbers
        # A tensor standing for a Python number behaves as one: `n += 1` gives a new value (a name
        # bound to the old one keeps it).
        self._inplace = {}
        for name, op in _AUGMENTED.items():
            inplace = getattr(torch.Tensor, name)
            self._inplace[name] = torch.Tensor.__dict__.get(name)

            def augmented(t, other, _inplace=inplace, _op=op):
                if id(t) not in numbers:
                    return _inplace(t, other)
                out = _op(t, other)
                numbers.add(id(out))
                return out

            setattr(torch.Tensor, name, augmented)

        def record(module, name, value):
            if not isinstance(value, (torch.Tensor, nn.Module)):
                lines[(id(vars(module)), name)] = _stack_line()
            setattr_(module, name, value)

        self._setattr = setattr_
        nn.Module.__setattr__ = record
        base = torch._C.TensorBase.data

        class _Data:
            def __get__(self, obj, typ=None):
                if obj is None:
                    return base
                return obj.detach() if _called_from_user() else base.__get__(obj, typ)

            def __set__(self, obj, value):
                if not _called_from_user():
                    return base.__set__(obj, value)
                if not isinstance(value, torch.Tensor) or value.shape != obj.shape or value.dtype != obj.dtype:
                    raise ExportError(
                        f"'.data =' gives a tensor of {obj.dtype}{list(obj.shape)} a value of another shape or dtype"
                        f"{_stack_line()}; state keeps its dtype and shape: assign a tensor like it"
                    )
                with torch.no_grad():
                    obj.copy_(value)

        torch.Tensor.data = _Data()
        return self

    def __exit__(self, *exc):
        nn.Module.__setattr__ = self._setattr
        del torch.Tensor.data
        for name, own in self._inplace.items():
            restore(torch.Tensor, name, own)
        return False


_AUGMENTED = {
    "__iadd__": __import__("operator").add,
    "__isub__": __import__("operator").sub,
    "__imul__": __import__("operator").mul,
    "__itruediv__": __import__("operator").truediv,
    "__ifloordiv__": __import__("operator").floordiv,
    "__imod__": __import__("operator").mod,
}


def _called_from_user() -> bool:
    from .lowering.provenance import is_user_file

    f = __import__("sys")._getframe(2)
    return is_user_file(f.f_code.co_filename)


def _stack_line() -> str:
    from .lowering.provenance import is_user_file

    frames = [f for f in traceback.extract_stack() if is_user_file(f.filename)]
    if not frames:
        return ""
    f = frames[-1]
    return f" (at {f.filename.split('/')[-1]}:{f.lineno}: {(f.line or '').strip()})"
