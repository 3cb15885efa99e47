"""Complex tensors computed as pairs of floats (python/tandem/lowering/complex_pairs.py): rotary
embeddings written with view_as_complex / polar / view_as_real over a KV cache, and each complex op
the pass rewrites, against PyTorch eager natively and in wasm; what it does not rewrite is an
ExportError naming the op and the line."""

import copy
import inspect

import pytest
import torch
from torch import nn
from torch.export import Dim

import tandem
from cases import as_tuple, run_eager


def rotate(x, freqs_cis):
    """x [B, T, H, D] rotated by freqs_cis [T, D/2] (complex), as Llama 4 and DeepSeek V2 write it."""
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs_cis[None, :, None, :]).flatten(3).type_as(x)


class ComplexRotaryAttention(nn.Module):
    """Attention over a KV cache with complex rotary embeddings: the queries' from a complex buffer
    indexed by position, the keys' computed per call with torch.polar; prefill, decode and reset share
    the cache and the position."""

    def __init__(self, dim=16, heads=2, max_len=12):
        super().__init__()
        torch.manual_seed(0)
        self.heads, self.hd, self.max_len = heads, dim // heads, max_len
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        self.register_buffer("inv_freq", inv)
        angles = torch.outer(torch.arange(max_len).float(), inv)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))  # complex64, never written
        self.register_buffer("k", torch.zeros(1, max_len, heads, self.hd))
        self.register_buffer("v", torch.zeros(1, max_len, heads, self.hd))
        self.register_buffer("n", torch.zeros((), dtype=torch.long))

    def step(self, x):
        t = x.shape[1]
        pos = self.n + torch.arange(t)
        q, k, v = self.qkv(x).view(1, t, 3, self.heads, self.hd).unbind(2)
        angles = pos[:, None].float() * self.inv_freq[None, :]
        q = rotate(q, self.freqs_cis[pos])
        k = rotate(k, torch.polar(torch.ones_like(angles), angles) * 1.0)
        self.k[:, pos] = k
        self.v[:, pos] = v
        self.n += t
        scores = torch.einsum("bthd,bshd->bhts", q, self.k) / self.hd**0.5
        scores = scores.masked_fill(torch.arange(self.max_len)[None, :] > pos[:, None], float("-inf"))
        y = torch.einsum("bhts,bshd->bthd", scores.softmax(-1), self.v)
        return self.out(y.reshape(1, t, -1))

    def prefill(self, x):
        return self.step(x)

    def decode(self, x):
        return self.step(x)

    def reset(self):
        self.k.zero_()
        self.v.zero_()
        self.n.zero_()


def test_complex_rotary_over_a_kv_cache_equals_eager(backend):
    m = ComplexRotaryAttention()
    e = copy.deepcopy(m)
    spec = {
        "prefill": tandem.Method(m.prefill, (torch.zeros(1, 4, 16),), dynamic_shapes=({1: Dim("n", min=1, max=8)},)),
        "decode": tandem.Method(m.decode, (torch.zeros(1, 1, 16),)),
        "reset": tandem.Method(m.reset, ()),
    }
    model = tandem.load(tandem.export(m, spec).to_bytes())
    g = torch.Generator().manual_seed(1)
    x = lambda t: (torch.randn(1, t, 16, generator=g),)  # noqa: E731
    calls = [("prefill", x(4)), ("decode", x(1)), ("decode", x(1)), ("reset", ()), ("prefill", x(3)), ("prefill", x(2))]
    calls += [("decode", x(1)) for _ in range(7)]  # up to the cache's end
    want = run_eager({"prefill": e.prefill, "decode": e.decode, "reset": e.reset}, calls)
    for i, ((name, inputs), w) in enumerate(zip(calls, want)):
        got = as_tuple(model.call(name, *inputs))
        assert len(got) == len(w)
        for a, b in zip(got, w):
            torch.testing.assert_close(a, b, msg=lambda s: f"call {i} {name}: {s}")
    torch.testing.assert_close(model.read_state("k"), e.k)
    assert int(model.read_state("n")) == 12


C = torch.view_as_complex
R = torch.view_as_real


torch.manual_seed(0)  # the inputs below


def _c(*shape):
    return torch.randn(*shape, 2)


def _setitem(a, b):
    z = C(a).clone()
    z[1:3] = z[:2] * C(b)
    z[0] = 1j
    z[:, 1] = 2.0
    return R(z)


# (name, fn, inputs): each fn takes real tensors ([..., 2] where it views them as complex) and returns real ones
OPS = [
    ("mul_broadcast", lambda a, b: R(C(a) * C(b)), (_c(3, 1, 4), _c(5, 4))),
    ("mul_real", lambda a, r: (R(C(a) * r), R(r * C(a)), R(C(a) * 0.5)), (_c(3, 4), torch.randn(3, 4))),
    ("mul_complex_scalar", lambda a, r: (R(C(a) * (1 - 2j)), R(r * 1j), R(2j * C(a))), (_c(2, 3), torch.randn(3))),
    ("div", lambda a, b, r: (R(C(a) / C(b)), R(C(a) / 2), R(C(a) / r), R(1 / C(b))), (_c(2, 3), _c(3), torch.rand(2, 3) + 1)),
    (
        "add_sub",
        lambda a, b, r: (R(torch.add(C(a), C(b), alpha=2)), R(C(a) - r), R(C(a) + 3), R(torch.sub(C(b), C(a), alpha=0.5)), R(r + 1j)),
        (_c(4, 3), _c(3), torch.randn(4, 1)),
    ),
    (
        "unary",
        lambda a, b: (
            R(C(a).conj() * C(b)),
            R(C(a).conj_physical()),
            C(a).abs(),
            R(torch.exp(C(a))),
            C(a).real * 2,
            C(a).imag + 1,
            R(-C(a)),
            R(C(a).detach() * 1j),
            C(a).to(torch.float32),
        ),
        (_c(2, 5), _c(2, 5)),
    ),
    ("powers", lambda a: (R(C(a) ** 2), R(C(a).square()), R(C(a) ** 5), R(C(a) ** -3), R(C(a) ** 0)), (_c(2, 3),)),
    ("matmul", lambda a, b: (R(C(a) @ C(b)), R(torch.einsum("bij,jk->bik", C(a)[None].expand(3, 2, 4), C(b)))), (_c(2, 4), _c(4, 3))),
    (
        "setitem",
        lambda a, b: (_setitem(a, b), R(C(a).roll(1, 0)), R(C(a).unbind(1)[2] * 1j), R(C(a).chunk(2, 0)[1] * 1j)),
        (_c(4, 3), _c(3)),
    ),
    (
        "polar_complex",
        lambda r, t, a, b: (R(torch.polar(r, t)), R(torch.complex(a, b))),
        (torch.rand(3, 4), torch.randn(4), torch.randn(3, 1), torch.randn(5)),
    ),
    (
        "shape",
        lambda a, b: (
            R(C(a).transpose(0, 1)),
            R(C(a).permute(2, 0, 1) * 1j),
            R(C(a)[1:, ::2] + 1),
            R(C(a)[:, 0] * C(b)[0, 0]),
            R(C(b).expand(3, 4, 5) * 2),
            R(torch.cat([C(a), C(b).expand(2, 4, 5)], -1) * 1j),
            R(torch.stack([C(a), C(a) * 2], 1) * 1j),
            R(C(a).unsqueeze(-1).squeeze(-1) * 1j),
            R(C(a).reshape(-1) * 1j),
            R(C(a).repeat(2, 1, 1) * 1j),
            *[R(p * 1j) for p in C(a).split([1, 3], dim=1)],
        ),
        (_c(2, 4, 5), _c(1, 4, 5)),
    ),
    (
        "index",
        lambda a, b, i: (R(C(a)[i] * 1j), R(C(a).index_put((i,), C(b))), R(C(a).index_select(1, i) * 1j)),
        (_c(4, 3), _c(3), torch.tensor([2, 0])),
    ),
    ("where", lambda a, b, m: R(torch.where(m, C(a), C(b) * 2)), (_c(3, 4), _c(4), torch.rand(3, 4) > 0.5)),
    ("complex128", lambda a: R(C(a.double()) * torch.tensor([1 + 1j, 2 - 1j], dtype=torch.complex128)).float(), (_c(3, 2),)),
    ("reduce", lambda a: (R(C(a).sum(0)), R(C(a).mean(-1, keepdim=True)), R(C(a).sum())), (_c(3, 4),)),
    (
        "constants",
        lambda a, r: (
            R(C(a) * torch.tensor([1 + 2j, 3 - 1j, 0.5j])),
            R(torch.full((3,), 1 + 1j) + C(a)),
            R(r.to(torch.complex64) * (2 + 1j)),
            R(torch.zeros_like(C(a)) + torch.ones(3, dtype=torch.complex64)),
        ),
        (_c(2, 3), torch.randn(2, 3)),
    ),
]


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
@pytest.mark.parametrize("name", [o[0] for o in OPS])
def test_complex_op_equals_eager(name, backend):
    _, fn, inputs = next(o for o in OPS if o[0] == name)
    model = tandem.load(tandem.export(Fn(fn), {"forward": inputs}).to_bytes())
    got, want = as_tuple(model.forward(*inputs)), as_tuple(fn(*inputs))
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g, w, **TOLERANCE.get(name, {}), msg=lambda s: f"output {i}: {s}")


# torch raises a complex float32 to a power through its polar form, tandem by repeated multiplication
TOLERANCE = {"powers": {"rtol": 1e-4, "atol": 1e-4}}


def _line(fn, marker: str) -> str:
    lines, first = inspect.getsourcelines(fn)
    return f"test_complex.py:{first + next(i for i, ln in enumerate(lines) if marker in ln)}"


class Angle(nn.Module):
    def forward(self, a):
        z = C(a) * 2
        return torch.angle(z)  # ANGLE


class ReturnsComplex(nn.Module):
    def forward(self, a):
        return C(a) * 2  # RETURNS


class ComplexState(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("z", torch.zeros(3, dtype=torch.complex64))

    def forward(self, a):
        self.z.add_(C(a))
        return R(self.z) * 1


def test_what_the_pairs_do_not_cover_is_refused_naming_the_op_and_line():
    with pytest.raises(tandem.ExportError) as e:
        tandem.export(Angle(), {"forward": (_c(3),)})
    msg = str(e.value)
    assert "'aten.angle.default' on complex tensors is not supported" in msg and _line(Angle.forward, "ANGLE") in msg, msg
    with pytest.raises(tandem.ExportError, match="returns a complex tensor.*view_as_real") as e:
        tandem.export(ReturnsComplex(), {"forward": (_c(3),)})
    assert _line(ReturnsComplex.forward, "RETURNS") in str(e.value)
    with pytest.raises(tandem.ExportError, match="state 'z' has dtype torch.complex64"):
        tandem.export(ComplexState(), {"forward": (_c(3),)})
    with pytest.raises(tandem.ExportError, match="complex64"):
        tandem.export(Fn(lambda z: R(z)), {"forward": (torch.zeros(3, dtype=torch.complex64),)})
