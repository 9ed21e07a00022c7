"""A put is one durable LMDB write transaction (docs/benchmarks.md, "A single put: where
its wall time goes"): its command's events, their stream keys and tags are committed
together, with one sync, and nothing else is written to the ledger for it. So is a direct
``remember`` and a ``batch`` of several puts."""

from __future__ import annotations

from pathlib import Path

from langgraph.store.base import PutOp

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.replay.langgraph_store import LedgerStore

NS = Namespace("acme", "alice", "one-transaction")


def test_a_put_and_a_batch_are_one_lmdb_write_transaction(tmp_path: Path) -> None:
    store = LedgerStore.open(tmp_path / "store", NS, index_in_background=False)
    try:
        env = store.engine.lmdb_recorder().datastore.env
        store.put(("docs",), "warm", {"text": "tea"})  # the store's first write
        for i in range(3):
            before = env.info()["last_txnid"]
            store.put(("docs",), f"k{i}", {"text": f"coffee {i}"})
            assert env.info()["last_txnid"] == before + 1
            item = store.get(("docs",), f"k{i}")
            assert item is not None and item.value == {"text": f"coffee {i}"}
        assert env.info()["last_txnid"] == before + 1, "the get wrote nothing"
        before = env.info()["last_txnid"]
        store.batch([PutOp(("docs",), f"b{i}", {"text": f"juice {i}"}) for i in range(5)])
        assert env.info()["last_txnid"] == before + 1
    finally:
        store.close()


def test_a_direct_remember_is_one_lmdb_write_transaction(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "engine") as engine:
        env = engine.lmdb_recorder().datastore.env
        engine.remember(NS, "Alice drinks tea")
        before = env.info()["last_txnid"]
        engine.remember(NS, "Alice plays chess")
        assert env.info()["last_txnid"] == before + 1
