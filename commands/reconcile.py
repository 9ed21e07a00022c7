"""Reconciliation of a session's candidates into canonical memory (``finish()``).

A pure function of its inputs (the candidates, the current state of the memory streams they
address, and the command's ``recorded_at``): no wall clock, no randomness, so a replay plans
the same events. Rules (DESIGN.md section 5):

- a candidate's memory id is uuid5(namespace, normalized statement) (``ledger.ids``);
- an exact normalized duplicate of an active memory reinforces it (MemoryReinforced:
  importance raised to the maximum, tags and evidence merged);
- otherwise policy ``auto`` activates it (MemoryActivated, decision ``auto``); policy
  ``manual`` leaves it a candidate;
- a null predicate never matches anything; only exact normalized duplicates merge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from uuid import UUID

import msgspec

from ledger.events import (
    ActivationPolicy,
    CandidateExtracted,
    LedgerEvent,
    MemoryActivated,
    MemoryReinforced,
    ReconciliationReport,
    SessionReconciled,
    SessionSealed,
)
from ledger.ids import Namespace, memory_id, normalize_statement

__all__ = ["MemoryStreamState", "ReconciliationPlan", "fold_memory_stream", "plan_reconciliation"]


class MemoryStreamState(msgspec.Struct, kw_only=True):
    """The state of one memory stream that reconciliation needs."""

    version: int
    active: bool
    importance: float
    tags: tuple[str, ...]
    evidence: tuple[str, ...]


def fold_memory_stream(events: Sequence[LedgerEvent]) -> MemoryStreamState | None:
    """Fold a memory stream's events (in version order); None for an empty stream."""
    state: MemoryStreamState | None = None
    for event in events:
        if isinstance(event, MemoryActivated):
            state = MemoryStreamState(
                version=event.originator_version,
                active=True,
                importance=event.item.importance,
                tags=event.item.tags,
                evidence=event.item.evidence,
            )
        elif state is not None:
            state.version = event.originator_version
            if isinstance(event, MemoryReinforced):
                state.importance = event.importance
                state.tags = event.tags
                state.evidence = event.evidence
    return state


class ReconciliationPlan(msgspec.Struct, frozen=True):
    """The events one ``finish()`` appends (in one transaction) and its report."""

    events: tuple[LedgerEvent, ...]
    report: ReconciliationReport


def _merge(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*first, *second)))


def plan_reconciliation(
    *,
    namespace: Namespace,
    session_stream: UUID,
    session_id: str,
    session_version: int,
    candidates: Sequence[CandidateExtracted],
    load_memory: Callable[[UUID], MemoryStreamState | None],
    policy: ActivationPolicy,
    recorded_at: datetime,
) -> ReconciliationPlan:
    """Plan the events of ``finish()``.

    :param session_version: the session stream's current version.
    :param candidates: the session's CandidateExtracted events, in ledger order.
    :param load_memory: reads a memory stream's current state (None when it has none).
    :returns: SessionSealed, the memory events, then SessionReconciled with the report.
    """
    events: list[LedgerEvent] = [
        SessionSealed(
            originator_id=session_stream,
            originator_version=session_version + 1,
            recorded_at=recorded_at,
            namespace=namespace,
            session_id=session_id,
        )
    ]
    states: dict[UUID, MemoryStreamState | None] = {}
    activated: list[UUID] = []
    reinforced: list[UUID] = []
    left = 0
    for candidate in candidates:
        normalized = normalize_statement(candidate.item.statement)
        mid = memory_id(namespace, normalized)
        if mid not in states:
            states[mid] = load_memory(mid)
        state = states[mid]
        if state is not None and state.active:
            state.version += 1
            state.importance = max(state.importance, candidate.item.importance)
            state.tags = _merge(state.tags, candidate.item.tags)
            state.evidence = _merge(state.evidence, candidate.item.evidence)
            events.append(
                MemoryReinforced(
                    originator_id=mid,
                    originator_version=state.version,
                    recorded_at=recorded_at,
                    namespace=namespace,
                    session_id=session_id,
                    turn_id=candidate.turn_id,
                    candidate_id=candidate.candidate_id,
                    importance=state.importance,
                    tags=state.tags,
                    evidence=state.evidence,
                )
            )
            reinforced.append(mid)
        elif policy == "auto":
            version = (state.version if state is not None else 0) + 1
            events.append(
                MemoryActivated(
                    originator_id=mid,
                    originator_version=version,
                    recorded_at=recorded_at,
                    namespace=namespace,
                    session_id=session_id,
                    turn_id=candidate.turn_id,
                    candidate_id=candidate.candidate_id,
                    decision="auto",
                    item=candidate.item,
                    normalized=normalized,
                    occurred_at=candidate.occurred_at,
                )
            )
            states[mid] = MemoryStreamState(
                version=version,
                active=True,
                importance=candidate.item.importance,
                tags=candidate.item.tags,
                evidence=candidate.item.evidence,
            )
            activated.append(mid)
        else:
            left += 1
    report = ReconciliationReport(
        session_id=session_id,
        candidates=len(candidates),
        activated=tuple(activated),
        reinforced=tuple(reinforced),
        left_as_candidates=left,
    )
    events.append(
        SessionReconciled(
            originator_id=session_stream,
            originator_version=session_version + 2,
            recorded_at=recorded_at,
            namespace=namespace,
            session_id=session_id,
            report=report,
        )
    )
    return ReconciliationPlan(events=tuple(events), report=report)
