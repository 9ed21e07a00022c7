"""Store identity: a ledger records who it belongs to and its format; anything else is
refused on open with a typed error naming the path, and left byte for byte untouched.

Refused: another application's LMDB (other named databases, plain keys, another identity),
an empty ``data.mdb``, garbage in ``data.mdb``, and an LMDB environment at the top of a
store folder. Adopted: a ledger written before identities were recorded (its identity is
recorded at the next writable open, never by a read-only one).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import lmdb
import pytest
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from eventsourcing.persistence import DatabaseError

from memory_ledger import MemoryLedgerError
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger.errors import ForeignStoreError, LedgerFormatError
from memory_ledger.ledger.lmdb import FORMAT_VERSION, LMDBDatastore
from memory_ledger.ledger.store_identity import APPLICATION, ENGINE_STORE, STORE_KIND_KEY
from memory_ledger.replay import backup_store

NS = Namespace("acme", "alice", "assistant")


def digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` except LMDB's lock file (a reader's slots)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "lock.mdb"
    }


def lmdb_with(path: Path, fill: Callable[[lmdb.Environment], None]) -> None:
    path.mkdir(parents=True)
    env = lmdb.open(str(path), max_dbs=8)
    try:
        fill(env)
    finally:
        env.close()


def named_databases(env: lmdb.Environment) -> None:
    users = env.open_db(b"users")
    with env.begin(write=True) as txn:
        txn.put(b"u1", b"Bob", db=users)


def plain_keys(env: lmdb.Environment) -> None:
    with env.begin(write=True) as txn:
        txn.put(b"session:42", b"{}")


def other_identity(env: lmdb.Environment) -> None:
    meta = env.open_db(b"meta")
    with env.begin(write=True) as txn:
        txn.put(b"application", b"someone-else", db=meta)
        txn.put(b"format_version", b"1", db=meta)


def legacy_without_format(env: lmdb.Environment) -> None:
    meta = env.open_db(b"meta")
    env.open_db(b"log")
    with env.begin(write=True) as txn:
        txn.put(b"created", b"yesterday", db=meta)


@pytest.mark.parametrize(
    ("fill", "reason", "named"),
    [
        (named_databases, "foreign_lmdb", "users"),
        (plain_keys, "foreign_lmdb", "session:42"),
        (other_identity, "foreign_lmdb", "someone-else"),
        (legacy_without_format, "foreign_lmdb", "no identity"),
    ],
)
def test_another_applications_lmdb_is_refused_untouched(
    tmp_path: Path, fill: Callable[[lmdb.Environment], None], reason: str, named: str
) -> None:
    store = tmp_path / "store"
    lmdb_with(store / "ledger", fill)
    before = digests(store)
    with pytest.raises(ForeignStoreError) as raised:
        MemoryEngine.open(store)
    assert raised.value.reason_code == reason
    assert str(store / "ledger") in str(raised.value) and named in str(raised.value)
    assert isinstance(raised.value, MemoryLedgerError) and isinstance(raised.value, DatabaseError)
    assert digests(store) == before
    assert sorted(p.name for p in store.iterdir()) == ["ledger"], "no projection folder made"
    with pytest.raises(ForeignStoreError):
        MemoryEngine.open(store, read_only=True)


def test_an_empty_data_file_is_refused_untouched(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "ledger").mkdir(parents=True)
    (store / "ledger" / "data.mdb").write_bytes(b"")
    with pytest.raises(ForeignStoreError) as raised:
        MemoryEngine.open(store)
    assert raised.value.reason_code == "empty_data_file"
    assert str(store / "ledger" / "data.mdb") in str(raised.value)
    assert (store / "ledger" / "data.mdb").stat().st_size == 0
    assert sorted(p.name for p in (store / "ledger").iterdir()) == ["data.mdb"]
    with pytest.raises(ForeignStoreError, match="empty"):
        MemoryEngine.open(store, create=False)


def test_garbage_in_the_data_file_is_refused_untouched(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "ledger").mkdir(parents=True)
    garbage = os.urandom(40_000)
    (store / "ledger" / "data.mdb").write_bytes(garbage)
    with pytest.raises(ForeignStoreError) as raised:
        MemoryEngine.open(store)
    assert raised.value.reason_code == "not_lmdb"
    assert str(store / "ledger") in str(raised.value)
    assert (store / "ledger" / "data.mdb").read_bytes() == garbage


def test_an_lmdb_at_the_top_of_the_store_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "someapp"
    lmdb_with(folder, named_databases)
    before = digests(folder)
    for create in (True, False):
        with pytest.raises(ForeignStoreError) as raised:
            MemoryEngine.open(folder, create=create)
        assert raised.value.reason_code == "lmdb_at_top_level"
        assert str(folder) in str(raised.value)
    assert digests(folder) == before
    assert not (folder / "ledger").exists() and not (folder / "projections").exists()


def test_a_new_store_records_its_identity_and_keeps_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store, sync=False) as engine:
        engine.session(NS, "s1")
    meta = read_meta(store / "ledger")
    assert meta[b"application"] == APPLICATION
    assert meta[b"format_version"] == str(FORMAT_VERSION).encode()
    store_id = meta[b"store_id"]
    assert len(store_id) == 36
    with MemoryEngine.open(store, sync=False) as engine:
        assert engine.head == 1
        backup_store(engine, tmp_path / "backup")
    assert read_meta(store / "ledger")[b"store_id"] == store_id
    assert read_meta(tmp_path / "backup" / "ledger")[b"store_id"] == store_id


def read_meta(path: Path) -> dict[bytes, bytes]:
    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=8)
    try:
        meta = env.open_db(b"meta", create=False)
        with env.begin(db=meta) as txn:
            return {bytes(k): bytes(v) for k, v in txn.cursor()}
    finally:
        env.close()


def make_legacy(path: Path) -> None:
    """A ledger as versions before store identities wrote it: format_version only."""
    env = lmdb.open(str(path), max_dbs=8)
    try:
        meta = env.open_db(b"meta")
        for name in (b"log", b"index", b"tracking"):
            env.open_db(name)
        with env.begin(write=True) as txn:
            txn.delete(b"application", db=meta)
            txn.delete(b"store_id", db=meta)
            txn.delete(STORE_KIND_KEY, db=meta)
    finally:
        env.close()


def test_a_store_written_before_identities_is_adopted(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store, sync=False) as engine:
        engine.session(NS, "s1")
    make_legacy(store / "ledger")
    assert set(read_meta(store / "ledger")) == {b"format_version"}
    with MemoryEngine.open(store, read_only=True) as engine:
        assert engine.head == 1
    assert set(read_meta(store / "ledger")) == {b"format_version"}, "read-only never writes"
    with MemoryEngine.open(store, sync=False) as engine:
        assert engine.head == 1
    meta = read_meta(store / "ledger")
    assert meta[b"application"] == APPLICATION and b"store_id" in meta


def test_the_datastore_itself_refuses_a_foreign_environment(tmp_path: Path) -> None:
    lmdb_with(tmp_path / "other", named_databases)
    with pytest.raises(ForeignStoreError):
        LMDBDatastore(str(tmp_path / "other"))
    with pytest.raises(LedgerFormatError):  # a ForeignStoreError is a format refusal too
        LMDBDatastore(str(tmp_path / "other"), readonly=True)


class _Dog(Aggregate):
    @event("Registered")
    def __init__(self, name: str) -> None:
        self.name = name


def _ledger_of_another_application(ledger: Path) -> None:
    """What the README's InfrastructureFactory block lets another application write."""

    class Kennel(Application):
        env = {"PERSISTENCE_MODULE": "memory_ledger.ledger.lmdb", "LMDB_PATH": str(ledger)}

    app = Kennel()
    app.save(_Dog("fido"))
    app.factory.close()


def files_as_they_are(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Bytes and mtime (ns) of every file under ``folder``, the lock file included."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_a_ledger_of_another_eventsourcing_application_is_refused_untouched(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    _ledger_of_another_application(store / "ledger")
    assert read_meta(store / "ledger")[b"application"] == APPLICATION  # same module
    before = files_as_they_are(store)
    for read_only in (False, True):
        with pytest.raises(ForeignStoreError) as raised:
            MemoryEngine.open(store, read_only=read_only)
        assert raised.value.reason_code == "foreign_ledger"
        assert str(store / "ledger") in str(raised.value) and "Dog.Registered" in str(raised.value)
        assert files_as_they_are(store) == before
    assert sorted(p.name for p in store.iterdir()) == ["ledger"], "no projection folder made"


def test_a_refused_foreign_folder_gets_no_lock_file(tmp_path: Path) -> None:
    store = tmp_path / "store"
    lmdb_with(store / "ledger", named_databases)
    (store / "ledger" / "lock.mdb").unlink()
    (store / "other").mkdir()
    lmdb_with(store / "other" / "ledger", named_databases)
    before = files_as_they_are(store)
    with pytest.raises(ForeignStoreError):
        MemoryEngine.open(store)
    with pytest.raises(ForeignStoreError):
        LMDBDatastore(str(store / "other" / "ledger"))  # lock.mdb present: not rewritten
    assert files_as_they_are(store) == before


def test_an_engine_store_records_its_kind_and_a_legacy_one_is_adopted(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store, sync=False) as engine:
        engine.remember(NS, "Alice drinks espresso.")
    assert read_meta(store / "ledger")[STORE_KIND_KEY] == ENGINE_STORE
    env = lmdb.open(str(store / "ledger"), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:
        txn.delete(STORE_KIND_KEY)
    env.close()
    with MemoryEngine.open(store, sync=False) as engine:  # memory-ledger events only
        assert engine.recall(NS, "espresso")
    assert read_meta(store / "ledger")[STORE_KIND_KEY] == ENGINE_STORE
