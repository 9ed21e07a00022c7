"""The commit journal of an LMDB ledger: a durable commit waits for one flush, not two in a row.

LMDB makes a commit durable with two flushes, one after the other: the transaction's data
pages (``fdatasync``), then the meta page that points at them (an ``O_DSYNC`` write). The
first orders the writes (no meta page may reach the disk before the pages it names), the
second makes the commit durable. Opened with ``MDB_NOMETASYNC``, LMDB leaves the second out
and stays consistent after a power loss, but may lose its last transaction: that meta page
is flushed by the next commit's data flush (or ``mdb_env_sync``).

The journal keeps that last transaction. Inside the write transaction every write (each
put, multi-put and delete, in order, with its named database) is recorded; before the
commit the record is written to one of two slot files beside ``data.mdb``
(``commit-0.journal``, ``commit-1.journal``, by the parity of the transaction id) with the
transaction id, the end of the log the transaction was built on (position and record hash)
and a CRC-32, and that slot is flushed on a helper thread while LMDB writes and flushes
the data pages. The commit returns once both flushes are done: the two run at the same time,
so a durable commit waits for about one flush where it waited for two in a row. What that
saves depends on the disk: on this project's 2-vCPU virtual disk, idle, nothing measurable
(two flushes in a row cost about what one does there); with other writers queueing flushes,
the LMDB commit of a LangGraph put's shape 1.5 -> 0.7 ms (docs/benchmarks.md, "A single
put: where its wall time goes").

**Recovery** (``_SharedEnvironment._recover`` in :mod:`memory_ledger.ledger.lmdb`, on
every writable open, under LMDB's writer lock): when the durable state is the one right before a slot's transaction (the slot's id
is the next transaction id and the log ends at the slot's base position with the slot's
base hash), the slot's writes are replayed in one write transaction, flushed in full (data
and meta). At most one acknowledged transaction can be missing: commit ``N``'s data flush
also flushes the meta page of commit ``N - 1``, and a slot is rewritten only by commit
``N + 2``, which cannot begin before commit ``N + 1`` returned. A slot whose CRC fails
(torn by a crash while it was written: its commit was never acknowledged) or that does not
continue the durable state (older, or a ledger restored from a backup) is ignored.

A transaction larger than :data:`MAX_RECORDED_BYTES` (a batch of many memories), or one
that writes in a way the recorder does not know, is committed and then flushed in full
(``mdb_env_sync``): two flushes in a row, as LMDB's own. A read-only open does not
recover: after a power loss, a reader that opens the store before any writer sees it
without its last transaction until a writer opens it.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from _thread import allocate_lock
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

__all__ = ["MAX_RECORDED_BYTES", "CommitJournal", "JournaledTransaction", "SLOT_FILES"]

SLOT_FILES = ("commit-0.journal", "commit-1.journal")
"""The two slot files, in the ledger folder beside ``data.mdb``."""

MAX_RECORDED_BYTES = 48 * 1024
"""A transaction that writes more than this (keys and values) is not journaled: it is
flushed in full after its commit (``mdb_env_sync``). A single command of a few memories
writes a few kilobytes; a batch of 100 LangGraph puts about 270 KB, whose own data flush
outweighs the meta page's, and whose slot would cost a write as large as the data pages'
(measured: batches of 100 journaled took up to twice as long on a busy disk). Below the
slot files' preallocated size, so a journaled slot never grows its file."""

_PREALLOCATED = 64 * 1024
"""Bytes of zeros a new slot file is created with, so that a usual commit overwrites the
file in place and its flush writes no file size (no metadata)."""

_MAGIC = b"MLJRNL01"
_HEADER = struct.Struct(">8sQQ32sQI")
"""magic, transaction id, base position, base hash, body length, CRC-32 of the body."""

_PUT, _PUTMULTI, _DELETE = 0, 1, 2
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()


class _Recording:
    """The writes of one transaction, as replayable operations (see :meth:`ops`)."""

    __slots__ = ("complete", "names", "ops", "size")

    def __init__(self, names: dict[Any, bytes]) -> None:
        self.names = names
        self.ops: list[tuple[Any, ...]] = []
        self.size = 0
        self.complete = True
        """False once a write could not be recorded: the commit is then flushed in full."""

    def name(self, db: Any) -> bytes | None:
        name = self.names.get(db)
        if name is None:
            self.give_up()
        return name

    def add(self, op: tuple[Any, ...], size: int) -> None:
        if not self.complete:
            return
        self.size += size
        if self.size > MAX_RECORDED_BYTES:
            self.give_up()
            return
        self.ops.append(op)

    def give_up(self) -> None:
        self.complete = False
        self.ops = []


class JournaledCursor:
    """A cursor of a :class:`JournaledTransaction`: its writes are recorded, the rest is the
    ``lmdb.Cursor``'s own."""

    __slots__ = ("_cursor", "_name", "_recording")

    def __init__(self, cursor: Any, name: bytes | None, recording: _Recording) -> None:
        self._cursor = cursor
        self._name = name
        self._recording = recording

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._cursor, attribute)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cursor)

    def __enter__(self) -> JournaledCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self._cursor.close()

    def put(
        self,
        key: bytes,
        value: bytes,
        dupdata: bool = True,
        overwrite: bool = True,
        append: bool = False,
    ) -> bool:
        """``lmdb.Cursor.put``, recorded."""
        done = bool(
            self._cursor.put(key, value, dupdata=dupdata, overwrite=overwrite, append=append)
        )
        if done and self._name is not None:
            self._recording.add(
                (_PUT, self._name, bytes(key), bytes(value), overwrite, append),
                len(key) + len(value),
            )
        elif done:
            self._recording.give_up()
        return done

    def putmulti(
        self,
        items: Iterable[tuple[bytes, bytes]],
        dupdata: bool = True,
        overwrite: bool = True,
        append: bool = False,
    ) -> tuple[int, int]:
        """``lmdb.Cursor.putmulti``, recorded (replayed as the same call on the same state)."""
        listed = [(bytes(k), bytes(v)) for k, v in items]
        result = self._cursor.putmulti(listed, dupdata=dupdata, overwrite=overwrite, append=append)
        if self._name is None:
            self._recording.give_up()
        else:
            self._recording.add(
                (_PUTMULTI, self._name, listed, overwrite, append),
                sum(len(k) + len(v) for k, v in listed),
            )
        return result  # type: ignore[no-any-return]

    def delete(self, dupdata: bool = False) -> bool:
        """``lmdb.Cursor.delete`` (the current item), recorded as a delete of its key."""
        key = bytes(self._cursor.key())
        done = bool(self._cursor.delete(dupdata=dupdata))
        if done:
            self._record_delete(key)
        return done

    def replace(self, key: bytes, value: bytes) -> Any:
        """``lmdb.Cursor.replace``, recorded as a put."""
        old = self._cursor.replace(key, value)
        if self._name is None:
            self._recording.give_up()
        else:
            self._recording.add(
                (_PUT, self._name, bytes(key), bytes(value), True, False), len(key) + len(value)
            )
        return old

    def pop(self, key: bytes) -> Any:
        """``lmdb.Cursor.pop``, recorded as a delete."""
        old = self._cursor.pop(key)
        if old is not None:
            self._record_delete(bytes(key))
        return old

    def _record_delete(self, key: bytes) -> None:
        if self._name is None:
            self._recording.give_up()
        else:
            self._recording.add((_DELETE, self._name, key), len(key))


class JournaledTransaction:
    """An ``lmdb.Transaction`` whose writes are recorded for the commit journal.

    Reads, ``id()`` and everything else are the transaction's own (``txn`` is the
    ``lmdb.Transaction``, for calls that need the real one). A write the recorder does not
    know (``drop``; a database it cannot name) marks the recording incomplete, so the
    commit is flushed in full instead of journaled.
    """

    __slots__ = ("_recording", "txn")

    def __init__(self, txn: Any, names: dict[Any, bytes]) -> None:
        self.txn = txn
        self._recording = _Recording(names)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.txn, attribute)

    def cursor(self, db: Any = None) -> JournaledCursor:
        """``lmdb.Transaction.cursor``: a cursor whose writes are recorded."""
        return JournaledCursor(
            self.txn.cursor(db=db), self._recording.names.get(db), self._recording
        )

    def put(
        self,
        key: bytes,
        value: bytes,
        dupdata: bool = True,
        overwrite: bool = True,
        append: bool = False,
        db: Any = None,
    ) -> bool:
        """``lmdb.Transaction.put``, recorded."""
        done = bool(
            self.txn.put(key, value, dupdata=dupdata, overwrite=overwrite, append=append, db=db)
        )
        if done:
            name = self._recording.name(db)
            if name is not None:
                self._recording.add(
                    (_PUT, name, bytes(key), bytes(value), overwrite, append),
                    len(key) + len(value),
                )
        return done

    def replace(self, key: bytes, value: bytes, db: Any = None) -> Any:
        """``lmdb.Transaction.replace``, recorded as a put."""
        old = self.txn.replace(key, value, db=db)
        name = self._recording.name(db)
        if name is not None:
            self._recording.add(
                (_PUT, name, bytes(key), bytes(value), True, False), len(key) + len(value)
            )
        return old

    def delete(self, key: bytes, value: bytes = b"", db: Any = None) -> bool:
        """``lmdb.Transaction.delete``, recorded (a delete of one value of a duplicate key
        is not: the commit is then flushed in full)."""
        done = bool(self.txn.delete(key, value, db=db))
        if done:
            name = self._recording.name(db)
            if value:
                self._recording.give_up()
            elif name is not None:
                self._recording.add((_DELETE, name, bytes(key)), len(key))
        return done

    def pop(self, key: bytes, db: Any = None) -> Any:
        """``lmdb.Transaction.pop``, recorded as a delete."""
        old = self.txn.pop(key, db=db)
        if old is not None:
            name = self._recording.name(db)
            if name is not None:
                self._recording.add((_DELETE, name, bytes(key)), len(key))
        return old

    def drop(self, db: Any, delete: bool = True) -> Any:
        """``lmdb.Transaction.drop``: not recorded (the commit is flushed in full)."""
        self._recording.give_up()
        return self.txn.drop(db, delete=delete)

    @property
    def recorded(self) -> list[tuple[Any, ...]] | None:
        """The writes recorded (None: incomplete, flush the commit in full)."""
        return self._recording.ops if self._recording.complete else None


def replay(txn: Any, ops: list[Any], open_db: Callable[[bytes], Any]) -> None:
    """Apply recorded writes ``ops`` in the write transaction ``txn`` (``open_db(name)``:
    the handle of a named database, opened in ``txn``).

    :raises ValueError: an operation that is not one of the recorded kinds.
    """
    handles: dict[bytes, Any] = {}

    def handle(name: bytes) -> Any:
        if name not in handles:
            handles[name] = open_db(name)
        return handles[name]

    for op in ops:
        kind = op[0]
        if kind == _PUT:
            _, name, key, value, overwrite, append = op
            txn.put(key, value, overwrite=overwrite, append=append, db=handle(name))
        elif kind == _PUTMULTI:
            _, name, items, overwrite, append = op
            txn.cursor(db=handle(name)).putmulti(
                [(k, v) for k, v in items], overwrite=overwrite, append=append
            )
        elif kind == _DELETE:
            _, name, key = op
            txn.delete(key, db=handle(name))
        else:
            msg = f"unknown journaled operation {kind!r}"
            raise ValueError(msg)


class Slot(msgspec.Struct, frozen=True):
    """One slot file's transaction, as read back (:meth:`CommitJournal.read_slots`)."""

    txnid: int
    base_position: int
    base_hash: bytes
    ops: list[Any]


class _Flusher:
    """A helper thread that runs one ``fdatasync`` at a time while the caller commits.

    ``start(fd)`` hands it a file; ``wait()`` returns once that file is flushed (raising the
    ``OSError`` it met). The thread is started on first use and ends with :meth:`close`.
    """

    def __init__(self) -> None:
        self._go = allocate_lock()
        self._go.acquire()
        self._done = allocate_lock()
        self._done.acquire()
        self._fd = -1
        self._error: OSError | None = None
        self._closed = False
        self._thread: threading.Thread | None = None

    def start(self, fd: int) -> None:
        """Begin flushing ``fd`` on the helper thread."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="memory-ledger-journal-flush", daemon=True
            )
            self._thread.start()
        self._fd, self._error = fd, None
        self._go.release()

    def wait(self) -> None:
        """Block until the flush begun by :meth:`start` is done.

        :raises OSError: the flush failed.
        """
        self._done.acquire()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while True:
            self._go.acquire()
            if self._closed:
                return
            try:
                os.fdatasync(self._fd)
            except OSError as e:
                self._error = e
            self._done.release()

    def close(self) -> None:
        """End the helper thread (after the flush under way, if any)."""
        self._closed = True
        if self._thread is not None:
            self._go.release()
            self._thread.join()
            self._thread = None


class CommitJournal:
    """The two slot files of one LMDB environment's folder ``path`` (see the module doc).

    :raises OSError: a slot file cannot be created or opened.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fds: list[int] = []
        self._flusher = _Flusher()
        self._pending = -1
        """The slot written and being flushed (-1: none)."""
        try:
            for name in SLOT_FILES:
                self._fds.append(self._open(os.path.join(path, name)))
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _open(file: str) -> int:
        fd = os.open(file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            if os.fstat(fd).st_size < _PREALLOCATED:
                os.pwrite(fd, bytes(_PREALLOCATED), 0)
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def write(self, txnid: int, base: tuple[int, bytes], ops: list[tuple[Any, ...]]) -> None:
        """Write transaction ``txnid``'s writes ``ops``, built on the log's end ``base``
        (position, record hash), to its slot, and begin flushing it on the helper thread;
        :meth:`wait` waits for that flush.

        :raises OSError: the slot could not be written.
        """
        body = _encoder.encode(ops)
        header = _HEADER.pack(_MAGIC, txnid, base[0], base[1], len(body), zlib.crc32(body))
        slot = txnid % 2
        data = header + body
        if os.pwrite(self._fds[slot], data, 0) != len(data):
            raise OSError(28, "short write to the commit journal")  # ENOSPC-like
        self._flusher.start(self._fds[slot])
        self._pending = slot

    def wait(self) -> None:
        """Wait for the flush begun by :meth:`write`.

        :raises OSError: the flush failed (the slot is not known to be durable).
        """
        if self._pending < 0:
            return
        self._pending = -1
        self._flusher.wait()

    def discard(self, txnid: int) -> None:
        """Blank transaction ``txnid``'s slot (its commit failed), best effort: a slot left
        behind could otherwise be replayed as committed after a power loss."""
        try:
            os.pwrite(self._fds[txnid % 2], bytes(_HEADER.size), 0)
            os.fdatasync(self._fds[txnid % 2])
        except OSError:
            pass

    def read_slots(self) -> list[Slot]:
        """The slots that hold a whole transaction (CRC checked), in no particular order."""
        slots = []
        for fd in self._fds:
            head = os.pread(fd, _HEADER.size, 0)
            if len(head) < _HEADER.size:
                continue
            magic, txnid, position, base_hash, length, crc = _HEADER.unpack(head)
            if magic != _MAGIC:
                continue
            body = os.pread(fd, length, _HEADER.size)
            if len(body) != length or zlib.crc32(body) != crc:
                continue
            try:
                ops = _decoder.decode(body)
            except msgspec.DecodeError:
                continue
            slots.append(Slot(txnid, position, bytes(base_hash), ops))
        return slots

    def close(self) -> None:
        """Stop the helper thread and close the slot files."""
        self._flusher.close()
        for fd in self._fds:
            os.close(fd)
        self._fds = []
