"""The keyring: per-namespace data keys, created on first use, unwrapped once, erasable.

Encryption at rest (issue #16; docs/design.md): every event of a namespace is sealed
(:mod:`memory_ledger.ledger.sealing`) with that namespace's data key, a random AES-256 key
wrapped by the host's master key (:mod:`memory_ledger.ledger.master_key`) and kept in the
key store (:mod:`memory_ledger.ledger.key_store`). Destroying the key erases the namespace's
payloads (crypto-shredding) while the hash chain, computed over the sealed bytes, verifies.

- :meth:`Keyring.sealer` gives the data key to seal with (creating it, durably, first).
- :meth:`Keyring.opener` gives the key to open a sealed payload with: None for an erased
  key (the payload reads as erased), :class:`DataKeyMissingError` for a key never held.
- :meth:`Keyring.erase` destroys the keys of the matching namespaces (the commit point of an
  erasure: once the key store file is replaced, the content is gone).
- :meth:`Keyring.rotate` re-wraps every live key under a new master key; events are untouched.

The keyring also derives the store's ids (:attr:`Keyring.digests`, an
:class:`~memory_ledger.ledger.digests.IdDigests`): in id format 2 under the store key and a
key per namespace (:meth:`Keyring.namespace_id_key`) that an erasure destroys with the
namespace's data key.

Unwrapped keys live in this process's memory only. A key erased by another process is
dropped here at the next :meth:`refresh` (the engine calls it before each append and each
catch-up page: one ``stat`` of the key file).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from uuid import UUID, uuid4, uuid5

import msgspec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memory_ledger.ledger.digests import (
    CURRENT_ID_FORMAT,
    ID_FORMAT_UNKEYED,
    CallDigests,
    IdDigests,
)
from memory_ledger.ledger.ids import ID_ROOT, Namespace
from memory_ledger.ledger.key_errors import (
    DataKeyMissingError,
    EncryptionNotConfiguredError,
    KeyStoreError,
    MasterKeyError,
    NamespaceErasedError,
)
from memory_ledger.ledger.key_store import DataKeyRecord, KeyStore, KeyStoreState
from memory_ledger.ledger.master_key import KEY_SIZE, KeyWrapper
from memory_ledger.ledger.sealing import Sealer

__all__ = [
    "Keyring",
    "KeyringStatus",
    "NamespaceMatch",
    "namespace_ids",
    "tenant_id",
    "principal_id",
]


def tenant_id(tenant: str) -> UUID:
    """uuid5 digest of a tenant name (id format 1; a store's own derivation is
    :attr:`Keyring.digests`)."""
    return uuid5(ID_ROOT, "tenant\x1f" + tenant)


def principal_id(tenant: str, principal: str) -> UUID:
    """uuid5 digest of a (tenant, principal) pair (id format 1)."""
    return uuid5(ID_ROOT, "principal\x1f" + tenant + "\x1f" + principal)


def namespace_ids(namespace: Namespace) -> tuple[UUID, UUID, UUID]:
    """``(namespace id, tenant id, principal id)`` of ``namespace`` in id format 1 (uuid5);
    the namespace id is the one its ``namespace:`` tag names. A store's own derivation is
    :meth:`Keyring.namespace_ids`."""
    return (
        uuid5(ID_ROOT, "namespace\x1f" + namespace.key()),
        tenant_id(namespace.tenant),
        principal_id(namespace.tenant, namespace.principal),
    )


class NamespaceMatch(msgspec.Struct, frozen=True, kw_only=True):
    """Which namespaces an erasure names: every namespace of ``tenant``; with ``principal``
    only that principal's; with ``scope_id`` too, exactly one namespace.

    :raises NamespaceErasedError: never; see :meth:`validated`.
    """

    tenant: str
    principal: str | None = None
    scope_id: str | None = None

    def validated(self) -> NamespaceMatch:
        """Self, or :class:`~memory_ledger.ledger.ids.InvalidNamespaceError` naming the part
        that is empty, too long, or given without the part above it."""
        from memory_ledger.ledger.ids import InvalidNamespaceError  # noqa: PLC0415

        if self.scope_id is not None and self.principal is None:
            msg = "an erasure naming a scope id must name its principal too"
            raise InvalidNamespaceError(msg, parameter="principal", reason_code="missing_principal")
        Namespace(
            self.tenant,
            "principal" if self.principal is None else self.principal,
            "scope" if self.scope_id is None else self.scope_id,
        ).validated()
        return self

    @property
    def level(self) -> str:
        """``"tenant"``, ``"principal"`` or ``"namespace"``: how much the match names."""
        if self.scope_id is not None:
            return "namespace"
        return "principal" if self.principal is not None else "tenant"

    def matches(self, record: DataKeyRecord, digests: IdDigests) -> bool:
        """Whether ``record`` is a key of a namespace this match names (ids derived by
        ``digests``, the store's: :attr:`Keyring.digests`)."""
        if self.scope_id is not None and self.principal is not None:
            ns = Namespace(self.tenant, self.principal, self.scope_id)
            return record.namespace_id == digests.namespace_id(ns)
        if self.principal is not None:
            return record.principal_id == digests.principal_id(self.tenant, self.principal)
        return record.tenant_id == digests.tenant_id(self.tenant)


class KeyringStatus(msgspec.Struct, frozen=True, kw_only=True):
    """What ``stats`` says of encryption: on or off, the master key's id (never the key),
    how many namespaces have live keys and how many were erased, and the key store."""

    encrypting: bool
    master_key_id: str | None
    live_keys: int
    erased_keys: int
    key_store: str


def _now() -> datetime:
    return datetime.now(UTC)


class Keyring:
    """Data keys of one store (see the module doc).

    :param store: the key store.
    :param master: the master key; None keeps new payloads in clear (allowed only while the
        key store holds no wrapped key and names no master key).
    :param clock: the creation and erasure times of keys (default: now, UTC).
    :param read_only: never write the key store.
    :param head: the ledger's last position; read once, when the store's first data key is
        created, and kept as ``clear_until`` (events up to it are in clear).
    :param sealed_records: whether the ledger holds sealed records; asked before the first
        data key of an empty key store is created: True means the store's key store was
        lost (a copy without ``keys/``), and creating keys anew would strand those records.
    :raises MasterKeyError: the store's keys were wrapped by a master key and none is given
        (``master_key_missing``), or another one is given (``master_key_mismatch``).
    :raises KeyStoreError: the key store cannot be read.
    """

    def __init__(
        self,
        store: KeyStore,
        master: KeyWrapper | None,
        *,
        clock: Callable[[], datetime] = _now,
        read_only: bool = False,
        head: Callable[[], int] = lambda: 0,
        sealed_records: Callable[[], bool] = lambda: False,
        keyed_records: Callable[[], bool] = lambda: False,
    ) -> None:
        self.store = store
        self._read_only = read_only or bool(getattr(store, "read_only", False))
        self._head = head
        self._sealed_records = sealed_records
        self.master = master
        self._clock = clock
        self._lock = threading.RLock()
        self._sealers: dict[Namespace, Sealer] = {}
        self._openers: dict[bytes, AESGCM | None] = {}
        self._erased_cache: dict[Namespace, bool] = {}
        self._revoked: set[bytes] = set()
        self._id_keys: dict[Namespace, bytes] = {}
        self._store_key_bytes: bytes | None = None
        self.erased_namespace_ids: frozenset[UUID] = frozenset()
        """The namespace ids whose keys were erased (empty: no erasure yet)."""
        self._state = KeyStoreState()
        self.generation = 0
        """How many times the key store's state was adopted (:meth:`_load`): unchanged, no
        key, id format or erasure this keyring answers with changed."""
        self._load(store.read())
        self._check_master(self._state)
        self.digests = IdDigests(
            self._id_format(keyed_records), self._store_key, self.namespace_id_key
        )
        """How this store derives ids (:mod:`memory_ledger.ledger.digests`)."""

    def _load(self, state: KeyStoreState) -> None:
        """Adopt ``state``; drop every unwrapped key and cached answer."""
        self._state = state
        self.generation += 1
        self._sealers = {}
        self._openers = {}
        self._erased_cache = {}
        self._id_keys = {}
        self._store_key_bytes = None
        digests: IdDigests | None = getattr(self, "digests", None)
        if digests is not None and state.id_format and state.id_format != digests.id_format:
            digests.adopt(state.id_format)  # recorded by another process (or a migration)
        self.erased_namespace_ids = frozenset(
            r.namespace_id for r in state.keys if r.erased or r.key_id.bytes in self._revoked
        )

    def call_digests(self) -> CallDigests:
        """One call's digests (:meth:`IdDigests.for_call`) stamped with this keyring's
        :attr:`generation`, for :meth:`still_current`."""
        digests = CallDigests(self.digests)
        digests.generation = self.generation
        return digests

    def still_current(self, digests: IdDigests) -> bool:
        """Whether ``digests`` came from :meth:`call_digests` and the key store's state was
        not adopted again since: every id they derived (and remember) is the one fresh
        digests would derive now, with the same keys and id format."""
        return isinstance(digests, CallDigests) and digests.generation == self.generation

    def is_erased(self, namespace: Namespace) -> bool:
        """Whether ``namespace`` was erased (cached per namespace)."""
        found = self._erased_cache.get(namespace)
        if found is None:
            found = self.digests.namespace_id(namespace) in self.erased_namespace_ids
            self._erased_cache[namespace] = found
        return found

    def _claimed(self, state: KeyStoreState) -> KeyStoreState:
        """``state`` of an encrypted store: the first key written (or erasure) records the
        master key's id and ``clear_until``; from then on the store needs that key to open.
        Opening alone never does this, so an audit with a key leaves a clear store clear.

        :raises KeyStoreError: the key store is empty but the ledger holds sealed records.
        """
        self._check_master(state)
        if not state.id_format:
            state = msgspec.structs.replace(state, id_format=self.digests.id_format)
        if state.master_key_id is not None:
            return state
        assert self.master is not None
        if not state.keys and self._sealed_records():
            msg = (
                f"the ledger holds sealed records but the key store {self.store.description!r} "
                "holds no keys: restore the store's keys (its keys/ folder, or a backup's) "
                "before writing; nothing was written"
            )
            raise KeyStoreError(msg, reason_code="key_store_missing")
        if state.id_key is not None:  # the store key is wrapped from now on
            state = msgspec.structs.replace(
                state, id_key=None, id_key_wrapped=self.master.wrap(state.id_key)
            )
        return msgspec.structs.replace(
            state, master_key_id=self.master.key_id, clear_until=self._head()
        )

    @property
    def clear_until(self) -> int:
        """The ledger's last position when encryption was turned on: events at or before it
        may be stored in clear (0: the store encrypted from its first event)."""
        return self._state.clear_until

    def _check_master(self, state: KeyStoreState) -> None:
        if state.master_key_id is None:
            return
        if self.master is None:
            msg = (
                f"this store's data keys are wrapped by master key {state.master_key_id}; "
                "configure it (master_key_file in [memory], MEMORY_LEDGER_MASTER_KEY_FILE, "
                "or master_key=)"
            )
            raise MasterKeyError(msg, reason_code="master_key_missing")
        if self.master.key_id != state.master_key_id:
            msg = (
                f"the configured master key {self.master.key_id} is not the one that wrapped "
                f"this store's data keys ({state.master_key_id}); nothing was written"
            )
            raise MasterKeyError(msg, reason_code="master_key_mismatch")

    @property
    def encrypting(self) -> bool:
        """Whether new events are sealed (a master key is configured)."""
        return self.master is not None

    def refresh(self, *, force: bool = False) -> None:
        """Reread the key store if another process changed it (one ``stat`` otherwise), or
        always with ``force``; drops every unwrapped key it held (an erased key is never
        used again)."""
        if force or self.store.changed():
            with self._lock:
                state = self.store.read()
                self._check_master(state)
                self._load(state)

    # Ids ------------------------------------------------------------------------------------

    def _id_format(self, keyed_records: Callable[[], bool]) -> int:
        """The store's id format: the recorded one; else the current one for an empty
        ledger (recorded with the store key, at the first derivation that needs it), else 1
        (a store written before id formats; recorded at its next key store write).

        :raises KeyStoreError: a newer id format (``key_store_format``), or a ledger whose
            records carry keyed ids with no store key in the key store
            (``key_store_missing``: the key store was lost).
        """
        recorded = self._state.id_format
        if recorded > CURRENT_ID_FORMAT:
            msg = (
                f"the key store {self.store.description!r} records id format {recorded}, "
                f"newer than this memory-ledger's {CURRENT_ID_FORMAT}"
            )
            raise KeyStoreError(msg, reason_code="key_store_format")
        if recorded:
            return recorded
        if not self._head():
            return CURRENT_ID_FORMAT
        if keyed_records():
            msg = (
                f"the ledger's records carry keyed ids but the key store "
                f"{self.store.description!r} holds no store key: restore the store's keys "
                "(its keys/ folder, or a backup's) before opening it"
            )
            raise KeyStoreError(msg, reason_code="key_store_missing")
        return ID_FORMAT_UNKEYED

    def _store_key(self) -> bytes:
        """The store key of id format 2 (created, durably, by the first derivation of a
        writable store that has none; a read-only open of such a store gets a throwaway key:
        it has no ids to match and writes none).

        :raises MasterKeyError: the store key is wrapped and no master key is configured.
        :raises KeyStoreError: the key store cannot be written.
        """
        key = self._store_key_bytes
        if key is not None:
            return key
        with self._lock:
            state = self._state
            if state.id_key is None and state.id_key_wrapped is None:
                if self._read_only:
                    return os.urandom(KEY_SIZE)
                state = self.store.update(self._with_store_key)
                self._load(state)
            if state.id_key is not None:
                key = state.id_key
            else:
                assert state.id_key_wrapped is not None
                if self.master is None:
                    msg = f"this store's ids are keyed by a key wrapped by {state.master_key_id}"
                    raise MasterKeyError(msg, reason_code="master_key_missing")
                key = self.master.unwrap(state.id_key_wrapped)
            self._store_key_bytes = key
            return key

    def _with_store_key(self, current: KeyStoreState) -> tuple[KeyStoreState | None, KeyStoreState]:
        if current.id_key is not None or current.id_key_wrapped is not None:
            return None, current  # another process made it meanwhile
        key = os.urandom(KEY_SIZE)
        fields: dict[str, object] = {
            "id_format": current.id_format or self.digests.id_format,
            "format": max(current.format, KeyStoreState().format),
        }
        if current.master_key_id is not None and self.master is not None:
            fields["id_key_wrapped"] = self.master.wrap(key)
        else:
            fields["id_key"] = key
        new = msgspec.structs.replace(current, **fields)
        return new, new

    def _store_derived(self, namespace: Namespace) -> bytes:
        name = b"namespace-key\x1f" + namespace.key().encode("utf-8")
        return hmac.digest(self._store_key(), name, hashlib.sha256)

    def namespace_id_key(self, namespace: Namespace) -> bytes:
        """The key of the ids inside ``namespace`` (id format 2; 32 bytes): derived from its
        data key in a store encrypted from its first event (gone once the namespace is
        erased), else from the store key. A writable encrypted store creates the namespace's
        data key first when it has none (its first write would). An erased namespace, or a
        namespace without a key in a read-only open, gets a throwaway key: it has no ids to
        match and writes none.

        :raises MasterKeyError: the master key does not unwrap the data key.
        :raises KeyStoreError: the key store cannot be written.
        """
        found = self._id_keys.get(namespace)
        if found is not None:
            return found
        with self._lock:
            found = self._make_id_key(namespace)
            if found is not None:
                self._id_keys[namespace] = found
                return found
        return os.urandom(KEY_SIZE)

    def _make_id_key(self, namespace: Namespace) -> bytes | None:
        if self.master is None:
            return self._store_derived(namespace)
        namespace_id = self.digests.namespace_id(namespace)
        try:
            record = self._live_record(self._state, namespace_id)
            if record is None:
                state = self._state
                if state.master_key_id is not None:
                    from_data_key = state.clear_until == 0
                else:
                    from_data_key = self._head() == 0
                if not from_data_key:
                    return self._store_derived(namespace)
                if self._read_only:
                    return None
                self.sealer(namespace)  # the namespace's data key, durably
                record = self._live_record(self._state, namespace_id)
        except NamespaceErasedError:
            return None
        assert record is not None and record.wrapped is not None
        if not record.ids_from_data_key:
            return self._store_derived(namespace)
        name = b"memory-ledger ids\x1f" + namespace.key().encode("utf-8")
        return hmac.digest(self.master.unwrap(record.wrapped), name, hashlib.sha256)

    def namespace_id(self, namespace: Namespace) -> UUID:
        """The id of ``namespace`` in this store (:meth:`IdDigests.namespace_id`)."""
        return self.digests.namespace_id(namespace)

    # Sealing --------------------------------------------------------------------------------

    def sealer(self, namespace: Namespace) -> Sealer:
        """The :class:`~memory_ledger.ledger.sealing.Sealer` of ``namespace``'s data key; the
        key is created and stored durably first when the namespace has none.

        :raises EncryptionNotConfiguredError: no master key.
        :raises NamespaceErasedError: the namespace was erased.
        :raises KeyStoreError: the key store cannot be written.
        """
        found = self._sealers.get(namespace)
        if found is not None:
            return found
        with self._lock:
            found = self._sealers.get(namespace)
            if found is None:
                found = self._make_sealer(namespace)
                self._sealers[namespace] = found
            return found

    def _make_sealer(self, namespace: Namespace) -> Sealer:
        master = self.master
        if master is None:
            msg = "no master key is configured: payloads are stored in clear"
            raise EncryptionNotConfiguredError(msg)
        ids = self.digests.namespace_ids(namespace)
        record = self._live_record(self._state, ids[0])
        if record is None:
            record, self._state = self.store.update(lambda state: self._create(state, ids))
        assert record.wrapped is not None
        key = master.unwrap(record.wrapped)
        aead = AESGCM(key)
        self._openers[record.key_id.bytes] = aead
        return Sealer(record.key_id.bytes, aead)

    def _live_record(self, state: KeyStoreState, namespace_id: UUID) -> DataKeyRecord | None:
        erased = False
        for record in state.keys:
            if record.namespace_id == namespace_id:
                if not record.erased and record.key_id.bytes not in self._revoked:
                    return record
                erased = True
        if erased:
            msg = (
                f"namespace {namespace_id} was erased; nothing more can be written to it "
                "(use another principal or scope id)"
            )
            raise NamespaceErasedError(msg)
        return None

    def _create(
        self, state: KeyStoreState, ids: tuple[UUID, UUID, UUID]
    ) -> tuple[KeyStoreState | None, tuple[DataKeyRecord, KeyStoreState]]:
        existing = self._live_record(state, ids[0])
        if existing is not None:  # another process created it meanwhile
            self._check_master(state)
            return None, (existing, state)
        state = self._claimed(state)
        assert self.master is not None
        record = DataKeyRecord(
            key_id=uuid4(),
            namespace_id=ids[0],
            tenant_id=ids[1],
            principal_id=ids[2],
            created_at=self._clock(),
            wrapped=self.master.wrap(os.urandom(KEY_SIZE)),
            ids_from_data_key=state.clear_until == 0,
        )
        new = msgspec.structs.replace(state, keys=(*state.keys, record))
        return new, (record, new)

    # Opening --------------------------------------------------------------------------------

    def opener(self, key_id: bytes) -> AESGCM | None:
        """The cipher of data key ``key_id`` (16 bytes); None when the key was erased.

        :raises DataKeyMissingError: the key store never held this key.
        :raises MasterKeyError: no master key is configured (``master_key_missing``) or it
            does not unwrap the key (``master_key_mismatch``).
        """
        try:
            return self._openers[key_id]
        except KeyError:
            pass
        with self._lock:
            if key_id not in self._openers:
                self._openers[key_id] = self._make_opener(key_id)
            return self._openers[key_id]

    def _make_opener(self, key_id: bytes) -> AESGCM | None:
        record = self._record(key_id)
        if record is None:
            self.refresh(force=True)
            record = self._record(key_id)
        if record is None:
            msg = (
                f"data key {UUID(bytes=key_id)} is not in the key store "
                f"{self.store.description!r} (a store restored without its keys?)"
            )
            raise DataKeyMissingError(msg)
        if record.wrapped is None or key_id in self._revoked:
            return None
        if self.master is None:
            msg = f"payloads are sealed and no master key is configured (data key {record.key_id})"
            raise MasterKeyError(msg, reason_code="master_key_missing")
        return AESGCM(self.master.unwrap(record.wrapped))

    def _record(self, key_id: bytes) -> DataKeyRecord | None:
        for record in self._state.keys:
            if record.key_id.bytes == key_id:
                return record
        return None

    # Erasure and rotation -------------------------------------------------------------------

    def unwrap_problem(self) -> str | None:
        """What of the key store does not open with the configured master key, or None:
        every wrapped key (the store key, each live data key) unwrapped once, as a write
        would (a changed byte in one fails only the writes that need it; this finds it
        before). None too when no master key is configured (nothing can be unwrapped).
        Freshly read; nothing is kept or written."""
        master = self.master
        if master is None:
            return None
        self.refresh()
        state = self._state
        wrapped = [("the store key (ids)", state.id_key_wrapped)]
        wrapped += [(f"data key {r.key_id}", r.wrapped) for r in state.keys if r.wrapped]
        for name, value in wrapped:
            if value is None:
                continue
            try:
                master.unwrap(value)
            except MasterKeyError:
                return (
                    f"{name} in the key store does not open with the master key "
                    f"{master.key_id}: the key store is damaged, or it is another key's"
                )
        return None

    def records(self) -> tuple[DataKeyRecord, ...]:
        """Every key record (live and erased), freshly read."""
        self.refresh()
        return self._state.keys

    def erase(
        self,
        match: NamespaceMatch,
        *,
        command_id: UUID,
        requested_by: str,
        present: Sequence[Namespace] = (),
    ) -> list[DataKeyRecord]:
        """Destroy the live keys of the namespaces ``match`` names; return their records as
        erased (empty: nothing matched). Durable on return: the key store file holding the
        keys is replaced by one that does not.

        ``present`` lists namespaces known to hold data (the read models'): one that
        ``match`` names and that has no key record at all (its events were stored in clear,
        before the store encrypted) gets an erased record without a key, which hides its
        events from every read (:attr:`erased_namespace_ids`); such a record's
        ``created_at`` equals its ``erased_at``.

        :raises EncryptionNotConfiguredError: the store keeps payloads in clear.
        :raises KeyStoreError: the key store cannot be written (nothing was erased).
        """
        if self.master is None:
            msg = "this store keeps payloads in clear (no master key): there is no key to erase"
            raise EncryptionNotConfiguredError(msg)
        when = self._clock()

        def change(
            state: KeyStoreState,
        ) -> tuple[KeyStoreState | None, list[DataKeyRecord]]:
            state = self._claimed(state)
            candidates = list(state.keys)
            recorded = {record.namespace_id for record in state.keys}
            for namespace in present:
                ids = self.digests.namespace_ids(namespace)
                if ids[0] in recorded:
                    continue
                recorded.add(ids[0])
                candidates.append(
                    DataKeyRecord(
                        key_id=uuid4(),
                        namespace_id=ids[0],
                        tenant_id=ids[1],
                        principal_id=ids[2],
                        created_at=when,
                        wrapped=b"",  # no key ever: erased below if the match names it
                    )
                )
            # Keys this command destroyed already: its write committed but the reply was lost
            # (a PostgreSQL key store runs the change again on a new connection).
            erased = [r for r in candidates if r.erased and r.erase_command == command_id]
            if erased:
                return None, erased
            kept: list[DataKeyRecord] = []
            for record in candidates:
                if not record.erased and match.matches(record, self.digests):
                    record = msgspec.structs.replace(
                        record,
                        wrapped=None,
                        erased_at=when,
                        erase_command=command_id,
                        erased_by=requested_by,
                        erase_level=match.level,
                    )
                    erased.append(record)
                if record.wrapped != b"":
                    kept.append(record)
            if not erased:
                return None, []
            return msgspec.structs.replace(state, keys=tuple(kept)), erased

        with self._lock:
            erased = self.store.update(change)
            self._load(self.store.read())
        return erased

    def revoke(self, key_ids: Sequence[UUID], *, persist: bool) -> int:
        """Treat the data keys ``key_ids`` as erased: the ledger's ``NamespaceErased``
        records say they were destroyed, yet the key store holds them live (an old ``keys/``
        copied back). With ``persist`` the key store is corrected (the keys destroyed again);
        without (a read-only open) only this keyring refuses them. Returns how many were
        live.

        :raises KeyStoreError: the key store cannot be written (with ``persist``).
        """
        wanted = set(key_ids)
        live = [r for r in self._state.keys if r.key_id in wanted and not r.erased]
        if not live:
            return 0
        self._revoked.update(r.key_id.bytes for r in live)
        if persist:
            when = self._clock()

            def change(state: KeyStoreState) -> tuple[KeyStoreState | None, None]:
                keys = tuple(
                    msgspec.structs.replace(
                        r, wrapped=None, erased_at=r.erased_at or when, erased_by=r.erased_by
                    )
                    if r.key_id in wanted
                    else r
                    for r in state.keys
                )
                return msgspec.structs.replace(state, keys=keys), None

            self.store.update(change)
        with self._lock:
            self._load(self.store.read())
        return len(live)

    def rotate(self, new_master: KeyWrapper) -> int:
        """Re-wrap every live data key under ``new_master``; return how many. Events are not
        touched. Afterwards only ``new_master`` opens the store.

        :raises MasterKeyError: the current master key does not unwrap a key.
        :raises EncryptionNotConfiguredError: no current master key.
        """
        old = self.master
        if old is None:
            msg = "this store keeps payloads in clear (no master key): nothing to rotate"
            raise EncryptionNotConfiguredError(msg)
        if new_master.key_id == old.key_id:
            msg = (
                f"the new master key is the current one ({old.key_id}): nothing was rotated; "
                "keep that key"
            )
            raise MasterKeyError(msg, reason_code="same_master_key")

        def change(state: KeyStoreState) -> tuple[KeyStoreState | None, int]:
            if state.master_key_id == new_master.key_id:  # committed, its reply lost: run again
                return None, sum(1 for record in state.keys if record.wrapped is not None)
            self._check_master(state)
            keys = tuple(
                record
                if record.wrapped is None
                else msgspec.structs.replace(
                    record, wrapped=new_master.wrap(old.unwrap(record.wrapped))
                )
                for record in state.keys
            )
            count = sum(1 for record in keys if record.wrapped is not None)
            id_key = state.id_key_wrapped
            if id_key is not None:
                id_key = new_master.wrap(old.unwrap(id_key))
            new = msgspec.structs.replace(
                state, master_key_id=new_master.key_id, keys=keys, id_key_wrapped=id_key
            )
            return new, count

        with self._lock:
            count = self.store.update(change)
            self.master = new_master
            self._load(self.store.read())
        return count

    def status(self) -> KeyringStatus:
        """Encryption on/off, master key id and key counts (freshly read)."""
        keys = self.records()
        erased = sum(1 for record in keys if record.erased)
        return KeyringStatus(
            encrypting=self.encrypting,
            master_key_id=self._state.master_key_id,
            live_keys=len(keys) - erased,
            erased_keys=erased,
            key_store=self.store.description,
        )
