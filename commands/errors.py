"""Typed errors of the write side. Each names what is wrong; none loses stored data."""

from __future__ import annotations

from datetime import datetime

from eventsourcing.persistence import IntegrityError

__all__ = [
    "CommandRejectedError",
    "ConcurrencyConflictError",
    "ExtractionFailedError",
    "MemoryLedgerError",
    "NaiveDatetimeError",
    "NotAdmittedError",
    "SessionSealedError",
    "StoreUnavailableError",
    "TurnConflictError",
    "UnknownMemoryError",
    "check_aware",
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


class ConcurrencyConflictError(MemoryLedgerError, IntegrityError):
    """A command's decision was overtaken by concurrent appends every time it was re-read
    and re-decided (a bounded number of attempts); nothing of it was written. Retry later.

    Also an ``eventsourcing`` ``IntegrityError``, which callers of the library expect.
    """


class NaiveDatetimeError(MemoryLedgerError, ValueError):
    """A datetime parameter has no time zone; ``parameter`` names it. Give an aware one
    (e.g. ``datetime.now(UTC)``): a naive time is ambiguous and is never guessed."""

    def __init__(self, parameter: str, value: object) -> None:
        super().__init__(
            f"{parameter} must be a timezone-aware datetime, got the naive {value!r} "
            "(add tzinfo, e.g. datetime.now(UTC))"
        )
        self.parameter = parameter


def check_aware(parameter: str, value: datetime | None) -> datetime | None:
    """``value`` unchanged unless it is a naive datetime (then :class:`NaiveDatetimeError`
    naming ``parameter``)."""
    if isinstance(value, datetime) and value.tzinfo is None:
        raise NaiveDatetimeError(parameter, value)
    return value
