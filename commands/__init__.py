"""Write side and API: MemoryEngine, MemorySession, extraction, validation, reconciliation."""

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.errors import (
    ExtractionFailedError,
    LedgerUnavailableError,
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
    "LedgerUnavailableError",
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
