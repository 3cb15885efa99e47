"""Probe: the int a method branches on, while the method is traced at one of its values.

A Python int that a method changes and branches on (moshi's `offset_cpu <= max_delay`) gives one
version of the method per run of values that take the same path (steering.versions; several ints:
one per box of their runs). The probe finds that run from one trace: comparisons with plain numbers (`<`, `<=`, `==`, `if n:`)
narrow it, and adding or subtracting a plain int keeps track of the shift. Arithmetic that a value
read at run time can do (`*`, `//`, `%`, negation, an operand of a torch op, a slice start) marks it
computed with: each version then reads it from the state at run time (runtime_values.TensorInt with
the run as its span). Any other use (a float, a hash, a string, `int()` in the user's code, a
comparison with another probe) pins it to the traced value. Uses record only while `recording` is
set: around the user's code, not tandem's own."""

from __future__ import annotations

import math

_INF = math.inf
_val = int.__int__  # the plain int of a probe, without counting it as a use


class Cell:
    """What one trace learned of a probed int: the values [lo, hi] that take the traced path (±inf
    where unbounded), whether arithmetic computed with it, and whether another use pinned it."""

    def __init__(self, value: int):
        self.value, self.lo, self.hi, self.pinned, self.compared, self.computed = value, -_INF, _INF, False, False, False
        self.line = ""  # ' (at file.py:12: code)': the user's line of the first comparison

    def narrow(self, holds: bool, lo, hi) -> None:
        """The traced value gave `holds` for the test "lo <= base <= hi"."""
        if not self.compared:
            from .runtime_values import _user_line

            self.line = _user_line()
        self.compared = True
        if holds:
            self.lo, self.hi = max(self.lo, lo), min(self.hi, hi)
        elif hi < self.value:  # the traced value lies above the interval tested
            self.lo = max(self.lo, hi + 1)
        elif lo > self.value:
            self.hi = min(self.hi, lo - 1)

    def pin(self) -> None:
        if not self.pinned:
            from .runtime_values import _user_line

            self.pin_line = _user_line()  # ' (at file.py:12: code)'
        self.pinned, self.lo, self.hi = True, self.value, self.value


recording = [False]  # set while the user's code runs (tracing.Traced), so tandem's own comparisons count for nothing


def _threshold(op: str, k, shift: int):
    """The base values b (ints) for which `b + shift OP k` holds, as (lo, hi)."""
    t = k - shift
    if op == "le":
        return -_INF, math.floor(t)
    if op == "lt":
        return -_INF, math.ceil(t) - 1
    if op == "ge":
        return math.ceil(t), _INF
    if op == "gt":
        return math.floor(t) + 1, _INF
    return (t, t) if t == int(t) else (1, 0)  # eq: one value, or none for a fraction


class Probe(int):
    """An int standing for `cell`'s value plus `shift` (see the module's docstring)."""

    def __new__(cls, value: int, cell: Cell, shift: int = 0):
        p = super().__new__(cls, value)
        p._cell, p._shift = cell, shift
        return p

    def _plain(self, other):
        """A plain number to compare with or add, or None (another probe, anything else)."""
        if isinstance(other, Probe) or isinstance(other, bool) or not isinstance(other, (int, float)):
            return None
        return other

    def _compare(self, op: str, other, result):
        if result is NotImplemented or not recording[0]:
            return result
        k = self._plain(other)
        if k is None:
            if isinstance(other, Probe) and other._cell is not self._cell:
                self._cell.pin()
                other._cell.pin()
            elif not isinstance(other, Probe):
                self._cell.pin()
            return result
        if isinstance(k, float) and not math.isfinite(k):
            return result  # the same answer for every int
        if op in ("eq", "ne"):
            lo, hi = _threshold("eq", k, self._shift)
            self._cell.narrow((op == "eq") == bool(result), lo, hi)
        else:
            self._cell.narrow(bool(result), *_threshold(op, k, self._shift))
        return result

    def __lt__(self, o):
        return self._compare("lt", o, int.__lt__(self, o))

    def __le__(self, o):
        return self._compare("le", o, int.__le__(self, o))

    def __gt__(self, o):
        return self._compare("gt", o, int.__gt__(self, o))

    def __ge__(self, o):
        return self._compare("ge", o, int.__ge__(self, o))

    def __eq__(self, o):
        return self._compare("eq", o, int.__eq__(self, o))

    def __ne__(self, o):
        return self._compare("ne", o, int.__ne__(self, o))

    def __bool__(self):
        result = _val(self) != 0
        if recording[0]:
            self._cell.narrow(not result, *_threshold("eq", 0, self._shift))
        return result

    def __add__(self, o):
        k = self._plain(o)
        if isinstance(k, int):
            return Probe(_val(self) + k, self._cell, self._shift + k)
        return self._use("__add__", o)

    __radd__ = __add__

    def __sub__(self, o):
        k = self._plain(o)
        if isinstance(k, int):
            return Probe(_val(self) - k, self._cell, self._shift - k)
        return self._use("__sub__", o)

    def _use(self, name: str, *args):
        if recording[0]:
            if name in _ARITHMETIC or (name in ("__int__", "__index__") and not _from_user()):
                self._cell.computed = True
                for a in args:
                    if isinstance(a, Probe):
                        a._cell.computed = True
            else:
                self._cell.pin()
        return getattr(int, name)(_val(self), *(plain(a) for a in args))

    def __hash__(self):
        return self._use("__hash__")

    def __reduce__(self):
        return (int, (_val(self),))


# what a value read at run time computes as well (runtime_values.TensorInt)
_ARITHMETIC = {
    "__add__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__floordiv__",
    "__rfloordiv__",
    "__mod__",
    "__rmod__",
    "__neg__",
    "__pos__",
}


def _from_user() -> bool:
    """Whether the user's code itself called the probe's __int__ / __index__ (not torch or tandem, which
    do for an operand of a torch op or a slice)."""
    import sys

    from .lowering.provenance import is_user_file

    return is_user_file(sys._getframe(3).f_code.co_filename)


def _pinning(name: str):
    def use(self, *args):
        return self._use(name, *args)

    use.__name__ = name
    return use


for _name in (
    "__index__ __int__ __float__ __complex__ __mul__ __rmul__ __floordiv__ __rfloordiv__ __truediv__ __rtruediv__ "
    "__mod__ __rmod__ __divmod__ __rdivmod__ __pow__ __rpow__ __neg__ __pos__ __abs__ __invert__ __and__ __rand__ "
    "__or__ __ror__ __xor__ __rxor__ __lshift__ __rlshift__ __rshift__ __rrshift__ __rsub__ __round__ __trunc__ "
    "__floor__ __ceil__ __str__ __repr__ __format__ __bit_length__"
).split():
    if hasattr(int, _name):
        setattr(Probe, _name, _pinning(_name))


def plain(x):
    """x, or the plain int a probe stands for."""
    return _val(x) if isinstance(x, Probe) else x


class recording_user_code:
    """Comparisons of probes count while the user's code runs in a trace (and not while tandem's does)."""

    def __enter__(self):
        self._was, recording[0] = recording[0], True

    def __exit__(self, *exc):
        recording[0] = self._was
