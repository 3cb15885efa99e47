"""Python values a call changes (python/tandem/tracing.py finds them while a method is traced):
numbers and bools kept as state and traced again to learn how the program uses them (counted,
set, computed with at run time, or branched on: versions of the method, python/tandem/steering.py),
and other values checked to leave the program the same. `export_one` is export's trace of one
method (export._export_one)."""

from __future__ import annotations

import inspect

from . import probe
from .ir import ExportError
from .lowering import is_user_file
from .snapshot import _same_value
from .steering import _INF, _PERTURB, graph_text, versions


def check_counters(export_one, specs, roots, exported, name_of, constants, before, bounds=None) -> dict:
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
                why = None if graph_text(first[name][1], ignore) == graph_text(root.code, ignore) else ""
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
    whens = versions(export_one, specs, roots, exported, name_of, constants, before, steer, branches, bounds or {}) if steer else {}
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


def _steers(moved: dict, paths: dict) -> bool:
    """Whether the values a method was traced with moved are bools that may steer it in versions
    (not the modules' train() / eval() mode, which is set before an export)."""
    return all(isinstance(v, bool) for v in moved.values()) and not any(paths[p].split(".")[-1] == "training" for p in moved)


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
        if graph_text(code, ignore) == graph_text(root.code, ignore) and not again:
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
