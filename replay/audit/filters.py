"""Filtered reads of the ledger (``memory-ledger events`` with filters, exports, explain).

:class:`EventFilter` selects events by namespace parts, session, turn, event type, position
range and recorded-time range. Position and type filters are applied before an event is
decoded (types are matched on the stored topic), so ``--type MemoryActivated`` over a large
ledger decodes only the activations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import msgspec

from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.ledger.arguments import check_aware, check_count
from memory_ledger.ledger.dispatch import EventDispatch
from memory_ledger.ledger.errors import InvalidArgumentError, at_position
from memory_ledger.ledger.events import (
    EVENT_CLASSES,
    AdmissionRevoked,
    CandidateExtracted,
    CandidateRejected,
    ContextCompacted,
    DirectCommandApplied,
    ErasedPayload,
    ExplicitCommandApplied,
    ExtractionAbandoned,
    ExtractionCompleted,
    KnowledgeBound,
    KnowledgeServed,
    LedgerEvent,
    MemoryActivated,
    MemoryAdmitted,
    MemoryConflictMarked,
    MemoryForgotten,
    MemoryPinned,
    MemoryPruned,
    MemoryReinforced,
    MemorySuperseded,
    MemoryUsed,
    NamespaceErased,
    NamespaceForgotten,
    RecallServed,
    ReconciliationReport,
    SessionOpened,
    SessionReconciled,
    SessionSealed,
    SnapshotPrepared,
    TranscriptObserved,
    TurnBegan,
    TurnCompleted,
    WorkspaceAttached,
    WorkspaceReleased,
    WorkspaceSearched,
)
from memory_ledger.ledger.mapper import RECORD_DAMAGE

__all__ = [
    "EVENT_TYPES",
    "EventFilter",
    "describe_event",
    "filter_events",
    "topic_type",
]

EVENT_TYPES: tuple[str, ...] = tuple(cls.__name__ for cls in EVENT_CLASSES)
"""Names of every event class this version writes (``--type`` accepts these)."""

_BY_LOWER = {name.lower(): name for name in EVENT_TYPES}

_KINDS: dict[str, frozenset[str]] = {
    cls.__name__: frozenset(sub.__name__ for sub in EVENT_CLASSES if issubclass(sub, cls))
    for cls in EVENT_CLASSES
}
"""Each event type's name -> its own and its subtypes' names (``ExplicitCommandApplied``
takes in ``DirectCommandApplied``: a direct command is an explicit command)."""


def topic_type(topic: str) -> str:
    """The class name in a stored topic (``memory_ledger.ledger.events:MemoryActivated`` ->
    ``MemoryActivated``)."""
    return topic.rpartition(":")[2].rpartition(".")[2]


class EventFilter(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`filter_events` keeps. Every field is optional; set fields must all match.

    ``types`` holds event class names (case-insensitive; see :data:`EVENT_TYPES`);
    ``start``/``stop`` is an inclusive position range; ``since``/``until`` an inclusive
    range of ``recorded_at`` (aware datetimes: a naive one raises
    :class:`~memory_ledger.commands.errors.NaiveDatetimeError` naming the field). ``turn_id``
    matches events that carry a turn (a negative one raises
    :class:`~memory_ledger.ledger.errors.InvalidArgumentError` naming ``turn_id``).
    """

    tenant: str | None = None
    principal: str | None = None
    scope_id: str | None = None
    session_id: str | None = None
    turn_id: int | None = None
    types: tuple[str, ...] = ()
    start: int = 1
    stop: int | None = None
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("since", "until"):
            if getattr(self, name) is not None:
                check_aware(name, getattr(self, name))
        if self.turn_id is not None and self.turn_id < 0:  # turn ids count from 0
            msg = f"turn_id is a turn number (0 or more), got {self.turn_id}"
            raise InvalidArgumentError(msg, parameter="turn_id")

    def normalized_types(self) -> frozenset[str]:
        """The ``types`` as exact class names, each with its subtypes (``ExplicitCommandApplied``
        matches a ``DirectCommandApplied`` too, as ``isinstance`` would).

        :raises InvalidArgumentError: (a ``ValueError``) a name is not an event type (the
            message lists the valid ones).
        """
        names: set[str] = set()
        for raw in self.types:
            for part in raw.split(","):
                name = _BY_LOWER.get(part.strip().lower())
                if name is None:
                    msg = f"unknown event type {part.strip()!r}; known: {', '.join(EVENT_TYPES)}"
                    raise InvalidArgumentError(msg, parameter="types")
                names.update(_KINDS[name])
        return frozenset(names)

    def matches(self, event: LedgerEvent) -> bool:
        """Whether a decoded ``event`` passes the content filters (not type or position)."""
        ns = event.namespace
        if self.tenant is not None and ns.tenant != self.tenant:
            return False
        if self.principal is not None and ns.principal != self.principal:
            return False
        if self.scope_id is not None and ns.scope_id != self.scope_id:
            return False
        if self.session_id is not None and getattr(event, "session_id", None) != self.session_id:
            return False
        if self.turn_id is not None and getattr(event, "turn_id", None) != self.turn_id:
            return False
        if self.since is not None and event.recorded_at < self.since:
            return False
        return not (self.until is not None and event.recorded_at > self.until)


def filter_events(
    engine: MemoryEngine,
    selection: EventFilter | None = None,
    *,
    limit: int | None = None,
    page: int = 1000,
) -> Iterator[tuple[int, LedgerEvent]]:
    """Yield ``(position, event)`` of the events ``selection`` keeps, in position order.

    At most ``limit`` events (after filtering). Reads pages of raw records, drops positions
    and types outside the filter before decoding, then applies the content filters.

    :raises InvalidArgumentError: (a ``ValueError``) ``selection`` names an unknown event
        type, an empty range or a naive ``since``/``until``; or ``limit`` is below 1.
    """
    selection = selection or EventFilter()
    types = selection.normalized_types()
    if limit is not None:
        check_count("limit", limit)
    check_count("page", page)
    for name in ("since", "until"):
        if getattr(selection, name) is not None:
            check_aware(name, getattr(selection, name))
    if selection.stop is not None and selection.stop < selection.start:
        msg = f"empty position range {selection.start}..{selection.stop}"
        raise InvalidArgumentError(msg, parameter="stop", reason_code="empty_range")
    if selection.since and selection.until and selection.until < selection.since:
        msg = f"empty time range {selection.since.isoformat()}..{selection.until.isoformat()}"
        raise InvalidArgumentError(msg, parameter="until", reason_code="empty_range")
    decode = engine.event_decoder()
    after = max(selection.start, 1) - 1
    emitted = 0
    while limit is None or emitted < limit:
        rows = engine.read_records(after, page, selection.stop)
        if not rows:
            return
        for position, raw_id, version, topic, state in rows:
            if types and topic_type(topic) not in types:
                continue
            try:
                event = decode(topic, state, raw_id, version)
            except RECORD_DAMAGE as e:
                raise at_position(e, position) from e
            if not selection.matches(event):
                continue
            yield position, event
            emitted += 1
            if limit is not None and emitted >= limit:
                return
        after = rows[-1][0]


def _short(text: str, size: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= size else flat[: size - 1] + "…"


def describe_event(event: LedgerEvent) -> str:
    """A one-line, human summary of ``event`` (for tables and diagrams); "" for events with
    nothing to say beyond their type."""
    describe = _DESCRIBE[type(event)]
    return describe(event) if describe is not None else ""


def _opened(event: SessionOpened) -> str:
    return f"policy {event.activation_policy}, extractor {event.extractor_id}"


def _observed(event: TranscriptObserved) -> str:
    return _short(event.transcript)


def _extracted(event: CandidateExtracted) -> str:
    return f"#{event.index} {_short(event.item.statement)}"


def _rejected(event: CandidateRejected) -> str:
    return f"#{event.index} rejected: {event.reason_code}"


def _extraction(event: ExtractionCompleted) -> str:
    return f"{event.extracted} extracted, {event.rejected} rejected by {event.extractor_id}"


def _abandoned(event: ExtractionAbandoned) -> str:
    return event.reason


def _activated(event: MemoryActivated) -> str:
    return f"{event.decision}: {_short(event.item.statement)}"


def _reinforced(event: MemoryReinforced) -> str:
    return f"importance {event.importance:g}"


def _superseded(event: MemorySuperseded) -> str:
    return f"by {event.superseded_by} ({event.cause})"


def _conflict(event: MemoryConflictMarked) -> str:
    return f"conflicts with {event.conflicts_with}"


def _command(event: ExplicitCommandApplied) -> str:
    return f"{event.intent}: {_short(event.statement)}"


def _by_command(event: MemoryPinned | MemoryForgotten) -> str:
    return f"command {event.command_id}"


def _pruned(event: MemoryPruned) -> str:
    return event.rule


def _prepared(event: SnapshotPrepared) -> str:
    return f"generation {event.generation}, {len(event.items)} items"


def _began(event: TurnBegan) -> str:
    return f"generation {event.generation}"


def _recall(event: RecallServed) -> str:
    return f"{event.path}: {_short(event.query, 50)} -> {len(event.results)} results"


def _revision(event: MemoryAdmitted | MemoryUsed) -> str:
    return f"{event.memory_id} rev {event.revision}"


def _revoked(event: AdmissionRevoked) -> str:
    return f"{event.memory_id} rev {event.revision}: {event.reason}"


def _erased(event: NamespaceForgotten) -> str:
    return f"forget_all: {len(event.forgotten)} memories, command {event.command_id}"


def _crypto_erased(event: NamespaceErased) -> str:
    by = f", requested by {event.requested_by}" if event.requested_by else ""
    return (
        f"erasure ({event.level}): {len(event.namespace_ids)} namespace(s), "
        f"{len(event.key_ids)} data key(s) destroyed, command {event.command_id}{by}"
    )


def _erased_payload(event: ErasedPayload) -> str:
    name = event.topic.rpartition(":")[2]
    return f"[erased] {name} (data key {event.key_id} destroyed)"


def _direct(event: DirectCommandApplied) -> str:
    text = f"{_command(event)} (direct, policy {event.activation_policy})"
    if event.report is not None:
        text += f"; reconciled: {_report(event.report)}"
    return text


def _reconciled(event: SessionReconciled) -> str:
    return _report(event.report)


def _report(report: ReconciliationReport) -> str:
    text = (
        f"{report.candidates} candidates: {len(report.activated)} activated, "
        f"{len(report.reinforced)} reinforced, {len(report.superseded)} superseded"
    )
    if report.declined:
        text += f"; {len(report.declined)} declined"
    if report.pending_extractions:
        turns = ", ".join(str(p.turn_id) for p in report.pending_extractions)
        text += f"; turns {turns} pending extraction"
    return text


def _describe_context(event: KnowledgeBound | KnowledgeServed | ContextCompacted) -> str:
    if isinstance(event, KnowledgeBound):
        return (
            f"bound to {event.package_id}@{event.version}#{event.generation} "
            f"(≤{event.max_documents} docs, ≤{event.max_document_bytes} B each, "
            f"≤{event.max_total_bytes} B in all)"
        )
    if isinstance(event, KnowledgeServed):
        return (
            f"{len(event.citations)} documents, {event.total_bytes} B: {', '.join(event.citations)}"
        )
    restored = ", goal restored" if event.goal_restored else ""
    return (
        f"generation {event.generation}: messages {event.summarized_from}..{event.summarized_to} "
        f"summarized, {event.tokens_before} -> {event.tokens_after} tokens{restored}; "
        f"goal {_short(event.goal, 50)}"
    )


def _describe_workspace(event: WorkspaceAttached | WorkspaceSearched | WorkspaceReleased) -> str:
    if isinstance(event, WorkspaceAttached):
        return (
            f"{event.root} ({', '.join(event.modes)}; {event.chunking}; model {event.model or '-'})"
        )
    if isinstance(event, WorkspaceSearched):
        cited = ", ".join(f"{h.path}:L{h.line_start}-{h.line_end}" for h in event.hits[:3])
        return f"{event.mode}: {_short(event.query, 40)} -> {len(event.hits)} hits {cited}".rstrip()
    rate = "-" if event.release_rate is None else f"{event.release_rate:.2f}"
    return f"{event.files_indexed} files, {event.chunks} chunks; release rate {rate}"


_DESCRIBE: EventDispatch[Callable[[Any], str]] = EventDispatch(
    "describe_event: one-line summaries",
    {
        SessionOpened: _opened,
        TranscriptObserved: _observed,
        CandidateExtracted: _extracted,
        CandidateRejected: _rejected,
        ExtractionCompleted: _extraction,
        ExtractionAbandoned: _abandoned,
        MemoryActivated: _activated,
        MemoryReinforced: _reinforced,
        MemorySuperseded: _superseded,
        MemoryConflictMarked: _conflict,
        ExplicitCommandApplied: _command,
        DirectCommandApplied: _direct,
        MemoryPinned: _by_command,
        MemoryForgotten: _by_command,
        MemoryPruned: _pruned,
        SnapshotPrepared: _prepared,
        TurnBegan: _began,
        RecallServed: _recall,
        MemoryAdmitted: _revision,
        AdmissionRevoked: _revoked,
        MemoryUsed: _revision,
        SessionReconciled: _reconciled,
        KnowledgeBound: _describe_context,
        KnowledgeServed: _describe_context,
        ContextCompacted: _describe_context,
        WorkspaceAttached: _describe_workspace,
        WorkspaceSearched: _describe_workspace,
        WorkspaceReleased: _describe_workspace,
        NamespaceForgotten: _erased,
        NamespaceErased: _crypto_erased,
        ErasedPayload: _erased_payload,
    },
    # Their type says it all.
    ignores=(SessionSealed, TurnCompleted),
)
"""The summary of each event class."""
