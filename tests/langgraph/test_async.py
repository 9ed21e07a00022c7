"""The async API under concurrency: many coroutines (and threads) putting the same key leave
exactly one current value, the last one in the ledger's (serial) order; the puts of one
event-loop tick are one batch, whose last put of the key wins."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.replay.langgraph_store import LedgerStore

TENANT = Namespace("acme", "alice", "async")


def check_one_current(store: LedgerStore, count: int, *, merged: bool = False) -> None:
    """Every put is in the history once, in some serial order (``merged``: the puts were
    one batch, so only its last put of the key is), and the current value is the last one of
    that order; a search finds exactly one item at the key."""
    history = store.history(("race",), "k")
    values = [v.value["i"] for v in history if v.action == "put" and v.value is not None]
    assert values == [count - 1] if merged else sorted(values) == list(range(count))
    current = store.get(("race",), "k")
    assert current is not None and current.value == {"i": values[-1]}
    found = [item for item in store.search(("race",), limit=100) if item.key == "k"]
    assert [item.value for item in found] == [current.value]
    assert store.engine.count_active_memories(TENANT) == 1


def test_many_coroutines_put_the_same_key(engine: MemoryEngine) -> None:
    store = LedgerStore(engine, TENANT)

    async def race() -> None:
        await asyncio.gather(*(store.aput(("race",), "k", {"i": i}) for i in range(20)))
        got = await store.aget(("race",), "k")
        assert got is not None
        assert await store.alist_namespaces() == [("race",)]
        assert [i.key for i in await store.asearch(("race",))] == ["k"]

    asyncio.run(race())
    check_one_current(store, 20, merged=True)
    store.close()


def test_threads_race_on_the_same_key(tmp_path: Path) -> None:
    with LedgerStore.open(tmp_path / "store", TENANT) as store:
        barrier = threading.Barrier(6)
        errors: list[BaseException] = []

        def writer(start: int) -> None:
            try:
                barrier.wait()
                for i in range(start, start + 3):
                    store.put(("race",), "k", {"i": i})
            except BaseException as e:  # pragma: no cover (reported below)
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(n * 3,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        check_one_current(store, 18)


def test_async_delete_and_batch(engine: MemoryEngine) -> None:
    from langgraph.store.base import GetOp, Item, PutOp

    store = LedgerStore(engine, TENANT)

    async def flow() -> None:
        await store.aput(("a",), "x", {"v": 1})
        results = await store.abatch([PutOp(("a",), "x", {"v": 2}), GetOp(("a",), "x")])
        got = results[1]
        assert isinstance(got, Item) and got.value == {"v": 1}
        await store.adelete(("a",), "x")
        assert await store.aget(("a",), "x") is None

    asyncio.run(flow())
    assert [v.action for v in store.history(("a",), "x")] == ["put", "put", "deleted"]
    store.close()
