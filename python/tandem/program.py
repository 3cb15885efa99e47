"""Program: the exported result, ready to save as a .tandem file."""

from __future__ import annotations

import os
from typing import Union

from .format import lay_out_program, write_program
from .ir import DTYPE_NAME, ExportError, MethodIR, StateSpec


def check_metadata(metadata: dict) -> dict:
    """metadata as stored: str keys; values None, bools, ints, floats, strings, and lists or dicts of
    them (JSON); anything else is an ExportError naming the key."""

    def ok(v):
        if v is None or isinstance(v, (bool, int, str)):
            return True
        if isinstance(v, float):
            return v == v and abs(v) != float("inf")
        if isinstance(v, (list, tuple)):
            return all(ok(x) for x in v)
        if isinstance(v, dict):
            return all(isinstance(k, str) and ok(x) for k, x in v.items())
        return False

    if not isinstance(metadata, dict):
        raise ExportError(f"metadata must be a dict of name -> value, not {type(metadata).__name__}")
    for k, v in metadata.items():
        if not isinstance(k, str) or not k:
            raise ExportError(f"metadata key {k!r} must be a non-empty string")
        if not ok(v):
            raise ExportError(f"metadata '{k}': {v!r} is not a bool, int, finite float, string, None, or a list or dict of them")
    return dict(metadata)


class Program:
    """Every method of a model and its shared state, as one .tandem file."""

    def __init__(self, states: list[StateSpec], methods: list[MethodIR], metadata: dict | None = None):
        self.states = states
        self.methods = methods
        self._metadata = check_metadata(metadata or {})
        self._bytes = None

    @property
    def metadata(self) -> dict:
        """Named values stored beside the methods (context length, vocabulary size, ...)."""
        return self._metadata

    @metadata.setter
    def metadata(self, value: dict) -> None:
        self._metadata = check_metadata(value)
        self._bytes = None

    def to_bytes(self) -> bytes:
        """The .tandem file's bytes."""
        if self._bytes is None:
            self._bytes = write_program(self.states, self.methods, self._metadata)
        return self._bytes

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write the .tandem file to `path`: section by section, the constants straight from their
        tensors (the file is never whole in memory, unless to_bytes() made it already). Whatever the
        export cannot write is raised before `path` is opened."""
        if self._bytes is not None:
            with open(path, "wb") as f:
                f.write(self._bytes)
            return
        layout = lay_out_program(self.states, self.methods, self._metadata)
        with open(path, "wb") as f:
            layout.write(f)

    def method(self, name: str) -> MethodIR:
        for m in self.methods:
            if m.name == name:
                return m
        raise KeyError(name)

    def __repr__(self) -> str:
        ms = ", ".join(f"{m.name}({len(m.inputs)} in, {len(m.outputs)} out, {len(m.ops)} ops)" for m in self.methods)
        ss = ", ".join(f"{s.name}: {DTYPE_NAME[s.dtype]}{list(s.shape)}" for s in self.states)
        return f"<tandem.Program methods=[{ms}] state=[{ss}]>"
