"""Memory plan of one method: state written in place where possible, scratch offsets by lifetime.

In place: a mutated buffer's new value is produced directly into its state slot when no later op
(and no output) reads the slot's old value and no op that can fail on runtime values comes after
the producer, or when the producer is an update (index_put, slice_scatter, scatter), whose rows the
runtime saves before it writes them and puts back if a later op fails the call (src/session.c);
otherwise it is copied in at the end (see lowering/driver.py, _finish). Scratch: storages get
offsets so that two storages alive at the same time never overlap (greedy, largest first).
"""

from __future__ import annotations

from .ir import CONST, DTYPE_SIZE, SCRATCH, STATE, MethodIR, flat_ops, refresh_conds

# The op flags the verifier enforces (src/verify.c), declared once in schema.py: ops whose kernels
# may reject runtime values; ops whose output may be input 0; ops whose output may be any input of
# its dtype and size (elementwise).
from .schema import ALIGN, CAN_FAIL, IN_PLACE_ANY
from .schema import IN_PLACE_FIRST as IN_PLACE


def _fallible(op) -> bool:
    """Whether an op may fail on runtime values: a CAN_FAIL op, or a cond with one in a branch."""
    return op.name in CAN_FAIL or any(o.name in CAN_FAIL for body in op.bodies or () for o in flat_ops(body))


def _drop_unread(ir: MethodIR) -> None:
    """Remove ops whose results nothing reads (e.g. an expand that attention reads around)."""
    live = {v.storage for _, v in ir.outputs}
    keep = []
    for op in reversed(ir.ops):
        if _fallible(op) or any(v.storage in live or v.storage.kind == STATE for v in op.outs):
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
    todo = [i for i, op in enumerate(ir.ops) if _fallible(op)]
    while todo:
        i = todo.pop()
        if i in early:
            continue
        early.add(i)
        todo.extend(producer[v.storage] for v in ir.ops[i].ins if v.storage in producer and producer[v.storage] < i)
    ir.ops = [op for i, op in enumerate(ir.ops) if i in early] + [op for i, op in enumerate(ir.ops) if i not in early]


def _phys(v):
    """What a value's bytes are: its state slot (every Storage of one state is the same bytes), or its storage."""
    return ("state", v.storage.state) if v.storage.kind == STATE else v.storage


def _slice_range(base, d: int, start: int, length: int):
    """Byte range (offset, size) of base[.., start:start + length, ..] along dim d when contiguous; else None."""
    outer = 1
    for x in base.shape[:d]:
        outer *= x
    inner = DTYPE_SIZE[base.dtype]
    for x in base.shape[d + 1 :]:
        inner *= x
    if outer != 1 and length != base.shape[d]:
        return None
    return base.offset + start * inner, length * inner


def _update_in_place(ir: MethodIR) -> None:
    """Updates (index_put, slice_scatter, scatter) write into their base's bytes instead of a copy
    of it, when nothing reads the base's old contents afterwards; a slice_scatter that writes back
    a slice updated in place (functionalization's replay of `cache[0].index_copy_(..)`,
    `cache[:, :, pos] = k`, `cache[0].scatter_(..)` on a view of state) is then dropped. Chains of
    such writes through select/slice views of a state end in its slot, and the write-back copy
    at the end reads the slot itself and goes too: a streaming step writes only its new rows.

    Values are views, so the pass moves whole storages: an update's output storage becomes its
    base's bytes (at the base's offset) and every value of it follows. A read after update k of
    bytes it overwrote is a hazard when the read's value holds a version older than k (born
    before k: a state, an input, an earlier op's result); versions born at or after k are k's
    result or built on it."""
    ops = ir.ops
    values = [v for op in ops for v in op.ins + op.outs] + [v for _, v in ir.outputs] + [v for _, v in ir.inputs]
    members: dict = {}
    for v in values:
        members.setdefault(id(v.storage), {})[id(v)] = v
    orig = {id(v): (v.storage, v.offset) for v in values}
    born: dict = {}
    for i, op in enumerate(ops):
        for v in op.outs:
            born.setdefault(id(v.storage), i)
    producer = dict(born)

    def whole_fresh(v):
        s = v.storage
        return s.kind == SCRATCH and not s.is_input and v.offset == 0 and v.nbytes == s.nbytes and producer.get(id(s)) is not None

    # write-backs: slice_scatter(b, src, d, start, 1) whose src is the whole result of an update of
    # exactly b's slice (d, start): j -> the update's index
    write_back = {}
    for j, op in enumerate(ops):
        if op.name != "slice_scatter" or op.iattr[2] != 1:
            continue
        b, src = op.ins
        k = producer.get(id(src.storage))
        if k is None or ops[k].name not in IN_PLACE or not whole_fresh(src) or not whole_fresh(ops[k].outs[0]):
            continue
        kb = ops[k].ins[0]
        rng = _slice_range(b, op.iattr[0], op.iattr[1], src.shape[op.iattr[0]])
        if rng is not None and kb.storage is b.storage and (kb.offset, kb.nbytes) == rng and ops[k].outs[0].storage is src.storage:
            write_back[j] = k

    def move(s_from, s_to, shift):
        group = members.pop(id(s_from), {})
        for v in group.values():
            v.storage, v.offset = s_to, v.offset + shift
        members.setdefault(id(s_to), {}).update(group)

    def overlaps(v, key, lo, n):
        return _phys(v) == key and v.offset < lo + n and lo < v.offset + v.nbytes

    removed = set()
    aliased = set()
    for k, op in enumerate(ops):
        if op.name not in IN_PLACE:
            continue
        base, out = op.ins[0], op.outs[0]
        if not whole_fresh(out) or base.nbytes != out.nbytes or base.dtype != out.dtype:
            continue
        B = base.storage
        if B.kind == CONST or B.is_input:
            continue  # a state before an op that can fail too: the runtime journals the update (src/session.c)
        key, lo, n = _phys(base), base.offset, base.nbytes
        wb = write_back.get(k)
        if wb is not None and wb in aliased:
            src = op.ins[1]
            rng = _slice_range(base, op.iattr[0], op.iattr[1], src.shape[op.iattr[0]])
            if rng is not None and _phys(src) == key and (src.offset, src.nbytes) == rng:
                removed.add(k)  # the slice is already in place: the result is the base's bytes
                aliased.add(k)
                move(out.storage, B, base.offset)
                continue
        if any(overlaps(v, key, lo, n) for v in op.ins[1:]):
            continue
        hazard = False
        for j in range(k + 1, len(ops) + 1):
            reads = ops[j].ins if j < len(ops) else [v for _, v in ir.outputs]
            if j in removed:
                continue
            for pos, v in enumerate(reads):
                if not overlaps(v, key, lo, n):
                    continue
                if born.get(id(orig[id(v)][0]), -1) >= k:
                    continue  # k's result, or built on it
                if j < len(ops) and pos == 0 and write_back.get(j) == k:
                    continue  # the write-back of k's slice: dropped when k is in place
                hazard = True
                break
            if hazard:
                break
        if hazard:
            continue
        aliased.add(k)
        move(out.storage, B, base.offset)
    ops[:] = [op for i, op in enumerate(ops) if i not in removed]
    # a write-back of a state that is already in its slot
    ops[:] = [
        op
        for op in ops
        if not (
            op.name == "copy"
            and op.outs[0].storage.kind == STATE
            and _phys(op.ins[0]) == _phys(op.outs[0])
            and op.ins[0].offset == op.outs[0].offset
            and op.ins[0].nbytes == op.outs[0].nbytes
        )
    ]


def _write_state_in_place(ir: MethodIR) -> None:
    ops = ir.ops
    producer = {}
    for i, op in enumerate(ops):
        for v in op.outs:
            producer.setdefault(v.storage, i)
    last_fallible = max((i for i, op in enumerate(ops) if _fallible(op)), default=-1)

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
        if (
            s.kind != SCRATCH
            or s.is_input
            or i is None
            or ops[i].bodies  # a cond's branches write its results; they stay in scratch (src/verify.c)
            or src.offset != 0
            or s.nbytes != st.nbytes
            or i < last_fallible
            or reads_state(st, i)
        ):
            continue
        s.kind, s.state = STATE, st
        ops.remove(op)


def _is_whole(v, st) -> bool:
    return v.storage.kind == STATE and v.storage.state is st and v.offset == 0 and v.nbytes == st.nbytes


def _lifetimes(ir: MethodIR) -> dict:
    """Each scratch storage's first write and last read, as positions of the ops in file order (a cond
    then its branches: a storage read after a cond is alive through both branches)."""
    life = {}
    ops = list(flat_ops(ir.ops))
    end = len(ops)
    for _, v in ir.inputs:
        life[v.storage] = [-1, -1]
    for i, op in enumerate(ops):
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
    refresh_conds(ir.ops)
    _drop_unread(ir)
    _checks_first(ir)
    _update_in_place(ir)
    _write_state_in_place(ir)
    refresh_conds(ir.ops)
    life = _lifetimes(ir)
    placed: list[tuple[int, int, int, int]] = []  # (start, end, offset, size)
    size = 0
    for s in sorted(life, key=lambda s: -int(s.nbytes)):
        a, b = life[s]
        need = (int(s.nbytes) + ALIGN - 1) // ALIGN * ALIGN  # at the maximum of any dynamic dims
        off = 0
        for pa, pb, po, ps in sorted((p for p in placed if not (p[1] < a or b < p[0])), key=lambda p: p[2]):
            if off + need <= po:
                break
            off = max(off, po + ps)
        s.offset = off
        placed.append((a, b, off, need))
        size = max(size, off + need)
    ir.scratch_size = size
