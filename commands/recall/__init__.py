"""The recall wing: lexical and semantic channels, fusion, policies, valid time.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.recall.fusion import HybridFusion
    from memory_ledger.commands.recall.index import MemoryDoc, RecallHit, RecallResult, RecallScope
    from memory_ledger.commands.recall.policy import RecallLimitError, RecallPolicy
    from memory_ledger.commands.recall.ranking import rank_candidates

__all__ = [
    "HybridFusion",
    "MemoryDoc",
    "RecallHit",
    "RecallLimitError",
    "RecallPolicy",
    "RecallResult",
    "RecallScope",
    "rank_candidates",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "HybridFusion": "memory_ledger.commands.recall.fusion",
        "MemoryDoc": "memory_ledger.commands.recall.index",
        "RecallHit": "memory_ledger.commands.recall.index",
        "RecallLimitError": "memory_ledger.commands.recall.policy",
        "RecallPolicy": "memory_ledger.commands.recall.policy",
        "RecallResult": "memory_ledger.commands.recall.index",
        "RecallScope": "memory_ledger.commands.recall.index",
        "rank_candidates": "memory_ledger.commands.recall.ranking",
    },
)
