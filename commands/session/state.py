"""What a session stream says: folded from its events (the source of truth).

A session resumed in another process, or after a crash, rebuilds this from the ledger and
so knows which turns were observed, which extractions are pending, its explicit commands,
its turns and snapshots, its admissions, whether it was reconciled, the knowledge binding it
started with, its context compactions and the workspace it last attached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import msgspec

from memory_ledger.ledger.dispatch import EventDispatch
from memory_ledger.ledger.events import (
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
    knowledge: KnowledgeBound | None = None
    compactions: list[ContextCompacted] = msgspec.field(default_factory=list)
    workspace: WorkspaceAttached | None = None
    observed_positions: dict[int, int] = msgspec.field(default_factory=dict)
    """Ledger position of each turn's transcript (its evidence); 0 when not known yet."""
    command_positions: dict[UUID, int] = msgspec.field(default_factory=dict)
    """Ledger position of each explicit command; 0 when not known yet."""

    def apply(self, event: LedgerEvent, position: int = 0) -> None:
        """Fold one event of the session stream (``position``: its ledger position, 0 when
        the caller does not know it yet)."""
        self.version = event.originator_version
        handler = _FOLD[type(event)]
        if handler is not None:
            handler(self, event)
        if position and type(event) is TranscriptObserved:
            self.observed_positions[event.turn_id] = position
        elif position and isinstance(event, ExplicitCommandApplied):
            self.command_positions[event.command_id] = position

    def evidence_position(self, entry: CandidateExtracted | ExplicitCommandApplied) -> int | None:
        """The position of what ``entry`` rests on: a candidate's turn transcript, or the
        command itself; None when unknown (commands.canonical.reconcile treats it as old)."""
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


def _opened(state: SessionState, event: SessionOpened) -> None:
    state.opened = event


def _observed(state: SessionState, event: TranscriptObserved) -> None:
    state.observed[event.turn_id] = event


def _candidate(state: SessionState, event: CandidateExtracted) -> None:
    state.candidates.append(event)


def _rejected(state: SessionState, event: CandidateRejected) -> None:
    state.rejected.append(event)


def _extracted(state: SessionState, event: ExtractionCompleted) -> None:
    state.extracted.add(event.turn_id)
    state.abandoned.discard(event.turn_id)


def _abandoned(state: SessionState, event: ExtractionAbandoned) -> None:
    state.abandoned.add(event.turn_id)


def _command(state: SessionState, event: ExplicitCommandApplied) -> None:
    state.commands.append(event)


def _direct(state: SessionState, event: DirectCommandApplied) -> None:
    """A direct command's one record: what its short session's SessionOpened said (on the
    first), the command, and on the last the report (sealed and reconciled): a direct
    session is never read as open with pending commands."""
    if state.opened is None:
        state.opened = SessionOpened(
            originator_id=event.originator_id,
            originator_version=event.originator_version,
            recorded_at=event.recorded_at,
            namespace=event.namespace,
            session_id=event.session_id,
            activation_policy=event.activation_policy,
            extractor_id=event.extractor_id,
        )
    state.commands.append(event)
    if event.report is not None:
        state.sealed = True
        state.report = event.report


def _prepared(state: SessionState, event: SnapshotPrepared) -> None:
    state.prepared = event
    state.snapshots[event.snapshot_id] = event


def _began(state: SessionState, event: TurnBegan) -> None:
    state.generation = max(state.generation, event.generation)
    state.current_turn = event.turn_id
    state.frozen[event.turn_id] = event


def _admitted(state: SessionState, event: MemoryAdmitted) -> None:
    state.admissions[(event.turn_id, event.memory_id)] = Admission(
        memory_id=event.memory_id, revision=event.revision
    )


def _revoked(state: SessionState, event: AdmissionRevoked) -> None:
    admission = state.admissions.get((event.turn_id, event.memory_id))
    if admission is not None and admission.revision == event.revision:
        admission.revoked = True


def _used(state: SessionState, event: MemoryUsed) -> None:
    state.uses.append(event)


def _completed(state: SessionState, event: TurnCompleted) -> None:
    state.completed.add(event.turn_id)


def _sealed(state: SessionState, event: SessionSealed) -> None:
    state.sealed = True


def _reconciled(state: SessionState, event: SessionReconciled) -> None:
    state.report = event.report


def _bound(state: SessionState, event: KnowledgeBound) -> None:
    state.knowledge = event


def _compacted(state: SessionState, event: ContextCompacted) -> None:
    state.compactions.append(event)


def _attached(state: SessionState, event: WorkspaceAttached) -> None:
    state.workspace = event


_FOLD: EventDispatch[Callable[[SessionState, Any], None]] = EventDispatch(
    "session state: fold of a session stream",
    {
        SessionOpened: _opened,
        TranscriptObserved: _observed,
        CandidateExtracted: _candidate,
        CandidateRejected: _rejected,
        ExtractionCompleted: _extracted,
        ExtractionAbandoned: _abandoned,
        ExplicitCommandApplied: _command,
        DirectCommandApplied: _direct,
        SnapshotPrepared: _prepared,
        TurnBegan: _began,
        MemoryAdmitted: _admitted,
        AdmissionRevoked: _revoked,
        MemoryUsed: _used,
        TurnCompleted: _completed,
        SessionSealed: _sealed,
        SessionReconciled: _reconciled,
        KnowledgeBound: _bound,
        ContextCompacted: _compacted,
        WorkspaceAttached: _attached,
    },
    # Events of memory streams and recall streams, never of a session stream; erased
    # payloads (writing to an erased namespace is refused: keyring.NamespaceErasedError).
    ignores=(
        NamespaceForgotten,
        NamespaceErased,
        ErasedPayload,
        MemoryActivated,
        MemoryReinforced,
        MemorySuperseded,
        MemoryConflictMarked,
        MemoryPinned,
        MemoryForgotten,
        MemoryPruned,
        RecallServed,
        KnowledgeServed,
        WorkspaceSearched,
        # The session stream's record of a workspace closed: nothing the session reads.
        WorkspaceReleased,
    ),
)
"""How each event of a session stream changes :class:`SessionState`."""
