"""The memory reads of ``AsyncMemoryEngine`` (recall, the retrievable memories, vocabulary,
counts) and its semantic channel upkeep, as coroutines.

A base of :class:`~memory_ledger.commands.aio.engine.AsyncMemoryEngine`. Each coroutine is
the :class:`~memory_ledger.commands.MemoryEngine` method of the same name, with its
parameters and defaults (``tests/aio/test_api_parity.py`` checks it), run on the engine's
worker thread: the same results and errors, read-your-writes as the blocking reads are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

from memory_ledger.commands.aio.worker import EngineWorker
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.recall.index import MemoryDoc, RecallResult
from memory_ledger.commands.recall.policy import RecallPolicy
from memory_ledger.commands.recall.semantic_status import SemanticStatus
from memory_ledger.ledger.ids import Namespace
from memory_ledger.projections.text_index import BM25Index
from memory_ledger.projections.tokens import TokenCounter

if TYPE_CHECKING:
    from memory_ledger.commands.recall.maintenance import MaintenanceHealth

__all__ = ["AsyncEngineReads"]


class AsyncEngineReads:
    """Memory reads and vector upkeep of ``AsyncMemoryEngine`` (one of its bases; ``engine``
    and the worker are set by its ``__init__``)."""

    engine: MemoryEngine
    _worker: EngineWorker

    # Recall and the retrievable memories ----------------------------------------------------

    async def recall(
        self,
        namespace: Namespace,
        query: str,
        k: int | None = None,
        *,
        policy: RecallPolicy | None = None,
    ) -> RecallResult:
        """Top ``k`` retrievable memories of ``namespace`` for ``query``, read-your-writes
        (:meth:`MemoryEngine.recall`: ``k`` defaults to the policy's ``limit`` and is at most
        ``config.recall_max_k``; ``policy`` defaults to the engine's ``recall_policy``).

        :raises InvalidArgumentError: ``query`` is not a string or ``k`` is not an integer;
            ``RecallLimitError`` (``k_too_large``) when ``k`` is above ``recall_max_k``.
        :raises InvalidNamespaceError: the namespace is invalid.
        """
        return await self._worker.run(self.engine.recall, namespace, query, k, policy=policy)

    async def canonical_candidates(
        self,
        namespace: Namespace,
        query: str,
        depth: int,
        *,
        semantic: bool = True,
        min_lexical_score: float = 0.0,
    ) -> tuple[list[tuple[MemoryDoc, float]], SemanticStatus, int]:
        """The best ``depth`` retrievable memories for ``query`` with their scores, the
        semantic channel's status and the projection position they reflect
        (:meth:`MemoryEngine.canonical_candidates`)."""
        return await self._worker.run(
            self.engine.canonical_candidates,
            namespace,
            query,
            depth,
            semantic=semantic,
            min_lexical_score=min_lexical_score,
        )

    async def lexical_ranking(
        self, namespace: Namespace, query: str, depth: int
    ) -> list[tuple[MemoryDoc, float]]:
        """The lexical channel alone: the best ``depth`` memories for ``query`` with their
        BM25-based scores (:meth:`MemoryEngine.lexical_ranking`)."""
        return await self._worker.run(self.engine.lexical_ranking, namespace, query, depth)

    async def best_match(self, namespace: Namespace, text: str) -> MemoryDoc | None:
        """The retrievable memory a command naming it by ``text`` targets, or None
        (:meth:`MemoryEngine.best_match`: lexical on purpose)."""
        return await self._worker.run(self.engine.best_match, namespace, text)

    async def named_memories(
        self, namespace: Namespace, text: str, depth: int = 10, *, strict: bool = False
    ) -> list[MemoryDoc]:
        """The retrievable memories ``text`` names, best first, at most ``depth``
        (:meth:`MemoryEngine.named_memories`; ``strict``: the rule a correction needs)."""
        return await self._worker.run(
            self.engine.named_memories, namespace, text, depth, strict=strict
        )

    async def retrievable_memory(
        self, namespace: Namespace, memory: UUID | str
    ) -> MemoryDoc | None:
        """The retrievable memory ``memory`` of ``namespace``, or None (another namespace's
        id is None too: :meth:`MemoryEngine.retrievable_memory`)."""
        return await self._worker.run(self.engine.retrievable_memory, namespace, memory)

    async def retrievable_memories(self, namespace: Namespace) -> list[MemoryDoc]:
        """Every retrievable memory of ``namespace``, caught up to the ledger head
        (:meth:`MemoryEngine.retrievable_memories`)."""
        return await self._worker.run(self.engine.retrievable_memories, namespace)

    async def recall_index_snapshot(
        self, namespace: Namespace
    ) -> tuple[int, frozenset[int], BM25Index, MutableMapping[str, MemoryDoc]] | None:
        """A copy of ``namespace``'s recall index with the position it reflects, or None
        (:meth:`MemoryEngine.recall_index_snapshot`)."""
        return await self._worker.run(self.engine.recall_index_snapshot, namespace)

    async def when_erased(self, callback: Callable[[], None]) -> None:
        """Run ``callback()`` each time the read models apply an erasure, on the engine's
        worker thread (:meth:`MemoryEngine.when_erased`)."""
        await self._worker.run(self.engine.when_erased, callback)

    async def memory_details(self, namespace: Namespace, ids: set[str]) -> dict[str, MemoryDoc]:
        """The retrievable memories of ``namespace`` among ``ids``, by id, as the read models
        stand (no catch-up: :meth:`MemoryEngine.memory_details`)."""
        return await self._worker.run(self.engine.memory_details, namespace, ids)

    async def transcript_context(self, transcript_positions: Sequence[int]) -> str | None:
        """The start of the source transcript at the first of ``transcript_positions``, or
        None (:meth:`MemoryEngine.transcript_context`)."""
        return await self._worker.run(self.engine.transcript_context, transcript_positions)

    # Vocabulary and counts -------------------------------------------------------------------

    async def memory_map(
        self, namespace: Namespace, *, token_counter: TokenCounter | None = None
    ) -> str:
        """The vocabulary map of ``namespace`` within its token budget as ``token_counter``
        (default: the engine's) counts (:meth:`MemoryEngine.memory_map`).

        :raises InvalidNamespaceError: the namespace is invalid.
        """
        return await self._worker.run(
            self.engine.memory_map, namespace, token_counter=token_counter
        )

    async def vocabulary(
        self, namespace: Namespace, field: Literal["subject", "predicate"]
    ) -> list[tuple[str, int]]:
        """``(term, records)`` of one field of ``namespace``'s memories, most frequent first
        (:meth:`MemoryEngine.vocabulary`)."""
        return await self._worker.run(self.engine.vocabulary, namespace, field)

    async def count_active_memories(self, namespace: Namespace | None = None) -> int:
        """How many memories of ``namespace`` (None: of every namespace) are retrievable
        (:meth:`MemoryEngine.count_active_memories`)."""
        return await self._worker.run(self.engine.count_active_memories, namespace)

    async def prunable_memories(
        self, namespace: Namespace, max_importance: float, max_uses: int
    ) -> list[dict[str, Any]]:
        """The ``canonical_memory`` rows of ``namespace`` that pruning may remove, oldest
        first (:meth:`MemoryEngine.prunable_memories`)."""
        return await self._worker.run(
            self.engine.prunable_memories, namespace, max_importance, max_uses
        )

    # The semantic channel ------------------------------------------------------------------

    async def semantic_status(self, namespace: Namespace) -> SemanticStatus:
        """The semantic channel's coverage of ``namespace`` (``off`` without one:
        :meth:`MemoryEngine.semantic_status`)."""
        return await self._worker.run(self.engine.semantic_status, namespace)

    async def wait_for_vectors(
        self,
        timeout: float,
        namespace: Namespace | None = None,
        *,
        raise_on_timeout: bool = False,
    ) -> bool:
        """Wait up to ``timeout`` seconds for every retrievable memory to have a vector; True
        when ready, False when the time ran out (``raise_on_timeout``: raise
        ``VectorsPendingError`` instead, as :meth:`MemoryEngine.wait_for_vectors`). Waits on
        a thread of its own: other calls of this engine go on."""
        return await asyncio.to_thread(
            self.engine.wait_for_vectors, timeout, namespace, raise_on_timeout=raise_on_timeout
        )

    async def pending_vectors(self) -> int:
        """Memories still lacking a vector (:meth:`MemoryEngine.pending_vectors`)."""
        return await self._worker.run(self.engine.pending_vectors)

    async def index_vectors(self) -> int:
        """Embed every memory still lacking a vector now; how many rows were written
        (:meth:`MemoryEngine.index_vectors`)."""
        return await self._worker.run(self.engine.index_vectors)

    async def maintenance_health(self) -> MaintenanceHealth:
        """The semantic channel's maintenance health now: coverage, pending vectors, indexer
        lag, failed batches (:meth:`MemoryEngine.maintenance_health`)."""
        return await self._worker.run(self.engine.maintenance_health)
