"""Reading LangGraph items back from the engine: the current value of an address, its
recorded times, and every current item of the store's namespace.

Everything here reads through the engine's public reads: the ledger's tag index
(``read_tagged`` on the (subject, predicate) key, ``load_positioned`` on a memory stream)
and the recall index (``retrievable_memory``, ``retrievable_memories``). What is current is
always the engine's answer (a retrievable memory); the events are folded here only for
the item's times.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

import msgspec

from memory_ledger.ledger.events import (
    LedgerEvent,
    MemoryActivated,
    MemoryForgotten,
    MemoryPruned,
    MemoryReinforced,
    MemorySuperseded,
)
from memory_ledger.replay.langgraph_store.records import (
    PREDICATE,
    Address,
    address_of,
    subject_of,
    ttl_of,
)

if TYPE_CHECKING:
    from memory_ledger.commands.engine import MemoryEngine
    from memory_ledger.commands.recall import MemoryDoc
    from memory_ledger.ledger.ids import Namespace

__all__ = ["Current", "ItemReader"]

_CONSISTENT_TRIES = 64
"""Reads of an address's current value tried before one that raced a write is returned."""


class Current(msgspec.Struct, frozen=True, kw_only=True):
    """The current value of one address: its memory (and its revision), value, TTL and
    recorded times."""

    memory_id: UUID
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    ttl: float | None
    position: int
    revision: int = 0

    def expired(self, now: datetime, refreshed: datetime | None = None) -> bool:
        """Whether the TTL (minutes after the last write, or after ``refreshed``, the last
        read, when later) has run out at ``now``."""
        if self.ttl is None:
            return False
        last = self.updated_at if refreshed is None else max(self.updated_at, refreshed)
        return now >= last + timedelta(minutes=self.ttl)


class ItemReader:
    """Reads the items of one engine namespace (the store's tenant)."""

    def __init__(self, engine: MemoryEngine, namespace: Namespace) -> None:
        self.engine = engine
        self.namespace = namespace
        self._decoded: dict[str, tuple[Address, dict[str, Any], float | None] | None] = {}
        self._current: dict[Address, Current | None] = {}
        self._current_at = -1
        self._lock = threading.Lock()

    def decoded(self, doc: MemoryDoc) -> tuple[Address, dict[str, Any], float | None] | None:
        """``(address, value, ttl)`` of a memory of this store, or None (another kind of
        memory in the same namespace). A memory's content never changes: cached by id."""
        if doc.memory_id in self._decoded:
            return self._decoded[doc.memory_id]
        found: tuple[Address, dict[str, Any], float | None] | None = None
        address = address_of(doc.tags) if doc.predicate == PREDICATE else None
        if address is not None and doc.value is not None:
            try:
                value = json.loads(doc.value)
            except ValueError:
                value = None
            if isinstance(value, dict):
                found = (address, value, ttl_of(doc.tags))
        if len(self._decoded) > 200_000:
            self._decoded.clear()
        self._decoded[doc.memory_id] = found
        return found

    def key_events(self, namespace: tuple[str, ...], key: str) -> list[tuple[int, LedgerEvent]]:
        """Every event of every memory ever activated at the address, in ledger order."""
        tag = self.engine.keyring.digests.key_tag(
            self.namespace, (subject_of(namespace, key), PREDICATE)
        )
        memories = dict.fromkeys(e.originator_id for _, e in self.engine.read_tagged(tag))
        events: list[tuple[int, LedgerEvent]] = []
        for memory in memories:
            events.extend(self.engine.load_positioned(memory))
        events.sort(key=lambda pair: pair[0])
        return events

    def current(self, namespace: tuple[str, ...], key: str) -> Current | None:
        """The current value at the address (None: never put, or deleted); remembered
        until the ledger head moves (any process's write).

        Safe from several threads: the value is read between two reads of the ledger
        head and kept (and returned) only when the head did not move in between, so the
        address's events and the served memories it looks up belong to one ledger state
        (a write landing between them could otherwise hide the new value and the old
        one alike). After :data:`_CONSISTENT_TRIES` reads that each raced a write, the
        last is returned uncached.
        """
        address = (namespace, key)
        found: Current | None = None
        for _ in range(_CONSISTENT_TRIES):
            head = self.engine.head
            with self._lock:
                if head == self._current_at and address in self._current:
                    return self._current[address]
            found = self._read_current(namespace, key)
            if self.engine.head != head:
                continue  # a write landed meanwhile: the reads may mix two states
            with self._lock:
                if head > self._current_at:
                    self._current.clear()
                    self._current_at = head
                if head == self._current_at:
                    if len(self._current) > 100_000:
                        self._current.clear()
                    self._current[address] = found
            return found
        return found

    def _read_current(self, namespace: tuple[str, ...], key: str) -> Current | None:
        events = self.key_events(namespace, key)
        if not events:
            return None
        holder, created, updated = _fold_times(events)
        order = [holder] if holder is not None else []
        order += [e.originator_id for _, e in reversed(events) if isinstance(e, MemoryActivated)]
        for memory in dict.fromkeys(order):
            doc = self.engine.retrievable_memory(self.namespace, memory)
            if doc is None:
                continue
            decoded = self.decoded(doc)
            if decoded is None or decoded[0] != (namespace, key):
                continue
            first = created or events[0][1].recorded_at
            return Current(
                memory_id=memory,
                namespace=namespace,
                key=key,
                value=decoded[1],
                created_at=first,
                updated_at=updated or first,
                ttl=decoded[2],
                position=doc.position,
                revision=doc.revision or 0,
            )
        return None

    def docs(self) -> Iterator[tuple[MemoryDoc, Address, dict[str, Any], float | None]]:
        """Every retrievable item of the namespace with its address, value and TTL (newest
        memory first)."""
        found = self.engine.retrievable_memories(self.namespace)
        found.sort(key=lambda doc: doc.position, reverse=True)
        for doc in found:
            decoded = self.decoded(doc)
            if decoded is not None:
                yield doc, decoded[0], decoded[1], decoded[2]


def _fold_times(
    events: list[tuple[int, LedgerEvent]],
) -> tuple[UUID | None, datetime | None, datetime | None]:
    """``(holder, created_at, updated_at)`` of the address's current run: the memory that
    holds the key after the events, the recorded time of the first write since the key was
    last empty (deleted or expired), and of the last write (a new value or the same again).
    """
    holder: UUID | None = None
    created: datetime | None = None
    updated: datetime | None = None
    for _, event in events:
        mid = event.originator_id
        if isinstance(event, MemoryActivated):
            if holder is None:
                created = event.recorded_at
            holder = mid
            updated = event.recorded_at
        elif isinstance(event, MemoryReinforced) and mid == holder:
            updated = event.recorded_at
        elif isinstance(event, MemorySuperseded) and mid == holder:
            holder = event.superseded_by
        elif isinstance(event, MemoryForgotten | MemoryPruned) and mid == holder:
            holder = None
    return holder, created, updated
