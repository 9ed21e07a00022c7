"""Write side and API: MemoryEngine, MemorySession, extraction, validation, reconciliation.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.engine import MemoryEngine
    from memory_ledger.commands.errors import (
        ExtractionFailedError,
        MemoryLedgerError,
        SessionSealedError,
        StoreUnavailableError,
        TurnConflictError,
    )
    from memory_ledger.commands.extraction import ExtractionRequest, Extractor, RecordedExtractor
    from memory_ledger.commands.recall import RecallHit, RecallResult
    from memory_ledger.commands.session import MemorySession, TurnOutcome
    from memory_ledger.ledger.events import ReconciliationReport
    from memory_ledger.ledger.ids import Namespace

__all__ = [
    "ExtractionFailedError",
    "ExtractionRequest",
    "Extractor",
    "MemoryEngine",
    "MemoryLedgerError",
    "MemorySession",
    "Namespace",
    "RecallHit",
    "RecallResult",
    "RecordedExtractor",
    "ReconciliationReport",
    "SessionSealedError",
    "StoreUnavailableError",
    "TurnConflictError",
    "TurnOutcome",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ExtractionFailedError": "memory_ledger.commands.errors",
        "ExtractionRequest": "memory_ledger.commands.extraction",
        "Extractor": "memory_ledger.commands.extraction",
        "MemoryEngine": "memory_ledger.commands.engine",
        "MemoryLedgerError": "memory_ledger.commands.errors",
        "MemorySession": "memory_ledger.commands.session",
        "Namespace": "memory_ledger.ledger.ids",
        "RecallHit": "memory_ledger.commands.recall",
        "RecallResult": "memory_ledger.commands.recall",
        "RecordedExtractor": "memory_ledger.commands.extraction",
        "ReconciliationReport": "memory_ledger.ledger.events",
        "SessionSealedError": "memory_ledger.commands.errors",
        "StoreUnavailableError": "memory_ledger.commands.errors",
        "TurnConflictError": "memory_ledger.commands.errors",
        "TurnOutcome": "memory_ledger.commands.session",
    },
)
