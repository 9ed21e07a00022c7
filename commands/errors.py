"""Typed errors of the write side. Each names what is wrong; none loses stored data."""

from __future__ import annotations

__all__ = [
    "ExtractionFailedError",
    "MemoryLedgerError",
    "SessionSealedError",
    "StoreUnavailableError",
    "TurnConflictError",
]


class MemoryLedgerError(Exception):
    """Base of memory-ledger's own errors."""


class StoreUnavailableError(MemoryLedgerError, OSError):
    """The store directory cannot be created, opened or locked; the message names it."""


class TurnConflictError(MemoryLedgerError, ValueError):
    """A turn id was observed before with a different transcript (digests differ)."""


class SessionSealedError(MemoryLedgerError, ValueError):
    """The session was finished; it accepts no further turns."""


class ExtractionFailedError(MemoryLedgerError, RuntimeError):
    """The extractor raised; the turn's evidence is recorded and its extraction is pending.

    Retry ``observe_final_transcript`` with the same transcript to complete it.
    """
