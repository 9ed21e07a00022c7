"""The commit journal of an LMDB ledger (``memory_ledger.ledger.commit_journal``): LMDB does
not flush the meta page at commit, and the last transaction's writes are kept in a slot
file flushed beside the data pages; after a power loss that took the meta page, a writable
open replays it.

A power loss is simulated the way it would leave the files: the ledger is closed, and its
two meta pages (pages 0 and 1 of ``data.mdb``) are put back as they were before the last
commit, while that commit's data pages stay written (LMDB wrote them to pages that were free
in the state before, so that state is intact). A ``kill -9`` cannot lose a meta page (the
kernel keeps it): the crash tests cover it, this is the power loss.
"""

from __future__ import annotations

from pathlib import Path
from uuid import NAMESPACE_URL, uuid5

import lmdb
import pytest
from eventsourcing.dcb.api import DCBQuery, DCBQueryItem
from eventsourcing.persistence import IntegrityError, StoredEvent

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger.commit_journal import SLOT_FILES, JournaledTransaction, replay
from memory_ledger.ledger.lmdb import LMDBApplicationRecorder, LMDBDatastore
from memory_ledger.ledger.records import GENESIS_HASH, chain_hash
from memory_ledger.replay.langgraph_store import LedgerStore

TOPIC = "tests.commit_journal:Event"
META_BYTES = 2 * 4096
NS = Namespace("acme", "alice", "journal")


def events(name: str, count: int = 3) -> list[StoredEvent]:
    stream = uuid5(NAMESPACE_URL, f"commit-journal/{name}")
    return [StoredEvent(stream, v, TOPIC, f"{name}/{v}".encode()) for v in range(1, count + 1)]


def open_recorder(path: Path) -> LMDBApplicationRecorder:
    return LMDBApplicationRecorder(LMDBDatastore(str(path), sync=True))


def meta_pages(path: Path) -> bytes:
    with (path / "data.mdb").open("rb") as f:
        return f.read(META_BYTES)


def lose_meta_pages(path: Path, before: bytes) -> None:
    """Put the meta pages back as ``before``: the last commit's meta page never reached
    the disk."""
    with (path / "data.mdb").open("r+b") as f:
        f.write(before)


def states(recorder: LMDBApplicationRecorder) -> list[bytes]:
    return [n.state for n in recorder.select_notifications(1, 100)]


def chain_holds(path: Path) -> bool:
    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=32)
    try:
        log = env.open_db(b"log", create=False)
        previous = GENESIS_HASH
        with env.begin() as txn:
            for _key, value in txn.cursor(db=log):
                record = bytes(value)
                if chain_hash(previous, record[32:]) != record[:32]:
                    return False
                previous = record[:32]
        return True
    finally:
        env.close()


def test_a_commit_whose_meta_page_was_lost_is_replayed_from_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "ledger"
    recorder = open_recorder(path)
    assert recorder.insert_events(events("first")) == [1, 2, 3]
    before = meta_pages(path)
    assert recorder.insert_events(events("second"), tags=[["t:a"], [], ["t:b"]]) == [4, 5, 6]
    recorder.datastore.close()
    lose_meta_pages(path, before)

    lost = lmdb.open(str(path), readonly=True, lock=False, max_dbs=32)
    try:  # without the journal the acknowledged commit is gone: what the journal is for
        log = lost.open_db(b"log", create=False)
        with lost.begin() as txn:
            assert sum(1 for _ in txn.cursor(db=log)) == 3
    finally:
        lost.close()

    recorder = open_recorder(path)
    try:
        assert recorder.datastore.shared.recovered
        assert states(recorder) == [
            f"{n}/{v}".encode() for n in ("first", "second") for v in (1, 2, 3)
        ]
        assert [recorder.tags_of(p) for p in (4, 5, 6)] == [["t:a"], [], ["t:b"]]
        query = DCBQuery(items=[DCBQueryItem(types=[], tags=["t:b"])])
        assert [e.position for e in recorder.select_tagged(query).events] == [6]
        assert recorder.insert_events(events("third", 1)) == [7]
        with pytest.raises(IntegrityError, match="already recorded"):
            recorder.insert_events(events("second", 1))  # its stream keys were replayed too
    finally:
        recorder.datastore.close()
    assert chain_holds(path)


def test_a_torn_slot_is_not_replayed_and_the_ledger_stays_whole(tmp_path: Path) -> None:
    path = tmp_path / "ledger"
    recorder = open_recorder(path)
    recorder.insert_events(events("first"))
    before = meta_pages(path)
    recorder.insert_events(events("second"))
    txnid = recorder.datastore.env.info()["last_txnid"]
    recorder.datastore.close()
    lose_meta_pages(path, before)
    slot = path / SLOT_FILES[txnid % 2]
    torn = bytearray(slot.read_bytes())
    torn[80] ^= 0xFF  # inside the body: the CRC no longer holds (a write cut short)
    slot.write_bytes(bytes(torn))

    recorder = open_recorder(path)
    try:
        assert not recorder.datastore.shared.recovered
        assert states(recorder) == [b"first/1", b"first/2", b"first/3"]
        assert recorder.insert_events(events("second")) == [4, 5, 6]
    finally:
        recorder.datastore.close()
    assert chain_holds(path)


def test_a_slot_that_does_not_continue_the_ledger_is_not_replayed(tmp_path: Path) -> None:
    path = tmp_path / "ledger"
    recorder = open_recorder(path)
    recorder.insert_events(events("first"))
    before = meta_pages(path)
    recorder.insert_events(events("second"))
    recorder.datastore.close()
    lose_meta_pages(path, before)
    # Another ledger's slots (as a restore would leave stale ones): same transaction ids,
    # another log.
    other = tmp_path / "other"
    recorder = open_recorder(other)
    recorder.insert_events(events("elsewhere"))
    recorder.insert_events(events("elsewhere-too"))
    recorder.datastore.close()
    for name in SLOT_FILES:
        (path / name).write_bytes((other / name).read_bytes())

    recorder = open_recorder(path)
    try:
        assert not recorder.datastore.shared.recovered
        assert states(recorder) == [b"first/1", b"first/2", b"first/3"]
    finally:
        recorder.datastore.close()


def test_a_clean_reopen_replays_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ledger"
    recorder = open_recorder(path)
    recorder.insert_events(events("first"))
    recorder.insert_events(events("second"))
    recorder.datastore.close()
    recorder = open_recorder(path)
    try:
        assert not recorder.datastore.shared.recovered
        assert len(states(recorder)) == 6
    finally:
        recorder.datastore.close()


def test_recorded_writes_replay_to_the_same_contents(tmp_path: Path) -> None:
    """Puts, multi-puts (appending, not overwriting), cursor and key deletes and pops,
    recorded in one transaction and replayed on a copy of the state it began from, leave
    the same contents."""
    envs = [lmdb.open(str(tmp_path / n), max_dbs=4) for n in ("a", "b")]
    try:
        dbs = [env.open_db(b"d", txn=None) for env in envs]
        for env, db in zip(envs, dbs, strict=True):
            with env.begin(write=True) as txn:
                for i in range(10):
                    txn.put(b"k%02d" % i, b"v%d" % i, db=db)
        names = {dbs[0]: b"d"}
        with envs[0].begin(write=True) as txn:
            view = JournaledTransaction(txn, names)
            view.put(b"k00", b"new", db=dbs[0])
            view.put(b"k01", b"kept", overwrite=False, db=dbs[0])  # not written
            cursor = view.cursor(db=dbs[0])
            cursor.putmulti([(b"k05", b"x"), (b"k50", b"y")], overwrite=False)
            cursor.putmulti([(b"z1", b"1"), (b"z2", b"2")], append=True)
            assert cursor.set_key(b"k03")
            cursor.delete()
            view.delete(b"k04", db=dbs[0])
            view.pop(b"k06", db=dbs[0])
            view.replace(b"k07", b"replaced", db=dbs[0])
            ops = view.recorded
        assert ops is not None
        with envs[1].begin(write=True) as txn:
            replay(txn, ops, lambda name: envs[1].open_db(name, txn=txn))
        contents = []
        for env, db in zip(envs, dbs, strict=True):
            with env.begin() as txn:
                contents.append([(bytes(k), bytes(v)) for k, v in txn.cursor(db=db)])
        assert contents[0] == contents[1]
        assert (b"k01", b"v1") in contents[0] and (b"k50", b"y") in contents[0]
    finally:
        for env in envs:
            env.close()


def test_a_write_the_journal_cannot_name_is_flushed_in_full(tmp_path: Path) -> None:
    env = lmdb.open(str(tmp_path / "e"), max_dbs=4)
    try:
        db = env.open_db(b"d")
        with env.begin(write=True) as txn:
            view = JournaledTransaction(txn, {})
            view.put(b"k", b"v", db=db)
            assert view.recorded is None
    finally:
        env.close()


def test_a_langgraph_put_is_one_lmdb_write_transaction(tmp_path: Path) -> None:
    """A put commits once (one transaction id, one journal slot written), and so does a
    direct remember."""
    store = LedgerStore.open(tmp_path / "store", NS, index_in_background=False)
    try:
        env = store.engine.lmdb_recorder().datastore.env
        store.put(("docs",), "warm", {"text": "tea"})
        for i in range(3):
            before = env.info()["last_txnid"]
            store.put(("docs",), f"k{i}", {"text": f"coffee {i}"})
            assert env.info()["last_txnid"] == before + 1
            assert store.get(("docs",), f"k{i}") is not None
    finally:
        store.close()
    with MemoryEngine.open(tmp_path / "engine") as engine:
        env = engine.lmdb_recorder().datastore.env
        engine.remember(NS, "Alice drinks tea")
        before = env.info()["last_txnid"]
        engine.remember(NS, "Alice plays chess")
        assert env.info()["last_txnid"] == before + 1


def test_a_langgraph_put_survives_a_lost_meta_page(tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    store = LedgerStore.open(store_path, NS, index_in_background=False)
    ledger = store_path / "ledger"
    try:
        store.put(("docs",), "a", {"text": "tea"})
        before = meta_pages(ledger)
        store.put(("docs",), "b", {"text": "coffee"})
    finally:
        store.close()
    lose_meta_pages(ledger, before)
    store = LedgerStore.open(store_path, NS, index_in_background=False)
    try:
        assert store.engine.lmdb_recorder().datastore.shared.recovered
        item = store.get(("docs",), "b")
        assert item is not None and item.value == {"text": "coffee"}
        assert store.search(("docs",), query="coffee")[0].key == "b"
    finally:
        store.close()
