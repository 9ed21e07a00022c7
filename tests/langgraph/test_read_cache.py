"""The store's remembered current values (``ItemReader.current``) are carried across a
write only when the write cannot change them: after any sequence of puts, deletes, puts of
the same value, and the engine's own forgets (of one memory, of the whole namespace), by
this store, another store over the same tenant, or another engine over the same folder,
every address reads as a reader that remembers nothing reads it; and a put re-reads no
address (its own is taken from the batch's records: tests/langgraph/test_writer_keeps_reads.py)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.replay.langgraph_store import LedgerStore
from memory_ledger.replay.langgraph_store.reads import ItemReader

ADDRESSES = [(("users", "a"), "k0"), (("users", "a"), "k1"), (("users", "b"), "k0")]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readcache") / "store"


@pytest.fixture(scope="module")
def engines(folder: Path) -> Iterator[tuple[MemoryEngine, MemoryEngine]]:
    with MemoryEngine.open(folder) as first, MemoryEngine.open(folder) as second:
        yield first, second


def view(reader: ItemReader, address: tuple[tuple[str, ...], str]) -> Any:
    found = reader.current(*address)
    if found is None:
        return None
    return (found.memory_id, found.value, found.created_at, found.updated_at, found.position)


_OP = st.tuples(
    st.sampled_from(["put", "put_other", "put_elsewhere", "delete", "forget", "forget_all"]),
    st.integers(0, len(ADDRESSES) - 1),
    st.integers(0, 2),
)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_OP, min_size=1, max_size=12))
def test_remembered_values_read_as_a_fresh_reader_reads_them(
    engines: tuple[MemoryEngine, MemoryEngine], ops: list[tuple[str, int, int]]
) -> None:
    first, second = engines
    tenant = Namespace("cache", "lg", uuid.uuid4().hex)
    ours = LedgerStore(first, tenant)
    other = LedgerStore(first, tenant)  # another store (its own reader) in this process
    elsewhere = LedgerStore(second, tenant)  # another engine over the same folder
    for op, which, n in ops:
        namespace, key = ADDRESSES[which]
        value = {"text": f"value {n} of {key}", "n": n}
        if op == "put":
            ours.put(namespace, key, value)
        elif op == "put_other":
            other.put(namespace, key, value)
        elif op == "put_elsewhere":
            elsewhere.put(namespace, key, value)
        elif op == "delete":
            other.delete(namespace, key)
        elif op == "forget":
            current = other.reader.current(namespace, key)
            if current is not None:
                second.forget(tenant, current.memory_id)
        else:
            first.forget_all(tenant)
        fresh = ItemReader(first, tenant)
        for address in ADDRESSES:
            assert view(ours.reader, address) == view(fresh, address), (op, address)
            got = ours.get(*address)
            assert (got.value if got else None) == (
                fresh.current(*address).value if fresh.current(*address) else None
            )


def test_a_put_rereads_no_address(engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LedgerStore(engine, Namespace("cache", "lg", "reread"))
    for namespace, key in ADDRESSES:
        store.put(namespace, key, {"text": f"first {key}"})
    for address in ADDRESSES:
        assert store.reader.current(*address) is not None  # remembered at this head
    read: list[tuple[tuple[str, ...], str]] = []
    key_events = store.reader.key_events

    def counted(namespace: tuple[str, ...], key: str) -> Any:
        read.append((namespace, key))
        return key_events(namespace, key)

    monkeypatch.setattr(store.reader, "key_events", counted)
    store.put(*ADDRESSES[0], {"text": "second"})
    found = store.search(("users",), query="first", limit=10)
    assert {(i.namespace, i.key) for i in found[:2]} == set(ADDRESSES[1:])  # then unscored
    changed = store.get(*ADDRESSES[0])
    assert changed is not None and changed.value == {"text": "second"}
    assert read == []  # the others were carried over the put, its own taken from it


def test_an_erasure_drops_every_remembered_value(tmp_path: Path) -> None:
    """A namespace erased (by this engine or another over the same folder) reads as empty
    at once: a ``NamespaceErased`` record drops every remembered value."""
    tenant = Namespace("cache", "lg", "erased")
    with MemoryEngine.open(tmp_path / "enc", master_key=os.urandom(32)) as engine:
        store = LedgerStore(engine, tenant)
        for namespace, key in ADDRESSES:
            store.put(namespace, key, {"text": f"kept {key}"})
        assert all(store.get(*address) is not None for address in ADDRESSES)
        engine.erase(tenant.tenant, tenant.principal, tenant.scope_id, requested_by="test")
        assert [store.get(*address) for address in ADDRESSES] == [None] * len(ADDRESSES)
        assert store.search(("users",), query="kept") == []
