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


class SessionTurns:
    """Turns of a session: speculative preparation, frozen snapshots, completion work.

    :param extraction: the session's extraction concern (a completed turn retries pending
        extractions; its recall concern prepares snapshots).
    """

    def __init__(self, extraction: SessionExtraction) -> None:
        self.extraction = extraction
        self.recall = extraction.recall
        self.stream = extraction.stream

    def on_turn_complete(self, turn_id: int) -> list[ScheduledWork]:
        """Complete a turn: record TurnCompleted (with buffered reads), retry any pending
        extraction, and return the work scheduled and run."""
        self.stream.check_open()
        check_turn_id(turn_id)
        work: list[ScheduledWork] = []

        def completed() -> list[LedgerEvent]:
            if turn_id in self.stream.state.completed:
                return []
            self.stream.start_plan()
            return [TurnCompleted(**self.stream.envelope(), turn_id=turn_id)]

        had_reads = self.stream.has_buffered_reads()
        self.stream.append_once(completed)
        work.append(ScheduledWork(kind="turn_completed", turn_id=turn_id, status="done"))
        if had_reads:
            self.stream.flush_reads()
            work.append(ScheduledWork(kind="flush_reads", turn_id=turn_id, status="done"))
        for pending in self.extraction.pending_extractions():
            if pending in self.extraction.queued and not self.extraction.queued[pending].done():
                continue
            try:
                self.extraction.extract(pending)
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
        return self.stream.state.current_turn

    def prepare(self, turn_id: int, transcript: str) -> PreparedMemorySnapshot:
        """Prepare context speculatively for a turn from a transcript.

        Publishes SnapshotPrepared only if no newer turn began while the work ran (the
        generation guard); otherwise returns the snapshot unpublished.
        """
        self.stream.check_open()
        check_turn_id(turn_id)
        check_query(transcript, "transcript")
        query = redact(transcript).text[:2000]
        generation = self.stream.state.generation
        docs, _ = self.recall.live(query, SNAPSHOT_SIZE, RecallScope(), None, None)
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
        sid = snapshot_id(
            self.stream.stream_id, turn_id, generation, hashlib.sha256(content).hexdigest()
        )
        snapshot = PreparedMemorySnapshot(
            snapshot_id=sid, turn_id=turn_id, generation=generation, query=query, items=items
        )

        def publish() -> list[LedgerEvent]:
            if self.stream.state.generation != generation or sid in self.stream.state.snapshots:
                return []
            self.stream.start_plan()
            return [
                SnapshotPrepared(
                    **self.stream.envelope(),
                    turn_id=turn_id,
                    generation=generation,
                    snapshot_id=sid,
                    query=query,
                    items=items,
                )
            ]

        with self.stream.lock:
            self.stream.refresh()
            if self.stream.state.generation != generation:
                return msgspec.structs.replace(snapshot, published=False)
            self.stream.append_once(publish)
        return snapshot

    def begin_turn(self, turn_id: int) -> int:
        """Freeze the prepared snapshot for a turn that is starting; return its generation.

        Everything the turn is answered with comes from this snapshot (or a live search fused
        with it), so a retrieval landing mid-response cannot change what was remembered.
        """
        self.stream.check_open()
        check_turn_id(turn_id)
        result: list[int] = []

        def began() -> list[LedgerEvent]:
            prepared = self.stream.state.prepared
            frozen = prepared.snapshot_id if prepared and prepared.turn_id == turn_id else None
            generation = self.stream.state.generation + 1
            result[:] = [generation]
            self.stream.start_plan()
            return [
                TurnBegan(
                    **self.stream.envelope(),
                    turn_id=turn_id,
                    generation=generation,
                    snapshot_id=frozen,
                )
            ]

        self.stream.append_once(began)
        return result[0]

    def _snapshot(self, snapshot: SnapshotPrepared | None) -> PreparedMemorySnapshot:
        if snapshot is None:
            return PreparedMemorySnapshot(
                snapshot_id=None,
                turn_id=None,
                generation=self.stream.state.generation,
                query="",
                items=(),
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
        turn = self.stream.state.current_turn
        return self._snapshot(self.stream.state.frozen_snapshot(turn) if turn is not None else None)

    def prepared_snapshot(self) -> PreparedMemorySnapshot:
        """The most recently prepared snapshot, whether or not a turn is using it."""
        return self._snapshot(self.stream.state.prepared)
