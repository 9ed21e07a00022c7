"""Errors of the read side, and the translation of DuckDB driver errors into them.

As ``eventsourcing/sqlite.py`` maps ``sqlite3`` errors onto the DB-API classes of
``eventsourcing.persistence``, :func:`translate_duckdb_error` maps DuckDB's (which follow the
same DB-API hierarchy) onto :class:`ProjectionError` subclasses that are also the library's
class of the same meaning, naming the projection file. A DuckDB error never reaches a
caller raw.

=====================================  ===================================================
DuckDB error                           translated to (reason code)
=====================================  ===================================================
damage (short read, bad checksum,      :class:`ProjectionDamagedError`
corrupt block; see :func:`is_damage`)  (projection_damaged), via the store's guard
``duckdb.IntegrityError``              :class:`ProjectionIntegrityError`
``duckdb.DataError``                   :class:`ProjectionDataError`
``duckdb.OperationalError``            :class:`ProjectionOperationalError`
``duckdb.ProgrammingError``            :class:`ProjectionProgrammingError`
``duckdb.InternalError``               :class:`ProjectionInternalError`
``duckdb.NotSupportedError``           :class:`ProjectionNotSupportedError`
any other ``duckdb.Error``             :class:`ProjectionError` (projection_error)
=====================================  ===================================================
"""

from __future__ import annotations

import os

import duckdb
from eventsourcing.persistence import (
    DatabaseError,
    DataError,
    IntegrityError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
)

from memory_ledger.ledger.disk_full import disk_full_message, is_disk_full, says_no_space
from memory_ledger.ledger.errors import DiskFullError, MemoryLedgerError

__all__ = [
    "ProjectionDamagedError",
    "ProjectionDiskFullError",
    "ProjectionDataError",
    "ProjectionError",
    "ProjectionIntegrityError",
    "ProjectionInternalError",
    "ProjectionNotSupportedError",
    "ProjectionOperationalError",
    "ProjectionProgrammingError",
    "ProjectionUnavailableError",
    "is_damage",
    "rollback_quietly",
    "translate_duckdb_error",
]


class ProjectionUnavailableError(MemoryLedgerError, OSError):
    """No projection file can be opened (every slot locked, or the folder is unusable).

    ``path`` names the folder or file.
    """

    reason_code = "projection_unavailable"

    def __init__(self, message: str, *, path: str = "", reason_code: str | None = None) -> None:
        super().__init__(message, reason_code=reason_code)
        self.path = path


class ProjectionDamagedError(ProjectionUnavailableError):
    """The projection file turned out damaged while in use (a short read, a bad checksum).

    It has been marked: the next open of the store sets it aside and rebuilds the read
    models from the ledger, which is untouched. The message names the file.
    """

    reason_code = "projection_damaged"


class ProjectionError(MemoryLedgerError, DatabaseError):
    """A DuckDB read model failed (an ``eventsourcing.persistence.DatabaseError``).

    ``path`` is the projection file (also named in the message); the DuckDB error is the
    ``__cause__``. Read models are disposable: the ledger is untouched.
    """

    reason_code = "projection_error"

    def __init__(self, message: str, *, path: str = "", reason_code: str | None = None) -> None:
        super().__init__(message, reason_code=reason_code)
        self.path = path


class ProjectionDataError(ProjectionError, DataError):
    """A value does not fit a read-model column (out of range, wrong type)."""

    reason_code = "projection_data"


class ProjectionOperationalError(ProjectionError, OperationalError):
    """The projection file cannot be used now (I/O, memory, a lock, an interrupted query)."""

    reason_code = "projection_operational"


class ProjectionDiskFullError(DiskFullError, ProjectionOperationalError):
    """The projection file cannot be written: no space left on its device (``disk_full``;
    a :class:`~memory_ledger.ledger.errors.DiskFullError`). The file is not damaged and not
    set aside; the ledger holds everything (read models are rebuilt from it)."""


class ProjectionIntegrityError(ProjectionError, IntegrityError):
    """A read-model constraint failed."""

    reason_code = "projection_conflict"


class ProjectionInternalError(ProjectionError, InternalError):
    """DuckDB reported an internal error."""

    reason_code = "projection_internal"


class ProjectionProgrammingError(ProjectionError, ProgrammingError):
    """A read-model query is invalid (an unknown table or column: a version mismatch)."""

    reason_code = "projection_programming"


class ProjectionNotSupportedError(ProjectionError, NotSupportedError):
    """DuckDB does not support the operation."""

    reason_code = "projection_not_supported"


def rollback_quietly(conn: duckdb.DuckDBPyConnection) -> None:
    """Roll back the open transaction of ``conn`` while another error is on its way: a
    write that failed (a full disk, an I/O error) may have ended the transaction already,
    and DuckDB's "cannot rollback - no transaction is active" must not hide the cause."""
    try:
        conn.execute("ROLLBACK")
    except duckdb.Error:
        pass


def is_damage(error: BaseException) -> bool:
    """Whether a DuckDB error says the file itself is damaged (short read, bad checksum,
    corrupt block), rather than a bad query, a lock or a full disk."""
    if not isinstance(error, duckdb.Error):
        return False
    if says_no_space(error):
        return False  # the file is sound; the store's guard names the full disk
    text = str(error).lower()
    return isinstance(error, duckdb.IOException) or any(
        word in text for word in ("corrupt", "checksum", "could not read enough bytes")
    )


_BY_CLASS: tuple[tuple[type[duckdb.Error], type[ProjectionError]], ...] = (
    (duckdb.IntegrityError, ProjectionIntegrityError),
    (duckdb.DataError, ProjectionDataError),
    (duckdb.OperationalError, ProjectionOperationalError),
    (duckdb.ProgrammingError, ProjectionProgrammingError),
    (duckdb.InternalError, ProjectionInternalError),
    (duckdb.NotSupportedError, ProjectionNotSupportedError),
)


def translate_duckdb_error(error: duckdb.Error, path: str, action: str = "use") -> ProjectionError:
    """The typed error to raise for DuckDB ``error`` met while ``action``-ing the projection
    file ``path`` (raise it ``from error``). Damage is not marked here: see
    :meth:`memory_ledger.projections.store.ProjectionStore.guard`.
    """
    folder = os.path.dirname(os.path.abspath(path)) if path != ":memory:" else "."
    if is_disk_full(error, folder):
        msg = disk_full_message("the projection file", folder, str(error))
        return ProjectionDiskFullError(msg, path=path)
    typed: type[ProjectionError] = ProjectionError
    for driver_class, candidate in _BY_CLASS:
        if isinstance(error, driver_class):
            typed = candidate
            break
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    msg = f"cannot {action} the projection file {path!r}: {first}"
    return typed(msg, path=path)
