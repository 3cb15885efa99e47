"""Integers read from tensors while tracing (`int(offset.view(-1)[0].item())`) used as runtime
offsets, without torch.export's unbacked symbols (which `int()` cannot take).

While a method is traced, `.item()` of a one-element integer tensor returns a `TensorInt`: a Python
int that carries the (traced) tensor it came from, with a made-up value far from any real size
(2^40 and up). Arithmetic with ints and sizes (`off + T`, `off % capacity`) gives another TensorInt
whose tensor is the same arithmetic on the tensor. `int()` gives a plain int (Python copies int
subclasses), but its value still says which read it is and by how much it was shifted (`off + T`
is the read's value + T). Slicing with one, `cache[:, :, off:off + T]` (read) and
`cache[:, :, off:off + T] = k` (write), is rewritten to index the same rows with a tensor,
`idx = off + arange(T)` behind `check_index` (a start below 0 or past the end fails the call with
TDM_ERR_INDEX before any state is written, where eager raises or reads fewer rows). Such a value
anywhere else torch sees (a shape, `torch.full`'s value, a comparison, `bool()`) is an ExportError
naming the line.

Python itself may also read the int (`range(off)`, a list index, `int(off) % capacity`), and nothing
hooks that; so export traces such a method twice with the made-up values one apart: the graphs must
be equal, else some use froze the value and the export fails naming the `.item()` lines.
"""

from __future__ import annotations

import operator

import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from .ir import ExportError
from .value_branches import NeedBranches, _called_from_user, _is_branch, _line_number, _one_element, _user_line, python_min_max


def _fail(what: str):
    raise ExportError(f"{what}{_user_line()}")


def _hint(x) -> int:
    """An int for a size (a SymInt's example value, without a guard)."""
    if isinstance(x, torch.SymInt):
        h = x.node.hint
        return int(h) if h is not None else 0
    return int(x)


def _upper(n):
    """The largest value of a size (its dims' bounds), or None when unbounded."""
    if not isinstance(n, torch.SymInt):
        return int(n)
    hi = n.node.shape_env.bound_sympy(n.node.expr).upper
    return int(hi) if getattr(hi, "is_Integer", False) or isinstance(hi, int) else None


class TensorInt(int):
    """An int read from a tensor while tracing: `tensor` (0-d int64) is its value in each call; `root`
    and `shift` say it is root's value + shift (shift an int or a size), so two of them from one
    read have a known difference (a slice's length). `span` (lo, hi), where known, holds every value it
    takes in a call (a Python int a method branches on, read in the version of the method for one run of
    its values, steering._boxes): a comparison with a plain number that the whole span answers alike
    is that answer, a Python bool."""

    def __new__(cls, value: int, tensor: torch.Tensor, root=None, shift=0, span=None):
        obj = super().__new__(cls, value)
        obj.tensor = tensor
        obj.root = root if root is not None else obj
        obj.shift = shift
        obj.span = span
        return obj

    def _arith(self, other, f, reflected=False):
        mine = int.__int__(self)
        if isinstance(other, TensorInt):
            a, b = (other, self) if reflected else (self, other)
            return TensorInt(f(int.__int__(a), int.__int__(b)), f(a.tensor, b.tensor))
        if not isinstance(other, (int, torch.SymInt)) or isinstance(other, bool):
            return NotImplemented
        o = _hint(other)
        value = f(o, mine) if reflected else f(mine, o)
        t = f(other, self.tensor) if reflected else f(self.tensor, other)
        plain = type(other) is int
        if f is operator.add:  # the same read, shifted: a slice's end
            return TensorInt(value, t, self.root, self.shift + other, _moved(self.span, other) if plain else None)
        if f is operator.sub and not reflected:
            return TensorInt(value, t, self.root, self.shift - other, _moved(self.span, -other) if plain else None)
        return TensorInt(value, t)

    def __add__(self, o):
        return self._arith(o, operator.add)

    def __radd__(self, o):
        return self._arith(o, operator.add, reflected=True)

    def __sub__(self, o):
        return self._arith(o, operator.sub)

    def __rsub__(self, o):
        return self._arith(o, operator.sub, reflected=True)

    def __mul__(self, o):
        return self._arith(o, operator.mul)

    def __rmul__(self, o):
        return self._arith(o, operator.mul, reflected=True)

    def __mod__(self, o):
        return self._arith(o, operator.mod)

    def __rmod__(self, o):
        return self._arith(o, operator.mod, reflected=True)

    def __floordiv__(self, o):
        return self._arith(o, operator.floordiv)

    def __rfloordiv__(self, o):
        return self._arith(o, operator.floordiv, reflected=True)

    def __neg__(self):
        return TensorInt(-int.__int__(self), -self.tensor, span=None if self.span is None else (-self.span[1], -self.span[0]))

    def __pos__(self):
        return self

    def _refuse(self, *_):
        _fail(
            "a value read from a tensor with .item() / int() decides something in Python (a comparison, an `if`, a "
            "float, a power or a bit operation); tandem exports one graph, computed per call only through tensors and "
            "slices: use torch.where on tensors instead"
        )

    __float__ = __pow__ = __rpow__ = __truediv__ = __rtruediv__ = _refuse
    __and__ = __or__ = __xor__ = __lshift__ = __rshift__ = __abs__ = __round__ = _refuse

    def __bool__(self):
        if self.span is not None and not self.span[0] <= 0 <= self.span[1]:
            return True
        if self.span == (0, 0):
            return False
        self._refuse()

    def _compare(self, o, f):
        """A comparison: its truth is known only at run time (TensorCond: torch._check takes it, an `if` is
        refused), or over the whole span, a Python bool."""
        if self.span is not None and isinstance(o, (int, float)) and not isinstance(o, (bool, TensorInt)):
            lo, hi = self.span
            if f in (operator.eq, operator.ne):
                if lo == hi or not lo <= o <= hi:
                    return f(lo, o)
            elif f(lo, o) == f(hi, o):  # <, <=, >, >= hold on one side of a threshold: the ends tell
                return f(lo, o)
        if isinstance(o, TensorInt):
            return TensorCond(f(self.tensor, o.tensor))
        if isinstance(o, (int, torch.SymInt)) and not isinstance(o, bool):
            return TensorCond(f(self.tensor, o))
        return NotImplemented

    def __lt__(self, o):
        return self._compare(o, operator.lt)

    def __le__(self, o):
        return self._compare(o, operator.le)

    def __gt__(self, o):
        return self._compare(o, operator.gt)

    def __ge__(self, o):
        return self._compare(o, operator.ge)

    def __eq__(self, o):
        return self._compare(o, operator.eq)

    def __ne__(self, o):
        return self._compare(o, operator.ne)

    __hash__ = int.__hash__


def _moved(span, k: int):
    """span (lo, hi) shifted by k, or None."""
    return None if span is None else (span[0] + k, span[1] + k)


class TensorCond:
    """A comparison of a value read from a tensor (`off + T <= capacity`): `tensor` (0-d bool) is its
    truth in each call. torch._check / torch._check_is_size take it as a check the program runs before
    any state write (a `guard` op: TDM_ERR_GUARD, state unchanged); Python's own use of it (`if`) is an
    ExportError naming the line."""

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor

    def __bool__(self):
        TensorInt._refuse(None)

    def __and__(self, o):
        return TensorCond(self.tensor & (o.tensor if isinstance(o, TensorCond) else bool(o)))

    def __or__(self, o):
        return TensorCond(self.tensor | (o.tensor if isinstance(o, TensorCond) else bool(o)))


def _guard(cond: torch.Tensor) -> None:
    torch._assert_async(cond.reshape(()).to(torch.bool), f"tandem-guard {_line_number(_user_line())}")


class _Checks:
    """torch._check, torch._check_is_size and torch._constrain_as_size (ExecuTorch's KVCache bounds
    its `.item()` positions with them) over values read from tensors: checks the program runs."""

    NAMES = ("_check", "_check_is_size", "_constrain_as_size")

    def __enter__(self):
        self.saved = {n: getattr(torch, n) for n in self.NAMES}
        check, is_size, constrain = (self.saved[n] for n in self.NAMES)

        def _check(cond, message=None):
            if isinstance(cond, TensorCond):
                return _guard(cond.tensor)
            return check(cond, message) if message is not None else check(cond)

        def _check_is_size(i, message=None, *, max=None):
            if isinstance(i, TensorInt):
                ok = i.tensor >= 0
                return _guard(ok if max is None else ok & (i.tensor <= max))
            return is_size(i, message, max=max)

        def _constrain_as_size(symbol, min=None, max=None):
            if isinstance(symbol, TensorInt):
                ok = symbol.tensor >= (0 if min is None else min)
                return _guard(ok if max is None else ok & (symbol.tensor <= max))
            return constrain(symbol, min, max)

        for n, f in zip(self.NAMES, (_check, _check_is_size, _constrain_as_size)):
            setattr(torch, n, f)
        return self

    def __exit__(self, *exc):
        for n, f in self.saved.items():
            setattr(torch, n, f)
        return False


MAGIC = 1 << 40  # read k's made-up value: MAGIC * (k + 1) + bias
NEAR = 1 << 31  # a plain int within this of a read's value is that read, shifted


class _Reads:
    """The reads of one trace: made-up value -> tensor."""

    def __init__(self, bias: int):
        self.bias = bias
        self.values: list = []  # [(value, tensor, user line)]
        self.seen: dict = {}  # (id, version) of a tensor read -> (value, tensor)
        self.keep: list = []
        self.sizes: dict = {}  # id of a read's tensor -> the unbacked size standing for it (prefix)
        self.bound: list = []  # [(unbacked size, tensor read, user line)]: dims bound from the state
        self.limits: list = []  # [(unbacked size, size of the dim sliced, largest length added to it, user line)]

    def new(self, src: torch.Tensor, line: str) -> TensorInt:
        """A read of src: the same value as an earlier read of the same tensor, unchanged since
        (`x[:, s.item():s.item() + 2]`), so two reads make one slice."""
        key = (id(src), src._version)
        if key in self.seen:
            value, t = self.seen[key]
        else:
            value, t = MAGIC * (len(self.values) + 1) + self.bias, src.reshape(()).to(torch.long)
            self.values.append((value, t, line))
            self.seen[key] = (value, t)
            self.keep.append(src)  # so its id is not reused while tracing
        return TensorInt(value, t, root=value)  # the read's value names it, as for the plain ints int() gives

    def find(self, x):
        """(root, shift, tensor) when x is a read (a TensorInt, or an int or size near a read's value)."""
        if isinstance(x, TensorInt):
            return x.root, x.shift, x.tensor
        if isinstance(x, bool) or not isinstance(x, (int, torch.SymInt)):
            return None
        h = _hint(x)
        for value, t, _ in self.values:
            if abs(h - value) < NEAR:
                shift = x - value
                return value, shift, t + shift
        return None

    def has(self, obj) -> bool:
        if self.find(obj) is not None:
            return True
        if isinstance(obj, slice):
            return any(self.has(v) for v in (obj.start, obj.stop, obj.step))
        if isinstance(obj, (list, tuple)):
            return any(self.has(x) for x in obj)
        if isinstance(obj, dict):
            return any(self.has(x) for x in obj.values())
        return False

    def plain(self, obj):
        """obj with every read replaced by its tensor (where torch takes a tensor)."""
        r = self.find(obj)
        if r is not None:
            return r[2]
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.plain(x) for x in obj)
        return obj

    def single(self, index, line: str):
        """(index, True) with x[off] written x[off:off + 1] when one item of index is a single value read
        from a tensor (a TensorInt, or a 0-d integer tensor, which torch reads as an int); else (index, False)."""
        items = list(index) if isinstance(index, tuple) else [index]
        for i, it in enumerate(items):
            if isinstance(it, torch.Tensor) and it.dim() == 0 and not it.is_floating_point() and it.dtype != torch.bool:
                it = self.new(it, line)
            if not isinstance(it, slice) and self.find(it) is not None:
                items[i] = slice(it, it + 1)
                return (tuple(items) if isinstance(index, tuple) else items[0]), True
        return index, False

    def slice_of(self, x: torch.Tensor, index):
        """(view, dim, idx) when `index` has one slice between two reads: view = x indexed with that
        slice made whole, dim = the slice's dim in view, idx its rows as a tensor; else None."""
        items = list(index) if isinstance(index, tuple) else [index]
        hits = [i for i, it in enumerate(items) if isinstance(it, slice) and self.has(it)]
        if not hits:
            return None
        if len(hits) > 1:
            _fail("two slices of one tensor at values read from tensors; tandem rewrites one per indexing: split it")
        k = hits[0]
        s = items[k]
        if s.step not in (None, 1):
            _fail("a slice with a step at a value read from a tensor is not supported; use a step of 1")
        start, stop = self.find(s.start), self.find(s.stop)
        if stop is not None and start is None and (s.start is None or (type(s.start) is int and s.start == 0)):
            return self.prefix(x, items, k, stop)
        if start is None or stop is None or not _same(start[0], stop[0]):
            _fail(
                "a slice whose length depends on a value read from a tensor (e.g. cache[:, :offset + T]) has a size "
                "known only at run time; tandem exports fixed shapes: slice a fixed length, cache[:, offset:offset + T], "
                "or read the whole cache and mask it (torch.where, an attention mask)"
            )
        if any(isinstance(it, torch.Tensor) or self.has(it) for i, it in enumerate(items) if i != k):
            _fail(
                "indexing with a slice at a value read from a tensor and also a tensor or another such value is not "
                "supported: index in two steps"
            )
        length = stop[1] - start[1]
        if Ellipsis in items:
            e = items.index(Ellipsis)
            used = sum(1 for it in items if it is not None and it is not Ellipsis)
            items[e : e + 1] = [slice(None)] * (x.dim() - used)
            k = next(i for i, it in enumerate(items) if it is s)
        # the slice's dim in x and in the result of the basic indexing (ints drop a dim, None adds one)
        src_dim = sum(1 for it in items[:k] if it is not None)
        dim = sum(1 for it in items[:k] if not isinstance(it, int) or isinstance(it, bool))
        items[k] = slice(None)
        view = x[tuple(items)]
        st = start[2]
        st = torch.where(st < 0, x.shape[src_dim], st)  # a negative start is out of range (eager counts it from the end)
        return view, dim, st + torch.arange(length, dtype=st.dtype)

    def prefix(self, x: torch.Tensor, items: list, k: int, stop):
        """x[..., :off + n] (pocket-tts' `cache[:, :, :offset + T]`): a slice whose length is a read
        plus a size. It becomes a dim of the method bound from the state at the start of each call:
        the read's tensor `.item()` gives torch an unbacked size u, checked to keep the slice inside
        x (0 <= u and u + n <= x's size), so torch traces the shapes that follow as functions of u
        and the runtime binds u from the state tensor it reads before any op runs (the dim is
        bounded by those checks; a call whose offset is outside them fails with TDM_ERR_INDEX)."""
        root, shift, _ = stop
        if Ellipsis in items:
            e = items.index(Ellipsis)
            used = sum(1 for it in items if it is not None and it is not Ellipsis)
            items[e : e + 1] = [slice(None)] * (x.dim() - used)
            k = next(i for i, it in enumerate(items) if isinstance(it, slice) and self.has(it))
        src_dim = sum(1 for it in items[:k] if it is not None)
        u = self.sizes.get(id(self._root_tensor(root)))
        tensor = self._root_tensor(root)
        if u is None:
            u = tensor.item()  # an unbacked size: the mode is off inside its own handler
            self.sizes[id(tensor)] = u
            self.bound.append((u, tensor, _user_line()))
        torch._check(u >= 0)
        torch._check(u + shift <= x.shape[src_dim])
        self.limits.append((u, _hint(x.shape[src_dim]), _upper(shift), _user_line()))
        items[k] = slice(None, u + shift)
        return x[tuple(items)]

    def _root_tensor(self, root):
        for value, t, _ in self.values:
            if _same(value, root) or (isinstance(root, TensorInt) and root.tensor is t):
                return t
        _fail(
            "a slice of a length read from a tensor, with arithmetic tandem cannot follow; slice cache[:, :off + T] "
            "with off read by one .item() / int()"
        )


def _same(a, b) -> bool:
    """Whether two reads' roots are one (a made-up value, or a TensorInt, compared without its __eq__)."""
    return a is b or (type(a) is int and type(b) is int and int.__eq__(a, b))


# Tensor arithmetic that takes a read as its tensor (`arange(T) + off`, `x * off`, `pos.fill_(off)`).
_TENSOR_OPERANDS = {
    torch.Tensor.__add__,
    torch.Tensor.__radd__,
    torch.Tensor.__sub__,
    torch.Tensor.__rsub__,
    torch.Tensor.__mul__,
    torch.Tensor.__rmul__,
    torch.Tensor.__mod__,
    torch.Tensor.__floordiv__,
    torch.Tensor.__rfloordiv__,
    torch.Tensor.add,
    torch.Tensor.sub,
    torch.Tensor.mul,
    torch.Tensor.remainder,
    torch.Tensor.add_,
    torch.Tensor.sub_,
    torch.Tensor.mul_,
    torch.Tensor.fill_,
    torch.add,
    torch.sub,
    torch.mul,
    torch.remainder,
    torch.where,
    torch.minimum,
    torch.maximum,
    torch.Tensor.__eq__,
    torch.Tensor.__ne__,
    torch.Tensor.__lt__,
    torch.Tensor.__le__,
    torch.Tensor.__gt__,
    torch.Tensor.__ge__,
}


# A one-element integer tensor plus or minus a Python int or size (`past + n`): recorded, so that
# `torch.arange(past, past + n)` is the tensor past + arange(n), of n rows, where torch.export would read
# both ends into Python (unbacked sizes whose difference it cannot know).
_SHIFTS = {
    torch.Tensor.__add__: 1,
    torch.Tensor.__radd__: 1,
    torch.Tensor.add: 1,
    torch.add: 1,
    torch.Tensor.__sub__: -1,
    torch.Tensor.sub: -1,
    torch.sub: -1,
}


def _int_scalar(t) -> bool:
    return isinstance(t, torch.Tensor) and not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool and _one_element(t)


class _Rows:
    """Rows `idx` (a tensor) of `base` along `dim`: read() gathers them (squeezed along dim for
    x[off]), and calling it with a tensor of that shape writes them back."""

    def __init__(self, base: torch.Tensor, dim: int, idx: torch.Tensor, squeeze: bool = False):
        self.base, self.dim, self.idx, self.squeeze = base, dim, idx, squeeze

    def read(self) -> torch.Tensor:
        v = self.base[(slice(None),) * self.dim + (self.idx,)]
        return v.squeeze(self.dim) if self.squeeze else v

    def __call__(self, w: torch.Tensor) -> None:
        self.base[(slice(None),) * self.dim + (self.idx,)] = w.unsqueeze(self.dim) if self.squeeze else w


_IN_PLACE_DUNDERS = {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__"}
_IN_PLACE_DUNDERS |= {"__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__"}


def _in_place(func) -> bool:
    """Whether a torch function writes its first argument (x.copy_(..), x.add_(..), x[i] = v, x += y)."""
    name = getattr(func, "__name__", "")
    return name in _IN_PLACE_DUNDERS or (name.endswith("_") and not name.endswith("__"))


def _root(t: torch.Tensor) -> torch.Tensor:
    """The tensor whose bytes t views (t itself when it is no view)."""
    return t._base if t._base is not None else t


class RuntimeValues(torch.overrides.TorchFunctionMode):
    """The tracing mode (see the module's docstring), also rewriting torch.narrow with a tensor start:
    x.index_select(dim, s + arange(length)), s = start (+ size when negative).

    A Python branch on a tensor value (`if (pad > 0).any():`, bool(t)) is specialized: with
    `branches` (the values bool() gave, in order, when the method ran eagerly at export on a copy of
    the module with the example inputs) each bool() returns its value, and the graph gets
    `torch._assert_async(cond)` (cond = t, or not t), which tandem runs as a `guard` op: a call in
    which the branch would go the other way fails with TDM_ERR_GUARD before any state is written.
    Without `branches`, the first such bool() raises NeedBranches."""

    def __init__(self, bias: int = 0, branches=None, eager_min_max: bool = False):
        super().__init__()
        self.eager_min_max = eager_min_max  # value_branches._min_max: Python's own max / min of a state value and an int
        self.min_max: list = []  # the user's lines of such max / min calls
        self.r = _Reads(bias)
        self.branches = branches
        self.taken = 0
        self._checks = _Checks()
        self.windows: dict = {}  # id -> (window, base, write): rows gathered at a run-time offset (_window)
        self.shifted: dict = {}  # id -> (tensor, root tensor, shift): a one-element int tensor = root + shift

    def __enter__(self):
        self._checks.__enter__()
        self._min_max = python_min_max(self.eager_min_max, self.min_max)
        self._min_max.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        self._min_max.__exit__(*exc)
        self._checks.__exit__(*exc)
        return super().__exit__(*exc)

    @property
    def bound(self) -> list:
        """[(unbacked size, tensor read, user line)]: the dims bound from the state (_Reads.prefix)."""
        return self.r.bound

    @property
    def limits(self) -> list:
        return self.r.limits

    @property
    def reads(self) -> list:
        """The user's lines that read an int from a tensor."""
        return [line for _, _, line in self.r.values]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = self._handle(func, args, kwargs)
        if self.windows and _in_place(func) and args and isinstance(args[0], torch.Tensor):
            self._written(args[0])
        return out

    def _window(self, w: torch.Tensor, base: torch.Tensor, write) -> torch.Tensor:
        """w, the rows of `base` at an offset known at run time (a copy: gathered with a tensor index),
        recorded as a view of them: an in-place write to w (or to a view of w) is written back into
        base with `write(w)`, as eager writes through the view (`cache.narrow(1, pos, n).copy_(k)`,
        ExecuTorch's KVCache); a write to base reads the rows again into w."""
        self.windows[id(w)] = (w, base, write)
        return w

    def _written(self, t: torch.Tensor, skip=None) -> None:
        """After an in-place op on t: write a window t is (or views) back into its base, and read again
        every other window whose base shares t's bytes."""
        root = _root(t)
        hit = self.windows.get(id(root))
        if hit is not None:
            w, base, write = hit
            write(w)
            self._written(base, w)
            return
        for w, base, write in list(self.windows.values()):
            if _root(base) is root and w is not skip:
                w.copy_(write.read())

    def _handle(self, func, args, kwargs):
        r = self.r
        if _is_branch(func, args) and _called_from_user():
            k = self.taken  # the k-th bool() of the method, as BranchRecorder counts them
            self.taken += 1
            try:
                out = func(*args, **kwargs)
                if not isinstance(out, torch.SymBool):
                    return out  # known while tracing (a constant): no guard needed
            except GuardOnDataDependentSymNode:
                pass
            if self.branches is None:
                raise NeedBranches()
            line = _user_line()
            if k >= len(self.branches):
                _fail(
                    "a branch on a tensor value that the method did not reach when it ran eagerly at export (the traced "
                    "and the eager runs branch differently); write it with torch.where"
                )
            value = self.branches[k]
            cond = args[0].reshape(()).to(torch.bool)
            torch._assert_async(cond if value else torch.logical_not(cond), f"tandem-guard {_line_number(line)}")
            return value
        if func in (torch.Tensor.item, torch.Tensor.__int__, torch.Tensor.__index__) and isinstance(args[0], torch.Tensor):
            t = args[0]
            if not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool and _one_element(t):
                return r.new(t, _user_line())
        if func in (torch.narrow, torch.Tensor.narrow) and len(args) >= 3 and (isinstance(args[2], torch.Tensor) or r.has(args[2])):
            x, dim, start = args[0], int(args[1]), r.plain(args[2])
            length = args[3] if len(args) > 3 else kwargs["length"]
            if r.has(length):
                _fail("torch.narrow with a length read from a tensor has a size known only at run time; use a fixed length")
            size = x.shape[dim]
            s = torch.where(start < 0, start + size, start).reshape(())
            s = torch.where(s < 0, size, s)  # still negative: out of range, as eager says
            rows = _Rows(x, dim, s + torch.arange(length, dtype=s.dtype))
            return self._window(rows.read(), x, rows)
        one = False
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and len(args) >= 2:
            index, one = r.single(args[1], "")
            if one:  # x[off], x[off] = v: at an offset known at run time (a 0-d tensor index, an int read)
                args = (args[0], index) + tuple(args[2:])
        if one and func is torch.Tensor.__getitem__:
            view, dim, idx = r.slice_of(args[0], args[1])
            rows = _Rows(view, dim, idx, squeeze=True)
            return self._window(rows.read(), view, rows)
        if one:
            x, index, value = args
            view, dim, idx = r.slice_of(x, index)
            rows = view[(slice(None),) * dim + (idx,)]
            value = torch.as_tensor(r.plain(value), dtype=x.dtype).expand(rows.squeeze(dim).shape).unsqueeze(dim)
            view[(slice(None),) * dim + (idx,)] = value
            return None
        if func is torch.Tensor.__getitem__ and r.has(args[1]):
            hit = r.slice_of(args[0], args[1])
            if isinstance(hit, torch.Tensor):  # a prefix of a length read from the state
                return hit
            if hit is None:
                _fail(
                    "indexing at a value read from a tensor (x[off]) is not supported; slice it, x[off:off + 1], or use "
                    "torch.index_select with a tensor index"
                )
            view, dim, idx = hit
            rows = _Rows(view, dim, idx)
            return self._window(rows.read(), view, rows)
        if func is torch.Tensor.__setitem__ and (r.has(args[1]) or r.has(args[2])):
            x, index, value = args
            value = r.plain(value)
            if not r.has(index):
                return x.__setitem__(index, value)
            hit = r.slice_of(x, index)
            if isinstance(hit, torch.Tensor):
                _fail(
                    "writing a slice whose length is read from a tensor (x[:off + T] = v) is not supported; write the new "
                    "rows at their offset, x[off:off + T] = v"
                )
            if hit is None:
                _fail("writing at a value read from a tensor (x[off] = v) is not supported; slice it, x[off:off + 1] = v")
            view, dim, idx = hit
            view[(slice(None),) * dim + (idx,)] = value
            return None
        if r.has((args, kwargs)):
            if func in _TENSOR_OPERANDS:
                return func(*r.plain(tuple(args)), **{k: r.plain(v) for k, v in kwargs.items()})
            if func in (torch.tensor, torch.as_tensor, torch.scalar_tensor) and args:
                dtype = kwargs.get("dtype") or torch.long
                if r.find(args[0]) is not None:  # torch.tensor(off)
                    return r.plain(args[0]).to(dtype).clone()
                if isinstance(args[0], (list, tuple)) and all(isinstance(v, int) for v in args[0]):  # torch.tensor([off, off + 1])
                    return torch.stack([r.plain(v) if r.find(v) is not None else torch.tensor(v) for v in args[0]]).to(dtype)
            name = getattr(func, "__name__", str(func))
            _fail(
                f"'{name}' takes a value read from a tensor with .item() / int() where it needs a Python number (a size, "
                "a dim, a fill value); tandem computes such values per call only as tensors and slice starts: pass a "
                "tensor (torch.tensor(off)) or slice cache[:, off:off + T]"
            )
        if func is torch.arange:
            rows = self._shifted_range(args, kwargs)
            if rows is not None:
                return rows
        out = func(*args, **kwargs)
        if func in _SHIFTS:
            self._record_shift(_SHIFTS[func], args, kwargs, out)
        return out

    def _origin(self, t: torch.Tensor) -> tuple:
        """(root, shift): t is root + shift (a recorded sum), else t itself + 0."""
        hit = self.shifted.get(id(t))
        return (hit[1], hit[2]) if hit is not None and hit[0] is t else (t, 0)

    def _record_shift(self, sign: int, args, kwargs, out) -> None:
        if len(args) != 2 or kwargs.get("alpha", 1) != 1 or not isinstance(out, torch.Tensor):
            return
        t, k = args
        if isinstance(k, bool) or not isinstance(k, (int, torch.SymInt)) or not _int_scalar(t):
            return
        root, shift = self._origin(t)
        self.shifted[id(out)] = (out, root, shift + sign * k)  # kept alive: its id is not reused while tracing

    def _shifted_range(self, args, kwargs):
        """torch.arange(start, end) of one-element int tensors where end = start + k (_record_shift): the
        tensor start + arange(k), else None."""
        start, end = (args + (None, None))[:2] if len(args) <= 2 else (None, None)
        start, end = kwargs.get("start", start), kwargs.get("end", end)
        if kwargs.get("step", 1) != 1 or not _int_scalar(start) or not _int_scalar(end):
            return None
        (a, i), (b, j) = self._origin(start), self._origin(end)
        if a is not b:
            return None
        dtype = kwargs.get("dtype") or torch.long
        return start.reshape(()).to(dtype) + torch.arange(j - i, dtype=dtype)
