"""Reading LangGraph items back from the engine: the current value of an address, its
recorded times, and every current item of the store's namespace.

Everything here reads through the engine's public reads: the ledger's tag index
(``read_tagged`` on the (subject, predicate) key, ``load_positioned`` on a memory stream)
and the recall index (``retrievable_memory``, ``retrievable_memories``). What is current is
always the engine's answer (a retrievable memory); the events are folded here only for
the item's times.

The current value of an address is remembered with what it was read from (every id its
events name, its match key) and carried across a ledger head move when none of the
records appended meanwhile (``read_records``) names one of those ids, activates a memory
under its key, or forgets or erases a namespace: a search right after a put re-reads the
put's address, not each address of its page.

Nothing remembered here is handed out: a current value keeps the JSON text the ledger
records (an immutable string) and :attr:`Current.value` decodes a new dict on every access
(``msgspec``, about half a microsecond for a small value), so a caller who edits an item's
value changes nothing another read returns, nor what a filter matches. The values decoded
per memory (:meth:`ItemReader.decoded`) are read by the filters only.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple
from uuid import UUID

import msgspec
from eventsourcing.utils import get_topic

from memory_ledger.ledger.events import (
    LedgerEvent,
    MemoryActivated,
    MemoryForgotten,
    MemoryPinned,
    MemoryPruned,
    MemoryReinforced,
    MemorySuperseded,
    NamespaceErased,
    NamespaceForgotten,
)
from memory_ledger.ledger.ids import subject_predicate_key
from memory_ledger.ledger.tags import MEMORY_EVENTS
from memory_ledger.projections.serving.state import SERVING_TOPICS
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

__all__ = ["Current", "ItemReader", "fresh_value"]

_CONSISTENT_TRIES = 64
"""Reads of an address's current value tried before one that raced a write is returned."""
_CARRIED_RECORDS = 256
"""Ledger records appended since the remembered values were read that are looked through
to carry them over; after more, every remembered value is dropped (read again when asked)."""
_WHOLESALE_TOPICS = frozenset(get_topic(cls) for cls in (NamespaceForgotten, NamespaceErased))
_CHANGING_TOPICS = SERVING_TOPICS | _WHOLESALE_TOPICS | {get_topic(c) for c in MEMORY_EVENTS}
"""Topics of the records that may change a current value: the events of memory streams
(the times and the holder are folded from them), those the serving state applies (what is
retrievable) and the namespace-wide ones. Any other record (a session's) changes none."""


class _Remembered(NamedTuple):
    """A current value as read at :attr:`ItemReader._current_at`, with what a later record
    must name to change it: every id its events name, and its match key (an activation
    under it puts a new value)."""

    current: Current | None
    ids: frozenset[UUID]
    match: tuple[str, str] | None


_DECODE = msgspec.json.Decoder().decode


def fresh_value(raw: str) -> dict[str, Any]:
    """A new dict of the value whose recorded JSON is ``raw`` (shares no object with any
    other call's). ``raw`` was written by ``records.encode_record`` (``json.dumps``) and
    read back by ``json.loads`` when it was cached, so it decodes; ``msgspec`` decodes it
    as ``json.loads`` does, about four times faster; ``json.loads`` answers any text
    ``msgspec`` refuses."""
    try:
        value = _DECODE(raw)
    except msgspec.DecodeError:
        value = json.loads(raw)
    return value if isinstance(value, dict) else {}


class Current(msgspec.Struct, frozen=True, kw_only=True):
    """The current value of one address: its memory (and its revision), value (``raw``,
    its recorded JSON text; :attr:`value`, a new dict per access), TTL and recorded
    times."""

    memory_id: UUID
    namespace: tuple[str, ...]
    key: str
    raw: str
    created_at: datetime
    updated_at: datetime
    ttl: float | None
    position: int
    revision: int = 0

    @property
    def value(self) -> dict[str, Any]:
        """The value, decoded anew from :attr:`raw` on each access: a dict no other read
        holds (a caller may edit it without changing what the store returns later)."""
        return fresh_value(self.raw)

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
        self._current: dict[Address, _Remembered] = {}
        self._current_at = -1
        self._by_id: dict[UUID, set[Address]] = {}
        self._by_match: dict[tuple[str, str], set[Address]] = {}
        self._tags: dict[Address, tuple[str, tuple[str, str] | None]] = {}
        self._ttl_scans: dict[Address, tuple[int, bool]] = {}
        """address -> (the ledger head its activations were read up to, whether one of
        them put a value with a TTL): :meth:`with_ttl`."""
        self._lock = threading.Lock()

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
        until a record appended later may change it (:meth:`_carry`: any process's write
        that names one of its memories or activates one under its key).

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
                self._carry(head)
                if head == self._current_at:
                    remembered = self._current.get(address)
                    if remembered is not None:
                        return remembered.current
            found, ids = self._read_current(namespace, key)
            if self.engine.head != head:
                continue  # a write landed meanwhile: the reads may mix two states
            with self._lock:
                self._carry(head)
                if head == self._current_at:
                    self._remember(address, found, ids)
            return found
        return found

    def currents(self, addresses: Sequence[Address]) -> list[Current | None]:
        """:meth:`current` of each address, those remembered at the ledger head answered
        with one read of the head between them (the others read as :meth:`current` reads
        them)."""
        head = self.engine.head
        with self._lock:
            self._carry(head)
            remembered = (
                [self._current.get(address) for address in addresses]
                if head == self._current_at
                else [None] * len(addresses)
            )
        return [
            self.current(*address) if found is None else found.current
            for address, found in zip(addresses, remembered, strict=True)
        ]

    def with_ttl(self, addresses: Sequence[Address]) -> list[Address]:
        """The addresses of ``addresses`` whose current value may have a TTL (a superset;
        those to read with :meth:`current` before a write decides against their expiry):
        each remembered at the ledger head with a TTL, and each not remembered where any
        value was ever put with a TTL. The activations under their keys are read from the
        tag index (one read for the addresses never looked at, one for the others, from the
        position each was last looked at): a write to an address never put with a TTL
        reads no memory stream, and a hot address only the activations since its last
        write."""
        head = self.engine.head
        found: list[Address] = []
        fresh: dict[str, Address] = {}
        seen: dict[str, Address] = {}
        after = head
        with self._lock:
            self._carry(head)
            remembered = self._current if head == self._current_at else {}
            if len(self._ttl_scans) > 100_000:
                self._ttl_scans.clear()
            for address in addresses:
                known = remembered.get(address)
                if known is not None:
                    if known.current is not None and known.current.ttl is not None:
                        found.append(address)
                    continue
                scanned = self._ttl_scans.get(address)
                if scanned is not None and (scanned[1] or scanned[0] >= head):
                    if scanned[1]:
                        found.append(address)
                    continue
                tag = self._key_tag(*address)[0]
                if scanned is None:
                    fresh[tag] = address
                else:
                    seen[tag] = address
                    after = min(after, scanned[0])
        with_ttl: set[Address] = set()
        for tags, since in ((fresh, 0), (seen, after)):
            if not tags:
                continue
            for _, event in self.engine.read_tagged_any(list(tags), after=since):
                if isinstance(event, MemoryActivated) and ttl_of(event.item.tags) is not None:
                    put_at = address_of(event.item.tags)
                    if put_at is not None:
                        with_ttl.add(put_at)
        with self._lock:
            for address in (*fresh.values(), *seen.values()):
                self._ttl_scans[address] = (head, address in with_ttl)
        found.extend(a for a in (*fresh.values(), *seen.values()) if a in with_ttl)
        return found

    def _remember(self, address: Address, found: Current | None, ids: frozenset[UUID]) -> None:
        """Keep ``found``, read at :attr:`_current_at`, with what may change it."""
        if len(self._current) > 100_000 or len(self._by_id) > 400_000:
            self._forget_all()
        match = self._key_tag(*address)[1]
        self._current[address] = _Remembered(found, ids, match)
        for memory in ids:
            self._by_id.setdefault(memory, set()).add(address)
        if match is not None:
            self._by_match.setdefault(match, set()).add(address)

    def _forget_all(self) -> None:
        self._current.clear()
        self._by_id.clear()
        self._by_match.clear()

    def _carry(self, head: int) -> None:
        """Move the remembered values to ``head`` (call holding the lock): drop those a
        record after :attr:`_current_at` may change (one whose fold touches a memory they
        were read from, :func:`_memories_named`, or that activates a memory under their
        match key), or all of them after a
        namespace-wide record or more than :data:`_CARRIED_RECORDS` records. Only records
        of :data:`_CHANGING_TOPICS` are decoded."""
        after = self._current_at
        if head <= after:
            return
        if not self._current or after < 0 or head - after > _CARRIED_RECORDS:
            self._forget_all()
            self._current_at = head
            return
        ids: set[UUID] = set()
        matches: set[tuple[str, str]] = set()
        decode = self.engine.event_decoder()
        for _, raw_id, version, topic, state in self.engine.read_records(after, head - after, head):
            if topic not in _CHANGING_TOPICS:
                continue
            if topic in _WHOLESALE_TOPICS:
                self._forget_all()
                self._current_at = head
                return
            event = decode(topic, state, raw_id, version)
            _memories_named(event, ids)
            if isinstance(event, MemoryActivated):
                match = subject_predicate_key(event.item.subject, event.item.predicate)
                if match is not None:
                    matches.add(match)
        stale: set[Address] = set()
        for memory in ids:
            stale.update(self._by_id.pop(memory, ()))
        for match in matches:
            stale.update(self._by_match.pop(match, ()))
        for address in stale:
            self._current.pop(address, None)
        self._current_at = head

    def _read_current(
        self, namespace: tuple[str, ...], key: str
    ) -> tuple[Current | None, frozenset[UUID]]:
        """The current value at the address and the memories it was read from: every
        memory activated under its key and every one that superseded one of them (a later
        record that names none of them, and activates nothing under the key, changes
        neither the events folded here nor the served memories looked up)."""
        events = self.key_events(namespace, key)
        ids = frozenset(
            [e.originator_id for _, e in events]
            + [e.superseded_by for _, e in events if isinstance(e, MemorySuperseded)]
        )
        if not events:
            return None, ids
        holder, created, updated = _fold_times(events)
        order = [holder] if holder is not None else []
        order += [e.originator_id for _, e in reversed(events) if isinstance(e, MemoryActivated)]
        for memory in dict.fromkeys(order):
            doc = self.engine.retrievable_memory(self.namespace, memory)
            if doc is None:
                continue
            decoded = self.decoded(doc)
            if decoded is None or decoded[0] != (namespace, key) or doc.value is None:
                continue
            first = created or events[0][1].recorded_at
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
            ), ids
        return None, ids

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


_OWN_ROW_ONLY = (MemoryActivated, MemoryReinforced, MemoryForgotten, MemoryPruned, MemoryPinned)
"""Memory events whose fold changes their own memory's row only (``projections.fold``)."""


def _memories_named(event: LedgerEvent, found: set[UUID]) -> None:
    """Add to ``found`` the memories whose stream or served row ``event`` may change: its
    own; a supersede's newer one too; for any other event, every id it names
    (:func:`_ids_in`)."""
    found.add(event.originator_id)
    if isinstance(event, MemorySuperseded):
        found.add(event.superseded_by)
    elif not isinstance(event, _OWN_ROW_ONLY):
        _ids_in(event, found)


def _ids_in(value: Any, found: set[UUID] | None = None) -> set[UUID]:
    """Every id ``value`` names (added to ``found``, returned): a UUID, a string in a
    UUID's 36-character form (an item's ``supersedes``), in a struct's fields, a sequence or
    a mapping, at any depth."""
    if found is None:
        found = set()
    kind = type(value)
    if kind is UUID:
        found.add(value)
    elif isinstance(value, str):
        if len(value) == 36 and value[8] == "-":
            try:
                found.add(UUID(value))
            except ValueError:
                pass
    elif isinstance(value, msgspec.Struct):
        for field in value.__struct_fields__:
            item = getattr(value, field)
            if item is not None and type(item) not in _SCALARS:
                _ids_in(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _ids_in(item, found)
    elif isinstance(value, Iterable) and not isinstance(value, bytes | bytearray):
        for item in value:
            _ids_in(item, found)
    elif isinstance(value, UUID):
        found.add(value)
    return found


_SCALARS = frozenset({int, float, bool, datetime})
"""Types of field values that name no id (skipped without a call)."""
