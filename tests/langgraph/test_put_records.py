"""What a LangGraph put writes: one record for its command (DirectCommandApplied, its short
session's only session record) and its memory events; and a get right after it is served
from what the writer handed the reader, reading no ledger record (the carry starts at the
batch's first record, its command)."""

from __future__ import annotations

from typing import Any

import pytest
from eventsourcing.utils import get_topic
from langgraph.store.base import PutOp

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger.events import (
    DirectCommandApplied,
    MemoryActivated,
    MemoryForgotten,
    MemorySuperseded,
)
from memory_ledger.replay.langgraph_store import LedgerStore


def topics(engine: MemoryEngine, after: int) -> list[str]:
    return [record[3] for record in engine.read_records(after, 100, engine.head)]


def test_a_put_is_one_command_record_and_its_memory_events(engine: MemoryEngine) -> None:
    store = LedgerStore(engine, Namespace("puts", "lg", "records"))
    command, activated = get_topic(DirectCommandApplied), get_topic(MemoryActivated)
    head = engine.head
    store.put(("a",), "k", {"v": 1})  # a new key: 2 records where 5 were
    assert topics(engine, head) == [command, activated]
    head = engine.head
    store.put(("a",), "k", {"v": 2})  # a new value of the key supersedes the old one
    assert topics(engine, head) == [command, activated, get_topic(MemorySuperseded)]
    head = engine.head
    store.delete(("a",), "k")
    assert topics(engine, head) == [command, get_topic(MemoryForgotten)]
    head = engine.head
    store.batch([PutOp(("a",), "x", {"v": 1}), PutOp(("a",), "y", {"v": 2})])
    assert topics(engine, head) == [command, command, activated, activated]


def test_a_get_right_after_a_put_reads_no_ledger_record(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LedgerStore(engine, Namespace("puts", "lg", "carry"))
    for warm in range(2):  # the TTL watch reads once after the first get, then follows
        store.put(("a",), "k", {"v": -warm})
        store.get(("a",), "k")
    reads: list[Any] = []
    read_records = engine.read_records

    def counted(*args: Any, **kwargs: Any) -> Any:
        found = read_records(*args, **kwargs)
        reads.append(args)
        return found

    monkeypatch.setattr(engine, "read_records", counted)
    for n in range(1, 4):
        store.put(("a",), "k", {"v": n})
        writer_reads = len(reads)  # the writer reads its own batch's records, once
        got = store.get(("a",), "k")
        assert got is not None and got.value == {"v": n}
        assert len(reads) == writer_reads  # the get read nothing
        assert writer_reads == n  # one read of the batch by the put, none by the get
