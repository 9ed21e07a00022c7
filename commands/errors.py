"""Typed errors of the write side. Each names what is wrong; none loses stored data."""

from __future__ import annotations

__all__ = [
    "CommandRejectedError",
    "ExtractionFailedError",
    "LedgerUnavailableError",
    "MemoryLedgerError",
    "NotAdmittedError",
    "SessionSealedError",
    "StoreUnavailableError",
    "TurnConflictError",
]


class MemoryLedgerError(Exception):
    """Base of memory-ledger's own errors."""


class StoreUnavailableError(MemoryLedgerError, OSError):
    """The store directory cannot be created, opened or locked; the message names it."""


class LedgerUnavailableError(StoreUnavailableError):
    """The ledger's server cannot be reached (down, restarting, unreachable), or holds no
    ledger where one was expected. The message names the ledger without its password.

    A command that raised it is entirely written or not at all, never in part; retrying it
    is safe (the engine reconnects by itself once the server is back).
    """


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


class NotAdmittedError(MemoryLedgerError, ValueError):
    """``record_use`` named a memory with no live admission in that turn."""
