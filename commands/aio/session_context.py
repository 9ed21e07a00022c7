"""The context side of ``AsyncMemorySession``: context assembly, workspace retrieval and
compaction, as coroutines.

A base of :class:`~memory_ledger.commands.aio.session.AsyncMemorySession`. Each coroutine is
the :class:`~memory_ledger.commands.MemorySession` method of the same name, with its
parameters and defaults (``tests/aio/test_api_parity.py`` checks it), run on the engine's
worker thread; waiting for the workspace index runs on a thread of its own. What reads
nothing (``workspace_modes``, ``workspace_provider``) stays a plain property and method.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from memory_ledger.commands.aio.worker import EngineWorker
from memory_ledger.commands.context.assembler import (
    BALANCED,
    AssembledContext,
    AssemblyPolicy,
    ContextProvider,
)
from memory_ledger.commands.context.chat_messages import ChatMessage
from memory_ledger.commands.context.compaction import CompactionResult
from memory_ledger.commands.workspace.retrieval import WorkspaceStatus
from memory_ledger.commands.workspace.search import SearchMode, WorkspaceSearchResult
from memory_ledger.ledger.events import ContextCompacted

if TYPE_CHECKING:
    from memory_ledger.commands.session.memory_session import MemorySession
    from memory_ledger.commands.session.workspace import WorkspaceContextProvider

__all__ = ["AsyncSessionContext"]


class AsyncSessionContext:
    """Context assembly, workspace retrieval and compaction of ``AsyncMemorySession`` (one
    of its bases; ``session`` and the worker are set by its ``__init__``)."""

    session: MemorySession
    _worker: EngineWorker

    # Context: assembly, workspace retrieval, compaction ----------------------------------

    async def assemble_context(
        self,
        turn_id: int,
        query: str,
        providers: Sequence[ContextProvider] = (),
        *,
        policy: AssemblyPolicy = BALANCED,
        memory: bool = True,
        memory_failure: Literal["fail_open", "fail_closed"] = "fail_open",
    ) -> AssembledContext:
        """The turn's context (:meth:`MemorySession.assemble_context`; a bound session's is
        its knowledge package's documents only; ``memory_failure``: whether a failing memory
        lookup is skipped or fails the assembly).

        :raises KnowledgeBindingError: bound and ``providers`` given, or the package failed.
        :raises ContextProviderError: a fail-closed provider failed.
        """
        return await self._worker.run(
            self.session.assemble_context,
            turn_id,
            query,
            providers,
            policy=policy,
            memory=memory,
            memory_failure=memory_failure,
        )

    async def search_workspace(
        self, query: str, mode: SearchMode = "lexical", k: int = 8, *, turn_id: int | None = None
    ) -> WorkspaceSearchResult:
        """Verified workspace results (:meth:`MemorySession.search_workspace`)."""
        return await self._worker.run(
            self.session.search_workspace, query, mode, k, turn_id=turn_id
        )

    @property
    def workspace_modes(self) -> tuple[SearchMode, ...]:
        """Search modes offered to the model (:attr:`MemorySession.workspace_modes`)."""
        return self.session.workspace_modes

    def workspace_provider(self, k: int = 4) -> WorkspaceContextProvider:
        """This session's workspace as a context provider for :meth:`assemble_context`
        (:meth:`MemorySession.workspace_provider`; building it reads nothing, and its searches
        run inside ``assemble_context``, on the worker).

        :raises WorkspaceError: ``disabled`` without a workspace.
        """
        return self.session.workspace_provider(k)

    async def workspace_status(self) -> WorkspaceStatus:
        """The workspace status (``disabled`` without a workspace)."""
        return self.session.workspace_status()

    async def wait_for_workspace(self, timeout: float = 30.0) -> WorkspaceStatus:
        """Wait for the workspace index (at most ``timeout`` seconds) in a thread of its own,
        never on the engine's worker."""
        return await asyncio.to_thread(self.session.wait_for_workspace, timeout)

    async def compactions(self) -> list[ContextCompacted]:
        """The session's ContextCompacted events, oldest first, read from the ledger
        (the property :attr:`MemorySession.compactions`; a coroutine here, since it reads)."""
        return await self._worker.run(lambda: self.session.compactions)

    async def compact(
        self,
        messages: Sequence[ChatMessage | dict[str, object]],
        *,
        turn_id: int | None = None,
        fixed_tokens: int = 0,
        force: bool = False,
        max_context_tokens: int | None = None,
    ) -> CompactionResult | None:
        """Compact and record (:meth:`MemorySession.compact`)."""
        return await self._worker.run(
            self.session.compact,
            messages,
            turn_id=turn_id,
            fixed_tokens=fixed_tokens,
            force=force,
            max_context_tokens=max_context_tokens,
        )
