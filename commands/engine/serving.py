"""The engine's serving read models: applied inline by the writer, tailed from the ledger.

A base of :class:`~memory_ledger.commands.engine.memory_engine.MemoryEngine` (the
attributes below are set by its ``__init__``). :meth:`EngineServing._apply_inline` runs
in ``MemoryEngine.append`` right after the commit, with the events and their positions in
hand (nothing re-read or decoded); :meth:`EngineServing._serve` brings the state to the
ledger head before a read (one head read when nothing is missing; another process's or
host's appends are read, decoded and applied with the same functions). The DuckDB read
models are not involved: they are caught up behind (``MemoryEngine.catch_up``).

Lock order: the serving lock (:attr:`ServingState.lock`) before the projection lock, never
the other way round (a semantic recall reads vectors from DuckDB inside the serving lock).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from memory_ledger.ledger.errors import at_position
from memory_ledger.ledger.events import LedgerEvent
from memory_ledger.ledger.mapper import RECORD_DAMAGE
from memory_ledger.projections.serving.state import SERVING_TOPICS, ServingState

if TYPE_CHECKING:
    from memory_ledger.commands.recall.index import NamespaceRecallIndex
    from memory_ledger.ledger.keyring import Keyring

__all__ = ["TAIL_PAGE", "EngineServing"]

TAIL_PAGE = 10_000
"""Ledger records read per page when the serving state tails the ledger."""


class EngineServing:
    """Serving-state upkeep of ``MemoryEngine`` (one of its bases)."""

    serving: ServingState
    recall_index: NamespaceRecallIndex
    keyring: Keyring

    @property
    def head(self) -> int:
        raise NotImplementedError  # pragma: no cover (MemoryEngine.head)

    def read_records(
        self, after: int, limit: int, stop: int | None = None
    ) -> list[tuple[int, Any, int, str, bytes]]:
        raise NotImplementedError  # pragma: no cover (EngineReads.read_records)

    def event_decoder(self) -> Callable[[str, bytes, Any, int], LedgerEvent]:
        raise NotImplementedError  # pragma: no cover (EngineReads.event_decoder)

    def _drop_erased_content(self) -> None:
        raise NotImplementedError  # pragma: no cover (EngineCommands._drop_erased_content)

    def _serve(self, head: int | None = None) -> int:
        """Bring the serving state up to ``head`` (default: the ledger head, one cheap
        read) and return its position. Call holding ``serving.lock``.

        :raises LedgerUnavailableError: the ledger cannot be read.
        """
        if head is None:
            head = self.head
        self._restore_once(head)
        if self.serving.position < head:
            self._tail(head)
        return self.serving.position

    _serving_restored = False

    def _restore_once(self, head: int) -> None:
        """On first use, start the serving state from the persisted recall index's snapshot
        (its position at most ``head``), so a fresh process tails only what came after;
        without a usable one it is rebuilt by the tail from position 1."""
        if self._serving_restored:
            return
        self._serving_restored = True
        if self.serving.position:
            return
        stored = self.recall_index.stored_serving()
        if stored is None:
            return
        try:
            self.serving.restore(stored)
        except (msgspec.DecodeError, KeyError, TypeError, ValueError):
            self.serving.restore(ServingState().snapshot())  # empty: rebuilt by the tail
            self.recall_index.serving_refused()  # written anew when this process closes
            return
        if self.serving.position > head:  # another ledger's file: rebuilt by the tail
            self.serving.restore(ServingState().snapshot())

    def _tail(self, to: int) -> None:
        """Apply the ledger's records after the state's position up to ``to``."""
        serving = self.serving
        erasures = serving.erasures_applied
        self.keyring.refresh()  # a key erased by another process is never used again
        decode = self.event_decoder()
        topics = SERVING_TOPICS
        try:
            while serving.position < to:
                records = self.read_records(serving.position, TAIL_PAGE, to)
                if not records:
                    break
                events: list[tuple[int, LedgerEvent]] = []
                position = serving.position
                try:
                    for position, raw_id, version, topic, state in records:
                        if topic in topics:
                            events.append((position, decode(topic, state, raw_id, version)))
                except RECORD_DAMAGE as e:
                    raise at_position(e, position) from e
                serving.apply(events, last=records[-1][0])
        finally:
            if serving.erasures_applied != erasures:
                self._drop_erased_content()

    def _apply_inline(self, events: Sequence[LedgerEvent], positions: Sequence[int]) -> None:
        """Apply this process's just-committed ``events`` (at ``positions``) to the serving
        state, tailing first any gap another process left before them, then bring the
        recall index of every namespace they changed up to date (so a read right after
        finds it current)."""
        if not positions:
            return
        serving = self.serving
        with serving.lock:
            self._restore_once(positions[0] - 1)
            if serving.position < positions[0] - 1:
                self._tail(positions[0] - 1)
            if serving.position >= positions[-1]:
                return  # a tail that raced this append applied them already
            erasures = serving.erasures_applied
            changed = serving.apply(zip(positions, events, strict=True), last=positions[-1])
            if serving.erasures_applied != erasures:
                self._drop_erased_content()
            for key in changed:
                namespace = serving.namespace_of(key)
                if namespace is not None:
                    self.recall_index.docs(namespace, serving.position)
