"""``MemorySession``: the commands and reads of one logical conversation under a namespace.

The API of the seed crate's MemorySession (seed 004) plus the host conveniences of the A3S
SDK (seed 000). Every command appends its events in ONE durable LMDB write transaction before
it returns; a conflicting concurrent append (IntegrityError) refreshes the state from the
ledger and re-decides, so retries are idempotent. Read-path records (RecallServed) are
buffered: written with the next command's transaction, by ``on_turn_complete``/``close``,
or at most ``READ_FLUSH_SECONDS`` later, never with an fsync of their own on the recall path.

``MemorySession`` is a thin composition; each concern lives in its own module:

==============================  ==============================================================
``session_stream``              the session stream: folded state, one-transaction appends,
                                the read-record buffer (the base of every concern)
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

import itertools
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Literal
from uuid import UUID

from memory_ledger.commands.config import MemoryConfig
from memory_ledger.commands.context.compaction import CompactionPolicy
from memory_ledger.commands.context.knowledge_binding import KnowledgeBindingError
from memory_ledger.commands.context.knowledge_context import BoundKnowledge
from memory_ledger.commands.context.summarizers import Summarizer
from memory_ledger.commands.extraction.base import Extractor
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
from memory_ledger.commands.session.workspace import SessionWorkspace, WorkspaceOptions
from memory_ledger.ledger.arguments import check_timeout
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.events import ExtractionAbandoned, LedgerEvent, PendingExtraction
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


class MemorySession(
    SessionKnowledge,
    SessionWorkspace,
    SessionCompaction,
    SessionTurns,
    SessionFinish,
    SessionExtraction,
    SessionVocabulary,
    SessionCommands,
    SessionRecall,
    SessionAdmission,
    SessionStream,
):
    """One logical conversation. Obtain it from :meth:`MemoryEngine.session`.

    The composition of the session's concerns (see the module docstring); this class adds
    only its construction, idleness and ``close``.

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
        self.token_counter = token_counter or engine.token_counter
        self.engine = engine
        self.namespace = namespace
        self.session_id = session_id
        self.stream_id: UUID = engine.keyring.digests.session_stream_id(namespace, session_id)
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
        self._extraction_failures: dict[int, PendingExtraction] = {}
        self._last_activity = time.monotonic()
        self._closed = False
        self._overlay: tuple[int, Overlay] | None = None
        self.knowledge = knowledge
        self.workspace = None
        self.summarizer = summarizer
        self.compaction_policy = compaction or CompactionPolicy()
        self.refresh()
        self._check_binding_on_open()
        if self.state.opened is None:
            self._append_once(self._opened_events)
        self._attach_workspace(workspace)

    def is_idle(self, idle_seconds: float = 300.0) -> bool:
        """Whether the session has had no activity for ``idle_seconds`` and no queued work:
        long enough to seal with ``finish()``.

        :raises InvalidArgumentError: ``idle_seconds`` is NaN, infinite or negative.
        """
        check_timeout("idle_seconds", idle_seconds, allow_none=False)
        busy = any(not f.done() for f in self._queued.values())
        return not busy and time.monotonic() - self._last_activity >= idle_seconds

    def close(self) -> None:
        """Wait up to 5 seconds for accepted background extraction, record what was
        abandoned (ExtractionAbandoned), close workspace retrieval (WorkspaceReleased),
        flush buffered reads, and end this session object.
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
        self._close_workspace()
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
