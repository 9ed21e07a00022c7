"""``AsyncMemorySession``: a :class:`~memory_ledger.commands.MemorySession` driven from
coroutines.

Every method is the coroutine form of the blocking method of the same name: the same
parameters and defaults (``tests/aio/test_api_parity.py`` checks it), results, events and
errors. The few that do no I/O (``config``, ``current_turn``, ``is_idle``,
``workspace_provider``, ``workspace_modes``) stay plain methods and properties. The blocking
method runs on its engine's worker thread
(:class:`~memory_ledger.commands.aio.worker.EngineWorker`), so the event loop never waits on
LMDB or DuckDB, and a cancelled coroutine never leaves half a command (a call either
completed, and is in the ledger when the ``await`` ends, or never started). Obtain one with
``await async_engine.session(namespace, session_id, ...)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from memory_ledger.commands.aio.session_commands import AsyncSessionCommands
from memory_ledger.commands.aio.session_context import AsyncSessionContext
from memory_ledger.commands.aio.worker import EngineWorker
from memory_ledger.commands.recall.index import RecallHit, RecallResult, RecallScope
from memory_ledger.ledger.events import PendingExtraction
from memory_ledger.ledger.ids import Namespace

if TYPE_CHECKING:
    from memory_ledger.commands.config import MemoryConfig
    from memory_ledger.commands.session.memory_session import (
        KnownValue,
        MemorySession,
        PreparedMemorySnapshot,
        ScheduledWork,
        TurnOutcome,
    )
    from memory_ledger.commands.session.overlay import Overlay
    from memory_ledger.commands.session.state import SessionState

__all__ = ["AsyncMemorySession"]


class AsyncMemorySession(AsyncSessionCommands, AsyncSessionContext):
    """One logical conversation, as coroutines. Use ``async with`` or call :meth:`aclose`.

    ``session`` is the blocking :class:`~memory_ledger.commands.MemorySession` underneath
    (call its methods only from the engine's worker, e.g. through
    ``AsyncMemoryEngine.run``). ``namespace`` and ``session_id`` are its own. Evidence,
    turns, recall and the lifecycle are here; commands in
    :class:`~memory_ledger.commands.aio.session_commands.AsyncSessionCommands`, context assembly,
    workspace and compaction in
    :class:`~memory_ledger.commands.aio.session_context.AsyncSessionContext`.
    """

    def __init__(self, session: MemorySession, worker: EngineWorker) -> None:
        self.session = session
        self._worker = worker

    @property
    def namespace(self) -> Namespace:
        """The session's namespace."""
        return self.session.namespace

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self.session.session_id

    def config(self) -> MemoryConfig:
        """The runtime configuration this session was opened with (no I/O)."""
        return self.session.config()

    def is_idle(self, idle_seconds: float = 300.0) -> bool:
        """Whether the session has had no activity for ``idle_seconds`` and no queued work
        (:meth:`MemorySession.is_idle`; no I/O).

        :raises InvalidArgumentError: ``idle_seconds`` is NaN, infinite or negative.
        """
        return self.session.is_idle(idle_seconds)

    async def refresh(self) -> SessionState:
        """Fold the session stream's events not seen yet (another process may have
        written) and return the state (:meth:`MemorySession.refresh`)."""
        return await self._worker.run(self.session.refresh)

    # Evidence and extraction ---------------------------------------------------------------

    async def observe_final_transcript(
        self, turn_id: int, transcript: str, occurred_at: datetime | None = None
    ) -> TurnOutcome:
        """Record a finalized turn, then extract (blocking mode) or queue extraction
        (background mode): :meth:`MemorySession.observe_final_transcript`.

        :raises TurnConflictError: the turn was observed with a different transcript.
        :raises SessionSealedError: the session was finished or closed.
        :raises ExtractionFailedError: the extractor failed (evidence recorded, pending).
        :raises ValueError: a negative ``turn_id`` or a transcript that is not a string.
        """
        return await self._worker.run(
            self.session.observe_final_transcript, turn_id, transcript, occurred_at
        )

    async def pending_extractions(self) -> list[int]:
        """Turns whose extraction is not recorded yet
        (:meth:`MemorySession.pending_extractions`)."""
        return await self._worker.run(self.session.pending_extractions)

    async def pending_extraction_causes(self) -> tuple[PendingExtraction, ...]:
        """The pending extractions with why each is pending
        (:meth:`MemorySession.pending_extraction_causes`)."""
        return await self._worker.run(self.session.pending_extraction_causes)

    async def wait_for_extractions(self, timeout: float | None = None) -> list[int]:
        """Wait for queued background extractions; the turns still unfinished.

        Waits on a thread of its own, so the engine's other calls go on meanwhile.
        """
        return await asyncio.to_thread(self.session.wait_for_extractions, timeout)

    async def on_turn_complete(self, turn_id: int) -> list[ScheduledWork]:
        """Record TurnCompleted, flush reads, retry pending extractions
        (:meth:`MemorySession.on_turn_complete`)."""
        return await self._worker.run(self.session.on_turn_complete, turn_id)

    # Turns and snapshots -------------------------------------------------------------------

    async def prepare(self, turn_id: int, transcript: str) -> PreparedMemorySnapshot:
        """Prepare a turn's snapshot speculatively (:meth:`MemorySession.prepare`)."""
        return await self._worker.run(self.session.prepare, turn_id, transcript)

    async def begin_turn(self, turn_id: int) -> int:
        """Freeze the prepared snapshot for a starting turn; its generation
        (:meth:`MemorySession.begin_turn`)."""
        return await self._worker.run(self.session.begin_turn, turn_id)

    def current_turn(self) -> int | None:
        """The turn in flight (the last ``begin_turn``), or None (no I/O)."""
        return self.session.current_turn()

    async def active_snapshot(self) -> PreparedMemorySnapshot:
        """The snapshot the current turn is answered from
        (:meth:`MemorySession.active_snapshot`)."""
        return await self._worker.run(self.session.active_snapshot)

    async def prepared_snapshot(self) -> PreparedMemorySnapshot:
        """The most recently prepared snapshot (:meth:`MemorySession.prepared_snapshot`)."""
        return await self._worker.run(self.session.prepared_snapshot)

    # Recall --------------------------------------------------------------------------------

    async def recall(
        self, query: str, turn_id: int | None = None, k: int | None = None, *, record: bool = True
    ) -> RecallResult:
        """Serve a ``recall`` tool call (:meth:`MemorySession.recall`); records
        RecallServed (buffered, never an fsync on this path) unless ``record`` is False.

        :raises ValueError: an invalid query, turn id or ``k``.
        """
        return await self._worker.run(self.session.recall, query, turn_id, k, record=record)

    async def overlay(self) -> Overlay:
        """The session facts and what they hide (:meth:`MemorySession.overlay`)."""
        return await self._worker.run(self.session.overlay)

    async def recall_scoped(
        self,
        query: str,
        turn_id: int | None,
        scope: RecallScope,
        about: str | None = None,
        attribute: str | None = None,
        k: int | None = None,
    ) -> RecallResult:
        """A live recall narrowed by ``scope`` and reordered by ``about`` (a subject) /
        ``attribute`` (a predicate) hints (:meth:`MemorySession.recall_scoped`)."""
        return await self._worker.run(
            self.session.recall_scoped, query, turn_id, scope, about, attribute, k
        )

    async def recall_similar(self, query: str, k: int = 5) -> list[RecallHit]:
        """Canonical and session memories similar to ``query``."""
        return await self._worker.run(self.session.recall_similar, query, k)

    async def memory_recent(self, k: int = 10) -> list[RecallHit]:
        """The ``k`` most recent retrievable memories (session facts first)."""
        return await self._worker.run(self.session.memory_recent, k)

    async def recall_by_tags(self, tags: Sequence[str], k: int = 10) -> list[RecallHit]:
        """Retrievable memories carrying any of ``tags``."""
        return await self._worker.run(self.session.recall_by_tags, tags, k)

    async def flush_reads(self) -> int:
        """Write buffered RecallServed records now; how many were written."""
        return await self._worker.run(self.session.flush_reads)

    async def memory_map(self) -> str:
        """The namespace's vocabulary map (:meth:`MemorySession.memory_map`)."""
        return await self._worker.run(self.session.memory_map)

    async def known_predicates(self) -> list[str]:
        """Predicate names this memory already uses (at most 50)."""
        return await self._worker.run(self.session.known_predicates)

    async def known_values(self) -> list[KnownValue]:
        """The (subject, predicate, value) facts memory can currently assert."""
        return await self._worker.run(self.session.known_values)

    async def known_statements(self) -> list[str]:
        """Every statement currently retrievable, session and canonical."""
        return await self._worker.run(self.session.known_statements)

    # Lifecycle -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """End this session object (:meth:`MemorySession.close`: waits up to 5 s for
        background extraction, records what was abandoned, flushes buffered reads)."""
        await self._worker.run(self.session.close)

    close = aclose
    """The same as :meth:`aclose` (the blocking API's name)."""

    async def __aenter__(self) -> AsyncMemorySession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
