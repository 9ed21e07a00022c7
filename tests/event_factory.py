"""Builds consistent raw event sequences (stream versions in order) for projection tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from memory_ledger.ledger.events import (
    AdmissionRevoked,
    CandidateExtracted,
    CandidateRejected,
    ExtractedItem,
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
    RecalledItem,
    RecallServed,
    SnapshotItem,
    SnapshotPrepared,
    TranscriptObserved,
    TurnBegan,
)
from memory_ledger.ledger.ids import (
    Namespace,
    candidate_id,
    memory_id,
    normalize_statement,
    session_stream_id,
)

EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


def item(
    statement: str, subject: str | None = "Alice", predicate: str | None = None
) -> ExtractedItem:
    return ExtractedItem(
        kind="semantic",
        subject=subject,
        predicate=predicate,
        value=None,
        statement=statement,
        source="fact",
        scope="user",
        reason="test",
        importance=0.8,
        confidence=0.9,
        tags=("t",),
        evidence=("e1",),
    )


@dataclass
class EventFactory:
    """Appends well-formed events to an in-memory list, tracking stream versions."""

    namespace: Namespace = field(default_factory=lambda: Namespace("t", "p", "s"))
    events: list[LedgerEvent] = field(default_factory=list)
    versions: dict[UUID, int] = field(default_factory=dict)
    clock: int = 0

    def _next(self, stream: UUID) -> int:
        self.versions[stream] = self.versions.get(stream, 0) + 1
        return self.versions[stream]

    def _base(self, stream: UUID) -> dict[str, Any]:
        self.clock += 1
        return {
            "originator_id": stream,
            "originator_version": self._next(stream),
            "recorded_at": EPOCH + timedelta(seconds=self.clock),
            "namespace": self.namespace,
        }

    def session(self, session_id: str) -> UUID:
        return session_stream_id(self.namespace, session_id)

    def turn(self, session_id: str, turn_id: int, statements: list[str], rejected: int = 0) -> None:
        stream = self.session(session_id)
        self.events.append(
            TranscriptObserved(
                **self._base(stream),
                session_id=session_id,
                turn_id=turn_id,
                transcript=f"turn {turn_id}",
                digest=f"d{turn_id}",
                occurred_at=EPOCH + timedelta(days=turn_id),
            )
        )
        for index, statement in enumerate(statements):
            self.events.append(
                CandidateExtracted(
                    **self._base(stream),
                    session_id=session_id,
                    turn_id=turn_id,
                    candidate_id=candidate_id(stream, turn_id, index),
                    index=index,
                    extractor_id="x",
                    item=item(statement),
                    occurred_at=None,
                )
            )
        for extra in range(rejected):
            index = len(statements) + extra
            self.events.append(
                CandidateRejected(
                    **self._base(stream),
                    session_id=session_id,
                    turn_id=turn_id,
                    candidate_id=candidate_id(stream, turn_id, index),
                    index=index,
                    extractor_id="x",
                    reason_code="schema_invalid",
                    detail="d",
                )
            )
        self.events.append(
            ExtractionCompleted(
                **self._base(stream),
                session_id=session_id,
                turn_id=turn_id,
                extractor_id="x",
                extracted=len(statements),
                rejected=rejected,
            )
        )

    def activate(self, session_id: str, turn_id: int, index: int, statement: str) -> UUID:
        normalized = normalize_statement(statement)
        mid = memory_id(self.namespace, normalized)
        stream = self.session(session_id)
        cls = MemoryReinforced if mid in self.versions else MemoryActivated
        common = {
            **self._base(mid),
            "session_id": session_id,
            "turn_id": turn_id,
            "candidate_id": candidate_id(stream, turn_id, index),
        }
        if cls is MemoryActivated:
            self.events.append(
                MemoryActivated(
                    **common,
                    decision="auto",
                    item=item(statement),
                    normalized=normalized,
                    occurred_at=EPOCH,
                )
            )
        else:
            self.events.append(
                MemoryReinforced(**common, importance=0.9, tags=("t", "u"), evidence=("e1",))
            )
        return mid

    def memory_event(self, kind: str, mid: UUID, other: UUID | None = None) -> None:
        base = {**self._base(mid), "session_id": "s"}
        if kind == "supersede":
            assert other is not None
            self.events.append(
                MemorySuperseded(**base, turn_id=1, superseded_by=other, cause="declared")
            )
        elif kind == "conflict":
            assert other is not None
            self.events.append(MemoryConflictMarked(**base, turn_id=1, conflicts_with=other))
        elif kind == "pin":
            self.events.append(MemoryPinned(**base, turn_id=1, command_id=mid))
        elif kind == "forget":
            self.events.append(MemoryForgotten(**base, turn_id=1, command_id=mid))
        elif kind == "prune":
            self.events.append(MemoryPruned(**base, rule="stale"))

    def turn_flow(self, session_id: str, turn_id: int, mids: list[UUID]) -> None:
        stream = self.session(session_id)
        snapshot = UUID(int=turn_id + 1)
        self.events.append(
            SnapshotPrepared(
                **self._base(stream),
                session_id=session_id,
                turn_id=turn_id,
                generation=turn_id,
                snapshot_id=snapshot,
                query="q",
                items=tuple(
                    SnapshotItem(memory_id=m, revision=1, statement="s", score=1.0) for m in mids
                ),
            )
        )
        self.events.append(
            TurnBegan(
                **self._base(stream),
                session_id=session_id,
                turn_id=turn_id,
                generation=turn_id,
                snapshot_id=snapshot,
            )
        )
        recall_stream = UUID(int=10_000 + self.clock)
        self.events.append(
            RecallServed(
                **self._base(recall_stream),
                session_id=session_id,
                turn_id=turn_id,
                query="q",
                path="snapshot",
                results=tuple(
                    RecalledItem(memory_id=m, revision=1, rank=r, score=1.0)
                    for r, m in enumerate(mids, start=1)
                ),
            )
        )
        for m in mids:
            self.events.append(
                MemoryAdmitted(
                    **self._base(stream),
                    session_id=session_id,
                    turn_id=turn_id,
                    memory_id=m,
                    revision=1,
                    estimated_tokens=12,
                )
            )
        if mids:
            self.events.append(
                AdmissionRevoked(
                    **self._base(stream),
                    session_id=session_id,
                    turn_id=turn_id,
                    memory_id=mids[-1],
                    revision=1,
                    reason="stale_revision",
                )
            )
            self.events.append(
                MemoryUsed(
                    **self._base(stream),
                    session_id=session_id,
                    turn_id=turn_id,
                    memory_id=mids[0],
                    revision=1,
                )
            )
