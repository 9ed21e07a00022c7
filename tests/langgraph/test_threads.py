"""Synchronous calls of one LangGraph store from several threads at once: every ``get``
and ``search`` answer is one a serial order of the writes allows (a key written before
and during a round holds its old or its new value, never nothing), and after each round
every key holds its last put."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.replay.langgraph_store import LedgerStore

TENANT = Namespace("t", "p", "threads")
KEYS = 6
ROUNDS = 30


def test_sync_puts_and_reads_from_threads_match_a_serial_model(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``KEYS`` threads race each round behind a barrier: thread ``t`` puts key
    ``(t + round) % KEYS`` (one writer per key per round) while reading every key and
    searching. The serial model: a key's value is the last round's or this round's.
    A read pauses between reading an address's events and looking up its memories, so
    writes land inside that window in every round (not only on a loaded machine)."""
    store = LedgerStore(engine, TENANT)
    key_events = store.reader.key_events

    def paused(*args: Any) -> Any:
        events = key_events(*args)
        time.sleep(0.001)
        return events

    monkeypatch.setattr(store.reader, "key_events", paused)
    for k in range(KEYS):
        store.put(("a",), f"k{k}", {"round": -1})
    barrier = threading.Barrier(KEYS)
    wrong: list[str] = []

    def allowed(key: int, value: object, rnd: int) -> bool:
        return value in ({"round": rnd - 1}, {"round": rnd})

    def thread(t: int) -> None:
        for rnd in range(ROUNDS):
            barrier.wait()
            store.put(("a",), f"k{(t + rnd) % KEYS}", {"round": rnd})
            for k in range(KEYS):
                item = store.get(("a",), f"k{k}")
                if item is None or not allowed(k, item.value, rnd):
                    wrong.append(f"round {rnd}: get k{k} -> {item and item.value}")
            found = {i.key: i.value for i in store.search(("a",), limit=100)}
            if sorted(found) != [f"k{k}" for k in range(KEYS)]:
                wrong.append(f"round {rnd}: search keys {sorted(found)}")
            wrong.extend(
                f"round {rnd}: search {key} -> {value}"
                for key, value in found.items()
                if not allowed(int(key[1:]), value, rnd)
            )
            barrier.wait()  # the round's writes are all done
            for k in range(KEYS):
                item = store.get(("a",), f"k{k}")
                if item is None or item.value != {"round": rnd}:
                    wrong.append(f"after round {rnd}: get k{k} -> {item and item.value}")

    threads = [threading.Thread(target=thread, args=(t,)) for t in range(KEYS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
    store.close()
