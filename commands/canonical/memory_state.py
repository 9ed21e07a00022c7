"""The state of one canonical memory, folded from its stream's events (read from the ledger).

What a decision about a memory needs: its status and version, the match key and valid time
(``occurred_at``) of its current value, its current item (a correction carries its metadata
over), merged importance/tags/evidence, the candidates already reconciled into it, whether it
is pinned, its namespace, and the position and time of its forget (a tombstone) if it was
forgotten.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

from memory_ledger.ledger.dispatch import EventDispatch
from memory_ledger.ledger.events import (
    SESSION_STREAM_EVENTS,
    ErasedPayload,
    ExtractedItem,
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
from memory_ledger.ledger.ids import Namespace, subject_predicate_key

__all__ = [
    "RETRIEVABLE",
    "MemoryStreamState",
    "Status",
    "fold_memory_history",
    "fold_memory_stream",
    "latest",
]

Status = Literal["active", "conflicted", "superseded", "forgotten", "pruned"]
RETRIEVABLE = frozenset({"active", "conflicted"})


class MemoryStreamState(msgspec.Struct, kw_only=True):
    """The state of one memory stream that reconciliation needs.

    ``forgotten_at`` is the tombstone's position (the forget command's position, see
    ``MemoryForgotten``), kept after a later re-activation is forgotten again; None when the
    memory was never forgotten or its positions are unknown. ``forgotten_time`` is the
    tombstone's valid time: the latest of its forgets' times (``MemoryForgotten.forget_time``:
    the forget command's ``occurred_at``, else its recorded time), kept like
    ``forgotten_at``; None when never forgotten. ``occurred_at`` is the valid time of the
    current value (None: ledger order decides).
    """

    version: int
    status: Status
    importance: float
    tags: tuple[str, ...]
    evidence: tuple[str, ...]
    key: tuple[str, str] | None
    candidate_ids: set[UUID] = msgspec.field(default_factory=set)
    pinned: bool = False
    namespace: Namespace | None = None
    occurred_at: datetime | None = None
    item: ExtractedItem | None = None
    forgotten_at: int | None = None
    forgotten_time: datetime | None = None
    superseded_by: UUID | None = None
    """The memory that superseded this one while its status is ``superseded`` (the next
    link of its supersession chain); None otherwise."""

    @property
    def retrievable(self) -> bool:
        return self.status in RETRIEVABLE


def fold_memory_stream(events: Sequence[LedgerEvent]) -> MemoryStreamState | None:
    """Fold a memory stream's events (in version order); None for an empty stream.

    Without positions a forget's tombstone position is unknown unless the event names it.
    """
    return fold_memory_history([(0, e) for e in events])


def fold_memory_history(events: Sequence[tuple[int, LedgerEvent]]) -> MemoryStreamState | None:
    """Fold a memory stream's ``(position, event)`` pairs (in version order); None if empty."""
    state: MemoryStreamState | None = None
    for position, event in events:
        fold = _MEMORY_FOLD[type(event)]
        if fold is not None:
            state = fold(state, position, event)
    return state


_Fold = Callable[[MemoryStreamState | None, int, Any], MemoryStreamState | None]


def _activated(previous: MemoryStreamState | None, _: int, event: MemoryActivated) -> Any:
    state = MemoryStreamState(
        version=event.originator_version,
        status="active",
        importance=event.item.importance,
        tags=event.item.tags,
        evidence=event.item.evidence,
        key=subject_predicate_key(event.item.subject, event.item.predicate),
        candidate_ids={event.candidate_id},
        namespace=event.namespace,
        occurred_at=event.occurred_at,
        item=event.item,
    )
    if previous is not None:
        state.candidate_ids |= previous.candidate_ids
        state.pinned = previous.pinned
        state.forgotten_at = previous.forgotten_at
        state.forgotten_time = previous.forgotten_time
    return state


def _revision(change: Callable[[MemoryStreamState, int, Any], None]) -> _Fold:
    """A fold step for an event that revises an activated memory (none before activation)."""

    def fold(state: MemoryStreamState | None, position: int, event: LedgerEvent) -> Any:
        if state is not None:
            state.version = event.originator_version
            change(state, position, event)
        return state

    return fold


def _reinforced(state: MemoryStreamState, _: int, event: MemoryReinforced) -> None:
    state.importance = event.importance
    state.tags = event.tags
    state.evidence = event.evidence
    state.candidate_ids.add(event.candidate_id)


def _status(status: Status) -> Callable[[MemoryStreamState, int, LedgerEvent], None]:
    def change(state: MemoryStreamState, _: int, event: LedgerEvent) -> None:
        state.status = status

    return change


def _forgotten(state: MemoryStreamState, position: int, event: MemoryForgotten) -> None:
    state.status = "forgotten"
    # The tombstone's position: the forget command's, else this event's own (when known).
    state.forgotten_at = event.command_position or position or state.forgotten_at
    # The tombstone's time: the latest forget time (older evidence undoes none of them).
    state.forgotten_time = latest(state.forgotten_time, event.forget_time)


def latest(first: datetime | None, second: datetime | None) -> datetime | None:
    """The later of two optional times (None: unknown, the other one wins)."""
    if first is None or second is None:
        return second if first is None else first
    return max(first, second)


def _superseded(state: MemoryStreamState, _: int, event: MemorySuperseded) -> None:
    state.status = "superseded"
    state.superseded_by = event.superseded_by


def _conflict(state: MemoryStreamState, _: int, event: MemoryConflictMarked) -> None:
    if state.status == "active":
        state.status = "conflicted"


def _pinned(state: MemoryStreamState, _: int, event: MemoryPinned) -> None:
    state.pinned = True


_MEMORY_FOLD: EventDispatch[_Fold] = EventDispatch(
    "fold_memory_stream: state of one memory stream",
    {
        MemoryActivated: _activated,
        MemoryReinforced: _revision(_reinforced),
        MemorySuperseded: _revision(_superseded),
        MemoryForgotten: _revision(_forgotten),
        MemoryPruned: _revision(_status("pruned")),
        MemoryConflictMarked: _revision(_conflict),
        MemoryPinned: _revision(_pinned),
    },
    # Events of session, recall, bulk-forget and erasure streams, never of a memory stream;
    # erased payloads (an erased memory reads as unknown: its namespace is gone).
    ignores=(*SESSION_STREAM_EVENTS, NamespaceForgotten, NamespaceErased, ErasedPayload),
)
"""How each event of a memory stream changes :class:`MemoryStreamState`."""
