"""Token estimation: one function, pluggable.

:func:`estimate_tokens` is the default :data:`TokenCounter`; the memory map's budget, the
sizes recorded with admissions and context assembly's budgets all call the counter the
engine (``MemoryEngine.open(..., token_counter=...)``) or session was given, so a host with
a real tokenizer plugs it in once::

    engine = MemoryEngine.open("./store", token_counter=lambda text: len(enc.encode(text)))
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["TokenCounter", "estimate_tokens"]

TokenCounter = Callable[[str], int]
"""``text -> estimated tokens`` (a non-negative int)."""


def estimate_tokens(text: str) -> int:
    """Estimated tokens: one per CJK character, otherwise about four characters per token."""
    cjk = sum(1 for ch in text if "\u2e80" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af")
    other = len(text) - cjk
    return cjk + (other + 3) // 4
