"""The commands of ``AsyncMemorySession``: explicit commands, procedures, reconciliation,
admission, use and pruning, as coroutines.

A base of :class:`~memory_ledger.commands.aio.session.AsyncMemorySession`. Each coroutine is
the :class:`~memory_ledger.commands.MemorySession` method of the same name, with its
parameters and defaults (``tests/aio/test_api_parity.py`` checks it), run on the engine's
worker thread: the same events, results and errors, idempotent where the blocking one is.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from memory_ledger.commands.aio.worker import EngineWorker
from memory_ledger.ledger.events import (
    ActivationDecision,
    ExplicitCommandApplied,
    ExtractedItem,
    ReconciliationReport,
)

if TYPE_CHECKING:
    from memory_ledger.commands.session.commands import Intent
    from memory_ledger.commands.session.memory_session import (
        ActivationResult,
        AdmissionReport,
        CommandResult,
        MemorySession,
    )

__all__ = ["AsyncSessionCommands"]


class AsyncSessionCommands:
    """Commands of ``AsyncMemorySession`` (one of its bases; ``session`` and the worker are
    set by its ``__init__``)."""

    session: MemorySession
    _worker: EngineWorker

    # Explicit commands ---------------------------------------------------------------------

    async def apply_explicit_command(
        self,
        intent: Intent,
        statement: str,
        turn_id: int,
        *,
        item: ExtractedItem | dict[str, Any] | None = None,
        target: UUID | str | None = None,
        occurred_at: datetime | None = None,
    ) -> CommandResult:
        """Apply remember / forget / correct / pin from the user
        (:meth:`MemorySession.apply_explicit_command`); idempotent per command id.
        ``occurred_at`` is when the user said it (a forget's time; default: the turn's).

        :raises CommandRejectedError: unknown intent, empty or secret-bearing statement, an
            invalid item.
        :raises UnknownMemoryError: ``target`` names no retrievable memory of this namespace.
        :raises NaiveDatetimeError: ``occurred_at`` has no time zone.
        """
        return await self._worker.run(
            self.session.apply_explicit_command,
            intent,
            statement,
            turn_id,
            item=item,
            target=target,
            occurred_at=occurred_at,
        )

    async def pending_explicit_commands(self) -> list[ExplicitCommandApplied]:
        """This session's explicit commands not yet reconciled."""
        return await self._worker.run(self.session.pending_explicit_commands)

    async def remember_success(
        self, task: str, tools: Sequence[str], outcome: str
    ) -> CommandResult:
        """Record a reusable workflow that worked (procedural memory)."""
        return await self._worker.run(self.session.remember_success, task, tools, outcome)

    async def remember_failure(self, task: str, error: str, tools: Sequence[str]) -> CommandResult:
        """Record a failure lesson (procedural memory)."""
        return await self._worker.run(self.session.remember_failure, task, error, tools)

    # Reconciliation, admission and use ------------------------------------------------------

    async def finish(self, *, allow_pending: bool = False) -> ReconciliationReport:
        """Seal the session and reconcile it into canonical memory, exactly once
        (:meth:`MemorySession.finish`; waits for queued background extraction first and
        refuses to seal over turns pending extraction unless ``allow_pending``)."""
        return await self._worker.run(lambda: self.session.finish(allow_pending=allow_pending))

    async def activate_candidate(
        self, candidate: UUID | str, decision: ActivationDecision, evidence: Sequence[str]
    ) -> ActivationResult:
        """Activate one candidate by hand (:meth:`MemorySession.activate_candidate`).

        :raises CommandRejectedError: decision ``auto``, no evidence, unknown or reconciled.
        """
        return await self._worker.run(
            self.session.activate_candidate, candidate, decision, evidence
        )

    async def admit(self, turn_id: int, items: Sequence[Any]) -> AdmissionReport:
        """Record admissions (and revocations) for a turn's context
        (:meth:`MemorySession.admit`)."""
        return await self._worker.run(self.session.admit, turn_id, items)

    async def record_use(self, turn_id: int, memory_id: UUID | str) -> int:
        """Record that an admitted memory was used; the position
        (:meth:`MemorySession.record_use`).

        :raises NotAdmittedError: no live admission of that memory in that turn.
        """
        return await self._worker.run(self.session.record_use, turn_id, memory_id)

    async def prune(
        self,
        *,
        older_than: datetime | None = None,
        max_importance: float = 0.75,
        max_uses: int = 2,
    ) -> list[UUID]:
        """Prune stale, low-importance memories (:meth:`MemorySession.prune`)."""
        return await self._worker.run(
            self.session.prune,
            older_than=older_than,
            max_importance=max_importance,
            max_uses=max_uses,
        )
