"""Where a graph node came from in the user's code: the source line an ExportError or an op's
`where` names (the innermost frame of the node's stack trace that is not torch's, tandem's or Python's)."""

from __future__ import annotations

import os
from pathlib import Path

_TANDEM_DIR = str(Path(__file__).resolve().parents[1]) + os.sep  # python/tandem/, this package included
_STDLIB = os.path.dirname(os.__file__) + os.sep


def is_user_file(path: str) -> bool:
    """Whether a traceback frame's file is the user's: not torch's, not tandem's own, not Python's."""
    path = str(path)
    stdlib = path.startswith(_STDLIB) and "-packages/" not in path  # installed packages (transformers) are user code
    generated = "<frozen" in path or path.startswith("<eval_with_key")  # Python's and torch.fx's own code
    return "/torch/" not in path and not path.startswith(_TANDEM_DIR) and not stdlib and not generated


def source_line(node) -> str:
    """' (at file.py:12: code)' for the innermost user frame of a node, or ''."""
    trace = node.meta.get("stack_trace") if node is not None else None
    if not trace:
        return ""
    lines = trace.strip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        ln = lines[i].strip()
        if ln.startswith("File ") and is_user_file(ln[len("File ") :].split(",")[0].strip().strip('"')):
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            parts = ln.split(",")
            file = parts[0][len("File ") :].strip().strip('"').split("/")[-1]
            lineno = parts[1].strip().replace("line ", "") if len(parts) > 1 else "?"
            return f" (at {file}:{lineno}: {code})"
    return ""
