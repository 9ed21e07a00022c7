"""Tags of ledger events: what a decision about canonical memory reads and is conditioned on.

The consistency boundary (docs/design.md; the ``eventsourcing`` library's dynamic
consistency boundaries, ``eventsourcing/dcb/``): every event that changes canonical memory
carries tags, derived from its content only (so the index can be rebuilt from the log):

- ``memory:<memory id>``: every event of a memory stream (activated, reinforced, superseded,
  conflict marked, pinned, forgotten, pruned);
- ``namespace:<namespace id>``: the same events, and ``NamespaceForgotten`` (a
  bulk decision over a namespace, such as ``forget_all``, reads and is conditioned on it);
- ``key:<digest of namespace, subject, predicate>``: a ``MemoryActivated`` whose item has a
  (subject, predicate) match key: a new value for a key is conditioned on every activation
  under that key (two new values share no stream, so versions alone cannot see each other).

Session events (transcripts, candidates, snapshots, admissions, uses, recalls) carry none:
they never change what is current, and no decision is refused because of them.

The ids in ``namespace:`` and ``key:`` tags are derived as the store's id format says
(:mod:`memory_ledger.ledger.digests`: uuid5 in format 1, keyed digests in format 2, the
``key:`` tag under the namespace's key, destroyed by an erasure); :func:`namespace_tag` and
:func:`key_tag` are format 1's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable
from uuid import UUID

from eventsourcing.dcb.api import DCBAppendCondition, DCBQuery, DCBQueryItem
from eventsourcing.persistence import Mapper, StoredEvent
from eventsourcing.utils import get_topic

from memory_ledger.ledger.digests import UNKEYED, IdDigests
from memory_ledger.ledger.events import (
    LedgerEvent,
    MemoryActivated,
    MemoryConflictMarked,
    MemoryForgotten,
    MemoryPinned,
    MemoryPruned,
    MemoryReinforced,
    MemorySuperseded,
    NamespaceErased,
    NamespaceForgotten,
)
from memory_ledger.ledger.ids import Namespace, derived_id, subject_predicate_key

__all__ = [
    "ERASURE_TAG",
    "MEMORY_EVENTS",
    "TaggedRecorder",
    "condition_for",
    "event_tags",
    "key_tag",
    "memory_tag",
    "namespace_tag",
    "stored_event_tagger",
]

MEMORY_EVENTS: tuple[type[LedgerEvent], ...] = (
    MemoryActivated,
    MemoryReinforced,
    MemorySuperseded,
    MemoryConflictMarked,
    MemoryPinned,
    MemoryForgotten,
    MemoryPruned,
)
"""Events of memory streams: each carries its memory and namespace tags."""

_TAGGED_EVENTS: tuple[type[LedgerEvent], ...] = (
    *MEMORY_EVENTS,
    NamespaceForgotten,
    NamespaceErased,
)

ERASURE_TAG = "erasure"
"""Tag of every ``NamespaceErased`` record: an engine opening a store reads them all to
check that no key they destroyed is live in its key store (an old ``keys/`` copied back)."""
_MEMORY_TOPICS = frozenset(get_topic(cls) for cls in _TAGGED_EVENTS)


def memory_tag(memory: UUID) -> str:
    """Tag of every event of the memory stream ``memory``."""
    return f"memory:{memory}"


def namespace_tag(namespace: Namespace) -> str:
    """Tag of every memory-stream event of ``namespace`` (id format 1; a store derives its
    own with :meth:`IdDigests.namespace_tag`)."""
    return f"namespace:{derived_id('namespace' + chr(31) + namespace.key())}"


def key_tag(namespace: Namespace, key: tuple[str, str]) -> str:
    """Tag of every activation under the match key ``key`` (see ``subject_predicate_key``;
    id format 1: a store derives its own with :meth:`IdDigests.key_tag`)."""
    name = "key" + chr(31) + namespace.key() + chr(31) + key[0] + chr(31) + key[1]
    return f"key:{derived_id(name)}"


_NAMESPACE_TAGS: dict[Namespace, str] = {}


def _namespace_tag(namespace: Namespace) -> str:
    tag = _NAMESPACE_TAGS.get(namespace)
    if tag is None:
        if len(_NAMESPACE_TAGS) > 4096:
            _NAMESPACE_TAGS.clear()
        tag = _NAMESPACE_TAGS[namespace] = namespace_tag(namespace)
    return tag


def event_tags(event: LedgerEvent, digests: IdDigests = UNKEYED) -> tuple[str, ...]:
    """The tags ``event`` is indexed under (empty for events outside memory streams, except
    a ``NamespaceForgotten``, which carries its namespace tag), their ids derived by
    ``digests`` (the store's, :attr:`memory_ledger.ledger.keyring.Keyring.digests`)."""
    keyed = digests.keyed
    if type(event) not in _MEMORY_EVENT_TYPES:
        if type(event) is NamespaceForgotten:
            if keyed:
                return (digests.namespace_tag(event.namespace),)
            return (_namespace_tag(event.namespace),)
        if type(event) is NamespaceErased:
            return (ERASURE_TAG,)
        return ()
    if keyed:
        tags = (memory_tag(event.originator_id), digests.namespace_tag(event.namespace))
    else:
        tags = (memory_tag(event.originator_id), _namespace_tag(event.namespace))
    if isinstance(event, MemoryActivated):
        key = subject_predicate_key(event.item.subject, event.item.predicate)
        if key is not None:
            return (*tags, digests.key_tag(event.namespace, key))
    return tags


_MEMORY_EVENT_TYPES = frozenset(MEMORY_EVENTS)


def stored_event_tagger(
    mapper: Mapper[UUID], digests: IdDigests = UNKEYED
) -> Callable[[StoredEvent], tuple[str, ...]]:
    """``event_tags`` of a stored event (decoded only when it is a memory-stream event):
    the tagger that indexes the records of a store written before the tag index."""

    def tagger(stored: StoredEvent) -> tuple[str, ...]:
        if stored.topic not in _MEMORY_TOPICS:
            return ()
        event = mapper.to_domain_event(stored)
        assert isinstance(event, LedgerEvent)
        return event_tags(event, digests)

    return tagger


@runtime_checkable
class TaggedRecorder(Protocol):
    """What the engine needs of an application recorder for its consistency boundary.

    ``insert_events(stored, tags=[...], condition=DCBAppendCondition)`` appends atomically
    unless the condition fails (raising an ``IntegrityError``); ``select_tagged`` reads the
    events matching a query with their positions and the head it read at;
    ``select_positioned`` reads one stream with positions. Implemented by
    :class:`memory_ledger.ledger.lmdb.LMDBApplicationRecorder`.
    """

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None: ...

    def select_tagged(
        self, query: DCBQuery | None, *, after: int | None = None, limit: int | None = None
    ) -> Any: ...

    def select_positioned(self, originator_id: UUID, *, gt: int | None = None) -> Any: ...

    def tag_index_built(self) -> bool: ...

    def build_tag_index(self, tagger: Callable[[StoredEvent], Sequence[str]]) -> int: ...


def condition_for(tags: Iterable[str], after: int) -> DCBAppendCondition:
    """The append condition "no event carrying any of ``tags`` after ``after``"."""
    return DCBAppendCondition(
        fail_if_events_match=DCBQuery(items=[DCBQueryItem(tags=[t]) for t in set(tags)]),
        after=after,
    )
