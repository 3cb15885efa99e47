"""Program: the exported result, ready to save as a .tandem file."""
from __future__ import annotations

import os
from typing import Union

from .format import write_program
from .ir import DTYPE_NAME, MethodIR, StateSpec


class Program:
    """Every method of a model and its shared state, as one .tandem file."""

    def __init__(self, states: list[StateSpec], methods: list[MethodIR]):
        self.states = states
        self.methods = methods
        self._bytes = None

    def to_bytes(self) -> bytes:
        """The .tandem file's bytes."""
        if self._bytes is None:
            self._bytes = write_program(self.states, self.methods)
        return self._bytes

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write the .tandem file to `path`."""
        with open(path, "wb") as f:
            f.write(self.to_bytes())

    def method(self, name: str) -> MethodIR:
        for m in self.methods:
            if m.name == name:
                return m
        raise KeyError(name)

    def __repr__(self) -> str:
        ms = ", ".join(f"{m.name}({len(m.inputs)} in, {len(m.outputs)} out, {len(m.ops)} ops)" for m in self.methods)
        ss = ", ".join(f"{s.name}: {DTYPE_NAME[s.dtype]}{list(s.shape)}" for s in self.states)
        return f"<tandem.Program methods=[{ms}] state=[{ss}]>"
