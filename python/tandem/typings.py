"""TypeScript declarations of one file's methods (`python -m tandem inspect --dts FILE`): an interface
extending the JS package's `Model` (web/tandem.d.ts) with each method typed, and the feeds and
outputs of its `run`, from what `describe` (tandem/cli.py) reads out of the file."""

from __future__ import annotations

import json
import re

# The dtypes web/tandem.d.ts's DType names; an input or output of another dtype is typed loosely.
JS_DTYPES = ("float32", "int64", "bool", "int32")
# A one-element input may also be given as a number (web/tensor.js toTensor).
SCALAR = {"float32": "number", "int32": "number", "int64": "number | bigint", "bool": "boolean | number"}
# Words a parameter may not be named in TypeScript (strict mode's reserved words included).
RESERVED = frozenset(
    """
    break case catch class const continue debugger default delete do else enum export extends false finally for function
    if import in instanceof new null return super switch this throw true try typeof var void while with
    implements interface let package private protected public static yield await arguments eval
""".split()
)
IDENTIFIER = re.compile(r"^[A-Za-z_$][\w$]*$")


def _key(name: str) -> str:
    """A property name: as it is where it is an identifier, else quoted."""
    return name if IDENTIFIER.match(name) else json.dumps(name)


def _param(name: str, taken: set) -> str:
    """A parameter name for input `name`, distinct from `taken`."""
    p = name if IDENTIFIER.match(name) else re.sub(r"[^\w$]", "_", name)
    if not IDENTIFIER.match(p):
        p = f"_{p}"
    while p in RESERVED or p in taken:
        p += "_"
    taken.add(p)
    return p


def type_name(stem: str) -> str:
    """`my_model` -> `MyModel`: the interface's name from the file's (`<stem>Model`)."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", stem) if w]
    name = "".join(w[0].upper() + w[1:] for w in words) or "Program"
    return (f"T{name}" if name[0].isdigit() else name) + ("" if name.endswith("Model") else "Model")


def _shape(t: dict) -> str:
    """`float32[1, n, 4]`: a dynamic dim as its expression."""
    exprs = t.get("exprs") or [""] * len(t["shape"])
    return f"{t['dtype']}[{', '.join(e or str(d) for d, e in zip(t['shape'], exprs))}]"


def _tensor(dtype: str) -> str:
    return f"Tensor<'{dtype}'>" if dtype in JS_DTYPES else "Tensor"


def _input(t: dict) -> str:
    if t["dtype"] not in JS_DTYPES:
        return "Input"
    one = not any(t.get("exprs") or []) and all(d == 1 for d in t["shape"])
    return f"InputOf<'{t['dtype']}'>" + (f" | {SCALAR[t['dtype']]}" if one else "")


def _methods(info: dict) -> list:
    """[(name, inputs (each with 'mutated'), outputs, dims, returns None in a version)], versions
    ('name#k') folded into their method, '<input>!' outputs into their input's `mutated`."""
    versions = {}
    for m in info["methods"]:
        versions.setdefault(m["name"].split("#")[0], []).append(m)
    out = []
    for name, ms in versions.items():
        main = next((m for m in ms if m["name"] == name), ms[0])
        changed = {o["name"][:-1] for o in main["outputs"] if o["name"].endswith("!")}
        inputs = [{**t, "mutated": t["name"] in changed} for t in main["inputs"]]
        outputs = [o for o in main["outputs"] if not o["name"].endswith("!")]
        returns_none = bool(main["outputs"]) and any(not m["outputs"] for m in ms)
        out.append((name, inputs, outputs, main.get("dims", {}), returns_none))
    return out


def _doc(name: str, inputs: list, outputs: list, dims: dict, returns_none: bool) -> list:
    """The doc comment of a method: its inputs' and outputs' dtypes and shapes."""
    ins = ", ".join(f"{t['name']}: {_shape(t)}" + (" (changed in place)" if t["mutated"] else "") for t in inputs)
    outs = ", ".join(f"{t['name']}: {_shape(t)}" for t in outputs) or "nothing"
    lines = [f"{name}({ins}) -> {outs}"]
    for d, b in dims.items():
        lines.append(f"Dim {d}: {b['min']} to {b['max']}.")
    if any(t["mutated"] for t in inputs):
        lines.append("An input changed in place gets its new value written into the typed array or tensor data given for it.")
    if returns_none:
        lines.append("null where the version of the method that runs returns None.")
    return lines


def _comment(lines: list, indent: str) -> list:
    lines = [line.replace("*/", "* /") for line in lines]
    if len(lines) == 1:
        return [f"{indent}/** {lines[0]} */"]
    return [f"{indent}/**", *(f"{indent} * {line}" for line in lines), f"{indent} */"]


def dts(info: dict, file_name: str, name: str) -> str:
    """The declaration file's text for the program `info` (describe()) read from `file_name`, its
    interface named `name`."""
    methods = _methods(info)
    alias = f"{name[: -len('Model')] if name.endswith('Model') else name}Methods"
    lines = [
        f"// The methods of {file_name}, typed for the tandem-runtime package: written by",
        f"// `python -m tandem inspect --dts {file_name}`. Use: `const model = (await load(url)) as {name};`",
        "import type { IMPORTS } from 'tandem-runtime';",
        "",
        f"/** Per method of {file_name}: the feeds and the outputs of `model.run(method, feeds)`. */",
        f"export type {alias} = {{",
    ]
    for m, inputs, outputs, _, returns_none in methods:
        lines.append(f"  readonly {_key(m)}: {{")
        for part, ts, typed, after in (
            ("feeds", inputs, _input, ""),
            ("outputs", outputs, lambda t: _tensor(t["dtype"]), " | null" if returns_none else ""),
        ):
            if not ts:
                lines.append(f"    readonly {part}: Record<string, never>{after};")
                continue
            lines.append(f"    readonly {part}: {{")
            for t in ts:
                lines += _comment([_shape(t) + ("; changed in place" if t.get("mutated") else "")], "      ")
                lines.append(f"      readonly {_key(t['name'])}: {typed(t)};")
            lines.append(f"    }}{after};")
        lines.append("  };")
    lines += ["};", "", f"/** A model loaded from {file_name}: each method typed, and run() by its names. */"]
    lines.append(f"export interface {name} extends Model<{alias}> {{")
    for m, inputs, outputs, dims, returns_none in methods:
        taken: set = set()
        params = [f"{_param(t['name'], taken)}: {_input(t)}" for t in inputs]
        options = _param("options", taken)
        result = "undefined" if not outputs else _tensor(outputs[0]["dtype"]) if len(outputs) == 1 else None
        result = result or f"[{', '.join(_tensor(t['dtype']) for t in outputs)}]"
        result = f"Promise<{result}{' | null' if returns_none else ''}>"
        lines += _comment(_doc(m, inputs, outputs, dims, returns_none), "  ")
        lines.append(f"  {_key(m)}({', '.join(params)}): {result};")
        lines.append(f"  {_key(m)}({', '.join([*params, f'{options}: CallOptions'])}): {result};")
    lines += ["}", ""]
    ins = [t["dtype"] for _, inputs, *_ in methods for t in inputs]
    used = {"CallOptions", "Model"} | {"InputOf" if d in JS_DTYPES else "Input" for d in ins}
    used |= {"Tensor"} if any(outputs for _, _, outputs, *_ in methods) else set()
    return "\n".join(lines).replace("IMPORTS", ", ".join(sorted(used)), 1)
