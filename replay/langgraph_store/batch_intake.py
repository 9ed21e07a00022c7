"""The writer keeps the reader current (:class:`BatchIntake`): after a LangGraph store's own
batch, the current value of each written address is remembered at the batch's last
position, folded on from the batch's own records instead of read again, when that is the
answer a read would give.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, NamedTuple
from uuid import UUID

from eventsourcing.utils import get_topic

from memory_ledger.ledger.events import (
    DirectCommandApplied,
    LedgerEvent,
    MemoryActivated,
    MemorySuperseded,
)
from memory_ledger.ledger.ids import subject_predicate_key
from memory_ledger.ledger.tags import MEMORY_EVENTS
from memory_ledger.replay.langgraph_store.current_value import NEVER, Current, History, fold_times
from memory_ledger.replay.langgraph_store.records import Address
from memory_ledger.replay.langgraph_store.remembered import (
    CHANGING_TOPICS,
    KeyTag,
    RememberedValues,
    decodable,
)

if TYPE_CHECKING:
    from memory_ledger.commands.engine import MemoryEngine
    from memory_ledger.commands.engine.batch import BatchResult
    from memory_ledger.ledger.ids import Namespace

__all__ = ["BatchEvents", "BatchIntake", "Served"]

_FIRST_COMMAND = get_topic(DirectCommandApplied)
"""The topic of a batch's first record (its first command, which opens its short session)."""
_TAKEN_IN = 16
"""The most addresses of one batch whose new values the writer hands the reader
(:meth:`BatchIntake.wrote`): a get right after a put or a small batch reads no ledger; a
larger batch (an import, a bulk load) costs no more than before."""

Served = Callable[[tuple[str, ...], str, History], Current | None]
"""``(namespace, key, history) -> the current value`` the serving state answers for an
address whose events fold to ``history`` (``ItemReader._served``)."""


class BatchEvents(NamedTuple):
    """A batch's memory events by memory, and its activations by match key."""

    by_memory: dict[UUID, list[tuple[int, LedgerEvent]]]
    activated: dict[tuple[str, str], list[MemoryActivated]]

    @classmethod
    def of(cls, events: Sequence[tuple[int, LedgerEvent]], namespace: Namespace) -> BatchEvents:
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


class BatchIntake:
    """Takes a store's own batches into an
    :class:`~memory_ledger.replay.langgraph_store.reads.ItemReader`'s remembered values,
    holding the reader's ``lock`` while it reads or changes them."""

    def __init__(
        self,
        engine: MemoryEngine,
        namespace: Namespace,
        lock: threading.Lock,
        values: RememberedValues,
        key_tag: KeyTag,
        served: Served,
    ) -> None:
        """The reader's engine, namespace, lock, remembered values, address -> (key tag,
        match key), and current value of a folded history."""
        self.engine = engine
        self.namespace = namespace
        self._lock = lock
        self._values = values
        self._key_tag = key_tag
        self._served = served

    def wrote(self, result: BatchResult, addresses: Sequence[Address]) -> None:
        """``ItemReader.wrote``: take in the batch ``result`` that wrote ``addresses``
        (see there). Never raises for a reason other than the ledger's own errors."""
        if not result.outcomes or not addresses or len(addresses) > _TAKEN_IN:
            return  # a large batch: its addresses are read when asked (most never are)
        values = self._values
        last = result.position
        start = result.outcomes[0].position  # the batch's first record: its first command
        with self._lock:
            values.carry(start - 1)
            if values.at != start - 1:
                return  # another thread carried past the batch's start: read when asked
            records = self.engine.read_records(start - 1, last - start + 1, last)
            if (
                len(records) != last - start + 1
                or records[0][3] != _FIRST_COMMAND
                or records[0][2] != 1
                or records[-1][0] != last
            ):
                return  # pragma: no cover (not laid out as apply_batch writes a batch)
            decode = self.engine.event_decoder()
            opened = decode(*decodable(records[0]))
            if (
                not isinstance(opened, DirectCommandApplied)
                or opened.session_id != result.session_id
            ):
                return  # pragma: no cover (another command's records)
            events = [
                (record[0], decode(*decodable(record)))
                for record in records
                if record[3] in CHANGING_TOPICS
            ]
            before = {address: values.get(address) for address in addresses}
            values.carry(last, events)
        batch = BatchEvents.of(events, self.namespace)
        unknown = [address for address, known in before.items() if known is None]
        never = self._never_activated(unknown, start, result.never_activated)
        found: dict[Address, tuple[Current | None, frozenset[UUID], History]] = {}
        for address, known in before.items():
            if known is not None:
                ids, history = known.ids, known.history
            elif address in never:
                ids, history = frozenset(), NEVER
            else:
                continue
            moved = self._continued(address, history, ids, batch)
            if moved is not None:
                found[address] = (self._served(*address, moved[1]), moved[0], moved[1])
        if not found or self.engine.head != last:
            return  # a later write: the values looked up may be of after it (the head is
            # the batch's last record at the end, so it was all along: positions only grow)
        with self._lock:
            values.carry(last)
            if values.at == last:
                for address, (current, ids, history) in found.items():
                    values.remember(address, current, ids, history)

    def _never_activated(
        self, addresses: Sequence[Address], start: int, known: Collection[tuple[str, str]]
    ) -> set[Address]:
        """The addresses of ``addresses`` under whose key the tag index holds no activation
        before position ``start``: those whose match key is in ``known`` (the batch's
        decision found none: ``BatchResult.never_activated``), the others from one read of
        their key tags."""
        never = {address for address in addresses if self._key_tag(*address)[1] in known}
        addresses = [address for address in addresses if address not in never]
        if not addresses:
            return never
        by_match = {self._key_tag(*address)[1]: address for address in addresses}
        tags = [self._key_tag(*address)[0] for address in addresses]
        taken = set(never)
        never.update(addresses)
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
                return taken  # an event not told apart: take none of those read
            never.discard(address)
        return never

    def _continued(
        self,
        address: Address,
        history: History,
        ids: frozenset[UUID],
        batch: BatchEvents,
    ) -> tuple[frozenset[UUID], History] | None:
        """The ids and history of ``address`` after ``batch`` (a batch's records, right
        after the state ``history`` and ``ids`` were read at): the events of the memories
        activated under its key (those of ``history`` and those the batch activates there)
        folded on from ``history.fold``, as ``ItemReader._read_current`` folds them all.
        None when a memory the batch activates there has earlier records (its stream would
        hold events ``history`` does not): read it then."""
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
        return frozenset(named), History(fold_times(own, history.fold), order, first)
