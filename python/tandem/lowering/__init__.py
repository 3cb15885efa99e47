"""Core ATen graph of one method -> tandem ops (docs/ops.md lists the mapping).

Pure views (view, reshape, squeeze, contiguous slices, ...) become values that share their
base's storage; everything else becomes a runtime op writing a fresh scratch value. Nodes whose
inputs are all constants are evaluated here, with torch, and stored as constants.

The files mirror src/kernels/: `core` (the Lowering state, `handles`, shared helpers), `driver`
(lower_method), one file of handlers per op family (elementwise, shape, linalg, reduce, index,
attention, conv, random), `control` (torch.cond), `provenance` (the user's source lines) and
`complex_pairs` (a pass run first: complex tensors as pairs of floats). Weights stay in their natural
layout: layout.py, a pass after quantization, packs them. Importing the package registers every handler.
"""

from . import attention, control, conv, elementwise, index, linalg, random, reduce, shape  # noqa: F401 - registers their handlers
from .core import HANDLERS, Lowering, handles
from .driver import lower_method
from .provenance import is_user_file, source_line

__all__ = ["HANDLERS", "Lowering", "handles", "is_user_file", "lower_method", "source_line"]
