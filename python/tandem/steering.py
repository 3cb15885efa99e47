"""Versions of a method over the Python values it branches on (python_values.check_counters finds
them): bools (a first-frame flag, a flag one method sets and another reads) and ints it compares
with plain numbers (a delay, a warm-up phase, moshi's `offset_cpu <= max_delay`, counters that wrap
with different periods). The method is exported once per combination of the bools' values and, for
the ints, once per box of their values that takes one path through it (one run of values per int:
probe.py finds each run from one trace, and a trace's comparisons of one int never depend on
another's value, so the runs of a trace make a box), as methods 'name', 'name#1', ... Each version
starts with a `when` op per bool and a `when_in` op per int; the runtime runs the first version whose
values the state holds (src/session.c; web/webgpu/backend.js), else the call fails with
TDM_ERR_GUARD and the state unchanged."""

from __future__ import annotations

import itertools
import re

from . import probe
from .ir import ExportError

_PERTURB = 1_000_003
_INF = float("inf")
_MAX_STEERING = 3  # bools a program may branch on: 2**3 versions of a method at most
_MAX_RUNS = 16  # boxes of the ints' values a method may take different paths for, per combination of its bools


def versions(export_one, specs, roots, exported, name_of, constants, before, steer, branches, bounds) -> dict:
    """The versions of each method in `steer` (method -> (places it branches on, the error to raise
    where it cannot be exported)), put in `exported`. A combination of bools the method cannot be traced
    at is left out when no sequence of calls reaches it (else the export fails with why). `bounds`:
    path of an int -> (lo, hi), the values calls may reach (tandem.export's state_bounds); a call beyond
    them fails typed. Returns method name -> [(the value's tensor, its value or (lo, hi), its path)]."""
    places = list(dict.fromkeys(p for moved, _ in steer.values() for p in moved))
    any_root = next(iter(roots.values()))
    ints = [p for p in places if type(any_root._counters[p][4]) is int]
    flags = [p for p in places if p not in ints]
    if len(flags) > _MAX_STEERING:
        raise next(iter(steer.values()))[1](
            f" (it branches on {len(flags)} Python bools; tandem makes a version of the method for each of at most "
            f"{2**_MAX_STEERING} combinations of their values)"
        )
    init = tuple(any_root._counters[p][4] for p in flags)
    combos = [init] + [c for c in itertools.product((False, True), repeat=len(flags)) if c != init]
    whens, failed, moves = {}, {}, []  # moves: (combo -> combo after a call of a method)

    def after(root, combo):
        return tuple(root.observed[p][1] if p in root.observed else v for p, v in zip(flags, combo))

    for name, root in roots.items():
        if name not in steer:  # changes the bools the same way at every value (python_values.check_counters)
            ends = {p: e for p, (_, e) in root.observed.items() if p in flags}
            flips = set(root.toggle)
            moves.append(lambda c, ends=ends, flips=flips: tuple(ends.get(p, (not v) if p in flips else v) for p, v in zip(flags, c)))
    for name, (fn, inputs, dynamic) in specs.items():
        if name not in steer:
            continue
        root = roots[name]
        got, ends = [], {}
        for k, combo in enumerate(combos):
            at = dict(zip(flags, combo))
            try:
                if ints:
                    traced = _boxes(export_one, name, roots, inputs, dynamic, name_of, constants, before, at, ints, bounds, branches)
                else:
                    root.perturb, root.keep = at, True
                    try:
                        traced = [(None, export_one(name, root, inputs, dynamic, name_of, constants), after(root, combo))]
                    finally:
                        root.perturb, root.keep = {}, False
                        before.restore()
            except ExportError as e:
                if k == 0:
                    raise
                failed[(name, combo)] = e  # a combination this method cannot be traced at
                continue
            ends[combo] = traced[0][2]
            got += [(combo, box, ep) for box, ep, _ in traced if ep is not None]
        moves.append(lambda c, ends=ends: ends.get(c, c))
        got.sort(key=lambda g: -_output_count(g[2]))  # the first, named `name`, describes the method: one with outputs
        for j, (combo, box, ep) in enumerate(got):
            version = name if j == 0 else f"{name}#{j}"
            exported[version] = ep
            whens[version] = [(root._counters[p][0], int(v), root._counters[p][1]) for p, v in zip(flags, combo)]
            whens[version] += [(root._counters[p][0], run, root._counters[p][1]) for p, run in zip(ints, box or ())]
    reached, todo = {init}, [init]
    while todo:  # the combinations some sequence of calls reaches
        c = todo.pop()
        for move in moves:
            n = move(c)
            if n not in reached:
                reached.add(n)
                todo.append(n)
    for (name, combo), e in failed.items():
        if combo in reached:
            what = ", ".join(f"'{roots[name]._counters[p][1]}' {v}" for p, v in zip(flags, combo))
            raise ExportError(f"method '{name}' cannot be traced at the values its calls reach ({what}): {e}") from e
    return whens


def _output_count(ep) -> int:
    """How many values the exported method gives (0 for a method returning None)."""
    return sum(o is not None for o in ep[0].graph_signature.user_outputs)


def _boxes(export_one, name, roots, inputs, dynamic, name_of, constants, before, at: dict, places: list, bounds, branches) -> list:
    """The versions of method `name` over the values of the Python ints at `places` (the bools at `at`):
    [(box: a run (lo, hi) per int, exported, the bools after the call)]. The boxes cover every
    combination of values calls reach: each int from the least value a call can set it to (-inf if a call
    lowers it) up to +inf, within its `bounds`. Each box is traced once with the ints probes at a point
    of it, and again with each int at its run's other ends (or far out where unbounded): a program that
    differs there uses the int in a way the probe cannot see (an index into a list, a size), an
    ExportError. Where the method also computes with an int (or another method does), the box is traced
    again with that int read from the state at run time, a TensorInt whose span is its run
    (runtime_values), and that is the version."""
    root = roots[name]
    paths = [root._counters[p][1] for p in places]
    start = tuple(root._counters[p][4] for p in places)
    elsewhere = {p for p in places if p in root.runtime}  # another method computes with it: read at run time here too
    limits = [bounds.get(path, (-_INF, _INF)) for path in paths]
    ignore = set(root.counter_names())

    def trace(point, probing, spans=None):
        """A trace at `point` (probes where probing), with the ints in `spans` read from the state at run time."""
        spans = spans or {}
        cells = {p: probe.Cell(v) for p, v in zip(places, point)}
        fixed = {p: probe.Probe(v, cells[p]) if probing else v for p, v in zip(places, point) if p not in spans}
        for p in places:
            (root.runtime.add if p in spans else root.runtime.discard)(p)
        root.perturb, root.keep, root.ranges = {**at, **fixed}, bool(probing or spans), dict(spans)
        try:
            ep = export_one(name, root, inputs, dynamic, name_of, constants if probing or spans else {})
            ends = tuple(root.observed[p][1] if p in root.observed else x for p, x in at.items())
            return cells, ep, root.code, dict(root.probed), ends
        finally:
            root.perturb, root.keep, root.ranges = {}, False, {}
            for p in places:
                (root.runtime.add if p in elsewhere else root.runtime.discard)(p)
            before.restore()

    def box_at(point):
        cells, ep, code, probed, ends = trace(point, True)
        for p, path in zip(places, paths):
            if cells[p].pinned:
                raise ExportError(
                    f"method '{name}' branches on the Python int '{path}' and also uses it in a way a value read at run "
                    f"time cannot take{cells[p].pin_line} (a float, a string, a hash, a power, int() in Python, a comparison "
                    "with another such int); tandem makes versions of a method over runs of an int's values where the "
                    "method compares it with numbers and computes with it in +, -, *, //, %, torch ops and slices. Keep "
                    "the value it uses that way in a tensor beside the state"
                )
        box = tuple((cells[p].lo, cells[p].hi) for p in places)
        computed = {p: run for p, run in zip(places, box) if cells[p].computed or p in elsewhere}
        for i, (p, path, v, (lo, hi)) in enumerate(zip(places, paths, point, box)):
            if p in computed:
                continue
            for w in dict.fromkeys(w for w in (v + _PERTURB if hi == _INF else hi, v - _PERTURB if lo == -_INF else lo) if w != v):
                other = trace(point[:i] + (int(w),) + point[i + 1 :], False)[2]  # the run's other ends, or far out
                if graph_text(code, ignore) != graph_text(other, ignore):
                    raise ExportError(
                        f"method '{name}' branches on the Python int '{path}', and traced at {int(w)} it gives another "
                        f"program than at {v} though its comparisons with the int give the same answers: it uses the int "
                        "where tandem cannot see it (an index into a Python list, a size, a torch call). Keep that use in "
                        "a tensor beside the state"
                    )
        if computed:  # each version computes with the values it reads from the state in each call
            try:
                _, ep, _, probed, ends = trace(point, False, computed)
            except ExportError as e:
                named = [(paths[places.index(p)], _run(r)) for p, r in computed.items()]
                if len(named) == 1:
                    (path, run), what = named[0], "it"
                    head, values = f"the Python int '{path}'", f"its values {run}"
                else:
                    what = "them"
                    head = "the Python ints " + ", ".join(f"'{path}'" for path, _ in named)
                    values = "their values " + ", ".join(f"'{path}' {run}" for path, run in named)
                raise ExportError(
                    f"method '{name}' branches on {head} and computes with {what}; traced for {values} with {what} read "
                    f"from the state at run time, the method fails: {e}"
                ) from e
        return box, ep, probed, ends

    traced = []
    while True:
        reach = _reach(name, roots, places, start, traced, limits)
        left = [reach]
        for box, *_ in traced:
            left = [part for region in left for part in _minus(region, box)]
        if not left:
            break
        if len(traced) >= _MAX_RUNS:
            raise _too_many(name, paths, start, [box for box, *_ in traced], limits, branches, places)
        # the point nearest the values of the export of what is left: the runs grow outwards from there
        points = [tuple(int(min(max(v, lo), hi)) for v, (lo, hi) in zip(start, region)) for region in left]
        traced.append(box_at(min(points, key=lambda q: sum(abs(a - b) for a, b in zip(q, start)))))
    return [(tuple(_meet(run, limit) for run, limit in zip(box, limits)), ep, ends) for box, ep, _, ends in traced]


def _reach(name, roots, places, start, traced, limits) -> tuple:
    """The box of values the ints at `places` may take in a call of method `name`: from the least value
    a call sets each to (-inf where a call lowers it) up, within the user's bounds."""
    out = []
    for p, v0, (blo, bhi) in zip(places, start, limits):
        sets, lowers = [v0], False  # what calls can set it to, whether one lowers it
        for _, _, probed, _ in traced:
            kind, amount = probed.get(p) or (None, None)
            sets += [amount] if kind == "set" else []
            lowers |= (kind == "add" and amount < 0) or kind == "any"  # any: computed, so any value
        for other, r in roots.items():
            if other != name and p in r.runtime:
                lowers = True  # another method computes it (any value)
            elif other != name and p in r.observed:
                begin, end = r.observed[p]
                sets += [end] if p in r.fill else []
                lowers |= p not in r.fill and end < begin
        lo = -_INF if lowers else min(sets)
        out.append((max(lo, blo), min(_INF, bhi)))
    return tuple(out)


def _minus(region: tuple, box: tuple) -> list:
    """The region (a run (lo, hi) per int) less the box, as disjoint regions."""
    if any(bhi < rlo or blo > rhi for (rlo, rhi), (blo, bhi) in zip(region, box)):
        return [region]
    out, rest = [], list(region)
    for d, (blo, bhi) in enumerate(box):
        rlo, rhi = rest[d]
        if rlo < blo:
            out.append(tuple(rest[:d] + [(rlo, blo - 1)] + rest[d + 1 :]))
        if bhi < rhi:
            out.append(tuple(rest[:d] + [(bhi + 1, rhi)] + rest[d + 1 :]))
        rest[d] = (max(rlo, blo), min(rhi, bhi))
    return out


def _meet(run: tuple, limit: tuple) -> tuple:
    return (max(run[0], limit[0]), min(run[1], limit[1]))


def _too_many(name, paths, start, boxes, limits, branches, places) -> ExportError:
    """More boxes of the ints' values take different paths than tandem makes versions of a method."""
    if len(paths) == 1:
        return ExportError(
            f"method '{name}' takes a different path for each of more than {_MAX_RUNS} runs of values of the Python int "
            f"'{paths[0]}' (from {start[0]} on); tandem makes at most {_MAX_RUNS} versions of a method. Bound the values "
            f"calls reach with tandem.export(..., state_bounds={{'{paths[0]}': (lo, hi)}}) (a call beyond them fails with "
            "TDM_ERR_GUARD, the state unchanged), or write the branch with torch.where on a tensor kept beside the state"
        )
    runs = []
    for d, path in enumerate(paths):
        seen = sorted({_meet(b[d], limits[d]) for b in boxes})
        runs.append(f"'{path}'{branches.get(places[d], '')} in {', '.join(_run(r) for r in seen)}")
    named = ", ".join(f"'{p}': (lo, hi)" for p in paths)
    return ExportError(
        f"method '{name}' branches on {len(paths)} Python ints that calls change, and more than {_MAX_RUNS} combinations "
        f"of their runs of values take different paths ({'; '.join(runs)}); tandem makes at most {_MAX_RUNS} versions of "
        f"a method. Bound the values calls reach with tandem.export(..., state_bounds={{{named}}}) (a call beyond them "
        "fails with TDM_ERR_GUARD, the state unchanged), or keep one of them in a tensor beside the state and branch "
        "on it with torch.where"
    )


def _run(run: tuple) -> str:
    return f"{_end(run[0])}..{_end(run[1])}"


def _end(x) -> str:
    return "inf" if x == _INF else "-inf" if x == -_INF else str(int(x))


def add_whens(ir, whens: list, states: dict) -> None:
    """The ops that start a version of a method (versions, above): a `when` per bool it was traced at, a
    `when_in` per int for its run of values."""
    from .ir import I64, STATE, Op, Storage, Value
    from .snapshot import tensor_key

    ops = []
    for t, value, path in whens:
        spec = states.get(tensor_key(t))
        if spec is None:
            raise ExportError(
                f"method '{ir.name}' branches on the Python value '{path}', which no method changes: a bug in tandem's exporter"
            )
        slot = Value(I64, (), Storage(STATE, spec.nbytes, state=spec))
        if isinstance(value, tuple):  # a run lo..hi of an int's values; an end at infinity is the int64 limit
            lo, hi = int(max(value[0], -(2**63))), int(min(value[1], 2**63 - 1))
            ops.append(Op("when_in", [slot], [], [lo, hi, 0], [], ""))
        else:
            ops.append(Op("when", [slot], [], [value, 0], [], ""))
    ir.ops[:0] = ops


def graph_text(code: str, ignore: set) -> list:
    """The lines of a traced graph's code, without those that touch the given buffers."""
    names = [re.compile(re.escape(n) + r"(?!\d)") for n in ignore]
    return [line for line in code.splitlines() if line.lstrip().startswith("def ") or not any(p.search(line) for p in names)]
