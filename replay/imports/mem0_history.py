"""Read mem0's SQLite history database: every ADD, UPDATE and DELETE of every memory.

mem0's open-source ``Memory`` (the ``mem0ai`` package, ``mem0/memory/storage.py``,
``SQLiteManager``) keeps a table ``history`` beside its vector store, one row per change::

    id TEXT PRIMARY KEY, memory_id TEXT, old_memory TEXT, new_memory TEXT, event TEXT,
    created_at DATETIME, updated_at DATETIME, is_deleted INTEGER, actor_id TEXT, role TEXT

``event`` is ``ADD`` (``new_memory`` the text), ``UPDATE`` (``old_memory`` -> ``new_memory``)
or ``DELETE`` (``old_memory`` the text deleted). ``created_at`` is the memory's creation time
on every row of it; ``updated_at`` is the time of an UPDATE or DELETE (mem0's
``_update_memory`` / ``_delete_memory``), so a row's own time is ``created_at`` for an ADD
and ``updated_at`` (else ``created_at``) for the others. Times are ISO 8601 text; one
without a zone is read as UTC.

:func:`read_history` opens the file read-only (never creates or migrates it) and yields the
rows in the order mem0 wrote them (SQLite's ``rowid``: insertion order, which keeps an ADD
before the UPDATE of the same memory even when a host supplied an older ``created_at``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from memory_ledger.replay.imports.errors import (
    Mem0HistoryMissingError,
    Mem0HistorySchemaError,
    Mem0HistoryUnreadableError,
)

__all__ = ["REQUIRED_COLUMNS", "HistoryRow", "count_history", "read_history", "row_time"]

REQUIRED_COLUMNS = (
    "id",
    "memory_id",
    "old_memory",
    "new_memory",
    "event",
    "created_at",
    "updated_at",
)
"""The columns of mem0's ``history`` table the import reads (``is_deleted``, ``actor_id``
and ``role`` are mem0's too and optional here)."""


class HistoryRow(msgspec.Struct, frozen=True, kw_only=True):
    """One row of mem0's history: ``row_id`` (mem0's ``id``), the mem0 ``memory_id``, the
    ``event`` (upper case as stored), the texts before and after, and both times (aware,
    None when absent or unparseable), and ``bad_time``: the first of ``created_at`` and
    ``updated_at`` that holds something that is not a time (None: both are times or
    absent), which refuses the row (``bad_timestamp``)."""

    row_id: str
    memory_id: str
    event: str
    old_memory: str | None
    new_memory: str | None
    created_at: datetime | None
    updated_at: datetime | None
    bad_time: str | None = None


def row_time(row: HistoryRow) -> datetime | None:
    """When the change happened: ``created_at`` for an ADD, else ``updated_at`` (else
    ``created_at``)."""
    if row.event == "ADD":
        return row.created_at or row.updated_at
    return row.updated_at or row.created_at


def _parse_time(value: object) -> datetime | None:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str) and value.strip():
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    parsed = parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    try:
        parsed.astimezone(UTC)
    except OverflowError:  # valid text whose UTC time is past datetime's years: not a time
        return None
    return parsed


def _is_bad_time(value: object) -> bool:
    """Whether ``value`` is present (not NULL, not blank) but not a time."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return False
    return _parse_time(value) is None


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return value if isinstance(value, str) else None if value is None else str(value)


@contextlib.contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    """``path`` opened read-only (``mode=ro``: never created, never migrated)."""
    if not path.is_file():
        msg = f"no mem0 history database at {str(path)!r}"
        raise Mem0HistoryMissingError(msg, path=str(path))
    try:
        uri = f"{path.absolute().as_uri()}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT)
    except sqlite3.Error as e:
        msg = f"{str(path)!r} cannot be opened as a SQLite database ({type(e).__name__})"
        raise Mem0HistoryUnreadableError(msg, path=str(path)) from None
    try:
        yield conn
    finally:
        conn.close()


_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")
BUSY_TIMEOUT = 5.0
"""Seconds SQLite waits for another process's lock on the history database (its default)."""


def _unreadable(error: sqlite3.DatabaseError, path: Path, message: str) -> Exception:
    """The typed error of a SQLite error met reading ``path``: ``message`` (damaged, not a
    database), or, when another process holds the database locked (mem0 writing; SQLite
    waited its 5 s), ``mem0_history_locked`` saying so: retry, nothing is damaged."""
    if str(getattr(error, "sqlite_errorname", "")).startswith(_BUSY):
        msg = (
            f"{str(path)!r} is locked by another process (mem0 writing to it?); nothing was "
            "read past this point: retry once it is done (a rerun resumes)"
        )
        return Mem0HistoryUnreadableError(msg, path=str(path), reason_code="mem0_history_locked")
    return Mem0HistoryUnreadableError(message, path=str(path))


def _check_schema(conn: sqlite3.Connection, path: Path) -> None:
    try:
        columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(history)")}
    except sqlite3.DatabaseError as e:
        msg = f"{str(path)!r} is not a readable SQLite database ({type(e).__name__})"
        raise _unreadable(e, path, msg) from None
    if not columns:
        msg = (
            f"{str(path)!r} has no table 'history'; a mem0 history database has one with "
            f"the columns {', '.join(REQUIRED_COLUMNS)}"
        )
        raise Mem0HistorySchemaError(msg, path=str(path))
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        msg = (
            f"the table 'history' of {str(path)!r} is not mem0's: expected the columns "
            f"{', '.join(REQUIRED_COLUMNS)}; missing {', '.join(missing)}"
        )
        raise Mem0HistorySchemaError(msg, path=str(path))


_SELECT = (
    "SELECT id, memory_id, event, old_memory, new_memory, created_at, updated_at "
    "FROM history ORDER BY rowid"
)


def count_history(path: str | Path) -> int:
    """How many rows the history table holds (for progress).

    :raises Mem0HistoryMissingError: no file at ``path``.
    :raises Mem0HistoryUnreadableError: not a SQLite database, or damaged.
    :raises Mem0HistorySchemaError: no ``history`` table of mem0's columns.
    """
    file = Path(path)
    with _connect(file) as conn:
        _check_schema(conn, file)
        try:
            return int(conn.execute("SELECT count(*) FROM history").fetchone()[0])
        except sqlite3.DatabaseError as e:
            msg = f"{str(file)!r} is damaged ({type(e).__name__})"
            raise _unreadable(e, file, msg) from None


def read_history(path: str | Path) -> Iterator[HistoryRow]:
    """The rows of mem0's history database ``path``, in the order mem0 wrote them.

    Rows whose ``id`` or ``memory_id`` is empty are skipped (mem0 never writes one).

    :raises Mem0HistoryMissingError: no file at ``path``.
    :raises Mem0HistoryUnreadableError: not a SQLite database, or damaged (also when the
        damage is met mid-way: the rows before it were yielded).
    :raises Mem0HistorySchemaError: no ``history`` table of mem0's columns.
    """
    file = Path(path)
    with _connect(file) as conn:
        _check_schema(conn, file)
        try:
            cursor = conn.execute(_SELECT)
            while batch := cursor.fetchmany(1000):
                for rid, mid, event, old, new, created, updated in batch:
                    row_id, memory = _text(rid), _text(mid)
                    if not row_id or not memory:
                        continue
                    bad = [
                        name
                        for name, value in (("created_at", created), ("updated_at", updated))
                        if _is_bad_time(value)
                    ]
                    yield HistoryRow(
                        row_id=row_id,
                        memory_id=memory,
                        event=(_text(event) or "").strip().upper(),
                        old_memory=_text(old),
                        new_memory=_text(new),
                        created_at=_parse_time(created),
                        updated_at=_parse_time(updated),
                        bad_time=bad[0] if bad else None,
                    )
        except sqlite3.DatabaseError as e:
            msg = f"{str(file)!r} is damaged ({type(e).__name__})"
            raise _unreadable(e, file, msg) from None
