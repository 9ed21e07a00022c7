"""The data of the store-wide views: namespaces, a namespace's timeline, one event, and
integrity. Built from the audit library (:mod:`memory_ledger.replay`) and the read models;
no HTML here (see :mod:`.pages`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.ids import Namespace

if TYPE_CHECKING:
    from memory_ledger.replay.audit.stats import StoreStats
    from memory_ledger.replay.audit.verify import VerifyReport
    from memory_ledger.replay.ui.state import UiState

__all__ = [
    "STATUSES",
    "ErasedNamespace",
    "Integrity",
    "NamespaceRow",
    "Timeline",
    "TimelineRow",
    "event_payload",
    "integrity",
    "namespaces",
    "timeline",
]

SCAN_WINDOW = 10_000
"""Ledger positions one timeline request reads at most: a filter that matches rarely shows
what it found in the window and where to go on from, so every request stays bounded."""

STATUSES = ("active", "conflicted", "superseded", "forgotten", "pruned")
"""The statuses of ``canonical_memory`` rows, in the order the namespaces view shows them."""


@dataclass(frozen=True)
class NamespaceRow:
    """One namespace: memories by status, the last ledger position that changed one of
    its memories and when that was recorded."""

    namespace: Namespace
    counts: dict[str, int]
    last_position: int
    last_recorded_at: datetime | None


@dataclass(frozen=True)
class ErasedNamespace:
    """An erasure (crypto-shredding) of the ledger: the namespaces are digests only."""

    position: int
    recorded_at: datetime
    level: str
    namespace_ids: tuple[str, ...]
    key_ids: int


def _recorded_at(state: UiState, position: int) -> datetime | None:
    from memory_ledger.replay.audit.timeline import iter_events

    for _, event in iter_events(state.engine, start=position, limit=1):
        return event.recorded_at
    return None


def namespaces(state: UiState) -> list[NamespaceRow]:
    """Every namespace with memories, with counts by status (one grouped query over
    ``canonical_memory``, cached per ledger head)."""

    def compute() -> list[NamespaceRow]:
        with state.engine.read_models() as live:
            rows = live.conn.execute(
                "SELECT tenant, principal, scope_id, status, count(*), max(updated_position) "
                "FROM canonical_memory GROUP BY ALL ORDER BY ALL"
            ).fetchall()
        grouped: dict[tuple[str, str, str], tuple[dict[str, int], int]] = {}
        for tenant, principal, scope_id, status, count, last in rows:
            counts, seen = grouped.setdefault((tenant, principal, scope_id), ({}, 0))
            counts[status] = int(count)
            grouped[(tenant, principal, scope_id)] = (counts, max(seen, int(last or 0)))
        return [
            NamespaceRow(
                namespace=Namespace(*key),
                counts={s: counts.get(s, 0) for s in STATUSES},
                last_position=last,
                last_recorded_at=_recorded_at(state, last) if last else None,
            )
            for key, (counts, last) in sorted(grouped.items())
        ]

    return state.cached("namespaces", compute)


def erased_namespaces(state: UiState) -> list[ErasedNamespace]:
    """The ledger's erasures (``NamespaceErased`` records, stored in clear), cached per
    head. Other records are skipped before they are decoded."""
    from memory_ledger.replay.audit.filters import EventFilter, filter_events

    def compute() -> list[ErasedNamespace]:
        found = []
        for position, event in filter_events(
            state.engine, EventFilter(types=("NamespaceErased",)), page=5000
        ):
            found.append(
                ErasedNamespace(
                    position=position,
                    recorded_at=event.recorded_at,
                    level=str(getattr(event, "level", "")),
                    namespace_ids=tuple(str(i) for i in getattr(event, "namespace_ids", ())),
                    key_ids=len(getattr(event, "key_ids", ())),
                )
            )
        return found

    return state.cached("erased", compute)


@dataclass(frozen=True)
class TimelineRow:
    """One event of a timeline: its position, type, session, turn, time and summary."""

    position: int
    type: str
    session_id: str | None
    turn_id: int | None
    recorded_at: datetime
    summary: str


@dataclass(frozen=True)
class Timeline:
    """One page of a namespace's events in ledger order, after position ``after``;
    ``next_after`` is where the next page starts (None: this is the last page)."""

    # ``rows`` may be fewer than a page, even none, with ``next_after`` set: the request's
    # scan window (:data:`SCAN_WINDOW`) ended first.

    namespace: Namespace
    rows: list[TimelineRow]
    after: int
    next_after: int | None
    types: tuple[str, ...] = ()
    session_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    event_types: tuple[str, ...] = field(default=())


def timeline(
    state: UiState,
    namespace: Namespace,
    *,
    after: int = 0,
    types: tuple[str, ...] = (),
    session_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> Timeline:
    """One page (:attr:`UiState.page_size`) of ``namespace``'s events after position
    ``after`` (:func:`memory_ledger.replay.filter_events`; keyset paging, so page N costs
    what page 1 does), read from at most :data:`SCAN_WINDOW` positions: a page holding
    fewer events than its size then goes on from the end of the window.

    :raises InvalidArgumentError: an unknown event type, a naive or empty time range.
    """
    from memory_ledger.replay.audit.filters import (
        EVENT_TYPES,
        EventFilter,
        describe_event,
        filter_events,
    )
    from memory_ledger.replay.audit.timeline import event_type

    if after < 0:
        raise InvalidArgumentError("after must be a position (>= 0)", parameter="after")
    selection = EventFilter(
        tenant=namespace.tenant,
        principal=namespace.principal,
        scope_id=namespace.scope_id,
        session_id=session_id or None,
        types=types,
        start=after + 1,
        stop=after + SCAN_WINDOW,
        since=since,
        until=until,
    )
    size = state.page_size
    rows = [
        TimelineRow(
            position=position,
            type=event_type(event),
            session_id=getattr(event, "session_id", None),
            turn_id=getattr(event, "turn_id", None),
            recorded_at=event.recorded_at,
            summary=describe_event(event),
        )
        for position, event in filter_events(state.engine, selection, limit=size + 1)
    ]
    more = len(rows) > size
    rows = rows[:size]
    window_end = after + SCAN_WINDOW
    if more and rows:
        next_after: int | None = rows[-1].position
    else:
        next_after = window_end if window_end < state.head() else None
    return Timeline(
        namespace=namespace,
        rows=rows,
        after=after,
        next_after=next_after,
        types=types,
        session_id=session_id,
        since=since,
        until=until,
        event_types=tuple(sorted(EVENT_TYPES)),
    )


def event_payload(state: UiState, position: int) -> dict[str, Any] | None:
    """The event at ``position`` as stored (redacted before it was written; an erased
    payload shows only what stays in clear), or None beyond the head
    (:func:`memory_ledger.replay.audit.timeline.event_record`)."""
    from memory_ledger.replay.audit.timeline import event_record, iter_events

    if position < 1:
        return None
    for at, event in iter_events(state.engine, start=position, limit=1):
        if at == position:
            return event_record(at, event)
    return None


@dataclass(frozen=True)
class Integrity:
    """``verify``'s result, the store's counts and encryption state, and its erasures."""

    verify: VerifyReport
    stats: StoreStats | None
    erased: list[ErasedNamespace]
    problem: str | None = None
    """Why the counts could not be read (a damaged record), else None."""


def integrity(state: UiState) -> Integrity:
    """:func:`memory_ledger.replay.verify_store` and
    :func:`memory_ledger.replay.store_stats` (both walk the ledger: cached per head)."""
    from memory_ledger.commands.secrets import redact
    from memory_ledger.replay.audit.stats import store_stats
    from memory_ledger.replay.audit.verify import verify_store

    report = state.cached("verify", lambda: verify_store(state.engine))
    try:
        stats = state.cached("stats", lambda: store_stats(state.engine))
        erased = erased_namespaces(state)
    except Exception as error:  # a damaged record the read models cannot fold
        text = redact(" ".join(str(error).split())).text
        return Integrity(report, None, [], problem=f"{type(error).__name__}: {text}")
    return Integrity(verify=report, stats=stats, erased=erased)
