"""LangGraph's ``refresh_on_read`` (its default): a read within an item's TTL keeps the item
alive, in this store, in another store over the same ledger and after a reopen (issue 34
item 5: an item read every 0.4 s with a 1.2 s TTL expired and was swept while in use).

Time is a clock handed to the store (no sleeping): the ledger's recorded times are real,
the clock starts at the put and moves by hand."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from langgraph.store.base import TTLConfig

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.replay.langgraph_store import LedgerStore
from memory_ledger.replay.langgraph_store.ttl import REFRESH_SESSION, refresh_stream

TTL = 0.02  # minutes: 1.2 s
NS = ("sessions",)


class Clock:
    """A clock that stands still until moved: ``at(seconds)`` after its start."""

    def __init__(self) -> None:
        self.start = datetime.now(UTC)
        self.now = self.start

    def at(self, seconds: float) -> None:
        self.now = self.start + timedelta(seconds=seconds)

    def __call__(self) -> datetime:
        return self.now


def tenant() -> Namespace:
    return Namespace("ttl", "refresh", uuid.uuid4().hex)


def test_an_item_read_every_0_4_s_with_a_1_2_s_ttl_never_expires(engine: MemoryEngine) -> None:
    clock = Clock()
    store = LedgerStore(engine, tenant(), ttl={"default_ttl": TTL}, clock=clock)
    store.put(NS, "k", {"v": 1})
    for step in range(1, 16):  # 6 s of reads, five TTLs
        clock.at(0.4 * step)
        got = store.get(NS, "k")
        assert got is not None and got.value == {"v": 1}, step
        assert store.sweep_ttl() == 0, step
    assert [i.key for i in store.search(NS)] == ["k"]
    clock.at(6.0 + 1.3)  # no read for longer than the TTL
    assert store.get(NS, "k") is None
    assert store.sweep_ttl() == 1
    assert [v.action for v in store.history(NS, "k")] == ["put", "expired"]


def test_a_read_without_refresh_leaves_the_ttl_alone(engine: MemoryEngine) -> None:
    clock = Clock()
    quiet = LedgerStore(
        engine, tenant(), ttl={"default_ttl": TTL, "refresh_on_read": False}, clock=clock
    )
    store = LedgerStore(engine, tenant(), ttl={"default_ttl": TTL}, clock=clock)
    for each in (quiet, store):
        each.put(NS, "k", {"v": 1})
    clock.at(0.8)
    assert quiet.get(NS, "k") is not None  # refresh_on_read False: no refresh
    assert store.get(NS, "k", refresh_ttl=False) is not None  # asked per read
    assert quiet.search(NS) != [] and store.search(NS, refresh_ttl=False) != []
    clock.at(1.3)
    assert quiet.get(NS, "k") is None and store.get(NS, "k") is None
    assert quiet.sweep_ttl() == 1 and store.sweep_ttl() == 1


def test_a_search_refreshes_what_it_returns(engine: MemoryEngine) -> None:
    clock = Clock()
    store = LedgerStore(engine, tenant(), ttl={"default_ttl": TTL}, clock=clock)
    store.put(NS, "found", {"text": "tea"})
    store.put(("elsewhere",), "missed", {"text": "tea"})
    clock.at(1.0)
    assert [i.key for i in store.search(NS, query="tea")] == ["found"]
    clock.at(1.5)
    assert store.get(NS, "found", refresh_ttl=False) is not None
    assert store.get(("elsewhere",), "missed") is None
    assert store.list_namespaces() == [NS]


def test_another_store_and_a_reopened_folder_see_the_refresh(tmp_path: Path) -> None:
    """The refresh is in the ledger (a read-path record of session ``langgraph-read``), so a
    store that did not make it does not call the item expired, nor sweep it."""
    clock = Clock()
    space = tenant()
    with LedgerStore.open(tmp_path / "s", space, ttl={"default_ttl": TTL}, clock=clock) as one:
        one.put(NS, "k", {"v": 1})
        clock.at(1.0)
        assert one.get(NS, "k") is not None
        one.refresher.flush()
        other = LedgerStore(one.engine, space, clock=clock)
        clock.at(2.0)  # past the put's TTL, within the read's
        assert other.get(NS, "k", refresh_ttl=False) is not None
        assert other.sweep_ttl() == 0
        current = other.reader.current(NS, "k")
        assert current is not None
        digests = one.engine.keyring.digests
        records = one.engine.load_stream(refresh_stream(space, current.memory_id, digests))
        assert [r.session_id for r in records] == [REFRESH_SESSION]  # type: ignore[attr-defined]
        clock.at(2.1)
        assert one.get(NS, "k") is not None  # buffered, written at close
    with LedgerStore.open(tmp_path / "s", space, clock=clock) as reopened:
        clock.at(3.2)
        assert reopened.get(NS, "k", refresh_ttl=False) is not None
        assert reopened.sweep_ttl() == 0
        clock.at(3.4)
        assert reopened.get(NS, "k") is None
        assert reopened.sweep_ttl() == 1


def test_reads_close_together_record_one_refresh(engine: MemoryEngine) -> None:
    """The ledger records at most one refresh per item per twentieth of its TTL (here 60 ms);
    the store that read still counts from its last read."""
    clock = Clock()
    space = tenant()
    store = LedgerStore(engine, space, ttl={"default_ttl": TTL}, clock=clock)
    store.put(NS, "k", {"v": 1})
    for step in range(1, 6):
        clock.at(1.0 + step * 0.01)
        assert store.get(NS, "k") is not None
    store.refresher.flush()
    current = store.reader.current(NS, "k")
    assert current is not None
    assert (
        len(engine.load_stream(refresh_stream(space, current.memory_id, engine.keyring.digests)))
        == 1
    )
    clock.at(1.05 + 1.15)  # 1.2 s after the first read, 1.15 s after the last
    assert store.get(NS, "k", refresh_ttl=False) is not None


def test_an_idle_store_still_writes_its_refresh(engine: MemoryEngine) -> None:
    """A refresh is written by a timer about a second after the read, with no further read,
    sweep or close (else another process could sweep an item read here)."""
    import time

    clock = Clock()
    space = tenant()
    store = LedgerStore(engine, space, ttl={"default_ttl": TTL}, clock=clock)
    store.put(NS, "k", {"v": 1})
    clock.at(0.5)
    assert store.get(NS, "k") is not None
    current = store.reader.current(NS, "k")
    assert current is not None
    stream = refresh_stream(space, current.memory_id, engine.keyring.digests)
    deadline = time.monotonic() + 30
    while not engine.load_stream(stream) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(engine.load_stream(stream)) == 1


@pytest.mark.parametrize("omit", [None, False, True], ids=["unset", "false", "true"])
def test_an_expired_item_is_not_read_before_a_sweep_whatever_omit_expired_says(
    engine: MemoryEngine, omit: bool | None
) -> None:
    """Expiry is judged at read time from the ledger (there is no unswept row to return), so
    LangGraph's ``omit_expired`` behaviour holds even when the option is unset or False."""
    clock = Clock()
    config: TTLConfig = {"default_ttl": TTL}
    if omit is not None:
        config["omit_expired"] = omit
    store = LedgerStore(engine, tenant(), ttl=config, clock=clock)
    gone, kept = ("omit", "expired"), ("omit", "control")
    for key in ("a", "b", "c"):
        store.put(NS, key, {"k": key}, ttl=None)
    store.put(NS, "old", {"k": "x"})
    store.put(gone, "e", {"data": "gone"})
    store.put(kept, "c", {"data": "keep"}, ttl=None)
    clock.at(TTL * 60 + 0.5)  # past the TTL; nothing swept
    assert store.get(gone, "e") is None
    assert store.get(gone, "e", refresh_ttl=True) is None  # a refreshing read revives nothing
    assert store.search(gone) == []
    assert [i.key for i in store.search(kept)] == ["c"]
    listed = store.list_namespaces(prefix=("omit",))
    assert gone not in listed and kept in listed
    first, second = store.search(NS, limit=2), store.search(NS, limit=2, offset=2)
    assert len(first) == 2 and [i.key for i in first + second if i.key == "old"] == []
    assert sorted(i.key for i in first + second) == ["a", "b", "c"]
    assert store.sweep_ttl() == 2
    assert [v.action for v in store.history(gone, "e")] == ["put", "expired"]
