"""Memory plan of one method: state written in place where possible, scratch offsets by lifetime.

In place: a mutated buffer's new value is produced directly into its state slot when no later op
(and no output) reads the slot's old value and no op that can fail on runtime values comes after
the producer; otherwise it is copied in at the end (see lower._finish). Scratch: storages get
offsets so that two storages alive at the same time never overlap (greedy, largest first).
"""
from __future__ import annotations

from .ir import SCRATCH, STATE, MethodIR, Storage

ALIGN = 64
CAN_FAIL = {"check_index"}  # ops whose kernels may reject runtime values (src/ops.h can_fail)
IN_PLACE = {"index_put", "slice_scatter"}  # output may be input 0 (src/ops.h TDM_INPLACE_FIRST)
# output may be any input of its dtype and size (src/ops.h TDM_INPLACE_ANY): elementwise ops
IN_PLACE_ANY = {"add", "sub", "mul", "div", "maximum", "minimum", "pow", "remainder", "neg", "abs", "exp", "log", "sqrt",
                "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh", "silu", "erf", "reciprocal", "floor",
                "ceil"}


def _hoist_checks(ir: MethodIR) -> None:
    """Move each check op right after the op that produces its input, so that checks run before
    state is written wherever the data flow allows."""
    for op in [o for o in ir.ops if o.name in CAN_FAIL]:
        ir.ops.remove(op)
        storage = op.ins[0].storage
        pos = 0
        for i, other in enumerate(ir.ops):
            if any(v.storage is storage for v in other.outs):
                pos = i + 1
        ir.ops.insert(pos, op)


def _write_state_in_place(ir: MethodIR) -> None:
    ops = ir.ops
    producer = {}
    for i, op in enumerate(ops):
        for v in op.outs:
            producer.setdefault(v.storage, i)
    last_fallible = max((i for i, op in enumerate(ops) if op.name in CAN_FAIL), default=-1)

    def reads_state(st, start):
        for k, op in enumerate(ops[start:]):
            ins = op.ins
            if k == 0 and op.name in IN_PLACE and _is_whole(ins[0], st):
                ins = ins[1:]  # the producer updates the old value in place
            elif k == 0 and op.name in IN_PLACE_ANY:
                out = op.outs[0]
                ins = [v for v in ins if not (_is_whole(v, st) and v.dtype == out.dtype and v.nbytes == out.nbytes)]
            if any(v.storage.kind == STATE and v.storage.state is st for v in ins):
                return True
        return any(v.storage.kind == STATE and v.storage.state is st for _, v in ir.outputs)

    for k, op in enumerate(list(ops)):
        if op.name != "copy" or not op.outs[0].storage.kind == STATE:
            continue
        src, dst = op.ins[0], op.outs[0]
        st = dst.storage.state
        s = src.storage
        i = producer.get(s)
        if (s.kind != SCRATCH or s.is_input or i is None or src.offset != 0 or s.nbytes != st.nbytes
                or i < last_fallible or reads_state(st, i)):
            continue
        s.kind, s.state = STATE, st
        ops.remove(op)


def _is_whole(v, st) -> bool:
    return v.storage.kind == STATE and v.storage.state is st and v.offset == 0 and v.nbytes == st.nbytes


def _lifetimes(ir: MethodIR) -> dict:
    life = {}
    end = len(ir.ops)
    for _, v in ir.inputs:
        life[v.storage] = [-1, -1]
    for i, op in enumerate(ir.ops):
        for v in op.outs:
            if v.storage.kind == SCRATCH:
                life.setdefault(v.storage, [i, i])
        for v in op.ins:
            if v.storage.kind == SCRATCH:
                life.setdefault(v.storage, [i, i])[1] = i
    for _, v in ir.outputs:
        if v.storage.kind == SCRATCH:
            life.setdefault(v.storage, [end, end])[1] = end
    return life


def plan_method(ir: MethodIR) -> None:
    _hoist_checks(ir)
    _write_state_in_place(ir)
    life = _lifetimes(ir)
    placed: list[tuple[int, int, int, int]] = []  # (start, end, offset, size)
    size = 0
    for s in sorted(life, key=lambda s: -s.nbytes):
        a, b = life[s]
        need = (s.nbytes + ALIGN - 1) // ALIGN * ALIGN
        off = 0
        for (pa, pb, po, ps) in sorted((p for p in placed if not (p[1] < a or b < p[0])), key=lambda p: p[2]):
            if off + need <= po:
                break
            off = max(off, po + ps)
        s.offset = off
        placed.append((a, b, off, need))
        size = max(size, off + need)
    ir.scratch_size = size
