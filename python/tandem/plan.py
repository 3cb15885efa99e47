"""Memory plan of one method: state written in place where possible, scratch offsets by lifetime.

In place: a mutated buffer's new value is produced directly into its state slot when no later op
(and no output) reads the slot's old value and no op that can fail on runtime values comes after
the producer; otherwise it is copied in at the end (see lower._finish). Scratch: storages get
offsets so that two storages alive at the same time never overlap (greedy, largest first).
"""
from __future__ import annotations

from .ir import SCRATCH, STATE, MethodIR, Storage
from .schema import ALIGN
# The op flags the verifier enforces (src/format.c), declared once in schema.py: ops whose kernels
# may reject runtime values; ops whose output may be input 0; ops whose output may be any input of
# its dtype and size (elementwise).
from .schema import CAN_FAIL, IN_PLACE_ANY
from .schema import IN_PLACE_FIRST as IN_PLACE


def _drop_unread(ir: MethodIR) -> None:
    """Remove ops whose results nothing reads (e.g. an expand that attention reads around)."""
    live = {v.storage for _, v in ir.outputs}
    keep = []
    for op in reversed(ir.ops):
        if op.name in CAN_FAIL or any(v.storage in live or v.storage.kind == STATE for v in op.outs):
            keep.append(op)
            live.update(v.storage for v in op.ins)
    ir.ops = keep[::-1]


def _checks_first(ir: MethodIR) -> None:
    """Run every check op, and the ops its index depends on, before everything else.

    Before planning, ops are pure dataflow (each writes a fresh storage; state is written only by
    the copies at the end), so any order that keeps each op after its producers is valid. Moving the
    checks' backward slices to the front means no check runs after a state write, whatever the
    number of layers or the order torch.export emitted them in (e.g. one position counter per
    layer), so every state update can be planned in place."""
    producer = {}
    for i, op in enumerate(ir.ops):
        for v in op.outs:
            producer.setdefault(v.storage, i)
    early: set = set()
    todo = [i for i, op in enumerate(ir.ops) if op.name in CAN_FAIL]
    while todo:
        i = todo.pop()
        if i in early:
            continue
        early.add(i)
        todo.extend(producer[v.storage] for v in ir.ops[i].ins if v.storage in producer and producer[v.storage] < i)
    ir.ops = [op for i, op in enumerate(ir.ops) if i in early] + [op for i, op in enumerate(ir.ops) if i not in early]


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
    _drop_unread(ir)
    _checks_first(ir)
    _write_state_in_place(ir)
    life = _lifetimes(ir)
    placed: list[tuple[int, int, int, int]] = []  # (start, end, offset, size)
    size = 0
    for s in sorted(life, key=lambda s: -int(s.nbytes)):
        a, b = life[s]
        need = (int(s.nbytes) + ALIGN - 1) // ALIGN * ALIGN  # at the maximum of any dynamic dims
        off = 0
        for (pa, pb, po, ps) in sorted((p for p in placed if not (p[1] < a or b < p[0])), key=lambda p: p[2]):
            if off + need <= po:
                break
            off = max(off, po + ps)
        s.offset = off
        placed.append((a, b, off, need))
        size = max(size, off + need)
    ir.scratch_size = size
