"""Write side and API: MemoryEngine, MemorySession, extraction, validation, reconciliation.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.engine.memory_engine import MemoryEngine
    from memory_ledger.commands.errors import (
        CommandRejectedError,
        ExtractionFailedError,
        InvalidArgumentError,
        InvalidArgumentTypeError,
        LedgerUnavailableError,
        MemoryLedgerError,
        NotAdmittedError,
        SessionSealedError,
        StoreUnavailableError,
        TurnConflictError,
    )
    from memory_ledger.commands.extraction.base import (
        ExtractionRequest,
        Extractor,
        RecordedExtractor,
    )
    from memory_ledger.commands.recall.index import RecallHit, RecallResult
    from memory_ledger.commands.session.memory_session import MemorySession, TurnOutcome
    from memory_ledger.ledger.events import ReconciliationReport
    from memory_ledger.ledger.ids import Namespace

__all__ = [
    "CommandRejectedError",
    "ExtractionFailedError",
    "ExtractionRequest",
    "Extractor",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "LedgerUnavailableError",
    "MemoryEngine",
    "MemoryLedgerError",
    "MemorySession",
    "Namespace",
    "NotAdmittedError",
    "RecallHit",
    "RecallResult",
    "ReconciliationReport",
    "RecordedExtractor",
    "SessionSealedError",
    "StoreUnavailableError",
    "TurnConflictError",
    "TurnOutcome",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CommandRejectedError": "memory_ledger.commands.errors",
        "ExtractionFailedError": "memory_ledger.commands.errors",
        "ExtractionRequest": "memory_ledger.commands.extraction.base",
        "Extractor": "memory_ledger.commands.extraction.base",
        "InvalidArgumentError": "memory_ledger.commands.errors",
        "InvalidArgumentTypeError": "memory_ledger.commands.errors",
        "LedgerUnavailableError": "memory_ledger.commands.errors",
        "MemoryEngine": "memory_ledger.commands.engine.memory_engine",
        "MemoryLedgerError": "memory_ledger.commands.errors",
        "MemorySession": "memory_ledger.commands.session.memory_session",
        "Namespace": "memory_ledger.ledger.ids",
        "NotAdmittedError": "memory_ledger.commands.errors",
        "RecallHit": "memory_ledger.commands.recall.index",
        "RecallResult": "memory_ledger.commands.recall.index",
        "ReconciliationReport": "memory_ledger.ledger.events",
        "RecordedExtractor": "memory_ledger.commands.extraction.base",
        "SessionSealedError": "memory_ledger.commands.errors",
        "StoreUnavailableError": "memory_ledger.commands.errors",
        "TurnConflictError": "memory_ledger.commands.errors",
        "TurnOutcome": "memory_ledger.commands.session.memory_session",
    },
)
