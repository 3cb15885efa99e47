"""What the transformers recipes (causal_lm.py, seq2seq.py) check in their arguments, once."""

from __future__ import annotations

from ..ir import ExportError


class ArgumentError(ExportError):
    """An argument the recipe cannot take (a length out of range, a missing capacity): never a reason to try another recipe."""


EXPORT_OPTIONS = ("quantize", "quantize_group", "quantize_skip", "quantize_convs")


def check_options(recipe: str, options: dict) -> None:
    unknown = sorted(set(options) - set(EXPORT_OPTIONS))
    if unknown:
        raise ExportError(
            f"{recipe}: unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; it takes the "
            f"model, max_cache_len, max_prompt_len, metadata, sample_top_k and tandem.export's "
            f"{', '.join(EXPORT_OPTIONS)}"
        )


def check_int(name: str, v) -> None:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ExportError(f"{name} must be an int, got {v!r}")


def token_id(v):
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v]
    return None if v is None else int(v)
