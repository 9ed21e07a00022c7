"""The projection file a process owns: a DuckDB database in a locked slot of the store.

DuckDB allows one writing process per file and refuses even read-only opens while another
process writes. So every engine process claims a free slot under ``<store>/projections/``
(``slot-N.duckdb`` guarded by an exclusive ``flock`` on ``slot-N.lock``) and catches that
file up from the shared LMDB ledger. A second process (another host worker, or the CLI beside
a running host) never fails on the first one's lock: it takes the next slot, whose file is
kept for the next process that needs it, so its catch-up is incremental too.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import duckdb

from memory_ledger.ledger.errors import DiskFullError
from memory_ledger.ledger.faults import fault
from memory_ledger.projections.cursor_gate import CursorGate
from memory_ledger.projections.derived import (
    NO_ERASURE,
    ErasedNamespaces,
    slot_files,
    slot_stale,
    stamp_slot,
)
from memory_ledger.projections.errors import (
    ProjectionDamagedError,
    ProjectionError,
    ProjectionUnavailableError,
    is_damage,
    translate_duckdb_error,
)
from memory_ledger.projections.tables import create_tables, drop_tables, schema_sql

__all__ = [
    "MAX_SLOTS",
    "ProjectionDamagedError",
    "ProjectionStore",
    "ProjectionUnavailableError",
    "damage_marker",
    "remove_idle_slots",
    "remove_stale_slots",
    "remove_set_aside",
    "rewrite_file",
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


def rewrite_file(path: Path) -> None:
    """Replace the DuckDB file ``path`` (closed, its slot held) by a copy holding only its
    live rows (DuckDB ``COPY FROM DATABASE`` into a new file, fsynced, renamed over it): the
    blocks of deleted rows, which DuckDB keeps until reused, are gone with the old file.

    :raises ProjectionError: DuckDB cannot read or write the files (the old file is kept).
    """
    fresh = path.with_name(path.name + ".rewrite")
    for leftover in (fresh, fresh.with_name(fresh.name + ".wal")):
        leftover.unlink(missing_ok=True)
    try:
        conn = duckdb.connect()
        try:
            conn.execute("ATTACH ? AS src (READ_ONLY)", [str(path)])
            conn.execute("ATTACH ? AS dst", [str(fresh)])
            conn.execute("COPY FROM DATABASE src TO dst")
            conn.execute("DETACH dst")
        finally:
            conn.close()
    except duckdb.Error as e:
        fresh.unlink(missing_ok=True)
        raise translate_duckdb_error(e, str(path), "rewrite") from e
    with open(fresh, "rb+") as f:
        os.fsync(f.fileno())
    fault("projections.rewrite")
    os.replace(fresh, path)
    path.with_name(path.name + ".wal").unlink(missing_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_set_aside(directory: str | os.PathLike[str]) -> list[str]:
    """Delete every damaged projection file that was set aside under ``directory``
    (``slot-N.duckdb.damaged-PID`` and its WAL's ``slot-N.duckdb.wal.damaged-PID``): no
    process uses one, and it may hold rows of any namespace in clear. Returns their names.

    :raises OSError: a file cannot be deleted (its error, naming it).
    """
    removed = []
    for path in sorted(Path(directory).glob("slot-*.duckdb*.damaged-*")):
        path.unlink(missing_ok=True)
        removed.append(str(path))
    return removed


def _probed_slots(folder: Path, keep: str | None) -> Iterator[tuple[Path, bool]]:
    """Each slot's DuckDB path under ``folder`` that has a lock file (but ``keep``'s), with
    whether it is idle: no process holds it. An idle slot's lock is held by this probe
    while the caller works on it (until the next item is asked for)."""
    for slot in range(MAX_SLOTS):
        path = folder / f"slot-{slot}.duckdb"
        if keep is not None and os.path.abspath(path) == os.path.abspath(keep):
            continue
        lock_path = folder / f"slot-{slot}.lock"
        if not lock_path.exists():
            continue
        with open(lock_path, "ab") as lock:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield path, False
                continue
            yield path, True


def remove_idle_slots(directory: str | os.PathLike[str], keep: str | None = None) -> int:
    """Delete the files of every projection slot under ``directory`` that no process holds
    (each is rebuilt from the ledger when next claimed), except the file ``keep``, and every
    damaged file set aside there (:func:`remove_set_aside`); return how many slots are held
    by running processes (left alone: they drop erased rows at their next catch-up and
    rewrite their file when they close)."""
    folder = Path(directory)
    remove_set_aside(folder)
    busy = 0
    for path, idle in _probed_slots(folder, keep):
        if not idle:
            # Its holder scrubs its files when it closes (ProjectionStore.close); if it
            # dies first, its stamp is stale: whoever claims or sweeps it deletes them.
            busy += 1
            continue
        for name in slot_files(path):  # the DuckDB file, its WAL, recall index
            name.unlink(missing_ok=True)
    return busy


def held_slots(directory: str | os.PathLike[str], keep: str | None = None) -> int:
    """How many projection slots under ``directory`` (but the one of the file ``keep``) are
    held by running processes now: each locked by its holder (a debugger, an MCP server,
    another engine), which alone rewrites its files. Deletes nothing."""
    return sum(not idle for _, idle in _probed_slots(Path(directory), keep))


def remove_stale_slots(directory: str | os.PathLike[str], erasures: int) -> int:
    """Delete the files of every slot under ``directory`` that no process holds and whose
    files may hold a namespace erased since they were written (the store has ``erasures``
    erased namespaces: :func:`~memory_ledger.projections.derived.slot_stale`); return how
    many slots were deleted."""
    if erasures <= 0:
        return 0
    folder = Path(directory)
    removed = 0
    for lock_path in sorted(folder.glob("slot-*.lock")):
        path = lock_path.with_suffix(".duckdb")
        if not slot_stale(path, erasures):
            continue
        try:
            lock = open(lock_path, "ab")  # noqa: SIM115 (closed below)
        except OSError:
            continue
        with lock:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # held: its holder scrubs at close
            with contextlib.suppress(OSError):
                for name in slot_files(path):
                    name.unlink(missing_ok=True)
                removed += 1
    return removed


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


def _is_lock_conflict(error: BaseException | None) -> bool:
    """DuckDB's "Could not set lock on file ... Conflicting lock is held" (not a checksum
    error "in block at location ...", which also contains the letters "lock")."""
    if not isinstance(error, duckdb.Error):
        return False
    text = str(error).lower()
    return "could not set lock" in text or "conflicting lock" in text


class ProjectionStore:
    """One DuckDB file of read models with its tracking position and projection version.

    :param path: DuckDB file (created if absent) or ``":memory:"``.
    :param version: the code's projection version; a file built by another version has its
        read models dropped and its position reset, so catch-up rebuilds them.
    :param lock: an open lock file this store holds (released on :meth:`close`).
    :raises ProjectionError: DuckDB cannot open or set up the file (translated; the DuckDB
        error is the ``__cause__``), naming it.
    """

    name = "read_models"

    def __init__(
        self,
        path: str,
        *,
        version: int,
        lock: IO[bytes] | None = None,
        erased: ErasedNamespaces = NO_ERASURE,
    ) -> None:
        self.path = path
        self.erased = erased
        """The erased namespaces (:mod:`memory_ledger.projections.derived`): their rows are
        scrubbed from the file when it is opened and when it is closed."""
        self._scrubbed_for: frozenset[object] = frozenset()
        self.version = version
        self._lock = lock
        self.lock = threading.RLock()
        """Serializes use of :attr:`conn` across threads (DuckDB refuses concurrent calls)."""
        self.quarantined: list[str] = []
        """Damaged files set aside when this slot was opened (rebuilt from the ledger)."""
        self.temporary_folder: str | None = None
        """A temporary folder holding this file, removed on :meth:`close` (None: none)."""
        self.scrub_on_close = False
        """Rewrite the file when closing (:func:`rewrite_file`): set after an erasure, so
        the deleted rows' old blocks do not outlive this process's use of the file."""
        self.cursors = CursorGate()
        """Queries on cursors of :attr:`conn` (other threads' readers) against closing or
        checkpointing it (:mod:`memory_ledger.projections.cursor_gate`)."""
        self.on_reconnect: list[Callable[[duckdb.DuckDBPyConnection], None]] = []
        """Called with the new connection when :meth:`rewrite_erased` reopened the file (the
        holders of :attr:`conn` take it)."""
        try:
            self.conn = duckdb.connect(path)
        except duckdb.Error as e:
            raise translate_duckdb_error(e, path, "open") from e
        try:
            self._set_up(version)
            ids = erased.ids()
            if ids and not slot_stale(Path(path), len(ids)):
                self._scrubbed_for = ids  # closed (and stamped) knowing every erasure
            self.scrub_erased()  # a file that holds an erased namespace is never served
        except duckdb.Error as e:
            self.conn.close()
            raise translate_duckdb_error(e, path, "open") from e

    def scrub_erased(self) -> int:
        """Delete the rows of every namespace erased since the last scrub of this file (an
        erasure by another process whose record catch-up has not reached yet); a file they
        left is rewritten when closed. Returns how many namespaced rows went.

        :raises duckdb.Error: DuckDB cannot read or write the file.
        """
        ids = self.erased.ids()
        if not ids or ids == self._scrubbed_for:
            return 0
        with self.lock:
            deleted = self.erased.scrub(self.conn)
        if deleted:
            self.scrub_on_close = True
        self._scrubbed_for = ids
        return deleted

    def _set_up(self, version: int) -> None:
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
    def open_slot(
        cls,
        directory: str | os.PathLike[str],
        *,
        version: int,
        erased: ErasedNamespaces = NO_ERASURE,
    ) -> ProjectionStore:
        """Claim the first free slot under ``directory`` and open its DuckDB file.

        A stale slot (files that may hold a namespace erased since they were written, its
        holder killed first: :func:`~memory_ledger.projections.derived.slot_stale`) has its
        files deleted first: rebuilt from the ledger.

        :raises ProjectionUnavailableError: the folder cannot be created or all
            :data:`MAX_SLOTS` slots are held by live processes.
        """
        folder = Path(directory)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            msg = f"cannot create projection folder {str(folder)!r}: {e.strerror or e}"
            raise ProjectionUnavailableError(msg, path=str(folder)) from e
        for slot in range(MAX_SLOTS):
            try:
                lock = open(folder / f"slot-{slot}.lock", "ab")  # noqa: SIM115 (held while open)
            except OSError as e:
                msg = f"cannot use projection folder {str(folder)!r}: {e.strerror or e}"
                raise ProjectionUnavailableError(msg, path=str(folder)) from e
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.close()
                continue
            path = folder / f"slot-{slot}.duckdb"
            if slot_stale(path, len(erased.ids())):
                try:
                    for name in slot_files(path):
                        name.unlink(missing_ok=True)
                except OSError as e:
                    lock.close()
                    msg = f"cannot delete projection file {str(path)!r} after an erasure: {e}"
                    raise ProjectionUnavailableError(msg, path=str(path)) from e
            marker = damage_marker(path)
            if marker.exists():  # found damaged while in use: set it aside now, rebuild
                try:
                    quarantined = _quarantine(path)
                    marker.unlink()
                except OSError as e:
                    lock.close()
                    msg = f"cannot set aside damaged projection file {str(path)!r}: {e}"
                    raise ProjectionUnavailableError(msg, path=str(path)) from e
                store = cls(str(path), version=version, lock=lock, erased=erased)
                store.quarantined = quarantined
                return store
            try:
                return cls(str(path), version=version, lock=lock, erased=erased)
            except ProjectionError as e:
                if _is_lock_conflict(e.__cause__):  # a process outside the engine has it open
                    lock.close()
                    continue
                if isinstance(e, DiskFullError):  # the file is sound: never set it aside
                    lock.close()
                    raise
                # We hold the slot's lock, so nobody else uses this file: it is damaged.
                # Read models are disposable: set it aside and rebuild from the ledger.
                try:
                    quarantined = _quarantine(path)
                    store = cls(str(path), version=version, lock=lock, erased=erased)
                except (OSError, ProjectionError) as again:
                    lock.close()
                    msg = f"cannot open projection file {str(path)!r}: {again}"
                    raise ProjectionUnavailableError(msg, path=str(path)) from e
                store.quarantined = quarantined
                return store
        msg = f"all {MAX_SLOTS} projection slots under {str(folder)!r} are in use"
        raise ProjectionUnavailableError(msg, path=str(folder), reason_code="all_slots_in_use")

    @classmethod
    def open_temporary(
        cls, *, version: int, erased: ErasedNamespaces = NO_ERASURE
    ) -> ProjectionStore:
        """Open a fresh projection file in a new temporary folder (removed on :meth:`close`).

        For audits of a store whose projection folder this process cannot write: the read
        models are rebuilt from the ledger into the temporary file.

        :raises ProjectionUnavailableError: no temporary folder can be created.
        """
        try:
            folder = tempfile.mkdtemp(prefix="memory-ledger-projections-")
        except OSError as e:
            msg = f"cannot create a temporary projection folder: {e.strerror or e}"
            raise ProjectionUnavailableError(msg, path=tempfile.gettempdir()) from e
        try:
            store = cls(os.path.join(folder, "slot-0.duckdb"), version=version, erased=erased)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        store.temporary_folder = folder
        return store

    @contextlib.contextmanager
    def guard(self, action: str = "use") -> Iterator[None]:
        """Translate DuckDB errors raised inside the block (see
        :mod:`memory_ledger.projections.errors`).

        Damage (a short read, a bad checksum) marks this file (it is set aside and rebuilt
        from the ledger at the next open) and raises :class:`ProjectionDamagedError`; any
        other DuckDB error raises the :class:`ProjectionError` subclass of its DB-API class.
        Errors that are not DuckDB's pass unchanged.
        """
        try:
            yield
        except duckdb.Error as e:
            typed = translate_duckdb_error(e, self.path, action)
            if is_damage(e) and not isinstance(typed, DiskFullError):
                raise self.mark_damaged(e) from e
            raise typed from e

    def position(self) -> int:
        """The last ledger position applied to the read models (0 when none)."""
        with self.lock, self.guard("read"):
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

    def rewrite_erased(self) -> bool:
        """Rewrite the file now when an erasure deleted rows from it (:attr:`scrub_on_close`),
        instead of waiting for :meth:`close`: DuckDB keeps a deleted row's bytes in its old
        blocks until they are reused, so a ``DELETE`` alone leaves an erased namespace's
        statements in the file (and a ``kill -9`` before the close left them there until the
        next open). The connection is closed, the file copied to a fresh one
        (:func:`rewrite_file`) and reopened; each of :attr:`on_reconnect` is then given the
        new connection. Returns whether it rewrote. Call with no transaction open.

        :raises ProjectionError: DuckDB cannot rewrite or reopen the file (a file that could
            not be rewritten stays marked, rewritten again at the next call or at close).
        """
        durable = self.path != ":memory:" and self.temporary_folder is None
        if not (self.scrub_on_close and durable):
            return False
        with self.lock, self.cursors.exclusive(reconnects=True):
            self.conn.close()
            try:
                rewrite_file(Path(self.path))
                self.scrub_on_close = False
            finally:
                try:
                    self.conn = duckdb.connect(self.path)
                    self.conn.execute("SET checkpoint_threshold = '256MB'")
                except duckdb.Error as e:
                    raise translate_duckdb_error(e, self.path, "open") from e
                for callback in self.on_reconnect:
                    callback(self.conn)
        return True

    def checkpoint(self) -> None:
        """Write the file's changes into its blocks now (DuckDB ``CHECKPOINT``): after an
        erasure, so deleted rows leave the write-ahead log at once. Waits for the queries
        running on cursors of the file (:attr:`cursors`)."""
        with self.lock, self.cursors.exclusive():
            self.conn.execute("CHECKPOINT")

    def mark_damaged(self, error: BaseException) -> ProjectionDamagedError:
        """Mark this file damaged (it is set aside at the next open) and return the error
        to raise, naming the file and the cause."""
        if self.path != ":memory:" and self.temporary_folder is None:
            try:
                damage_marker(Path(self.path)).write_text(f"{type(error).__name__}: {error}\n")
            except OSError:
                pass
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        msg = (
            f"projection file {self.path!r} is damaged ({first}); it will be set aside and "
            "rebuilt from the ledger when the store is next opened"
        )
        return ProjectionDamagedError(msg, path=self.path)

    def close(self, before: Callable[[], None] | None = None) -> None:
        """Close the DuckDB file and release the slot (a temporary folder is removed).

        ``before`` runs first, with the slot held (the engine writes the slot's recall
        index there). Then the rows of every namespace erased meanwhile (by any process)
        are scrubbed; a file that :attr:`scrub_on_close` marks is rewritten, while the slot
        is held (so deleted rows' old blocks go too), and the slot is stamped with the
        erasures it knows when no erasure happened since ``before`` began (else its stamp
        stays stale, and its files are deleted). Then stale slots no process holds are
        deleted (:func:`remove_stale_slots`). A file that cannot be scrubbed is marked damaged:
        set aside at the next open, and deleted there once the store has erased
        (``check_erasures``).
        """
        scrubbed = True
        known = self.erased.ids()  # every file of the slot is written knowing these at least
        try:
            if before is not None:
                before()
            try:
                self.scrub_erased()
            except duckdb.Error as e:
                scrubbed = False
                self.mark_damaged(e)
            self.conn.close()
            durable = self.path != ":memory:" and self.temporary_folder is None
            if self.scrub_on_close and durable and os.path.isfile(self.path):
                rewrite_file(Path(self.path))
            if durable and scrubbed and known and self.erased.ids() == self._scrubbed_for == known:
                stamp_slot(Path(self.path), len(known))
        finally:
            if self._lock is not None:
                self._lock.close()
                self._lock = None
                with contextlib.suppress(OSError):
                    remove_stale_slots(Path(self.path).parent, len(self.erased.ids()))
            if self.temporary_folder is not None:
                shutil.rmtree(self.temporary_folder, ignore_errors=True)
                self.temporary_folder = None
