"""Consistent backups of the ledger while a host writes, and restoring them.

A backup is LMDB's compacting copy (``mdb_env_copy2`` with ``MDB_CP_COMPACT``) taken inside
one read transaction: it holds exactly the records committed when that transaction began,
however many writers append meanwhile, and writers are never blocked. The backup folder is
itself a store folder without projections (they are disposable and rebuilt on open)::

    <backup>/ledger/data.mdb     the copied ledger
    <backup>/backup.json         position, hash of the last record, format, source, time

``restore_store`` copies the ledger into a NEW store folder, then verifies the hash chain and
that the head and its hash match the manifest.
"""

from __future__ import annotations

import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from memory_ledger.commands.config import load_config, load_config_from
from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger.lmdb import FORMAT_VERSION, HASH_SIZE
from memory_ledger.replay.errors import BackupManifestError, NotABackupError, OutputExistsError
from memory_ledger.replay.verify import VerifyReport, verify_store

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


def _empty_folder(path: Path, what: str) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        msg = f"{what} {str(path)!r} exists and is not an empty folder"
        raise OutputExistsError(msg, path=str(path))
    path.mkdir(parents=True, exist_ok=True)


def backup_store(engine: MemoryEngine, out: str | Path) -> BackupReport:
    """Copy the ledger of ``engine`` into the new folder ``out`` (consistent, compacted).

    Safe while other threads or processes append: the copy is one read transaction's
    snapshot. Writes ``out/ledger/data.mdb`` and ``out/backup.json`` and fsyncs both.

    :raises OutputExistsError: (a ``FileExistsError``) ``out`` exists and is not an empty
        folder.
    :raises InvalidArgumentTypeError: (a ``TypeError``) the engine does not use the LMDB
        recorder.
    """
    started = time.perf_counter()
    recorder = engine.lmdb_recorder()
    folder = Path(out)
    _empty_folder(folder, "backup folder")
    ledger = folder / "ledger"
    ledger.mkdir()
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
    data = ledger / "data.mdb"
    _fsync(data)
    manifest = BackupManifest(
        position=position,
        record_hash=record_hash,
        ledger_format=FORMAT_VERSION,
        source=str(engine.path),
        created_at=datetime.now(UTC),
    )
    (folder / MANIFEST).write_bytes(
        msgspec.json.format(msgspec.json.encode(manifest), indent=2) + b"\n"
    )
    _fsync(folder / MANIFEST)
    _fsync(ledger)
    _fsync(folder)
    return BackupReport(
        out=str(folder.absolute()),
        manifest=manifest,
        bytes=data.stat().st_size,
        head_after=engine.head,
        seconds=time.perf_counter() - started,
    )


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


def restore_store(backup: str | Path, store: str | Path) -> RestoreReport:
    """Restore the backup folder ``backup`` into the NEW store folder ``store`` and verify it.

    The ledger is copied (through a temporary name, then fsynced); projections are rebuilt
    from it when the store is next opened.

    :raises FileNotFoundError: ``backup`` is not a backup folder.
    :raises FileExistsError: ``store`` exists and is not empty (a restore never overwrites).
    """
    started = time.perf_counter()
    manifest = read_manifest(backup)
    target = Path(store)
    _empty_folder(target, "store folder")
    ledger = target / "ledger"
    ledger.mkdir()
    partial = ledger / "data.mdb.partial"
    shutil.copyfile(Path(backup) / "ledger" / "data.mdb", partial)
    _fsync(partial)
    os.replace(partial, ledger / "data.mdb")
    _fsync(ledger)
    with MemoryEngine.open(
        target, create=False, config=load_config_from(load_config(), embeddings="none")
    ) as engine:
        report = verify_store(engine)
        last_hash = None
        if report.ok and report.head:
            for nid, value in engine.lmdb_recorder().iter_log(start=report.head, page=1):
                if nid == report.head:
                    last_hash = value[:HASH_SIZE].hex()
    problem = report.problem
    if report.ok and report.head != manifest.position:
        problem = f"restored head {report.head} differs from the backup's {manifest.position}"
    elif report.ok and last_hash != manifest.record_hash:
        problem = f"hash of record {report.head} differs from the backup manifest"
    return RestoreReport(
        ok=report.ok and problem is None,
        store=str(target.absolute()),
        manifest=manifest,
        verify=report,
        problem=problem,
        seconds=time.perf_counter() - started,
    )
