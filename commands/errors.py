"""Typed errors of the write side. Each names what is wrong; none loses stored data."""

from __future__ import annotations

__all__ = [
    "CommandRejectedError",
    "ExtractionFailedError",
    "MemoryLedgerError",
    "NotAdmittedError",
    "SessionSealedError",
    "StoreUnavailableError",
    "TurnConflictError",
    "UnknownMemoryError",
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


class CommandRejectedError(MemoryLedgerError, ValueError):
    """An explicit command or activation was refused; ``reason_code`` says why."""

    def __init__(self, message: str, reason_code: str) -> None:
        super().__init__(message)
        self.reason_code = reason_code


class UnknownMemoryError(CommandRejectedError):
    """A memory id names no retrievable memory of the caller's namespace, or a statement
    matches none. A memory of another namespace gets exactly this error, with the same
    message shape as an id that never existed (the namespace comes from the host)."""

    def __init__(self, what: str, reason_code: str = "unknown_memory") -> None:
        message = f"unknown memory {what}" if reason_code == "unknown_memory" else what
        super().__init__(message, reason_code)


class NotAdmittedError(MemoryLedgerError, ValueError):
    """``record_use`` named a memory with no live admission in that turn."""
