"""``AsyncDirectCommands``: the direct commands of one session-id prefix, as coroutines.

Every coroutine is the method of the same name of
:class:`~memory_ledger.commands.engine.direct.DirectCommands`, with its parameters and
defaults (``tests/aio/test_api_parity.py`` checks it), run on the async engine's worker
thread (:class:`~memory_ledger.commands.aio.worker.EngineWorker`), so its errors, events
and cancellation rule are the blocking ones. Obtain one with
``AsyncMemoryEngine.direct(prefix)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from memory_ledger.commands.aio.worker import EngineWorker
from memory_ledger.commands.canonical.explicit_command import CommandSpec
from memory_ledger.commands.engine.batch import BatchResult, Remember, apply_batch
from memory_ledger.commands.engine.direct import DirectCommands, DirectResult
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.ledger.ids import Namespace

if TYPE_CHECKING:
    from memory_ledger.commands.canonical.boundary import DecisionReads
    from memory_ledger.commands.canonical.explicit_command import CommandResult
    from memory_ledger.commands.canonical.reconcile import Reconciler
    from memory_ledger.ledger.digests import IdDigests
    from memory_ledger.ledger.events import ReconciliationReport

__all__ = ["AsyncDirectCommands"]


class AsyncDirectCommands:
    """Direct commands (remember, forget, correct, pin) of an async engine with their own
    session-id prefix; see ``AsyncMemoryEngine.direct``.

    :param engine: the blocking engine (for :meth:`remember_many`'s batch).
    :param worker: the async engine's worker thread, where every command runs.
    :param commands: the blocking commands of this prefix.
    """

    def __init__(
        self, engine: MemoryEngine, worker: EngineWorker, commands: DirectCommands
    ) -> None:
        self._engine = engine
        self._worker = worker
        self.commands = commands

    @property
    def prefix(self) -> str:
        """How the session id of each command starts (:attr:`DirectCommands.prefix`)."""
        return self.commands.prefix

    async def remember(
        self,
        namespace: Namespace,
        statement: str,
        *,
        subject: str | None = None,
        predicate: str | None = None,
        value: str | None = None,
        tags: Sequence[str] = (),
        occurred_at: datetime | None = None,
    ) -> DirectResult:
        """Store ``statement`` as canonical memory, durable and reconciled on return
        (:meth:`DirectCommands.remember`, whose errors it raises)."""
        return await self._worker.run(
            self.commands.remember,
            namespace,
            statement,
            subject=subject,
            predicate=predicate,
            value=value,
            tags=tags,
            occurred_at=occurred_at,
        )

    async def remember_many(
        self, namespace: Namespace, items: Iterable[Remember | str]
    ) -> BatchResult:
        """Remember every item as ONE command, in a session of this prefix
        (``MemoryEngine.apply_batch`` with ``session_prefix``; its errors)."""
        return await self._worker.run(
            apply_batch, self._engine, namespace, list(items), session_prefix=self.prefix
        )

    async def forget(self, namespace: Namespace, statement_or_id: str | UUID) -> DirectResult:
        """Forget one memory by id or by its words (:meth:`DirectCommands.forget`).

        :raises UnknownMemoryError: no retrievable memory of this namespace matches.
        """
        return await self._worker.run(self.commands.forget, namespace, statement_or_id)

    async def correct(
        self,
        namespace: Namespace,
        statement: str,
        *,
        target: str | UUID | None = None,
        subject: str | None = None,
        occurred_at: datetime | None = None,
    ) -> DirectResult:
        """Supersede the memory ``target`` (or the one ``statement`` corrects: the same
        subject and attribute, ``subject`` deciding whose) with ``statement``
        (:meth:`DirectCommands.correct`, whose errors it raises)."""
        return await self._worker.run(
            self.commands.correct,
            namespace,
            statement,
            target=target,
            subject=subject,
            occurred_at=occurred_at,
        )

    async def pin(self, namespace: Namespace, statement_or_id: str | UUID) -> DirectResult:
        """Pin one memory by id or by its words (:meth:`DirectCommands.pin`).

        :raises UnknownMemoryError: no retrievable memory of this namespace matches.
        """
        return await self._worker.run(self.commands.pin, namespace, statement_or_id)

    async def run_many(
        self,
        namespace: Namespace,
        specs: Sequence[CommandSpec],
        *,
        session_id: str | None = None,
        digests: IdDigests | None = None,
        then: Callable[[Reconciler], None] | None = None,
        decided: Callable[[DecisionReads], None] | None = None,
    ) -> tuple[str, list[CommandResult], ReconciliationReport]:
        """Plan and append the commands ``specs`` as ONE decision: the session id, each
        command's result and the reconciliation report (:meth:`DirectCommands.run_many`,
        whose errors it raises; ``session_id``, ``digests``, ``then`` and ``decided`` as
        there: ``then`` and ``decided`` run on the engine's worker thread)."""
        return await self._worker.run(
            self.commands.run_many,
            namespace,
            specs,
            session_id=session_id,
            digests=digests,
            then=then,
            decided=decided,
        )
