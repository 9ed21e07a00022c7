"""Typed errors of the write side. Each names what is wrong; none loses stored data.

Every class derives from :class:`MemoryLedgerError` (defined in
:mod:`memory_ledger.ledger.errors`, the lowest layer, and re-exported here and as
``memory_ledger.MemoryLedgerError``) and carries a stable ``reason_code``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from memory_ledger.ledger.arguments import check_aware
from memory_ledger.ledger.errors import (
    InvalidArgumentError,
    InvalidArgumentTypeError,
    MemoryLedgerError,
    NaiveDatetimeError,
)
from memory_ledger.ledger.events import PendingExtraction

__all__ = [
    "CommandRejectedError",
    "ConcurrencyConflictError",
    "EngineClosedError",
    "ExtractionFailedError",
    "ExtractionPendingError",
    "LedgerDriverNotInstalledError",
    "LedgerUnavailableError",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "MemoryLedgerError",
    "NaiveDatetimeError",
    "NotAdmittedError",
    "SessionSealedError",
    "StoreUnavailableError",
    "TranscriptTooLargeError",
    "TurnConflictError",
    "SupersededTargetError",
    "UnknownMemoryError",
    "VectorsPendingError",
    "check_aware",
]


class StoreUnavailableError(MemoryLedgerError, OSError):
    """The store directory cannot be created, opened or locked; the message names it.

    ``path`` is the store folder. ``reason_code`` is ``"store_unavailable"`` or, when the
    cause is known, the cause's code (``"permission_denied"``, ``"no_store"``,
    ``"foreign_lmdb"``...).
    """

    reason_code = "store_unavailable"

    def __init__(self, message: str, *, path: str = "", reason_code: str | None = None) -> None:
        super().__init__(message, reason_code=reason_code)
        self.path = path


class EngineClosedError(StoreUnavailableError):
    """The engine was closed (``MemoryEngine.close`` / ``AsyncMemoryEngine.aclose``): every
    public method and property of it, and of its sessions, raises this (closing again is a
    no-op). Open the store again to go on; nothing stored is affected. A
    :class:`StoreUnavailableError` (what a closed async engine raised before)."""

    reason_code = "engine_closed"


class LedgerUnavailableError(StoreUnavailableError):
    """The ledger's server cannot be reached (down, restarting, unreachable), or holds no
    ledger where one was expected. The message names the ledger without its password.

    A command that raised it is entirely written or not at all, never in part; retrying it
    is safe (the engine reconnects by itself once the server is back).
    """

    reason_code = "ledger_server_unavailable"


POSTGRES_EXTRA = 'pip install "memory-ledger[postgres]"'
"""The command that installs the PostgreSQL ledger's driver (psycopg 3 and its pool)."""


class LedgerDriverNotInstalledError(MemoryLedgerError, ImportError):
    """A PostgreSQL ledger was asked for, but its driver (the ``postgres`` extra: psycopg 3
    and its pool) is not installed; the message names the missing module and the command
    that installs it (:data:`POSTGRES_EXTRA`). Nothing was opened or written."""

    reason_code = "postgres_extra_not_installed"

    @classmethod
    def missing(cls, module: str | None) -> LedgerDriverNotInstalledError:
        """The error for the missing ``module`` (``ImportError.name``; None: unknown)."""
        what = f" ({module} is missing)" if module else ""
        error = cls(
            f"a PostgreSQL ledger needs the postgres extra{what}; install it: {POSTGRES_EXTRA}"
        )
        error.name = module
        return error


class TranscriptTooLargeError(InvalidArgumentError):
    """A turn's transcript is larger than the configured cap (``memory.max_transcript_bytes``,
    default 1 MiB of UTF-8); nothing was recorded. ``size`` and ``limit`` are in bytes and
    ``parameter`` is ``"transcript"``."""

    reason_code = "transcript_too_large"

    def __init__(self, size: int, limit: int) -> None:
        msg = (
            f"transcript is {size:,} bytes (UTF-8), over "
            f"the limit of {limit:,} bytes (memory.max_transcript_bytes); nothing was recorded"
        )
        super().__init__(msg, parameter="transcript")
        self.size = size
        self.limit = limit

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.size, self.limit))


class VectorsPendingError(MemoryLedgerError, TimeoutError):
    """``wait_for_vectors(timeout, raise_on_timeout=True)`` timed out: some retrievable
    memories still have no vector (recall now would rank them lexically only).

    :param pending: how many vectors (one per memory and field: statement, source) of the
        namespace waited for, or of the store, are still missing.
    :param cause: the reason code of the provider's last failure, if any (e.g.
        ``"embedding_unreachable"``), else None.
    """

    reason_code = "vectors_pending"

    def __init__(self, message: str, *, pending: int, cause: str | None = None) -> None:
        super().__init__(message)
        self.pending = pending
        self.cause = cause


class TurnConflictError(MemoryLedgerError, ValueError):
    """A turn id was observed before with a different transcript (digests differ)."""

    reason_code = "turn_conflict"


class SessionSealedError(MemoryLedgerError, ValueError):
    """The session was finished; it accepts no further turns."""

    reason_code = "session_sealed"


class ExtractionFailedError(MemoryLedgerError, RuntimeError):
    """The extractor raised; the turn's evidence is recorded and its extraction is pending.

    Retry ``observe_final_transcript`` with the same transcript to complete it.
    """

    reason_code = "extraction_failed"


class CommandRejectedError(MemoryLedgerError, ValueError):
    """An explicit command or activation was refused; ``reason_code`` says why and, when
    one argument is at fault, ``parameter`` names it (as :class:`InvalidArgumentError`).
    ``turn``: which command of a batch (1-based, in order) was refused, when the refusal
    came from deciding one of several; None otherwise."""

    reason_code = "command_rejected"
    turn: int | None = None

    def __init__(
        self, message: str, reason_code: str | None = None, *, parameter: str | None = None
    ) -> None:
        super().__init__(message, reason_code=reason_code)
        self.parameter = parameter


class UnknownMemoryError(CommandRejectedError):
    """A memory id names no retrievable memory of the caller's namespace, or a statement
    matches none. A memory of another namespace gets exactly this error, with the same
    message shape as an id that never existed (the namespace comes from the host).

    ``what`` (the id or words the caller named, or the whole message for another
    ``reason_code``) is shown with its secret-shaped spans redacted (``[REDACTED:<kind>]``):
    every surface that names an unknown target raises this error, and a canary secret given
    as a target was echoed in its message.

    A refusal of words that name no memory clearly (``no_clear_target``) or several
    (``ambiguous_match``) carries ``candidates``: up to five ``(memory_id, statement)``
    pairs, best first, so a caller (or a model) can retry with one of them as ``target``;
    empty otherwise."""

    reason_code = "unknown_memory"

    def __init__(
        self,
        what: str,
        reason_code: str = "unknown_memory",
        *,
        candidates: Sequence[tuple[str, str]] = (),
    ) -> None:
        from memory_ledger.commands.secrets import redact  # detect_secrets: on an error only

        shown = redact(str(what)).text
        message = f"unknown memory {shown}" if reason_code == "unknown_memory" else shown
        super().__init__(message, reason_code)
        self.candidates: tuple[tuple[str, str], ...] = tuple(candidates)


class SupersededTargetError(CommandRejectedError):
    """A forget, pin or correct named a memory that was superseded (by a correction or a
    newer value of its key): it is refused, nothing is written, and ``current`` names the
    memory that holds the fact now (None when its supersession chain ends in a forgotten
    memory). The policy of every surface (docs/design.md, issue 25): a command never
    silently moves to another memory than the one it named; the caller decides, e.g. by
    naming ``current``. Of several concurrent corrections of one value, one applies and the
    others get this error naming the winner."""

    reason_code = "target_superseded"

    def __init__(self, target: UUID, current: UUID | None) -> None:
        now = f"by {current}, the current value" if current else "and its chain ends forgotten"
        super().__init__(f"memory {target} was superseded {now}; nothing was done")
        self.target = target
        self.current = current


class NotAdmittedError(MemoryLedgerError, ValueError):
    """``record_use`` named a memory with no live admission in that turn."""

    reason_code = "not_admitted"


class ExtractionPendingError(MemoryLedgerError, RuntimeError):
    """``finish()`` refused to seal a session with turns still pending extraction (their
    evidence is recorded, their extraction failed or never ran): sealed, they would never
    become memory. ``pending`` lists each turn with its cause (``reason_code``, detail);
    nothing was written. Retry those turns, or ``finish(allow_pending=True)``."""

    reason_code = "extraction_pending"

    def __init__(self, session_id: str, pending: Sequence[PendingExtraction] = ()) -> None:
        turns = ", ".join(f"{p.turn_id} ({p.reason_code})" for p in pending)
        super().__init__(
            f"session {session_id!r} has turns pending extraction: {turns}; retry them "
            "(observe_final_transcript with the same transcript) or finish(allow_pending=True)"
        )
        self.session_id = session_id
        self.pending = tuple(pending)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.session_id, self.pending))


class ConcurrencyConflictError(MemoryLedgerError, IntegrityError):
    """A command's decision was overtaken by concurrent appends every time it was re-read
    and re-decided (a bounded number of attempts); nothing of it was written. Retry later.

    Also an ``eventsourcing`` ``IntegrityError``, which callers of the library expect.
    """

    reason_code = "concurrency_conflict"
