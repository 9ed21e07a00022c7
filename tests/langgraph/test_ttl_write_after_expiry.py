"""A write to an address whose value's TTL has run out answers as if a sweep had run just
before it (docs/langgraph.md, TTL: no answer depends on when a sweep ran): a put starts a
new item (its own ``created_at``) and the history shows the expiry, whether the sweeper ran
first or not, for ``put``, ``batch``, ``aput`` and a delete; a put before the TTL runs out
keeps the item's ``created_at`` and records no expiry.

Time is a clock handed to the store (no sleeping)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langgraph.store.base import PutOp

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.replay.langgraph_store import LedgerStore

TTL = 0.02  # minutes: 1.2 s
NS = ("t",)


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def move(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def __call__(self) -> datetime:
        return self.now


def _put(store: LedgerStore) -> None:
    store.put(NS, "a", {"v": 2})


def _batch(store: LedgerStore) -> None:
    store.batch([PutOp(NS, "b", {"w": 1}), PutOp(NS, "a", {"v": 2})])


def _aput(store: LedgerStore) -> None:
    asyncio.run(store.aput(NS, "a", {"v": 2}))


def _delete(store: LedgerStore) -> None:
    store.delete(NS, "a")


WRITES: dict[str, Callable[[LedgerStore], None]] = {
    "put": _put,
    "batch": _batch,
    "aput": _aput,
    "delete": _delete,
}


def after_expiry(engine: MemoryEngine, write: str, *, swept: bool) -> dict[str, Any]:
    clock = Clock()
    store = LedgerStore(engine, Namespace("ttl", "again", uuid.uuid4().hex), clock=clock)
    store.put(NS, "a", {"v": 1}, ttl=TTL)
    first = store.get(NS, "a", refresh_ttl=False)
    assert first is not None
    clock.move(2.0)
    assert store.get(NS, "a") is None  # expired
    if swept:
        assert store.sweep_ttl() == 1
    WRITES[write](store)
    got = store.get(NS, "a")
    return {
        "value": None if got is None else got.value,
        "created_is_new": None if got is None else got.created_at != first.created_at,
        "history": [v.action for v in store.history(NS, "a")],
    }


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_write_after_the_ttl_ran_out_answers_as_after_a_sweep(
    engine: MemoryEngine, write: str
) -> None:
    unswept = after_expiry(engine, write, swept=False)
    assert unswept == after_expiry(engine, write, swept=True)
    if write == "delete":
        assert unswept == {"value": None, "created_is_new": None, "history": ["put", "expired"]}
    else:
        assert unswept == {
            "value": {"v": 2},
            "created_is_new": True,
            "history": ["put", "expired", "put"],
        }


def test_a_put_within_the_ttl_keeps_the_item(engine: MemoryEngine) -> None:
    clock = Clock()
    store = LedgerStore(engine, Namespace("ttl", "again", uuid.uuid4().hex), clock=clock)
    store.put(NS, "a", {"v": 1}, ttl=TTL)
    first = store.get(NS, "a", refresh_ttl=False)
    clock.move(1.0)
    store.put(NS, "a", {"v": 2}, ttl=TTL)
    got = store.get(NS, "a")
    assert first is not None and got is not None
    assert got.created_at == first.created_at and got.value == {"v": 2}
    assert [v.action for v in store.history(NS, "a")] == ["put", "put"]
