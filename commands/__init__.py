"""Write side and API: MemoryEngine, MemorySession, extraction, validation, reconciliation."""

from commands.engine import MemoryEngine
from commands.errors import (
    ExtractionFailedError,
    MemoryLedgerError,
    SessionSealedError,
    StoreUnavailableError,
    TurnConflictError,
)
from commands.extraction import ExtractionRequest, Extractor, RecordedExtractor
from commands.recall import RecallHit, RecallResult
from commands.session import MemorySession, TurnOutcome
from ledger.events import ReconciliationReport
from ledger.ids import Namespace

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
