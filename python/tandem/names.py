"""Method names a program may not use: the names the model objects already have for themselves."""

from __future__ import annotations

from .ir import ExportError

# The one list. Every name a JS model object answers to (web/model.js Model and its subclass WorkerModel,
# with what they inherit from Object.prototype), every public name of the Python
# tandem.runtime.Model, and `then`: `await load()` treats an object with a `then` method as a
# promise and never settles. tests/js/package.test.js checks the JS objects against this list and
# tests/python/test_method_names.py the Python one, so a name added to either API must be added here.
# Names starting with '_' are reserved as well.
RESERVED = frozenset(
    """
    then call profile fork dispose chat
    methods state metadata tokenizer stateBytes scratchBytes memoryBytes threads simd device deviceReason dims
    readState writeState saveState loadState resetState
    constructor toString toLocaleString valueOf hasOwnProperty isPrototypeOf propertyIsEnumerable
    run read_state reset_state write_state save_state load_state seed close
""".split()
)


def check_method_name(name: str) -> None:
    """Raise ExportError when `name` would collide with the model objects' own names."""
    if name.startswith("_"):
        raise ExportError(
            f"method '{name}': names starting with '_' are reserved for tandem's model objects; "
            f"rename the method (e.g. '{name.lstrip('_') or 'method'}')"
        )
    if name in RESERVED:
        raise ExportError(
            f"method '{name}': '{name}' is a reserved word (the JS and Python model objects use it "
            f"for themselves, so model.{name} would not call your method); rename the method "
            f"(e.g. '{name}_')"
        )
