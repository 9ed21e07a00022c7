"""What other modules may read of an open store: ledger records and read models.

:class:`EngineReads` is the part of ``MemoryEngine`` that replay tools, sessions and
benchmarks read through: raw ledger records and a decoder for them, the hash-chained log
(LMDB or PostgreSQL) for the tools that check records exactly as stored, the LMDB recorder
for the few that need its files (stats), projection runners for rebuilds, and
locked, caught-up access to the read models (SQL and the in-process recall index). They use
these methods, never the collaborators the engine holds.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, cast
from uuid import UUID

from eventsourcing.dcb.api import DCBQuery, DCBQueryItem
from eventsourcing.persistence import (
    ApplicationRecorder,
    InterfaceError,
    Mapper,
    OperationalError,
    StoredEvent,
)

from memory_ledger.commands.engine.ledger_url import redact
from memory_ledger.commands.engine.serving import EngineServing
from memory_ledger.commands.errors import LedgerUnavailableError, MemoryLedgerError
from memory_ledger.commands.recall.fusion import HybridFusion
from memory_ledger.commands.recall.index import MemoryDoc, NamespaceRecallIndex
from memory_ledger.commands.recall.index_file import LazyDocs
from memory_ledger.commands.recall.lexical import ConversationWindows, SourceTranscripts
from memory_ledger.commands.store import ReadModels
from memory_ledger.ledger.errors import InvalidArgumentTypeError, LedgerConnectionError
from memory_ledger.ledger.events import LedgerEvent
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.lmdb import LMDBApplicationRecorder
from memory_ledger.ledger.mapper import MsgspecMapper
from memory_ledger.ledger.records import LedgerLog
from memory_ledger.ledger.tags import TaggedRecorder
from memory_ledger.projections.canonical import CanonicalMemory
from memory_ledger.projections.cursor_gate import CursorGate
from memory_ledger.projections.runner import ProjectionRunner
from memory_ledger.projections.serving.state import ServingState
from memory_ledger.projections.store import ProjectionStore
from memory_ledger.projections.text_index import BM25Index

__all__ = ["EngineReads", "EventDecoder", "RawRecord", "ReadModels"]

RawRecord = tuple[int, bytes | str | UUID, int, str, bytes]
"""One stored ledger record, undecoded: ``(position, originator id as stored (16 raw bytes
for a UUID), originator version, topic, state)``."""

EventDecoder = Callable[[str, bytes, Any, int], LedgerEvent]
"""``decode(topic, state, originator id as stored, version) -> event``."""


class _CatchUp(Protocol):
    def __call__(self, to: int | None = None) -> int: ...


class EngineReads(EngineServing):
    """Ledger and read-model reads of ``MemoryEngine`` (its base; the attributes below are
    set by ``MemoryEngine.__init__``)."""

    recorder: ApplicationRecorder
    tagged_recorder: TaggedRecorder
    mapper: Mapper[UUID]
    projections: ProjectionStore
    runner: ProjectionRunner
    canonical: CanonicalMemory
    transcripts: SourceTranscripts
    recall_index: NamespaceRecallIndex
    serving: ServingState
    fusion: HybridFusion
    _read_lock: threading.RLock
    catch_up: _CatchUp
    """``MemoryEngine.catch_up``: bring the read models up to a position (default: head)."""

    ledger_name: str
    """Where the ledger is: the LMDB folder, or the PostgreSQL URL without password."""
    _ledger_secret: str

    # Ledger records -----------------------------------------------------------------------

    @contextlib.contextmanager
    def ledger_guard(self) -> Iterator[None]:
        """Turn the ledger's "cannot reach the server" errors (the library's
        ``OperationalError``/``InterfaceError``, raised after its retries) into
        :class:`LedgerUnavailableError` naming the ledger; other errors, and the ledger's
        own typed errors (an LMDB ``LedgerOperationalError`` such as ``LedgerReadOnlyError``),
        pass unchanged."""
        try:
            yield
        except LedgerConnectionError as e:
            msg = f"ledger {self.ledger_name} is unavailable: {redact(str(e), self._ledger_secret)}"
            raise LedgerUnavailableError(msg) from None
        except MemoryLedgerError:
            raise
        except (OperationalError, InterfaceError) as e:
            msg = f"ledger {self.ledger_name} is unavailable: {redact(str(e), self._ledger_secret)}"
            raise LedgerUnavailableError(msg) from None

    def read_tagged(self, tag: str, *, after: int = 0) -> list[tuple[int, LedgerEvent]]:
        """``(position, event)`` of every event after ``after`` carrying ``tag`` (see
        :mod:`memory_ledger.ledger.tags`), in ledger order, read from the ledger's tag index."""
        query = DCBQuery(items=[DCBQueryItem(tags=[tag])])
        decode = self.mapper.to_domain_event
        with self.ledger_guard():
            selection = self.tagged_recorder.select_tagged(query, after=after or None)
        return [(e.position, cast(LedgerEvent, decode(e.stored_event))) for e in selection.events]

    def read_tagged_any(
        self, tags: Sequence[str], *, after: int = 0
    ) -> list[tuple[int, LedgerEvent]]:
        """``(position, event)`` of every event after ``after`` carrying ANY of ``tags``, in
        ledger order, each once: :meth:`read_tagged` of many tags in one read (one
        snapshot of the tag index; a batch's decision reads its memories so)."""
        if not tags:
            return []
        query = DCBQuery(items=[DCBQueryItem(tags=[tag]) for tag in tags])
        decode = self.mapper.to_domain_event
        with self.ledger_guard():
            selection = self.tagged_recorder.select_tagged(query, after=after or None)
        return [(e.position, cast(LedgerEvent, decode(e.stored_event))) for e in selection.events]

    def load_positioned(self, stream_id: UUID, *, after: int = 0) -> list[tuple[int, LedgerEvent]]:
        """``(position, event)`` of one stream with version > ``after``, in version order."""
        decode = self.mapper.to_domain_event
        with self.ledger_guard():
            found = self.tagged_recorder.select_positioned(stream_id, gt=after or None)
        return [(e.position, cast(LedgerEvent, decode(e.stored_event))) for e in found]

    def lmdb_recorder(self) -> LMDBApplicationRecorder:
        """The LMDB application recorder under this engine, for the tools that need its
        datastore (stats: the environment's file sizes; a local backup's compacting copy).
        Tools that only read the log use :meth:`ledger_log`.

        :raises InvalidArgumentTypeError: (a ``TypeError``) this engine's ledger is not the
            LMDB recorder.
        """
        if not isinstance(self.recorder, LMDBApplicationRecorder):
            msg = "this needs the LMDB application recorder"
            raise InvalidArgumentTypeError(msg, parameter="engine", reason_code="not_lmdb")
        return self.recorder

    def ledger_log(self) -> LedgerLog:
        """The ledger's hash-chained log, whatever the backend (LMDB or PostgreSQL): what the
        tools that read records exactly as stored use (verify, backup, export, explain,
        migrate). Call it under ``MemoryEngine.ledger_guard`` to get typed errors.

        :raises InvalidArgumentTypeError: (a ``TypeError``) the recorder keeps no such log.
        """
        if not isinstance(self.recorder, LedgerLog):
            msg = f"{type(self.recorder).__name__} does not provide the ledger's log"
            raise InvalidArgumentTypeError(msg, parameter="engine", reason_code="no_ledger_log")
        return self.recorder

    def read_records(self, after: int, limit: int, stop: int | None = None) -> list[RawRecord]:
        """Up to ``limit`` stored records with position > ``after`` (and <= ``stop`` when
        given), in position order, undecoded (:data:`RawRecord`; decode them with
        :meth:`event_decoder`). [] past the head."""
        select_raw = getattr(self.recorder, "select_raw", None)
        if select_raw is not None:
            with self.ledger_guard():
                return cast(list[RawRecord], select_raw(after, limit, stop))
        return [  # pragma: no cover (every engine uses the LMDB recorder)
            (n.id, n.originator_id, n.originator_version, n.topic, n.state)
            for n in self.recorder.select_notifications(
                start=after, limit=limit, stop=stop, inclusive_of_start=False
            )
        ]

    def event_decoder(self) -> EventDecoder:
        """A decoder for records of :meth:`read_records`: the msgspec mapper's one-call
        decoder, or the library interface for other mappers.

        :raises msgspec.DecodeError: (when called) the stored bytes do not decode.
        """
        mapper = self.mapper
        if isinstance(mapper, MsgspecMapper):
            fast = mapper

            def decode_fast(topic: str, state: bytes, raw_id: Any, version: int) -> LedgerEvent:
                return cast(LedgerEvent, fast.decode(topic, state, raw_id, version))

            return decode_fast

        def decode(topic: str, state: bytes, raw_id: Any, version: int) -> LedgerEvent:
            oid = UUID(bytes=raw_id) if isinstance(raw_id, bytes) else raw_id
            stored = StoredEvent(
                originator_id=oid, originator_version=version, topic=topic, state=state
            )
            return cast(LedgerEvent, mapper.to_domain_event(stored))

        return decode

    def projection_runner(
        self, store: ProjectionStore, *, page_size: int | None = None
    ) -> ProjectionRunner:
        """A runner that folds this engine's ledger into another projection ``store``
        (rebuilds, as-of views, benchmarks). The caller owns ``store`` and closes it.

        :param page_size: notifications per DuckDB transaction (default: the runner's).
        """
        if page_size is None:
            return ProjectionRunner(store, self.recorder, self.mapper)
        return ProjectionRunner(store, self.recorder, self.mapper, page_size=page_size)

    # Read models --------------------------------------------------------------------------

    @property
    def projection_position(self) -> int:
        """The ledger position this engine's read models reflect now (no catch-up)."""
        return self.runner.position

    @property
    def projection_file(self) -> Path:
        """The DuckDB file holding this engine's read models (one slot of the store)."""
        return Path(self.projections.path)

    @property
    def projection_cursors(self) -> CursorGate:
        """The gate of queries that other threads run on cursors of the projection file
        (:class:`~memory_ledger.projections.cursor_gate.CursorGate`): a reader that keeps a
        cursor past :meth:`read_models` runs its queries through it, so the file's
        checkpoint and an erasure's rewrite never close a cursor under a query."""
        return self.projections.cursors

    @contextlib.contextmanager
    def read_models(self, *, to: int | None = None, catch_up: bool = True) -> Iterator[ReadModels]:
        """Hold the projection lock, catch the read models up to ``to`` (default: the ledger
        head; ``catch_up=False``: leave them where they are), and yield the connection for
        read-only SQL with the position it reflects. Other threads of this engine wait
        while the block runs: keep it short, and do not keep the connection after it.
        A ``to`` beyond the head stops at the head; one the read models are past leaves them
        there (compare the yielded position). DuckDB errors inside the block arrive as
        :class:`~memory_ledger.projections.errors.ProjectionError` (see
        :meth:`projection_guard`).
        """
        with self._read_lock, self.projections.guard():
            position = self.catch_up(to) if catch_up else self.runner.position
            yield ReadModels(self.projections.conn, position)

    def lexical_ranking(
        self, namespace: Namespace, query: str, depth: int
    ) -> list[tuple[MemoryDoc, float]]:
        """The lexical channel alone: the best ``depth`` retrievable memories of
        ``namespace`` for ``query`` with their BM25-based scores, as the ranking pipeline
        orders them without the semantic channel
        (:func:`~memory_ledger.commands.recall.ranking.rank_candidates`), caught up to the
        ledger head. What a debugger shows beside the fused score of :meth:`recall`."""
        from memory_ledger.commands.recall.ranking import rank_candidates

        with self.serving.lock:
            index, by_id = self.recall_index.docs(namespace, self._serve())
            return rank_candidates(query, depth, index, by_id, self.fusion)

    def when_erased(self, callback: Callable[[], None]) -> None:
        """Run ``callback()`` (no arguments) each time this engine's read models apply an
        erasure (after they dropped what it erased): for a caller that keeps state derived
        from them, which may hold the erased content (the debugger's indexes of past
        points). It runs on the thread that catches the read models up; an exception it
        raises fails that catch-up."""
        self.runner.on_erasure.append(callback)

    def recall_index_snapshot(
        self, namespace: Namespace
    ) -> tuple[int, frozenset[int], BM25Index, MutableMapping[str, MemoryDoc]] | None:
        """A copy of ``namespace``'s in-process recall index, caught up to the ledger head
        (or, when this process has not loaded it yet, the persisted index's, at the
        position it reflects):
        ``(position, silenced turns, BM25 index (a copy), documents by id: a copy, or a fork of
        the lazily decoded ones restored from the persisted index)``, or None when the
        namespace has no retrievable memory. The DuckDB read models are caught up to that
        position too (its ``memory_history`` rows are there to derive another point from).
        What the debugger derives a past point's index from
        (:mod:`memory_ledger.replay.audit.past_indexes`) instead of building it from every
        memory then: the serving lock is held while the index is copied (an index the
        process has not loaded yet is read from the persisted index, or built, first).

        :raises ProjectionError: the projection file cannot be read or caught up.
        """
        with self.serving.lock:
            snapshot = None
            if not self.recall_index.holds(namespace):
                # Not in this process yet: the persisted index, read as it is (no serving
                # state restored, no live index loaded), at the position it reflects.
                snapshot = self.recall_index.stored_copy(namespace)
            if snapshot is None:
                position = self._serve()
                index, by_id = self.recall_index.docs(namespace, position)
                if not by_id:
                    return None
                silenced = self.recall_index.silenced(namespace)
                # Documents restored from the persisted index stay encoded (a fork shares
                # the bytes); a copy of the slot map keys them while the live index moves on.
                docs: MutableMapping[str, MemoryDoc] = (
                    by_id.fork(dict(index.slot_map()))
                    if isinstance(by_id, LazyDocs)
                    else dict(by_id)
                )
                snapshot = (position, silenced, index.copy(), docs)
        position = snapshot[0]
        with self.read_models(to=position):
            pass
        return snapshot

    def retrievable_memories(self, namespace: Namespace) -> list[MemoryDoc]:
        """Every retrievable canonical memory of ``namespace`` (the documents of the
        in-process recall index, caught up to the ledger head), in the index's order."""
        with self.serving.lock:
            _, by_id = self.recall_index.docs(namespace, self._serve())
            return list(by_id.values())

    def memory_details(self, namespace: Namespace, ids: set[str]) -> dict[str, MemoryDoc]:
        """The retrievable canonical memories of ``namespace`` among ``ids``, by id, from the
        in-process recall index as it stands: no catch-up (a snapshot read wants details
        only: subject, evidence, times)."""
        with self.serving.lock:
            _, by_id = self.recall_index.docs(namespace, self.serving.position)
            return {i: by_id[i] for i in ids if i in by_id}

    def vocabulary(
        self, namespace: Namespace, field: Literal["subject", "predicate"]
    ) -> list[tuple[str, int]]:
        """``(term, records)`` of one field of ``namespace``'s retrievable memories, most
        frequent first (the serving state at the ledger head)."""
        with self.serving.lock:
            self._serve()
            return self.serving.vocabulary(
                namespace.tenant, namespace.principal, namespace.scope_id, field
            )

    def prunable_memories(
        self, namespace: Namespace, max_importance: float, max_uses: int
    ) -> list[dict[str, Any]]:
        """``canonical_memory`` rows of ``namespace`` that pruning may remove (active, below
        ``max_importance``, unpinned, used at most ``max_uses`` times, never consolidated,
        without relations), oldest first; caught up to the ledger head."""
        self.catch_up()
        return self.canonical.prunable(
            namespace.tenant, namespace.principal, namespace.scope_id, max_importance, max_uses
        )

    def count_active_memories(self, namespace: Namespace | None = None) -> int:
        """Retrievable memories of ``namespace`` (None: of every namespace), from the serving
        state at the ledger head."""
        with self.serving.lock:
            self._serve()
            if namespace is None:
                return self.serving.count_active()
            return self.serving.count_namespace(
                namespace.tenant, namespace.principal, namespace.scope_id
            )

    def conversation_windows(
        self, turns_of: Callable[[str, str, str], Sequence[tuple[str, int, int]]]
    ) -> ConversationWindows:
        """Conversation windows
        (:class:`~memory_ledger.commands.recall.lexical.ConversationWindows`)
        reading this ledger's transcripts, over the turns ``turns_of`` lists (an as-of
        store's, for a past recall that expands documents as the live one does)."""
        return ConversationWindows(self.transcripts, turns_of)

    def transcript_context(self, transcript_positions: Sequence[int]) -> str | None:
        """The start of the source transcript at the first of a memory's
        ``transcript_positions`` (document expansion for recall); None when there is none."""
        return self.transcripts(transcript_positions)
