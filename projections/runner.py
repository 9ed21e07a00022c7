"""Paged, exactly-once catch-up of every read model from the ledger.

Each page of notifications is decoded once (only events some read model uses), folded
(``projections.fold``) and committed with the new tracking position in ONE DuckDB
transaction. A crash at any point leaves the file at the last committed page; the next
catch-up resumes there, so no event is applied twice or skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from eventsourcing.persistence import ApplicationRecorder, Mapper, Notification
from eventsourcing.utils import get_topic

from memory_ledger.ledger.dispatch import EventDispatch
from memory_ledger.ledger.errors import at_position
from memory_ledger.ledger.events import (
    SESSION_STREAM_EVENTS,
    ErasedPayload,
    LedgerEvent,
    MemoryActivated,
    MemoryConflictMarked,
    MemoryForgotten,
    MemoryPinned,
    MemoryPruned,
    MemoryReinforced,
    MemorySuperseded,
    NamespaceErased,
    NamespaceForgotten,
)
from memory_ledger.ledger.faults import fault
from memory_ledger.ledger.mapper import RECORD_DAMAGE
from memory_ledger.ledger.sealing import SEALED
from memory_ledger.projections.columnar import (
    FAST_TOPICS,
    ROW_TOUCHING_TOPICS,
    ColumnarBatch,
    uuid_text,
)
from memory_ledger.projections.erasure import erase_namespace_rows
from memory_ledger.projections.errors import rollback_quietly
from memory_ledger.projections.fold import PROJECTED_EVENTS, KnownKeys, fold_page
from memory_ledger.projections.store import ProjectionStore

__all__ = ["PROJECTION_VERSION", "ProjectionRunner"]

PROJECTION_VERSION = 3
"""Version of the read models' shape and fold; bump it to rebuild every projection file.
2: ``memory_history`` (each memory's status changes, for as-of reads without a fold).
3: ``memory_history`` holds every revision with the columns recall reads (as-of recall
without a fold, ``projections.history``)."""

_READ: tuple[type[LedgerEvent], ...] = (*PROJECTED_EVENTS, NamespaceErased)
_TOPICS = frozenset(get_topic(cls) for cls in _READ)
_ACTIVATED = get_topic(MemoryActivated)
_SEALED = bytes((SEALED,))
_CHANGES_CONTENT: EventDispatch[bool] = EventDispatch(
    "projection runner: events that change what a recall can return",
    dict.fromkeys(
        (
            MemoryActivated,
            MemoryReinforced,
            MemorySuperseded,
            MemoryConflictMarked,
            MemoryPinned,
            MemoryForgotten,
            MemoryPruned,
        ),
        True,
    ),
    # Counters (recalls, admissions, uses) and session bookkeeping leave indexes valid; an
    # erasure empties them through on_erasure instead (it names no namespace in clear).
    ignores=(*SESSION_STREAM_EVENTS, NamespaceForgotten, NamespaceErased, ErasedPayload),
)

Page = tuple[int, list[tuple[int, LedgerEvent]]]


class ProjectionRunner:
    """Keeps a :class:`ProjectionStore` in step with the ledger.

    :param store: the projection file.
    :param recorder: the ledger's application recorder.
    :param mapper: decodes stored events.
    :param page_size: notifications per DuckDB transaction.
    :param on_page: optional callback ``(last position applied)`` after each commit
        (progress bars, fault injection in tests).

    ``on_erasure`` holds callbacks run after a page that applied a
    :class:`~memory_ledger.ledger.events.NamespaceErased` record committed (the engine
    empties its in-process indexes and caches there: they may hold the erased plaintext).
    """

    def __init__(
        self,
        store: ProjectionStore,
        recorder: ApplicationRecorder,
        mapper: Mapper[Any],
        *,
        page_size: int = 25_000,
        on_page: Callable[[int], None] | None = None,
    ) -> None:
        self.store = store
        self.recorder = recorder
        self.mapper = mapper
        self.page_size = page_size
        self.on_page = on_page
        self._position: int | None = None
        self._known: KnownKeys | None = None
        self._content_changes: dict[str, int] = {}
        self.on_erasure: list[Callable[[], None]] = []
        self.erasures_applied = 0
        """How many ``NamespaceErased`` records this runner applied."""

    def changed_at(self, namespace_key: str) -> int:
        """The last position this runner applied that changed what a recall of the namespace
        can return (activation, reinforcement, supersede, conflict, forget, prune); 0 if none
        since this runner started. Counter-only events (recalls, admissions, uses) do not
        count. In-process indexes built at or after this position are still valid."""
        return self._content_changes.get(namespace_key, 0)

    @property
    def position(self) -> int:
        """The last ledger position applied (0 when none).

        Cached in memory after the first read: this runner is the only writer of its file
        (the slot is locked), so the cache changes only when this runner commits a page.
        """
        if self._position is None:
            self._position = self.store.position()
        return self._position

    def catch_up(self, to: int | None = None) -> int:
        """Apply every notification after the tracked position up to ``to`` (or the head).

        Returns the new position. When the ledger head equals the position, this costs one
        LMDB read and no DuckDB work. Without ``to``, it stops at the head read when it
        starts: a catch-up under a writer that never pauses ends (the next one takes the rest).
        """
        position = self.position
        head = self.recorder.max_notification_id() or 0
        if position >= head or (to is not None and position >= to):
            return position
        to = head if to is None else min(to, head)
        self._load_known()
        keyring = getattr(self.mapper, "keyring", None)
        while to is None or position < to:
            if keyring is not None:
                keyring.refresh()  # a key erased by another process is never used again
            # The cyclic garbage collector stays on: it belongs to the host process, and
            # switching it off (even for a page) would pause it for every thread. Decoded
            # events are msgspec Structs with gc=False, so a page adds little for it to scan
            # (measured: no difference in catch-up or rebuild speed).
            page = self._read_columnar_page(position, to)
            if page is None:
                break
            last, events, batch = page
            self.apply_events(events, previous=position, last=last, batch=batch)
            del page, events, batch
            position = last
            if self.on_page is not None:
                self.on_page(position)
        return position

    def _load_known(self) -> None:
        """Load the file's keys before the first page, so that page's first activations can
        take the columnar path too (it needs to know which memories the file holds)."""
        if self._known is None:
            with self.store.lock:
                self._known = KnownKeys(self.store.conn)

    def _read_columnar_page(
        self, after: int, to: int | None
    ) -> tuple[int, list[tuple[int, LedgerEvent]], ColumnarBatch | None] | None:
        """Like :meth:`read_page`, with the row-creating events set aside for the columnar
        fast path (``projections.columnar``) when the recorder and mapper allow it."""
        select_raw = getattr(self.recorder, "select_raw", None)
        decode = getattr(self.mapper, "decode", None)
        plain_state = getattr(self.mapper, "plain_state", None)
        plain = not (
            getattr(self.mapper, "cipher", None) or getattr(self.mapper, "compressor", None)
        )
        keyring = getattr(self.mapper, "keyring", None)
        if keyring is not None and keyring.erased_namespace_ids and after < keyring.clear_until:
            # Clear events of an erased namespace may be in this page: only the decoder
            # hides them (the columnar path does not decode namespaces).
            plain = False
        if select_raw is None or decode is None or plain_state is None or not plain:
            page = self.read_page(after, to)
            return None if page is None else (page[0], page[1], None)
        rows = select_raw(after, self.page_size, to)
        if not rows:
            return None
        batch = ColumnarBatch()
        # First activations may take the columnar path only when nothing else in the page
        # changes canonical rows, and only for memories the file does not hold yet.
        activation_ids = [row[1] for row in rows if row[3] == _ACTIVATED]
        columnar_activations = (
            self._known is not None
            and len(set(activation_ids)) == len(activation_ids)
            and not any(row[3] in ROW_TOUCHING_TOPICS for row in rows)
        )
        known_memories = self._known.keys["canonical_memory"] if self._known else set()
        events: list[tuple[int, LedgerEvent]] = []
        nid = after
        try:
            for nid, raw_id, version, topic, state in rows:
                if topic not in _TOPICS:
                    continue
                if state[:1] == _SEALED:
                    # Opened once here (decrypt once per event); an erased payload (None)
                    # reads as an ErasedPayload, which no read model uses.
                    opened = plain_state(topic, state, raw_id, version)
                    if opened is None:
                        continue
                    state = opened
                if topic in FAST_TOPICS and batch.offer(topic, nid, state):
                    continue
                if columnar_activations and topic == _ACTIVATED and type(raw_id) is bytes:
                    memory = uuid_text(raw_id)
                    if memory not in known_memories and batch.offer_activation(
                        nid, memory, version, state
                    ):
                        continue
                events.append((nid, cast(LedgerEvent, decode(topic, state, raw_id, version))))
        except RECORD_DAMAGE as e:
            raise at_position(e, nid) from e
        return rows[-1][0], events, batch

    def read_page(self, after: int, to: int | None = None) -> Page | None:
        """The page after ``after``: ``(last position read, projected events)``, or None.

        Uses the LMDB recorder's raw path and the msgspec mapper's one-call decoding when
        both are present (no Notification objects); otherwise the library's interface.
        """
        select_raw = getattr(self.recorder, "select_raw", None)
        decode = getattr(self.mapper, "decode", None)
        if select_raw is not None and decode is not None:
            rows = select_raw(after, self.page_size, to)
            if not rows:
                return None
            events: list[tuple[int, LedgerEvent]] = []
            nid = after
            try:
                for nid, raw_id, version, topic, state in rows:
                    if topic in _TOPICS:
                        events.append(
                            (nid, cast(LedgerEvent, decode(topic, state, raw_id, version)))
                        )
            except RECORD_DAMAGE as e:
                raise at_position(e, nid) from e
            return rows[-1][0], events
        notifications = self.recorder.select_notifications(
            start=after, limit=self.page_size, stop=to, inclusive_of_start=False
        )
        if not notifications:
            return None
        return notifications[-1].id, self.decode(notifications)

    def decode(self, notifications: Sequence[Notification]) -> list[tuple[int, LedgerEvent]]:
        """``(position, event)`` of the notifications some read model uses."""
        to_event = self.mapper.to_domain_event
        return [(n.id, cast(LedgerEvent, to_event(n))) for n in notifications if n.topic in _TOPICS]

    def apply_page(self, notifications: Sequence[Notification], *, previous: int) -> None:
        """Fold one page of notifications (see :meth:`apply_events`)."""
        self.apply_events(self.decode(notifications), previous=previous, last=notifications[-1].id)

    def apply_events(
        self,
        events: Sequence[tuple[int, LedgerEvent]],
        *,
        previous: int,
        last: int,
        batch: ColumnarBatch | None = None,
    ) -> None:
        """Fold ``events`` (and the columnar ``batch`` of the same page, if any) and commit
        rows + tracking position ``last`` in one transaction.

        If the file's position is no longer ``previous`` (another applier committed this
        page first), nothing is applied: applying it again would count events twice.
        """
        conn = self.store.conn
        with self.store.lock:
            conn.execute("BEGIN TRANSACTION")
            try:
                current = self.store.position()
                if current != previous:
                    conn.execute("ROLLBACK")
                    self._position = current
                    return
                if self._known is None:
                    self._known = KnownKeys(conn)
                if batch is not None and len(batch):
                    known_transcripts = self._known.keys["transcripts"]
                    created = batch.write(conn, known_transcripts)
                    # Visible to this page's fold (transcript positions of activations); on
                    # a rollback the whole cache is dropped below.
                    self._known.transcripts.update(created)
                    known_transcripts.update(created)
                    activated = batch.write_activations(conn, self._known.transcripts)
                    self._known.keys["canonical_memory"].update(activated)
                page = fold_page(conn, events, self._known)
                erased = [
                    namespace
                    for _, event in events
                    if type(event) is NamespaceErased
                    for namespace in event.namespace_ids
                ]
                if erased:
                    keyring = getattr(self.mapper, "keyring", None)
                    erase_namespace_rows(
                        conn, erased, keyring.namespace_id if keyring is not None else None
                    )
                self.store.set_position(last)
                fault("projections.commit")
                conn.execute("COMMIT")
            except BaseException:
                rollback_quietly(conn)  # a failed write may have ended the transaction
                self._position = None
                self._known = None
                raise
            self._position = last
            if erased:
                self._known = None  # rows went; reload the keys on the next page
                self.erasures_applied += 1
                self.store.checkpoint()
                self.store.scrub_on_close = True
                for callback in self.on_erasure:
                    callback()
            elif page is not None:
                self._known.commit(page)
            for position, event in events:
                if _CHANGES_CONTENT[type(event)]:
                    self._content_changes[event.namespace.key()] = position
            if batch is not None:
                for namespace in batch.activated_namespaces:
                    self._content_changes[namespace.key()] = last
