"""``MemorySession``: the commands of one logical conversation under a namespace.

State is folded from the session's own stream (the source of truth), so a session resumed in
another process, or after a crash, knows which turns were observed, which extractions are
pending, and whether it was reconciled. Every command appends its events in one LMDB write
transaction; a conflicting concurrent append (IntegrityError) refreshes the state and
re-decides, so retries are idempotent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from uuid import UUID

import msgspec
from eventsourcing.persistence import IntegrityError

from commands.errors import ExtractionFailedError, SessionSealedError, TurnConflictError
from commands.extraction import ExtractionRequest, Extractor
from commands.recall import RecallResult
from commands.reconcile import fold_memory_stream, plan_reconciliation
from commands.validation import Rejection, validate_item
from ledger.events import (
    ActivationPolicy,
    CandidateExtracted,
    CandidateRejected,
    ExtractionCompleted,
    LedgerEvent,
    ReconciliationReport,
    SessionOpened,
    SessionReconciled,
    SessionSealed,
    TranscriptObserved,
)
from ledger.ids import Namespace, candidate_id, session_stream_id

if TYPE_CHECKING:
    from commands.engine import MemoryEngine

__all__ = ["MemorySession", "SessionState", "TurnOutcome"]

_MAX_RETRIES = 8


class SessionState(msgspec.Struct, kw_only=True):
    """What the session stream says so far (folded from its events)."""

    version: int = 0
    opened: bool = False
    observed: dict[int, TranscriptObserved] = msgspec.field(default_factory=dict)
    extracted: set[int] = msgspec.field(default_factory=set)
    candidates: list[CandidateExtracted] = msgspec.field(default_factory=list)
    sealed: bool = False
    report: ReconciliationReport | None = None

    def apply(self, event: LedgerEvent) -> None:
        """Fold one session event."""
        self.version = event.originator_version
        if isinstance(event, SessionOpened):
            self.opened = True
        elif isinstance(event, TranscriptObserved):
            self.observed[event.turn_id] = event
        elif isinstance(event, CandidateExtracted):
            self.candidates.append(event)
        elif isinstance(event, ExtractionCompleted):
            self.extracted.add(event.turn_id)
        elif isinstance(event, SessionSealed):
            self.sealed = True
        elif isinstance(event, SessionReconciled):
            self.report = event.report

    def pending_extractions(self) -> list[int]:
        """Turns whose evidence is recorded but whose extraction outcome is not."""
        return sorted(t for t in self.observed if t not in self.extracted)


class TurnOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """Result of ``observe_final_transcript``.

    ``evidence_position``/``extraction_position`` are the ledger positions written (0 when
    that command had nothing to write because it was already recorded).
    """

    turn_id: int
    digest: str
    evidence_position: int
    extraction_position: int
    candidates: int
    rejected: int
    already_observed: bool


def _now() -> datetime:
    return datetime.now(UTC)


class MemorySession:
    """One logical conversation. Obtain from :meth:`MemoryEngine.session`."""

    def __init__(
        self,
        engine: MemoryEngine,
        namespace: Namespace,
        session_id: str,
        *,
        extractor: Extractor,
        activation_policy: ActivationPolicy,
        max_items: int,
        max_input_chars: int,
    ) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            msg = f"session_id must be a non-empty string, got {session_id!r}"
            raise ValueError(msg)
        self.engine = engine
        self.namespace = namespace
        self.session_id = session_id
        self.stream_id: UUID = session_stream_id(namespace, session_id)
        self.extractor = extractor
        self.activation_policy: ActivationPolicy = activation_policy
        self.max_items = max_items
        self.max_input_chars = max_input_chars
        self.state = SessionState()
        self.last_position = 0
        self.refresh()
        if not self.state.opened:
            self._append_once(self._opened_events)

    # State --------------------------------------------------------------------------------

    def refresh(self) -> SessionState:
        """Fold events of the session stream not seen yet (another process may have written)."""
        for event in self.engine.load_stream(self.stream_id, after=self.state.version):
            self.state.apply(event)
        return self.state

    def _append_once(self, plan: Callable[[], list[LedgerEvent]]) -> list[int]:
        """Append the events ``plan()`` decides on; on a concurrent append, refresh and re-plan.

        ``plan`` returns [] when, given the refreshed state, nothing is left to write.
        """
        for _ in range(_MAX_RETRIES):
            events = plan()
            if not events:
                return []
            try:
                positions = self.engine.append(events)
            except IntegrityError:
                self.refresh()
                continue
            for event in events:
                if event.originator_id == self.stream_id:
                    self.state.apply(event)
            self.last_position = positions[-1]
            return positions
        msg = f"session {self.session_id!r}: too many concurrent appends, giving up"
        raise IntegrityError(msg)

    def _opened_events(self) -> list[LedgerEvent]:
        if self.state.opened:
            return []
        return [
            SessionOpened(
                originator_id=self.stream_id,
                originator_version=self.state.version + 1,
                recorded_at=_now(),
                namespace=self.namespace,
                session_id=self.session_id,
                activation_policy=self.activation_policy,
                extractor_id=self.extractor.extractor_id,
            )
        ]

    # Commands -----------------------------------------------------------------------------

    def observe_final_transcript(
        self, turn_id: int, transcript: str, occurred_at: datetime | None = None
    ) -> TurnOutcome:
        """Record a finalized turn (evidence first), then extract and record the outcome.

        Two commands by design (DESIGN.md section 3): TranscriptObserved, then every
        CandidateExtracted/CandidateRejected of the turn with ExtractionCompleted in one
        transaction. Observing the same turn again with the same transcript is a no-op
        (a pending extraction is completed); with a different transcript it is an error.

        :raises TurnConflictError: the turn was observed with a different transcript.
        :raises SessionSealedError: the session was finished.
        :raises ValueError: ``turn_id`` is negative or ``transcript`` is not a string.
        """
        if not isinstance(turn_id, int) or isinstance(turn_id, bool) or turn_id < 0:
            msg = f"turn_id must be a non-negative integer, got {turn_id!r}"
            raise ValueError(msg)
        if not isinstance(transcript, str):
            msg = f"transcript must be a string, got {type(transcript).__name__}"
            raise ValueError(msg)
        if occurred_at is not None and occurred_at.tzinfo is None:
            occurred_at = occurred_at.replace(tzinfo=UTC)
        digest = hashlib.sha256(transcript.encode("utf-8")).hexdigest()
        self.refresh()
        already = turn_id in self.state.observed
        if already and self.state.observed[turn_id].digest != digest:
            msg = (
                f"session {self.session_id!r} turn {turn_id} was observed before with a "
                "different transcript"
            )
            raise TurnConflictError(msg)
        if not already and self.state.sealed:
            msg = f"session {self.session_id!r} is finished; turn {turn_id} is not accepted"
            raise SessionSealedError(msg)

        def evidence() -> list[LedgerEvent]:
            if turn_id in self.state.observed:
                return []
            return [
                TranscriptObserved(
                    originator_id=self.stream_id,
                    originator_version=self.state.version + 1,
                    recorded_at=_now(),
                    namespace=self.namespace,
                    session_id=self.session_id,
                    turn_id=turn_id,
                    transcript=transcript,
                    digest=digest,
                    occurred_at=occurred_at,
                )
            ]

        evidence_positions = self._append_once(evidence)
        observed = self.state.observed[turn_id]
        candidates = rejected = 0
        extraction_positions: list[int] = []
        if turn_id not in self.state.extracted:
            request = ExtractionRequest(
                session_id=self.session_id,
                turn_id=turn_id,
                transcript=observed.transcript[: self.max_input_chars],
            )
            try:
                raw_items = list(self.extractor.extract(request))
            except Exception as e:
                msg = (
                    f"extractor {self.extractor.extractor_id!r} failed on session "
                    f"{self.session_id!r} turn {turn_id}; its evidence is recorded and its "
                    f"extraction is pending (retry the turn): {type(e).__name__}: {e}"
                )
                raise ExtractionFailedError(msg) from e

            def extraction() -> list[LedgerEvent]:
                if turn_id in self.state.extracted:
                    return []
                return self._extraction_events(observed, raw_items)

            extraction_positions = self._append_once(extraction)
        for c in self.state.candidates:
            if c.turn_id == turn_id:
                candidates += 1
        if extraction_positions:
            rejected = len(raw_items) - candidates
        return TurnOutcome(
            turn_id=turn_id,
            digest=digest,
            evidence_position=evidence_positions[-1] if evidence_positions else 0,
            extraction_position=extraction_positions[-1] if extraction_positions else 0,
            candidates=candidates,
            rejected=rejected,
            already_observed=already,
        )

    def _extraction_events(
        self, observed: TranscriptObserved, raw_items: list[object]
    ) -> list[LedgerEvent]:
        version = self.state.version
        now = _now()
        events: list[LedgerEvent] = []
        extracted = rejected = 0
        for index, raw in enumerate(raw_items):
            cid = candidate_id(self.stream_id, observed.turn_id, index)
            outcome: object
            if index >= self.max_items:
                outcome = Rejection(
                    "too_many_items", f"item {index + 1} exceeds the limit of {self.max_items}"
                )
            else:
                outcome = validate_item(raw)
            version += 1
            if isinstance(outcome, Rejection):
                rejected += 1
                events.append(
                    CandidateRejected(
                        originator_id=self.stream_id,
                        originator_version=version,
                        recorded_at=now,
                        namespace=self.namespace,
                        session_id=self.session_id,
                        turn_id=observed.turn_id,
                        candidate_id=cid,
                        index=index,
                        extractor_id=self.extractor.extractor_id,
                        reason_code=outcome.reason_code,
                        detail=outcome.detail,
                    )
                )
            else:
                extracted += 1
                events.append(
                    CandidateExtracted(
                        originator_id=self.stream_id,
                        originator_version=version,
                        recorded_at=now,
                        namespace=self.namespace,
                        session_id=self.session_id,
                        turn_id=observed.turn_id,
                        candidate_id=cid,
                        index=index,
                        extractor_id=self.extractor.extractor_id,
                        item=outcome,
                        occurred_at=observed.occurred_at,
                    )
                )
        events.append(
            ExtractionCompleted(
                originator_id=self.stream_id,
                originator_version=version + 1,
                recorded_at=now,
                namespace=self.namespace,
                session_id=self.session_id,
                turn_id=observed.turn_id,
                extractor_id=self.extractor.extractor_id,
                extracted=extracted,
                rejected=rejected,
            )
        )
        return events

    def finish(self) -> ReconciliationReport:
        """Reconcile the session's candidates into canonical memory, exactly once.

        Appends SessionSealed, the memory events and SessionReconciled in one transaction.
        Calling it again (in any process) returns the recorded report with
        ``already_reconciled=True`` and writes nothing.
        """
        self.refresh()

        def plan() -> list[LedgerEvent]:
            if self.state.report is not None:
                return []
            return list(
                plan_reconciliation(
                    namespace=self.namespace,
                    session_stream=self.stream_id,
                    session_id=self.session_id,
                    session_version=self.state.version,
                    candidates=self.state.candidates,
                    load_memory=lambda mid: fold_memory_stream(self.engine.load_stream(mid)),
                    policy=self.activation_policy,
                    recorded_at=_now(),
                ).events
            )

        positions = self._append_once(plan)
        report = self.state.report
        assert report is not None
        if positions:
            return msgspec.structs.replace(report, position=positions[-1])
        return msgspec.structs.replace(report, already_reconciled=True)

    def pending_extractions(self) -> list[int]:
        """Turns with recorded evidence whose extraction is not recorded (retry them)."""
        return self.refresh().pending_extractions()

    # Reads --------------------------------------------------------------------------------

    def recall(self, query: str, turn_id: int | None = None, k: int = 5) -> RecallResult:
        """Top ``k`` canonical memories of this namespace for ``query`` (BM25)."""
        result = self.engine.recall(self.namespace, query, k)
        return msgspec.structs.replace(result, turn_id=turn_id)

    def close(self) -> None:
        """End use of this session object (the engine stays open)."""
