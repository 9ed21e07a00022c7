"""LMDB persistence module for the ``eventsourcing`` library.

Selected the library's way, with settings passed as ``env=`` (never set process-wide)::

    InfrastructureFactory.construct(env={
        "PERSISTENCE_MODULE": "memory_ledger.ledger.lmdb",
        "LMDB_PATH": "/path/to/store/ledger",   # a directory, created if absent
        "LMDB_MAP_SIZE": str(256 * 1024**2),    # optional, bytes; grows when full
        "LMDB_SYNC": "y",                       # optional, y/n; fsync on commit (default y)
    })

It mirrors ``eventsourcing/sqlite.py``: a datastore (:class:`LMDBDatastore`), the aggregate,
application, tracking and process recorders, and a factory (:class:`LMDBFactory`).

Layout of one LMDB environment (named databases):

- ``meta``: ``format_version`` (ASCII integer, see :data:`FORMAT_VERSION`).
- ``log``: notification id (8-byte big-endian, gapless from 1, commit order) -> record.
  A record is ``sha256(prev_hash || body)`` (32 bytes) followed by ``body``, the msgpack array
  ``[originator_id, originator_version, topic, state]`` (``originator_id`` as 16 raw bytes for
  UUIDs, a string for text ids). ``prev_hash`` of the first record is 32 zero bytes. The hash
  is computed inside the write transaction over the bytes as stored.
- ``index``: stream key (originator id + sign-flipped 8-byte version) -> notification id.
  Inserting an existing key fails, which is how a duplicate (originator id, version) raises
  :class:`~eventsourcing.persistence.IntegrityError` and aborts the whole batch.
- ``tracking``: application name (UTF-8) -> highest tracked notification id.
- ``agg:<purpose>``: stream key -> body, for plain aggregate recorders (e.g. snapshots).
- ``tags`` and ``event_tags``: the tag index (:mod:`memory_ledger.ledger.tag_index`): which
  records carry which tags, written in the same transaction as the records.

Tags and append conditions (the ``eventsourcing`` library's dynamic consistency boundary,
``eventsourcing/dcb/api.py``): :meth:`LMDBApplicationRecorder.insert_events` accepts
``tags=`` (one list of tags per stored event) and ``condition=`` (a ``DCBAppendCondition``)
and refuses the whole batch, before writing anything, when a record matching the condition's
query was appended after the condition's position. :meth:`LMDBApplicationRecorder.select_tagged`
reads the records matching a query with their positions. The library's DCB recorder
interface over the same log is :class:`memory_ledger.ledger.lmdb_dcb.LMDBDCBRecorder`.

Format versions: 1 has no tag index; 2 (this version) indexes every record's tags. A store of
version 1 opens, and :meth:`LMDBApplicationRecorder.build_tag_index` upgrades it (indexing
the tags a caller derives from each record, in one write transaction); conditional appends
are refused until then. A version-1 reader refuses a version-2 store, so no older process can
append records without their tags.

LMDB facts this module relies on (LMDB docs, ``mdb_env_open``/``mdb_env_set_mapsize``):
one write transaction at a time across all processes (so ids assigned inside it are gapless
and in commit order); an environment must be opened once per process (hence the process-wide
registry); the map size may only change while this process has no transaction open (hence the
transaction gate); after another process grows the map, ``mdb_txn_begin`` fails with
``MDB_MAP_RESIZED`` until the new size is adopted.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import math
import os
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, NamedTuple, TypeVar, cast, overload
from uuid import UUID

import lmdb
import msgspec
from eventsourcing.dcb.api import DCBAppendCondition, DCBQuery
from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    InfrastructureFactory,
    ListenNotifySubscription,
    Notification,
    ProcessRecorder,
    Recorder,
    StoredEvent,
    Subscription,
    Tracking,
    TrackingRecorder,
)
from eventsourcing.utils import Environment, EnvType, resolve_topic, strtobool

from memory_ledger.ledger.errors import (
    LedgerDamagedError,
    LedgerDataError,
    LedgerFormatError,
    LedgerIntegrityError,
    LedgerOperationalError,
    LedgerReadOnlyError,
    LedgerRecordError,
    LedgerSettingError,
    MemoryLedgerError,
    at_position,
)
from memory_ledger.ledger.faults import FAULTS, fault
from memory_ledger.ledger.group_commit import Combine, GroupCommit, WriteRequest
from memory_ledger.ledger.group_insert import accept_in_order
from memory_ledger.ledger.lmdb_errors import translate_lmdb_error
from memory_ledger.ledger.lmdb_meta import check_data_length
from memory_ledger.ledger.records import (
    GENESIS_HASH,
    HASH_SIZE,
    LedgerRecord,
    chain_hash,
    decode_body,
    decode_entry,
    encode_body,
)
from memory_ledger.ledger.sealed_header import sealed_key_ids
from memory_ledger.ledger.store_identity import (
    ENGINE_SAMPLE,
    ENGINE_STORE,
    FORMAT_KEY,
    STORE_KIND_KEY,
    check_data_file,
    check_engine_ledger,
    identity_to_record,
)
from memory_ledger.ledger.tag_index import AppendConditionFailedError, TagIndex

__all__ = [
    "AppendConditionFailedError",
    "FORMAT_VERSION",
    "encode_body",
    "pack_position",
    "pack_version",
    "GENESIS_HASH",
    "HASH_SIZE",
    "LMDBAggregateRecorder",
    "LMDBApplicationRecorder",
    "LMDBDatastore",
    "LMDBFactory",
    "LMDBProcessRecorder",
    "LMDBSubscription",
    "LMDBTrackingRecorder",
    "LedgerFormatError",
    "LedgerRecord",
    "Refused",
    "TAG_INDEX_FORMAT",
    "TaggedEvent",
    "TaggedSelection",
    "Factory",
    "decode_record",
]

FORMAT_VERSION = 2
"""Version of the on-disk record format written by this module (2: with the tag index)."""

TAG_INDEX_FORMAT = 2
"""The first format version whose stores index every record's tags."""

DEFAULT_MAP_SIZE = 256 * 1024 * 1024
"""Initial map size in bytes when ``LMDB_MAP_SIZE`` is not set (sparse on Linux)."""

_ID = struct.Struct(">Q")
_MAX_ID = (1 << 64) - 1
_VERSION_BIAS = 1 << 63
_MAX_KEY_ID_BYTES = 400
_UUID_KEY = b"\x01"
_RESERVE_MARGIN = 1 << 20
_RESERVE_MEASURE_EVERY = 64
_row_encoder = msgspec.msgpack.Encoder()
"""Encodes record bodies as :func:`encode_body` does (default settings)."""

T = TypeVar("T")

OriginatorIdType = Literal["uuid", "text"]


SealedKeyCheck = Callable[[set[bytes]], MemoryLedgerError | None]
"""``check(key ids)``, run inside an append's write transaction when its batch holds sealed
states: the error to refuse the batch with when one of the data keys (16-byte ids) they were
sealed with was destroyed, else None
(:meth:`memory_ledger.ledger.key_store.FileKeyStore.destroyed_key_error`)."""


class Refused(Exception):  # noqa: N818 (a control-flow signal, re-raised as ``error``)
    """Raised inside a write transaction, before anything is written, to refuse a batch.

    The transaction is committed unchanged and ``error`` (an ``IntegrityError``, or another
    ``DatabaseError`` such as a missing tag index) is raised to the caller.
    """

    def __init__(self, error: MemoryLedgerError) -> None:
        super().__init__(str(error))
        self.error = error


_body_decoder = msgspec.msgpack.Decoder()
_decode_body = decode_body


def _decode_at(packed: bytes, value: bytes | None) -> tuple[UUID | str, int, str, bytes]:
    """The body of the ``log`` entry ``value`` at the packed position ``packed``, decoded.

    :raises LedgerRecordError: the body does not decode, or the entry is missing (the stream
        index names a deleted record); it names the position.
    """
    try:
        if value is None:
            msg = "the record is missing from the log (the stream index names it)"
            raise LedgerRecordError(msg)
        return _decode_body(value[HASH_SIZE:])
    except LedgerRecordError as e:
        raise at_position(e, _ID.unpack(packed)[0]) from e


def decode_record(key: bytes, value: bytes) -> LedgerRecord:
    """Decode one ``log`` entry (``key`` = 8-byte id, ``value`` = hash + body).

    Raises :class:`~memory_ledger.ledger.errors.LedgerRecordError` (a
    ``msgspec.DecodeError``, a ``ValueError``) when the body is not a valid record.
    """
    return decode_entry(_ID.unpack(key)[0], value)


def pack_position(position: int) -> bytes:
    """A position (notification id) as its 8-byte big-endian key in ``log``."""
    return _ID.pack(position)


def pack_version(version: int) -> bytes:
    """A stream version as the 8-byte sign-flipped suffix of its ``index`` key."""
    try:
        return _ID.pack(version + _VERSION_BIAS)
    except struct.error:
        msg = f"originator_version {version} is outside the signed 64-bit range"
        raise LedgerDataError(msg) from None


class _TransactionGate:
    """Process-local readers/writer gate: transactions share it, a map resize excludes them.

    LMDB requires that no transaction of this process is open while ``mdb_env_set_mapsize``
    runs. Waiting resizers block new transactions so they cannot starve.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._resizing = False

    def acquire_shared(self) -> None:
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._active += 1

    def release_shared(self) -> None:
        with self._cond:
            self._active -= 1
            # Only a resizer waits for the last transaction to end (it set _resizing first).
            if self._active == 0 and self._resizing:
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._resizing = True
            while self._active:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._resizing = False
                self._cond.notify_all()


_DATA_FILE = "data.mdb"


def _first_topics(cursor: Any, count: int, path: str) -> list[str]:
    """The topics of the first ``count`` records of the ``log`` database ``cursor`` reads.

    :raises LedgerRecordError: a record's body does not decode; the message names its
        position (a damaged record: ``memory-ledger verify`` names it too).
    """
    topics: list[str] = []
    for key, value in cursor:
        if len(topics) >= count:
            break
        try:
            topics.append(_topic_of_value(value))
        except LedgerRecordError as e:
            at = _ID.unpack(key)[0] if len(key) == _ID.size else bytes(key).hex()
            msg = f"ledger record {at} at {path!r} does not decode: {e}"
            raise LedgerRecordError(
                msg, path=path, position=at if isinstance(at, int) else None
            ) from e
    return topics


def _read_untouched(
    path: str, *, topics: int = 0
) -> tuple[list[bytes], dict[bytes, bytes] | None, list[str]]:
    """Read the identity of the existing LMDB environment at ``path`` without changing any
    file: opened read-only and without its lock file (so no ``lock.mdb`` is created or
    written). Returns the main database's keys, the ``meta`` entries (None without one) and
    the topics of the first ``topics`` records of ``log``.

    :raises LedgerError: LMDB refused the file (translated: ``not_lmdb`` for a non-LMDB file).
    """
    try:
        env = lmdb.open(path, subdir=True, readonly=True, lock=False, create=False, max_dbs=32)
    except lmdb.Error as e:
        raise translate_lmdb_error(e, path, "open") from e
    try:
        with env.begin(write=False) as txn:
            names = [bytes(key) for key in txn.cursor().iternext(keys=True, values=False)]
        meta: dict[bytes, bytes] | None = None
        found: list[str] = []
        if b"meta" in names:
            meta_db = env.open_db(b"meta", create=False)
            with env.begin(write=False) as txn:
                meta = {bytes(k): bytes(v) for k, v in txn.cursor(db=meta_db)}
        # The sample serves only a ledger without its store kind (an adopted one): a store
        # that holds it opens without decoding a record (a damaged one is for verify to name).
        if topics and b"log" in names and (meta or {}).get(STORE_KIND_KEY) is None:
            log_db = env.open_db(b"log", create=False)
            with env.begin(write=False) as txn:
                found = _first_topics(txn.cursor(db=log_db), topics, path)
    except lmdb.Error as e:
        raise translate_lmdb_error(e, path, "open", read_only=True) from e
    finally:
        env.close()
    return names, meta, found


def _lock_file_writable(path: str) -> bool:
    """Whether this process may write the environment's ``lock.mdb`` (or create it)."""
    lock_file = os.path.join(path, "lock.mdb")
    if os.path.exists(lock_file):
        return os.access(lock_file, os.W_OK)
    return os.access(path, os.W_OK)


class _SharedEnvironment:
    """One open LMDB environment, shared by every datastore of this process on that path.

    ``readonly``: opened with ``MDB_RDONLY`` for audits of a store this process cannot
    write; when even ``lock.mdb`` is not writable (a read-only folder or mount) the
    environment is opened without the lock file (``lock=False``): reads then see a
    consistent snapshot only while no other process writes the store.
    """

    def __init__(
        self,
        path: str,
        map_size: int,
        *,
        sync: bool,
        readonly: bool = False,
        engine_store: bool = False,
    ) -> None:
        self.path = path
        self.sync = sync
        self.readonly = readonly
        self.engine_store = engine_store
        """Whether the ledger was checked (and, writable, marked) as an engine store's."""
        self.refcount = 0
        self.gate = _TransactionGate()
        self.write_lock = threading.Lock()
        self.group_commit = GroupCommit(self._run_group, self._run_alone)
        """Gathers the writes that threads of this process make at once into one
        transaction and one sync (:mod:`memory_ledger.ledger.group_commit`)."""
        self.listeners: set[threading.Event] = set()
        self.listeners_lock = threading.Lock()
        self._dbs_lock = threading.Lock()
        self._dbs: dict[bytes, Any] = {}
        check_data_file(path)
        check_data_length(path)  # before any read maps a page past a cut-short file's end
        if os.path.isfile(os.path.join(path, _DATA_FILE)):
            # Refuse a foreign environment before LMDB opens it for real: that open writes
            # lock.mdb (creating it when absent), and a refused folder is left as it was.
            sample = ENGINE_SAMPLE if engine_store else 0
            present, meta, topics = _read_untouched(path, topics=sample)
            identity_to_record(path, present, meta, format_version=FORMAT_VERSION)
            if engine_store:
                check_engine_ledger(path, meta, topics)
        self.locked = not readonly or _lock_file_writable(path)
        self.tag_index_built = False
        """Whether the store indexes every record's tags (format >= 2), as last seen."""
        self.writer: int | None = None
        """The thread id inside this process's write transaction (None: none)."""
        self.log_tail: tuple[Any, int, bytes] | None = None
        """``(txn, last position, last hash)``: the end of the log as the write transaction
        ``txn`` left it, so the requests of one group do not each seek it (cleared when the
        transaction ends; a writer of the log other than ``insert_in_transaction`` clears
        it)."""
        self._room = 0
        """Bytes of the map believed free: measured, less what writes announced since."""
        self._writes_unmeasured = 0
        self.env = lmdb.open(
            path,
            map_size=map_size,
            subdir=True,
            max_dbs=32,
            max_readers=254,
            sync=sync,
            metasync=sync,
            lock=self.locked,
            readonly=readonly,
            create=not readonly,
        )
        try:
            # Clear reader slots left behind by processes that died holding a read
            # transaction (only a writer may; without a lock file there are none).
            self.stale_readers_cleared = 0 if readonly else self.env.reader_check()
            # Check the identity and format before creating anything, so refusing a
            # foreign or newer store leaves it untouched.
            self._check_identity()
            names: tuple[bytes, ...] = (b"meta", b"log", b"index", b"tracking")
            if not readonly:  # a read-only open finds the tag index lazily (format >= 2)
                names += (b"tags", b"event_tags")
            for name in names:
                self.db(name)
        except lmdb.Error as e:
            self.env.close()
            raise translate_lmdb_error(e, path, "open") from e
        except BaseException:
            self.env.close()
            raise

    def db(self, name: bytes) -> Any:
        """Handle of the named database ``name``; created when absent (read-only: refused).

        :raises LedgerReadOnlyError: read-only and the database does not exist.
        """
        handle = self._dbs.get(name)
        if handle is None:
            with self._dbs_lock:
                handle = self._dbs.get(name)
                if handle is None:
                    if self.readonly:
                        handle = self._open_existing_db(name)
                    else:
                        handle = self._run_write(lambda txn: self.env.open_db(name, txn=txn))
                    self._dbs[name] = handle
        return handle

    def _open_existing_db(self, name: bytes) -> Any:
        # Without a transaction: py-lmdb ends an explicit read-only transaction without
        # committing it, and LMDB keeps a handle opened inside one only when it commits.
        try:
            return self.env.open_db(name, create=False)
        except lmdb.NotFoundError:
            msg = (
                f"the LMDB ledger at {self.path!r} has no {name.decode('utf-8', 'replace')!r} "
                "database, and it is open read-only"
            )
            raise LedgerReadOnlyError(msg, path=self.path) from None

    def _read_identity(self) -> tuple[list[bytes], dict[bytes, bytes] | None]:
        """The main database's keys and the ``meta`` entries (None without ``meta``)."""
        with self.env.begin(write=False) as txn:
            names = [bytes(key) for key in txn.cursor().iternext(keys=True, values=False)]
        if b"meta" not in names:
            return names, None
        meta_db = self._open_existing_db(b"meta") if self.readonly else self.db(b"meta")
        with self.env.begin(write=False) as txn:
            meta = {bytes(k): bytes(v) for k, v in txn.cursor(db=meta_db)}
        return names, meta

    def _check_identity(self) -> None:
        """Refuse a foreign, empty or newer store; record a missing identity when writable.

        :raises ForeignStoreError: not a memory-ledger ledger (see
            :mod:`memory_ledger.ledger.store_identity`).
        :raises LedgerFormatError: a newer or unreadable format version.
        """
        names, meta = self._read_identity()
        missing = identity_to_record(self.path, names, meta, format_version=FORMAT_VERSION)
        if self.engine_store and (meta or {}).get(STORE_KIND_KEY) is None:
            missing[STORE_KIND_KEY] = ENGINE_STORE  # checked by the untouched read first
        if missing and not self.readonly:

            def record(txn: Any) -> None:
                meta_db = self.env.open_db(b"meta", txn=txn)
                for key, value in missing.items():
                    txn.put(key, value, db=meta_db, overwrite=False)

            self._run_write(record)
        stored = (meta or {}).get(FORMAT_KEY) or missing.get(FORMAT_KEY)
        self.tag_index_built = self.parse_format(stored) >= TAG_INDEX_FORMAT

    def check_engine_store(self) -> None:
        """Check (and, writable, mark) an environment that this process opened without the
        engine-store check as the ledger of an engine's store (see
        :func:`~memory_ledger.ledger.store_identity.check_engine_ledger`).

        :raises ForeignStoreError: ``"foreign_ledger"``.
        """
        if self.engine_store:
            return
        meta_db, log_db = self.db(b"meta"), self.db(b"log")
        with self.env.begin(write=False) as txn:
            meta = {bytes(k): bytes(v) for k, v in txn.cursor(db=meta_db)}
            topics = []
            if meta.get(STORE_KIND_KEY) is None:
                topics = _first_topics(txn.cursor(db=log_db), ENGINE_SAMPLE, self.path)
        if check_engine_ledger(self.path, meta, topics) and not self.readonly:

            def record(txn: Any) -> None:
                txn.put(STORE_KIND_KEY, ENGINE_STORE, db=meta_db, overwrite=False)

            self._run_write(record)
        self.engine_store = True

    def _log_is_empty(self, txn: Any) -> bool:
        try:
            log = self.env.open_db(b"log", txn=txn, create=False)
        except lmdb.NotFoundError:
            return True
        return not txn.cursor(db=log).first()

    def parse_format(self, stored: bytes | None) -> int:
        """The format version stored in ``meta`` (``stored``; None reads as 0)."""
        if stored is None:
            return 0
        try:
            return int(bytes(stored).decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            msg = f"LMDB store at {self.path!r} has an unreadable format version {stored!r}"
            raise LedgerFormatError(msg) from None

    def check_tag_index(self, txn: Any) -> None:
        """Raise :class:`Refused` inside a write transaction when the store has no tag index.

        Cached once seen built (in this process, or re-read from ``meta`` in ``txn``).
        """
        if self.tag_index_built:
            return
        stored = txn.get(FORMAT_KEY, db=self._dbs[b"meta"])
        if self.parse_format(stored) >= TAG_INDEX_FORMAT:
            self.tag_index_built = True
            return
        msg = (
            f"LMDB store at {self.path!r} has no tag index yet (format version 1): "
            "build it (LMDBApplicationRecorder.build_tag_index) before conditional appends"
        )
        raise Refused(LedgerOperationalError(msg, path=self.path))

    # Transactions ---------------------------------------------------------------------------

    def _run_write(self, fn: Callable[[Any], T], size_hint: int = 0) -> T:
        """Run ``fn(txn)`` in one write transaction, growing the map and retrying when full.

        ``fn`` refuses a batch by raising :class:`Refused` before it writes anything; the
        untouched transaction is then committed (a no-op), not aborted: with py-lmdb >= 2 an
        abort waits until no other thread of this process is inside an LMDB call, which busy
        readers can postpone indefinitely while every process waits on the writer lock.
        ``size_hint`` (bytes about to be written) grows the map before the transaction when
        it would not fit, so a full map rarely forces an abort either.
        """
        if self.readonly:
            msg = f"the LMDB ledger at {self.path!r} is open read-only; nothing was written"
            raise LedgerReadOnlyError(msg, path=self.path)
        try:
            return self._run_write_once(fn, size_hint)
        except lmdb.Error as e:
            raise translate_lmdb_error(e, self.path, "write") from e

    def _run_write_once(self, fn: Callable[[Any], T], size_hint: int) -> T:
        with self.write_lock:
            self._reserve(size_hint)
            while True:
                self.gate.acquire_shared()
                try:
                    txn = self.env.begin(write=True)
                    self.writer = threading.get_ident()
                    try:
                        result = fn(txn)
                        fault("ledger.commit")
                    except Refused:
                        txn.commit()
                        raise
                    except BaseException:
                        txn.abort()
                        raise
                    txn.commit()
                    return result
                except Refused as refused:
                    raise refused.error from None
                except lmdb.MapFullError:
                    grow = True
                except lmdb.MapResizedError:
                    grow = False
                finally:
                    self.writer = None
                    self.log_tail = None
                    self.gate.release_shared()
                if grow:
                    self._grow()
                else:
                    self._adopt_new_size()

    def exclusive(self, fn: Callable[[], T]) -> T:
        """``fn()`` run while this process holds the ledger's writer lock (LMDB's, shared by
        every process on the store): no append of any process is inside its write
        transaction meanwhile. The transaction taken writes nothing (its commit syncs
        nothing). A thread already inside a write transaction runs ``fn`` at once.

        What it is for: the key store file of the store is replaced under it, so an append,
        which checks the keys its records were sealed with inside its write transaction
        (:attr:`LMDBApplicationRecorder.sealed_key_check`), commits before the keys go or
        sees them gone (the PostgreSQL ledger's key row ``FOR SHARE``, on LMDB).

        :raises LedgerReadOnlyError: the store is open read-only.
        """
        if self.writer == threading.get_ident():
            return fn()
        outcome: list[tuple[bool, Any]] = []

        def run(_txn: Any) -> None:
            try:
                outcome.append((True, fn()))
            except Exception as e:  # noqa: BLE001 (raised again below, outside the transaction)
                outcome.append((False, e))

        self._run_write(run)
        done, value = outcome[0]
        if not done:
            raise value
        return cast(T, value)

    def _reserve(self, size_hint: int) -> None:
        """Grow the map ahead of a write of about ``size_hint`` bytes that would not fit.

        The free room is measured (``mdb_env_info``, ``mdb_env_stat``) when the estimate
        kept since the last measure runs short, and at least every
        :data:`_RESERVE_MEASURE_EVERY` writes (other processes use room too); in between,
        each write takes its bound from the estimate. A write that still finds the map
        full is retried after growing it (:meth:`_run_write_once`).
        """
        if size_hint <= 0:
            return
        # Copy-on-write may touch each page twice; keep a margin for branch pages.
        needed = 2 * size_hint + _RESERVE_MARGIN
        self._writes_unmeasured += 1
        if needed > self._room or self._writes_unmeasured >= _RESERVE_MEASURE_EVERY:
            info = self.env.info()
            used = (int(info["last_pgno"]) + 1) * int(self.env.stat()["psize"])
            map_size = int(info["map_size"])
            if used + needed > map_size:
                self._grow(used + needed)
                map_size = int(self.env.info()["map_size"])
            self._room = map_size - used
            self._writes_unmeasured = 0
        self._room -= 2 * size_hint

    def _run_group(self, group: list[WriteRequest[Any]], extend: Callable[[], bool]) -> None:
        """Run every request of ``group`` in ONE write transaction (one sync), and those
        ``extend()`` adds while it runs: each sees the records of those before it; a refused
        one (:class:`Refused`, raised before it wrote anything) gets its error and leaves the
        transaction to the others."""

        def run(txn: Any) -> None:
            done = 0
            while done < len(group) or extend():
                request = group[done]
                combine = request.combine
                if combine is not None:
                    # A run of requests of one kind, given as data: one call for them all.
                    end = done + 1
                    while end < len(group) and group[end].combine is combine:
                        end += 1
                    combine(txn, group[done:end])
                    done = end
                    continue
                request.result, request.error = None, None
                try:
                    request.result = request.fn(txn)
                except Refused as refused:
                    request.error = refused.error
                done += 1

        self._run_write(run, sum(request.size_hint for request in group))

    def _run_alone(self, request: WriteRequest[Any]) -> Any:
        return self._run_write(request.fn, request.size_hint)

    def write(
        self,
        fn: Callable[[Any], T],
        size_hint: int = 0,
        combine: Combine | None = None,
        payload: Any = None,
    ) -> T:
        """Run ``fn(txn)`` in a durable write transaction, then wake in-process listeners.

        Writes that other threads of this process make at the same time share the
        transaction and its sync (group commit); the result is returned once it is committed.
        ``combine`` and ``payload``: the request as data (see
        :class:`~memory_ledger.ledger.group_commit.WriteRequest`).
        """
        result = self.group_commit.write(fn, size_hint, combine, payload)
        if self.listeners:
            with self.listeners_lock:
                listeners = list(self.listeners)
            for listener in listeners:
                listener.set()
        return result

    @contextlib.contextmanager
    def read(self) -> Iterator[Any]:
        """A read-only transaction over one consistent snapshot of the store.

        An LMDB error met while beginning it or inside the ``with`` block is raised as the
        typed error of :func:`~memory_ledger.ledger.lmdb_errors.translate_lmdb_error`.
        """
        while True:
            self.gate.acquire_shared()
            try:
                txn = self.env.begin(write=False, buffers=False)
            except lmdb.MapResizedError:
                self.gate.release_shared()
                try:
                    self._adopt_new_size()
                except lmdb.Error as e:
                    raise translate_lmdb_error(e, self.path, "read") from e
                continue
            except lmdb.Error as e:
                self.gate.release_shared()
                raise translate_lmdb_error(e, self.path, "read") from e
            except BaseException:
                self.gate.release_shared()
                raise
            break
        try:
            yield txn
        except lmdb.Error as e:
            raise translate_lmdb_error(e, self.path, "read", read_only=True) from e
        finally:
            try:
                txn.abort()
            finally:
                self.gate.release_shared()

    def _grow(self, minimum: int = 0) -> None:
        """Double the map size (more than once if needed to reach ``minimum`` bytes)."""
        self._room = 0
        with self.gate.exclusive():
            size = int(self.env.info()["map_size"]) * 2
            while size < minimum:
                size *= 2
            self.env.set_mapsize(size)

    def _adopt_new_size(self) -> None:
        self._room = 0
        with self.gate.exclusive():
            # Zero adopts the size another process has written into the meta page.
            self.env.set_mapsize(0)

    def close(self) -> None:
        self.env.close()


class _Registry:
    """Process-wide map from a store directory to its one open :class:`_SharedEnvironment`.

    Its lock is re-entrant: a datastore left to the garbage collector releases its
    environment from ``__del__``, and the collector may run that on a thread that already
    holds the lock (inside :meth:`acquire`, while it builds a new environment). With a plain
    lock that thread waited on itself for ever (seen as a hung test run).
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._envs: dict[str, _SharedEnvironment] = {}

    def acquire(
        self,
        path: str,
        map_size: int,
        *,
        sync: bool,
        readonly: bool = False,
        engine_store: bool = False,
    ) -> _SharedEnvironment:
        """The process's environment on ``path``, opened now if needed.

        A read-only request shares an environment this process already has open for
        writing; a writable request on an environment open read-only is refused.

        :raises LedgerOperationalError: the directory cannot be created or opened, or it
            is open read-only in this process and a writable one was asked for.
        """
        key = os.path.realpath(path)
        with self._lock:
            shared = self._envs.get(key)
            if shared is not None and shared.readonly and not readonly:
                msg = (
                    f"the LMDB ledger at {key!r} is open read-only in this process; close "
                    "it before opening it for writing"
                )
                raise LedgerOperationalError(msg, path=key, reason_code="ledger_read_only")
            if shared is None:
                if not readonly:
                    try:
                        os.makedirs(key, exist_ok=True)
                    except OSError as e:
                        msg = f"cannot create LMDB store directory {key!r}: {e.strerror}"
                        raise LedgerOperationalError(
                            msg, path=key, reason_code=_errno_reason(e)
                        ) from e
                try:
                    shared = _SharedEnvironment(
                        key, map_size, sync=sync, readonly=readonly, engine_store=engine_store
                    )
                except lmdb.Error as e:
                    raise translate_lmdb_error(e, key, "open") from e
                self._envs[key] = shared
            elif engine_store:
                try:
                    shared.check_engine_store()
                except lmdb.Error as e:
                    raise translate_lmdb_error(e, key, "open") from e
            shared.refcount += 1
            return shared

    def release(self, shared: _SharedEnvironment) -> None:
        """Drop one handle on ``shared``; the environment closes with its last handle."""
        with self._lock:
            shared.refcount -= 1
            if shared.refcount == 0:
                if self._envs.get(shared.path) is shared:
                    del self._envs[shared.path]
                shared.close()

    def forget_after_fork(self) -> None:
        """In a forked child, drop (never use) environments inherited from the parent."""
        self._lock = threading.RLock()
        self._envs = {}


def _errno_reason(error: OSError) -> str:
    """A reason code for an ``OSError`` met on the store directory."""
    if error.errno in (errno.EACCES, errno.EPERM):
        return "permission_denied"
    if error.errno == errno.EROFS:
        return "read_only_file_system"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return "disk_full"
    return "ledger_unavailable"


_registry = _Registry()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_registry.forget_after_fork)


class LMDBDatastore:
    """Handle on one LMDB store directory (one shared environment per path per process).

    :param path: directory holding ``data.mdb`` and ``lock.mdb``; created if absent.
    :param map_size: initial map size in bytes; the map doubles whenever it fills up.
    :param sync: fsync on commit (durable on return) when true.
    :param originator_id_type: ``"uuid"`` or ``"text"``: the type of originator ids returned.
    :param poll_interval: seconds between polls for other processes' writes (subscriptions).
    :param readonly: open the store read-only (it must exist): every write raises
        :class:`~memory_ledger.ledger.errors.LedgerReadOnlyError`. Audits of a store the
        user can only read use it.
    :param engine_store: the ledger of a memory-ledger engine's store: refuse (untouched) a
        ledger written by another application through this module, and record
        ``store_kind`` in a new or adopted one (:mod:`memory_ledger.ledger.store_identity`).
    :raises LedgerOperationalError: (an ``OperationalError``) the directory cannot be
        created or opened; the message names it.
    :raises ForeignStoreError: the directory holds another application's LMDB, an empty
        or a non-LMDB ``data.mdb`` (see :mod:`memory_ledger.ledger.store_identity`).
    :raises LedgerDamagedError: ``data.mdb`` is shorter than its meta page's last page needs
        (``ledger_truncated``: :func:`~memory_ledger.ledger.lmdb_meta.check_data_length`),
        refused before LMDB maps it.
    :raises LedgerFormatError: the store has a newer record format.
    """

    def __init__(
        self,
        path: str,
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        sync: bool = True,
        originator_id_type: OriginatorIdType = "uuid",
        poll_interval: float = 0.05,
        readonly: bool = False,
        engine_store: bool = False,
    ) -> None:
        self.path = path
        self.sync = sync
        self.readonly = readonly
        self.originator_id_type: OriginatorIdType = originator_id_type
        self.poll_interval = poll_interval
        self._shared: _SharedEnvironment | None = _registry.acquire(
            path, map_size, sync=sync, readonly=readonly, engine_store=engine_store
        )

    @property
    def shared(self) -> _SharedEnvironment:
        if self._shared is None:
            msg = f"LMDB datastore at {self.path!r} is closed"
            raise LedgerOperationalError(msg, path=self.path, reason_code="ledger_closed")
        return self._shared

    @property
    def env(self) -> lmdb.Environment:
        """The underlying ``lmdb.Environment`` (shared; do not close it)."""
        return self.shared.env

    def db(self, name: bytes) -> Any:
        """Handle of the named database ``name`` (opened once per process)."""
        return self.shared.db(name)

    def exclusive(self, fn: Callable[[], T]) -> T:
        """``fn()`` under the ledger's writer lock (:meth:`_SharedEnvironment.exclusive`).

        :raises LedgerReadOnlyError: the store is open read-only.
        """
        return self.shared.exclusive(fn)

    def write(
        self,
        fn: Callable[[Any], T],
        size_hint: int = 0,
        combine: Combine | None = None,
        payload: Any = None,
    ) -> T:
        """Run ``fn(txn)`` in one write transaction; durable on return when ``sync`` is on.

        ``fn`` may raise :class:`Refused` (before writing anything) to refuse the batch.
        ``combine`` and ``payload``: the request as data, run with the requests of its kind
        that share its transaction (see
        :class:`~memory_ledger.ledger.group_commit.WriteRequest`).
        """
        shared = self.shared
        if self.readonly:
            msg = f"the LMDB ledger at {self.path!r} is open read-only; nothing was written"
            raise LedgerReadOnlyError(msg, path=self.path)
        result = shared.write(fn, size_hint, combine, payload)
        if self.sync and not shared.sync:
            try:
                shared.env.sync(True)
            except lmdb.Error as e:
                raise translate_lmdb_error(e, self.path, "sync") from e
        return result

    def read(self) -> contextlib.AbstractContextManager[Any]:
        """Context manager yielding a read-only transaction (one consistent snapshot)."""
        return self.shared.read()

    def listen(self, event: threading.Event) -> None:
        """Set ``event`` after every commit made through this process's environment."""
        shared = self.shared
        with shared.listeners_lock:
            shared.listeners.add(event)

    def unlisten(self, event: threading.Event) -> None:
        shared = self._shared
        if shared is not None:
            with shared.listeners_lock:
                shared.listeners.discard(event)

    def stream_prefix(self, originator_id: UUID | str) -> bytes:
        """Key prefix of one stream in the ``index`` database.

        :raises LedgerDataError: the id is not a valid UUID (uuid mode) or is too long (text mode).
        """
        if self.originator_id_type == "uuid":
            if not isinstance(originator_id, UUID):
                try:
                    originator_id = UUID(str(originator_id))
                except ValueError:
                    msg = f"originator_id {originator_id!r} is not a UUID"
                    raise LedgerDataError(msg, path=self.path) from None
            return b"\x01" + originator_id.bytes
        raw = str(originator_id).encode("utf-8")
        if len(raw) > _MAX_KEY_ID_BYTES:
            msg = f"originator_id is {len(raw)} bytes long, at most {_MAX_KEY_ID_BYTES} allowed"
            raise LedgerDataError(msg, path=self.path)
        return b"\x02" + struct.pack(">H", len(raw)) + raw

    def convert_originator_id(self, originator_id: UUID | str) -> UUID | str:
        """The originator id as this datastore returns it (UUID or text)."""
        if self.originator_id_type == "uuid":
            return originator_id if isinstance(originator_id, UUID) else UUID(originator_id)
        return str(originator_id)

    def close(self) -> None:
        """Release this handle; the environment closes with its last handle."""
        shared, self._shared = self._shared, None
        if shared is not None:
            _registry.release(shared)

    def __del__(self) -> None:
        # No module globals here: at interpreter exit they may already be gone.
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110
            pass


class LMDBRecorder(Recorder):
    """Base of the LMDB recorders: holds the datastore."""

    def __init__(self, datastore: LMDBDatastore) -> None:
        assert isinstance(datastore, LMDBDatastore)
        self.datastore = datastore

    def create_table(self) -> None:
        """Create the named databases this recorder uses (idempotent)."""


def _iter_stream(
    cursor: Any,
    prefix: bytes,
    *,
    gt: int | None,
    lte: int | None,
    desc: bool,
    limit: int | None,
) -> Iterator[tuple[bytes, bytes]]:
    """Yield ``(key, value)`` of one stream's index entries within ``(gt, lte]``."""
    if limit is not None and limit <= 0:
        return
    low = prefix + (pack_version(gt + 1) if gt is not None else b"")
    high = prefix + (pack_version(lte) if lte is not None else b"\xff" * 8)
    count = 0
    if not desc:
        found = cursor.set_range(low)
        while found:
            key = cursor.key()
            if not key.startswith(prefix) or key > high:
                return
            yield key, cursor.value()
            count += 1
            if limit is not None and count >= limit:
                return
            found = cursor.next()
    else:
        if cursor.set_range(high):
            found = True if cursor.key() == high else cursor.prev()
        else:
            found = cursor.last()
        while found:
            key = cursor.key()
            if not key.startswith(prefix) or key < low:
                return
            yield key, cursor.value()
            count += 1
            if limit is not None and count >= limit:
                return
            found = cursor.prev()


class LMDBAggregateRecorder(LMDBRecorder, AggregateRecorder):
    """Records stored events per stream, without a notification log (e.g. snapshots).

    Events of one purpose live in the named database ``agg:<purpose>``.
    """

    def __init__(self, datastore: LMDBDatastore, purpose: str = "events") -> None:
        super().__init__(datastore)
        self.purpose = purpose
        self._db_name = f"agg:{purpose}".encode()

    def create_table(self) -> None:
        self.datastore.db(self._db_name)

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert all events in one transaction.

        :raises IntegrityError: an (originator id, version) exists; nothing is written.
        """
        if not stored_events:
            return None
        db = self.datastore.db(self._db_name)
        rows = [
            (
                self.datastore.stream_prefix(s.originator_id) + pack_version(s.originator_version),
                encode_body(s.originator_id, s.originator_version, s.topic, s.state),
            )
            for s in stored_events
        ]

        def insert(txn: Any) -> None:
            _refuse_existing(txn, db, [key for key, _ in rows])
            for key, body in rows:
                txn.put(key, body, db=db)

        self.datastore.write(insert, sum(len(k) + len(b) for k, b in rows))
        return None

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """Events of one stream, by version, within ``(gt, lte]``."""
        prefix = self.datastore.stream_prefix(originator_id)
        db = self.datastore.db(self._db_name)
        convert = self.datastore.convert_originator_id
        with self.datastore.read() as txn:
            result = []
            for _key, body in _iter_stream(
                txn.cursor(db=db), prefix, gt=gt, lte=lte, desc=desc, limit=limit
            ):
                oid, version, topic, state = _decode_body(body)
                result.append(StoredEvent(convert(oid), version, topic, state))
            return result


class TaggedEvent(NamedTuple):
    """A stored event read through the tag index, with its position (notification id)."""

    position: int
    stored_event: StoredEvent


class TaggedSelection(NamedTuple):
    """What :meth:`LMDBApplicationRecorder.select_tagged` read in one snapshot: the matching
    events in position order and ``head``, the log's last position then (0 when empty).

    ``head`` is the position a decision made from these events read: append its events with
    a ``DCBAppendCondition(query, after=head)``.
    """

    head: int
    events: list[TaggedEvent]


def _topic_of_value(value: bytes) -> str:
    """The topic of a stored ``log`` value (hash + body)."""
    return _decode_body(bytes(value[HASH_SIZE:]))[2]


class LMDBApplicationRecorder(LMDBRecorder, ApplicationRecorder):
    """Records stored events in streams and in one gapless, hash-chained notification log,
    with an optional tag per event and an optional append condition (see the module doc)."""

    def __init__(self, datastore: LMDBDatastore) -> None:
        super().__init__(datastore)
        self._log = datastore.db(b"log")
        self._index = datastore.db(b"index")
        self._meta = datastore.db(b"meta")
        self.tag_index = TagIndex(
            datastore.db(b"tags"), datastore.db(b"event_tags"), self._log, _topic_of_value
        )
        self._combine_plain: Combine = self._insert_plain
        """One bound method for every plain append (requests of one kind share it)."""
        self.sealed_key_check: SealedKeyCheck | None = None
        """Run inside the write transaction of every append holding sealed states, with the
        data key ids they were sealed with: the error that refuses the append when one of
        those keys was destroyed (an erasure), else None. Set by the store's key store
        (:meth:`~memory_ledger.ledger.key_store.FileKeyStore.guard`); None: no check."""

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Append all events in ONE write transaction and return their notification ids.

        Ids continue the log without gaps; each record's hash chains to the previous one.
        Keyword arguments (all optional): ``tracking`` (a ``Tracking``, process recorders),
        ``tags`` (one sequence of tag strings per stored event, indexed with the records) and
        ``condition`` (a ``DCBAppendCondition``: the batch is refused when a record matching
        its query was appended after ``condition.after``; docs/design.md).

        :raises IntegrityError: an (originator id, version) exists already or twice in the
            batch, or (process recorders) the tracking id is not new; nothing is written.
        :raises AppendConditionFailedError: the condition failed (an ``IntegrityError``);
            nothing is written.
        :raises OperationalError: a condition was given but the store's tag index is not
            built (a format-1 store); nothing is written.
        :raises DataError: ``tags`` does not hold one sequence per event, or a tag is not a
            string or is longer than 400 UTF-8 bytes.
        """
        prepared = self._prepare(stored_events)
        tracking: Tracking | None = kwargs.get("tracking")
        tags: Sequence[Sequence[str]] | None = kwargs.get("tags")
        condition: DCBAppendCondition | None = kwargs.get("condition")
        size = 0
        for key, body in prepared:
            size += len(key) + len(body) + HASH_SIZE + 16
        if tags is not None:
            if len(tags) != len(prepared):
                msg = f"tags holds {len(tags)} sequences for {len(prepared)} events"
                raise LedgerDataError(msg)
            for event_tags in tags:
                if event_tags:
                    TagIndex.check(event_tags)
                    size += sum(len(t) + 32 for t in event_tags)

        check = self.sealed_key_check
        sealed = sealed_key_ids(s.state for s in stored_events) if check is not None else None

        def insert(txn: Any) -> list[int]:
            if check is not None and sealed:
                refusal = check(sealed)
                if refusal is not None:
                    raise Refused(refusal)
            return self.insert_in_transaction(txn, prepared, tracking, tags, condition)

        if tracking is None and condition is None:
            # A plain append: given as data, so the appends that share a transaction are
            # checked and written together (see _insert_plain).
            payload = (prepared, tags, sealed)
            return self.datastore.write(insert, size, self._combine_plain, payload)
        return self.datastore.write(insert, size)

    def _insert_plain(self, txn: Any, requests: list[WriteRequest[Any]]) -> None:
        """Run several plain appends (``payload``: prepared rows and tags; no tracking, no
        condition) in ``txn`` as if one after the other, written by one
        :meth:`_append_records` in request order.

        ONE ``getmulti`` finds the stream keys taken; each request whose key exists (in the
        store, in itself, or written by an accepted request before it) is refused, and the
        rest are written. Several requests first try without it: their stream keys are put
        without overwriting, which checks them too, and only when one was taken are the
        keys just put taken back and the ``getmulti`` made (a lone request never writes
        before its check: refused, it leaves the transaction untouched).
        """
        check = self.sealed_key_check
        if check is not None:
            requests = _refuse_destroyed(requests, check)
        accepted = requests
        ids = (
            self._append_records(txn, *_gathered(accepted), fresh=True)
            if len(requests) > 1
            else None
        )
        if ids is None:
            keys = [key for request in requests for key, _ in request.payload[0]]
            found = txn.cursor(db=self._index).getmulti(keys) if keys else []
            if found or len(set(keys)) != len(keys):
                accepted = accept_in_order(requests, {bytes(key) for key, _ in found})
            ids = self._append_records(txn, *_gathered(accepted))
        at = 0
        for request in accepted:
            count = len(request.payload[0])
            request.result, request.error = ids[at : at + count], None
            at += count

    def _prepare(self, stored_events: Sequence[StoredEvent]) -> list[tuple[bytes, bytes]]:
        """``(stream key, record body)`` of each stored event: the bytes of
        :meth:`LMDBDatastore.stream_prefix` + :func:`pack_version` and of
        :func:`encode_body` (a UUID id's 16 bytes computed once for both, and once for the
        consecutive events of one stream, the usual shape of a command).

        :raises LedgerDataError: an id that is not a UUID (uuid mode) or too long (text
            mode), or a version outside the signed 64-bit range.
        """
        datastore = self.datastore
        uuid_ids = datastore.originator_id_type == "uuid"
        encode = _row_encoder.encode
        pack = _ID.pack
        rows: list[tuple[bytes, bytes]] = []
        last_id: object = None
        raw = prefix = b""
        for s in stored_events:
            oid = s.originator_id
            version = s.originator_version
            if (
                uuid_ids
                and type(oid) is UUID
                and type(version) is int
                and 0 <= version < _VERSION_BIAS
            ):
                if oid is not last_id:
                    last_id, raw = oid, oid.bytes
                    prefix = _UUID_KEY + raw
                body = encode((raw, version, s.topic, s.state))
                rows.append((prefix + pack(version + _VERSION_BIAS), body))
                continue
            rows.append(
                (
                    datastore.stream_prefix(oid) + pack_version(version),
                    encode_body(oid, version, s.topic, s.state),
                )
            )
        return rows

    def insert_in_transaction(
        self,
        txn: Any,
        prepared: list[tuple[bytes, bytes]],
        tracking: Tracking | None,
        tags: Sequence[Sequence[str]] | None = None,
        condition: DCBAppendCondition | None = None,
    ) -> list[int]:
        """The body of :meth:`insert_events` inside the caller's write transaction ``txn``:
        ``prepared`` holds ``(stream key, body)`` per record. Raises :class:`Refused` (before
        writing anything) to refuse the batch.

        Few calls into LMDB per batch: one ``getmulti`` checks that no stream key exists,
        one ``putmulti`` writes the stream keys and one appending ``putmulti`` the records.
        """
        shared = self.datastore.shared
        # Every check runs before the first write, so a refused batch leaves the
        # transaction untouched (see _SharedEnvironment._run_write).
        if prepared:
            _refuse_existing_rows(txn, self._index, prepared)
        if tracking is not None:
            tracking_db = self.datastore.db(b"tracking")
            _check_tracking(txn, tracking_db, tracking)
        if condition is not None:
            shared.check_tag_index(txn)
            failed = self.tag_index.refuse(txn, condition)
            if failed is not None:
                raise Refused(failed)
        ids: list[int] = []
        if prepared:
            ids = self._append_records(txn, prepared, tags)
        if tracking is not None:
            txn.put(
                tracking.application_name.encode("utf-8"),
                _ID.pack(tracking.notification_id),
                db=tracking_db,
            )
        return ids

    @overload
    def _append_records(
        self,
        txn: Any,
        prepared: list[tuple[bytes, bytes]],
        tags: Sequence[Sequence[str]] | None,
    ) -> list[int]: ...

    @overload
    def _append_records(
        self,
        txn: Any,
        prepared: list[tuple[bytes, bytes]],
        tags: Sequence[Sequence[str]] | None,
        *,
        fresh: bool,
    ) -> list[int] | None: ...

    def _append_records(
        self,
        txn: Any,
        prepared: list[tuple[bytes, bytes]],
        tags: Sequence[Sequence[str]] | None,
        *,
        fresh: bool = False,
    ) -> list[int] | None:
        """Write the checked ``prepared`` rows at the log's end in ``txn`` (stream keys,
        hash-chained records, tags); return their positions.

        ``fresh``: the stream keys are not checked yet; they are put without overwriting,
        and when one is taken (it exists, or repeats in ``prepared``) the ones put are taken
        back and nothing is written (None is returned).

        :raises LedgerIntegrityError: the log did not end where this transaction found it
            (an appending put refused a key); the caller's transaction must be aborted.
        """
        if not prepared:
            return []
        shared = self.datastore.shared
        tail = shared.log_tail
        if tail is not None and tail[0] is txn:  # an earlier request of this group
            last_id, prev_hash = tail[1], tail[2]
        else:
            cursor = txn.cursor(db=self._log)
            if cursor.last():
                last_id = _ID.unpack(cursor.key())[0]
                prev_hash = bytes(cursor.value()[:HASH_SIZE])
            else:
                last_id, prev_hash = 0, GENESIS_HASH
        first = last_id + 1
        pack, sha256 = _ID.pack, hashlib.sha256
        # Columns of bytes, paired by zip as putmulti reads them: no tuple per row kept
        # alive for the transaction (the cyclic collector counts every one).
        stream_keys = [key for key, _body in prepared]
        packed_ids: list[bytes] = []
        values: list[bytes] = []
        add_id, add_value = packed_ids.append, values.append
        for _key, body in prepared:
            last_id += 1
            add_id(pack(last_id))
            prev_hash = sha256(prev_hash + body).digest()
            add_value(prev_hash + body)
        count = len(packed_ids)
        index = txn.cursor(db=self._index)
        if fresh:
            if (
                index.putmulti(zip(stream_keys, packed_ids, strict=True), overwrite=False)[1]
                != count
            ):
                _take_back(txn, self._index, list(zip(stream_keys, packed_ids, strict=True)))
                return None
        else:
            index.putmulti(zip(stream_keys, packed_ids, strict=True))
        if (
            txn.cursor(db=self._log).putmulti(zip(packed_ids, values, strict=True), append=True)[1]
            != count
        ):
            msg = f"the log of {self.datastore.path!r} does not end at position {first - 1}"
            raise LedgerIntegrityError(msg, path=self.datastore.path)
        if tags is not None and not any(tags):
            tags = None
        if tags is not None or FAULTS:
            for n, packed_id in enumerate(packed_ids):
                if tags is not None and tags[n]:
                    self.tag_index.put(txn, packed_id, tags[n])
                fault("ledger.put")
        shared.log_tail = (txn, last_id, prev_hash)
        return list(range(first, last_id + 1))

    def select_tagged(
        self, query: DCBQuery | None, *, after: int | None = None, limit: int | None = None
    ) -> TaggedSelection:
        """The events after ``after`` matching ``query`` (the library's DCB matching: any
        item; an item's types and all of its tags), in position order, at most ``limit``,
        with the log's head, all read in one snapshot.

        :raises OperationalError: the store's tag index is not built (format 1).
        """
        convert = self.datastore.convert_originator_id
        events: list[TaggedEvent] = []
        with self.datastore.read() as txn:
            self._require_tag_index(txn)
            head = self.last_position(txn)
            if limit is not None and limit <= 0:
                return TaggedSelection(head, events)
            for position in self.tag_index.matches(txn, query, after or 0):
                packed = _ID.pack(position)
                oid, version, topic, state = _decode_at(packed, txn.get(packed, db=self._log))
                events.append(
                    TaggedEvent(position, StoredEvent(convert(oid), version, topic, state))
                )
                if limit is not None and len(events) >= limit:
                    break
        return TaggedSelection(head, events)

    def _require_tag_index(self, txn: Any) -> None:
        shared = self.datastore.shared
        if shared.tag_index_built:
            return
        if shared.parse_format(txn.get(FORMAT_KEY, db=self._meta)) >= TAG_INDEX_FORMAT:
            shared.tag_index_built = True
            return
        msg = (
            f"LMDB store at {self.datastore.path!r} has no tag index yet (format version 1): "
            "build it with build_tag_index() first"
        )
        raise LedgerOperationalError(msg, path=shared.path)

    def last_position(self, txn: Any) -> int:
        """The log's last position in ``txn`` (0 when empty)."""
        cursor = txn.cursor(db=self._log)
        return cast(int, _ID.unpack(cursor.key())[0]) if cursor.last() else 0

    def require_tag_index(self, txn: Any) -> None:
        """Raise ``OperationalError`` when the store's tag index is not built (format 1)."""
        self._require_tag_index(txn)

    def tag_index_built(self) -> bool:
        """Whether every record's tags are indexed (format version >= 2)."""
        with self.datastore.read() as txn:
            try:
                self._require_tag_index(txn)
            except LedgerOperationalError:
                return False
            return True

    def tags_of(self, position: int) -> list[str]:
        """The tags of the record at ``position`` (empty when none, or no such record)."""
        with self.datastore.read() as txn:
            return self.tag_index.tags_of(txn, _ID.pack(position))

    def build_tag_index(self, tagger: Callable[[StoredEvent], Sequence[str]]) -> int:
        """Upgrade a format-1 store: index ``tagger(stored_event)`` of every record, then
        record format version 2, in ONE write transaction (all or nothing; a concurrent
        upgrader finds it done and writes nothing). Returns how many records were tagged
        (0 when the index was already built).

        :raises DataError: ``tagger`` returned a tag that is not a string or is too long.
        """
        convert = self.datastore.convert_originator_id
        shared = self.datastore.shared

        def upgrade(txn: Any) -> int:
            stored = txn.get(FORMAT_KEY, db=self._meta)
            if shared.parse_format(stored) >= TAG_INDEX_FORMAT:
                return 0
            tagged = 0
            cursor = txn.cursor(db=self._log)
            for key, value in cursor.iternext():
                oid, version, topic, state = _decode_at(bytes(key), bytes(value))
                tags = tagger(StoredEvent(convert(oid), version, topic, state))
                if tags:
                    TagIndex.check(tags)
                    self.tag_index.put(txn, bytes(key), tags)
                    tagged += 1
            txn.put(FORMAT_KEY, str(TAG_INDEX_FORMAT).encode(), db=self._meta)
            return tagged

        tagged = self.datastore.write(upgrade)
        shared.tag_index_built = True
        return tagged

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """Events of one stream, by version, within ``(gt, lte]``."""
        prefix = self.datastore.stream_prefix(originator_id)
        convert = self.datastore.convert_originator_id
        with self.datastore.read() as txn:
            result = []
            for _key, packed_id in _iter_stream(
                txn.cursor(db=self._index), prefix, gt=gt, lte=lte, desc=desc, limit=limit
            ):
                value = txn.get(packed_id, db=self._log)
                oid, version, topic, state = _decode_at(packed_id, value)
                result.append(StoredEvent(convert(oid), version, topic, state))
            return result

    def select_positioned(
        self, originator_id: UUID | str, *, gt: int | None = None
    ) -> list[TaggedEvent]:
        """Events of one stream with version > ``gt``, in version order, each with its
        position (the stream index maps a stream key to its notification id)."""
        prefix = self.datastore.stream_prefix(originator_id)
        convert = self.datastore.convert_originator_id
        result: list[TaggedEvent] = []
        with self.datastore.read() as txn:
            for _key, packed_id in _iter_stream(
                txn.cursor(db=self._index), prefix, gt=gt, lte=None, desc=False, limit=None
            ):
                value = txn.get(packed_id, db=self._log)
                oid, version, topic, state = _decode_at(packed_id, value)
                result.append(
                    TaggedEvent(
                        _ID.unpack(packed_id)[0], StoredEvent(convert(oid), version, topic, state)
                    )
                )
        return result

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """Notifications from ``start`` (inclusive unless told) to ``stop``, at most ``limit``."""
        if start is None:
            first = 1
        else:
            first = start if inclusive_of_start else start + 1
        first = max(first, 1)
        wanted = frozenset(topics)
        convert = self.datastore.convert_originator_id
        result: list[Notification] = []
        if limit <= 0:
            return result
        with self.datastore.read() as txn:
            cursor = txn.cursor(db=self._log)
            found = cursor.set_range(_ID.pack(first))
            while found:
                nid = _ID.unpack(cursor.key())[0]
                if stop is not None and nid > stop:
                    break
                oid, version, topic, state = _decode_at(cursor.key(), cursor.value())
                if not wanted or topic in wanted:
                    result.append(Notification(convert(oid), version, topic, state, nid))
                    if len(result) >= limit:
                        break
                found = cursor.next()
        return result

    def select_raw(
        self, start: int, limit: int, stop: int | None = None
    ) -> list[tuple[int, bytes | str, int, str, bytes]]:
        """Log entries after ``start`` as ``(id, raw originator id, version, topic, state)``.

        The fast path for projections: no ``Notification`` objects and no ``UUID``
        construction (a UUID originator id is returned as its 16 raw bytes).
        """
        result: list[tuple[int, bytes | str, int, str, bytes]] = []
        if limit <= 0 or (stop is not None and stop < 1):
            return result
        unpack = _ID.unpack
        decode = _body_decoder.decode
        append = result.append
        # Keys are big-endian ids, so comparing them as bytes compares the ids.
        stop_key = None if stop is None else _ID.pack(min(stop, _MAX_ID))
        with self.datastore.read() as txn:
            cursor = txn.cursor(db=self._log)
            if not cursor.set_range(_ID.pack(max(start + 1, 1))):
                return result
            try:
                for key, value in cursor.iternext():
                    if stop_key is not None and key > stop_key:
                        break
                    raw_id, version, topic, state = decode(value[HASH_SIZE:])
                    append((unpack(key)[0], raw_id, version, topic, state))
                    if len(result) >= limit:
                        break
            except (msgspec.DecodeError, ValueError, TypeError) as e:
                at = unpack(key)[0]
                msg = f"ledger record {at} at {self.datastore.path!r} does not decode: {e}"
                raise LedgerRecordError(msg, path=self.datastore.path, position=at) from e
        return result

    def max_notification_id(self) -> int | None:
        """The last notification id, or None when the log is empty."""
        with self.datastore.read() as txn:
            cursor = txn.cursor(db=self._log)
            if cursor.last():
                return cast(int, _ID.unpack(cursor.key())[0])
            return None

    def iter_log(self, start: int = 1, page: int = 1000) -> Iterator[tuple[int, bytes]]:
        """Every raw log entry from ``start`` as ``(notification id, stored value)``.

        The value is the record hash followed by the body, exactly as stored. Reads in pages
        of ``page`` entries, each page in its own read transaction.

        :raises LedgerDamagedError: the file's B-tree is damaged where the walk reached (a
            page of the wrong type, a key that is not a position): raised after every entry
            read before the damage was yielded, with ``position`` the first position not
            read (one past the last good one) and the message naming both.
        """
        next_id = max(start, 1)
        while True:
            rows: list[tuple[int, bytes]] = []
            damage: LedgerDamagedError | None = None
            try:
                with self.datastore.read() as txn:
                    cursor = txn.cursor(db=self._log)
                    found = cursor.set_range(_ID.pack(next_id))
                    while found and len(rows) < page:
                        key = cursor.key()
                        if len(key) != _ID.size:
                            msg = f"a key of {len(key)} bytes is not a position"
                            raise LedgerRecordError(msg, path=self.datastore.path)
                        rows.append((_ID.unpack(key)[0], bytes(cursor.value())))
                        found = cursor.next()
            except LedgerDamagedError as e:
                damage = e
            yield from rows
            if damage is not None:
                last = rows[-1][0] if rows else next_id - 1
                raise _damaged_after(damage, last, self.datastore.path) from damage
            if not rows:
                return
            next_id = rows[-1][0] + 1

    def iter_records(self, start: int = 1, page: int = 1000) -> Iterator[LedgerRecord]:
        """Every record of the log from ``start``, decoded, with its hash and stored body.

        Raises :class:`~memory_ledger.ledger.errors.LedgerRecordError` (a
        ``msgspec.DecodeError``) on a record whose body does not decode.
        """
        for nid, value in self.iter_log(start, page):
            yield decode_record(_ID.pack(nid), value)

    def stream_records(self, originator_id: UUID | str) -> list[LedgerRecord]:
        """Every record of one stream in version order, with its position and hash.

        Reads the stream index (stream key -> notification id) in one read transaction.
        """
        prefix = self.datastore.stream_prefix(originator_id)
        with self.datastore.read() as txn:
            return [
                decode_record(bytes(packed), bytes(txn.get(packed, db=self._log)))
                for _key, packed in _iter_stream(
                    txn.cursor(db=self._index), prefix, gt=None, lte=None, desc=False, limit=None
                )
            ]

    def append_log(self, entries: Sequence[tuple[int, bytes]]) -> None:
        """Append records verbatim, as a copy of another ledger (backups, migration).

        ``entries`` are ``(position, hash + body)`` continuing this log: positions follow
        its head without gaps and each hash chains to the previous record's.

        Tags are not copied: a non-empty copy records format version 1 (no tag index) in the
        same transaction, so the engine re-derives every record's tags when it opens the copy
        (``build_tag_index``), exactly as for a store written before the tag index.

        :raises IntegrityError: a position or hash does not continue the log, or a stream
            version exists; nothing of the batch is written.
        """
        prepared = []
        for position, entry in entries:
            record = decode_entry(position, entry)
            key = self.datastore.stream_prefix(record.originator_id) + pack_version(
                record.originator_version
            )
            prepared.append((position, key, bytes(entry)))

        def insert(txn: Any) -> None:
            _refuse_existing(txn, self._index, [key for _, key, _ in prepared])
            cursor = txn.cursor(db=self._log)
            if cursor.last():
                last_id, prev_hash = _ID.unpack(cursor.key())[0], bytes(cursor.value()[:HASH_SIZE])
            else:
                last_id, prev_hash = 0, GENESIS_HASH
            for position, _key, entry in prepared:
                if (
                    position != last_id + 1
                    or chain_hash(prev_hash, entry[HASH_SIZE:]) != entry[:HASH_SIZE]
                ):
                    msg = f"record {position} does not continue the log at {last_id}"
                    raise Refused(LedgerIntegrityError(msg, path=self.datastore.path))
                last_id, prev_hash = position, entry[:HASH_SIZE]
            self.datastore.shared.log_tail = None  # the log's end moves under it
            for position, key, entry in prepared:
                packed = _ID.pack(position)
                txn.put(key, packed, db=self._index)
                txn.put(packed, entry, db=self._log, append=True)
            if prepared:
                txn.put(FORMAT_KEY, b"1", db=self._meta)

        self.datastore.write(insert, sum(len(e) + 64 for _, _, e in prepared))
        if prepared:
            self.datastore.shared.tag_index_built = False

    def subscribe(
        self, gt: int | None = None, topics: Sequence[str] = ()
    ) -> Subscription[ApplicationRecorder]:
        """Iterate notifications after ``gt``, blocking for new ones.

        Commits in this process wake the subscription at once; other processes' commits are
        seen by polling every ``poll_interval`` seconds.
        """
        return LMDBSubscription(self, gt=gt, topics=topics)


class LMDBSubscription(ListenNotifySubscription[LMDBApplicationRecorder]):
    """Subscription woken by in-process commits and by polling for other processes."""

    def __init__(
        self,
        recorder: LMDBApplicationRecorder,
        gt: int | None = None,
        topics: Sequence[str] = (),
    ) -> None:
        assert isinstance(recorder, LMDBApplicationRecorder)
        self._poll_interval = recorder.datastore.poll_interval
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        recorder.datastore.listen(self._has_been_notified)

    def _loop_on_pull(self) -> None:
        try:
            self._pull()
            while not self._has_been_stopped:
                self._has_been_notified.wait(timeout=self._poll_interval)
                self._pull()
        except BaseException as e:
            if self._thread_error is None:
                self._thread_error = e
            self.stop()

    def stop(self) -> None:
        super().stop()
        self._recorder.datastore.unlisten(self._has_been_notified)


def _refuse_destroyed(
    requests: list[WriteRequest[Any]], check: SealedKeyCheck
) -> list[WriteRequest[Any]]:
    """The plain appends of ``requests`` whose sealed states (``payload[2]``: their data key
    ids) ``check`` lets through; each refused one gets the error ``check`` gave."""
    kept: list[WriteRequest[Any]] = []
    for request in requests:
        sealed = request.payload[2]
        refusal = check(sealed) if sealed else None
        if refusal is not None:
            request.result, request.error = None, refusal
        else:
            kept.append(request)
    return kept


def _gathered(
    requests: list[WriteRequest[Any]],
) -> tuple[list[tuple[bytes, bytes]], list[Sequence[str]] | None]:
    """The prepared rows of plain appends (``payload``: rows and tags) in request order, and
    their tags (None when no row has any)."""
    rows: list[tuple[bytes, bytes]] = []
    tags: list[Sequence[str]] | None = None
    for request in requests:
        prepared, request_tags = request.payload[0], request.payload[1]
        if tags is None and request_tags is not None and any(request_tags):
            tags = [()] * len(rows)
        rows += prepared
        if tags is not None:
            tags += request_tags if request_tags is not None else [()] * len(prepared)
    return rows, tags


def _take_back(txn: Any, db: Any, entries: list[tuple[bytes, bytes]]) -> None:
    """Delete each ``(key, value)`` of ``entries`` that ``db`` holds with that value: the
    entries a put without overwriting added (a key it found taken kept its own value)."""
    for key, value in entries:
        if txn.get(key, db=db) == value:
            txn.delete(key, db=db)


def _refuse_existing(txn: Any, db: Any, keys: list[bytes]) -> None:
    """Raise :class:`Refused` if a stream key exists in ``db`` or repeats in ``keys``."""
    seen: set[bytes] = set()
    for key in keys:
        if key in seen or txn.get(key, db=db) is not None:
            msg = f"Stored event already recorded: {key.hex()}"
            raise Refused(LedgerIntegrityError(msg))
        seen.add(key)


def _refuse_existing_rows(txn: Any, db: Any, rows: list[tuple[bytes, bytes]]) -> None:
    """Raise :class:`Refused` if the stream key of a ``(key, body)`` row exists in ``db`` or
    repeats in ``rows`` (one ``getmulti`` into LMDB)."""
    keys = [key for key, _ in rows]
    found = txn.cursor(db=db).getmulti(keys)
    if found or len(set(keys)) != len(keys):
        seen: set[bytes] = set()
        existing = {bytes(key) for key, _ in found}
        for key in keys:
            if key in seen or key in existing:
                msg = f"Stored event already recorded: {key.hex()}"
                raise Refused(LedgerIntegrityError(msg))
            seen.add(key)


def _check_tracking(txn: Any, db: Any, tracking: Tracking) -> None:
    """Raise :class:`Refused` unless ``tracking`` is newer than the recorded position."""
    current = txn.get(tracking.application_name.encode("utf-8"), db=db)
    if current is not None and _ID.unpack(current)[0] >= tracking.notification_id:
        msg = (
            f"Tracking notification ID {tracking.notification_id} for "
            f"{tracking.application_name!r} not greater than current max tracking ID "
            f"{_ID.unpack(current)[0]}"
        )
        raise Refused(LedgerIntegrityError(msg))


def _insert_tracking(txn: Any, db: Any, tracking: Tracking) -> None:
    _check_tracking(txn, db, tracking)
    txn.put(tracking.application_name.encode("utf-8"), _ID.pack(tracking.notification_id), db=db)


class LMDBTrackingRecorder(LMDBRecorder, TrackingRecorder):
    """Records the highest processed notification id per upstream application name."""

    def __init__(self, datastore: LMDBDatastore, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        self._tracking = datastore.db(b"tracking")

    def insert_tracking(self, tracking: Tracking) -> None:
        """Record ``tracking``.

        :raises IntegrityError: its id is not greater than the recorded one.
        """
        self.datastore.write(lambda txn: _insert_tracking(txn, self._tracking, tracking))

    def max_tracking_id(self, application_name: str) -> int | None:
        """Highest tracked notification id of ``application_name``, or None."""
        with self.datastore.read() as txn:
            value = txn.get(application_name.encode("utf-8"), db=self._tracking)
            return None if value is None else cast(int, _ID.unpack(value)[0])


class LMDBProcessRecorder(LMDBTrackingRecorder, LMDBApplicationRecorder, ProcessRecorder):
    """Application recorder whose inserts may carry a tracking record, written atomically."""

    def __init__(self, datastore: LMDBDatastore) -> None:
        super().__init__(datastore)


class LMDBFactory(InfrastructureFactory[LMDBTrackingRecorder]):
    """Infrastructure factory of the LMDB persistence module (the library's DCB factory over
    the same ledger is its subclass :class:`memory_ledger.ledger.lmdb_dcb.LMDBDCBFactory`,
    ``PERSISTENCE_MODULE=memory_ledger.ledger.lmdb_dcb``, as the library keeps ``dcb/``).

    Settings (from the ``env`` given to the factory, optionally prefixed by an application
    name): ``LMDB_PATH`` (required, a directory), ``LMDB_MAP_SIZE`` (bytes),
    ``LMDB_SYNC`` (y/n, default y), ``LMDB_POLL_INTERVAL`` (seconds),
    ``LMDB_READONLY`` (y/n, default n: open an existing store read-only),
    ``LMDB_ENGINE_STORE`` (y/n, default n: the ledger of an engine's store, see
    :class:`LMDBDatastore`'s ``engine_store``),
    ``ORIGINATOR_ID_TYPE`` (``uuid`` or ``text``).

    :raises LedgerSettingError: (an ``OSError``, as the library's SQLite factory raises) a
        setting is missing or invalid; the message names its key.
    :raises LedgerOperationalError: the store cannot be opened (see :class:`LMDBDatastore`).
    :raises ForeignStoreError: the directory does not hold a memory-ledger ledger.
    """

    LMDB_PATH = "LMDB_PATH"
    LMDB_MAP_SIZE = "LMDB_MAP_SIZE"
    LMDB_SYNC = "LMDB_SYNC"
    LMDB_POLL_INTERVAL = "LMDB_POLL_INTERVAL"
    LMDB_READONLY = "LMDB_READONLY"
    LMDB_ENGINE_STORE = "LMDB_ENGINE_STORE"
    ORIGINATOR_ID_TYPE = "ORIGINATOR_ID_TYPE"
    CREATE_TABLE = "CREATE_TABLE"

    aggregate_recorder_class = LMDBAggregateRecorder
    application_recorder_class = LMDBApplicationRecorder
    tracking_recorder_class = LMDBTrackingRecorder
    process_recorder_class = LMDBProcessRecorder

    def __init__(self, env: Environment | EnvType | None):
        super().__init__(env)
        path = self.env.get(self.LMDB_PATH)
        if not path:
            msg = (
                "LMDB store directory not found in environment with keys: "
                f"{', '.join(self.env.create_keys(self.LMDB_PATH))}"
            )
            raise LedgerSettingError(msg)
        map_size = self._int_setting(self.LMDB_MAP_SIZE, DEFAULT_MAP_SIZE)
        if map_size <= 0:
            msg = f"{self.LMDB_MAP_SIZE} must be a positive number of bytes, got {map_size}"
            raise LedgerSettingError(msg)
        raw_sync = self.env.get(self.LMDB_SYNC, "y") or "y"
        try:
            sync = strtobool(raw_sync)
        except ValueError:
            msg = f"LMDB environment value for key '{self.LMDB_SYNC}' is not y/n: {raw_sync!r}"
            raise LedgerSettingError(msg) from None
        raw_poll = self.env.get(self.LMDB_POLL_INTERVAL, "0.05") or "0.05"
        try:
            poll_interval = float(raw_poll)
        except ValueError:
            poll_interval = math.nan
        if not (math.isfinite(poll_interval) and poll_interval > 0):
            msg = (
                f"LMDB environment value for key '{self.LMDB_POLL_INTERVAL}' is not a positive "
                f"number of seconds: {raw_poll!r}"
            )
            raise LedgerSettingError(msg) from None
        raw_readonly = self.env.get(self.LMDB_READONLY, "n") or "n"
        try:
            readonly = bool(strtobool(raw_readonly))
        except ValueError:
            msg = (
                f"LMDB environment value for key '{self.LMDB_READONLY}' is not y/n: "
                f"{raw_readonly!r}"
            )
            raise LedgerSettingError(msg) from None
        raw_engine = self.env.get(self.LMDB_ENGINE_STORE, "n") or "n"
        try:
            engine_store = bool(strtobool(raw_engine))
        except ValueError:
            msg = (
                f"LMDB environment value for key '{self.LMDB_ENGINE_STORE}' is not y/n: "
                f"{raw_engine!r}"
            )
            raise LedgerSettingError(msg) from None
        originator_id_type = (self.env.get(self.ORIGINATOR_ID_TYPE, "uuid") or "uuid").lower()
        if originator_id_type not in ("uuid", "text"):
            msg = (
                f"Invalid {self.ORIGINATOR_ID_TYPE} '{originator_id_type}', "
                "must be 'uuid' or 'text'"
            )
            raise LedgerSettingError(msg)
        self.datastore = LMDBDatastore(
            path,
            map_size=map_size,
            sync=sync,
            originator_id_type=cast(OriginatorIdType, originator_id_type),
            poll_interval=poll_interval,
            readonly=readonly,
            engine_store=engine_store,
        )

    def _int_setting(self, key: str, default: int) -> int:
        raw = (self.env.get(key) or "").strip()
        if not raw:
            return default
        try:
            return int(raw)
        except ValueError:
            msg = f"LMDB environment value for key '{key}' is not an integer: {raw!r}"
            raise LedgerSettingError(msg) from None

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        recorder = self.aggregate_recorder_class(datastore=self.datastore, purpose=purpose)
        if self.env_create_table():
            recorder.create_table()
        return recorder

    def application_recorder(self) -> ApplicationRecorder:
        topic = self.env.get(self.APPLICATION_RECORDER_TOPIC)
        recorder_class: type[LMDBApplicationRecorder] = (
            resolve_topic(topic) if topic else self.application_recorder_class
        )
        assert issubclass(recorder_class, LMDBApplicationRecorder)
        return recorder_class(datastore=self.datastore)

    def tracking_recorder(
        self, tracking_recorder_class: type[LMDBTrackingRecorder] | None = None
    ) -> LMDBTrackingRecorder:
        if tracking_recorder_class is None:
            topic = self.env.get(self.TRACKING_RECORDER_TOPIC)
            tracking_recorder_class = (
                resolve_topic(topic) if topic else self.tracking_recorder_class
            )
        assert tracking_recorder_class is not None
        assert issubclass(tracking_recorder_class, LMDBTrackingRecorder)
        return tracking_recorder_class(datastore=self.datastore)

    def process_recorder(self) -> ProcessRecorder:
        topic = self.env.get(self.PROCESS_RECORDER_TOPIC)
        recorder_class: type[LMDBProcessRecorder] = (
            resolve_topic(topic) if topic else self.process_recorder_class
        )
        assert issubclass(recorder_class, LMDBProcessRecorder)
        return recorder_class(datastore=self.datastore)

    def env_create_table(self) -> bool:
        """Whether recorders create their named databases now (``CREATE_TABLE``, default y)."""
        return bool(strtobool(self.env.get(self.CREATE_TABLE, "yes") or "yes"))

    def close(self) -> None:
        self.datastore.close()


Factory = LMDBFactory


def _damaged_after(error: LedgerDamagedError, last: int, path: str) -> LedgerDamagedError:
    """``error`` (met walking the log after position ``last``) as a typed error naming the
    first position not read, ``last + 1``, and the last one read (0: none)."""
    if getattr(error, "position", None) is not None:
        return error
    good = f"positions 1..{last} read" if last else "no position read"
    msg = (
        f"ledger record {last + 1}: the LMDB ledger's B-tree is damaged below the record "
        f"level ({good}): {error}"
    )
    kind = LedgerRecordError if isinstance(error, LedgerRecordError) else LedgerDamagedError
    return kind(msg, path=path, position=last + 1, reason_code=error.reason_code)
