"""Weight layout, one pass over the lowered methods after quantization (export.py): the weights that
lowering, fuse.tie_embeddings and quantize.py leave in their natural layout, B [K, N] as `a @ B` uses
it (a Linear's weight transposed, an embedding table's transpose; for a quantized weight its codes
[K, N] and scales), are written once in the layout their op's kernel reads (docs/ops.md):

- `matmul_packed`, `embedding_packed`: B in panels of PANEL columns, [ceil(N/PANEL), K, PANEL];
- `matmul_grouped`: each expert's B [K, N] of [E, K, N] in those panels, [E, ceil(N/PANEL), K, PANEL];
  `matmul_grouped_q8` / `matmul_grouped_q4`: each expert's codes and scales as `matmul_q8`'s (paired
  under the same rule) / `matmul_q4`'s;
- `matmul_q8`, `embedding_q8`, `conv_q8`, `conv_transpose_q8`: the int8 codes in those panels, the
  scales [1, N] as [ceil(N/PANEL), PANEL]; int8 codes that only `matmul_q8` and `embedding_q8` read,
  with K even and at most Q8_PAIRED_MAX_K, in the paired layout instead (each panel's rows k, k + 1
  with each column's two codes adjacent: the integer-dot kernels read them without an interleave),
  the ops that read them marked with a second integer attribute 1 (docs/ops.md, "Quantized weights");
- `matmul_q4`, `embedding_q4`: the int4 codes two per byte along K (int4x2), in panels of blocks of
  8 k (each column's codes of a block in 4 adjacent bytes, biased to q + 8: _q4_codes), the group
  scales [ceil(K/G), N] in panels;
- `conv_bf16`, `conv_transpose_bf16`: B's columns as bfloat16 rows in 2-row panels of 8 k;
- `conv_i16`, `conv_transpose_i16`: B's columns as int16 rows of K rounded up to 32.

Each weight is laid out once, however many ops (across methods) read it: the ops that shared a
weight value share the laid-out one.
"""

from __future__ import annotations

import torch

from . import schema
from .ir import CONST, I4X2, ExportError, Storage, Value, flat_ops

PANEL = schema.PANEL  # columns per packed panel (schema.py; TDM_PANEL in the runtime)
_BUG = "a bug in tandem's exporter, please report it"


def pack_panels(x: torch.Tensor) -> torch.Tensor:
    """x [R, N] -> [ceil(N/PANEL), R, PANEL] of x's dtype: PANEL-column panels, zero past N."""
    R, N = x.shape
    P = -(-N // PANEL)
    padded = torch.zeros(R, P * PANEL, dtype=x.dtype)
    padded[:, :N] = x
    return padded.reshape(R, P, PANEL).permute(1, 0, 2).contiguous()


def _pack_experts(x: torch.Tensor) -> torch.Tensor:
    """x [E, K, N] -> [E, ceil(N/PANEL), K, PANEL]: each expert's matrix in panels (pack_panels)."""
    return torch.stack([pack_panels(e) for e in x])


def _experts_q8_scales(x: torch.Tensor) -> torch.Tensor:
    """matmul_grouped_q8's scales: [E, 1, N] -> [E, ceil(N/PANEL), PANEL]."""
    return torch.stack([_q8_scales(e) for e in x])


def _experts_q8_pairs(x: torch.Tensor) -> torch.Tensor:
    """matmul_grouped_q8's paired codes: [E, K, N] -> [E, ceil(N/PANEL), K, PANEL] (q8_pairs per expert)."""
    return torch.stack([q8_pairs(e) for e in x])


def _experts_q4_codes(x: torch.Tensor) -> torch.Tensor:
    """matmul_grouped_q4's codes: [E, K, N] -> int4x2 [E, ceil(N/PANEL), 4·ceil(K/8), PANEL] (_q4_codes per expert)."""
    return torch.stack([_q4_codes(e) for e in x])


def _q8_scales(scale: torch.Tensor) -> torch.Tensor:
    """matmul_q8's scales: [1, N] -> [ceil(N/PANEL), PANEL]."""
    return pack_panels(scale)[:, 0, :].contiguous()


def q8_pairs(q: torch.Tensor) -> torch.Tensor:
    """int8 codes q [K, N], K even -> the paired panels [ceil(N/PANEL), K, PANEL]: byte
    (p·K + k - k % 2)·PANEL + 2j + k % 2 holds q[k][PANEL·p + j], zero past N."""
    P, K, _ = (p := pack_panels(q)).shape
    return p.reshape(P, K // 2, 2, PANEL).transpose(2, 3).contiguous().reshape(P, K, PANEL)


# The largest K whose int8 codes are paired: the runtime's integer-dot path takes K up to
# TDM_Q8_DOT_MAX_K (src/kernels/variants.h), past it matmul_q8's float tiles read the plain panels.
Q8_PAIRED_MAX_K = 8192
# the ops with a paired form (iattr [N, 1]) -> their codes' operand
_PAIRED_READERS = {"matmul_q8": 1, "embedding_q8": 0, "matmul_grouped_q8": 1}


def _q4_codes(q: torch.Tensor) -> torch.Tensor:
    """matmul_q4's weights: int4 codes q [K, N] in [-8, 7] -> int4x2 bytes [ceil(N/PANEL), 4·ceil(K/8), PANEL]
    in blocks of 8 k: a panel's 32 bytes of block b hold column j's codes at 4j + r (r = 0..3), k = 8b + 2r
    in the low nibble and 8b + 2r + 1 in the high one, each as q + 8 (8 past K and N: q = 0)."""
    K, N = q.shape
    B, P = -(-K // 8), -(-N // PANEL)
    u = torch.full((8 * B, P * PANEL), 8, dtype=torch.int16)
    u[:K, :N] = q.to(torch.int16) + 8
    rows = (u[0::2] | (u[1::2] << 4)).reshape(B, 4, P, PANEL)  # [block, r, panel, column]
    return rows.permute(2, 0, 3, 1).reshape(P, 4 * B, PANEL).to(torch.uint8).contiguous()


def _bf16_rows(w: torch.Tensor) -> torch.Tensor:
    """conv_bf16's weights: B [K, M] as bfloat16 bits (int16) -> its columns as rows in 2-row panels
    [ceil(M/2), ceil(K/8), 2, 8], zeros past K and M."""
    K, M = w.shape
    K8, P = -(-K // 8), -(-M // 2)
    out = torch.zeros(2 * P, 8 * K8, dtype=torch.int16)
    out[:M, :K] = w.t()
    return out.reshape(P, 2, K8, 8).permute(0, 2, 1, 3).contiguous()


def _i16_rows(q: torch.Tensor) -> torch.Tensor:
    """conv_i16's weights: codes [K, M] -> its columns as rows [M, K32], K32 = K rounded up to 32, zeros past K."""
    K, M = q.shape
    out = torch.zeros(M, -(-K // 32) * 32, dtype=torch.int16)
    out[:, :K] = q.t()
    return out


# op -> {operand index: (its layout, the dtype of the laid-out constant, or None for the natural one's)}
_Q8 = {1: (pack_panels, None), 2: (_q8_scales, None)}
_Q4 = {1: (_q4_codes, I4X2), 2: (pack_panels, None)}
WEIGHTS = {
    "matmul_packed": {1: (pack_panels, None)},
    "embedding_packed": {0: (pack_panels, None)},
    "matmul_grouped": {1: (_pack_experts, None)},
    "matmul_grouped_q8": {1: (_pack_experts, None), 2: (_experts_q8_scales, None)},
    "matmul_grouped_q4": {1: (_experts_q4_codes, I4X2), 2: (_pack_experts, None)},
    "matmul_q8": _Q8,
    "conv_q8": _Q8,
    "conv_transpose_q8": _Q8,
    "embedding_q8": {i - 1: f for i, f in _Q8.items()},
    "matmul_q4": _Q4,
    "embedding_q4": {i - 1: f for i, f in _Q4.items()},
    "conv_bf16": {1: (_bf16_rows, None)},
    "conv_transpose_bf16": {1: (_bf16_rows, None)},
    "conv_i16": {1: (_i16_rows, None)},
    "conv_transpose_i16": {1: (_i16_rows, None)},
}


def _paired_storages(methods: list) -> set:
    """The natural int8 codes to lay out paired: read only by matmul_q8 and embedding_q8 (a tied
    table too), as a whole [K, N] value with K even, 0 < K <= Q8_PAIRED_MAX_K."""
    readers: dict = {}  # natural Storage -> (op name, operand) of every op reading it as a weight
    shapes: dict = {}
    for m in methods:
        for op in m.ops:
            for i in WEIGHTS.get(op.name, {}):
                readers.setdefault(op.ins[i].storage, set()).add((op.name, i))
                shapes[op.ins[i].storage] = op.ins[i].shape
    grouped = {s for s, uses in readers.items() if ("matmul_grouped_q8", 1) in uses}
    return {
        s
        for s, uses in readers.items()
        if uses <= set(_PAIRED_READERS.items())
        and (s in grouped) == (uses == {("matmul_grouped_q8", 1)})  # codes read [E, K, N] by every reader or by none
        and len(shapes[s]) == (3 if s in grouped else 2)
        and shapes[s][-2] % 2 == 0
        and 0 < shapes[s][-2] <= Q8_PAIRED_MAX_K
    }


def layout_methods(methods: list) -> None:
    """Replaces the natural-layout weight operands of the methods' ops (WEIGHTS) by their laid-out
    constants, in place (see the module); marks the ops reading paired int8 codes (iattr [N, 1])."""
    done: dict = {}  # natural Value -> laid-out Value
    storages: dict = {}  # natural Storage -> (its layout, laid-out Storage)
    paired = _paired_storages(methods)
    for m in methods:
        for op in flat_ops(m.ops):
            for i, (lay, dtype) in WEIGHTS.get(op.name, {}).items():
                v = op.ins[i]
                if v.storage in paired:
                    lay = _experts_q8_pairs if op.name == "matmul_grouped_q8" else q8_pairs
                    op.iattr.append(1)
                if v not in done:
                    s = v.storage
                    rank = 3 if op.name.startswith("matmul_grouped") else 2  # [E, K, N] or [K, N]
                    if s.kind != CONST or v.offset or v.nbytes != s.nbytes or len(v.shape) != rank:
                        raise ExportError(f"{op.name}'s weight is not a whole [K, N] constant: {_BUG}")
                    if s not in storages:
                        t = lay(s.tensor.reshape(v.shape))
                        storages[s] = (lay, Storage(CONST, t.numel() * t.element_size(), tensor=t, dtype=dtype or s.dtype))
                    used, new = storages[s]
                    if used is not lay:
                        raise ExportError(f"a constant is the weight of ops of two layouts ({op.name}): {_BUG}")
                    done[v] = Value(dtype or v.dtype, tuple(new.tensor.shape), new)
                op.ins[i] = done[v]
