"""``MemorySession``: the commands and reads of one logical conversation under a namespace.

The API of the seed crate's MemorySession (seed 004) plus the host conveniences of the A3S
SDK (seed 000). Every command appends its events in ONE durable LMDB write transaction before
it returns; a conflicting concurrent append (IntegrityError) refreshes the state from the
ledger and re-decides, so retries are idempotent. Read-path records (RecallServed) are
buffered: written with the next command's transaction, by ``on_turn_complete``/``close``,
or at most ``READ_FLUSH_SECONDS`` later, never with an fsync of their own on the recall path.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

import msgspec
from eventsourcing.persistence import IntegrityError

from memory_ledger.commands.config import MemoryConfig
from memory_ledger.commands.errors import (
    CommandRejectedError,
    ExtractionFailedError,
    NotAdmittedError,
    SessionSealedError,
    TurnConflictError,
    UnknownMemoryError,
)
from memory_ledger.commands.extraction import ExtractionRequest, Extractor, RelatedMemory
from memory_ledger.commands.lexical import analyze_query, shares_term
from memory_ledger.commands.overlay import Overlay, build_overlay
from memory_ledger.commands.recall import (
    MemoryDoc,
    RecallHit,
    RecallResult,
    RecallScope,
    apply_hints,
    build_index,
    rrf_fuse,
)
from memory_ledger.commands.reconcile import (
    Reconciler,
    fold_memory_stream,
    plan_finish,
    subject_predicate_key,
)
from memory_ledger.commands.secrets import redact
from memory_ledger.commands.semantic_status import OFF, SemanticStatus
from memory_ledger.commands.session_state import SessionState
from memory_ledger.commands.validation import Rejection, validate_item
from memory_ledger.ledger.events import (
    ActivationDecision,
    AdmissionRevoked,
    CandidateExtracted,
    CandidateRejected,
    ExplicitCommandApplied,
    ExtractedItem,
    ExtractionAbandoned,
    ExtractionCompleted,
    LedgerEvent,
    MemoryAdmitted,
    MemoryPruned,
    MemoryUsed,
    RecalledItem,
    RecallServed,
    ReconciliationReport,
    SessionOpened,
    SnapshotItem,
    SnapshotPrepared,
    TranscriptObserved,
    TurnBegan,
    TurnCompleted,
)
from memory_ledger.ledger.faults import fault
from memory_ledger.ledger.ids import (
    Namespace,
    candidate_id,
    command_id,
    memory_id,
    normalize_statement,
    recall_stream_id,
    session_stream_id,
    snapshot_id,
)
from memory_ledger.projections.text_index import tokenize

if TYPE_CHECKING:
    from memory_ledger.commands.engine import MemoryEngine

__all__ = [
    "ActivationResult",
    "AdmissionReport",
    "CommandResult",
    "KnownValue",
    "MemorySession",
    "PreparedMemorySnapshot",
    "ScheduledWork",
    "TurnOutcome",
]

_MAX_RETRIES = 8
READ_FLUSH_SECONDS = 1.0
READ_BUFFER_LIMIT = 64
CLOSE_WAIT_SECONDS = 5.0
SNAPSHOT_SIZE = 8
SNAPSHOT_COVERAGE = 0.8
KNOWN_LIMIT = 50

Intent = Literal["remember", "forget", "correct", "pin"]


class TurnOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """Result of ``observe_final_transcript``.

    ``evidence_position``/``extraction_position`` are the ledger positions written (0 when
    that command had nothing to write, or, in background mode, has not run yet).
    ``redactions`` counts secret-shaped spans removed from the transcript.
    """

    turn_id: int
    digest: str
    evidence_position: int
    extraction_position: int
    candidates: int
    rejected: int
    already_observed: bool
    extraction_pending: bool = False
    redactions: int = 0


class PreparedMemorySnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """Items prepared for a turn. ``published`` is false when a newer turn had begun."""

    snapshot_id: UUID | None
    turn_id: int | None
    generation: int
    query: str
    items: tuple[SnapshotItem, ...]
    published: bool = True


class CommandResult(msgspec.Struct, frozen=True, kw_only=True):
    """Result of an explicit command: its id, the memory it targets, the position written."""

    command_id: UUID
    intent: Intent
    target: UUID | None
    position: int
    already_applied: bool = False


class KnownValue(msgspec.Struct, frozen=True, kw_only=True):
    """A (subject, predicate, value) memory can currently assert, and where it comes from."""

    subject: str
    predicate: str
    value: str | None
    statement: str
    origin: Literal["canonical", "session"]


class AdmissionReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``admit`` recorded: admitted revisions, revocations, and skipped items."""

    admitted: tuple[tuple[UUID, int], ...]
    revoked: tuple[tuple[UUID, int], ...]
    skipped: tuple[str, ...]
    position: int


class ActivationResult(msgspec.Struct, frozen=True, kw_only=True):
    """Result of ``activate_candidate``: the memory it became and what else it changed."""

    candidate_id: UUID
    memory_id: UUID
    decision: ActivationDecision
    superseded: tuple[UUID, ...]
    position: int


class ScheduledWork(msgspec.Struct, frozen=True, kw_only=True):
    """One piece of work ``on_turn_complete`` scheduled and ran."""

    kind: Literal["turn_completed", "retry_extraction", "flush_reads"]
    turn_id: int | None
    status: Literal["done", "failed"]
    detail: str = ""


MAX_TURN_ID = 2**63 - 1
"""Turn ids are non-negative 64-bit integers (the read models store them as BIGINT)."""


def _now() -> datetime:
    return datetime.now(UTC)


def check_turn_id(turn_id: object) -> int:
    """``turn_id`` if it is an int in [0, 2**63 - 1]; otherwise ValueError naming it."""
    if not isinstance(turn_id, int) or isinstance(turn_id, bool) or not 0 <= turn_id <= MAX_TURN_ID:
        msg = f"turn_id must be an integer from 0 to {MAX_TURN_ID}, got {turn_id!r}"
        raise ValueError(msg)
    return turn_id


def check_query(query: object) -> str:
    """``query`` if it is a string; otherwise ValueError."""
    if not isinstance(query, str):
        msg = f"query must be a string, got {type(query).__name__}"
        raise ValueError(msg)
    return query


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class MemorySession:
    """One logical conversation. Obtain it from :meth:`MemoryEngine.session`.

    :param extraction_mode: ``blocking`` (extraction finishes before
        ``observe_final_transcript`` returns) or ``background`` (evidence is durable on
        return; extraction runs afterwards in a FIFO queue of this session).
    """

    def __init__(
        self,
        engine: MemoryEngine,
        namespace: Namespace,
        session_id: str,
        *,
        extractor: Extractor,
        config: MemoryConfig,
        extraction_mode: Literal["blocking", "background"] = "blocking",
    ) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            msg = f"session_id must be a non-empty string, got {session_id!r}"
            raise ValueError(msg)
        if extraction_mode not in ("blocking", "background"):
            msg = f"extraction_mode must be 'blocking' or 'background', got {extraction_mode!r}"
            raise ValueError(msg)
        self.engine = engine
        self.namespace = namespace
        self.session_id = session_id
        self.stream_id: UUID = session_stream_id(namespace, session_id)
        self.extractor = extractor
        self._config = config
        self.activation_policy = config.activation_policy
        self.extraction_mode = extraction_mode
        self.state = SessionState()
        self.last_position = 0
        self._lock = threading.RLock()
        self._reads: list[LedgerEvent] = []
        self._reads_since = 0.0
        self._read_sequence = itertools.count()
        self._flusher: threading.Thread | None = None
        self._queue: ThreadPoolExecutor | None = None
        self._queued: dict[int, Future[TurnOutcome]] = {}
        self._last_activity = time.monotonic()
        self._closed = False
        self._overlay: tuple[int, Overlay] | None = None
        self.refresh()
        if self.state.opened is None:
            self._append_once(self._opened_events)

    # State --------------------------------------------------------------------------------

    def config(self) -> MemoryConfig:
        """The runtime configuration this session was opened with."""
        return self._config

    def refresh(self) -> SessionState:
        """Fold events of the session stream not seen yet (another process may have written)."""
        with self._lock:
            for event in self.engine.load_stream(self.stream_id, after=self.state.version):
                self.state.apply(event)
            return self.state

    def _append_once(self, plan: Callable[[], list[LedgerEvent]]) -> list[int]:
        """Append the events ``plan()`` decides on, with buffered read records in front, in
        one transaction; on a concurrent append, refresh and re-plan.

        ``plan`` returns [] when, given the refreshed state, nothing is left to write.
        """
        with self._lock:
            for _ in range(_MAX_RETRIES):
                events = plan()
                if not events:
                    return []
                reads = list(self._reads)
                try:
                    positions = self.engine.append([*reads, *events])
                except IntegrityError:
                    self.refresh()
                    continue
                fault("session.appended")
                del self._reads[: len(reads)]
                for event in events:
                    if event.originator_id == self.stream_id:
                        self.state.apply(event)
                self.last_position = positions[-1]
                self._last_activity = time.monotonic()
                return positions[len(reads) :]
            msg = f"session {self.session_id!r}: too many concurrent appends, giving up"
            raise IntegrityError(msg)

    def _base(self) -> dict[str, Any]:
        """Envelope of the next session-stream event (call once per event, in order)."""
        self._next_version += 1
        return {
            "originator_id": self.stream_id,
            "originator_version": self._next_version,
            "recorded_at": self._recorded_at,
            "namespace": self.namespace,
            "session_id": self.session_id,
        }

    def _start_plan(self) -> None:
        self._next_version = self.state.version
        self._recorded_at = _now()

    def _opened_events(self) -> list[LedgerEvent]:
        if self.state.opened is not None:
            return []
        self._start_plan()
        return [
            SessionOpened(
                **self._base(),
                activation_policy=self.activation_policy,
                extractor_id=self.extractor.extractor_id,
            )
        ]

    def _check_open(self) -> None:
        if self._closed:
            msg = f"session {self.session_id!r} is closed"
            raise SessionSealedError(msg)

    # Evidence and extraction ---------------------------------------------------------------

    def observe_final_transcript(
        self, turn_id: int, transcript: str, occurred_at: datetime | None = None
    ) -> TurnOutcome:
        """Record a finalized turn (evidence first), then extract and record the outcome.

        Two commands by design (DESIGN.md section 3): TranscriptObserved (the transcript
        with secret-shaped spans redacted), then every CandidateExtracted/CandidateRejected
        of the turn with ExtractionCompleted in one transaction. Observing the same turn again
        with the same transcript is a no-op (a pending extraction is completed).

        :raises TurnConflictError: the turn was observed with a different transcript.
        :raises SessionSealedError: the session was finished or closed.
        :raises ExtractionFailedError: the extractor raised (blocking mode); the evidence is
            recorded and the extraction pending.
        :raises ValueError: ``turn_id`` is negative or ``transcript`` is not a string.
        """
        self._check_open()
        check_turn_id(turn_id)
        if not isinstance(transcript, str):
            msg = f"transcript must be a string, got {type(transcript).__name__}"
            raise ValueError(msg)
        if occurred_at is not None and occurred_at.tzinfo is None:
            occurred_at = occurred_at.replace(tzinfo=UTC)
        redaction = redact(transcript)
        digest = _digest(redaction.text)
        with self._lock:
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
                self._start_plan()
                return [
                    TranscriptObserved(
                        **self._base(),
                        turn_id=turn_id,
                        transcript=redaction.text,
                        digest=digest,
                        occurred_at=occurred_at,
                        redactions=redaction.count,
                    )
                ]

            evidence_positions = self._append_once(evidence)
            evidence_position = evidence_positions[-1] if evidence_positions else 0
            pending = turn_id not in self.state.extracted
            if pending and self._config.llm_extraction and self.extraction_mode == "background":
                self._enqueue_extraction(turn_id)
                return TurnOutcome(
                    turn_id=turn_id,
                    digest=digest,
                    evidence_position=evidence_position,
                    extraction_position=0,
                    candidates=0,
                    rejected=0,
                    already_observed=already,
                    extraction_pending=True,
                    redactions=redaction.count,
                )
        outcome = self._extract(turn_id) if pending else None
        return TurnOutcome(
            turn_id=turn_id,
            digest=digest,
            evidence_position=evidence_position,
            extraction_position=outcome.extraction_position if outcome else 0,
            candidates=self._count(CandidateExtracted, turn_id),
            rejected=self._count(CandidateRejected, turn_id),
            already_observed=already,
            redactions=redaction.count,
        )

    def _count(self, cls: type[LedgerEvent], turn_id: int) -> int:
        events = self.state.candidates if cls is CandidateExtracted else self.state.rejected
        return sum(1 for e in events if e.turn_id == turn_id)

    def _related(self, transcript: str) -> tuple[RelatedMemory, ...]:
        """Up to 5 memories related to the transcript, for the extractor. Lexical only: the
        command path never waits for an embedding provider."""
        ranked, _, _ = self.engine.canonical_candidates(
            self.namespace, transcript[:2000], 5, semantic=False
        )
        return tuple(
            RelatedMemory(memory_id=doc.memory_id, statement=doc.statement) for doc, _ in ranked
        )

    def _extract(self, turn_id: int) -> TurnOutcome:
        """Run the extractor on an observed turn and record its outcome (one transaction)."""
        with self._lock:
            observed = self.state.observed[turn_id]
            if turn_id in self.state.extracted:
                return self._outcome(turn_id, 0)
        raw_items: list[Any] = []
        related: tuple[RelatedMemory, ...] = ()
        if self._config.llm_extraction:
            wants_context = getattr(self.extractor, "uses_context", True)
            related = self._related(observed.transcript) if wants_context else ()
            request = ExtractionRequest(
                session_id=self.session_id,
                turn_id=turn_id,
                transcript=observed.transcript[: self._config.llm_extraction_max_input_chars],
                related=related,
                known_predicates=tuple(self.known_predicates()) if wants_context else (),
            )
            try:
                raw_items = list(self.extractor.extract(request))
            except Exception as e:
                if getattr(e, "retryable", True) is False:
                    # Malformed model output: recorded as one rejection, nothing else lost.
                    code = str(getattr(e, "reason_code", "malformed_output"))
                    malformed = Rejection(f"model_{code}", f"{type(e).__name__}: {code}")
                    return self._record_extraction(observed, [malformed], frozenset())
                msg = (
                    f"extractor {self.extractor.extractor_id!r} failed on session "
                    f"{self.session_id!r} turn {turn_id}; its evidence is recorded and its "
                    f"extraction is pending (retry the turn): {type(e).__name__}: {e}"
                )
                raise ExtractionFailedError(msg) from e
        return self._record_extraction(observed, raw_items, frozenset(r.memory_id for r in related))

    def _record_extraction(
        self, observed: TranscriptObserved, raw_items: list[Any], relation_ids: frozenset[str]
    ) -> TurnOutcome:
        turn_id = observed.turn_id

        def extraction() -> list[LedgerEvent]:
            if turn_id in self.state.extracted:
                return []
            return self._extraction_events(observed, raw_items, relation_ids)

        positions = self._append_once(extraction)
        return self._outcome(turn_id, positions[-1] if positions else 0)

    def _outcome(self, turn_id: int, position: int) -> TurnOutcome:
        observed = self.state.observed[turn_id]
        return TurnOutcome(
            turn_id=turn_id,
            digest=observed.digest,
            evidence_position=0,
            extraction_position=position,
            candidates=self._count(CandidateExtracted, turn_id),
            rejected=self._count(CandidateRejected, turn_id),
            already_observed=True,
        )

    def _extraction_events(
        self, observed: TranscriptObserved, raw_items: list[Any], relation_ids: frozenset[str]
    ) -> list[LedgerEvent]:
        self._start_plan()
        events: list[LedgerEvent] = []
        extracted = rejected = 0
        limit = self._config.llm_extraction_max_items
        extractor_id = self.extractor.extractor_id
        for index, raw in enumerate(raw_items):
            cid = candidate_id(self.stream_id, observed.turn_id, index)
            outcome: ExtractedItem | Rejection
            if isinstance(raw, Rejection):
                outcome = raw
            elif index >= limit:
                outcome = Rejection("too_many_items", f"item {index + 1} exceeds the limit {limit}")
            else:
                outcome = validate_item(raw, relation_ids=relation_ids)
            common = {
                **self._base(),
                "turn_id": observed.turn_id,
                "candidate_id": cid,
                "index": index,
                "extractor_id": extractor_id,
            }
            if isinstance(outcome, Rejection):
                rejected += 1
                events.append(
                    CandidateRejected(
                        **common, reason_code=outcome.reason_code, detail=outcome.detail
                    )
                )
            else:
                extracted += 1
                events.append(
                    CandidateExtracted(**common, item=outcome, occurred_at=observed.occurred_at)
                )
        events.append(
            ExtractionCompleted(
                **self._base(),
                turn_id=observed.turn_id,
                extractor_id=extractor_id,
                extracted=extracted,
                rejected=rejected,
            )
        )
        return events

    def _enqueue_extraction(self, turn_id: int) -> None:
        if turn_id in self._queued and not self._queued[turn_id].done():
            return
        if self._queue is None:
            self._queue = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"extract-{self.session_id}"
            )
        self._queued[turn_id] = self._queue.submit(self._extract, turn_id)

    def pending_extractions(self) -> list[int]:
        """Turns with recorded evidence whose extraction is not recorded (retry them)."""
        return self.refresh().pending_extractions()

    def is_idle(self, idle_seconds: float = 300.0) -> bool:
        """Whether the session has had no activity for ``idle_seconds`` and no queued work:
        long enough to seal with ``finish()``."""
        busy = any(not f.done() for f in self._queued.values())
        return not busy and time.monotonic() - self._last_activity >= idle_seconds

    def on_turn_complete(self, turn_id: int) -> list[ScheduledWork]:
        """Complete a turn: record TurnCompleted (with buffered reads), retry any pending
        extraction, and return the work scheduled and run."""
        self._check_open()
        check_turn_id(turn_id)
        work: list[ScheduledWork] = []

        def completed() -> list[LedgerEvent]:
            if turn_id in self.state.completed:
                return []
            self._start_plan()
            return [TurnCompleted(**self._base(), turn_id=turn_id)]

        had_reads = bool(self._reads)
        self._append_once(completed)
        work.append(ScheduledWork(kind="turn_completed", turn_id=turn_id, status="done"))
        if had_reads:
            self.flush_reads()
            work.append(ScheduledWork(kind="flush_reads", turn_id=turn_id, status="done"))
        for pending in self.pending_extractions():
            if pending in self._queued and not self._queued[pending].done():
                continue
            try:
                self._extract(pending)
            except ExtractionFailedError as e:
                work.append(
                    ScheduledWork(
                        kind="retry_extraction", turn_id=pending, status="failed", detail=str(e)
                    )
                )
            else:
                work.append(ScheduledWork(kind="retry_extraction", turn_id=pending, status="done"))
        return work

    # Turns and snapshots ------------------------------------------------------------------

    def current_turn(self) -> int | None:
        """The turn in flight (the last ``begin_turn``), or None."""
        return self.state.current_turn

    def prepare(self, turn_id: int, transcript: str) -> PreparedMemorySnapshot:
        """Prepare context speculatively for a turn from a transcript.

        Publishes SnapshotPrepared only if no newer turn began while the work ran (the
        generation guard); otherwise returns the snapshot unpublished.
        """
        self._check_open()
        check_turn_id(turn_id)
        check_query(transcript)
        query = redact(transcript).text[:2000]
        generation = self.state.generation
        docs, _ = self._live(query, SNAPSHOT_SIZE, RecallScope(), None, None)
        items = tuple(
            SnapshotItem(
                memory_id=UUID(doc.memory_id),
                revision=doc.revision or 0,
                statement=doc.statement,
                score=score,
            )
            for doc, score in docs
        )
        content = msgspec.msgpack.encode([query, [(str(i.memory_id), i.revision) for i in items]])
        sid = snapshot_id(self.stream_id, turn_id, generation, hashlib.sha256(content).hexdigest())
        snapshot = PreparedMemorySnapshot(
            snapshot_id=sid, turn_id=turn_id, generation=generation, query=query, items=items
        )

        def publish() -> list[LedgerEvent]:
            if self.state.generation != generation or sid in self.state.snapshots:
                return []
            self._start_plan()
            return [
                SnapshotPrepared(
                    **self._base(),
                    turn_id=turn_id,
                    generation=generation,
                    snapshot_id=sid,
                    query=query,
                    items=items,
                )
            ]

        with self._lock:
            self.refresh()
            if self.state.generation != generation:
                return msgspec.structs.replace(snapshot, published=False)
            self._append_once(publish)
        return snapshot

    def begin_turn(self, turn_id: int) -> int:
        """Freeze the prepared snapshot for a turn that is starting; return its generation.

        Everything the turn is answered with comes from this snapshot (or a live search fused
        with it), so a retrieval landing mid-response cannot change what was remembered.
        """
        self._check_open()
        check_turn_id(turn_id)
        result: list[int] = []

        def began() -> list[LedgerEvent]:
            prepared = self.state.prepared
            frozen = prepared.snapshot_id if prepared and prepared.turn_id == turn_id else None
            generation = self.state.generation + 1
            result[:] = [generation]
            self._start_plan()
            return [
                TurnBegan(
                    **self._base(), turn_id=turn_id, generation=generation, snapshot_id=frozen
                )
            ]

        self._append_once(began)
        return result[0]

    def _snapshot(self, snapshot: SnapshotPrepared | None) -> PreparedMemorySnapshot:
        if snapshot is None:
            return PreparedMemorySnapshot(
                snapshot_id=None, turn_id=None, generation=self.state.generation, query="", items=()
            )
        return PreparedMemorySnapshot(
            snapshot_id=snapshot.snapshot_id,
            turn_id=snapshot.turn_id,
            generation=snapshot.generation,
            query=snapshot.query,
            items=snapshot.items,
        )

    def active_snapshot(self) -> PreparedMemorySnapshot:
        """The snapshot the current turn is being answered from (empty if none)."""
        turn = self.state.current_turn
        return self._snapshot(self.state.frozen_snapshot(turn) if turn is not None else None)

    def prepared_snapshot(self) -> PreparedMemorySnapshot:
        """The most recently prepared snapshot, whether or not a turn is using it."""
        return self._snapshot(self.state.prepared)

    # Recall -------------------------------------------------------------------------------

    def overlay(self) -> Overlay:
        """The session facts and what they hide (cached per session version)."""
        with self._lock:
            if self._overlay is None or self._overlay[0] != self.state.version:
                self._overlay = (self.state.version, build_overlay(self.namespace, self.state))
            return self._overlay[1]

    def _canonical_docs(self) -> list[MemoryDoc]:
        position = self.engine.catch_up()
        _, by_id = self.engine.recall_index.docs(self.namespace, position)
        return list(by_id.values())

    def _live(
        self,
        query: str,
        k: int,
        scope: RecallScope,
        about: str | None,
        attribute: str | None,
        *,
        semantic: bool = True,
    ) -> tuple[list[tuple[MemoryDoc, float]], SemanticStatus]:
        """Live search: canonical memories (lexical, or hybrid with the semantic channel)
        and session facts (shadowing applied), fused by RRF; plus the semantic status."""
        overlay = self.overlay()
        depth = max(k * 4, 20)
        status = OFF
        rankings: list[list[str]] = []
        docs: dict[str, MemoryDoc] = {}
        scores: dict[str, float] = {}

        def admit(doc: MemoryDoc) -> bool:
            return scope.item_scope is None or doc.scope == scope.item_scope

        if scope.source in ("canonical", "both"):
            candidates, status, _ = self.engine.canonical_candidates(
                self.namespace, query, depth * 2, semantic=semantic
            )
            ranking = []
            for doc, score in candidates:
                if overlay.visible(doc) and admit(doc):
                    ranking.append(doc.memory_id)
                    docs[doc.memory_id] = doc
                    scores[doc.memory_id] = score
                if len(ranking) >= depth:
                    break
            rankings.append(ranking)
        if scope.source in ("session", "both") and overlay.docs:
            session_docs = [d for d in overlay.docs if admit(d)]
            index = build_index(session_docs)
            by_session = {d.memory_id: d for d in session_docs}
            ranking = []
            for scored in index.search(analyze_query(query), depth):
                if scored.doc_id in docs:
                    continue  # the canonical item with the same id answers
                docs[scored.doc_id] = by_session[scored.doc_id]
                scores[scored.doc_id] = scored.score
                ranking.append(scored.doc_id)
            rankings.append(ranking)
        rankings = [r for r in rankings if r]
        if len(rankings) > 1:
            fused = rrf_fuse(rankings)
        elif rankings:
            fused = [(doc_id, scores[doc_id]) for doc_id in rankings[0]]
        else:
            fused = []
        ordered = apply_hints([docs[doc_id] for doc_id, _ in fused], about, attribute)
        fused_scores = dict(fused)
        return [(doc, fused_scores[doc.memory_id]) for doc in ordered[:k]], status

    def _covers(self, snapshot: SnapshotPrepared, query: str) -> bool:
        """The fast-path test: the snapshot plainly covers the query by word overlap."""
        wanted = set(tokenize(query))
        if not snapshot.items or not wanted:
            return False
        have: set[str] = set()
        for item in snapshot.items:
            have.update(tokenize(item.statement))
        return len(wanted & have) / len(wanted) >= SNAPSHOT_COVERAGE

    def recall(self, query: str, turn_id: int | None = None, k: int | None = None) -> RecallResult:
        """Serve a ``recall_context`` tool call.

        Reads the turn's frozen snapshot when it plainly covers the query; otherwise runs a
        live search and fuses the snapshot into it (RRF, k = 60). Records RecallServed.
        """
        self._check_open()
        check_query(query)
        if turn_id is not None:
            check_turn_id(turn_id)
        k = self._bounded_k(k)
        snapshot = self.state.frozen_snapshot(turn_id) if turn_id is not None else None
        if snapshot is not None and self._covers(snapshot, query):
            by_id = {
                doc.memory_id: doc
                for doc in self._docs_by_id({str(item.memory_id) for item in snapshot.items[:k]})
            }
            hits: list[RecallHit] = []
            for item in snapshot.items[:k]:
                doc = by_id.get(str(item.memory_id))
                hits.append(
                    RecallHit(
                        rank=len(hits) + 1,
                        memory_id=str(item.memory_id),
                        statement=item.statement,
                        subject=doc.subject if doc else None,
                        predicate=doc.predicate if doc else None,
                        score=item.score,
                        evidence=doc.evidence if doc else (),
                        occurred_at=doc.occurred_at if doc else None,
                        origin=doc.origin if doc else "canonical",
                        revision=item.revision or None,
                        tags=doc.tags if doc else (),
                    )
                )
            return self._served(query, turn_id, "snapshot", hits)
        live, semantic = self._live(query, k, RecallScope(), None, None)
        if snapshot is not None and snapshot.items:
            live_ids = [doc.memory_id for doc, _ in live]
            snapshot_ids = [str(i.memory_id) for i in snapshot.items]
            known = {doc.memory_id: doc for doc, _ in live}
            for doc in self._docs_by_id(set(snapshot_ids) - set(known)):
                known[doc.memory_id] = doc
            fused = [(d, s) for d, s in rrf_fuse([live_ids, snapshot_ids]) if d in known]
            hits = [known[d].hit(rank, s) for rank, (d, s) in enumerate(fused[:k], start=1)]
            return self._served(query, turn_id, "fused", hits, semantic)
        hits = [doc.hit(rank, score) for rank, (doc, score) in enumerate(live, start=1)]
        return self._served(query, turn_id, "live", hits, semantic)

    def _docs_by_id(self, ids: set[str]) -> list[MemoryDoc]:
        if not ids:
            return []
        overlay = self.overlay()
        # Details only (subject, evidence, times): the in-process index as it stands serves,
        # without a catch-up on the snapshot path.
        with self.engine.canonical.lock:
            _, by_id = self.engine.recall_index.docs(self.namespace, self.engine.runner.position)
            found = [by_id[i] for i in ids if i in by_id and overlay.visible(by_id[i])]
        found += [d for d in overlay.docs if d.memory_id in ids]
        return found

    def recall_scoped(
        self,
        query: str,
        turn_id: int | None,
        scope: RecallScope,
        about: str | None = None,
        attribute: str | None = None,
        k: int | None = None,
    ) -> RecallResult:
        """A recall restricted to a scope and/or reordered by ``about``/``attribute`` hints.

        Always a live search (the snapshot knows neither the restriction nor the hints);
        hints only reorder, never filter.
        """
        self._check_open()
        check_query(query)
        if turn_id is not None:
            check_turn_id(turn_id)
        live, semantic = self._live(query, self._bounded_k(k), scope, about, attribute)
        hits = [doc.hit(rank, score) for rank, (doc, score) in enumerate(live, start=1)]
        return self._served(query, turn_id, "live", hits, semantic)

    def _bounded_k(self, k: int | None) -> int:
        """``k`` clamped to ``recall_max_k``; ValueError when it is not a positive int."""
        if k is None:
            return self._config.recall_k
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            msg = f"k must be a positive integer, got {k!r}"
            raise ValueError(msg)
        return min(k, self._config.recall_max_k)

    def _served(
        self,
        query: str,
        turn_id: int | None,
        path: Literal["snapshot", "live", "fused"],
        hits: Sequence[RecallHit],
        semantic: SemanticStatus | None = None,
    ) -> RecallResult:
        position = max(self.engine.runner.position, self.last_position)
        canonical = [h for h in hits if h.origin == "canonical"]
        sequence = f"{time.time_ns()}/{next(self._read_sequence)}"
        with self._lock:
            if not self._reads:
                self._reads_since = time.monotonic()
            self._reads.append(
                RecallServed(
                    originator_id=recall_stream_id(self.stream_id, sequence),
                    originator_version=1,
                    recorded_at=_now(),
                    namespace=self.namespace,
                    session_id=self.session_id,
                    turn_id=turn_id,
                    query=redact(query).text[:2000],
                    path=path,
                    results=tuple(
                        RecalledItem(
                            memory_id=UUID(h.memory_id),
                            revision=h.revision or 0,
                            rank=h.rank,
                            score=h.score,
                        )
                        for h in canonical
                    ),
                )
            )
            due = (
                len(self._reads) >= READ_BUFFER_LIMIT
                or time.monotonic() - self._reads_since >= READ_FLUSH_SECONDS
            )
        if due:
            self._flush_in_background()
        self._last_activity = time.monotonic()
        return RecallResult(
            query=query,
            results=tuple(hits),
            position=position,
            path=path,
            turn_id=turn_id,
            semantic=semantic,
        )

    def _flush_in_background(self) -> None:
        """Write the read buffer from a worker thread: the recall that found it due returns
        without waiting for an fsync (DESIGN.md section 3)."""
        with self._lock:
            if self._flusher is not None and self._flusher.is_alive():
                return
            self._flusher = threading.Thread(
                target=self._flush_quietly, name=f"reads-{self.session_id}", daemon=True
            )
            self._flusher.start()

    def _flush_quietly(self) -> None:
        try:
            self.flush_reads()
        except Exception:  # noqa: BLE001 - read records may be lost; commands never are
            pass

    def flush_reads(self) -> int:
        """Write buffered RecallServed records now (one transaction); return how many."""
        with self._lock:
            reads = list(self._reads)
            if not reads:
                return 0
            self.engine.append(reads)
            del self._reads[: len(reads)]
            return len(reads)

    def memory_map(self) -> str:
        """The vocabulary a model needs to fill recall_context's about/attribute fields."""
        return self.engine.memory_map(self.namespace)

    def recall_similar(self, query: str, k: int = 5) -> list[RecallHit]:
        """Canonical and session memories similar to ``query`` (live BM25, fused)."""
        return list(self.recall_scoped(query, None, RecallScope(), k=k).results)

    def memory_recent(self, k: int = 10) -> list[RecallHit]:
        """The ``k`` most recent retrievable memories (session facts first)."""
        overlay = self.overlay()
        canonical = [d for d in self._canonical_docs() if overlay.visible(d)]
        canonical.sort(key=lambda d: (-d.position, d.memory_id))
        docs = [*overlay.docs, *canonical][: max(k, 0)]
        return [doc.hit(rank, 0.0) for rank, doc in enumerate(docs, start=1)]

    def recall_by_tags(self, tags: Sequence[str], k: int = 10) -> list[RecallHit]:
        """Retrievable memories carrying any of ``tags``: most matching tags first, then the
        most recent."""
        wanted = {t.strip().casefold() for t in tags if t.strip()}
        overlay = self.overlay()
        docs = [*overlay.docs, *(d for d in self._canonical_docs() if overlay.visible(d))]
        scored = []
        for doc in docs:
            matches = len(wanted & {t.casefold() for t in doc.tags})
            if matches:
                scored.append((doc, matches))
        recent = {d.memory_id: n for n, d in enumerate(docs)}
        scored.sort(key=lambda pair: (-pair[1], recent[pair[0].memory_id]))
        return [doc.hit(rank, float(m)) for rank, (doc, m) in enumerate(scored[: max(k, 0)], 1)]

    # Vocabulary ---------------------------------------------------------------------------

    def known_predicates(self) -> list[str]:
        """Predicate names this user's memory already uses: session facts first (a correction
        usually chases something said minutes ago), then canonical ones by frequency;
        at most 50."""
        names: dict[str, None] = {}
        for doc in self.overlay().docs:
            if doc.predicate:
                names.setdefault(doc.predicate)
        self.engine.catch_up()
        ns = self.namespace
        for term, _ in self.engine.canonical.vocabulary(
            ns.tenant, ns.principal, ns.scope_id, "predicate"
        ):
            names.setdefault(term)
        return list(names)[:KNOWN_LIMIT]

    def known_values(self) -> list[KnownValue]:
        """The (subject, predicate, value) facts memory can currently assert; session facts
        shadow canonical ones for the same subject and predicate."""
        values: dict[tuple[str, str], KnownValue] = {}
        overlay = self.overlay()
        for doc in overlay.docs:
            key = subject_predicate_key(doc.subject, doc.predicate)
            if key is not None and key not in values:
                values[key] = self._known(doc)
        for doc in self._canonical_docs():
            key = subject_predicate_key(doc.subject, doc.predicate)
            if key is not None and key not in values and overlay.visible(doc):
                values[key] = self._known(doc)
        return list(values.values())

    @staticmethod
    def _known(doc: MemoryDoc) -> KnownValue:
        return KnownValue(
            subject=doc.subject or "",
            predicate=doc.predicate or "",
            value=doc.value,
            statement=doc.statement,
            origin=doc.origin,
        )

    def known_statements(self) -> list[str]:
        """Every statement currently retrievable, provisional (session) and canonical."""
        overlay = self.overlay()
        statements = [d.statement for d in overlay.docs]
        statements += [d.statement for d in self._canonical_docs() if overlay.visible(d)]
        return list(dict.fromkeys(statements))

    def pending_explicit_commands(self) -> list[ExplicitCommandApplied]:
        """The explicit commands of this session not yet reconciled into canonical memory."""
        state = self.refresh()
        return [] if state.report is not None else list(state.commands)

    # Explicit commands --------------------------------------------------------------------

    def apply_explicit_command(
        self,
        intent: Intent,
        statement: str,
        turn_id: int,
        *,
        item: ExtractedItem | dict[str, Any] | None = None,
        target: UUID | str | None = None,
    ) -> CommandResult:
        """Apply an explicit memory command from the user (remember, forget, correct, pin).

        The event is appended before the session overlay changes; it takes effect in this
        session at once and in canonical memory at ``finish()``. ``forget``/``pin``/
        ``correct`` target the best lexical match among retrievable memories; ``correct``
        keeps the target's subject and predicate so it supersedes it. ``item`` lets a host
        give the structured memory for remember/correct; ``target`` names the memory of a
        forget/pin/correct by id instead of by its words.

        :raises CommandRejectedError: unknown intent, empty statement, a secret in it, or an
            item that fails validation (the reason code is in the message).
        :raises UnknownMemoryError: ``target`` names no retrievable memory of this
            session's namespace (another namespace's id behaves exactly like an unknown one).
        """
        self._check_open()
        check_turn_id(turn_id)
        if intent not in ("remember", "forget", "correct", "pin"):
            msg = f"unknown intent {intent!r}: expected remember, forget, correct or pin"
            raise CommandRejectedError(msg, "unknown_intent")
        text = " ".join(str(statement).split())
        if not text:
            raise CommandRejectedError("the command's statement is empty", "empty_statement")
        if redact(text).count:
            msg = "the command's statement holds a secret-shaped value; nothing was recorded"
            raise CommandRejectedError(msg, "secret_detected")
        cid = command_id(self.stream_id, turn_id, intent, text)
        self.refresh()
        previous = [c for c in self.state.commands if c.command_id == cid]
        if previous:
            return CommandResult(
                command_id=cid,
                intent=intent,
                target=previous[0].target,
                position=0,
                already_applied=True,
            )
        if self.state.sealed:
            msg = f"session {self.session_id!r} is finished; commands are not accepted"
            raise SessionSealedError(msg)
        target_doc: MemoryDoc | None = None
        if target is not None and intent in ("forget", "pin", "correct"):
            target_doc = self.engine.retrievable_memory(self.namespace, target)
            if target_doc is None:
                raise UnknownMemoryError(str(target))
        target = None if target_doc is None else UUID(target_doc.memory_id)
        if target is None and intent in ("forget", "pin", "correct"):
            # The target must share a word with the command in its own subject or statement:
            # a word found only in its source transcript (document expansion) does not count.
            matches, _ = self._live(text, 10, RecallScope(), None, None, semantic=False)
            for doc, _score in matches:
                if shares_term(text, doc.subject, doc.statement):
                    target_doc = doc
                    target = UUID(doc.memory_id)
                    break
        resolved: ExtractedItem | None = None
        if intent in ("remember", "correct"):
            resolved = self._command_item(intent, text, item, target_doc)
        with self._lock:

            def applied() -> list[LedgerEvent]:
                if any(c.command_id == cid for c in self.state.commands):
                    return []
                self._start_plan()
                return [
                    ExplicitCommandApplied(
                        **self._base(),
                        turn_id=turn_id,
                        command_id=cid,
                        intent=intent,
                        statement=text,
                        target=target,
                        item=resolved,
                    )
                ]

            positions = self._append_once(applied)
        return CommandResult(
            command_id=cid,
            intent=intent,
            target=target,
            position=positions[-1] if positions else 0,
        )

    def _command_item(
        self,
        intent: Intent,
        text: str,
        item: ExtractedItem | dict[str, Any] | None,
        target: MemoryDoc | None,
    ) -> ExtractedItem:
        raw: Any = item
        if raw is None:
            raw = {
                "kind": "semantic",
                "subject": target.subject if target and intent == "correct" else None,
                "predicate": target.predicate if target and intent == "correct" else None,
                "value": None,
                "statement": text,
                "source": "fact",
                "scope": target.scope if target else "user",
                "reason": f"the user explicitly asked to {intent} this",
                "importance": 0.9,
                "confidence": 1.0,
            }
        outcome = validate_item(raw)
        if isinstance(outcome, Rejection):
            msg = f"the command's item was rejected ({outcome.reason_code}): {outcome.detail}"
            raise CommandRejectedError(msg, outcome.reason_code)
        return outcome

    def remember_success(self, task: str, tools: Sequence[str], outcome: str) -> CommandResult:
        """Record a reusable workflow that worked (procedural memory, explicit)."""
        statement = f"{task}: {outcome}"
        if tools:
            statement += f" (tools: {', '.join(tools)})"
        return self._remember_procedure(task, statement, "workflow", tools)

    def remember_failure(self, task: str, error: str, tools: Sequence[str]) -> CommandResult:
        """Record a failure lesson (procedural memory, explicit)."""
        statement = f"{task} failed: {error}"
        if tools:
            statement += f" (tools: {', '.join(tools)})"
        return self._remember_procedure(task, statement, "failure", tools)

    def _remember_procedure(
        self, task: str, statement: str, source: str, tools: Sequence[str]
    ) -> CommandResult:
        turn = self.state.current_turn or 0
        item = {
            "kind": "procedural",
            "subject": task,
            "predicate": None,
            "value": None,
            "statement": statement,
            "source": source,
            "scope": "workspace",
            "reason": "reusable procedure recorded by the host",
            "importance": 0.8,
            "confidence": 0.9,
            "tags": list(tools),
        }
        return self.apply_explicit_command("remember", statement, turn, item=item)

    # Reconciliation -----------------------------------------------------------------------

    def _reconciler(self) -> Reconciler:
        ns = self.namespace
        position = self.engine.catch_up()
        _, by_id = self.engine.recall_index.docs(ns, position)
        holders: dict[tuple[str, str], list[UUID]] = {}
        for doc in by_id.values():
            doc_key = subject_predicate_key(doc.subject, doc.predicate)
            if doc_key is not None:
                holders.setdefault(doc_key, []).append(UUID(doc.memory_id))

        def same_key(key: tuple[str, str]) -> list[UUID]:
            # From the in-process index of retrievable memories (no query per key); every id
            # is re-checked against its ledger stream by the reconciler.
            return sorted(holders.get(key, ()))

        return Reconciler(
            namespace=ns,
            session_id=self.session_id,
            load_memory=lambda mid: fold_memory_stream(self.engine.load_stream(mid)),
            same_key=same_key,
            recorded_at=_now(),
        )

    def finish(self) -> ReconciliationReport:
        """Seal the session and reconcile its candidates and commands, exactly once.

        Appends SessionSealed, the memory events and SessionReconciled in one transaction.
        Calling it again (in any process) returns the recorded report with
        ``already_reconciled=True`` and writes nothing.
        """
        self.wait_for_extractions()
        self.refresh()

        def plan() -> list[LedgerEvent]:
            if self.state.report is not None:
                return []
            events = list(
                plan_finish(
                    self._reconciler(),
                    session_stream=self.stream_id,
                    session_version=self.state.version,
                    items=[*self.state.candidates, *self.state.commands],
                    policy=self.activation_policy,
                ).events
            )
            fault("session.finish_planned")
            return events

        positions = self._append_once(plan)
        report = self.state.report
        assert report is not None
        if positions:
            return msgspec.structs.replace(report, position=positions[-1])
        return msgspec.structs.replace(report, already_reconciled=True)

    def activate_candidate(
        self, candidate: UUID | str, decision: ActivationDecision, evidence: Sequence[str]
    ) -> ActivationResult:
        """Activate one candidate by hand (manual policy): requires ``manual`` or
        ``verification`` decision evidence; model confidence never suffices.

        :raises CommandRejectedError: decision ``auto``, empty evidence, an unknown candidate,
            or one already reconciled.
        """
        self._check_open()
        if decision not in ("manual", "verification"):
            msg = f"activation needs a manual or verification decision, got {decision!r}"
            raise CommandRejectedError(msg, "decision_not_allowed")
        proof = tuple(e for e in (str(x).strip() for x in evidence) if e)
        if not proof:
            raise CommandRejectedError("activation needs decision evidence", "missing_evidence")
        cid = UUID(str(candidate))
        self.refresh()
        found = [c for c in self.state.candidates if c.candidate_id == cid]
        if not found:
            msg = f"no candidate {cid} in session {self.session_id!r}"
            raise CommandRejectedError(msg, "unknown_candidate")
        extracted = found[0]
        result: dict[str, Any] = {}

        def plan() -> list[LedgerEvent]:
            reconciler = self._reconciler()
            target = reconciler.state(
                memory_id(self.namespace, normalize_statement(extracted.item.statement))
            )
            if target is not None and cid in target.candidate_ids:
                return []
            mid = reconciler.activate(
                extracted.item,
                turn_id=extracted.turn_id,
                source_id=cid,
                decision=decision,
                occurred_at=extracted.occurred_at,
                decision_evidence=proof,
            )
            result.update(memory_id=mid, superseded=tuple(reconciler.superseded))
            return reconciler.events

        positions = self._append_once(plan)
        if not positions:
            msg = f"candidate {cid} is already reconciled"
            raise CommandRejectedError(msg, "already_reconciled")
        return ActivationResult(
            candidate_id=cid,
            memory_id=result["memory_id"],
            decision=decision,
            superseded=result["superseded"],
            position=positions[-1],
        )

    # Admission and use --------------------------------------------------------------------

    def admit(self, turn_id: int, items: Sequence[Any]) -> AdmissionReport:
        """Record MemoryAdmitted for the memory items selected into a turn's context, and
        AdmissionRevoked for any admission of the turn whose revision is no longer the
        active one (before the model call).

        ``items``: RecallHit, context items with ``memory_id``/``revision``, or
        ``(memory_id, revision)`` pairs. Session facts (no revision) are skipped: only
        canonical memory is admitted.
        """
        self._check_open()
        check_turn_id(turn_id)
        wanted: list[tuple[UUID, int, int]] = []
        skipped: list[str] = []
        for entry in items:
            if isinstance(entry, tuple):
                mid, revision, tokens = entry[0], entry[1], 0
            else:
                mid = getattr(entry, "memory_id", None)
                revision = getattr(entry, "revision", None)
                text = getattr(entry, "statement", None) or getattr(entry, "text", "") or ""
                tokens = (len(text) + 3) // 4
            if mid is None or revision is None:
                skipped.append(str(mid))
                continue
            wanted.append((UUID(str(mid)), int(revision), tokens))
        admitted: list[tuple[UUID, int]] = []
        revoked: list[tuple[UUID, int]] = []

        def plan() -> list[LedgerEvent]:
            admitted.clear()
            revoked.clear()
            self._start_plan()
            events: list[LedgerEvent] = []
            current: dict[UUID, tuple[int, bool]] = {}

            def state_of(mid: UUID) -> tuple[int, bool]:
                if mid not in current:
                    state = fold_memory_stream(self.engine.load_stream(mid))
                    current[mid] = (state.version, state.retrievable) if state else (0, False)
                return current[mid]

            for mid, revision, tokens in wanted:
                existing = self.state.admissions.get((turn_id, mid))
                if existing is None or existing.revision != revision or existing.revoked:
                    events.append(
                        MemoryAdmitted(
                            **self._base(),
                            turn_id=turn_id,
                            memory_id=mid,
                            revision=revision,
                            estimated_tokens=tokens,
                        )
                    )
                    admitted.append((mid, revision))
            check = {(m, r) for m, r, _ in wanted}
            check |= {
                (a.memory_id, a.revision)
                for (t, _), a in self.state.admissions.items()
                if t == turn_id and not a.revoked
            }
            for mid, revision in sorted(check, key=lambda p: (str(p[0]), p[1])):
                version, retrievable = state_of(mid)
                if not retrievable or version != revision:
                    events.append(
                        AdmissionRevoked(
                            **self._base(),
                            turn_id=turn_id,
                            memory_id=mid,
                            revision=revision,
                            reason="inactive" if not retrievable else "stale_revision",
                        )
                    )
                    revoked.append((mid, revision))
            return events

        positions = self._append_once(plan)
        return AdmissionReport(
            admitted=tuple(admitted),
            revoked=tuple(revoked),
            skipped=tuple(skipped),
            position=positions[-1] if positions else 0,
        )

    def record_use(self, turn_id: int, memory_id: UUID | str) -> int:
        """Record that an admitted memory was actually used in a turn; return the position.

        :raises NotAdmittedError: the memory has no live admission in that turn.
        """
        self._check_open()
        check_turn_id(turn_id)
        mid = UUID(str(memory_id))
        admission = self.refresh().admissions.get((turn_id, mid))
        if admission is None or admission.revoked:
            msg = f"memory {mid} has no live admission in turn {turn_id}"
            raise NotAdmittedError(msg)

        def plan() -> list[LedgerEvent]:
            self._start_plan()
            return [
                MemoryUsed(
                    **self._base(), turn_id=turn_id, memory_id=mid, revision=admission.revision
                )
            ]

        return self._append_once(plan)[-1]

    # Curation -----------------------------------------------------------------------------

    def prune(
        self,
        *,
        older_than: datetime | None = None,
        max_importance: float = 0.75,
        max_uses: int = 2,
    ) -> list[UUID]:
        """Prune stale, low-importance memories of this namespace (MemoryPruned).

        Never prunes pinned items, frequently recalled/admitted/used ones (more than
        ``max_uses``), consolidated ones (reinforced, or superseding another) or ones carrying
        relations (supersedes, conflicts). ``older_than`` bounds the last update (recorded
        time); None means any age. Returns the pruned memory ids.
        """
        self._check_open()
        ns = self.namespace
        self.engine.catch_up()
        rows = self.engine.canonical.prunable(
            ns.tenant, ns.principal, ns.scope_id, max_importance, max_uses
        )
        if older_than is not None:
            rows = [r for r in rows if r["activated_at"] is None or r["activated_at"] < older_than]
        pruned: list[UUID] = []

        def plan() -> list[LedgerEvent]:
            pruned.clear()
            events: list[LedgerEvent] = []
            at = _now()
            for row in rows:
                mid = UUID(row["memory_id"])
                state = fold_memory_stream(self.engine.load_stream(mid))
                if state is None or state.status != "active" or state.pinned:
                    continue
                events.append(
                    MemoryPruned(
                        originator_id=mid,
                        originator_version=state.version + 1,
                        recorded_at=at,
                        namespace=ns,
                        session_id=self.session_id,
                        rule=f"importance<{max_importance},uses<={max_uses}",
                    )
                )
                pruned.append(mid)
            return events

        self._append_once(plan)
        return list(pruned)

    # Lifecycle ----------------------------------------------------------------------------

    def wait_for_extractions(self, timeout: float | None = None) -> list[int]:
        """Wait for queued background extractions; return the turns still unfinished."""
        futures = {t: f for t, f in self._queued.items() if not f.done()}
        if futures:
            wait_futures(list(futures.values()), timeout=timeout)
        return sorted(t for t, f in futures.items() if not f.done())

    def close(self) -> None:
        """Wait up to 5 seconds for accepted background extraction, record what was
        abandoned (ExtractionAbandoned), flush buffered reads, and end this session object.
        The engine stays open; the session can be reopened."""
        if self._closed:
            return
        unfinished = self.wait_for_extractions(CLOSE_WAIT_SECONDS)
        if unfinished:

            def abandoned() -> list[LedgerEvent]:
                self._start_plan()
                return [
                    ExtractionAbandoned(**self._base(), turn_id=turn, reason="close() waited 5 s")
                    for turn in unfinished
                    if turn not in self.state.extracted and turn not in self.state.abandoned
                ]

            self._append_once(abandoned)
        if self._flusher is not None:
            self._flusher.join(CLOSE_WAIT_SECONDS)
        self.flush_reads()
        if self._queue is not None:
            self._queue.shutdown(wait=False, cancel_futures=True)
        self._closed = True

    def __enter__(self) -> MemorySession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
