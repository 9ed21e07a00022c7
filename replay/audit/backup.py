"""Consistent backups of the ledger while a host writes, and restoring them.

A backup is LMDB's compacting copy (``mdb_env_copy2`` with ``MDB_CP_COMPACT``) taken inside
one read transaction: it holds exactly the records committed when that transaction began,
however many writers append meanwhile, and writers are never blocked. The backup folder is
itself a store folder without projections (they are disposable and rebuilt on open). A
PostgreSQL ledger is backed up into the same layout: its records up to the head when the
backup starts (the log is append-only and gapless, so that prefix is a consistent state) are
copied verbatim (positions, bodies, hashes) into a new LMDB ledger::

    <backup>/ledger/data.mdb     the copied ledger
    <backup>/keys/data-keys.msgpack  an encrypted store's data keys, wrapped by its master
                                 key (never the master key itself), and the store's id
                                 format and store key (ledger/digests.py)
    <backup>/backup.json         position, hash of the last record, format, source, time

Encrypted stores (issue #16): the key store is copied AFTER the ledger's snapshot, so every
data key a copied record was sealed with is in it (a key is stored durably before its first
event). Keys of namespaces erased before the backup are already gone from it (their records
keep only the erasure's time and command), so the backup cannot read them either. A backup
taken BEFORE an erasure still holds that namespace's wrapped key: whoever has it and the
master key can read the namespace. The README's "Erasure" section says what a host does
about old backups (delete them, or rotate the master key and destroy the old one once the
old backups expire).

Nothing derived is copied: projections and the recall index are rebuilt from the ledger
when the backup (or a store restored from it) is opened, and every derived file is written
through :mod:`memory_ledger.projections.derived`, which leaves the erased namespaces out.

``restore_store`` copies the ledger (and the key store) into a NEW store folder, then
verifies the hash chain and that the head and its hash match the manifest; an encrypted
backup is verified with its master key when one is configured, else without it
(:func:`memory_ledger.replay.audit.verify.verify_ledger`).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from memory_ledger.commands.config import MemoryConfig, load_config, load_config_from
from memory_ledger.commands.engine.encryption import resolve_master_key
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.ledger.arguments import NESTED_TOO_DEEP
from memory_ledger.ledger.key_errors import MasterKeyError
from memory_ledger.ledger.key_store import KEY_STORE_FILE, FileKeyStore, KeyStoreState
from memory_ledger.ledger.lmdb import FORMAT_VERSION, LMDBApplicationRecorder, LMDBDatastore
from memory_ledger.ledger.records import HASH_SIZE, LedgerLog
from memory_ledger.projections.derived import write_atomic
from memory_ledger.replay.audit.errors import (
    BackupManifestError,
    NotABackupError,
    OutputExistsError,
    unwritable_output,
)
from memory_ledger.replay.audit.verify import (
    VerifyReport,
    verify_ledger,
    verify_path,
    verify_store,
)

__all__ = ["BackupManifest", "BackupReport", "RestoreReport", "backup_store", "restore_store"]

MANIFEST = "backup.json"


class BackupManifest(msgspec.Struct, frozen=True, kw_only=True):
    """What a backup holds: the last position and its record hash (hex), the ledger format,
    the source folder and when it was taken."""

    kind: str = "memory-ledger backup"
    position: int
    record_hash: str | None
    ledger_format: int
    source: str
    created_at: datetime
    master_key_id: str | None = None
    """The master key that wraps the backup's data keys (its id; None: stored in clear)."""
    data_keys: int = 0
    """Live data keys in the backup's key store (``keys/``)."""
    erased_keys: int = 0
    """Keys of erased namespaces: no key material in the backup, only the erasure record."""


class BackupReport(msgspec.Struct, frozen=True, kw_only=True):
    """A backup taken: its folder, manifest, size of the copied ledger and time taken."""

    out: str
    manifest: BackupManifest
    bytes: int
    head_after: int
    seconds: float


class RestoreReport(msgspec.Struct, frozen=True, kw_only=True):
    """A restore: the new store, the backup's manifest, and the verification of the copy.

    ``ok`` is true when the chain verifies and its head and last hash match the manifest.
    """

    ok: bool
    store: str
    manifest: BackupManifest
    verify: VerifyReport
    problem: str | None = None
    seconds: float


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _empty_folder(path: Path, what: str, *, ledger: bool = True) -> None:
    """Make ``path`` an empty folder (it may exist empty) and, with ``ledger``, its
    ``ledger`` sub-folder.

    :raises OutputExistsError: ``path`` exists and is not an empty folder.
    :raises OutputUnwritableError: it cannot be made.
    """
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        msg = f"{what} {str(path)!r} exists and is not an empty folder"
        raise OutputExistsError(msg, path=str(path))
    try:
        path.mkdir(parents=True, exist_ok=True)
        if ledger:
            (path / "ledger").mkdir()
    except OSError as e:
        raise unwritable_output(e, path, what) from e


def backup_store(engine: MemoryEngine, out: str | Path) -> BackupReport:
    """Copy the ledger of ``engine`` into the new folder ``out`` (consistent, compacted).

    Safe while other threads or processes append: the copy is one read transaction's
    snapshot. Writes ``out/ledger/data.mdb`` and ``out/backup.json`` and fsyncs both.

    :raises OutputExistsError: (a ``FileExistsError``) ``out`` exists and is not an empty
        folder.
    :raises OutputUnwritableError: (an ``OSError``) ``out`` cannot be made.
    :raises LedgerUnavailableError: a PostgreSQL ledger's server cannot be reached.
    """
    started = time.perf_counter()
    folder = Path(out)
    _empty_folder(folder, "backup folder")
    ledger = folder / "ledger"
    log = engine.ledger_log()
    if isinstance(log, LMDBApplicationRecorder):
        position, record_hash = _copy_lmdb(log, ledger)
    else:
        with engine.ledger_guard():
            position, record_hash = copy_log(log, ledger)
    data = ledger / "data.mdb"
    _fsync(data)
    keys = _copy_keys(engine, folder)  # after the ledger's snapshot: every key it uses
    source = str(engine.path) if isinstance(log, LMDBApplicationRecorder) else engine.ledger_name
    manifest = BackupManifest(
        position=position,
        record_hash=record_hash,
        ledger_format=FORMAT_VERSION,
        source=source,
        created_at=datetime.now(UTC),
        master_key_id=keys.master_key_id,
        data_keys=sum(1 for k in keys.keys if not k.erased),
        erased_keys=sum(1 for k in keys.keys if k.erased),
    )
    write_atomic(
        folder / MANIFEST, [msgspec.json.format(msgspec.json.encode(manifest), indent=2), b"\n"]
    )
    _fsync(ledger)
    _fsync(folder)
    return BackupReport(
        out=str(folder.absolute()),
        manifest=manifest,
        bytes=data.stat().st_size,
        head_after=engine.head,
        seconds=time.perf_counter() - started,
    )


def _copy_keys(engine: MemoryEngine, folder: Path) -> KeyStoreState:
    """Write the engine's key store state (wrapped data keys and erasure records, freshly
    read) to ``folder/keys`` when the store is encrypted or records an id format (its store
    key derives its ids, ``ledger/digests.py``); return it."""
    state = engine.keyring.store.read()  # the whole state: keys, master key id, clear_until
    if state.master_key_id is not None or state.keys or state.id_format:
        FileKeyStore(folder / "keys").update(lambda _: (state, None))
    return state


def copy_log(source: LedgerLog, ledger: Path, page: int = 2000) -> tuple[int, str | None]:
    """Copy every record of ``source`` up to its head now into a NEW LMDB ledger folder
    ``ledger``, verbatim (positions, bodies, hashes); return ``(head, hash of the head)``.

    :raises IntegrityError: a record does not chain (the source is damaged).
    """
    head = source.max_notification_id() or 0
    datastore = LMDBDatastore(str(ledger), engine_store=True)  # a store's ledger
    try:
        target = LMDBApplicationRecorder(datastore)
        batch: list[tuple[int, bytes]] = []
        last_hash: str | None = None
        for position, entry in source.iter_log(1, page):
            if position > head:
                break
            batch.append((position, entry))
            last_hash = entry[:HASH_SIZE].hex()
            if len(batch) >= page:
                target.append_log(batch)
                batch = []
        target.append_log(batch)
    finally:
        datastore.close()
    return head, last_hash


def _copy_lmdb(recorder: LMDBApplicationRecorder, ledger: Path) -> tuple[int, str | None]:
    """LMDB's compacting copy of the whole environment in one read transaction."""
    datastore = recorder.datastore
    log = datastore.db(b"log")
    with datastore.read() as txn:
        cursor = txn.cursor(db=log)
        if cursor.last():
            position = int.from_bytes(bytes(cursor.key()), "big")
            record_hash: str | None = bytes(cursor.value())[:HASH_SIZE].hex()
        else:
            position, record_hash = 0, None
        datastore.env.copy(str(ledger), compact=True, txn=txn)
    return position, record_hash


def read_manifest(backup: str | Path) -> BackupManifest:
    """The manifest of a backup folder.

    :raises NotABackupError: (a ``FileNotFoundError``) the folder holds no backup (names
        what is missing).
    :raises BackupManifestError: (a ``ValueError``) the manifest is malformed.
    """
    folder = Path(backup)
    for needed in (folder / "ledger" / "data.mdb", folder / MANIFEST):
        if not needed.is_file():
            msg = f"{str(folder)!r} is not a memory-ledger backup ({needed.name} is missing)"
            raise NotABackupError(msg, path=str(folder))
    manifest = folder / MANIFEST
    try:
        return msgspec.json.decode(manifest.read_bytes(), type=BackupManifest)
    except msgspec.DecodeError as e:
        msg = f"backup manifest {str(manifest)!r} is malformed: {e}"
        raise BackupManifestError(msg, path=str(manifest)) from e
    except RecursionError:
        msg = f"backup manifest {str(manifest)!r} is malformed: {NESTED_TOO_DEEP}"
        raise BackupManifestError(msg, path=str(manifest)) from None


def _restore_keys(backup: Path, target: Path) -> None:
    """Copy the backup's key store (if any) into ``target/keys``, fsynced."""
    source = backup / "keys" / KEY_STORE_FILE
    if not source.is_file():
        return
    keys = target / "keys"
    keys.mkdir(mode=0o700)
    partial = keys / f".{KEY_STORE_FILE}.partial"
    shutil.copyfile(source, partial)
    os.chmod(partial, 0o600)
    _fsync(partial)
    os.replace(partial, keys / KEY_STORE_FILE)
    _fsync(keys)
    _fsync(target)


def _last_hash(log: LedgerLog, head: int) -> str | None:
    for nid, value in log.iter_log(start=head, page=1):
        if nid == head:
            return value[:HASH_SIZE].hex()
    return None


def _verify_restored(target: Path, config: MemoryConfig) -> tuple[VerifyReport, str | None]:
    """Verify the restored store as ``memory-ledger verify`` does (:func:`verify_path`:
    every database of the LMDB file walked, then the engine's checks with the master key
    when configured), and read its last record's hash."""
    checked = verify_path(target, config=config)
    if not checked.ok:
        return checked, None
    try:
        engine = MemoryEngine.open(target, create=False, config=config, read_only=True)
    except MasterKeyError as e:
        if e.reason_code != "master_key_missing":
            raise
        report = verify_ledger(target)
        if not (report.ok and report.head):
            return report, None
        datastore = LMDBDatastore(str(target / "ledger"))
        try:
            return report, _last_hash(LMDBApplicationRecorder(datastore), report.head)
        finally:
            datastore.close()
    with engine:
        report = verify_store(engine)
        if not (report.ok and report.head):
            return report, None
        return report, _last_hash(engine.ledger_log(), report.head)


def restore_store(
    backup: str | Path, store: str | Path, config: MemoryConfig | None = None
) -> RestoreReport:
    """Restore the backup folder ``backup`` into the NEW store folder ``store`` and verify it.

    The ledger and the key store are copied (through a temporary name, then fsynced);
    projections are rebuilt from it when the store is next opened. An encrypted backup is
    verified with the master key ``config`` names (``master_key_file``, else
    ``MEMORY_LEDGER_MASTER_KEY_FILE``), else without one (chain and envelopes only).

    :raises MasterKeyError: the configured master key is not the backup's (checked before
        anything is written).
    :raises FileNotFoundError: ``backup`` is not a backup folder.
    :raises FileExistsError: ``store`` exists and is not empty (a restore never overwrites).
    :raises OutputUnwritableError: (an ``OSError``) ``store`` cannot be made.
    """
    started = time.perf_counter()
    manifest = read_manifest(backup)
    settings = load_config_from(config or load_config(), embeddings="none", ledger="")
    master = resolve_master_key(None, settings)
    if manifest.master_key_id and master is not None and master.key_id != manifest.master_key_id:
        msg = (
            f"the configured master key {master.key_id} is not the backup's "
            f"({manifest.master_key_id}); nothing was written"
        )
        raise MasterKeyError(msg, reason_code="master_key_mismatch")
    target = Path(store)
    _empty_folder(target, "store folder", ledger=False)
    # All or nothing: restored and verified in a sibling folder, renamed over the empty
    # target only when it verifies; a failed restore leaves the target empty, as it was
    # (a store that failed verification must not be opened and written to).
    staging = target.with_name(f".{target.name}.restoring-{uuid.uuid4().hex[:12]}")
    try:
        _empty_folder(staging, "store folder")
        ledger = staging / "ledger"
        partial = ledger / "data.mdb.partial"
        shutil.copyfile(Path(backup) / "ledger" / "data.mdb", partial)
        _fsync(partial)
        os.replace(partial, ledger / "data.mdb")
        _fsync(ledger)
        _restore_keys(Path(backup), staging)
        report, last_hash = _verify_restored(staging, settings)
        problem = report.problem
        if problem is not None:  # named as the store it was restored to
            problem = problem.replace(str(staging), str(target))
        if report.ok and report.head != manifest.position:
            problem = f"restored head {report.head} differs from the backup's {manifest.position}"
        elif report.ok and last_hash != manifest.record_hash:
            problem = f"hash of record {report.head} differs from the backup manifest"
        if report.ok and problem is None:
            os.rename(staging, target)  # onto the empty target folder: one step
            _fsync(target.parent)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return RestoreReport(
        ok=report.ok and problem is None,
        store=str(target.absolute()),
        manifest=manifest,
        verify=report,
        problem=problem,
        seconds=time.perf_counter() - started,
    )
