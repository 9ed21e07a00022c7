"""``MemorySession``: the commands and reads of one logical conversation under a namespace.

The API of the seed crate's MemorySession (seed 004) plus the host conveniences of the A3S
SDK (seed 000). Every command appends its events in ONE durable LMDB write transaction before
it returns; a conflicting concurrent append (IntegrityError) refreshes the state from the
ledger and re-decides, so retries are idempotent. Read-path records (RecallServed) are
buffered: written with the next command's transaction, by ``on_turn_complete``/``close``,
or at most ``READ_FLUSH_SECONDS`` later, never with an fsync of their own on the recall path.

``MemorySession`` is a composition: one stream object (``stream.SessionStream``: the folded
state, the appends, the read buffer) and one object per concern, each in its own module,
each holding the stream and the concerns it reads (no concern inherits another); the session
builds them, wires them and exposes their public methods:

==============================  ==============================================================
``session_stream``              the session stream: folded state, one-transaction appends,
                                the read-record buffer (held by every concern)
``session_recall``              recall paths (snapshot / live / fused / scoped), overlay,
                                listings (recent, by tags, similar)
``session_vocabulary``          known predicates, values and statements
``session_extraction``          evidence first, then extraction (blocking or queued)
``session_turns``               prepare, begin_turn (frozen snapshots), on_turn_complete
``session_commands``            explicit commands (remember/forget/correct/pin), procedures,
                                pruning
``session_finish``              reconciliation driving: finish, activate_candidate
``session_admission``           admission and use of memory revisions in a turn
``session_knowledge``           exact knowledge binding: recorded at start, required on
                                resume, recall suppressed, bound context assembly
``session_workspace``           session-owned workspace retrieval (off by default)
``session_compaction``          recorded compaction of the host's history
``session`` (this module)       the composition, its construction and close()
==============================  ==============================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

from memory_ledger.commands.canonical.explicit_command import Intent
from memory_ledger.commands.config import MemoryConfig
from memory_ledger.commands.context.assembler import (
    BALANCED,
    AssembledContext,
    AssemblyPolicy,
    ContextProvider,
)
from memory_ledger.commands.context.chat_messages import ChatMessage
from memory_ledger.commands.context.compaction import CompactionPolicy, CompactionResult
from memory_ledger.commands.context.knowledge_binding import KnowledgeBindingError
from memory_ledger.commands.context.knowledge_context import BoundKnowledge
from memory_ledger.commands.context.summarizers import Summarizer
from memory_ledger.commands.extraction.base import Extractor
from memory_ledger.commands.recall.index import RecallHit, RecallResult, RecallScope
from memory_ledger.commands.session.admission import AdmissionReport, SessionAdmission
from memory_ledger.commands.session.commands import CommandResult, SessionCommands
from memory_ledger.commands.session.compaction import SessionCompaction
from memory_ledger.commands.session.extraction import SessionExtraction, TurnOutcome
from memory_ledger.commands.session.finish import ActivationResult, SessionFinish
from memory_ledger.commands.session.knowledge import SessionKnowledge
from memory_ledger.commands.session.overlay import Overlay
from memory_ledger.commands.session.recall import SessionRecall
from memory_ledger.commands.session.state import SessionState
from memory_ledger.commands.session.stream import SessionStream
from memory_ledger.commands.session.turns import (
    PreparedMemorySnapshot,
    ScheduledWork,
    SessionTurns,
)
from memory_ledger.commands.session.vocabulary import KnownValue, SessionVocabulary
from memory_ledger.commands.session.workspace import (
    SessionWorkspace,
    WorkspaceContextProvider,
    WorkspaceOptions,
)
from memory_ledger.commands.workspace.retrieval import WorkspaceRetrieval, WorkspaceStatus
from memory_ledger.commands.workspace.search import SearchMode, WorkspaceSearchResult
from memory_ledger.ledger.arguments import check_timeout
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.events import (
    ActivationDecision,
    ContextCompacted,
    ExplicitCommandApplied,
    ExtractedItem,
    ExtractionAbandoned,
    LedgerEvent,
    PendingExtraction,
    ReconciliationReport,
)
from memory_ledger.ledger.ids import Namespace, check_session_id
from memory_ledger.projections.tokens import TokenCounter

if TYPE_CHECKING:
    from memory_ledger.commands.store import MemoryStore

__all__ = [
    "ActivationResult",
    "AdmissionReport",
    "CommandResult",
    "KnownValue",
    "MemorySession",
    "PreparedMemorySnapshot",
    "ScheduledWork",
    "TurnOutcome",
    "WorkspaceOptions",
]

CLOSE_WAIT_SECONDS = 5.0


class MemorySession:
    """One logical conversation. Obtain it from :meth:`MemoryEngine.session`.

    The composition of the session's stream and concerns (see the module docstring): this
    class builds and wires them, exposes their public methods, and adds idleness and
    ``close``.

    :param extraction_mode: ``blocking`` (extraction finishes before
        ``observe_final_transcript`` returns) or ``background`` (evidence is durable on
        return; extraction runs afterwards in a FIFO queue of this session).
    :param token_counter: ``text -> estimated tokens`` (default: the engine's); sizes
        admissions and the memory map, and is the counter to give a ``ContextAssembler``.
    :param knowledge: an exact knowledge binding and its provider (recorded when the
        session starts; required, the same, on resume).
    :param workspace: workspace retrieval options (None: disabled).
    :param summarizer: the summarizer of :meth:`compact` (None: compaction refused).
    :param compaction: when and how far to compact (default: off).
    :raises InvalidArgumentError: (a ``ValueError``) ``session_id`` is invalid
        (:func:`~memory_ledger.ledger.ids.check_session_id`) or ``extraction_mode`` is
        unknown; ``parameter`` names it.
    :raises KnowledgeBindingError: a binding together with workspace retrieval
        (``provider_refused``), or a binding that does not match the session's record.
    """

    def __init__(
        self,
        engine: MemoryStore,
        namespace: Namespace,
        session_id: str,
        *,
        extractor: Extractor,
        config: MemoryConfig,
        extraction_mode: Literal["blocking", "background"] = "blocking",
        token_counter: TokenCounter | None = None,
        knowledge: BoundKnowledge | None = None,
        workspace: WorkspaceOptions | None = None,
        summarizer: Summarizer | None = None,
        compaction: CompactionPolicy | None = None,
    ) -> None:
        if knowledge is not None and workspace is not None:
            msg = "a session bound to a knowledge package accepts no workspace retrieval"
            raise KnowledgeBindingError("provider_refused", msg)
        if knowledge is not None and not isinstance(knowledge, BoundKnowledge):
            msg = "knowledge must be a BoundKnowledge(binding, provider)"
            raise KnowledgeBindingError("invalid_binding", msg)
        check_session_id(session_id)
        if extraction_mode not in ("blocking", "background"):
            msg = f"extraction_mode must be 'blocking' or 'background', got {extraction_mode!r}"
            raise InvalidArgumentError(msg, parameter="extraction_mode")
        self.stream = SessionStream(
            engine,
            namespace,
            session_id,
            extractor=extractor,
            config=config,
            token_counter=token_counter or engine.token_counter,
        )
        """The session stream every concern holds (state, appends, read buffer)."""
        self._recall = SessionRecall(self.stream)
        self._vocabulary = SessionVocabulary(self._recall)
        self._commands = SessionCommands(self._recall)
        self._admission = SessionAdmission(self.stream)
        self._extraction = SessionExtraction(self._vocabulary, extraction_mode)
        self._finish = SessionFinish(self._extraction)
        self._turns = SessionTurns(self._extraction)
        self._workspace = SessionWorkspace(self.stream)
        self._knowledge = SessionKnowledge(self._turns, self._workspace, knowledge)
        self._compaction = SessionCompaction(
            self.stream, summarizer, compaction or CompactionPolicy()
        )
        # What the session is (fixed for its life; the stream and concerns hold the same).
        self.engine = engine
        self.namespace = namespace
        self.session_id = session_id
        self.stream_id = self.stream.stream_id
        self.state = self.stream.state
        """The fold of the session stream as this process last read it."""
        self.extractor = extractor
        self.activation_policy = self.stream.activation_policy
        self.extraction_mode = extraction_mode
        self.token_counter = self.stream.token_counter
        self.knowledge = knowledge
        self.summarizer = summarizer
        self.compaction_policy = self._compaction.compaction_policy
        self.stream.refresh()
        self._knowledge.check_binding_on_open()
        self._workspace.prepare(workspace)  # a refused root raises before any event
        try:
            if self.stream.state.opened is None:
                self.stream.append_once(self._knowledge.opened_events)
            self._workspace.attach()
        except BaseException:
            self._workspace.discard()
            raise

    # What changes ------------------------------------------------------------------------

    @property
    def last_position(self) -> int:
        """The ledger position of this session's last append in this process (0: none)."""
        return self.stream.last_position

    @property
    def workspace(self) -> WorkspaceRetrieval | None:
        """The session's workspace retrieval (None: disabled or closed)."""
        return self._workspace.workspace

    def is_idle(self, idle_seconds: float = 300.0) -> bool:
        """Whether the session has had no activity for ``idle_seconds`` and no queued work:
        long enough to seal with ``finish()``.

        :raises InvalidArgumentError: ``idle_seconds`` is NaN, infinite or negative.
        """
        check_timeout("idle_seconds", idle_seconds, allow_none=False)
        return not self._extraction.busy() and self.stream.idle_for() >= idle_seconds

    def close(self) -> None:
        """Wait up to 5 seconds for accepted background extraction, record what was
        abandoned (ExtractionAbandoned), close workspace retrieval (WorkspaceReleased),
        flush buffered reads, and end this session object.
        The engine stays open; the session can be reopened."""
        stream = self.stream
        if stream.closed:
            return
        unfinished = self._extraction.wait_for_extractions(CLOSE_WAIT_SECONDS)
        if unfinished:

            def abandoned() -> list[LedgerEvent]:
                stream.start_plan()
                return [
                    ExtractionAbandoned(
                        **stream.envelope(), turn_id=turn, reason="close() waited 5 s"
                    )
                    for turn in unfinished
                    if turn not in stream.state.extracted and turn not in stream.state.abandoned
                ]

            stream.append_once(abandoned)
        self._workspace.close()
        stream.join_flusher(CLOSE_WAIT_SECONDS)
        stream.flush_reads()
        self._extraction.shutdown()
        stream.closed = True

    def __enter__(self) -> MemorySession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # SessionStream -------------------------------------------------------------------
    def config(self) -> MemoryConfig:
        """The runtime configuration this session was opened with."""
        return self.stream.config()

    def refresh(self) -> SessionState:
        """Fold events of the session stream not seen yet (another process may have written),
        with their ledger positions (the positions of evidence: transcripts, commands)."""
        return self.stream.refresh()

    def flush_reads(self) -> int:
        """Write buffered RecallServed records now (one transaction); return how many."""
        return self.stream.flush_reads()

    # SessionRecall -------------------------------------------------------------------
    def overlay(self) -> Overlay:
        """The session facts and what they hide (cached per session version)."""
        return self._recall.overlay()

    def recall(
        self,
        query: str,
        turn_id: int | None = None,
        k: int | None = None,
        *,
        record: bool = True,
    ) -> RecallResult:
        """Serve a ``recall`` tool call.

        Reads the turn's frozen snapshot when it plainly covers the query; otherwise runs a
        live search and fuses the snapshot into it (RRF, k = 60). Records RecallServed
        unless ``record`` is False (a replay that must write nothing, e.g. a re-run).

        :raises RecallLimitError: ``k`` is above ``recall_max_k`` (``k_too_large``).
        """
        return self._recall.recall(query, turn_id, k, record=record)

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

        :raises RecallLimitError: ``k`` is above ``recall_max_k`` (``k_too_large``).
        """
        return self._recall.recall_scoped(query, turn_id, scope, about, attribute, k)

    def memory_map(self) -> str:
        """The vocabulary a model needs to fill recall's about/attribute fields."""
        return self._recall.memory_map()

    def recall_similar(self, query: str, k: int = 5) -> list[RecallHit]:
        """Canonical and session memories similar to ``query`` (live BM25, fused)."""
        return self._recall.recall_similar(query, k)

    def memory_recent(self, k: int = 10) -> list[RecallHit]:
        """The ``k`` most recent retrievable memories (session facts first)."""
        return self._recall.memory_recent(k)

    def recall_by_tags(self, tags: Sequence[str], k: int = 10) -> list[RecallHit]:
        """Retrievable memories carrying any of ``tags``: most matching tags first, then the
        most recent."""
        return self._recall.recall_by_tags(tags, k)

    # SessionVocabulary ---------------------------------------------------------------
    def known_predicates(self) -> list[str]:
        """Predicate names this user's memory already uses: session facts first (a correction
        usually chases something said minutes ago), then canonical ones by frequency;
        at most 50."""
        return self._vocabulary.known_predicates()

    def known_values(self) -> list[KnownValue]:
        """The (subject, predicate, value) facts memory can currently assert; session facts
        shadow canonical ones for the same subject and predicate."""
        return self._vocabulary.known_values()

    def known_statements(self) -> list[str]:
        """Every statement currently retrievable, provisional (session) and canonical."""
        return self._vocabulary.known_statements()

    # SessionCommands -----------------------------------------------------------------
    def pending_explicit_commands(self) -> list[ExplicitCommandApplied]:
        """The explicit commands of this session not yet reconciled into canonical memory."""
        return self._commands.pending_explicit_commands()

    def apply_explicit_command(
        self,
        intent: Intent,
        statement: str,
        turn_id: int,
        *,
        item: ExtractedItem | dict[str, Any] | None = None,
        target: UUID | str | None = None,
        occurred_at: datetime | None = None,
    ) -> CommandResult:
        """Apply an explicit memory command from the user (remember, forget, correct, pin).

        The event is appended before the session overlay changes; it takes effect in this
        session at once and in canonical memory at ``finish()``. The command is decided as on
        every surface (:func:`~memory_ledger.commands.canonical.explicit_command.decide_command`):
        ``target`` names the memory of a forget/pin/correct by id; without it, a
        ``forget``/``pin`` targets the one retrievable memory (canonical or this session's)
        holding every content word of ``statement``, and a ``correct`` the one about the same
        subject and attribute with another value (a correction naming no memory is simply
        remembered; :mod:`~memory_ledger.commands.canonical.word_targets`). ``correct`` keeps the
        target's subject and predicate so it supersedes it. ``item`` lets a host give the
        structured memory for remember/correct.

        ``occurred_at`` (an aware datetime) is when the user said it in the conversation;
        when None, the ``occurred_at`` of turn ``turn_id``'s transcript if this session
        observed it already, else unknown. It is recorded in the command and gives a
        ``forget`` its time: evidence whose valid time is earlier than the forget's time
        (this ``occurred_at``, else the command's ``recorded_at``) never re-activates the
        forgotten memory (``commands.canonical.reconcile``, rule "a forget is never undone by older
        evidence"). For a ``remember``/``correct`` it is the new value's valid time: an
        older value imported later never retires it (without a time, ledger order decides);
        against a forget only the command's position counts (a new statement by the user).

        :raises CommandRejectedError: unknown intent, empty statement, a secret in it, or an
            item that fails validation (the reason code is in the message).
        :raises UnknownMemoryError: ``target`` names no retrievable memory of this
            session's namespace (another namespace's id behaves exactly like an unknown one);
            or the words name none clearly (``no_match``, ``no_clear_target``) or several
            (``ambiguous_match``): nothing is recorded.
        :raises SupersededTargetError: ``target`` was superseded (``current`` names the
            memory that holds the fact now).
        :raises InvalidArgumentTypeError: ``occurred_at`` is not a datetime.
        :raises NaiveDatetimeError: ``occurred_at`` has no time zone.
        """
        return self._commands.apply_explicit_command(
            intent, statement, turn_id, item=item, target=target, occurred_at=occurred_at
        )

    def remember_success(self, task: str, tools: Sequence[str], outcome: str) -> CommandResult:
        """Record a reusable workflow that worked (procedural memory, explicit)."""
        return self._commands.remember_success(task, tools, outcome)

    def remember_failure(self, task: str, error: str, tools: Sequence[str]) -> CommandResult:
        """Record a failure lesson (procedural memory, explicit)."""
        return self._commands.remember_failure(task, error, tools)

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
        time, an aware datetime); None means any age. Candidates come from the read model;
        each one is re-checked against its ledger history and the prunes are appended under
        their append condition (``commands.canonical.boundary``). Returns the pruned memory ids.

        :raises NaiveDatetimeError: (an ``InvalidArgumentError``) ``older_than`` is naive.
        :raises InvalidArgumentTypeError: ``older_than`` is not a datetime.
        """
        return self._commands.prune(
            older_than=older_than, max_importance=max_importance, max_uses=max_uses
        )

    # SessionAdmission ----------------------------------------------------------------
    def admit(self, turn_id: int, items: Sequence[Any]) -> AdmissionReport:
        """Record MemoryAdmitted for the memory items selected into a turn's context, and
        AdmissionRevoked for any admission of the turn whose revision is no longer the
        active one (before the model call).

        ``items``: RecallHit, context items with ``memory_id``/``revision``, or
        ``(memory_id, revision)`` pairs. Session facts (no revision) are skipped: only
        canonical memory is admitted. The memories' states are read from the ledger and the
        records appended under their append condition (``commands.canonical.boundary``).

        :raises UnknownMemoryError: an item names no memory of this session's namespace (an
            id of another namespace gets exactly this error), or (``not_a_memory_id``) its
            memory id is not a UUID; nothing is recorded.
        """
        return self._admission.admit(turn_id, items)

    def record_use(self, turn_id: int, memory_id: UUID | str) -> int:
        """Record that an admitted memory was actually used in a turn; return the position.

        :raises UnknownMemoryError: no memory of this session's namespace has that id (an
            id of another namespace gets exactly this error).
        :raises NotAdmittedError: the memory has no live admission in that turn.
        """
        return self._admission.record_use(turn_id, memory_id)

    # SessionExtraction ---------------------------------------------------------------
    def observe_final_transcript(
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
        return self._extraction.observe_final_transcript(turn_id, transcript, occurred_at)

    def pending_extractions(self) -> list[int]:
        """Turns with recorded evidence whose extraction is not recorded (retry them)."""
        return self._extraction.pending_extractions()

    def pending_extraction_causes(self) -> tuple[PendingExtraction, ...]:
        """:meth:`pending_extractions` with why each is pending: the error the extractor
        raised in this process (its ``reason_code``, e.g. ``unreachable``), ``abandoned``
        (``close()`` stopped waiting) or ``not_attempted`` (no attempt in this process)."""
        return self._extraction.pending_extraction_causes()

    def wait_for_extractions(self, timeout: float | None = None) -> list[int]:
        """Wait for queued background extractions; return the turns still unfinished.

        :raises InvalidArgumentError: ``timeout`` is NaN, infinite or negative.
        """
        return self._extraction.wait_for_extractions(timeout)

    # SessionFinish -------------------------------------------------------------------
    def finish(self, *, allow_pending: bool = False) -> ReconciliationReport:
        """Seal the session and reconcile its candidates and commands, exactly once.

        Appends SessionSealed, the memory events and SessionReconciled in one transaction.
        Waits for queued background extractions first. A turn whose extraction is still
        pending (the extractor failed) would never become memory once the session is
        sealed, so by default nothing is written and :class:`ExtractionPendingError` names
        the turns and causes: retry them (``observe_final_transcript`` with the same
        transcript), then finish. ``allow_pending=True`` seals anyway; the report's
        ``pending_extractions`` then names the turns left out. Calling it again (in any
        process) returns the recorded report with ``already_reconciled=True`` and writes
        nothing.

        :raises ExtractionPendingError: turns are pending extraction and ``allow_pending``
            is False (nothing written).
        """
        return self._finish.finish(allow_pending=allow_pending)

    def activate_candidate(
        self, candidate: UUID | str, decision: ActivationDecision, evidence: Sequence[str]
    ) -> ActivationResult:
        """Activate one candidate by hand (manual policy): requires ``manual`` or
        ``verification`` decision evidence; model confidence never suffices.

        :raises CommandRejectedError: decision ``auto``, empty evidence, an unknown candidate,
            one already reconciled, or one whose evidence predates its memory's forget
            (reason ``evidence_predates_forget``: observed before it;
            ``evidence_older_than_forget``: its ``occurred_at`` is earlier than the forget's
            time, see ``commands.canonical.reconcile``).
        """
        return self._finish.activate_candidate(candidate, decision, evidence)

    # SessionTurns --------------------------------------------------------------------
    def on_turn_complete(self, turn_id: int) -> list[ScheduledWork]:
        """Complete a turn: record TurnCompleted (with buffered reads), retry any pending
        extraction, and return the work scheduled and run."""
        return self._turns.on_turn_complete(turn_id)

    def current_turn(self) -> int | None:
        """The turn in flight (the last ``begin_turn``), or None."""
        return self._turns.current_turn()

    def begin_turn(self, turn_id: int) -> int:
        """Freeze the prepared snapshot for a turn that is starting; return its generation.

        Everything the turn is answered with comes from this snapshot (or a live search fused
        with it), so a retrieval landing mid-response cannot change what was remembered.
        """
        return self._turns.begin_turn(turn_id)

    def active_snapshot(self) -> PreparedMemorySnapshot:
        """The snapshot the current turn is being answered from (empty if none)."""
        return self._turns.active_snapshot()

    def prepared_snapshot(self) -> PreparedMemorySnapshot:
        """The most recently prepared snapshot, whether or not a turn is using it."""
        return self._turns.prepared_snapshot()

    # SessionKnowledge ----------------------------------------------------------------
    def prepare(self, turn_id: int, transcript: str) -> PreparedMemorySnapshot:
        """As :meth:`SessionTurns.prepare`; a bound session freezes an empty snapshot
        (memory recall is suppressed, the turn protocol goes on)."""
        return self._knowledge.prepare(turn_id, transcript)

    def assemble_context(
        self,
        turn_id: int,
        query: str,
        providers: Sequence[ContextProvider] = (),
        *,
        policy: AssemblyPolicy = BALANCED,
        memory: bool = True,
        memory_failure: Literal["fail_open", "fail_closed"] = "fail_open",
    ) -> AssembledContext:
        """The turn's context.

        Bound: the package's validated documents only (``providers`` must be empty), and
        KnowledgeServed records the documents selected. Unbound: memory recall (unless
        ``memory`` is False), the workspace (when attached) and ``providers``, through
        :class:`~commands.context.assembler.ContextAssembler`.

        :raises KnowledgeBindingError: bound and ``providers`` given (``provider_refused``),
            or the package request failed (fail closed; nothing else is consulted).
        :raises ContextProviderError: a fail-closed provider failed (unbound).
        """
        return self._knowledge.assemble_context(
            turn_id, query, providers, policy=policy, memory=memory, memory_failure=memory_failure
        )

    # SessionWorkspace ----------------------------------------------------------------
    @property
    def workspace_modes(self) -> tuple[SearchMode, ...]:
        """Search modes offered to the model: none without a workspace, ``lexical``, or all
        three with an embedding provider."""
        return self._workspace.workspace_modes

    def workspace_status(self) -> WorkspaceStatus:
        """The workspace status (``disabled`` for a session without one)."""
        return self._workspace.workspace_status()

    def wait_for_workspace(self, timeout: float = 30.0) -> WorkspaceStatus:
        """Wait for the workspace index to be ready (at most ``timeout`` seconds; seed 002:
        30 s by default); the partial index keeps serving after a timeout."""
        return self._workspace.wait_for_workspace(timeout)

    def workspace_provider(self, k: int = 4) -> WorkspaceContextProvider:
        """This session's workspace as a context provider.

        :raises WorkspaceError: ``disabled`` without a workspace.
        """
        return self._workspace.workspace_provider(k)

    def search_workspace(
        self, query: str, mode: SearchMode = "lexical", k: int = 8, *, turn_id: int | None = None
    ) -> WorkspaceSearchResult:
        """Search the session's workspace (verified results; see
        :meth:`WorkspaceRetrieval.search`) and record what was served.

        :raises WorkspaceError: ``disabled``, ``mode_unavailable``, ``closed``, ``bad_query``.
        """
        return self._workspace.search_workspace(query, mode, k, turn_id=turn_id)

    # SessionCompaction ---------------------------------------------------------------
    @property
    def compactions(self) -> list[ContextCompacted]:
        """The session's ContextCompacted events, oldest first (read from the ledger)."""
        return self._compaction.compactions

    def compact(
        self,
        messages: Sequence[ChatMessage | dict[str, object]],
        *,
        turn_id: int | None = None,
        fixed_tokens: int = 0,
        force: bool = False,
        max_context_tokens: int | None = None,
    ) -> CompactionResult | None:
        """Compact ``messages`` when they reach the policy's trigger (or ``force``) and
        record ContextCompacted; None when compaction is off or not due.

        :param max_context_tokens: the window when the policy sets none (e.g. the model's).
        :raises CompactionError: ``no_summarizer`` (the session was opened without one),
            ``conflict`` (another process recorded this generation first), or any error of
            :func:`~commands.context.compaction.compact_history`; nothing is recorded then.
        """
        return self._compaction.compact(
            messages,
            turn_id=turn_id,
            fixed_tokens=fixed_tokens,
            force=force,
            max_context_tokens=max_context_tokens,
        )
