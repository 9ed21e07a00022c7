"""Reading LangGraph items back from the engine: the current value of an address, its
recorded times, and every current item of the store's namespace (:class:`ItemReader`).

Everything here reads through the engine's public reads: the ledger's tag index
(``read_tagged`` on the (subject, predicate) key, ``load_positioned`` on a memory stream)
and the recall index (``retrievable_memory``, ``retrievable_memories``). What is current is
always the engine's answer (a retrievable memory); the events are folded here only for
the item's times.

The reader is composed of three parts, all under its one lock: the current values it
remembers and carries across later records (:mod:`.remembered`), the writer's take-in of
the store's own batches (:mod:`.batch_intake`) and the watch for values with a TTL
(:mod:`.ttl_watch`). The value types are in :mod:`.current_value`.

Nothing remembered here is handed out (:attr:`Current.value` decodes a new dict on every
access); the values decoded per memory (:meth:`ItemReader.decoded`) are read by the filters
only.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from memory_ledger.ledger.events import LedgerEvent, MemoryActivated, MemorySuperseded
from memory_ledger.ledger.ids import subject_predicate_key
from memory_ledger.replay.langgraph_store.batch_intake import BatchIntake
from memory_ledger.replay.langgraph_store.current_value import (
    NEVER,
    Current,
    History,
    fold_times,
    fresh_value,
)
from memory_ledger.replay.langgraph_store.records import (
    PREDICATE,
    Address,
    address_of,
    subject_of,
    ttl_of,
)
from memory_ledger.replay.langgraph_store.remembered import RememberedValues
from memory_ledger.replay.langgraph_store.ttl_watch import TtlWatch

if TYPE_CHECKING:
    from memory_ledger.commands.engine import MemoryEngine
    from memory_ledger.commands.engine.batch import BatchResult
    from memory_ledger.commands.recall import MemoryDoc
    from memory_ledger.ledger.ids import Namespace

__all__ = ["Current", "ItemReader", "fresh_value"]

_CONSISTENT_TRIES = 64
"""Reads of an address's current value tried before one that raced a write is returned."""


class ItemReader:
    """Reads the items of one engine namespace (the store's tenant). Safe from several
    threads: one lock guards what it remembers (:class:`RememberedValues`), its TTL watch
    (:class:`TtlWatch`) and its take-in of the store's batches (:class:`BatchIntake`)."""

    def __init__(self, engine: MemoryEngine, namespace: Namespace) -> None:
        self.engine = engine
        self.namespace = namespace
        self._decoded: dict[str, tuple[Address, dict[str, Any], float | None] | None] = {}
        self._tags: dict[Address, tuple[str, tuple[str, str] | None]] = {}
        self._lock = threading.Lock()
        self._ttl = TtlWatch(engine, namespace, self._lock, self._key_tag)
        self._values = RememberedValues(engine, self._key_tag, self._ttl.carried)
        self._intake = BatchIntake(
            engine, namespace, self._lock, self._values, self._key_tag, self._served
        )

    @property
    def _ttl_scans(self) -> dict[Address, tuple[int, bool]]:
        """The TTL watch's scans (:attr:`TtlWatch.scans`)."""
        return self._ttl.scans

    def decoded(self, doc: MemoryDoc) -> tuple[Address, dict[str, Any], float | None] | None:
        """``(address, value, ttl)`` of a memory of this store, or None (another kind of
        memory in the same namespace). A memory's content never changes: cached by id, so
        ``value`` is the cache's own object, to be read (a filter) and never handed out
        (an item's value is :attr:`Current.value`, or :func:`fresh_value` of ``doc.value``)."""
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

    def _key_tag(self, namespace: tuple[str, ...], key: str) -> tuple[str, tuple[str, str] | None]:
        """The ledger's ``key:`` tag of the address (its activations carry it) and its match
        key (``subject_predicate_key``), derived once per address (an HMAC)."""
        address = (namespace, key)
        found = self._tags.get(address)
        if found is None:
            subject = subject_of(namespace, key)
            tag = self.engine.keyring.digests.key_tag(self.namespace, (subject, PREDICATE))
            if len(self._tags) > 100_000:
                self._tags.clear()
            found = self._tags[address] = (tag, subject_predicate_key(subject, PREDICATE))
        return found

    def key_events(self, namespace: tuple[str, ...], key: str) -> list[tuple[int, LedgerEvent]]:
        """Every event of every memory ever activated at the address, in ledger order."""
        tag = self._key_tag(namespace, key)[0]
        memories = dict.fromkeys(e.originator_id for _, e in self.engine.read_tagged(tag))
        events: list[tuple[int, LedgerEvent]] = []
        for memory in memories:
            events.extend(self.engine.load_positioned(memory))
        events.sort(key=lambda pair: pair[0])
        return events

    def current(self, namespace: tuple[str, ...], key: str) -> Current | None:
        """The current value at the address (None: never put, or deleted); remembered
        until a record appended later may change it (:meth:`RememberedValues.carry`: any
        process's write that names one of its memories or activates one under its key).

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
                self._values.carry(head)
                if head == self._values.at:
                    remembered = self._values.get(address)
                    if remembered is not None:
                        return remembered.current
            found, ids, history = self._read_current(namespace, key)
            if self.engine.head != head:
                continue  # a write landed meanwhile: the reads may mix two states
            with self._lock:
                self._values.carry(head)
                if head == self._values.at:
                    self._values.remember(address, found, ids, history)
            return found
        return found

    def wrote(self, result: BatchResult, addresses: Sequence[Address]) -> None:
        """Take in this store's own batch ``result`` (just returned by
        :meth:`MemoryEngine.apply_batch`), which wrote ``addresses``: the current value of
        each is then remembered at the batch's last position without reading the ledger
        again, continuing the history it was read from with the batch's own records
        (:func:`fold_times`, the same fold a read makes; the values are the serving
        state's answer, as a read's). Done by :class:`BatchIntake`.

        Only when that is the answer a read would give: the remembered values were carried
        to the record just before the batch (nothing of another write in between), and the
        ledger head is the batch's last record (no write after it) once the values were
        looked up. An address not remembered then is taken in only when the tag
        index holds no activation under its key before the batch: the batch's decision
        found none (``result.never_activated``), else one read for all of the others.
        Otherwise nothing is remembered for it and the next read reads the ledger,
        as before. Never raises for a reason other than the ledger's own errors."""
        self._intake.wrote(result, addresses)

    def currents(self, addresses: Sequence[Address]) -> list[Current | None]:
        """:meth:`current` of each address, those remembered at the ledger head answered
        with one read of the head between them (the others read as :meth:`current` reads
        them)."""
        head = self.engine.head
        with self._lock:
            self._values.carry(head)
            remembered = (
                [self._values.get(address) for address in addresses]
                if head == self._values.at
                else [None] * len(addresses)
            )
        return [
            self.current(*address) if found is None else found.current
            for address, found in zip(addresses, remembered, strict=True)
        ]

    def with_ttl(self, addresses: Sequence[Address]) -> list[Address]:
        """The addresses of ``addresses`` whose current value may have a TTL (a superset;
        those to read with :meth:`current` before a write decides against their expiry):
        :meth:`TtlWatch.with_ttl`. Nothing is read while no value of the namespace has a
        TTL; otherwise at most the activations under their keys since each was last
        looked at."""
        return self._ttl.with_ttl(addresses, self._values)

    def _read_current(
        self, namespace: tuple[str, ...], key: str
    ) -> tuple[Current | None, frozenset[UUID], History]:
        """The current value at the address, the memories it was read from (every memory
        activated under its key and every one that superseded one of them: a later record
        that names none of them, and activates nothing under the key, changes neither the
        events folded here nor the served memories looked up) and the history folded."""
        events = self.key_events(namespace, key)
        ids = frozenset(
            [e.originator_id for _, e in events]
            + [e.superseded_by for _, e in events if isinstance(e, MemorySuperseded)]
        )
        if not events:
            return None, ids, NEVER
        order = dict.fromkeys(
            e.originator_id for _, e in reversed(events) if isinstance(e, MemoryActivated)
        )
        history = History(fold_times(events), tuple(order), events[0][1].recorded_at)
        return self._served(namespace, key, history), ids, history

    def _served(self, namespace: tuple[str, ...], key: str, history: History) -> Current | None:
        """The current value of the address whose events fold to ``history``: the holder,
        else the latest activated memory the serving state still serves, with the folded
        times (None: none served)."""
        if history.first is None:
            return None
        holder, created, updated = history.fold
        order = [holder] if holder is not None else []
        order += history.order
        for memory in dict.fromkeys(order):
            doc = self.engine.retrievable_memory(self.namespace, memory)
            if doc is None:
                continue
            decoded = self.decoded(doc)
            if decoded is None or decoded[0] != (namespace, key) or doc.value is None:
                continue
            first = created or history.first
            return Current(
                memory_id=memory,
                namespace=namespace,
                key=key,
                raw=doc.value,
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
