"""Encryption at rest for the engine: the master key it is configured with, its keyring, and
erasure by crypto-shredding (issue #16).

- :func:`resolve_master_key`: ``master_key=`` of :func:`memory_ledger.open`, else
  ``[memory] master_key_file``, else the ``MEMORY_LEDGER_MASTER_KEY_FILE`` variable, else
  none (payloads stay in clear, and ``stats`` says so).
- :func:`open_keyring`: the store's key store (``<store>/keys``) and keyring.
- :func:`erase_namespaces`: destroy the data keys of the named namespaces, record a
  :class:`~memory_ledger.ledger.events.NamespaceErased`, drop their projection rows.

Erasure's commit point is the key store: the file that held the keys is replaced by one
that does not (atomically, fsynced). The ledger record follows; if the process dies between
the two, :func:`record_erasures` (run by every engine that opens the store for writing)
appends the missing record, so a kill leaves the old state or the erased one, and the
audit trail always catches up.
"""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID, uuid4

import msgspec

from memory_ledger.commands.canonical.boundary import DecisionReads, append_decision
from memory_ledger.ledger.errors import LedgerReadOnlyError
from memory_ledger.ledger.events import ERASURE_NAMESPACE, NamespaceErased
from memory_ledger.ledger.faults import fault
from memory_ledger.ledger.ids import erasure_stream_id
from memory_ledger.ledger.key_store import DataKeyRecord, FileKeyStore, KeyStore
from memory_ledger.ledger.keyring import Keyring, NamespaceMatch
from memory_ledger.ledger.lmdb import LMDBApplicationRecorder
from memory_ledger.ledger.master_key import (
    ENV_MASTER_KEY_FILE,
    KeyWrapper,
    MasterKeySpec,
    master_key_from,
)
from memory_ledger.ledger.sealing import is_sealed
from memory_ledger.ledger.tags import ERASURE_TAG
from memory_ledger.projections.derived import VECTOR_CACHE_FOLDER, remove_erased_folders
from memory_ledger.projections.erasure import present_namespaces
from memory_ledger.projections.store import remove_set_aside, remove_stale_slots

if TYPE_CHECKING:
    from memory_ledger.commands.config import MemoryConfig
    from memory_ledger.commands.store import MemoryStore

__all__ = [
    "ErasureReport",
    "erase_namespaces",
    "check_erasures",
    "open_keyring",
    "record_erasures",
    "unrecorded_erasures",
    "resolve_master_key",
]


def resolve_master_key(spec: MasterKeySpec | None, config: MemoryConfig) -> KeyWrapper | None:
    """The master key the host configured (see the module doc for the order), or None.

    :raises MasterKeyError: the named key file cannot be read or holds no 32-byte key.
    """
    if spec is not None:
        return master_key_from(spec)
    if config.master_key_file:
        return master_key_from(config.master_key_file)
    named = os.environ.get(ENV_MASTER_KEY_FILE, "")
    return master_key_from(named) if named else None


def open_keyring(
    root: Path, recorder: object, master: KeyWrapper | None, *, read_only: bool
) -> Keyring:
    """The keyring of the store folder ``root``: its key store is ``root/keys`` beside an
    LMDB ledger, or the ``<events>_keys`` table of a PostgreSQL ledger (shared by its hosts).

    :raises MasterKeyError: the store's keys need a master key that is missing or another.
    :raises KeyStoreError: the key store cannot be read (opening never writes it: the
        store's first sealed write records the master key's id).
    """
    store: KeyStore
    if type(recorder).__module__.endswith("ledger.postgres"):
        # Imported here: psycopg is needed only by stores whose ledger is on PostgreSQL.
        from memory_ledger.ledger.postgres_keys import PostgresKeyStore

        store = PostgresKeyStore(recorder, read_only=read_only)  # type: ignore[arg-type]
    else:
        store = FileKeyStore(root / "keys", read_only=read_only)
        if not read_only and isinstance(recorder, LMDBApplicationRecorder):
            store.guard(recorder)  # an append and an erasure serialize (FileKeyStore.guard)
    head = getattr(recorder, "max_notification_id", None)

    def last_position() -> int:
        return int(head() or 0) if head is not None else 0

    def sealed_records() -> bool:
        """Whether one of the ledger's last 256 records is sealed (a store encrypts every
        record it writes from its first key on, except erasure records)."""
        select_raw = getattr(recorder, "select_raw", None)
        if select_raw is None:
            return False
        end = last_position()
        return any(is_sealed(row[4]) for row in select_raw(max(end - 256, 0), 256, end))

    def keyed_records() -> bool:
        """Whether one of the ledger's first 64 records has a stream id of a keyed digest
        (a version-8 UUID, id format 2): its key store, which holds the store key, is lost."""
        select_raw = getattr(recorder, "select_raw", None)
        if select_raw is None:
            return False
        return any(
            len(row[1]) == 16 and row[1][6] >> 4 == 8  # noqa: PLR2004 (the UUID version nibble)
            for row in select_raw(0, 64)
            if isinstance(row[1], bytes)
        )

    return Keyring(
        store,
        master,
        read_only=read_only,
        head=last_position,
        sealed_records=sealed_records,
        keyed_records=keyed_records,
    )


class ErasureReport(msgspec.Struct, frozen=True, kw_only=True):
    """What an erasure did: its command id (None when nothing matched), how many
    namespaces were erased, the ledger position of its ``NamespaceErased`` record (None
    when nothing matched), and when.

    ``stored_in_clear``: how many of them had events stored in clear only (before the store
    encrypted): those are hidden from every read, but their bytes stay in the ledger.
    ``already_erased``: namespaces the request names that an earlier erasure took.
    ``busy_projections``: projection files of this host held by running processes: each
    drops the rows at its next catch-up and scrubs (and stamps) its files when it closes;
    if its process dies first, the next open or close of an engine on the store deletes
    them (idle files are deleted now, and rebuilt from the ledger when next
    used; ``projections/derived.py``).
    ``receipt``: the signed erasure receipt (canonical JSON, ``commands/engine/receipt.py``)
    when ``erase`` was given a signing key and erased something, else None."""

    command_id: UUID | None
    namespaces: int
    position: int | None
    erased_at: datetime | None
    stored_in_clear: int = 0
    already_erased: int = 0
    busy_projections: int = 0
    receipt: bytes | None = None


def _level(value: str) -> Literal["tenant", "principal", "namespace"]:
    if value == "tenant":
        return "tenant"
    return "principal" if value == "principal" else "namespace"


def erase_namespaces(
    engine: MemoryStore, match: NamespaceMatch, *, requested_by: str = ""
) -> ErasureReport:
    """Erase every namespace ``match`` names (see the module doc); idempotent: namespaces
    already erased are not counted again, and a second call erases nothing.

    :raises InvalidNamespaceError: a part of ``match`` is empty or too long.
    :raises EncryptionNotConfiguredError: the store keeps payloads in clear.
    :raises KeyStoreError: the key store cannot be written (nothing was erased).
    :raises LedgerReadOnlyError: the store is open read-only.
    :raises SecretRefusedError: ``requested_by`` holds a secret-shaped value (nothing was
        erased, nothing written).
    """
    match.validated()
    if engine.read_only:
        msg = f"the store {str(engine.path)!r} is open read-only: cannot erase"
        raise LedgerReadOnlyError(msg, path=str(engine.path))
    from memory_ledger.commands.secret_door import check_event  # detect_secrets: on a write

    command = uuid4()
    # The door's question before the commit point (the keys are destroyed before the record
    # is appended): a label the ledger would refuse must not reach the key store either.
    check_event(
        NamespaceErased(
            originator_id=erasure_stream_id(command),
            originator_version=1,
            recorded_at=datetime.now(UTC),
            namespace=ERASURE_NAMESPACE,
            command_id=command,
            level=_level(match.level),
            namespace_ids=(),
            key_ids=(),
            requested_by=requested_by,
        )
    )
    keyring = engine.keyring
    before = sum(1 for r in keyring.records() if r.erased and match.matches(r, keyring.digests))
    with engine.read_models() as live:
        present = present_namespaces(live.conn)
    erased = keyring.erase(match, command_id=command, requested_by=requested_by, present=present)
    if not erased:
        return ErasureReport(
            command_id=None, namespaces=0, position=None, erased_at=None, already_erased=before
        )
    fault("erasure.keys_destroyed")
    positions = record_erasures(engine)
    engine.catch_up()  # drops the rows; the file is rewritten when the engine closes
    busy = engine.remove_idle_projections()
    # The workspace vectors the namespaces' sessions cached (commands/workspace/vector_cache.py)
    remove_erased_folders(engine.path / VECTOR_CACHE_FOLDER, keyring.erased_namespace_ids)
    return ErasureReport(
        command_id=command,
        namespaces=len(erased),
        position=positions.get(command),
        erased_at=erased[0].erased_at,
        stored_in_clear=sum(1 for r in erased if r.created_at == r.erased_at),
        already_erased=before,
        busy_projections=busy,
    )


def check_erasures(engine: MemoryStore) -> int:
    """Make sure no data key that a ``NamespaceErased`` record of the ledger destroyed is
    live in the key store (an old ``keys/`` copied back over a store that erased since):
    such keys are destroyed again (read-only: refused by this engine only). Returns how many
    were found live. Reads the ledger's ``erasure`` tag (a store without its tag index is
    skipped). Damaged projection files set aside in the store folder are deleted then
    (:func:`~memory_ledger.projections.store.remove_set_aside`): they may predate an
    erasure; so are idle slots whose stamp predates an erasure
    (:func:`~memory_ledger.projections.store.remove_stale_slots`)."""
    recorder = engine.tagged_recorder
    if not recorder.tag_index_built():
        return 0
    destroyed = [
        key
        for _, event in engine.read_tagged(ERASURE_TAG)
        if isinstance(event, NamespaceErased)
        for key in event.key_ids
    ]
    if not destroyed:
        return 0
    if not engine.read_only:
        # A damaged projection file set aside after an erasure (marked while another
        # process held it) may still hold the erased rows: read models are disposable.
        remove_set_aside(engine.path / "projections")
    revoked = engine.keyring.revoke(destroyed, persist=not engine.read_only)
    if not engine.read_only:
        # Idle slots whose files may predate an erasure (their holder, or the erasing
        # process, was killed before it scrubbed or deleted them).
        erasures = len(engine.keyring.erased_namespace_ids)
        remove_stale_slots(engine.path / "projections", erasures)
        # Workspace vectors of erased namespaces (a session of another process wrote them
        # while the erasure ran and was killed, or the erasing process was).
        remove_erased_folders(
            engine.path / VECTOR_CACHE_FOLDER, engine.keyring.erased_namespace_ids
        )
    return revoked


def unrecorded_erasures(engine: MemoryStore) -> list[tuple[UUID, list[DataKeyRecord]]]:
    """The erasures the key store records whose ``NamespaceErased`` record the ledger does
    not hold, as ``(command id, the data key records it destroyed)`` in the key store's
    order: an erasure interrupted after its commit point, or a ledger copied back from
    before an erasure under the live ``keys/``. A writable engine appends them when it opens
    (:func:`record_erasures`); ``memory-ledger verify`` reports them (it never writes)."""
    commands: dict[UUID, list[DataKeyRecord]] = defaultdict(list)
    for record in engine.keyring.records():
        if record.erase_command is not None:
            commands[record.erase_command].append(record)
    return [
        (command, records)
        for command, records in commands.items()
        if not engine.load_stream(erasure_stream_id(command))
    ]


def record_erasures(engine: MemoryStore) -> dict[UUID, int]:
    """Append the ``NamespaceErased`` record of every erasure in the key store that the
    ledger does not hold yet (an erasure interrupted after its commit point); return
    ``{command id: position}`` of the records appended."""
    commands: dict[UUID, list[DataKeyRecord]] = defaultdict(list)
    for record in engine.keyring.records():
        if record.erase_command is not None:
            commands[record.erase_command].append(record)
    appended: dict[UUID, int] = {}
    for command, records in commands.items():
        stream = erasure_stream_id(command)

        event = NamespaceErased(
            originator_id=stream,
            originator_version=1,
            recorded_at=records[0].erased_at or datetime.now(UTC),
            namespace=ERASURE_NAMESPACE,
            command_id=command,
            level=_level(records[0].erase_level),
            namespace_ids=tuple(r.namespace_id for r in records),
            key_ids=tuple(r.key_id for r in records),
            requested_by=records[0].erased_by,
        )

        def plan(_reads: DecisionReads, stream: UUID = stream, event: Any = event) -> Any:
            # Recorded already (by another process, or before a restart): nothing to write.
            return [] if engine.load_stream(stream) else [event]

        # The one decision path: a concurrent recorder takes the stream version, and the
        # re-plan finds the record written.
        positions = append_decision(engine, ERASURE_NAMESPACE, plan, what="erase")
        if positions:
            appended[command] = positions[0]
    return appended
