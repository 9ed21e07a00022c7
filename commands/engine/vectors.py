"""The engine's semantic channel upkeep: coverage, waiting for vectors, maintenance health
and indexing now. A base of :class:`~memory_ledger.commands.engine.memory_engine.MemoryEngine`; the
attributes below are set by its ``__init__``.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Protocol

from memory_ledger.commands.errors import VectorsPendingError
from memory_ledger.commands.recall.semantic_status import OFF, SemanticStatus
from memory_ledger.ledger.arguments import check_timeout
from memory_ledger.ledger.ids import Namespace, check_namespace

if TYPE_CHECKING:
    from memory_ledger.commands.recall.maintenance import MaintenanceHealth
    from memory_ledger.commands.recall.semantic import EmbeddingIndexer, SemanticChannel
    from memory_ledger.projections.serving.state import ServingState

__all__ = ["EngineVectors"]


class _CatchUp(Protocol):
    def __call__(self, to: int | None = None) -> int: ...


class _Serve(Protocol):
    def __call__(self, head: int | None = None) -> int: ...


class EngineVectors:
    """Semantic channel upkeep of ``MemoryEngine`` (one of its bases)."""

    semantic: SemanticChannel | None
    indexer: EmbeddingIndexer | None
    _read_lock: threading.RLock
    catch_up: _CatchUp
    serving: ServingState
    _serve: _Serve

    @property
    def head(self) -> int:
        raise NotImplementedError  # pragma: no cover (MemoryEngine.head)

    def projection_guard(self) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError  # pragma: no cover (MemoryEngine.projection_guard)

    def semantic_status(self, namespace: Namespace) -> SemanticStatus:
        """The semantic channel's coverage of ``namespace`` now (``off`` without one)."""
        if self.semantic is None:
            return OFF
        check_namespace(namespace)
        with self.serving.lock, self.projection_guard():  # the serving state, not DuckDB
            self._serve()
            return self.semantic.status(namespace)

    def pending_vectors(self) -> int:
        """Retrievable memories of every namespace still lacking a vector in the read models
        as they stand (no catch-up first: cheap enough for a metric reader); 0 without a
        semantic channel."""
        if self.semantic is None:
            return 0
        with self._read_lock, self.projection_guard():
            return self.semantic.count_pending()

    def wait_for_vectors(
        self,
        timeout: float,
        namespace: Namespace | None = None,
        *,
        raise_on_timeout: bool = False,
    ) -> bool:
        """Wait up to ``timeout`` seconds until every retrievable memory (of ``namespace``,
        or of the store) has a vector; True when ready (also when no provider is attached:
        there is nothing to wait for), False when the time ran out (or an embedding batch
        failed) first. Check the result: on False, recall ranks the memories still without
        a vector lexically only.

        :param timeout: seconds, a finite number >= 0.
        :param raise_on_timeout: raise :class:`~memory_ledger.commands.errors.VectorsPendingError`
            (how many vectors are missing, the provider's last failure) instead of returning
            False.
        :raises InvalidArgumentError: ``timeout`` is NaN, infinite, negative or not a number.
        :raises VectorsPendingError: ``raise_on_timeout`` and the vectors are not ready.
        """
        seconds = check_timeout("timeout", timeout, allow_none=False)
        assert seconds is not None
        if namespace is not None:
            check_namespace(namespace)
        if self.indexer is None:
            return True
        with self.projection_guard():
            ready = self.indexer.wait_ready(seconds, namespace)
            if ready or not raise_on_timeout:
                return ready
            assert self.semantic is not None
            pending = self.semantic.count_pending(namespace)
        error = self.semantic.last_error
        cause = error.reason_code if error is not None else None
        where = f"namespace {namespace}" if namespace is not None else "the store"
        because = f" (the provider's last failure: {cause}: {error})" if error else ""
        msg = (
            f"{pending} vectors of {where} are still missing after {seconds:g} s{because}; "
            "recall ranks the memories without one lexically until they are embedded"
        )
        raise VectorsPendingError(msg, pending=pending, cause=cause)

    def maintenance_health(self) -> MaintenanceHealth:
        """The semantic channel's maintenance health now (:mod:`commands.recall.maintenance`):
        vector coverage per field, pending vectors, indexer lag in positions, failed
        batches and the last completed refresh; state ``off`` without a provider.
        Catches the projections up to the ledger head first."""
        from memory_ledger.commands.recall.maintenance import maintenance_health  # vectors: numpy

        head = self.head
        position = self.catch_up(head)
        channel, indexer = self.semantic, self.indexer
        if channel is None or indexer is None:
            return maintenance_health(None, None, ledger_head=head, projection_position=position)
        error = channel.last_error
        with self._read_lock, self.projection_guard():
            return maintenance_health(
                channel.vectors,
                channel.model_key,
                ledger_head=head,
                projection_position=position,
                fields=channel.fields,
                failures=indexer.failed_batches,
                consecutive_failures=indexer.consecutive_failures,
                last_error=error.reason_code if error is not None else None,
                last_refresh=indexer.last_refresh,
            )

    def index_vectors(self) -> int:
        """Embed every retrievable memory still lacking a vector now, in this thread;
        returns how many vector rows were written (0 without a provider).

        :raises commands.embeddings.base.EmbeddingError: the provider failed or was rejected.
        """
        if self.indexer is None:
            return 0
        with self.projection_guard():
            return self.indexer.run_once()
