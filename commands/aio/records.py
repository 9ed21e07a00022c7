"""The ledger side of ``AsyncMemoryEngine``: appends, stream and tag reads, raw records,
catching the read models up and following the ledger, as coroutines.

A base of :class:`~memory_ledger.commands.aio.engine.AsyncMemoryEngine`. Each coroutine is
the :class:`~memory_ledger.commands.MemoryEngine` method of the same name, with its
parameters and defaults (``tests/aio/test_api_parity.py`` checks it), run on the engine's
worker thread. The properties read plain attributes (no DuckDB query; ``head`` is one cheap
LMDB read), so they stay properties.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

from memory_ledger.commands.aio.worker import EngineWorker
from memory_ledger.commands.engine.memory_engine import (
    EventDecoder,
    MemoryEngine,
    RawRecord,
)
from memory_ledger.ledger.digests import IdDigests
from memory_ledger.ledger.events import ExtractedItem, LedgerEvent

if TYPE_CHECKING:
    from eventsourcing.dcb.api import DCBAppendCondition

    from memory_ledger.commands.engine.follower import Follower
    from memory_ledger.projections.cursor_gate import CursorGate
    from memory_ledger.projections.derived import ErasedNamespaces

__all__ = ["AsyncEngineRecords"]


class AsyncEngineRecords:
    """Ledger reads and writes of ``AsyncMemoryEngine`` (one of its bases; ``engine`` and the
    worker are set by its ``__init__``)."""

    engine: MemoryEngine
    _worker: EngineWorker

    async def append(
        self,
        events: Sequence[LedgerEvent],
        *,
        condition: DCBAppendCondition | None = None,
        cleared: Collection[ExtractedItem] = (),
        digests: IdDigests | None = None,
    ) -> list[int]:
        """Append ``events`` in ONE durable write transaction; their positions
        (:meth:`MemoryEngine.append`, whose errors it raises: a failed condition or a
        secret-shaped value writes nothing; ``cleared`` and ``digests`` as there)."""
        return await self._worker.run(
            self.engine.append, events, condition=condition, cleared=cleared, digests=digests
        )

    async def load_stream(self, stream_id: UUID, *, after: int = 0) -> list[LedgerEvent]:
        """Events of one stream with version > ``after``, in version order
        (:meth:`MemoryEngine.load_stream`)."""
        return await self._worker.run(self.engine.load_stream, stream_id, after=after)

    async def load_positioned(
        self, stream_id: UUID, *, after: int = 0
    ) -> list[tuple[int, LedgerEvent]]:
        """``(position, event)`` of one stream with version > ``after``
        (:meth:`MemoryEngine.load_positioned`)."""
        return await self._worker.run(self.engine.load_positioned, stream_id, after=after)

    async def read_tagged(self, tag: str, *, after: int = 0) -> list[tuple[int, LedgerEvent]]:
        """``(position, event)`` of every event after ``after`` carrying ``tag``, in ledger
        order (:meth:`MemoryEngine.read_tagged`)."""
        return await self._worker.run(self.engine.read_tagged, tag, after=after)

    async def read_tagged_any(
        self, tags: Sequence[str], *, after: int = 0
    ) -> list[tuple[int, LedgerEvent]]:
        """``(position, event)`` of every event after ``after`` carrying any of ``tags``,
        each once (:meth:`MemoryEngine.read_tagged_any`)."""
        return await self._worker.run(self.engine.read_tagged_any, tags, after=after)

    async def read_records(
        self, after: int, limit: int, stop: int | None = None
    ) -> list[RawRecord]:
        """Up to ``limit`` stored records after ``after`` (up to ``stop``), undecoded
        (:meth:`MemoryEngine.read_records`; decode with :meth:`event_decoder`)."""
        return await self._worker.run(self.engine.read_records, after, limit, stop)

    def event_decoder(self) -> EventDecoder:
        """A decoder for the records of :meth:`read_records` (:meth:`MemoryEngine.event_decoder`).
        A plain method: building it reads nothing, and decoding is pure CPU work on bytes already
        read."""
        return self.engine.event_decoder()

    async def catch_up(self, to: int | None = None) -> int:
        """Bring the read models up to ``to`` (default: the ledger head); the position
        (:meth:`MemoryEngine.catch_up`)."""
        return await self._worker.run(self.engine.catch_up, to)

    async def scrub_erased_projections(self) -> int:
        """Delete from the projection file the rows of namespaces erased since its last
        scrub; how many went (:meth:`MemoryEngine.scrub_erased_projections`)."""
        return await self._worker.run(self.engine.scrub_erased_projections)

    @property
    def erased_namespaces(self) -> ErasedNamespaces:
        """The store's erased namespaces as the writer of derived files sees them
        (:attr:`MemoryEngine.erased_namespaces`)."""
        return self.engine.erased_namespaces

    async def follow(self, poll_interval: float = 1.0) -> Follower:
        """Start (once) the background thread that keeps the read models following the
        ledger (:meth:`MemoryEngine.follow`); ``aclose`` stops it."""
        return await self._worker.run(self.engine.follow, poll_interval)

    @property
    def head(self) -> int:
        """The ledger's last position (a cheap LMDB read: :attr:`MemoryEngine.head`)."""
        return self.engine.head

    @property
    def projection_position(self) -> int:
        """The ledger position the read models reflect now, without catching up
        (:attr:`MemoryEngine.projection_position`)."""
        return self.engine.projection_position

    @property
    def projection_file(self) -> Path:
        """The DuckDB file holding this engine's read models
        (:attr:`MemoryEngine.projection_file`)."""
        return self.engine.projection_file

    @property
    def projection_cursors(self) -> CursorGate:
        """The gate of queries on cursors of the projection file
        (:attr:`MemoryEngine.projection_cursors`)."""
        return self.engine.projection_cursors
