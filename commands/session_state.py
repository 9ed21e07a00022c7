"""What a session stream says: folded from its events (the source of truth).

A session resumed in another process, or after a crash, rebuilds this from the ledger and
so knows which turns were observed, which extractions are pending, its explicit commands,
its turns and snapshots, its admissions, and whether it was reconciled.
"""

from __future__ import annotations

from uuid import UUID

import msgspec

from memory_ledger.ledger.events import (
    AdmissionRevoked,
    CandidateExtracted,
    CandidateRejected,
    ExplicitCommandApplied,
    ExtractionAbandoned,
    ExtractionCompleted,
    LedgerEvent,
    MemoryAdmitted,
    MemoryUsed,
    ReconciliationReport,
    SessionOpened,
    SessionReconciled,
    SessionSealed,
    SnapshotPrepared,
    TranscriptObserved,
    TurnBegan,
    TurnCompleted,
)

__all__ = ["Admission", "SessionState"]


class Admission(msgspec.Struct, kw_only=True):
    """One memory revision admitted into a turn, and whether it was revoked."""

    memory_id: UUID
    revision: int
    revoked: bool = False


class SessionState(msgspec.Struct, kw_only=True):
    """The fold of one session stream."""

    version: int = 0
    opened: SessionOpened | None = None
    observed: dict[int, TranscriptObserved] = msgspec.field(default_factory=dict)
    extracted: set[int] = msgspec.field(default_factory=set)
    abandoned: set[int] = msgspec.field(default_factory=set)
    candidates: list[CandidateExtracted] = msgspec.field(default_factory=list)
    rejected: list[CandidateRejected] = msgspec.field(default_factory=list)
    commands: list[ExplicitCommandApplied] = msgspec.field(default_factory=list)
    generation: int = 0
    current_turn: int | None = None
    prepared: SnapshotPrepared | None = None
    frozen: dict[int, TurnBegan] = msgspec.field(default_factory=dict)
    snapshots: dict[UUID, SnapshotPrepared] = msgspec.field(default_factory=dict)
    admissions: dict[tuple[int, UUID], Admission] = msgspec.field(default_factory=dict)
    uses: list[MemoryUsed] = msgspec.field(default_factory=list)
    completed: set[int] = msgspec.field(default_factory=set)
    sealed: bool = False
    report: ReconciliationReport | None = None
    observed_positions: dict[int, int] = msgspec.field(default_factory=dict)
    """Ledger position of each turn's transcript (its evidence); 0 when not known yet."""
    command_positions: dict[UUID, int] = msgspec.field(default_factory=dict)
    """Ledger position of each explicit command; 0 when not known yet."""

    def apply(self, event: LedgerEvent, position: int = 0) -> None:
        """Fold one event of the session stream (``position``: its ledger position, 0 when
        the caller does not know it yet)."""
        self.version = event.originator_version
        if isinstance(event, SessionOpened):
            self.opened = event
        elif isinstance(event, TranscriptObserved):
            self.observed[event.turn_id] = event
            self.observed_positions[event.turn_id] = position
        elif isinstance(event, CandidateExtracted):
            self.candidates.append(event)
        elif isinstance(event, CandidateRejected):
            self.rejected.append(event)
        elif isinstance(event, ExtractionCompleted):
            self.extracted.add(event.turn_id)
            self.abandoned.discard(event.turn_id)
        elif isinstance(event, ExtractionAbandoned):
            self.abandoned.add(event.turn_id)
        elif isinstance(event, ExplicitCommandApplied):
            self.commands.append(event)
            self.command_positions[event.command_id] = position
        elif isinstance(event, SnapshotPrepared):
            self.prepared = event
            self.snapshots[event.snapshot_id] = event
        elif isinstance(event, TurnBegan):
            self.generation = max(self.generation, event.generation)
            self.current_turn = event.turn_id
            self.frozen[event.turn_id] = event
        elif isinstance(event, MemoryAdmitted):
            self.admissions[(event.turn_id, event.memory_id)] = Admission(
                memory_id=event.memory_id, revision=event.revision
            )
        elif isinstance(event, AdmissionRevoked):
            admission = self.admissions.get((event.turn_id, event.memory_id))
            if admission is not None and admission.revision == event.revision:
                admission.revoked = True
        elif isinstance(event, MemoryUsed):
            self.uses.append(event)
        elif isinstance(event, TurnCompleted):
            self.completed.add(event.turn_id)
        elif isinstance(event, SessionSealed):
            self.sealed = True
        elif isinstance(event, SessionReconciled):
            self.report = event.report

    def evidence_position(self, entry: CandidateExtracted | ExplicitCommandApplied) -> int | None:
        """The position of what ``entry`` rests on: a candidate's turn transcript, or the
        command itself; None when unknown (commands.reconcile treats it as old)."""
        if isinstance(entry, CandidateExtracted):
            position = self.observed_positions.get(entry.turn_id, 0)
        else:
            position = self.command_positions.get(entry.command_id, 0)
        return position or None

    def pending_extractions(self) -> list[int]:
        """Turns whose evidence is recorded but whose extraction outcome is not."""
        return sorted(t for t in self.observed if t not in self.extracted)

    def frozen_snapshot(self, turn_id: int) -> SnapshotPrepared | None:
        """The snapshot turn ``turn_id`` froze at ``begin_turn`` (None if none or empty)."""
        began = self.frozen.get(turn_id)
        if began is None or began.snapshot_id is None:
            return None
        return self.snapshots.get(began.snapshot_id)
