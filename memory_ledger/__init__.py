"""memory-ledger: an embeddable, event-sourced long-term memory engine for AI agents.

Everything installs under this one import name: ``memory_ledger.ledger`` (events, the LMDB
persistence module), ``memory_ledger.projections`` (DuckDB read models),
``memory_ledger.commands`` (the engine, sessions, recall) and ``memory_ledger.replay``
(audit, replay, the CLI). This module is the short way in::

    import memory_ledger
    with memory_ledger.open("./store") as mem:
        ns = memory_ledger.Namespace("acme", "alice", "assistant")
        mem.remember(ns, "Alice only drinks espresso.")
        print(mem.recall(ns, "what does Alice drink?")[0].statement)
"""

from __future__ import annotations

from memory_ledger.commands import (
    MemoryEngine,
    MemoryLedgerError,
    MemorySession,
    Namespace,
    RecallHit,
    RecallResult,
    RecordedExtractor,
)

__all__ = [
    "MemoryEngine",
    "MemoryLedgerError",
    "MemorySession",
    "Namespace",
    "RecallHit",
    "RecallResult",
    "RecordedExtractor",
]
