"""Whether a LangGraph address's current value may have a TTL, read as little as possible
(:class:`TtlWatch`): a store whose namespace never held a value with a TTL reads nothing for
TTLs before a write; otherwise only the activations under the written keys since each was
last looked at.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from eventsourcing.utils import get_topic

from memory_ledger.ledger.events import LedgerEvent, MemoryActivated
from memory_ledger.replay.langgraph_store.records import Address, address_of, ttl_of
from memory_ledger.replay.langgraph_store.remembered import KeyTag, RememberedValues, decodable

if TYPE_CHECKING:
    from memory_ledger.commands.engine import MemoryEngine
    from memory_ledger.ledger.ids import Namespace

__all__ = ["TtlWatch"]

_ACTIVATED = get_topic(MemoryActivated)
_TTL_RECORDS = 4096
"""Records after :attr:`TtlWatch.at` read to see whether one activates a value with a
TTL; after more, the served documents are looked through again."""


class TtlWatch:
    """Which addresses of one engine namespace may hold a value with a TTL, for an
    :class:`~memory_ledger.replay.langgraph_store.reads.ItemReader`: its state is guarded
    by the reader's ``lock`` (the one lock of the reader's remembered values)."""

    def __init__(
        self,
        engine: MemoryEngine,
        namespace: Namespace,
        lock: threading.Lock,
        key_tag: KeyTag,
    ) -> None:
        """``lock``: the reader's; ``key_tag``: its address -> (key tag, match key)."""
        self.engine = engine
        self.namespace = namespace
        self._lock = lock
        self._key_tag = key_tag
        self.any = False
        """Whether a value with a TTL may be current in the namespace (sticky once true)."""
        self.at = -1
        """The ledger position :attr:`any` holds at (-1: never looked)."""
        self.scans: dict[Address, tuple[int, bool]] = {}
        """address -> (the ledger head its activations were read up to, whether one of
        them put a value with a TTL): :meth:`with_ttl`."""

    def with_ttl(self, addresses: Sequence[Address], values: RememberedValues) -> list[Address]:
        """The addresses of ``addresses`` whose current value may have a TTL (a superset;
        those to read with ``ItemReader.current`` before a write decides against their
        expiry): each remembered at the ledger head with a TTL (``values``, the reader's,
        carried to the head here), and each not remembered where any value was ever put
        with a TTL. Nothing is read while no value of the namespace has a TTL
        (:meth:`watched`). The activations under their keys are read from the tag index
        (one read for the addresses never looked at, one for the others, from the position
        each was last looked at): a write to an address never put with a TTL reads no
        memory stream, and a hot address only the activations since its last write."""
        head = self.engine.head
        found: list[Address] = []
        fresh: dict[str, Address] = {}
        seen: dict[str, Address] = {}
        after = head
        with self._lock:
            values.carry(head)
            if not self.watched(head):
                return []  # no value with a TTL anywhere in the namespace: nothing to read
            remembered = values.values if head == values.at else {}
            if len(self.scans) > 100_000:
                self.scans.clear()
            for address in addresses:
                known = remembered.get(address)
                if known is not None:
                    if known.current is not None and known.current.ttl is not None:
                        found.append(address)
                    continue
                scanned = self.scans.get(address)
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
                self.scans[address] = (head, address in with_ttl)
        found.extend(a for a in (*fresh.values(), *seen.values()) if a in with_ttl)
        return found

    def watched(self, head: int) -> bool:
        """Whether a value with a TTL may be current in the namespace at ``head`` (call
        holding the lock, after the remembered values were carried to ``head``): false
        only when none of the retrievable memories had one when first looked (one pass over
        the served documents) and no record since activates one with a TTL (the records a
        carry decoded, :meth:`carried`, else those after :attr:`at`, read here; a pass
        again after more than :data:`_TTL_RECORDS`). A memory becomes retrievable again
        only by an activation, which carries its tags: any process's put with a TTL is
        seen."""
        if self.any or head <= self.at:
            return self.any
        if self.at < 0 or head - self.at > _TTL_RECORDS:
            docs = self.engine.retrievable_memories(self.namespace)
            self.any = any(ttl_of(doc.tags) is not None for doc in docs)
        else:
            decode = self.engine.event_decoder()
            records = self.engine.read_records(self.at, head - self.at, head)
            self._watch(decode(*decodable(record)) for record in records if record[3] == _ACTIVATED)
        self.at = max(self.at, head)
        return self.any

    def carried(self, after: int, head: int, events: Sequence[tuple[int, LedgerEvent]]) -> None:
        """Take in the records after ``after`` up to ``head`` a carry of the remembered
        values decoded (``events``; call holding the lock): when the watch holds at
        ``after`` and saw no TTL yet, it then holds at ``head`` without reading them."""
        if self.at == after and not self.any:
            self._watch(event for _, event in events)
            self.at = head

    def _watch(self, events: Iterable[LedgerEvent]) -> None:
        """Note an activation with a TTL among ``events`` (:attr:`any`)."""
        for event in events:
            if (
                isinstance(event, MemoryActivated)
                and event.namespace == self.namespace
                and ttl_of(event.item.tags) is not None
            ):
                self.any = True
