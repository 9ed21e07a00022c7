"""Write side and API: MemoryEngine, MemorySession, extraction, validation, reconciliation."""

from memory_ledger.commands.engine import MemoryEngine
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
from memory_ledger.commands.extraction import ExtractionRequest, Extractor, RecordedExtractor
from memory_ledger.commands.recall import RecallHit, RecallResult
from memory_ledger.commands.session import MemorySession, TurnOutcome
from memory_ledger.ledger.events import ReconciliationReport
from memory_ledger.ledger.ids import Namespace

__all__ = [
    "CommandRejectedError",
    "ExtractionFailedError",
    "ExtractionRequest",
    "Extractor",
    "LedgerUnavailableError",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "MemoryEngine",
    "MemoryLedgerError",
    "MemorySession",
    "Namespace",
    "NotAdmittedError",
    "RecallHit",
    "RecallResult",
    "RecordedExtractor",
    "ReconciliationReport",
    "SessionSealedError",
    "StoreUnavailableError",
    "TurnConflictError",
    "TurnOutcome",
]
