"""TandemError, what the runtime reports (runtime.py) and what reading a file's own entries
raises (tokenizer.py): here, below both, so neither imports the other for it."""

from __future__ import annotations


class TandemError(Exception):
    """A failure reported by the runtime; `code` is the tdm_status name (e.g. 'TDM_ERR_TRUNCATED')."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
