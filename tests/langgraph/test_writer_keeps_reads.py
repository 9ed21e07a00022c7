"""The writer keeps the read model current (issue 35): after a batch of this store, the
reader remembers each written address's new value, taken from the batch's own records,
without reading the ledger again, and only when that is the answer a read gives. Every
``get`` right after a write (puts, deletes, the same value again, puts with a TTL, writes of
another store or engine over the same folder in between) answers exactly what a reader
that remembers nothing answers, every field of the item; a get right after a put reads no
key's events; a store that never put a TTL reads nothing for TTLs before a put, and sees
another process's TTL put."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import PutOp

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.replay.langgraph_store import LedgerStore

ADDRESSES = [(("users", "a"), "k0"), (("users", "a"), "k1"), (("users", "b"), "k0")]


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MemoryEngine, ...]]:
    folder = tmp_path_factory.mktemp("keeps") / "store"
    with MemoryEngine.open(folder) as first, MemoryEngine.open(folder) as second:
        yield first, second


def item(store: LedgerStore, address: tuple[tuple[str, ...], str]) -> Any:
    got = store.get(*address, refresh_ttl=False)
    if got is None:
        return None
    return (got.namespace, got.key, got.value, got.created_at, got.updated_at)


_OP = st.tuples(
    st.sampled_from(["put", "same", "ttl", "delete", "batch", "other", "elsewhere"]),
    st.integers(0, len(ADDRESSES) - 1),
    st.integers(0, 2),
)


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_OP, min_size=1, max_size=12))
def test_a_get_after_each_write_reads_as_a_fresh_reader(
    engines: tuple[MemoryEngine, MemoryEngine], ops: list[tuple[str, int, int]]
) -> None:
    first, second = engines
    tenant = Namespace("keeps", "lg", uuid.uuid4().hex)
    ours = LedgerStore(first, tenant)
    other = LedgerStore(first, tenant)  # another reader in this process
    elsewhere = LedgerStore(second, tenant)  # another engine over the same folder
    last: dict[int, dict[str, Any]] = {}
    for op, which, n in ops:
        address = ADDRESSES[which]
        value = {"text": f"value {n} of {address[1]}", "n": n}
        if op == "put":
            ours.put(*address, value)
        elif op == "same":  # the value it holds again: a reinforce (updated_at moves)
            ours.put(*address, last.get(which, value))
            value = last.get(which, value)
        elif op == "ttl":
            ours.put(*address, value, ttl=60.0)
        elif op == "delete":
            ours.delete(*address)
        elif op == "batch":  # two addresses in one command
            twin = ADDRESSES[(which + 1) % len(ADDRESSES)]
            ours.batch([PutOp(*address, value), PutOp(*twin, None)])
        elif op == "other":
            other.put(*address, value)
        else:
            elsewhere.put(*address, value)
        last[which] = value
        fresh = LedgerStore(first, tenant)  # remembers nothing
        for seen in ADDRESSES:
            assert item(ours, seen) == item(fresh, seen), (op, seen)


def test_a_get_right_after_a_put_reads_no_key_events(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LedgerStore(engine, Namespace("keeps", "lg", "no-read"))
    read: list[Any] = []
    key_events = store.reader.key_events

    def counted(namespace: tuple[str, ...], key: str) -> Any:
        read.append((namespace, key))
        return key_events(namespace, key)

    monkeypatch.setattr(store.reader, "key_events", counted)
    store.put(("a",), "new", {"v": 1})  # never seen: one read of its key tag, in the put
    got = store.get(("a",), "new")
    assert got is not None and got.value == {"v": 1}
    store.put(("a",), "new", {"v": 2})  # remembered: folded on from the batch
    again = store.get(("a",), "new")
    assert again is not None and again.value == {"v": 2}
    assert again.created_at == got.created_at and again.updated_at > got.updated_at
    store.delete(("a",), "new")
    assert store.get(("a",), "new") is None
    store.put(("a",), "new", {"v": 2})  # after a delete: a new item
    back = store.get(("a",), "new")
    assert back is not None and back.created_at > got.created_at
    assert read == []


def test_a_store_without_ttls_reads_nothing_for_them_and_sees_another_process_ttl(
    tmp_path: Path,
) -> None:
    """No value with a TTL: a put reads no key's activations for its expiry check. Once
    another engine over the folder puts one, this store's writes judge its expiry (a put
    after it ran out starts a new item)."""
    now = [datetime.now(UTC)]
    tenant = Namespace("keeps", "lg", "ttl")
    with MemoryEngine.open(tmp_path / "s") as first, MemoryEngine.open(tmp_path / "s") as second:
        ours = LedgerStore(first, tenant, clock=lambda: now[0])
        for i in range(5):
            ours.put(("a",), f"k{i}", {"v": i})
        assert ours.reader._ttl_scans == {}  # no key's activations were read for TTLs
        elsewhere = LedgerStore(second, tenant)
        elsewhere.put(("a",), "t", {"v": "ttl"}, ttl=1.0)
        created = ours.get(("a",), "t", refresh_ttl=False)
        assert created is not None
        now[0] += timedelta(minutes=2)
        ours.put(("a",), "t", {"v": "again"})
        renewed = ours.get(("a",), "t", refresh_ttl=False)
        assert renewed is not None and renewed.created_at > created.created_at
        fresh = LedgerStore(first, tenant)
        assert item(fresh, (("a",), "t")) == item(ours, (("a",), "t"))


def test_threads_putting_and_getting_the_same_keys_match_a_serial_order(
    engine: MemoryEngine,
) -> None:
    """Threads put the same keys and read each right after their own put, behind a barrier
    per round: every get answers the value of one of the round's puts of that key (its own
    or one racing it), never an older one or nothing; after the round every key reads, all
    fields, as a reader that remembers nothing reads it."""
    tenant = Namespace("keeps", "lg", "race")
    store = LedgerStore(engine, tenant)
    threads, rounds, keys = 4, 25, 2
    barrier = threading.Barrier(threads)
    wrong: list[str] = []

    def run(t: int) -> None:
        for rnd in range(rounds):
            barrier.wait()
            key = f"k{(t + rnd) % keys}"
            store.put(("r",), key, {"round": rnd, "t": t})
            got = store.get(("r",), key)
            if got is None or got.value.get("round") != rnd:
                wrong.append(f"round {rnd} t{t}: {key} -> {got and got.value}")
            barrier.wait()
            if t == 0:
                fresh = LedgerStore(engine, tenant)
                for k in range(keys):
                    if item(store, (("r",), f"k{k}")) != item(fresh, (("r",), f"k{k}")):
                        wrong.append(f"after round {rnd}: k{k} differs from a fresh read")
            barrier.wait()

    running = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    assert wrong == []
