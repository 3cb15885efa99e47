"""Python values a call changes (python/tandem/tracing.py finds them while a method is traced):
numbers and bools kept as state and traced again to learn how the program uses them (counted,
set, computed with at run time, or one version of the method per value of a bool it branches on),
and other values checked to leave the program the same. `export_one` is export's trace of one
method (export._export_one)."""

from __future__ import annotations

import re

from .ir import ExportError
from .lowering import is_user_file
from .snapshot import _same_value, tensor_key

_PERTURB = 1_000_003


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
    for name, (fn, inputs, dynamic) in specs.items():
        root = roots[name]
        paths = {place: path for place, (_, path, *_) in root._counters.items()}
        moved = {place: _moved(root._counters[place][4]) for place in changed if place in root._counters}
        if not moved:
            continue
        which = ", ".join(f"'{paths[p]}'" for p in moved)
        setter = next((line for r in roots.values() for p in moved if (line := r.lines.get(p))), "")
        kinds = sorted({type(root._counters[p][4]).__name__ for p in moved})

        def computes_with(why: str = ""):
            if any(paths[p].split(".")[-1] == "training" for p in moved):
                return ExportError(
                    f"method '{name}' depends on the mode {which} (train() / eval()), which method "
                    f"'{changed[next(iter(moved))]}' switches{setter}{why}; a program is traced once, in one mode. Set train() / "
                    "eval() before the export, not in a method"
                )
            return ExportError(
                f"method '{name}' computes with the Python {'/'.join(kinds)}{'s' if len(moved) > 1 else ''} {which}, "
                f"which method '{changed[next(iter(moved))]}' changes{setter}{why}; a program is traced once, so it would use the "
                "value of the export in every call. Keep it in a tensor beside the state (e.g. torch.zeros((), "
                "dtype=torch.long), or a buffer), update it in place (+= / copy_), and branch with torch.where"
            )

        root.perturb = moved
        bools = {p: v for p, v in moved.items() if isinstance(v, bool)}
        numbers = {p: v for p, v in moved.items() if p not in bools}

        def depends(why: str = ""):
            """The program depends on the values moved: the numbers are computed with at run time, the
            bools branched on in versions (below)."""
            if bools and not _steers(bools, paths):
                raise computes_with(why)
            if numbers:
                runtime[name] = (numbers, computes_with)
            if bools:
                steer[name] = (bools, computes_with)

        try:
            export_one(name, root, inputs, dynamic, name_of, {})
        except ExportError as e:  # traced at other values, the method fails: it computes with them
            depends(f" (traced with it moved: {e})")
            continue
        finally:
            root.perturb = {}
            before.restore()
        observed, code = first[name]
        ignore = set(root.counter_names())
        if _graph_text(code, ignore) != _graph_text(root.code, ignore):
            depends()
            continue
        fill, toggle = set(), set()
        for place, (start, end) in root.observed.items():
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
            try:
                exported[name] = export_one(name, roots[name], inputs, dynamic, name_of, constants)
            except ExportError as e:
                why = runtime.get(name, next(iter(runtime.values())))[1]
                raise why(f" (traced with it as a tensor, the method fails: {e})") from e
            finally:
                before.restore()
    return _versions(export_one, specs, roots, exported, name_of, constants, before, steer) if steer else {}


_MAX_STEERING = 3  # bools a program may branch on: 2**3 versions of a method at most


def _steers(moved: dict, paths: dict) -> bool:
    """Whether the values a method was traced with moved are bools that may steer it in versions
    (not the modules' train() / eval() mode, which is set before an export)."""
    return all(isinstance(v, bool) for v in moved.values()) and not any(paths[p].split(".")[-1] == "training" for p in moved)


def _versions(export_one, specs, roots, exported, name_of, constants, before, steer) -> dict:
    """Python bools that a method branches on (a first-frame flag): the method is exported once for
    each combination of their values, as methods 'name', 'name#1', ... (the first at the values of
    the export); each version starts with a `when` op per bool, and the runtime runs the version
    whose values the state holds (src/session.c). A combination the method cannot be traced at is
    left out when no sequence of calls reaches it (else the export fails with why). Returns method
    name -> [(the bool's tensor, its value)]."""
    import itertools

    places = list(dict.fromkeys(p for moved, _ in steer.values() for p in moved))
    if len(places) > _MAX_STEERING:
        raise next(iter(steer.values()))[1](
            f" (it branches on {len(places)} Python bools; tandem makes a version of the method for each of at most "
            f"{2**_MAX_STEERING} combinations of their values)"
        )
    any_root = next(iter(roots.values()))
    init = tuple(any_root._counters[p][4] for p in places)
    combos = [init] + [c for c in itertools.product((False, True), repeat=len(places)) if c != init]
    whens, failed, moves = {}, {}, []  # moves: (combo -> combo after a call of a method)

    def after(root, combo):
        return tuple(root.observed[p][1] if p in root.observed else v for p, v in zip(places, combo))

    for name, root in roots.items():
        if name not in steer:  # changes the bools the same way at every value (python_values.check_counters)
            ends = {p: e for p, (_, e) in root.observed.items() if p in places}
            flips = set(root.toggle)
            moves.append(lambda c, ends=ends, flips=flips: tuple(ends.get(p, (not v) if p in flips else v) for p, v in zip(places, c)))
    for name, (fn, inputs, dynamic) in specs.items():
        if name not in steer:
            continue
        root = roots[name]
        got, ends = [], {}
        for k, combo in enumerate(combos):
            root.perturb, root.keep = dict(zip(places, combo)), True
            try:
                ep = export_one(name, root, inputs, dynamic, name_of, constants)
                ends[combo] = after(root, combo)
            except ExportError as e:
                if k == 0:
                    raise
                failed[(name, combo)] = e  # a combination this method cannot be traced at
                continue
            finally:
                root.perturb, root.keep = {}, False
                before.restore()
            if ep is not None:
                got.append((combo, ep))
        moves.append(lambda c, ends=ends: ends.get(c, c))
        for j, (combo, ep) in enumerate(got):
            version = name if j == 0 else f"{name}#{j}"
            exported[version] = ep
            whens[version] = [(root._counters[p][0], int(v), root._counters[p][1]) for p, v in zip(places, combo)]
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
            what = ", ".join(f"'{roots[name]._counters[p][1]}' {v}" for p, v in zip(places, combo))
            raise ExportError(f"method '{name}' cannot be traced at the values its calls reach ({what}): {e}") from e
    return whens


def add_whens(ir, whens: list, states: dict) -> None:
    """The `when` ops that start a version of a method (_versions, above): one per bool it was traced at."""
    from .ir import I64, STATE, Op, Storage, Value

    ops = []
    for t, value, path in whens:
        spec = states.get(tensor_key(t))
        if spec is None:
            raise ExportError(
                f"method '{ir.name}' branches on the Python bool '{path}', which no method changes: a bug in tandem's exporter"
            )
        ops.append(Op("when", [Value(I64, (), Storage(STATE, spec.nbytes, state=spec))], [], [value, 0], [], ""))
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
    modules' classes (and their bases) and the exported functions, the user's files only."""
    import sys

    names = []
    for top in modules:
        for m in top.modules():
            names += [c.__module__ for c in type(m).__mro__]
    for fn in fns:
        f = getattr(fn, "func", fn)  # functools.partial
        f = getattr(f, "__func__", f)
        g = getattr(f, "__globals__", None)
        if g is not None:
            names.append(g.get("__name__"))
    out, seen = [], set()
    for n in names:
        mod = sys.modules.get(n) if n else None
        file = getattr(mod, "__file__", None)
        if mod is None or n in seen or not file or not is_user_file(file):
            continue
        seen.add(n)
        out.append((n.rsplit(".", 1)[-1], vars(mod)))
    return tuple(out)


def _graph_text(code: str, ignore: set) -> list:
    """The lines of a traced graph's code, without those that touch the given buffers."""
    names = [re.compile(re.escape(n) + r"(?!\d)") for n in ignore]
    return [line for line in code.splitlines() if line.lstrip().startswith("def ") or not any(p.search(line) for p in names)]
