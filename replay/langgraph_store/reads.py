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
    SessionOpened,
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
    from memory_ledger.commands.engine.batch import BatchResult
    from memory_ledger.commands.engine.reads import RawRecord
    from memory_ledger.commands.recall import MemoryDoc
    from memory_ledger.ledger.ids import Namespace

__all__ = ["Current", "ItemReader", "fresh_value"]

_CONSISTENT_TRIES = 64
"""Reads of an address's current value tried before one that raced a write is returned."""
_CARRIED_RECORDS = 256
"""Ledger records appended since the remembered values were read that are looked through
to carry them over; after more, every remembered value is dropped (read again when asked)."""
_WHOLESALE_TOPICS = frozenset(get_topic(cls) for cls in (NamespaceForgotten, NamespaceErased))
_SESSION_OPENED = get_topic(SessionOpened)
_ACTIVATED = get_topic(MemoryActivated)
_TAKEN_IN = 16
"""The most addresses of one batch whose new values the writer hands the reader
(:meth:`ItemReader.wrote`): a get right after a put or a small batch reads no ledger; a
larger batch (an import, a bulk load) costs no more than before."""
_TTL_RECORDS = 4096
"""Records after :attr:`ItemReader._ttl_at` read to see whether one activates a value with a
TTL; after more, the served documents are looked through again."""
_CHANGING_TOPICS = SERVING_TOPICS | _WHOLESALE_TOPICS | {get_topic(c) for c in MEMORY_EVENTS}
"""Topics of the records that may change a current value: the events of memory streams
(the times and the holder are folded from them), those the serving state applies (what is
retrievable) and the namespace-wide ones. Any other record (a session's) changes none."""


_Fold = tuple[UUID | None, datetime | None, datetime | None]
"""``(holder, created_at, updated_at)`` of an address's events (:func:`_fold_times`)."""
_EMPTY: _Fold = (None, None, None)


class _History(NamedTuple):
    """What an address's events fold to, kept so that a batch's own records continue the
    fold (:meth:`ItemReader.wrote`) instead of a new read: the fold, the memories activated
    under its key (latest activation first, each once) and the recorded time of its first
    event (None: no event)."""

    fold: _Fold
    order: tuple[UUID, ...]
    first: datetime | None


_NEVER = _History(_EMPTY, (), None)
"""The history of an address nothing was ever activated at."""


class _BatchEvents(NamedTuple):
    """A batch's memory events by memory, and its activations by match key."""

    by_memory: dict[UUID, list[tuple[int, LedgerEvent]]]
    activated: dict[tuple[str, str], list[MemoryActivated]]

    @classmethod
    def of(cls, events: Sequence[tuple[int, LedgerEvent]], namespace: Namespace) -> _BatchEvents:
        """Index ``events`` (position order) of a batch of ``namespace``."""
        by_memory: dict[UUID, list[tuple[int, LedgerEvent]]] = {}
        activated: dict[tuple[str, str], list[MemoryActivated]] = {}
        for position, event in events:
            if not isinstance(event, MEMORY_EVENTS):
                continue
            by_memory.setdefault(event.originator_id, []).append((position, event))
            if isinstance(event, MemoryActivated) and event.namespace == namespace:
                match = subject_predicate_key(event.item.subject, event.item.predicate)
                if match is not None:
                    activated.setdefault(match, []).append(event)
        return cls(by_memory, activated)


class _Remembered(NamedTuple):
    """A current value as read at :attr:`ItemReader._current_at`, with what a later record
    must name to change it: every id its events name, and its match key (an activation
    under it puts a new value); and the history it was folded from."""

    current: Current | None
    ids: frozenset[UUID]
    match: tuple[str, str] | None
    history: _History


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
        self._ttl_any = False
        """Whether a value with a TTL may be current in the namespace (sticky once true)."""
        self._ttl_at = -1
        """The ledger position :attr:`_ttl_any` holds at (-1: never looked)."""
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
            found, ids, history = self._read_current(namespace, key)
            if self.engine.head != head:
                continue  # a write landed meanwhile: the reads may mix two states
            with self._lock:
                self._carry(head)
                if head == self._current_at:
                    self._remember(address, found, ids, history)
            return found
        return found

    def wrote(self, result: BatchResult, addresses: Sequence[Address]) -> None:
        """Take in this store's own batch ``result`` (just returned by
        :meth:`MemoryEngine.apply_batch`), which wrote ``addresses``: the current value of
        each is then remembered at the batch's last position without reading the ledger
        again, continuing the history it was read from with the batch's own records
        (:func:`_fold_times`, the same fold a read makes; the values are the serving
        state's answer, as a read's).

        Only when that is the answer a read would give: the remembered values were carried
        to the record just before the batch (nothing of another write in between), and the
        ledger head is the batch's last record (no write after it) once the values were
        looked up. An address not remembered then is taken in only when the tag
        index holds no activation under its key before the batch (one read for all of
        them). Otherwise nothing is remembered for it and the next read reads the ledger,
        as before. Never raises for a reason other than the ledger's own errors."""
        if not result.outcomes or not addresses or len(addresses) > _TAKEN_IN:
            return  # a large batch: its addresses are read when asked (most never are)
        last = result.position
        start = result.outcomes[0].position - 1  # the batch's SessionOpened
        with self._lock:
            self._carry(start - 1)
            if self._current_at != start - 1:
                return  # another thread carried past the batch's start: read when asked
            records = self.engine.read_records(start - 1, last - start + 1, last)
            if (
                len(records) != last - start + 1
                or records[0][3] != _SESSION_OPENED
                or records[-1][0] != last
            ):
                return  # pragma: no cover (not laid out as apply_batch writes a batch)
            decode = self.engine.event_decoder()
            opened = decode(*_decodable(records[0]))
            if not isinstance(opened, SessionOpened) or opened.session_id != result.session_id:
                return  # pragma: no cover (another command's records)
            events = [
                (record[0], decode(*_decodable(record)))
                for record in records
                if record[3] in _CHANGING_TOPICS
            ]
            before = {address: self._current.get(address) for address in addresses}
            self._carry(last, events)
        batch = _BatchEvents.of(events, self.namespace)
        unknown = [address for address, known in before.items() if known is None]
        never = self._never_activated(unknown, start) if unknown else set()
        found: dict[Address, tuple[Current | None, frozenset[UUID], _History]] = {}
        for address, known in before.items():
            if known is not None:
                ids, history = known.ids, known.history
            elif address in never:
                ids, history = frozenset(), _NEVER
            else:
                continue
            moved = self._continued(address, history, ids, batch)
            if moved is not None:
                found[address] = (self._served(*address, moved[1]), moved[0], moved[1])
        if not found or self.engine.head != last:
            return  # a later write: the values looked up may be of after it (the head is
            # the batch's last record at the end, so it was all along: positions only grow)
        with self._lock:
            self._carry(last)
            if self._current_at == last:
                for address, (current, ids, history) in found.items():
                    self._remember(address, current, ids, history)

    def _never_activated(self, addresses: Sequence[Address], start: int) -> set[Address]:
        """The addresses of ``addresses`` under whose key the tag index holds no activation
        before position ``start`` (one read of their key tags)."""
        by_match = {self._key_tag(*address)[1]: address for address in addresses}
        tags = [self._key_tag(*address)[0] for address in addresses]
        never = set(addresses)
        for position, event in self.engine.read_tagged_any(tags):
            if position >= start:
                continue
            match = (
                subject_predicate_key(event.item.subject, event.item.predicate)
                if isinstance(event, MemoryActivated)
                else None
            )
            address = by_match.get(match) if match is not None else None
            if address is None:
                return set()  # an event not told apart: take none of them
            never.discard(address)
        return never

    def _continued(
        self,
        address: Address,
        history: _History,
        ids: frozenset[UUID],
        batch: _BatchEvents,
    ) -> tuple[frozenset[UUID], _History] | None:
        """The ids and history of ``address`` after ``batch`` (a batch's records, right
        after the state ``history`` and ``ids`` were read at): the events of the memories
        activated under its key (those of ``history`` and those the batch activates there)
        folded on from ``history.fold``, as :meth:`_read_current` folds them all. None
        when a memory the batch activates there has earlier records (its stream would hold
        events ``history`` does not): read it then."""
        members = set(history.order)
        activated: list[UUID] = []
        match = self._key_tag(*address)[1]
        for activation in batch.activated.get(match, ()) if match is not None else ():
            memory = activation.originator_id
            if memory not in members:
                if activation.originator_version != 1:
                    return None
                members.add(memory)
            activated.append(memory)
        own = sorted(
            (pair for memory in members for pair in batch.by_memory.get(memory, ())),
            key=lambda pair: pair[0],
        )
        if not own:
            return ids, history
        named = set(ids)
        for _, event in own:
            named.add(event.originator_id)
            if isinstance(event, MemorySuperseded):
                named.add(event.superseded_by)
        order = tuple(dict.fromkeys([*reversed(activated), *history.order]))
        first = history.first if history.first is not None else own[0][1].recorded_at
        return frozenset(named), _History(_fold_times(own, history.fold), order, first)

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
        value was ever put with a TTL. Nothing is read while no value of the namespace has a
        TTL (:meth:`_ttl_watched`). The activations under their keys are read from the
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
            if not self._ttl_watched(head):
                return []  # no value with a TTL anywhere in the namespace: nothing to read
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

    def _ttl_watched(self, head: int) -> bool:
        """Whether a value with a TTL may be current in the namespace at ``head`` (call
        holding the lock, after :meth:`_carry` to ``head``): false only when none of the
        retrievable memories had one when first looked (one pass over the served
        documents) and no record since activates one with a TTL (the records :meth:`_carry`
        decoded, else those after :attr:`_ttl_at`, read here; a pass again after more than
        :data:`_TTL_RECORDS`). A memory becomes retrievable again only by an activation,
        which carries its tags: any process's put with a TTL is seen."""
        if self._ttl_any or head <= self._ttl_at:
            return self._ttl_any
        if self._ttl_at < 0 or head - self._ttl_at > _TTL_RECORDS:
            docs = self.engine.retrievable_memories(self.namespace)
            self._ttl_any = any(ttl_of(doc.tags) is not None for doc in docs)
        else:
            decode = self.engine.event_decoder()
            records = self.engine.read_records(self._ttl_at, head - self._ttl_at, head)
            self._watch_ttl(
                decode(*_decodable(record)) for record in records if record[3] == _ACTIVATED
            )
        self._ttl_at = max(self._ttl_at, head)
        return self._ttl_any

    def _watch_ttl(self, events: Iterable[LedgerEvent]) -> None:
        """Note an activation with a TTL among ``events`` (:attr:`_ttl_any`)."""
        for event in events:
            if (
                isinstance(event, MemoryActivated)
                and event.namespace == self.namespace
                and ttl_of(event.item.tags) is not None
            ):
                self._ttl_any = True

    def _remember(
        self, address: Address, found: Current | None, ids: frozenset[UUID], history: _History
    ) -> None:
        """Keep ``found``, read at :attr:`_current_at`, with what may change it and the
        history it was folded from."""
        if len(self._current) > 100_000 or len(self._by_id) > 400_000:
            self._forget_all()
        match = self._key_tag(*address)[1]
        self._current[address] = _Remembered(found, ids, match, history)
        for memory in ids:
            self._by_id.setdefault(memory, set()).add(address)
        if match is not None:
            self._by_match.setdefault(match, set()).add(address)

    def _forget_all(self) -> None:
        self._current.clear()
        self._by_id.clear()
        self._by_match.clear()

    def _carry(self, head: int, events: Sequence[tuple[int, LedgerEvent]] | None = None) -> None:
        """Move the remembered values to ``head`` (call holding the lock): drop those a
        record after :attr:`_current_at` may change (one whose fold touches a memory they
        were read from, :func:`_memories_named`, or that activates a memory under their
        match key), or all of them after a
        namespace-wide record or more than :data:`_CARRIED_RECORDS` records. Only records
        of :data:`_CHANGING_TOPICS` are decoded. ``events``: those records, already decoded
        (``(position, event)`` of every record of those topics up to ``head``)."""
        after = self._current_at
        if head <= after:
            return
        if not self._current or after < 0 or head - after > _CARRIED_RECORDS:
            self._forget_all()
            self._current_at = head
            return
        if events is None:
            decode = self.engine.event_decoder()
            events = [
                (record[0], decode(*_decodable(record)))
                for record in self.engine.read_records(after, head - after, head)
                if record[3] in _CHANGING_TOPICS
            ]
        if self._ttl_at == after and not self._ttl_any:
            self._watch_ttl(event for _, event in events)
            self._ttl_at = head
        ids: set[UUID] = set()
        matches: set[tuple[str, str]] = set()
        for _, event in events:
            if isinstance(event, NamespaceForgotten | NamespaceErased):
                self._forget_all()
                self._current_at = head
                return
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
    ) -> tuple[Current | None, frozenset[UUID], _History]:
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
            return None, ids, _NEVER
        order = dict.fromkeys(
            e.originator_id for _, e in reversed(events) if isinstance(e, MemoryActivated)
        )
        history = _History(_fold_times(events), tuple(order), events[0][1].recorded_at)
        return self._served(namespace, key, history), ids, history

    def _served(self, namespace: tuple[str, ...], key: str, history: _History) -> Current | None:
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


def _fold_times(events: Sequence[tuple[int, LedgerEvent]], start: _Fold = _EMPTY) -> _Fold:
    """``(holder, created_at, updated_at)`` of the address's current run: the memory that
    holds the key after the events, the recorded time of the first write since the key was
    last empty (deleted or expired), and of the last write (a new value or the same again).
    ``start``: the fold of the events before these (default: none)."""
    holder, created, updated = start
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


def _decodable(record: RawRecord) -> tuple[str, bytes, Any, int]:
    """The arguments of an event decoder for a stored record (``read_records``)."""
    _, raw_id, version, topic, state = record
    return topic, state, raw_id, version


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
