"""The context wing: context assembly, knowledge binding, compaction and summarizers.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.context.assembler import ContextAssembler, ContextQuery
    from memory_ledger.commands.context.compaction import CompactionPolicy
    from memory_ledger.commands.context.summarizers import (
        DeterministicSummarizer,
        OpenAISummarizer,
        Summarizer,
    )

__all__ = [
    "CompactionPolicy",
    "ContextAssembler",
    "ContextQuery",
    "DeterministicSummarizer",
    "OpenAISummarizer",
    "Summarizer",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CompactionPolicy": "memory_ledger.commands.context.compaction",
        "ContextAssembler": "memory_ledger.commands.context.assembler",
        "ContextQuery": "memory_ledger.commands.context.assembler",
        "DeterministicSummarizer": "memory_ledger.commands.context.summarizers",
        "OpenAISummarizer": "memory_ledger.commands.context.summarizers",
        "Summarizer": "memory_ledger.commands.context.summarizers",
    },
)
