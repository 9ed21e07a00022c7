"""The key store: a namespace's data key, wrapped by the master key, in a file of its own.

One file, ``<store>/keys/data-keys.msgpack`` (msgpack of :class:`KeyStoreState`), beside the
ledger but never inside it: destroying a namespace's key must not leave its bytes in any file
(an LMDB database keeps old values in its free pages; a file replaced whole does not).

Writes are read-modify-write under an exclusive ``flock`` of ``keys/lock`` (several processes
may share a store), and replace the file atomically: the new content is written to a
temporary file, fsynced, renamed over the old one and the folder fsynced, so a crash leaves
the old file or the new one, never a mix. A new data key is in the file, durably, before the
first event sealed with it is appended. Readers read without the lock (a rename is atomic)
and reread when the file's identity ``(inode, mtime, size)`` changes.

What the file holds per key (:class:`DataKeyRecord`): ids only (the key id, and digests of
the namespace, its tenant and its principal, the same digest the ledger's ``namespace:``
tags hold: keyed by the store key in id format 2, :mod:`memory_ledger.ledger.digests`), the
wrapped key, its creation time, and once erased: no key, the erasure's time, command id and
requester. The namespace's names are not stored. The state also records the store's id
format and its store key (wrapped by the master key once the store encrypts).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Collection, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar
from uuid import UUID

import msgspec

from memory_ledger.ledger.faults import fault
from memory_ledger.ledger.key_errors import KeyStoreError, NamespaceErasedError

if TYPE_CHECKING:
    from memory_ledger.ledger.lmdb import LMDBApplicationRecorder

__all__ = [
    "KEY_STORE_FILE",
    "DataKeyRecord",
    "FileKeyStore",
    "KeyStore",
    "KeyStoreState",
]

KEY_STORE_FILE = "data-keys.msgpack"
_FORMAT = 2
"""Key store format 2 records the id format (older releases refuse it: they would derive
unkeyed ids)."""
T = TypeVar("T")


class DataKeyRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One data key of one namespace.

    ``namespace_id``, ``tenant_id`` and ``principal_id`` are uuid5 digests
    (:func:`memory_ledger.ledger.keyring.namespace_ids`). ``wrapped`` is the data key wrapped
    by the master key ``master_key_id``; None once erased. ``erased_at``/``erase_command``/
    ``erased_by`` say when, by which command and at whose request it was destroyed, and
    ``erase_level`` whether the erasure named a ``tenant``, a ``principal`` or a ``namespace``.
    ``ids_from_data_key``: the namespace's ids are keyed by a key derived from its data key
    (destroyed with it); False: by the store key (a store that held events in clear first).
    """

    key_id: UUID
    namespace_id: UUID
    tenant_id: UUID
    principal_id: UUID
    created_at: datetime
    wrapped: bytes | None
    erased_at: datetime | None = None
    erase_command: UUID | None = None
    erased_by: str = ""
    erase_level: str = ""
    ids_from_data_key: bool = False

    @property
    def erased(self) -> bool:
        return self.wrapped is None


class KeyStoreState(msgspec.Struct, frozen=True, kw_only=True):
    """The whole key store: its format, the master key that wrapped the keys, the keys, and
    ``clear_until``: the ledger's last position when encryption was turned on (events up to
    it may be in clear; 0 for a store encrypted from its first event).

    ``id_format``: how the store derives ids (:mod:`memory_ledger.ledger.digests`; 0: not
    recorded yet, a store written before id formats, read as format 1 when its ledger holds
    records). ``id_key``: the store key in clear (a store without a master key);
    ``id_key_wrapped``: the store key wrapped by the master key (an encrypted store).
    """

    format: int = _FORMAT
    master_key_id: str | None = None
    keys: tuple[DataKeyRecord, ...] = ()
    clear_until: int = 0
    id_format: int = 0
    id_key: bytes | None = None
    id_key_wrapped: bytes | None = None


_decoder = msgspec.msgpack.Decoder(KeyStoreState)
_encoder = msgspec.msgpack.Encoder()


class KeyStore(Protocol):
    """Where data keys live (a file beside an LMDB ledger; a table beside a PostgreSQL one).

    ``read()`` returns the current state (empty when nothing was stored yet) and
    ``changed()`` says whether it may differ from the last ``read()``. ``update(change)``
    runs ``change(state) -> (new state or None, result)`` under an exclusive lock against
    the freshest state and stores the new state durably before returning ``result`` (None:
    nothing to store).
    """

    description: str

    def read(self) -> KeyStoreState: ...

    def changed(self) -> bool: ...

    def update(self, change: Callable[[KeyStoreState], tuple[KeyStoreState | None, T]]) -> T: ...


class FileKeyStore:
    """The key store of an LMDB store: ``<folder>/data-keys.msgpack`` (see the module doc).

    :param folder: the ``keys`` folder (created on the first write).
    :param read_only: refuse writes (an audit of a read-only store).
    :raises KeyStoreError: (from its methods) the file is damaged or cannot be read or
        written; names the file.
    """

    def __init__(self, folder: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.folder = Path(folder)
        self.path = self.folder / KEY_STORE_FILE
        self.description = str(self.path)
        self._stat_path = os.fspath(self.path)
        self.read_only = read_only
        self._seen: tuple[int, int, int] | None = None
        self.exclusive: Callable[[Callable[[], None]], None] | None = None
        """Runs the replacement of the file (:meth:`guard`: under the ledger's writer
        lock); None: the replacement runs as it is."""
        self._destroyed: tuple[tuple[int, int, int] | None, dict[bytes, UUID]] = (None, {})
        """``(file identity, {destroyed key id: its namespace id})`` as
        :meth:`destroyed_key_error` last read them (replaced whole)."""
        self._checked = False

    def _identity(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self._stat_path)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise self._error("cannot read", e) from None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def _error(self, doing: str, e: OSError) -> KeyStoreError:
        return KeyStoreError(f"{doing} the key store {self.description!r}: {e.strerror or e}")

    def exists(self) -> bool:
        """Whether the key store file exists."""
        return self._identity() is not None

    def changed(self) -> bool:
        """Whether the file changed (or appeared) since the last :meth:`read`: one ``stat``."""
        return self._identity() != self._seen

    def read(self) -> KeyStoreState:
        """The stored state (empty when there is no file yet).

        :raises KeyStoreError: the file cannot be read or does not decode.
        """
        state, self._seen = self._load()
        return state

    def _load(self) -> tuple[KeyStoreState, tuple[int, int, int] | None]:
        """The stored state and the identity of the file it was read from (None: no file).

        :raises KeyStoreError: the file cannot be read or does not decode.
        """
        for _ in range(3):
            before = self._identity()
            if before is None:
                return KeyStoreState(), None
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                continue
            except OSError as e:
                raise self._error("cannot read", e) from None
            if self._identity() != before:
                continue  # replaced while being read: read the new one
            try:
                state = _decoder.decode(data)
            except msgspec.DecodeError as e:
                msg = f"the key store {self.description!r} is damaged: {e}"
                raise KeyStoreError(msg, reason_code="key_store_damaged") from None
            if state.format > _FORMAT:
                msg = (
                    f"the key store {self.description!r} has format {state.format}, "
                    f"newer than this memory-ledger's {_FORMAT}"
                )
                raise KeyStoreError(msg, reason_code="key_store_format")
            return state, before
        msg = f"the key store {self.description!r} kept changing while being read"
        raise KeyStoreError(msg)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.folder / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise self._error("cannot lock", e) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def update(self, change: Callable[[KeyStoreState], tuple[KeyStoreState | None, T]]) -> T:
        """Apply ``change`` to the freshest state under the lock; store its result durably.

        :raises KeyStoreError: the store is read-only, or the file cannot be written.
        """
        if self.read_only:
            msg = f"the key store {self.description!r} is open read-only"
            raise KeyStoreError(msg, reason_code="read_only")
        with self._locked():
            new, result = change(self.read())
            if new is not None:
                if self.exclusive is not None:
                    self.exclusive(lambda: self._write(new))
                else:
                    self._write(new)
        return result

    def guard(self, recorder: LMDBApplicationRecorder) -> None:
        """Close the window between an append's sealing and its commit against an erasure,
        for the LMDB ledger ``recorder`` of this store: the file is replaced under the
        ledger's writer lock (:meth:`LMDBDatastore.exclusive
        <memory_ledger.ledger.lmdb.LMDBDatastore.exclusive>`), and every append holding
        sealed states asks :meth:`destroyed_key_error` inside its write transaction. An
        append thus commits before the keys are destroyed (and is erased with them) or sees
        them destroyed and is refused; never acknowledged after ``erase()`` returned,
        sealed under a destroyed key. (The PostgreSQL ledger's key store does the same with
        its key row locked ``FOR SHARE``.)"""
        self.exclusive = recorder.datastore.exclusive
        recorder.sealed_key_check = self.destroyed_key_error

    def destroyed_key_error(self, key_ids: Collection[bytes]) -> NamespaceErasedError | None:
        """Run inside an append's write transaction (the ledger's writer lock held, so no
        erasure replaces the file meanwhile) for a batch sealed with the data keys
        ``key_ids`` (16-byte ids): the error to refuse it with when one of them was
        destroyed, else None. One ``stat``; the file is read again only when it changed
        since this check last read it.

        :raises KeyStoreError: the file cannot be read or does not decode.
        """
        identity = self._identity()
        seen, destroyed = self._destroyed
        if identity != seen or not self._checked:
            state, identity = self._load()
            destroyed = {r.key_id.bytes: r.namespace_id for r in state.keys if r.erased}
            self._destroyed = (identity, destroyed)
            self._checked = True
        erased = sorted({str(destroyed[k]) for k in key_ids if k in destroyed})
        if not erased:
            return None
        msg = (
            f"namespace {', '.join(erased)} was erased (by this process or another) before "
            "this write committed; nothing was written (use another principal or scope id)"
        )
        return NamespaceErasedError(msg)

    def _write(self, state: KeyStoreState) -> None:
        data = _encoder.encode(state)
        tmp = self.folder / f".{KEY_STORE_FILE}.{os.getpid()}.tmp"
        try:
            with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            fault("keys.replace")
            os.replace(tmp, self.path)
            dir_fd = os.open(self.folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as e:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise self._error("cannot write", e) from None
        self._seen = self._identity()
