"""Complex tensors as pairs of floats: a pass over a method's Core ATen graph, run before it is lowered,
that rewrites every complex-valued node as a real node holding the same numbers in a trailing dim of 2
(real, imaginary), the layout torch.view_as_real gives. view_as_complex and view_as_real become no
op; complex arithmetic becomes real arithmetic on the two halves; shape ops take the trailing dim
along. A complex constant or buffer read by a method is stored as its view_as_real (lower_method).

What the rules below do not cover stays an ExportError naming the op and the user's source line; so
is a method that takes or returns a complex tensor, or keeps one as state (the runtime's tensors are
real: pass and return torch.view_as_real(z)).
"""

from __future__ import annotations

import operator

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..ir import ExportError
from .provenance import source_line

aten = torch.ops.aten

RULES: dict = {}  # ATen target -> rule(P, node, args, kwargs): the node's value rewritten with real nodes


def _rule(*targets):
    def register(fn):
        for t in targets:
            RULES[t] = fn
        return fn

    return register


def _is_complex(val) -> bool:
    if isinstance(val, torch.Tensor):
        return val.is_complex()
    if isinstance(val, (list, tuple)):
        return any(_is_complex(v) for v in val)
    return isinstance(val, complex)


class Pairs:
    """The rewrite of one graph: `pair` maps each complex node to the real node of its pairs; `call`
    adds a real node before the node being rewritten, with its fake value and that node's source line."""

    def __init__(self, method: str, graph, fake_mode):
        self.method, self.graph, self.fake_mode = method, graph, fake_mode
        self.pair: dict = {}
        self.node = None

    def fail(self, msg: str):
        raise ExportError(f"method '{self.method}': {msg}{source_line(self.node)}")

    def call(self, target, *args, **kwargs):
        n = self.graph.call_function(target, args, kwargs)
        a, k = torch.fx.node.map_arg((args, kwargs), lambda x: x.meta["val"])
        with self.fake_mode:
            n.meta["val"] = target(*a, **k)
        for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
            if key in self.node.meta:
                n.meta[key] = self.node.meta[key]
        return n

    # ---- operands ---------------------------------------------------------------------------
    def is_c(self, a) -> bool:
        return a in self.pair if isinstance(a, torch.fx.Node) else isinstance(a, complex)

    def real_dtype(self) -> torch.dtype:
        """The dtype of the current node's pairs: its complex dtype's real half."""
        val = self.node.meta["val"]
        val = val[0] if isinstance(val, (list, tuple)) else val
        return val.dtype.to_real() if val.dtype.is_complex else val.dtype

    def c(self, a):
        """Operand `a` of a complex op as pairs: a complex node's, a real tensor's (imaginary 0) or a
        Python number's (a constant of shape [2])."""
        if isinstance(a, torch.fx.Node):
            if a in self.pair:
                return self.pair[a]
            return self.pack(a, self.call(aten.full_like.default, a, 0))
        if isinstance(a, (bool, int, float, complex)):
            dt = self.real_dtype()
            z = complex(a)
            return self.pack(self.call(aten.full.default, [], z.real, dtype=dt), self.call(aten.full.default, [], z.imag, dtype=dt))
        self.fail(f"'{self.node.target}' takes {a!r} with complex tensors, which tandem cannot represent")

    def re(self, x):
        return self.call(aten.select.int, x, -1, 0)

    def im(self, x):
        return self.call(aten.select.int, x, -1, 1)

    def pack(self, re, im):
        """Pairs of re and im (broadcast to one shape)."""
        same = re.meta["val"].dim() == im.meta["val"].dim() and all(
            statically_known_true(a == b) for a, b in zip(re.meta["val"].shape, im.meta["val"].shape)
        )
        if not same:  # x + 0 is x: broadcasts each to the shape of both
            re, im = (
                self.call(aten.add.Tensor, re, self.call(aten.full_like.default, im, 0)),
                self.call(aten.add.Tensor, im, self.call(aten.full_like.default, re, 0)),
            )
        return self.call(aten.cat.default, [self.call(aten.unsqueeze.default, re, -1), self.call(aten.unsqueeze.default, im, -1)], -1)

    def rank(self, a) -> int:
        """The rank of a complex node (its pairs have one dim more)."""
        return self.pair[a].meta["val"].dim() - 1

    def dim(self, d: int, rank: int) -> int:
        return d + rank if d < 0 else d

    def mul(self, x, y):
        """(xr + i xi)(yr + i yi), both pairs."""
        xr, xi, yr, yi = self.re(x), self.im(x), self.re(y), self.im(y)
        m = lambda a, b: self.call(aten.mul.Tensor, a, b)  # noqa: E731
        return self.pack(self.call(aten.sub.Tensor, m(xr, yr), m(xi, yi)), self.call(aten.add.Tensor, m(xr, yi), m(xi, yr)))


def lower_complex(method: str, graph) -> None:
    """Rewrite `graph`'s complex-valued nodes as real ones (pairs), in place; a complex placeholder (a
    constant or buffer) takes the value of its view_as_real. Raises ExportError for what it cannot."""
    nodes = list(graph.nodes)
    if not any(_is_complex(n.meta.get("val")) or _is_complex(list(n.args)) for n in nodes):
        return
    fake_mode = torch._guards.detect_fake_mode([n.meta.get("val") for n in nodes]) or torch._subclasses.FakeTensorMode()
    P = Pairs(method, graph, fake_mode)
    done = []
    for node in nodes:
        P.node = node
        val = node.meta.get("val")
        reads = [a for a in node.all_input_nodes if a in P.pair]
        if not reads and not _is_complex(val) and not _is_complex(list(node.args)):
            continue
        if node.op == "placeholder":
            with fake_mode:
                node.meta["val"] = torch.view_as_real(val.resolve_conj())
            P.pair[node] = node
            continue
        if node.op == "output":
            P.node = reads[0]  # the line that computed it
            P.fail(
                "returns a complex tensor; tandem's methods take and return real tensors: return "
                "torch.view_as_real(z) (its real and imaginary parts in a last dim of 2)"
            )
        rule = RULES.get(node.target)
        if node.op != "call_function" or rule is None:
            P.fail(
                f"'{node.target}' on complex tensors is not supported: tandem computes complex tensors as pairs "
                "of floats through view_as_complex/view_as_real, polar, complex, real/imag, conj, abs, exp, + - * /, "
                "integer powers, matmul, sums, where, and shape and indexing ops (docs/ops.md, Complex tensors)"
            )
        with graph.inserting_before(node):
            out = rule(P, node, node.args, node.kwargs)
        if _is_complex(val):
            P.pair[node] = out
        elif out is not None:
            node.replace_all_uses_with(out)
        done.append(node)
    for node in reversed(done):
        graph.erase_node(node)  # its users were rewritten before it, or now read its replacement


# ---- rules: each returns the real node(s) of the node's value (pairs where it is complex) -----------


@_rule(aten._assert_tensor_metadata.default)
def _drop(P, node, args, kwargs):
    return None  # a dtype assertion on a complex value the pairs replace


@_rule(aten.view_as_complex.default)
def _view_as_complex(P, node, args, kwargs):
    return args[0]


@_rule(aten.view_as_real.default)
def _view_as_real(P, node, args, kwargs):
    return P.pair[args[0]]


@_rule(aten.polar.default)
def _polar(P, node, args, kwargs):
    r, theta = args
    return P.pack(P.call(aten.mul.Tensor, r, P.call(aten.cos.default, theta)), P.call(aten.mul.Tensor, r, P.call(aten.sin.default, theta)))


@_rule(aten.complex.default)
def _complex(P, node, args, kwargs):
    return P.pack(args[0], args[1])


@_rule(aten.mul.Tensor)
def _mul(P, node, args, kwargs):
    a, b = args
    if not P.is_c(a):
        a, b = b, a
    if P.is_c(a) and not P.is_c(b):  # by a real: both halves scaled
        if isinstance(b, torch.fx.Node):
            b = P.call(aten.unsqueeze.default, b, -1)
        return P.call(aten.mul.Tensor, P.c(a), b)
    return P.mul(P.c(a), P.c(b))


@_rule(aten.div.Tensor)
def _div(P, node, args, kwargs):
    a, b = args
    if not P.is_c(b):  # by a real: both halves divided
        if isinstance(b, torch.fx.Node):
            b = P.call(aten.unsqueeze.default, b, -1)
        return P.call(aten.div.Tensor, P.c(a), b)
    return P.mul(P.c(a), _inverse(P, P.c(b)))


@_rule(aten.reciprocal.default)
def _reciprocal(P, node, args, kwargs):
    return _inverse(P, P.pair[args[0]])


def _inverse(P, y):
    """1 / (yr + i yi) = (yr - i yi) / (yr² + yi²), of pairs."""
    yr, yi = P.re(y), P.im(y)
    den = P.call(aten.add.Tensor, P.call(aten.mul.Tensor, yr, yr), P.call(aten.mul.Tensor, yi, yi))
    return P.pack(P.call(aten.div.Tensor, yr, den), P.call(aten.div.Tensor, P.call(aten.neg.default, yi), den))


@_rule(aten.add.Tensor, aten.sub.Tensor)
def _add(P, node, args, kwargs):
    a, b = args[:2]
    alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
    y = P.c(b)
    if isinstance(alpha, complex):
        y = P.mul(y, P.c(alpha))
    elif alpha != 1:
        y = P.call(aten.mul.Tensor, y, alpha)
    return P.call(node.target, P.c(a), y)


@_rule(aten.neg.default)
def _neg(P, node, args, kwargs):
    return P.call(aten.neg.default, P.pair[args[0]])


@_rule(aten._conj.default, aten._conj_physical.default)
def _conj(P, node, args, kwargs):
    x = P.pair[args[0]]
    return P.pack(P.re(x), P.call(aten.neg.default, P.im(x)))


@_rule(aten.clone.default, aten.alias.default)
def _same(P, node, args, kwargs):
    return P.call(node.target, P.pair[args[0]])


@_rule(aten.pow.Tensor_Scalar)
def _pow(P, node, args, kwargs):
    """An integer power, by squaring."""
    x, e = P.pair[args[0]], args[1]
    if not isinstance(e, (int, float)) or e != int(e) or abs(e) > 1 << 16:
        P.fail(f"'{node.target}' of a complex tensor to the power {e!r}: tandem computes integer powers of complex tensors only")
    n, out = abs(int(e)), None
    while n:
        if n & 1:
            out = x if out is None else P.mul(out, x)
        n >>= 1
        if n:
            x = P.mul(x, x)
    if out is None:  # z ** 0
        re = P.re(x)
        return P.pack(P.call(aten.full_like.default, re, 1), P.call(aten.full_like.default, re, 0))
    return _inverse(P, out) if e < 0 else out


@_rule(aten.mm.default, aten.bmm.default)
def _matmul(P, node, args, kwargs):
    x, y = P.c(args[0]), P.c(args[1])
    xr, xi, yr, yi = P.re(x), P.im(x), P.re(y), P.im(y)
    f = lambda a, b: P.call(node.target, a, b)  # noqa: E731
    return P.pack(P.call(aten.sub.Tensor, f(xr, yr), f(xi, yi)), P.call(aten.add.Tensor, f(xr, yi), f(xi, yr)))


@_rule(aten.abs.default)
def _abs(P, node, args, kwargs):
    x = P.pair[args[0]]
    re, im = P.re(x), P.im(x)
    sq = P.call(aten.add.Tensor, P.call(aten.mul.Tensor, re, re), P.call(aten.mul.Tensor, im, im))
    return P.call(aten.sqrt.default, sq)


@_rule(aten.exp.default)
def _exp(P, node, args, kwargs):
    x = P.pair[args[0]]
    e, im = P.call(aten.exp.default, P.re(x)), P.im(x)
    return P.pack(P.call(aten.mul.Tensor, e, P.call(aten.cos.default, im)), P.call(aten.mul.Tensor, e, P.call(aten.sin.default, im)))


@_rule(aten._to_copy.default)
def _to_copy(P, node, args, kwargs):
    x, dt = args[0], kwargs.get("dtype")
    if x in P.pair:
        if dt is not None and not dt.is_complex:  # to a real dtype: the real part, as torch keeps it
            return P.call(aten._to_copy.default, P.re(P.pair[x]), dtype=dt)
        return P.call(aten._to_copy.default, P.pair[x], dtype=P.real_dtype())
    return P.c(P.call(aten._to_copy.default, x, dtype=P.real_dtype()))


@_rule(aten.view.default)
def _view(P, node, args, kwargs):
    return P.call(node.target, P.pair[args[0]], [*args[1], 2])


@_rule(aten.expand.default)
def _expand(P, node, args, kwargs):
    return P.call(aten.expand.default, P.pair[args[0]], [*args[1], 2])


@_rule(aten.repeat.default)
def _repeat(P, node, args, kwargs):
    return P.call(aten.repeat.default, P.pair[args[0]], [*args[1], 1])


@_rule(aten.unsqueeze.default)
def _unsqueeze(P, node, args, kwargs):
    return P.call(aten.unsqueeze.default, P.pair[args[0]], P.dim(args[1], P.rank(args[0]) + 1))


@_rule(aten.squeeze.dims)
def _squeeze(P, node, args, kwargs):
    r = P.rank(args[0])
    return P.call(aten.squeeze.dims, P.pair[args[0]], [P.dim(d, r) for d in args[1]])


@_rule(aten.permute.default)
def _permute(P, node, args, kwargs):
    r = P.rank(args[0])
    return P.call(aten.permute.default, P.pair[args[0]], [P.dim(d, r) for d in args[1]] + [r])


# ops along one dim: the operand of that dim (after the tensors), and the tensors it takes
_DIM_AT = {
    aten.slice.Tensor: (1, 1),
    aten.select.int: (1, 1),
    aten.index_select.default: (1, 1),
    aten.split_with_sizes.default: (2, 1),
    aten.slice_scatter.default: (2, 2),
}


@_rule(*_DIM_AT)
def _along_dim(P, node, args, kwargs):
    """Slice, select, index_select, split and slice_scatter: the same dim of the pairs."""
    at, tensors = _DIM_AT[node.target]
    args, r = list(args), P.rank(args[0]) if args[0] in P.pair else node.meta["val"].dim()
    if len(args) > at:
        args[at] = P.dim(args[at], r)
    elif "dim" in kwargs:
        kwargs = {**kwargs, "dim": P.dim(kwargs["dim"], r)}
    elif node.target is aten.slice.Tensor:
        args.append(0)
    return P.call(node.target, *[P.c(a) for a in args[:tensors]], *args[tensors:], **kwargs)


@_rule(operator.getitem)
def _getitem(P, node, args, kwargs):
    return P.call(operator.getitem, P.pair[args[0]], args[1])


@_rule(aten.cat.default)
def _cat(P, node, args, kwargs):
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    return P.call(aten.cat.default, [P.c(t) for t in args[0]], P.dim(dim, node.meta["val"].dim()))


@_rule(aten.index.Tensor)
def _index(P, node, args, kwargs):
    return P.call(aten.index.Tensor, P.pair[args[0]], args[1])  # indices of the leading dims: the pairs' dim is kept


@_rule(aten.index_put.default)
def _index_put(P, node, args, kwargs):
    return P.call(aten.index_put.default, P.c(args[0]), args[1], P.c(args[2]), *args[3:])


@_rule(aten.copy.default)
def _copy(P, node, args, kwargs):
    return P.call(aten.copy.default, P.c(args[0]), P.c(args[1]))


@_rule(aten.where.self)
def _where(P, node, args, kwargs):
    return P.call(aten.where.self, P.call(aten.unsqueeze.default, args[0], -1), P.c(args[1]), P.c(args[2]))


@_rule(aten.full.default)
def _full(P, node, args, kwargs):
    z, dt = complex(args[1]), P.real_dtype()
    return P.pack(P.call(aten.full.default, args[0], z.real, dtype=dt), P.call(aten.full.default, args[0], z.imag, dtype=dt))


@_rule(aten.full_like.default)
def _full_like(P, node, args, kwargs):
    x, z, dt = args[0], complex(args[1]), P.real_dtype()
    like = P.re(P.pair[x]) if x in P.pair else x
    return P.pack(P.call(aten.full_like.default, like, z.real, dtype=dt), P.call(aten.full_like.default, like, z.imag, dtype=dt))


@_rule(aten.sum.dim_IntList, aten.mean.dim)
def _reduce(P, node, args, kwargs):
    x, r = args[0], P.rank(args[0])
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    dims = list(range(r)) if not dims else [P.dim(d, r) for d in dims]
    keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    return P.call(node.target, P.pair[x], dims, keep)
