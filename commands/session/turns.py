"""Turn lifecycle and snapshots: prepare, begin a turn (freeze its snapshot), complete it."""

from __future__ import annotations

import hashlib
from typing import Literal
from uuid import UUID

import msgspec

from memory_ledger.commands.errors import ExtractionFailedError
from memory_ledger.commands.recall.index import RecallScope
from memory_ledger.commands.secrets import redact
from memory_ledger.commands.session.extraction import SessionExtraction
from memory_ledger.commands.session.recall import check_query
from memory_ledger.commands.session.stream import check_turn_id
from memory_ledger.ledger.events import (
    LedgerEvent,
    SnapshotItem,
    SnapshotPrepared,
    TurnBegan,
    TurnCompleted,
)
from memory_ledger.ledger.ids import snapshot_id

__all__ = ["PreparedMemorySnapshot", "ScheduledWork", "SessionTurns"]

SNAPSHOT_SIZE = 8


class PreparedMemorySnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """Items prepared for a turn. ``published`` is false when a newer turn had begun."""

    snapshot_id: UUID | None
    turn_id: int | None
    generation: int
    query: str
    items: tuple[SnapshotItem, ...]
    published: bool = True


class ScheduledWork(msgspec.Struct, frozen=True, kw_only=True):
    """One piece of work ``on_turn_complete`` scheduled and ran."""

    kind: Literal["turn_completed", "retry_extraction", "flush_reads"]
    turn_id: int | None
    status: Literal["done", "failed"]
    detail: str = ""


class SessionTurns(SessionExtraction):
    """Turns of a session: speculative preparation, frozen snapshots, completion work."""

    def on_turn_complete(self, turn_id: int) -> list[ScheduledWork]:
        """Complete a turn: record TurnCompleted (with buffered reads), retry any pending
        extraction, and return the work scheduled and run."""
        self._check_open()
        check_turn_id(turn_id)
        work: list[ScheduledWork] = []

        def completed() -> list[LedgerEvent]:
            if turn_id in self.state.completed:
                return []
            self._start_plan()
            return [TurnCompleted(**self._base(), turn_id=turn_id)]

        had_reads = bool(self._reads)
        self._append_once(completed)
        work.append(ScheduledWork(kind="turn_completed", turn_id=turn_id, status="done"))
        if had_reads:
            self.flush_reads()
            work.append(ScheduledWork(kind="flush_reads", turn_id=turn_id, status="done"))
        for pending in self.pending_extractions():
            if pending in self._queued and not self._queued[pending].done():
                continue
            try:
                self._extract(pending)
            except ExtractionFailedError as e:
                work.append(
                    ScheduledWork(
                        kind="retry_extraction", turn_id=pending, status="failed", detail=str(e)
                    )
                )
            else:
                work.append(ScheduledWork(kind="retry_extraction", turn_id=pending, status="done"))
        return work

    # Turns and snapshots ------------------------------------------------------------------

    def current_turn(self) -> int | None:
        """The turn in flight (the last ``begin_turn``), or None."""
        return self.state.current_turn

    def prepare(self, turn_id: int, transcript: str) -> PreparedMemorySnapshot:
        """Prepare context speculatively for a turn from a transcript.

        Publishes SnapshotPrepared only if no newer turn began while the work ran (the
        generation guard); otherwise returns the snapshot unpublished.
        """
        self._check_open()
        check_turn_id(turn_id)
        check_query(transcript, "transcript")
        query = redact(transcript).text[:2000]
        generation = self.state.generation
        docs, _ = self._live(query, SNAPSHOT_SIZE, RecallScope(), None, None)
        items = tuple(
            SnapshotItem(
                memory_id=UUID(doc.memory_id),
                revision=doc.revision or 0,
                statement=doc.statement,
                score=score,
            )
            for doc, score in docs
        )
        content = msgspec.msgpack.encode([query, [(str(i.memory_id), i.revision) for i in items]])
        sid = snapshot_id(self.stream_id, turn_id, generation, hashlib.sha256(content).hexdigest())
        snapshot = PreparedMemorySnapshot(
            snapshot_id=sid, turn_id=turn_id, generation=generation, query=query, items=items
        )

        def publish() -> list[LedgerEvent]:
            if self.state.generation != generation or sid in self.state.snapshots:
                return []
            self._start_plan()
            return [
                SnapshotPrepared(
                    **self._base(),
                    turn_id=turn_id,
                    generation=generation,
                    snapshot_id=sid,
                    query=query,
                    items=items,
                )
            ]

        with self._lock:
            self.refresh()
            if self.state.generation != generation:
                return msgspec.structs.replace(snapshot, published=False)
            self._append_once(publish)
        return snapshot

    def begin_turn(self, turn_id: int) -> int:
        """Freeze the prepared snapshot for a turn that is starting; return its generation.

        Everything the turn is answered with comes from this snapshot (or a live search fused
        with it), so a retrieval landing mid-response cannot change what was remembered.
        """
        self._check_open()
        check_turn_id(turn_id)
        result: list[int] = []

        def began() -> list[LedgerEvent]:
            prepared = self.state.prepared
            frozen = prepared.snapshot_id if prepared and prepared.turn_id == turn_id else None
            generation = self.state.generation + 1
            result[:] = [generation]
            self._start_plan()
            return [
                TurnBegan(
                    **self._base(), turn_id=turn_id, generation=generation, snapshot_id=frozen
                )
            ]

        self._append_once(began)
        return result[0]

    def _snapshot(self, snapshot: SnapshotPrepared | None) -> PreparedMemorySnapshot:
        if snapshot is None:
            return PreparedMemorySnapshot(
                snapshot_id=None, turn_id=None, generation=self.state.generation, query="", items=()
            )
        return PreparedMemorySnapshot(
            snapshot_id=snapshot.snapshot_id,
            turn_id=snapshot.turn_id,
            generation=snapshot.generation,
            query=snapshot.query,
            items=snapshot.items,
        )

    def active_snapshot(self) -> PreparedMemorySnapshot:
        """The snapshot the current turn is being answered from (empty if none)."""
        turn = self.state.current_turn
        return self._snapshot(self.state.frozen_snapshot(turn) if turn is not None else None)

    def prepared_snapshot(self) -> PreparedMemorySnapshot:
        """The most recently prepared snapshot, whether or not a turn is using it."""
        return self._snapshot(self.state.prepared)
