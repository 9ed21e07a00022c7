"""A put of a new key is taken into the reader from what the batch's decision found
(``BatchResult.never_activated``): the take-in reads no tag index of its own, and the get
after it answers what a reader that remembers nothing answers. A key the decision does not
name is read as before (the take-in's own read)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from memory_ledger import BatchResult
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.replay.langgraph_store import LedgerStore


def item(store: LedgerStore, namespace: tuple[str, ...], key: str) -> Any:
    got = store.get(namespace, key, refresh_ttl=False)
    return got and (got.value, got.created_at, got.updated_at)


def tag_reads_in_wrote(store: LedgerStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the engine's tag-index reads made while the reader takes a batch in."""
    engine = store.reader.engine
    inside = [False]
    counted: list[int] = []
    read_any, wrote = engine.read_tagged_any, store.reader.wrote

    def read(*args: Any, **kwargs: Any) -> Any:
        if inside[0]:
            counted.append(1)
        return read_any(*args, **kwargs)

    def taking(result: BatchResult, addresses: Any) -> None:
        inside[0] = True
        try:
            wrote(result, addresses)
        finally:
            inside[0] = False

    monkeypatch.setattr(engine, "read_tagged_any", read)
    monkeypatch.setattr(store.reader, "wrote", taking)
    return counted


def test_a_new_key_is_taken_in_without_a_tag_read(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = Namespace("keeps", "lg", "new-key")
    store = LedgerStore(engine, tenant)
    counted = tag_reads_in_wrote(store, monkeypatch)
    store.put(("a",), "new", {"v": 1})
    store.delete(("a",), "gone")  # a delete of a key never put: vacant, also named
    assert counted == []
    fresh = LedgerStore(engine, tenant)
    for key in ("new", "gone"):
        assert item(store, ("a",), key) == item(fresh, ("a",), key)
    assert item(store, ("a",), "new") is not None


def test_without_the_decision_s_answer_the_reader_reads_the_tag_index(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = Namespace("keeps", "lg", "no-answer")
    store = LedgerStore(engine, tenant)
    counted = tag_reads_in_wrote(store, monkeypatch)
    wrote = store.reader.wrote

    def unnamed(result: BatchResult, addresses: Any) -> None:
        wrote(msgspec.structs.replace(result, never_activated=frozenset()), addresses)

    monkeypatch.setattr(store.reader, "wrote", unnamed)
    store.put(("a",), "new", {"v": 1})
    assert counted == [1]
    assert item(store, ("a",), "new") == item(LedgerStore(engine, tenant), ("a",), "new")
