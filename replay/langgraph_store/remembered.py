"""The current values an :class:`~memory_ledger.replay.langgraph_store.reads.ItemReader`
remembers (:class:`RememberedValues`), each with what it was read from, and how they are
carried across a ledger head move.

A value is remembered with every id its events name and its match key, and carried
across later records (``read_records``) when none of them names one of those ids,
activates a memory under its key, or forgets or erases a namespace: a search right after a
put re-reads the put's address, not each address of its page. Nothing here locks: every
method is called holding the reader's lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
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
from memory_ledger.replay.langgraph_store.current_value import Current, History
from memory_ledger.replay.langgraph_store.records import Address

if TYPE_CHECKING:
    from memory_ledger.commands.engine import MemoryEngine
    from memory_ledger.commands.engine.reads import RawRecord

__all__ = [
    "CHANGING_TOPICS",
    "Carried",
    "KeyTag",
    "Remembered",
    "RememberedValues",
    "decodable",
    "ids_in",
    "memories_named",
]

_CARRIED_RECORDS = 256
"""Ledger records appended since the remembered values were read that are looked through
to carry them over; after more, every remembered value is dropped (read again when asked)."""
_WHOLESALE_TOPICS = frozenset(get_topic(cls) for cls in (NamespaceForgotten, NamespaceErased))
CHANGING_TOPICS = _WHOLESALE_TOPICS | SERVING_TOPICS | {get_topic(c) for c in MEMORY_EVENTS}
"""Topics of the records that may change a current value: the events of memory streams
(the times and the holder are folded from them), those the serving state applies (what is
retrievable) and the namespace-wide ones. Any other record (a session's) changes none."""

KeyTag = Callable[[tuple[str, ...], str], tuple[str, tuple[str, str] | None]]
"""``(namespace, key) -> (key tag, match key)`` of an address (``ItemReader._key_tag``)."""
Carried = Callable[[int, int, Sequence[tuple[int, LedgerEvent]]], None]
"""Told ``(after, head, events)`` when a carry decoded the records after ``after`` up to
``head`` (``events``: those of :data:`CHANGING_TOPICS`), so they are not read again."""


class Remembered(NamedTuple):
    """A current value as read at :attr:`RememberedValues.at`, with what a later record
    must name to change it: every id its events name, and its match key (an activation
    under it puts a new value); and the history it was folded from."""

    current: Current | None
    ids: frozenset[UUID]
    match: tuple[str, str] | None
    history: History


class RememberedValues:
    """The remembered current values of a reader's addresses, all read at one ledger
    position (:attr:`at`; -1: none yet), indexed by the ids and match keys that change
    them. Not thread-safe on its own: call every method holding the reader's lock."""

    def __init__(self, engine: MemoryEngine, key_tag: KeyTag, carried: Carried) -> None:
        """``key_tag``: the reader's address -> (key tag, match key); ``carried``: told of
        the records each carry decoded (the TTL watch)."""
        self.engine = engine
        self._key_tag = key_tag
        self._carried = carried
        self.values: dict[Address, Remembered] = {}
        self.at = -1
        """The ledger position every remembered value was read at, or carried to."""
        self._by_id: dict[UUID, set[Address]] = {}
        self._by_match: dict[tuple[str, str], set[Address]] = {}

    def get(self, address: Address) -> Remembered | None:
        """The remembered value of ``address`` at :attr:`at` (None: not remembered)."""
        return self.values.get(address)

    def remember(
        self, address: Address, found: Current | None, ids: frozenset[UUID], history: History
    ) -> None:
        """Keep ``found``, read at :attr:`at`, with what may change it and the history it
        was folded from."""
        if len(self.values) > 100_000 or len(self._by_id) > 400_000:
            self.forget_all()
        match = self._key_tag(*address)[1]
        self.values[address] = Remembered(found, ids, match, history)
        for memory in ids:
            self._by_id.setdefault(memory, set()).add(address)
        if match is not None:
            self._by_match.setdefault(match, set()).add(address)

    def forget_all(self) -> None:
        """Drop every remembered value (:attr:`at` unchanged)."""
        self.values.clear()
        self._by_id.clear()
        self._by_match.clear()

    def carry(self, head: int, events: Sequence[tuple[int, LedgerEvent]] | None = None) -> None:
        """Move the remembered values to ``head``: drop those a record after :attr:`at` may
        change (one whose fold touches a memory they were read from,
        :func:`memories_named`, or that activates a memory under their match key), or all
        of them after a namespace-wide record or more than :data:`_CARRIED_RECORDS`
        records. Only records of :data:`CHANGING_TOPICS` are decoded. ``events``: those
        records, already decoded (``(position, event)`` of every record of those topics up
        to ``head``)."""
        after = self.at
        if head <= after:
            return
        if not self.values or after < 0 or head - after > _CARRIED_RECORDS:
            self.forget_all()
            self.at = head
            return
        if events is None:
            decode = self.engine.event_decoder()
            events = [
                (record[0], decode(*decodable(record)))
                for record in self.engine.read_records(after, head - after, head)
                if record[3] in CHANGING_TOPICS
            ]
        self._carried(after, head, events)
        ids: set[UUID] = set()
        matches: set[tuple[str, str]] = set()
        for _, event in events:
            if isinstance(event, NamespaceForgotten | NamespaceErased):
                self.forget_all()
                self.at = head
                return
            memories_named(event, ids)
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
            self.values.pop(address, None)
        self.at = head


def decodable(record: RawRecord) -> tuple[str, bytes, Any, int]:
    """The arguments of an event decoder for a stored record (``read_records``)."""
    _, raw_id, version, topic, state = record
    return topic, state, raw_id, version


_OWN_ROW_ONLY = (MemoryActivated, MemoryReinforced, MemoryForgotten, MemoryPruned, MemoryPinned)
"""Memory events whose fold changes their own memory's row only (``projections.fold``)."""


def memories_named(event: LedgerEvent, found: set[UUID]) -> None:
    """Add to ``found`` the memories whose stream or served row ``event`` may change: its
    own; a supersede's newer one too; for any other event, every id it names
    (:func:`ids_in`)."""
    found.add(event.originator_id)
    if isinstance(event, MemorySuperseded):
        found.add(event.superseded_by)
    elif not isinstance(event, _OWN_ROW_ONLY):
        ids_in(event, found)


def ids_in(value: Any, found: set[UUID] | None = None) -> set[UUID]:
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
                ids_in(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            ids_in(item, found)
    elif isinstance(value, Iterable) and not isinstance(value, bytes | bytearray):
        for item in value:
            ids_in(item, found)
    elif isinstance(value, UUID):
        found.add(value)
    return found


_SCALARS = frozenset({int, float, bool, datetime})
"""Types of field values that name no id (skipped without a call)."""
