"""Reconciliation of a session into canonical memory (``finish()`` and ``activate_candidate``).

A pure function of its inputs (the session's candidates and explicit commands, the state of
the memory streams they address, what canonical memory holds under a subject and predicate,
and the command's ``recorded_at``): no wall clock, no randomness, so a replay plans the same
events. Rules (DESIGN.md section 5, issue "session engine"):

- a candidate's memory id is uuid5(namespace, normalized statement) (``ledger.ids``); a
  candidate already recorded in its memory stream is skipped (it was activated by hand);
- an exact normalized duplicate of a retrievable memory reinforces it (importance raised to
  the maximum, tags and evidence merged);
- otherwise policy ``auto`` activates it; ``manual`` leaves it a candidate (model confidence
  never activates anything in manual mode);
- on activation, a memory with the same (subject, predicate) and another statement is
  superseded (the newest value wins; the old item stays as history); a null predicate never
  matches anything; a fact under another predicate supersedes nothing; every memory
  named in ``supersedes`` is superseded; each one named in ``conflicts_with`` is marked on
  both items, both stay retrievable;
- explicit commands, in ledger order with the candidates: ``remember`` activates (decision
  manual), ``correct`` activates and supersedes its target, ``forget`` forgets its target,
  ``pin`` pins it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

from memory_ledger.ledger.dispatch import EventDispatch
from memory_ledger.ledger.events import (
    ActivationDecision,
    ActivationPolicy,
    AdmissionRevoked,
    CandidateExtracted,
    CandidateRejected,
    ExplicitCommandApplied,
    ExtractedItem,
    ExtractionAbandoned,
    ExtractionCompleted,
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
    PendingExtraction,
    RecallServed,
    ReconciliationReport,
    SessionOpened,
    SessionReconciled,
    SessionSealed,
    SnapshotPrepared,
    TranscriptObserved,
    TurnBegan,
    TurnCompleted,
)
from memory_ledger.ledger.ids import Namespace, memory_id, normalize_statement

__all__ = [
    "MemoryStreamState",
    "ReconciliationPlan",
    "Reconciler",
    "fold_memory_stream",
    "subject_predicate_key",
]

Status = Literal["active", "conflicted", "superseded", "forgotten", "pruned"]
RETRIEVABLE = frozenset({"active", "conflicted"})


def subject_predicate_key(subject: str | None, predicate: str | None) -> tuple[str, str] | None:
    """The (subject, predicate) match key, or None when either is null or blank."""
    if not subject or not predicate or not subject.strip() or not predicate.strip():
        return None
    return subject.strip().lower(), predicate.strip().lower()


class MemoryStreamState(msgspec.Struct, kw_only=True):
    """The state of one memory stream that reconciliation needs."""

    version: int
    status: Status
    importance: float
    tags: tuple[str, ...]
    evidence: tuple[str, ...]
    key: tuple[str, str] | None
    candidate_ids: set[UUID] = msgspec.field(default_factory=set)
    pinned: bool = False

    @property
    def retrievable(self) -> bool:
        return self.status in RETRIEVABLE


def fold_memory_stream(events: Sequence[LedgerEvent]) -> MemoryStreamState | None:
    """Fold a memory stream's events (in version order); None for an empty stream."""
    state: MemoryStreamState | None = None
    for event in events:
        fold = _MEMORY_FOLD[type(event)]
        if fold is not None:
            state = fold(state, event)
    return state


_Fold = Callable[[MemoryStreamState | None, Any], MemoryStreamState | None]


def _activated(previous: MemoryStreamState | None, event: MemoryActivated) -> MemoryStreamState:
    state = MemoryStreamState(
        version=event.originator_version,
        status="active",
        importance=event.item.importance,
        tags=event.item.tags,
        evidence=event.item.evidence,
        key=subject_predicate_key(event.item.subject, event.item.predicate),
        candidate_ids={event.candidate_id},
    )
    if previous is not None:
        state.candidate_ids |= previous.candidate_ids
        state.pinned = previous.pinned
    return state


def _revision(change: Callable[[MemoryStreamState, Any], None]) -> _Fold:
    """A fold step for an event that revises an activated memory (none before activation)."""

    def fold(state: MemoryStreamState | None, event: LedgerEvent) -> MemoryStreamState | None:
        if state is not None:
            state.version = event.originator_version
            change(state, event)
        return state

    return fold


def _reinforced(state: MemoryStreamState, event: MemoryReinforced) -> None:
    state.importance = event.importance
    state.tags = event.tags
    state.evidence = event.evidence
    state.candidate_ids.add(event.candidate_id)


def _status(status: Status) -> Callable[[MemoryStreamState, LedgerEvent], None]:
    def change(state: MemoryStreamState, event: LedgerEvent) -> None:
        state.status = status

    return change


def _conflict(state: MemoryStreamState, event: MemoryConflictMarked) -> None:
    if state.status == "active":
        state.status = "conflicted"


def _pinned(state: MemoryStreamState, event: MemoryPinned) -> None:
    state.pinned = True


_MEMORY_FOLD: EventDispatch[_Fold] = EventDispatch(
    "fold_memory_stream: state of one memory stream",
    {
        MemoryActivated: _activated,
        MemoryReinforced: _revision(_reinforced),
        MemorySuperseded: _revision(_status("superseded")),
        MemoryForgotten: _revision(_status("forgotten")),
        MemoryPruned: _revision(_status("pruned")),
        MemoryConflictMarked: _revision(_conflict),
        MemoryPinned: _revision(_pinned),
    },
    # Events of session and recall streams, never of a memory stream.
    ignores=(
        SessionOpened,
        TranscriptObserved,
        CandidateExtracted,
        CandidateRejected,
        ExtractionCompleted,
        ExtractionAbandoned,
        SessionSealed,
        SessionReconciled,
        ExplicitCommandApplied,
        SnapshotPrepared,
        TurnBegan,
        RecallServed,
        MemoryAdmitted,
        AdmissionRevoked,
        MemoryUsed,
        TurnCompleted,
    ),
)
"""How each event of a memory stream changes :class:`MemoryStreamState`."""


class ReconciliationPlan(msgspec.Struct, frozen=True):
    """The events one command appends (in one transaction) and its report."""

    events: tuple[LedgerEvent, ...]
    report: ReconciliationReport


def _merge(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*first, *second)))


class Reconciler:
    """Plans memory events for candidates and commands of one session.

    :param load_memory: reads a memory stream's current state from the ledger (None if none).
    :param same_key: ids of canonical memories whose (subject, predicate) key is the given
        one (the projection, caught up before planning; every id is re-checked against the
        ledger through ``load_memory``).
    """

    def __init__(
        self,
        *,
        namespace: Namespace,
        session_id: str,
        load_memory: Callable[[UUID], MemoryStreamState | None],
        same_key: Callable[[tuple[str, str]], Sequence[UUID]],
        recorded_at: datetime,
    ) -> None:
        self.namespace = namespace
        self.session_id = session_id
        self._load = load_memory
        self._same_key = same_key
        self.recorded_at = recorded_at
        self.events: list[LedgerEvent] = []
        self.states: dict[UUID, MemoryStreamState | None] = {}
        self.keys: dict[tuple[str, str], set[UUID]] = {}
        self.activated: list[UUID] = []
        self.reinforced: list[UUID] = []
        self.superseded: list[UUID] = []
        self.conflicts: list[UUID] = []
        self.forgotten: list[UUID] = []
        self.pinned: list[UUID] = []
        self.left = 0

    # State ------------------------------------------------------------------------------

    def state(self, mid: UUID) -> MemoryStreamState | None:
        if mid not in self.states:
            self.states[mid] = self._load(mid)
        return self.states[mid]

    def _holders(self, key: tuple[str, str]) -> set[UUID]:
        if key not in self.keys:
            self.keys[key] = set(self._same_key(key))
        return self.keys[key]

    def _base(self, mid: UUID) -> dict[str, object]:
        state = self.state(mid)
        assert state is not None
        state.version += 1
        return {
            "originator_id": mid,
            "originator_version": state.version,
            "recorded_at": self.recorded_at,
            "namespace": self.namespace,
            "session_id": self.session_id,
        }

    # Outcomes ---------------------------------------------------------------------------

    def candidate(self, candidate: CandidateExtracted, policy: ActivationPolicy) -> None:
        """Reconcile one extracted candidate under ``policy``."""
        mid = memory_id(self.namespace, normalize_statement(candidate.item.statement))
        state = self.state(mid)
        if state is not None and candidate.candidate_id in state.candidate_ids:
            return
        if state is not None and state.retrievable:
            self.reinforce(mid, candidate.turn_id, candidate.candidate_id, candidate.item)
        elif policy == "auto":
            self.activate(
                candidate.item,
                turn_id=candidate.turn_id,
                source_id=candidate.candidate_id,
                decision="auto",
                occurred_at=candidate.occurred_at,
            )
        else:
            self.left += 1

    def reinforce(self, mid: UUID, turn_id: int, source_id: UUID, item: ExtractedItem) -> None:
        state = self.state(mid)
        assert state is not None
        importance = max(state.importance, item.importance)
        tags = _merge(state.tags, item.tags)
        evidence = _merge(state.evidence, item.evidence)
        self.events.append(
            MemoryReinforced(
                **self._base(mid),  # type: ignore[arg-type]
                turn_id=turn_id,
                candidate_id=source_id,
                importance=importance,
                tags=tags,
                evidence=evidence,
            )
        )
        state.importance, state.tags, state.evidence = importance, tags, evidence
        state.candidate_ids.add(source_id)
        self.reinforced.append(mid)

    def activate(
        self,
        item: ExtractedItem,
        *,
        turn_id: int,
        source_id: UUID,
        decision: ActivationDecision,
        occurred_at: datetime | None,
        decision_evidence: tuple[str, ...] = (),
        corrects: UUID | None = None,
    ) -> UUID:
        """Activate ``item`` (or reinforce its exact duplicate); supersede and mark conflicts."""
        normalized = normalize_statement(item.statement)
        mid = memory_id(self.namespace, normalized)
        state = self.state(mid)
        if state is not None and state.retrievable:
            self.reinforce(mid, turn_id, source_id, item)
            return mid
        version = (state.version if state is not None else 0) + 1
        self.events.append(
            MemoryActivated(
                originator_id=mid,
                originator_version=version,
                recorded_at=self.recorded_at,
                namespace=self.namespace,
                session_id=self.session_id,
                turn_id=turn_id,
                candidate_id=source_id,
                decision=decision,
                item=item,
                normalized=normalized,
                occurred_at=occurred_at,
                decision_evidence=decision_evidence,
            )
        )
        key = subject_predicate_key(item.subject, item.predicate)
        new_state = MemoryStreamState(
            version=version,
            status="active",
            importance=item.importance,
            tags=item.tags,
            evidence=item.evidence,
            key=key,
            candidate_ids={source_id},
            pinned=state.pinned if state is not None else False,
        )
        if state is not None:
            new_state.candidate_ids |= state.candidate_ids
        self.states[mid] = new_state
        self.activated.append(mid)
        if corrects is not None and corrects != mid:
            self.supersede(corrects, mid, turn_id, "correction")
        for raw in item.supersedes:
            try:
                declared = UUID(raw)
            except ValueError:
                continue
            if declared != mid:
                self.supersede(declared, mid, turn_id, "declared")
        if key is not None:
            holders = self._holders(key)
            for other in sorted(holders - {mid}):
                self.supersede(other, mid, turn_id, "same_subject_predicate")
            holders.add(mid)
        for raw in item.conflicts_with:
            try:
                other_id = UUID(raw)
            except ValueError:
                continue
            self.conflict(mid, other_id, turn_id)
        return mid

    def supersede(
        self,
        old: UUID,
        new: UUID,
        turn_id: int,
        cause: Literal["same_subject_predicate", "declared", "correction"],
    ) -> None:
        state = self.state(old)
        if state is None or not state.retrievable:
            return
        self.events.append(
            MemorySuperseded(
                **self._base(old),  # type: ignore[arg-type]
                turn_id=turn_id,
                superseded_by=new,
                cause=cause,
            )
        )
        state.status = "superseded"
        if state.key is not None:
            self._holders(state.key).discard(old)
        self.superseded.append(old)

    def conflict(self, mid: UUID, other: UUID, turn_id: int) -> None:
        other_state = self.state(other)
        if other_state is None or not other_state.retrievable or other == mid:
            return
        for this, that in ((mid, other), (other, mid)):
            state = self.state(this)
            assert state is not None
            self.events.append(
                MemoryConflictMarked(
                    **self._base(this),  # type: ignore[arg-type]
                    turn_id=turn_id,
                    conflicts_with=that,
                )
            )
            if state.status == "active":
                state.status = "conflicted"
        self.conflicts.extend((mid, other))

    def command(self, command: ExplicitCommandApplied) -> None:
        """Reconcile one explicit command (the user's word: decision ``manual``)."""
        if command.intent in ("remember", "correct") and command.item is not None:
            self.activate(
                command.item,
                turn_id=command.turn_id,
                source_id=command.command_id,
                decision="manual",
                occurred_at=None,
                decision_evidence=(f"explicit:{command.intent}",),
                corrects=command.target if command.intent == "correct" else None,
            )
            return
        if command.target is None:
            return
        state = self.state(command.target)
        if state is None or not state.retrievable:
            return
        if command.intent == "forget":
            self.events.append(
                MemoryForgotten(
                    **self._base(command.target),  # type: ignore[arg-type]
                    turn_id=command.turn_id,
                    command_id=command.command_id,
                )
            )
            state.status = "forgotten"
            if state.key is not None:
                self._holders(state.key).discard(command.target)
            self.forgotten.append(command.target)
        elif command.intent == "pin" and not state.pinned:
            self.events.append(
                MemoryPinned(
                    **self._base(command.target),  # type: ignore[arg-type]
                    turn_id=command.turn_id,
                    command_id=command.command_id,
                )
            )
            state.pinned = True
            self.pinned.append(command.target)

    def report(self, *, candidates: int, commands: int) -> ReconciliationReport:
        return ReconciliationReport(
            session_id=self.session_id,
            candidates=candidates,
            activated=tuple(self.activated),
            reinforced=tuple(self.reinforced),
            superseded=tuple(self.superseded),
            conflicts=tuple(self.conflicts),
            forgotten=tuple(self.forgotten),
            pinned=tuple(self.pinned),
            commands=commands,
            left_as_candidates=self.left,
        )


def plan_finish(
    reconciler: Reconciler,
    *,
    session_stream: UUID,
    session_version: int,
    items: Sequence[CandidateExtracted | ExplicitCommandApplied],
    policy: ActivationPolicy,
    pending: Sequence[PendingExtraction] = (),
) -> ReconciliationPlan:
    """The events of ``finish()``: SessionSealed, the memory events in ledger order of the
    session's candidates and commands, then SessionReconciled with the report (which names
    the turns still ``pending`` extraction)."""
    ns, sid, at = reconciler.namespace, reconciler.session_id, reconciler.recorded_at
    sealed = SessionSealed(
        originator_id=session_stream,
        originator_version=session_version + 1,
        recorded_at=at,
        namespace=ns,
        session_id=sid,
    )
    candidates = commands = 0
    for entry in sorted(items, key=lambda e: e.originator_version):
        if isinstance(entry, CandidateExtracted):
            candidates += 1
            reconciler.candidate(entry, policy)
        else:
            commands += 1
            reconciler.command(entry)
    report = reconciler.report(candidates=candidates, commands=commands)
    if pending:
        report = msgspec.structs.replace(report, pending_extractions=tuple(pending))
    reconciled = SessionReconciled(
        originator_id=session_stream,
        originator_version=session_version + 2,
        recorded_at=at,
        namespace=ns,
        session_id=sid,
        report=report,
    )
    return ReconciliationPlan(events=(sealed, *reconciler.events, reconciled), report=report)
