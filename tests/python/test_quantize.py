"""Quantized weights (tandem.export(quantize=...), python/tandem/quantize.py, docs/ops.md): the
packed layouts byte for byte, what stays float32, the verifier keeping the constant-only dtypes to
the quantized ops' constants, and accuracy against float32 for a transformers Llama and for the
demo's trained character model. Per-op parity against a reference quantization is in test_ops.py
(test_quantized_op_matches_reference_quantization, also run in wasm)."""

import copy
import json
import struct
from pathlib import Path

import pytest
import torch
from torch import nn

import tandem
from tandem import schema as S
from tandem.ir import F32, I8, Op
from tandem.layout import PANEL, pack_panels
from tandem.quantize import _const
from tandem.runtime import verify
from test_ops import Tied, quantize_linear_inputs, ref_dequantize, ref_quantized_output

ROOT = Path(__file__).resolve().parents[2]
g = torch.Generator().manual_seed(7)


def unpack_panels(bp: torch.Tensor, N: int) -> torch.Tensor:
    """A weight as the file holds it, [P, K, PANEL] panels, back to [K, N] (docs/ops.md)."""
    P, K, _ = bp.shape
    return bp.permute(1, 0, 2).reshape(K, P * PANEL)[:, :N]


def constants(data: bytes) -> list:
    """(dtype code, dims, bytes) of every constant of a .tandem file (docs/format.md)."""
    sections = {}
    (count,) = struct.unpack_from("<I", data, 16)  # HEADER's section_count (a version 1 file has 5)
    for i in range(count):
        sid, _, off, size = struct.unpack_from("<IIQQ", data, S.HEADER.size + i * S.SECTION.size)
        sections[S.SECTIONS[sid]] = off
    at = sections["constants"]
    (count,) = struct.unpack_from("<I", data, at)
    at += 4
    out = []
    for _ in range(count):
        _, dtype, rank, _, off, nbytes = struct.unpack_from(S.CONSTANT.fmt, data, at)
        at += S.CONSTANT.size
        dims = struct.unpack_from(f"<{rank}q", data, at)
        at += 8 * rank
        base = sections["data"] + off
        out.append((dtype, dims, data[base : base + nbytes]))
    return out


def _op(program, name):
    return next(op for op in program.method("forward").ops if op.name == name)


# ---- layouts ---------------------------------------------------------------------------------------


def test_int4_layout_is_the_documented_one():
    """Blocks of 8 k: a panel's 32 bytes of block b hold column j's codes at 4j + r, k = 8b + 2r in
    the low nibble and 8b + 2r + 1 in the high one, each q + 8; scales [P, ceil(K/G), 8]; code 0
    (nibble 8) past N and past K, scales zero past N."""
    K, N, G = 37, 11, 8
    lin = nn.Linear(K, N)
    program = tandem.export(lin, {"forward": (torch.randn(1, K, generator=g),)}, quantize="int4", quantize_group=G)
    op = _op(program, "matmul_q4")
    assert op.iattr == [N, G]
    qb, sc = op.ins[1].storage.tensor, op.ins[2].storage.tensor
    assert tuple(qb.shape) == (2, 20, 8) and qb.dtype == torch.uint8 and tuple(sc.shape) == (2, 5, 8)
    flat = qb.reshape(2, -1)
    codes = torch.zeros(40, 16, dtype=torch.int64)
    for k in range(40):
        for n in range(16):
            byte = int(flat[n // 8, (k // 8) * 32 + (n % 8) * 4 + (k % 8) // 2])
            codes[k, n] = ((byte >> (4 * (k % 2))) & 15) - 8
    w = torch.tensor([[int(codes[k, n]) * float(sc[n // 8, k // G, n % 8]) for n in range(16)] for k in range(K)], dtype=torch.float64)
    assert torch.equal(w[:, :N], ref_dequantize(lin.weight, "int4", G).t())
    assert not codes[:, N:].any() and not codes[K:].any() and not sc[1, :, N - 8 :].any()


def test_int8_layout_is_the_documented_one():
    """Plain panels for an odd K (iattr [N]); for an even K the paired layout (iattr [N, 1]): in each
    panel's 16 bytes of rows k, k + 1 (k even), byte 2j + k % 2 holds column j's code of row k."""
    for K, form in ((21, [13]), (20, [13, 1])):
        N = 13
        lin = nn.Linear(K, N)
        program = tandem.export(lin, {"forward": (torch.randn(3, K, generator=g),)}, quantize="int8")
        op = _op(program, "matmul_q8")
        assert op.iattr == form
        q, sc = op.ins[1].storage.tensor, op.ins[2].storage.tensor
        assert q.dtype == torch.int8 and tuple(q.shape) == (2, K, 8) and tuple(sc.shape) == (2, 8)
        plain = q if K % 2 else q.reshape(2, K // 2, 8, 2).transpose(2, 3).reshape(2, K, 8)
        if K % 2 == 0:
            assert int(q[0, 0, 1]) == int(plain[0, 1, 0]) and int(q[1, 2, 3]) == int(plain[1, 3, 1])
            assert bytes(q.numpy().tobytes()) == _paired(plain.numpy().tobytes())
        w = unpack_panels(plain, N).double() * sc.reshape(-1)[:N].double()
        assert torch.equal(w, ref_dequantize(lin.weight, "int8").t())
        assert not plain[1, :, N - 8 :].any() and not sc[1, N - 8 :].any()
        assert q.abs().max() == 127


def test_tied_table_is_stored_once_quantized():
    model = Tied(64, 40).eval()
    i = torch.randint(0, 64, (1, 5), generator=g)
    for mode, code in (("int8", 4), ("int4", 5)):
        program = tandem.export(model, {"forward": (i,)}, quantize=mode)
        ops = program.method("forward").ops
        emb = next(op for op in ops if op.name.startswith("embedding_"))
        mm = next(op for op in ops if op.name.startswith("matmul_"))
        assert emb.ins[0].storage is mm.ins[1].storage and emb.ins[1].storage is mm.ins[2].storage
        consts = constants(program.to_bytes())
        assert [c[0] for c in consts].count(code) == 1
        assert not any(c[0] == 1 and c[1] in ((8, 40, 8), (64, 40)) for c in consts)  # no float32 table left


def test_skip_and_what_stays_float():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)
            self.register_buffer("proj", torch.randn(16, 8, generator=g))  # a buffer: stays float32

        def forward(self, x):
            return self.b(self.a(x)) @ self.proj

    x = torch.randn(2, 16, generator=g)
    names = lambda p: [op.name for op in p.method("forward").ops if op.name.startswith("matmul")]  # noqa: E731
    assert names(tandem.export(M(), {"forward": (x,)}, quantize="int8")) == ["matmul_q8", "matmul_q8", "matmul_packed"]
    assert names(tandem.export(M(), {"forward": (x,)}, quantize="int8", quantize_skip=["b."])) == [
        "matmul_q8",
        "matmul_packed",
        "matmul_packed",
    ]
    seen = []
    skip = lambda name, shape: seen.append((name, shape)) or name.startswith("a.")  # noqa: E731
    assert names(tandem.export(M(), {"forward": (x,)}, quantize="int4", quantize_skip=skip)) == [
        "matmul_packed",
        "matmul_q4",
        "matmul_packed",
    ]
    assert ("a.weight", (16, 16)) in seen
    with pytest.raises(tandem.ExportError, match="int8"):
        tandem.export(M(), {"forward": (x,)}, quantize="int3")
    with pytest.raises(tandem.ExportError, match="even"):
        tandem.export(M(), {"forward": (x,)}, quantize="int4", quantize_group=7)


def test_weights_are_matched_to_parameters_by_torch_equal_unless_a_parameter_holds_nan(monkeypatch):
    """Each weight is compared with every parameter of its shape: torch.equal stops at the first
    difference, the NaN-aware comparison reads both tensors whole (a 30-layer model's int8 export took
    minutes per layer with it on every pair), so it runs only for a parameter holding NaN."""
    import tandem.quantize as quantize

    calls = []
    whole = quantize._equal_nan
    monkeypatch.setattr(quantize, "_equal_nan", lambda a, b: calls.append(a.shape) or whole(a, b))
    m = nn.Sequential(*[nn.Linear(16, 16, bias=False) for _ in range(6)])
    x = torch.randn(2, 16, generator=g)
    ops = lambda p: [op.name for op in p.method("forward").ops if op.name.startswith("matmul")]  # noqa: E731
    assert ops(tandem.export(m, {"forward": (x,)}, quantize="int8")) == ["matmul_q8"] * 6 and calls == []
    with torch.no_grad():
        m[3].weight[0, 0] = float("nan")  # found as m[3]'s weight still, by the whole comparison only
    assert ops(tandem.export(m, {"forward": (x,)}, quantize="int8")) == ["matmul_q8"] * 6
    assert 0 < len(calls) <= 2 * 6  # m[3]'s weight against every 16x16 weight, in both orientations


# ---- the verifier ----------------------------------------------------------------------------------


def _quantized_linear():
    program = tandem.export(nn.Linear(16, 8), {"forward": (torch.randn(16, 16, generator=g),)}, quantize="int8")
    return program, program.method("forward"), _op(program, "matmul_q8")


def _rejected(program, status, text):
    program._bytes = None
    with pytest.raises(tandem.TandemError) as e:
        verify(program.to_bytes())
    assert e.value.code == status and text in str(e.value), str(e.value)


def test_verifier_keeps_int8_to_the_quantized_ops(monkeypatch):
    # The programs below break the op rules on purpose, for the runtime's verifier to refuse: the
    # writer's own check against schema.SIGS (on in the tests) would refuse them first.
    monkeypatch.setattr(tandem.format, "CHECK_OPS", False)
    # another op reading the int8 weights (cast takes any dtype): rejected by the op rule
    program, m, op = _quantized_linear()
    out = op.outs[0]
    m.ops[m.ops.index(op)] = Op("cast", [op.ins[1]], [out.view((1, 16, 8))])
    _rejected(program, "TDM_ERR_OP_RULE", "only quantized-weight ops read")
    program, m, op = _quantized_linear()
    m.ops[m.ops.index(op)] = Op("matmul_packed", [op.ins[0], op.ins[1]], op.outs, [8])
    _rejected(program, "TDM_ERR_OP_RULE", "only quantized-weight ops read")
    # as a method output, an input, a state
    program, m, op = _quantized_linear()
    m.outputs.append(("w", op.ins[1]))
    _rejected(program, "TDM_ERR_MALFORMED", "never an input or output")
    program, m, op = _quantized_linear()
    m.inputs[0][1].dtype = I8
    _rejected(program, "TDM_ERR_MALFORMED", "for constants only")


def test_verifier_rejects_int8_state():
    class Acc(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("s", torch.zeros(64))

        def forward(self, x):
            self.s.add_(x)
            return self.s * 2

    program = tandem.export(Acc(), {"forward": (torch.ones(64),)})
    program.states[0].dtype = I8
    _rejected(program, "TDM_ERR_MALFORMED", "for constants only")


def test_quantized_op_rules():
    program, m, op = _quantized_linear()
    op.ins[2] = _const(torch.ones(1, 4), F32)  # scales of the wrong shape
    _rejected(program, "TDM_ERR_OP_RULE", "scales [ceil(N/8), 8]")
    program, m, op = _quantized_linear()
    assert op.iattr == [8, 1]
    op.iattr[1] = 2
    _rejected(program, "TDM_ERR_OP_RULE", "layout must be 0 (plain panels) or 1 (paired)")
    program = tandem.export(nn.Linear(15, 8), {"forward": (torch.randn(1, 15, generator=g),)}, quantize="int8")
    op = _op(program, "matmul_q8")
    assert op.iattr == [8]
    op.iattr.append(1)  # an odd K cannot be paired
    _rejected(program, "TDM_ERR_OP_RULE", "need an even K")
    op.iattr[1] = 0  # the plain panels, named
    program._bytes = None
    verify(program.to_bytes())
    program = tandem.export(nn.Linear(16, 8), {"forward": (torch.randn(1, 16, generator=g),)}, quantize="int4")
    _op(program, "matmul_q4").iattr[1] = 3
    _rejected(program, "TDM_ERR_OP_RULE", "G even")
    program = tandem.export(nn.Linear(16, 8), {"forward": (torch.randn(1, 16, generator=g),)}, quantize="int4", quantize_group=8)
    _op(program, "matmul_q4").iattr[1] = 16  # the scales are for groups of 8
    _rejected(program, "TDM_ERR_OP_RULE", "ceil(K/G)")


def test_int8_rows_take_the_integer_dot_one_by_one():
    """matmul_q8 with any number of rows (docs/ops.md, "Integer dot products"; in blocks of up to 8
    whose int8 copies fit 8192 values): every finite row quantized as it would be alone, a row with a
    NaN taking the float path by itself (its output NaN, the others unchanged); only K > 8192 (its
    K rounded up to even past the stack buffer) takes the float path."""
    lin = nn.Linear(70, 24).eval()
    for rows in (2, 3, 5, 8, 9, 16, 37):
        x = torch.randn(rows, 70, generator=g)
        m = tandem.load(tandem.export(lin, {"forward": (x,)}, quantize="int8").to_bytes())
        got, want = m.forward(x), ref_quantized_output(lin, (x,), "int8")
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        alone = torch.cat([ref_quantized_output(lin, (x[i : i + 1],), "int8") for i in range(rows)])
        torch.testing.assert_close(got, alone, rtol=1e-5, atol=1e-5)  # each row's values as the one-row GEMV gives them
        x[1, 5] = float("nan")
        got = m.forward(x)
        assert got[1].isnan().all()
        keep = [i for i in range(rows) if i != 1]
        torch.testing.assert_close(got[keep], alone[keep], rtol=1e-5, atol=1e-5)
    big = nn.Linear(2049, 8).eval()  # 4 rows of 2050 int16: blocks of 3 and 1 rows
    x = torch.randn(4, 2049, generator=g)
    got = tandem.load(tandem.export(big, {"forward": (x,)}, quantize="int8").to_bytes()).forward(x)
    alone = torch.cat([ref_quantized_output(big, (x[i : i + 1],), "int8") for i in range(4)])
    torch.testing.assert_close(got, alone, rtol=1e-5, atol=1e-5)
    huge = nn.Linear(8193, 8).eval()  # K past the stack buffer: the float path, even for one row
    x = torch.randn(3, 8193, generator=g)
    got = tandem.load(tandem.export(huge, {"forward": (x,)}, quantize="int8").to_bytes()).forward(x)
    torch.testing.assert_close(got, ref_quantized_output(huge, (x,), "int8"), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["native", "wasm"])
def test_int4_groups_of_any_even_size_give_the_reference_values(backend, wasm_lib, monkeypatch):
    """quantize_group is any even size: groups that are not a multiple of 8 (6, 10, 34, 4) start
    inside the integer GEMVs' blocks of 8 k, so matmul_q4 runs them on the float path (quant.c); one row and
    three, K below and past 2048, on both backends, against the reference dequantization."""
    import tandem.runtime as runtime

    if backend == "wasm":
        monkeypatch.setattr(runtime, "_lib", wasm_lib)
        monkeypatch.setattr(runtime, "BACKEND", "wasm")
    for K, group in ((96, 6), (130, 10), (2101, 34), (64, 4)):
        torch.manual_seed(K)
        lin = nn.Linear(K, 24).eval()
        for rows in (1, 3):
            x = torch.randn(rows, K, generator=g)
            m = tandem.load(tandem.export(lin, {"forward": (x,)}, quantize="int4", quantize_group=group).to_bytes())
            want = ref_quantized_output(lin, (x,), "int4", group=group)
            torch.testing.assert_close(m.forward(x), want, rtol=1e-5, atol=1e-5, msg=f"K={K} group={group} rows={rows}")


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_many_rows_equal_one_row_calls_bit_for_bit_natively_and_in_wasm(wasm_lib, monkeypatch, mode):
    """Pocket-tts' Mimi decoder runs matmul_q8 on 16 rows: with K = 512 they go through
    the integer dot in blocks of 8, and with K = 2047 (blocks of 4) and K = 3000 (blocks of 2), so
    each of 16 (and 21) rows has exactly the bits of a one-row call on it, on the native backend
    and in wasm (tandem.wasm under wasmtime), and the two backends give the same bits. int4 likewise
    (matmul_q4's integer rows: the same blocks of rows, the same bits in every build)."""
    import tandem.runtime as runtime

    shapes = ((512, 40, 16), (2047, 24, 21), (3000, 9, 16))
    xs = {K: torch.randn(rows, K, generator=g) for K, _, rows in shapes}
    outs = {}
    for backend in ("native", "wasm"):
        if backend == "wasm":
            monkeypatch.setattr(runtime, "_lib", wasm_lib)
            monkeypatch.setattr(runtime, "BACKEND", "wasm")
        else:
            assert runtime.BACKEND == "native", "the native runtime is not built: run `npm run build`"
        for K, N, rows in shapes:
            torch.manual_seed(K)
            lin, x = nn.Linear(K, N).eval(), xs[K]
            many = tandem.load(tandem.export(lin, {"forward": (x,)}, quantize=mode).to_bytes())
            one = tandem.load(tandem.export(lin, {"forward": (x[:1],)}, quantize=mode).to_bytes())
            got = many.forward(x)
            alone = torch.cat([one.forward(x[i : i + 1]) for i in range(rows)])
            assert torch.equal(got, alone), f"{mode} {backend} K={K}: rows differ from one-row calls by {(got - alone).abs().max():.3e}"
            torch.testing.assert_close(got, ref_quantized_output(lin, (x,), mode), rtol=1e-5, atol=1e-5)
            outs.setdefault((K, rows), []).append(got)
    for key, got in outs.items():
        assert all(torch.equal(got[0], o) for o in got[1:]), f"native and wasm differ at {key}"


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_many_rows_equal_one_row_calls_bit_for_bit_in_the_relaxed_build(relaxed_wasm_lib, monkeypatch, mode):
    """The same in tandem-relaxed.wasm (clang-19, the relaxed integer dot), where matmul_q4 has the
    integer path too: 21 rows of K = 2047 (blocks of 4), and 16 of K = 512 (blocks of 8), each row
    the bits of a one-row call on it."""
    import tandem.runtime as runtime

    monkeypatch.setattr(runtime, "_lib", relaxed_wasm_lib)
    monkeypatch.setattr(runtime, "BACKEND", "wasm")
    for K, N, rows in ((2047, 24, 21), (512, 40, 16)):
        torch.manual_seed(K)
        lin, x = nn.Linear(K, N).eval(), torch.randn(rows, K, generator=g)
        many = tandem.load(tandem.export(lin, {"forward": (x,)}, quantize=mode).to_bytes())
        one = tandem.load(tandem.export(lin, {"forward": (x[:1],)}, quantize=mode).to_bytes())
        got = many.forward(x)
        alone = torch.cat([one.forward(x[i : i + 1]) for i in range(rows)])
        assert torch.equal(got, alone), f"{mode} K={K}: rows differ from one-row calls by {(got - alone).abs().max():.3e}"


def _paired(b: bytes) -> bytes:
    """int8 panels' bytes in the paired layout (src/kernels/variants.h): in every 16 (two rows of a
    panel), the 8 columns of the two rows interleaved."""
    out = bytearray(b)
    for i in range(0, len(b), 16):
        out[i : i + 16 : 2], out[i + 1 : i + 16 : 2] = b[i : i + 8], b[i + 8 : i + 16]
    return bytes(out)


def _unpaired(b: bytes) -> bytes:
    """The inverse of _paired: paired bytes back to plain panels."""
    out = bytearray(b)
    for i in range(0, len(b), 16):
        out[i : i + 8], out[i + 8 : i + 16] = b[i : i + 16 : 2], b[i + 1 : i + 16 : 2]
    return bytes(out)


class _TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.tied = Tied(40, 24)
        self.lin = nn.Linear(64, 40)
        self.odd = nn.Linear(63, 16)

    def forward(self, i, x):
        return self.tied(i), self.lin(x), self.odd(x[:, :63])


def _plain_form(program) -> bytes:
    """The program as exporters before the paired layout wrote it: every matmul_q8 / embedding_q8
    with iattr [N] over plain panels."""
    program = copy.deepcopy(program)
    storages = set()
    for m in program.methods:
        for op in m.ops:
            if op.name in ("matmul_q8", "embedding_q8") and len(op.iattr) == 2:
                op.iattr.pop()
                storages.add(op.ins[1 if op.name == "matmul_q8" else 0].storage)
    for st in storages:
        P, K, _ = st.tensor.shape
        st.tensor = st.tensor.reshape(P, K // 2, PANEL, 2).transpose(2, 3).contiguous().reshape(P, K, PANEL)
    program._bytes = None
    return program.to_bytes()


@pytest.mark.parametrize("build", ["simd128", "relaxed"])
def test_int8_weights_are_held_once_paired_as_the_file_has_them(wasm_lib, relaxed_wasm_lib, monkeypatch, build):
    """Even-K int8 weights (a tied table too: embedding_q8 reads it paired) are written in the paired
    layout (python/tandem/layout.py) and multiplied in place: the wasm heap holds no copy of them
    outside the file's data section (what tdm_program_data hands out, and WebGPU uploads), paired or
    plain; an odd-K Linear's weights stay in plain panels. The results are the native runtime's bits
    for one row, 3 rows and a row holding a NaN, and a file in the plain form (iattr [N], as older
    exporters wrote it) gives the same bits on both backends."""
    import ctypes

    import tandem.runtime as runtime

    torch.manual_seed(3)
    model = _TwoHeads().eval()
    ids, x1, x3 = torch.tensor([[1, 7, 39]]), torch.randn(1, 64, generator=g), torch.randn(3, 64, generator=g)
    x3n = x3.clone()
    x3n[1, 9] = float("nan")
    program = tandem.export(model, {"forward": (ids, x1), "rows": tandem.Method(model.forward, (ids, x3))}, quantize="int8")
    forms = [op.iattr for m in program.methods for op in m.ops if op.name.endswith("_q8")]
    assert sorted(map(len, forms)) == [1, 1, 2, 2, 2, 2, 2, 2], forms  # the odd Linear in each method: plain
    data, plain = program.to_bytes(), _plain_form(program)
    calls = [("forward", (ids, x1)), ("rows", (ids, x3)), ("rows", (ids, x3n))]

    def results(b):
        m = tandem.load(b)
        return m, [getattr(m, name)(*args) for name, args in calls]

    def same(got, want, what):
        for g_, w in zip(got, want):
            for a, b in zip(g_, w):
                assert torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num()), f"{build} {what}"

    assert runtime.BACKEND == "native", "the native runtime is not built: run `npm run build`"
    _, want = results(data)
    same(results(plain)[1], want, "native, plain form")
    lib = wasm_lib if build == "simd128" else relaxed_wasm_lib
    # loaded by hand, the input buffer zeroed before it is freed: the heap then holds the file's bytes
    # only where the program keeps them (and what the runtime made from them)
    buf, out = lib.malloc(len(data)), lib.malloc(8)
    lib._memory.write(lib._store, data, buf)
    assert lib.tdm_program_load(buf, len(data), out) == 0
    program_ptr = lib._u32(out)
    lib._memory.write(lib._store, bytes(len(data)), buf)
    lib.tdm_free(buf), lib.tdm_free(out)
    weights = [c for c in constants(data) if c[0] == 4]  # int8
    lin_w = next(c[2] for c in weights if c[1] == (5, 64, 8))
    table = next(c[2] for c in weights if c[1][1] == 24)
    odd = next(c[2] for c in weights if c[1][1] == 63)
    assert _unpaired(lin_w) in plain and lin_w not in plain and _unpaired(table) in plain and odd in plain
    at, n = lib.tdm_program_data(program_ptr), lib.tdm_program_data_size(program_ptr)
    size = lib._memory.data_len(lib._store)
    heap = ctypes.string_at(lib._base(0, size), size)
    section, outside = heap[at : at + n], heap[:at] + heap[at + n :]
    assert data.find(section) >= 0, "tdm_program_data's bytes are not the file's data section"
    for w in (lin_w, table, odd):
        assert section.find(w) >= 0, "the file's int8 weights were moved"
        assert outside.count(w) == 0 and outside.count(_unpaired(w)) == 0, "a copy of int8 weights outside the file's data"
    lib.tdm_program_free(program_ptr)
    monkeypatch.setattr(runtime, "_lib", lib)
    monkeypatch.setattr(runtime, "BACKEND", "wasm")
    same(results(data)[1], want, "wasm, paired")
    same(results(plain)[1], want, "wasm, plain form")


# ---- accuracy against float32 ---------------------------------------------------------------------

transformers = pytest.importorskip("transformers")


def _dequantized_copy(model, mode, decode_from=None):
    """model with its 2-d weights dequantized; with decode_from, the Linears' input rows at
    positions >= decode_from (those the runtime runs on integer dot products: decoded one token at a
    time, or in a prefill chunk of at most 8) quantized as matmul_q8 and matmul_q4 (groups of 32,
    as the int8 blocks) quantize them, and all of
    lm_head's (prefill runs the head on its last row alone; the logits of the rows before it are not
    compared)."""
    ref = copy.deepcopy(model)
    with torch.no_grad():
        for p in ref.parameters():
            if p.dim() == 2:
                p.copy_(ref_dequantize(p, mode).float())
    if decode_from is not None:
        quantize_linear_inputs(ref, lambda x: (torch.arange(x.shape[-2]) >= decode_from).expand(x.shape[:-1]), skip=["lm_head"])
        quantize_linear_inputs(ref.lm_head, lambda x: torch.ones(x.shape[:-1], dtype=torch.bool))
    return ref


LLAMA = dict(
    vocab_size=256,
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    tie_word_embeddings=True,
)


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_llama_logit_error_is_that_of_the_reference_quantization(mode):
    """A small transformers Llama (tied embeddings, GQA) through export_causal_lm(quantize=...):
    the logit error against float32 eager is at most 1.5x that of the same quantization done in
    PyTorch (dequantized weights, eager; the rows' activations quantized too, as matmul_q8's and
    matmul_q4's integer GEMVs do), and the runtime matches that reference closely."""
    import tandem.transformers as tt

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**LLAMA)).eval()
    tokens = torch.randint(0, LLAMA["vocab_size"], (1, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(tokens).logits[0, 7:]
        # every row on integer dots, the 8-token prefill chunk too (matmul_q8 / matmul_q4 take up to 8 rows)
        ref = _dequantized_copy(model, mode, 0)(tokens).logits[0, 7:]
        ref_w = _dequantized_copy(model, mode)(tokens).logits[0, 7:]  # weights alone, float activations
    m = tandem.load(tt.export_causal_lm(model, max_cache_len=48, max_prompt_len=8, quantize=mode).to_bytes())
    got = [m.prefill(tokens[:, :8])[0]] + [m.decode(tokens[:, i : i + 1])[0] for i in range(8, 40)]
    got = torch.stack(got)
    err, ref_err = (got - want).abs(), (ref - want).abs()
    print(
        f"\nllama {mode}: max |logit err| {err.max():.3e} mean {err.mean():.3e}; "
        f"PyTorch reference quantization max {ref_err.max():.3e} mean {ref_err.mean():.3e}; "
        f"runtime vs reference max {(got - ref).abs().max():.3e}; "
        f"weights-only reference max {(ref_w - want).abs().max():.3e} mean {(ref_w - want).abs().mean():.3e}"
    )
    assert err.max() <= 1.5 * ref_err.max() and err.mean() <= 1.5 * ref_err.mean()
    # The same bits as the reference until an activation lands on a rounding boundary (x.5: the
    # layer-0 inputs come from the quantized table, so exact ties occur) and the two float32
    # computations before it round it apart by an ulp: that row's code moves by one, and through
    # the KV cache so do the later rows (int8 here from the 21st row on, each by ~5e-3).
    torch.testing.assert_close(got[:12], ref[:12], rtol=1e-4, atol=1e-4)
    assert (got - ref).abs().mean() <= 0.5 * ref_err.mean()
    assert ref_err.max() > 1e-3  # quantized for real


# ---- the demo's trained character model ----------------------------------------------------------


def _demo_module():
    """TinyLM with the weights of demo/model.tandem, read back from its constants: a fresh TinyLM
    exported the same way uses its parameters in the same order, so the k-th constant of a shape
    in the fresh file (a parameter's packed transpose, or the parameter itself) is the k-th of that
    shape in the demo's file (which an older exporter wrote: it has a few more constants)."""
    from models.families import TinyLM

    meta = json.loads((ROOT / "demo" / "model.json").read_text())
    cfg = {k: meta[k] for k in ("d", "heads", "layers", "capacity", "chunk")}
    torch.manual_seed(0)
    model = TinyLM(vocab=len(meta["vocab"]), act=nn.GELU(), **cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g))

    def export(mod, **kw):
        return tandem.export(
            mod,
            {"prefill": (torch.zeros(1, cfg["chunk"], dtype=torch.long),), "decode": (torch.zeros(1, 1, dtype=torch.long),), "reset": ()},
            **kw,
        )

    def by_shape(consts):
        groups = {}
        for c in consts:
            groups.setdefault(c[:2], []).append(c[2])
        return groups

    fresh = by_shape(constants(export(model).to_bytes()))
    demo_bytes = (ROOT / "demo" / "model.tandem").read_bytes()
    demo = by_shape(constants(demo_bytes))
    with torch.no_grad():
        for _, p in model.named_parameters():
            packed = (pack_panels(p.t()) if p.dim() == 2 else p).contiguous()
            key = (1, tuple(packed.shape))
            k = fresh[key].index(packed.numpy().tobytes())
            t = torch.frombuffer(bytearray(demo[key][k]), dtype=torch.float32).reshape(key[1])
            p.copy_(unpack_panels(t, p.shape[0]).t() if p.dim() == 2 else t)
    return model, meta, export, demo_bytes


def test_demo_model_top1_agreement():
    """Greedy decoding (720 steps, three prompts) with the float32 demo model; the int8 / int4
    exports of the same weights, fed the same tokens, pick the same next token at (targets) >= 98%
    / >= 90% of the steps (int4: with every weight quantized, and with the tied table kept float32)."""
    model, meta, export, demo_bytes = _demo_module()
    vocab, chunk, cap = meta["vocab"], meta["chunk"], meta["capacity"]
    base = tandem.load(demo_bytes)
    prompts = [p[:chunk].ljust(chunk) for p in ("The quick brown fox", "You will be surprised", "Q: What is the answer")]
    enc = lambda s: torch.tensor([[vocab.index(c) if c in vocab else vocab.index("?") for c in s]])  # noqa: E731
    # the weights were read back right: the module and the file agree
    with torch.no_grad():
        torch.testing.assert_close(base.prefill(enc(prompts[0])), model.prefill(enc(prompts[0])))
    runs = []
    for p in prompts:
        base.reset()
        logits = [base.prefill(enc(p))[0]]
        toks = []
        for _ in range(cap - chunk):
            toks.append(int(logits[-1].argmax()))
            logits.append(base.decode(torch.tensor([[toks[-1]]]))[0])
        runs.append((p, toks, torch.stack(logits[:-1])))
    # int4 with every weight quantized, the tied 96 x 128 table included: 0.868 with scale = max|w| / 7
    # (codes in [-7, 7]); 0.926 with each group's scale chosen for the least squared error over
    # max|w| / d, d in 7 ... 8.5, codes in [-8, 7] (quantize.py). The table kept float32: 0.936.
    for mode, skip, target in (("int8", None, 0.98), ("int4", None, 0.90), ("int4", ["emb"], 0.90)):
        q = tandem.load(export(model, quantize=mode, quantize_skip=skip).to_bytes())
        agree = steps = 0
        err = []
        for p, toks, want in runs:
            q.reset()
            got = [q.prefill(enc(p))[0]] + [q.decode(torch.tensor([[t]]))[0] for t in toks[:-1]]
            got = torch.stack(got)
            agree += int((got.argmax(-1) == want.argmax(-1)).sum())
            steps += len(toks)
            err.append((got - want).abs())
        err = torch.cat(err)
        print(
            f"\ndemo {mode} (skip {skip}): top-1 agreement {agree}/{steps} = {agree / steps:.4f}; "
            f"logit error max {err.max():.3e} mean {err.mean():.3e}"
        )
        assert agree / steps >= target
