"""The base of every error memory-ledger raises on purpose, and the ledger's own errors.

Every error the engine raises on purpose derives from :class:`MemoryLedgerError` and carries
a stable ``reason_code`` (a class default, overridable per instance) that programs and logs
can match on; the message is for people and may change. Each concrete error also derives
from the builtin (or ``eventsourcing.persistence``) class that the code raised before it was
typed, so ``except ValueError`` / ``except OSError`` / ``except IntegrityError`` keep working.

This module is the lowest layer's: it imports nothing of memory-ledger's, so the ledger,
the projections, the commands and the replay tools all raise from one tree.

Families defined here:

- :class:`InvalidArgumentError` (a ``ValueError``) and :class:`InvalidArgumentTypeError`
  (also a ``TypeError``): a call's argument is wrong; ``parameter`` names it.
- :class:`LedgerError` and its DB-API-shaped subclasses (:class:`LedgerOperationalError`,
  :class:`LedgerIntegrityError`, ...): what the LMDB ledger raises, each also the
  ``eventsourcing.persistence`` class of the same meaning, each naming the store path
  (the PostgreSQL ledger raises them too, naming the ledger without its password;
  :class:`LedgerConnectionError` when its server cannot be reached).
- :class:`LedgerFormatError` and :class:`ForeignStoreError`: the folder does not hold a
  memory-ledger store this version can read.
- :class:`LedgerSettingError` (an ``OSError``, as the library's own factories raise): a
  persistence setting (``LMDB_PATH``, ``LMDB_MAP_SIZE``, ...) is missing or invalid.
"""

from __future__ import annotations

import copy
from typing import TypeVar

import msgspec
from eventsourcing.persistence import (
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
)

__all__ = [
    "DiskFullError",
    "ForeignStoreError",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "LedgerConnectionError",
    "LedgerDamagedError",
    "LedgerDataError",
    "LedgerDiskFullError",
    "LedgerError",
    "LedgerFormatError",
    "LedgerIntegrityError",
    "LedgerInternalError",
    "LedgerNotSupportedError",
    "LedgerOperationalError",
    "LedgerProgrammingError",
    "LedgerReadOnlyError",
    "LedgerRecordError",
    "LedgerSettingError",
    "LedgerTamperedError",
    "ListenAddressError",
    "ListenError",
    "MemoryLedgerError",
    "NaiveDatetimeError",
    "at_position",
]


class MemoryLedgerError(Exception):
    """Base of every error memory-ledger raises on purpose.

    ``reason_code`` is a stable, machine-readable code (``snake_case``): each class sets a
    default and an instance may override it (``reason_code=`` keyword). Instances pickle
    with their attributes (the ``reason_code`` survives a process boundary).
    """

    reason_code: str = "memory_ledger_error"

    def __init__(self, *args: object, reason_code: str | None = None) -> None:
        super().__init__(*args)
        if reason_code is not None:
            self.reason_code = reason_code


# Arguments ------------------------------------------------------------------------------------


class InvalidArgumentError(MemoryLedgerError, ValueError):
    """An argument of an engine call is invalid; the message and ``parameter`` name it.

    :param message: what is wrong, naming the parameter.
    :param parameter: the parameter's name (``"k"``, ``"timeout"``, ``"older_than"``...).
    """

    reason_code = "invalid_argument"

    def __init__(
        self, message: str, *, parameter: str | None = None, reason_code: str | None = None
    ) -> None:
        super().__init__(message, reason_code=reason_code)
        self.parameter = parameter


class NaiveDatetimeError(InvalidArgumentError):
    """A datetime argument has no time zone; ``parameter`` names it. A naive time is
    ambiguous (local? UTC?) and is never guessed: pass ``datetime.now(UTC)`` or
    ``datetime(..., tzinfo=UTC)``."""

    reason_code = "naive_datetime"


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument has the wrong type (also a ``TypeError``, which the call raised before)."""

    reason_code = "invalid_argument_type"


# The ledger store -----------------------------------------------------------------------------


class LedgerError(MemoryLedgerError, DatabaseError):
    """The LMDB ledger failed (an ``eventsourcing.persistence.DatabaseError``).

    ``path`` is the store directory (also named in the message). Subclasses follow the
    ``eventsourcing`` recorders' DB-API mapping (``eventsourcing/sqlite.py``): an LMDB
    driver error never reaches a caller raw; it arrives as one of these, with the driver's
    error as ``__cause__``.
    """

    reason_code = "ledger_error"

    def __init__(self, message: str, *, path: str = "", reason_code: str | None = None) -> None:
        super().__init__(message, reason_code=reason_code)
        self.path = path


class LedgerDataError(LedgerError, DataError):
    """A value cannot be stored as given (an id or version out of range, a key too long)."""

    reason_code = "ledger_data"


class LedgerOperationalError(LedgerError, OperationalError):
    """The store cannot be opened, read or written now (permissions, disk, readers full)."""

    reason_code = "ledger_unavailable"


class DiskFullError(MemoryLedgerError, OSError):
    """No space is left on the device holding ``path`` (a ledger folder or a projection
    file): the write was refused whole, nothing stored was lost; free space and retry.

    ``reason_code`` ``"disk_full"``. The ledger raises
    :class:`LedgerDiskFullError`, the projections ``ProjectionDiskFullError``
    (:mod:`memory_ledger.projections.errors`); catch this class for either.
    """

    reason_code = "disk_full"

    def __init__(self, message: str, *, path: str = "", reason_code: str | None = None) -> None:
        super().__init__(message, reason_code=reason_code)
        self.path = path


class LedgerDiskFullError(DiskFullError, LedgerOperationalError):
    """The LMDB ledger cannot be written: no space left on its device (see
    :class:`DiskFullError`, whose ``reason_code`` it has; also a ``LedgerOperationalError``,
    as before)."""


class LedgerReadOnlyError(LedgerOperationalError):
    """A write was attempted on a ledger opened read-only (an audit of a read-only store)."""

    reason_code = "ledger_read_only"


class LedgerConnectionError(LedgerOperationalError, InterfaceError):
    """The ledger's server cannot be reached, or the connection broke (a PostgreSQL ledger
    down, restarting or unreachable), after the recorder's own retries. ``path`` names the
    ledger without its password. The engine reports it as ``LedgerUnavailableError``."""

    reason_code = "ledger_connection"


class LedgerIntegrityError(LedgerError, IntegrityError):
    """A write conflicts with what is stored (a stream version exists: a concurrent writer,
    or a tracking position that is not new); nothing of the batch was written."""

    reason_code = "ledger_conflict"


class LedgerInternalError(LedgerError, InternalError):
    """LMDB reported an internal error (a transaction or cursor in a bad state)."""

    reason_code = "ledger_internal"


class LedgerProgrammingError(LedgerError, ProgrammingError):
    """LMDB was called wrongly (a bad handle or parameter): a bug, reported with the path."""

    reason_code = "ledger_programming"


class LedgerNotSupportedError(LedgerError, NotSupportedError):
    """The operation is not supported by this LMDB build (e.g. encryption)."""

    reason_code = "ledger_not_supported"


class LedgerDamagedError(LedgerError):
    """The ledger file is damaged (a corrupted page, a bad checksum, an LMDB panic).

    Restore it from a backup (``memory-ledger restore``); ``verify`` locates damage.
    ``position`` is the first ledger position the damage kept from being read, when known.
    """

    reason_code = "ledger_damaged"

    def __init__(
        self,
        message: str,
        *,
        path: str = "",
        position: int | None = None,
        reason_code: str | None = None,
    ) -> None:
        super().__init__(message, path=path, reason_code=reason_code)
        self.position = position


class LedgerRecordError(LedgerDamagedError, msgspec.DecodeError):
    """A record of the ledger's log does not decode (a damaged or foreign record body).

    Also a ``msgspec.DecodeError`` (a ``ValueError``), which the ledger raised before.
    ``position`` is the record's ledger position when known (also named in the message).
    """

    reason_code = "undecodable_record"

    def __init__(
        self,
        message: str,
        *,
        path: str = "",
        position: int | None = None,
        reason_code: str | None = None,
    ) -> None:
        super().__init__(message, path=path, position=position, reason_code=reason_code)


class LedgerTamperedError(LedgerDamagedError):
    """A record of the ledger's log does not match its hash, or a position is missing: the
    ledger was changed after it was written. ``position`` is the first bad position (also
    named in the message); ``memory-ledger verify`` reports the same."""

    reason_code = "ledger_tampered"

    def __init__(self, message: str, *, position: int | None = None, path: str = "") -> None:
        super().__init__(message, path=path, position=position)


E = TypeVar("E", bound=MemoryLedgerError)


def at_position(error: E, position: int) -> E:
    """``error`` (met reading the ledger record at ``position``) naming that position: a copy
    of the same class and ``reason_code`` whose message starts ``ledger record N:`` and whose
    ``position`` attribute is N; ``error`` itself when it names a position already. Raise it
    ``from error``. The readers of the log (projections, replay tools) use it so that a
    damaged record is reported where it is, as ``memory-ledger verify`` reports it.
    """
    if getattr(error, "position", None) is not None:
        return error
    named = copy.copy(error)
    named.args = (f"ledger record {position}: {error}", *error.args[1:])
    named.position = position  # type: ignore[attr-defined]
    return named


class LedgerFormatError(LedgerError):
    """The store was written in a record format this version cannot read.

    Raised on open when the store's ``format_version`` is newer than this version's, or is
    not an integer (``reason_code`` ``"newer_format"`` or ``"unreadable_format"``).
    """

    reason_code = "unsupported_format"


class ForeignStoreError(LedgerFormatError):
    """The folder does not hold a memory-ledger store; it is refused and left untouched.

    ``reason_code`` says what was found: ``"foreign_lmdb"`` (another application's LMDB
    environment: other named databases or keys, or no memory-ledger identity),
    ``"foreign_ledger"`` (a ledger of this package's persistence module written by another
    ``eventsourcing`` application, refused by the engine), ``"empty_data_file"`` (a
    zero-byte ``data.mdb``), ``"not_lmdb"`` (``data.mdb`` is not an
    LMDB file) or ``"lmdb_at_top_level"`` (an LMDB environment where the store folder
    should hold a ``ledger/`` folder).
    """

    reason_code = "foreign_store"


class ListenAddressError(InvalidArgumentError):
    """A server (``memory-ledger ui``, ``mcp --http``) was given an address it cannot listen
    on, refused before it starts: a port outside 1-65535 (0, a free one, where the command
    allows it), a host that is neither an address nor a name that resolves. ``parameter``
    names the option (``--port``, ``--host``, ``--http``)."""

    reason_code = "invalid_listen_address"


class ListenError(MemoryLedgerError, OSError):
    """A server could not listen on a valid address: the port is in use (instance reason
    ``address_in_use``), the address is not one of this machine's
    (``address_not_available``), or a port below 1024 needs privileges
    (``address_forbidden``); the message names the address and the system's reason."""

    reason_code = "listen_failed"


class LedgerSettingError(MemoryLedgerError, OSError):
    """A persistence setting is missing or invalid; the message names its key.

    An ``OSError``, as the ``eventsourcing`` library's own factories raise for bad settings.
    """

    reason_code = "invalid_setting"
