"""The projection file a process owns: a DuckDB database in a locked slot of the store.

DuckDB allows one writing process per file and refuses even read-only opens while another
process writes. So every engine process claims a free slot under ``<store>/projections/``
(``slot-N.duckdb`` guarded by an exclusive ``flock`` on ``slot-N.lock``) and catches that
file up from the shared LMDB ledger. A second process (another host worker, or the CLI beside
a running host) never fails on the first one's lock: it takes the next slot, whose file is
kept for the next process that needs it, so its catch-up is incremental too.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from pathlib import Path
from typing import IO

import duckdb

from memory_ledger.projections.tables import create_tables, drop_tables, schema_sql

__all__ = [
    "MAX_SLOTS",
    "ProjectionDamagedError",
    "ProjectionStore",
    "ProjectionUnavailableError",
    "damage_marker",
    "is_damage",
]

MAX_SLOTS = 64

_CREATE_TRACKING = (
    "CREATE TABLE IF NOT EXISTS projection_tracking ("
    "projection VARCHAR PRIMARY KEY, position BIGINT NOT NULL)"
)
_CREATE_META = "CREATE TABLE IF NOT EXISTS projection_meta (name VARCHAR PRIMARY KEY, value BIGINT)"
_SCHEMA_DIGEST = int.from_bytes(
    hashlib.sha256(schema_sql().encode()).digest()[:8], "big", signed=True
)
"""The tables' and views' DDL as a number, kept in ``projection_meta`` (name ``schema``): an
open whose file already has this schema skips re-running the DDL (no catalog write)."""


class ProjectionUnavailableError(OSError):
    """No projection file can be opened (every slot locked, or the folder is unusable)."""


class ProjectionDamagedError(ProjectionUnavailableError):
    """The projection file turned out damaged while in use (a short read, a bad checksum).

    It has been marked: the next open of the store sets it aside and rebuilds the read
    models from the ledger, which is untouched. The message names the file.
    """


def _quarantine(path: Path) -> list[str]:
    """Rename a damaged DuckDB file (and its WAL) aside; return the new names."""
    moved = []
    for candidate in (path, path.with_name(path.name + ".wal")):
        if candidate.exists():
            target = candidate.with_name(f"{candidate.name}.damaged-{os.getpid()}")
            os.replace(candidate, target)
            moved.append(str(target))
    return moved


def damage_marker(path: Path) -> Path:
    """The file that marks projection file ``path`` damaged (set aside at the next open)."""
    return path.with_name(path.name + ".damaged")


def _is_lock_conflict(error: duckdb.Error) -> bool:
    """DuckDB's "Could not set lock on file ... Conflicting lock is held" (not a checksum
    error "in block at location ...", which also contains the letters "lock")."""
    text = str(error).lower()
    return "could not set lock" in text or "conflicting lock" in text


def is_damage(error: BaseException) -> bool:
    """Whether a DuckDB error says the file itself is damaged (short read, bad checksum,
    corrupt block), rather than a bad query or a lock."""
    if not isinstance(error, duckdb.Error):
        return False
    text = str(error).lower()
    return isinstance(error, duckdb.IOException) or any(
        word in text for word in ("corrupt", "checksum", "could not read enough bytes")
    )


class ProjectionStore:
    """One DuckDB file of read models with its tracking position and projection version.

    :param path: DuckDB file (created if absent) or ``":memory:"``.
    :param version: the code's projection version; a file built by another version has its
        read models dropped and its position reset, so catch-up rebuilds them.
    :param lock: an open lock file this store holds (released on :meth:`close`).
    """

    name = "read_models"

    def __init__(self, path: str, *, version: int, lock: IO[bytes] | None = None) -> None:
        self.path = path
        self.version = version
        self._lock = lock
        self.lock = threading.RLock()
        self.quarantined: list[str] = []
        """Damaged files set aside when this slot was opened (rebuilt from the ledger)."""
        """Serializes use of :attr:`conn` across threads (DuckDB refuses concurrent calls)."""
        self.conn = duckdb.connect(path)
        # Checkpoint rarely: at the default 16 MB of WAL, a growing rebuild checkpoints ever
        # larger tables and slows down as it goes (measured: 42k events/s at 400k events
        # with this setting, 20k events/s at 1M without it).
        self.conn.execute("SET checkpoint_threshold = '256MB'")
        self.conn.execute(_CREATE_TRACKING)
        self.conn.execute(_CREATE_META)
        meta = dict(self.conn.execute("SELECT name, value FROM projection_meta").fetchall())
        found = meta.get("version")
        self.rebuilt_for_version = found is not None and found != version
        if found != version:
            self.conn.execute("BEGIN TRANSACTION")
            drop_tables(self.conn)
            self.conn.execute("DELETE FROM projection_tracking")
            self.conn.execute(
                "INSERT OR REPLACE INTO projection_meta VALUES ('version', ?)", [version]
            )
            self._create_schema()
            self.conn.execute("COMMIT")
        elif meta.get("schema") != _SCHEMA_DIGEST:
            self.conn.execute("BEGIN TRANSACTION")
            self._create_schema()
            self.conn.execute("COMMIT")

    def _create_schema(self) -> None:
        """Create the read models (idempotent) and record the schema they have."""
        create_tables(self.conn)
        self.conn.execute(
            "INSERT OR REPLACE INTO projection_meta VALUES ('schema', ?)", [_SCHEMA_DIGEST]
        )

    @classmethod
    def open_slot(cls, directory: str | os.PathLike[str], *, version: int) -> ProjectionStore:
        """Claim the first free slot under ``directory`` and open its DuckDB file.

        :raises ProjectionUnavailableError: the folder cannot be created or all
            :data:`MAX_SLOTS` slots are held by live processes.
        """
        folder = Path(directory)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            msg = f"cannot create projection folder {str(folder)!r}: {e.strerror or e}"
            raise ProjectionUnavailableError(msg) from e
        for slot in range(MAX_SLOTS):
            try:
                lock = open(folder / f"slot-{slot}.lock", "ab")  # noqa: SIM115 (held while open)
            except OSError as e:
                msg = f"cannot use projection folder {str(folder)!r}: {e.strerror or e}"
                raise ProjectionUnavailableError(msg) from e
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.close()
                continue
            path = folder / f"slot-{slot}.duckdb"
            marker = damage_marker(path)
            if marker.exists():  # found damaged while in use: set it aside now, rebuild
                try:
                    quarantined = _quarantine(path)
                    marker.unlink()
                except OSError as e:
                    lock.close()
                    msg = f"cannot set aside damaged projection file {str(path)!r}: {e}"
                    raise ProjectionUnavailableError(msg) from e
                store = cls(str(path), version=version, lock=lock)
                store.quarantined = quarantined
                return store
            try:
                return cls(str(path), version=version, lock=lock)
            except duckdb.Error as e:
                if _is_lock_conflict(e):  # a process outside the engine has the file open
                    lock.close()
                    continue
                # We hold the slot's lock, so nobody else uses this file: it is damaged.
                # Read models are disposable: set it aside and rebuild from the ledger.
                try:
                    quarantined = _quarantine(path)
                    store = cls(str(path), version=version, lock=lock)
                except (OSError, duckdb.Error) as again:
                    lock.close()
                    msg = f"cannot open projection file {str(path)!r}: {again}"
                    raise ProjectionUnavailableError(msg) from e
                store.quarantined = quarantined
                return store
        msg = f"all {MAX_SLOTS} projection slots under {str(folder)!r} are in use"
        raise ProjectionUnavailableError(msg)

    def position(self) -> int:
        """The last ledger position applied to the read models (0 when none)."""
        with self.lock:
            rows = self.conn.execute(
                "SELECT position FROM projection_tracking WHERE projection = ?", [self.name]
            ).fetchall()
        return int(rows[0][0]) if rows else 0

    def set_position(self, position: int) -> None:
        """Record ``position`` (call inside the batch's transaction)."""
        self.conn.execute(
            "INSERT INTO projection_tracking VALUES (?, ?) "
            "ON CONFLICT (projection) DO UPDATE SET position = excluded.position",
            [self.name, position],
        )

    def mark_damaged(self, error: BaseException) -> ProjectionDamagedError:
        """Mark this file damaged (it is set aside at the next open) and return the error
        to raise, naming the file and the cause."""
        if self.path != ":memory:":
            try:
                damage_marker(Path(self.path)).write_text(f"{type(error).__name__}: {error}\n")
            except OSError:
                pass
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        msg = (
            f"projection file {self.path!r} is damaged ({first}); it will be set aside and "
            "rebuilt from the ledger when the store is next opened"
        )
        return ProjectionDamagedError(msg)

    def close(self) -> None:
        """Close the DuckDB file and release the slot."""
        try:
            self.conn.close()
        finally:
            if self._lock is not None:
                self._lock.close()
                self._lock = None
