"""Evidence and extraction of a session: observe a finalized turn, extract, queue.

``observe_final_transcript`` is two commands by design (docs/design.md): the evidence
(TranscriptObserved) first, then the extraction outcome of the turn in one transaction. In
``background`` mode the extraction runs afterwards in a FIFO queue (one worker) of the session.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from datetime import datetime
from typing import Any, Literal

import msgspec

from memory_ledger.commands.errors import (
    ExtractionFailedError,
    SessionSealedError,
    TranscriptTooLargeError,
    TurnConflictError,
)
from memory_ledger.commands.extraction.base import ExtractionRequest, RelatedMemory, pending_because
from memory_ledger.commands.extraction.validation import Rejection, cited_ids, validate_item
from memory_ledger.commands.secrets import redact
from memory_ledger.commands.session.stream import check_turn_id
from memory_ledger.commands.session.vocabulary import SessionVocabulary
from memory_ledger.commands.telemetry.spans import traced
from memory_ledger.ledger.arguments import check_aware, check_encodable, check_timeout
from memory_ledger.ledger.errors import InvalidArgumentTypeError
from memory_ledger.ledger.events import (
    CandidateExtracted,
    CandidateRejected,
    ExtractedItem,
    ExtractionCompleted,
    LedgerEvent,
    PendingExtraction,
    TranscriptObserved,
)
from memory_ledger.ledger.ids import candidate_id

__all__ = ["SessionExtraction", "TurnOutcome"]


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


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SessionExtraction:
    """Evidence first, then extraction (blocking, or queued in the background).

    :param vocabulary: the session's vocabulary concern (the predicates an extractor is
        shown; its recall concern gives related memories and visible ids).
    :param extraction_mode: ``blocking`` or ``background`` (a FIFO queue of this session).
    """

    def __init__(
        self,
        vocabulary: SessionVocabulary,
        extraction_mode: Literal["blocking", "background"],
    ) -> None:
        self.vocabulary = vocabulary
        self.recall = vocabulary.recall
        self.stream = vocabulary.stream
        self.extraction_mode: Literal["blocking", "background"] = extraction_mode
        self._queue: ThreadPoolExecutor | None = None
        self.queued: dict[int, Future[TurnOutcome]] = {}
        """Background extractions of this process, by turn."""
        self._extraction_failures: dict[int, PendingExtraction] = {}

    def observe_final_transcript(
        self, turn_id: int, transcript: str, occurred_at: datetime | None = None
    ) -> TurnOutcome:
        """Record a finalized turn and extract its candidates (:meth:`_observe` says how
        and what it raises), in a ``create_memory`` span (docs/observability.md)."""
        with traced(self.stream.engine, "session.turn", self.stream.namespace) as span:
            return span.result(self._observe(turn_id, transcript, occurred_at))

    def _observe(
        self, turn_id: int, transcript: str, occurred_at: datetime | None = None
    ) -> TurnOutcome:
        """Record a finalized turn (evidence first), then extract and record the outcome.

        Two commands by design (docs/design.md): TranscriptObserved (the transcript
        with secret-shaped spans redacted), then every CandidateExtracted/CandidateRejected
        of the turn with ExtractionCompleted in one transaction. Observing the same turn again
        with the same transcript is a no-op (a pending extraction is completed).

        :raises TurnConflictError: the turn was observed with a different transcript.
        :raises SessionSealedError: the session was finished or closed.
        :raises ExtractionFailedError: the extractor raised (blocking mode); the evidence is
            recorded and the extraction pending.
        :raises InvalidArgumentError: (a ``ValueError``) ``turn_id`` is negative,
            ``transcript`` is not a string, or ``occurred_at`` is a naive datetime.
        :raises TranscriptTooLargeError: ``transcript`` is larger than
            ``memory.max_transcript_bytes`` (UTF-8; default 1 MiB); nothing is recorded.

        ``occurred_at`` is when the turn happened in the conversation (valid time: it orders
        supersession, see ``commands.canonical.reconcile``); it must be time-zone aware.
        """
        self.stream.check_open()
        check_turn_id(turn_id)
        if not isinstance(transcript, str):
            msg = f"transcript must be a string, got {type(transcript).__name__}"
            raise InvalidArgumentTypeError(msg, parameter="transcript", reason_code="not_a_string")
        size = len(transcript.encode("utf-8", "surrogatepass"))
        if size > self.stream.config().max_transcript_bytes:
            raise TranscriptTooLargeError(size, self.stream.config().max_transcript_bytes)
        check_encodable("transcript", transcript)
        if occurred_at is not None:
            check_aware("occurred_at", occurred_at)
        redaction = redact(transcript)
        digest = _digest(redaction.text)
        with self.stream.lock:
            self.stream.refresh()
            already = turn_id in self.stream.state.observed
            if already and self.stream.state.observed[turn_id].digest != digest:
                msg = (
                    f"session {self.stream.session_id!r} turn {turn_id} was observed before with a "
                    "different transcript"
                )
                raise TurnConflictError(msg)
            if not already and self.stream.state.sealed:
                msg = (
                    f"session {self.stream.session_id!r} is finished; "
                    f"turn {turn_id} is not accepted"
                )
                raise SessionSealedError(msg)

            def evidence() -> list[LedgerEvent]:
                if turn_id in self.stream.state.observed:
                    return []
                self.stream.start_plan()
                return [
                    TranscriptObserved(
                        **self.stream.envelope(),
                        turn_id=turn_id,
                        transcript=redaction.text,
                        digest=digest,
                        occurred_at=occurred_at,
                        redactions=redaction.count,
                    )
                ]

            evidence_positions = self.stream.append_once(evidence)
            evidence_position = evidence_positions[-1] if evidence_positions else 0
            pending = turn_id not in self.stream.state.extracted
            if (
                pending
                and self.stream.config().llm_extraction
                and self.extraction_mode == "background"
            ):
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
        outcome = self.extract(turn_id) if pending else None
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
        events = (
            self.stream.state.candidates
            if cls is CandidateExtracted
            else self.stream.state.rejected
        )
        return sum(1 for e in events if e.turn_id == turn_id)

    def _related(self, transcript: str) -> tuple[RelatedMemory, ...]:
        """Up to 5 memories related to the transcript, for the extractor. Lexical only: the
        command path never waits for an embedding provider."""
        ranked, _, _ = self.stream.engine.canonical_candidates(
            self.stream.namespace, transcript[:2000], 5, semantic=False
        )
        return tuple(
            RelatedMemory(memory_id=doc.memory_id, statement=doc.statement) for doc, _ in ranked
        )

    def extract(self, turn_id: int) -> TurnOutcome:
        """Run the extractor on an observed turn and record its outcome (one transaction)."""
        with self.stream.lock:
            observed = self.stream.state.observed[turn_id]
            if turn_id in self.stream.state.extracted:
                return self._outcome(turn_id, 0)
        raw_items: list[Any] = []
        related: tuple[RelatedMemory, ...] = ()
        wants_context = getattr(self.stream.extractor, "uses_context", True)
        if self.stream.config().llm_extraction:
            related = self._related(observed.transcript) if wants_context else ()
            request = ExtractionRequest(
                session_id=self.stream.session_id,
                turn_id=turn_id,
                transcript=observed.transcript[
                    : self.stream.config().llm_extraction_max_input_chars
                ],
                related=related,
                known_predicates=tuple(self.vocabulary.known_predicates()) if wants_context else (),
            )
            try:
                raw_items = list(self.stream.extractor.extract(request))
            except Exception as e:
                if getattr(e, "retryable", True) is False:
                    # Malformed model output: recorded as one rejection, nothing else lost.
                    code = str(getattr(e, "reason_code", "malformed_output"))
                    malformed = Rejection(f"model_{code}", f"{type(e).__name__}: {code}")
                    return self._record_extraction(observed, [malformed], frozenset())
                msg = (
                    f"extractor {self.stream.extractor.extractor_id!r} failed on session "
                    f"{self.stream.session_id!r} turn {turn_id}; its evidence is recorded and its "
                    f"extraction is pending (retry the turn): {type(e).__name__}: {e}"
                )
                self._extraction_failures[turn_id] = pending_because(turn_id, e)
                raise ExtractionFailedError(msg) from e
        relation_ids = frozenset(r.memory_id for r in related)
        if not wants_context:
            # Items given up front (a recorded extractor) were shown no related memories:
            # the ids they cite must name memories this session can see.
            relation_ids = self._visible_ids(cited_ids(raw_items))
        return self._record_extraction(observed, raw_items, relation_ids)

    def _visible_ids(self, ids: set[str]) -> frozenset[str]:
        """The ``ids`` that name a retrievable memory of the namespace or a session fact."""
        if not ids:
            return frozenset()
        visible = {doc.memory_id for doc in self.recall.canonical_docs()}
        visible.update(doc.memory_id for doc in self.recall.overlay().docs)
        return frozenset(ids & visible)

    def _record_extraction(
        self, observed: TranscriptObserved, raw_items: list[Any], relation_ids: frozenset[str]
    ) -> TurnOutcome:
        turn_id = observed.turn_id

        def extraction() -> list[LedgerEvent]:
            if turn_id in self.stream.state.extracted:
                return []
            return self._extraction_events(observed, raw_items, relation_ids)

        positions = self.stream.append_once(extraction)
        self._extraction_failures.pop(turn_id, None)
        return self._outcome(turn_id, positions[-1] if positions else 0)

    def _outcome(self, turn_id: int, position: int) -> TurnOutcome:
        observed = self.stream.state.observed[turn_id]
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
        self.stream.start_plan()
        events: list[LedgerEvent] = []
        extracted = rejected = 0
        limit = self.stream.config().llm_extraction_max_items
        extractor_id = self.stream.extractor.extractor_id
        for index, raw in enumerate(raw_items):
            cid = candidate_id(self.stream.stream_id, observed.turn_id, index)
            outcome: ExtractedItem | Rejection
            if isinstance(raw, Rejection):
                outcome = raw
            elif index >= limit:
                outcome = Rejection("too_many_items", f"item {index + 1} exceeds the limit {limit}")
            else:
                outcome = validate_item(raw, relation_ids=relation_ids)
            common = {
                **self.stream.envelope(),
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
                **self.stream.envelope(),
                turn_id=observed.turn_id,
                extractor_id=extractor_id,
                extracted=extracted,
                rejected=rejected,
            )
        )
        return events

    def _enqueue_extraction(self, turn_id: int) -> None:
        if turn_id in self.queued and not self.queued[turn_id].done():
            return
        if self._queue is None:
            self._queue = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"extract-{self.stream.session_id}"
            )
        self.queued[turn_id] = self._queue.submit(self.extract, turn_id)

    def pending_extractions(self) -> list[int]:
        """Turns with recorded evidence whose extraction is not recorded (retry them)."""
        return self.stream.refresh().pending_extractions()

    def pending_extraction_causes(self) -> tuple[PendingExtraction, ...]:
        """:meth:`pending_extractions` with why each is pending: the error the extractor
        raised in this process (its ``reason_code``, e.g. ``unreachable``), ``abandoned``
        (``close()`` stopped waiting) or ``not_attempted`` (no attempt in this process)."""
        causes = []
        for turn in self.pending_extractions():
            failure = self._extraction_failures.get(turn)
            if failure is None and turn in self.stream.state.abandoned:
                failure = PendingExtraction(
                    turn_id=turn, reason_code="abandoned", detail="close() stopped waiting"
                )
            if failure is None:
                running = turn in self.queued and not self.queued[turn].done()
                failure = PendingExtraction(
                    turn_id=turn,
                    reason_code="running" if running else "not_attempted",
                    detail="" if running else "evidence recorded; extraction never completed",
                )
            causes.append(failure)
        return tuple(causes)

    def wait_for_extractions(self, timeout: float | None = None) -> list[int]:
        """Wait for queued background extractions; return the turns still unfinished.

        :raises InvalidArgumentError: ``timeout`` is NaN, infinite or negative.
        """
        timeout = check_timeout("timeout", timeout)
        futures = {t: f for t, f in self.queued.items() if not f.done()}
        if futures:
            wait_futures(list(futures.values()), timeout=timeout)
        return sorted(t for t, f in futures.items() if not f.done())

    def shutdown(self) -> None:
        """Stop the extraction queue (queued work not started is cancelled)."""
        if self._queue is not None:
            self._queue.shutdown(wait=False, cancel_futures=True)

    def busy(self) -> bool:
        """Whether a background extraction of this process is queued or running."""
        return any(not f.done() for f in self.queued.values())
