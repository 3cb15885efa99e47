"""Python values a call changes (python/tandem/tracing.py finds them while a method is traced):
numbers and bools kept as state and traced again to learn how the program uses them (counted,
set, computed with at run time, or one version of the method per value of a bool it branches on),
and other values checked to leave the program the same. `export_one` is export's trace of one
method (export._export_one)."""

from __future__ import annotations

import inspect
import re

from . import probe
from .ir import ExportError
from .lowering import is_user_file
from .snapshot import _same_value, tensor_key

_PERTURB = 1_000_003
_INF = float("inf")


def check_counters(export_one, specs, roots, exported, name_of, constants, before) -> dict:
    """Python ints of state objects that a method changes (moshi's `offset_cpu`) become int64 state,
    when no method's program depends on their value: every method is traced again with each such
    int moved by a large amount, and its graph must be the same (but for the ints' own updates). An
    int that is set to the same value from any start (a reset) is filled, one that moves by the same
    amount is counted up; anything else is an ExportError naming it."""
    changed = {}
    for name, root in roots.items():
        for place in root.observed:
            changed.setdefault(place, name)
    if not changed:
        return {}
    first = {name: (dict(root.observed), root.code) for name, root in roots.items()}
    runtime, steer = {}, {}
    branches = {}  # place of an int a method branches on -> the user's line of its first comparison
    for name, (fn, inputs, dynamic) in specs.items():
        root = roots[name]
        paths = {place: path for place, (_, path, *_) in root._counters.items()}
        moved = {place: _moved(root._counters[place][4]) for place in changed if place in root._counters}
        if not moved:
            continue
        which = ", ".join(f"'{paths[p]}'" for p in moved)
        setter = next((line for r in roots.values() for p in moved if (line := r.lines.get(p))), "")
        kinds = sorted({type(root._counters[p][4]).__name__ for p in moved})
        changer = changed[next(iter(moved))]

        def computes_with(why: str = ""):
            if any(paths[p].split(".")[-1] == "training" for p in moved):
                return ExportError(
                    f"method '{name}' depends on the mode {which} (train() / eval()), which method "
                    f"'{changer}' switches{setter}{why}; a program is traced once, in one mode. Set train() / "
                    "eval() before the export, not in a method"
                )
            return ExportError(
                f"method '{name}' computes with the Python {'/'.join(kinds)}{'s' if len(moved) > 1 else ''} {which}, "
                f"which method '{changer}' changes{setter}{why}; a program is traced once, so it would use the "
                "value of the export in every call. Keep it in a tensor beside the state (e.g. torch.zeros((), "
                "dtype=torch.long), or a buffer), update it in place (+= / copy_), and branch with torch.where"
            )

        steering = {}  # ints the method branches on (probe.py): versions over runs of their values

        def depends(why: str = ""):
            """The program depends on the values moved: the numbers are computed with at run time, the
            bools branched on in versions (below)."""
            bools = {p: v for p, v in moved.items() if isinstance(v, bool)}
            numbers = {p: v for p, v in moved.items() if p not in bools}
            if bools and not _steers(bools, paths):
                raise computes_with(why)
            if numbers:
                runtime[name] = (numbers, computes_with)
            if bools:
                steer[name] = ({**steer.get(name, ({}, None))[0], **bools}, computes_with)

        while True:
            # the ints as probes (probe.py) at their moved values: one compared at all takes other paths at
            # other values (even where the value of the export and the moved one take the same path)
            cells = {p: probe.Cell(v) for p, v in moved.items() if type(v) is int}
            root.perturb = {p: probe.Probe(v, cells[p]) if p in cells else v for p, v in moved.items()}
            try:
                export_one(name, root, inputs, dynamic, name_of, {})
                ignore = set(root.counter_names())
                why = None if _graph_text(first[name][1], ignore) == _graph_text(root.code, ignore) else ""
            except ExportError as e:  # traced at other values, the method fails: it computes with them
                why = f" (traced with it moved: {e})"
            finally:
                root.perturb = {}
                before.restore()
            found = {p: root._counters[p][4] for p, c in cells.items() if c.compared and not c.pinned and (c.lo, c.hi) != (-_INF, _INF)}
            branches.update({p: cells[p].line for p in found if cells[p].line})
            if why is None and not found:
                break
            if not found and not steering:
                found = _probed(export_one, name, root, inputs, dynamic, name_of, before, moved, branches)
            if not found:
                depends(why)
                break
            steering.update(found)  # the others are traced again without them
            steer[name] = ({**steer.get(name, ({}, None))[0], **found}, computes_with)
            moved = {p: v for p, v in moved.items() if p not in found}
            if not moved:
                break
        if why is not None or not moved:
            continue
        observed = first[name][0]
        fill, toggle = set(), set()
        for place, (start, end) in root.observed.items():
            if place not in moved:
                continue  # an int the method branches on: its versions say how each changes it
            start1, end1 = observed.get(place, (root._counters[place][4], root._counters[place][4]))
            if _same_value(end, end1):
                fill.add(place)
            elif isinstance(end, bool) and end is not start and end1 is not start1:
                toggle.add(place)  # flag = not flag
            elif isinstance(end, bool) or end - start != end1 - start1:
                kind = type(root._counters[place][4]).__name__
                raise ExportError(
                    f"method '{name}' changes the Python {kind} '{paths[place]}' in a way that is neither adding a fixed "
                    f"amount{', negating it' if kind == 'bool' else ''} nor setting a fixed value; keep it in a tensor instead"
                )
        if fill or toggle:
            root.fill, root.toggle = fill, toggle  # kept for the traces below: how the method changes these
            try:
                exported[name] = export_one(name, root, inputs, dynamic, name_of, constants)
            finally:
                before.restore()
    if runtime:
        # Numbers that a method computes with (an int offset, a float clock): every method is traced
        # again with each one a 0-d tensor read from its state slot, so the program computes with its value
        # in each call (tracing.Traced._number_back writes the new value back).
        places = {p for moved, _ in runtime.values() for p in moved}
        for root in roots.values():
            root.runtime.clear()
            root.runtime.update(places)
        for name, (fn, inputs, dynamic) in specs.items():
            if name in steer:
                continue  # traced in versions below, reading these numbers likewise
            try:
                exported[name] = export_one(name, roots[name], inputs, dynamic, name_of, constants)
            except ExportError as e:
                why = runtime.get(name, next(iter(runtime.values())))[1]
                raise why(f" (traced with it as a tensor, the method fails: {e})") from e
            finally:
                before.restore()
    whens = _versions(export_one, specs, roots, exported, name_of, constants, before, steer, branches) if steer else {}
    for name, root in roots.items():
        root.code = first[name][1]  # the program at the values of the export, which check_settled traces again
    return whens


def _probed(export_one, name, root, inputs, dynamic, name_of, before, moved, branches: dict) -> dict:
    """The Python ints among `moved` that the method compares (probe.py): one trace with each a probe
    at its value of the export. Returns place -> value of the export (and puts the line of each one's
    first comparison in branches)."""
    cells = {p: probe.Cell(root._counters[p][4]) for p in moved if type(root._counters[p][4]) is int}
    if not cells:
        return {}
    root.perturb = {p: probe.Probe(c.value, c) for p, c in cells.items()}
    try:
        export_one(name, root, inputs, dynamic, name_of, {})
    except ExportError:
        return {}
    finally:
        root.perturb = {}
        before.restore()
    branches.update({p: c.line for p, c in cells.items() if c.compared and c.line})
    return {p: c.value for p, c in cells.items() if c.compared and not c.pinned}


_MAX_STEERING = 3  # bools a program may branch on: 2**3 versions of a method at most


def _steers(moved: dict, paths: dict) -> bool:
    """Whether the values a method was traced with moved are bools that may steer it in versions
    (not the modules' train() / eval() mode, which is set before an export)."""
    return all(isinstance(v, bool) for v in moved.values()) and not any(paths[p].split(".")[-1] == "training" for p in moved)


def _versions(export_one, specs, roots, exported, name_of, constants, before, steer, branches) -> dict:
    """Python bools and an int that a method branches on (a first-frame flag, moshi's `offset_cpu <=
    max_delay`): the method is exported once for each combination of the bools' values and, for the int,
    each run of its values that takes one path through the method (probe.py), as methods 'name',
    'name#1', ... Each version starts with a `when` op per bool and a `when_in` op for the int, and the
    runtime runs the version whose values the state holds (src/session.c). A combination of bools the
    method cannot be traced at is left out when no sequence of calls reaches it (else the export fails
    with why). Returns method name -> [(the value's tensor, its value or (lo, hi), its path)]."""
    import itertools

    places = list(dict.fromkeys(p for moved, _ in steer.values() for p in moved))
    any_root = next(iter(roots.values()))
    ints = [p for p in places if type(any_root._counters[p][4]) is int]
    flags = [p for p in places if p not in ints]
    if len(flags) > _MAX_STEERING:
        raise next(iter(steer.values()))[1](
            f" (it branches on {len(flags)} Python bools; tandem makes a version of the method for each of at most "
            f"{2**_MAX_STEERING} combinations of their values)"
        )
    if len(ints) > 1:
        name = next(n for n, (moved, _) in steer.items() if any(p in moved for p in ints))
        which = ", ".join(f"'{any_root._counters[p][1]}'{branches.get(p, '')}" for p in ints)
        raise ExportError(
            f"method '{name}' branches on {len(ints)} Python ints that calls change: {which}; tandem makes versions "
            "of a method over the runs of one int's values. Keep the others in tensors beside the state (e.g. "
            "torch.zeros((), dtype=torch.long), updated with += / copy_) and branch on them with torch.where"
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
                    traced = _runs(export_one, name, roots, inputs, dynamic, name_of, constants, before, at, ints[0])
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
            ends[combo] = traced[0][2] if ints else traced[0][2]
            got += [(combo, run, ep) for run, ep, _ in traced if ep is not None]
        moves.append(lambda c, ends=ends: ends.get(c, c))
        got.sort(key=lambda g: -_output_count(g[2]))  # the first, named `name`, describes the method: one with outputs
        for j, (combo, run, ep) in enumerate(got):
            version = name if j == 0 else f"{name}#{j}"
            exported[version] = ep
            whens[version] = [(root._counters[p][0], int(v), root._counters[p][1]) for p, v in zip(flags, combo)]
            if run is not None:
                whens[version].append((root._counters[ints[0]][0], run, root._counters[ints[0]][1]))
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


_MAX_RUNS = 16  # runs of an int's values a method may take different paths for: versions of it at most


def _output_count(ep) -> int:
    """How many values the exported method gives (0 for a method returning None)."""
    return sum(o is not None for o in ep[0].graph_signature.user_outputs)


def _runs(export_one, name, roots, inputs, dynamic, name_of, constants, before, at: dict, place) -> list:
    """The versions of method `name` over the values of the Python int at `place` (the bools at `at`):
    [((lo, hi), exported, the bools after the call)], from its value of the export up to +inf and down to
    the least value a call can set it to (-inf if a call lowers it). Each run is traced once with the int
    a probe, and again at its other end (or far out where it is unbounded): a program that differs there
    uses the int in a way the probe cannot see (an index into a list, a size), an ExportError. Where the
    method also computes with it (or another method does), the run is traced again with the int read from
    the state at run time, a TensorInt whose span is the run (runtime_values), and that is the version."""
    root = roots[name]
    path = root._counters[place][1]
    inf = _INF
    elsewhere = place in root.runtime  # another method computes with it: read at run time here too

    def trace(v, probing, span=None):
        """A trace at v (a probe where probing), or for the run `span` with the int read from the state at run time."""
        cell = probe.Cell(v)
        if span is None:
            root.runtime.discard(place)
            root.perturb, root.keep = {**at, place: probe.Probe(v, cell) if probing else v}, probing
        else:
            root.runtime.add(place)
            root.perturb, root.keep, root.ranges = dict(at), True, {place: span}
        try:
            ep = export_one(name, root, inputs, dynamic, name_of, constants if probing or span else {})
            return cell, ep, root.code, dict(root.probed), tuple(root.observed[p][1] if p in root.observed else x for p, x in at.items())
        finally:
            root.perturb, root.keep, root.ranges = {}, False, {}
            (root.runtime.add if elsewhere else root.runtime.discard)(place)
            before.restore()

    def run_at(v):
        cell, ep, code, probed, ends = trace(v, True)
        if cell.pinned:
            raise ExportError(
                f"method '{name}' branches on the Python int '{path}' and also uses it in a way a value read at run time "
                f"cannot take{cell.pin_line} (a float, a string, a hash, a power, int() in Python, a comparison with another "
                "such int); "
                "tandem makes versions of a method over runs of an int's values where the method compares it with "
                "numbers and computes with it in +, -, *, //, %, torch ops and slices. Keep the value it uses that way "
                "in a tensor beside the state"
            )
        if cell.computed or elsewhere:  # each version computes with the value it reads from the state in each call
            span = (cell.lo, cell.hi)
            try:
                _, ep, _, probed, ends = trace(v, False, span)
            except ExportError as e:
                run = f"{_end(span[0])}..{_end(span[1])}"
                raise ExportError(
                    f"method '{name}' branches on the Python int '{path}' and computes with it; traced for its values "
                    f"{run} with it read from the state at run time, the method fails: {e}"
                ) from e
            return span, ep, probed.get(place), ends
        ignore = set(root.counter_names())
        others = [v + _PERTURB if cell.hi == inf else cell.hi, v - _PERTURB if cell.lo == -inf else cell.lo]
        for w in dict.fromkeys(w for w in others if w != v):  # the run's other ends, or far out
            _, _, other, _, _ = trace(w, False)
            if _graph_text(code, ignore) != _graph_text(other, ignore):
                raise ExportError(
                    f"method '{name}' branches on the Python int '{path}', and traced at {w} it gives another program than "
                    f"at {v} though its comparisons with the int give the same answers: it uses the int where tandem cannot "
                    "see it (an index into a Python list, a size, a torch call). Keep that use in a tensor beside the state"
                )
        return (cell.lo, cell.hi), ep, probed.get(place), ends

    runs, v = [], root._counters[place][4]
    while True:  # up from the value of the export
        (lo, hi), ep, move, ends = run_at(v)
        runs.append(((lo, hi), ep, move, ends))
        if hi == inf:
            break
        v = hi + 1
        if len(runs) >= _MAX_RUNS:
            raise ExportError(
                f"method '{name}' takes a different path for each of more than {_MAX_RUNS} runs of values of the Python int "
                f"'{path}' (from {root._counters[place][4]} up); tandem makes at most {_MAX_RUNS} versions of a method. "
                "Write the branch with torch.where on a tensor kept beside the state"
            )
    sets, lowers = [root._counters[place][4]], False  # what calls can set it to, whether one lowers it
    for other, r in roots.items():
        for kind, amount in [m for _, _, m, _ in runs if m] if other == name else []:
            sets += [amount] if kind == "set" else []
            lowers |= (kind == "add" and amount < 0) or kind == "any"  # any: computed, so any value
        if other != name and place in r.runtime:
            lowers = True  # another method computes it (any value)
        elif other != name and place in r.observed:
            begin, end = r.observed[place]
            sets += [end] if place in r.fill else []
            lowers |= place not in r.fill and end < begin
    lowest = -inf if lowers else min(sets)
    v = runs[0][0][0] - 1
    while -inf < v and v >= lowest:  # down to the least value a call reaches (none where the first run is unbounded below)
        (lo, hi), ep, move, ends = run_at(v)
        runs.append(((lo, hi), ep, move, ends))
        if lo == -inf:
            break
        v = lo - 1
        if len(runs) > _MAX_RUNS:
            raise ExportError(f"method '{name}' takes a different path for more than {_MAX_RUNS} runs of the Python int '{path}'")
    return [(run, ep, ends) for run, ep, _, ends in runs]


def _end(x) -> str:
    return "inf" if x == _INF else "-inf" if x == -_INF else str(int(x))


def add_whens(ir, whens: list, states: dict) -> None:
    """The ops that start a version of a method (_versions, above): a `when` per bool it was traced at, a
    `when_in` for the run of an int's values."""
    from .ir import I64, STATE, Op, Storage, Value

    ops = []
    for t, value, path in whens:
        spec = states.get(tensor_key(t))
        if spec is None:
            raise ExportError(
                f"method '{ir.name}' branches on the Python value '{path}', which no method changes: a bug in tandem's exporter"
            )
        slot = Value(I64, (), Storage(STATE, spec.nbytes, state=spec))
        if isinstance(value, tuple):  # a run lo..hi of an int's values; an end at infinity is the int64 limit
            lo, hi = (max(value[0], -(2**63)), min(value[1], 2**63 - 1))
            lo, hi = int(lo), int(hi)
            ops.append(Op("when_in", [slot], [], [lo, hi, 0], [], ""))
        else:
            ops.append(Op("when", [slot], [], [value, 0], [], ""))
    ir.ops[:0] = ops


def check_settled(export_one, specs, roots, name_of, before) -> None:
    """A Python value other than a number or bool (a string, None) that a method changes is no state:
    the method is traced again from the new value, and must give the same program and set the same
    value again (a mode set once, a memo). Else every later call would differ from eager: ExportError."""
    for name, (fn, inputs, dynamic) in specs.items():
        root = roots[name]
        settled = dict(root.settled)
        if not settled:
            continue
        code = root.code
        root.preset = {place: (holder, key, now) for place, (holder, key, _, _, now, _) in settled.items()}
        try:
            export_one(name, root, inputs, dynamic, name_of, {})
        finally:
            root.preset = {}
            before.restore()
        ignore = set(root.counter_names())
        again = {p: v for p, v in root.settled.items() if v[1] != "*"}  # a list appended to may grow again (a log)
        root.settled.clear()
        if _graph_text(code, ignore) == _graph_text(root.code, ignore) and not again:
            continue
        place = next((p for p in settled if p in again), next(iter(settled)))
        _, key, path, was, now, line = settled[place]
        what = "switches the mode" if key == "training" else "changes the Python value"
        change = f"grows the Python list '{path}'" if key == "*" else f"{what} '{path}' (from {was!r} to {now!r})"
        raise ExportError(
            f"method '{name}' {change}{line}, and a call that finds the new value "
            "runs another program (or changes it again); a program is traced once, so it would keep the traced value "
            "in every call while eager sees the new one. Keep it as a number or bool (those become state), or in a "
            "tensor beside the state"
        )


def _moved(v):
    """A value far from v (a bool: the other one), to trace a method with: its graph must not change."""
    if isinstance(v, bool):
        return not v
    return v + _PERTURB + (0.5 if isinstance(v, float) else 0)


def scopes(modules: list, fns: list) -> tuple:
    """(name, globals dict) of the Python modules whose code the methods run: those defining the
    modules' classes (and their bases) and the exported functions, the user's files only. A
    function's globals are the dict it holds (a script run by runpy, a profiler or exec() has its
    own, not that of sys.modules[__name__]); a class's are its functions', else its module's."""
    import sys

    found = []
    for top in modules:
        for m in top.modules():
            for c in type(m).__mro__:
                own = [f.__globals__ for f in vars(c).values() if inspect.isfunction(f) and f.__module__ == c.__module__]
                mod = sys.modules.get(c.__module__)
                found += own[:1] or ([vars(mod)] if mod is not None else [])
    for fn in fns:
        f = getattr(fn, "func", fn)  # functools.partial
        f = getattr(f, "__func__", f)
        g = getattr(f, "__globals__", None)
        if g is not None:
            found.append(g)
    out, seen = [], set()
    for g in found:
        n, file = g.get("__name__"), g.get("__file__")
        if not n or id(g) in seen or not file or not is_user_file(file):
            continue
        seen.add(id(g))
        out.append((n.rsplit(".", 1)[-1], g))
    return tuple(out)


def _graph_text(code: str, ignore: set) -> list:
    """The lines of a traced graph's code, without those that touch the given buffers."""
    names = [re.compile(re.escape(n) + r"(?!\d)") for n in ignore]
    return [line for line in code.splitlines() if line.lstrip().startswith("def ") or not any(p.search(line) for p in names)]
