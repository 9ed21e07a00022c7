"""The session's own ledger stream: folded state, one-transaction appends, read records.

:class:`SessionStream` is the object every concern of ``MemorySession`` holds. It holds the
fold of the session stream (:class:`SessionState`), the envelope of the next session event,
and ``_append_once``: every command appends its events in ONE durable LMDB write transaction,
with the buffered read-path records (RecallServed) in front; a conflicting concurrent append
(IntegrityError) refreshes the state from the ledger and re-plans, so retries are idempotent.
``_append_decision`` does the same for a decision about canonical memory, appended under the
append condition of what it read (``commands.canonical.boundary``).
Buffered read records are written with the next command's transaction, by ``flush_reads``, or
from a worker thread once due (``READ_FLUSH_SECONDS`` / ``READ_BUFFER_LIMIT``), never with an
fsync of their own on the recall path.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypedDict
from uuid import UUID

from eventsourcing.dcb.api import DCBAppendCondition

from memory_ledger.commands.canonical.boundary import DecisionReads, append_decision
from memory_ledger.commands.config import MemoryConfig
from memory_ledger.commands.errors import SessionSealedError
from memory_ledger.commands.extraction.base import Extractor
from memory_ledger.commands.session.state import SessionState
from memory_ledger.ledger.errors import InvalidArgumentError, MemoryLedgerError
from memory_ledger.ledger.events import (
    LedgerEvent,
    SessionOpened,
)
from memory_ledger.ledger.faults import fault
from memory_ledger.ledger.ids import Namespace, recall_stream_id
from memory_ledger.ledger.key_errors import NamespaceErasedError
from memory_ledger.projections.tokens import TokenCounter

if TYPE_CHECKING:
    from memory_ledger.commands.store import MemoryStore


__all__ = ["MAX_TURN_ID", "ReadEnvelope", "SessionStream", "check_turn_id"]

READ_FLUSH_SECONDS = 1.0
READ_BUFFER_LIMIT = 64

MAX_TURN_ID = 2**63 - 1
"""Turn ids are non-negative 64-bit integers (the read models store them as BIGINT)."""


def utc_now() -> datetime:
    """The wall-clock time (aware, UTC) recorded on events a session plans now."""
    return datetime.now(UTC)


def check_turn_id(turn_id: object) -> int:
    """``turn_id`` if it is an int in [0, 2**63 - 1]; otherwise InvalidArgumentError (a
    ValueError) naming it."""
    if not isinstance(turn_id, int) or isinstance(turn_id, bool) or not 0 <= turn_id <= MAX_TURN_ID:
        msg = f"turn_id must be an integer from 0 to {MAX_TURN_ID}, got {turn_id!r}"
        raise InvalidArgumentError(msg, parameter="turn_id")
    return turn_id


class ReadEnvelope(TypedDict):
    """The envelope every read-path record of a session carries (RecallServed,
    KnowledgeServed, WorkspaceSearched): a stream of its own (version 1), the time it was
    recorded (aware, UTC), the session's namespace and id. See
    :meth:`SessionStream._read_envelope`."""

    originator_id: UUID
    originator_version: int
    recorded_at: datetime
    namespace: Namespace
    session_id: str


class SessionStream:
    """The session stream of one ``MemorySession``: its folded state, its appends and the
    read-record buffer. Every concern of the session holds this one object (a composition:
    ``commands.session.memory_session``) and writes through it.

    :param engine: the store the session writes to (:class:`~commands.store.MemoryStore`).
    :param namespace: the session's namespace (from the host).
    :param session_id: the session's id (checked by ``MemorySession``).
    :param extractor: the session's extractor (its id is recorded in SessionOpened).
    :param config: the runtime configuration the session was opened with.
    :param token_counter: ``text -> estimated tokens``.
    """

    def __init__(
        self,
        engine: MemoryStore,
        namespace: Namespace,
        session_id: str,
        *,
        extractor: Extractor,
        config: MemoryConfig,
        token_counter: TokenCounter,
    ) -> None:
        self.engine = engine
        self.namespace = namespace
        self.session_id = session_id
        self.stream_id: UUID = engine.keyring.digests.session_stream_id(namespace, session_id)
        self.extractor = extractor
        self.activation_policy: Literal["auto", "manual"] = config.activation_policy
        self.token_counter = token_counter
        self.state = SessionState()
        self.last_position = 0
        self.lock = threading.RLock()
        """Guards the state, the read buffer and every append of this session."""
        self.closed = False
        self._config = config
        self._reads: list[LedgerEvent] = []
        self._reads_since = 0.0
        self._read_sequence = itertools.count()
        self._flusher: threading.Thread | None = None
        self._last_activity = time.monotonic()
        self._next_version = 0
        self._recorded_at = utc_now()

    def touch(self) -> None:
        """Note activity now (what :meth:`idle_for` measures from)."""
        self._last_activity = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since the session's last command or read."""
        return time.monotonic() - self._last_activity

    def has_buffered_reads(self) -> bool:
        """Whether read-path records wait in the buffer."""
        return bool(self._reads)

    def join_flusher(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for a background flush of the read buffer."""
        if self._flusher is not None:
            self._flusher.join(timeout)

    def config(self) -> MemoryConfig:
        """The runtime configuration this session was opened with."""
        return self._config

    def refresh(self) -> SessionState:
        """Fold events of the session stream not seen yet (another process may have written),
        with their ledger positions (the positions of evidence: transcripts, commands)."""
        with self.lock:
            after = self.state.version
            for position, event in self.engine.load_positioned(self.stream_id, after=after):
                self.state.apply(event, position)
            return self.state

    def append_once(self, plan: Callable[[], list[LedgerEvent]]) -> list[int]:
        """Append the events ``plan()`` decides on, with buffered read records in front, in
        one transaction; on a concurrent append, refresh and re-plan.

        ``plan`` returns [] when, given the refreshed state, nothing is left to write.

        :raises ConcurrencyConflictError: overtaken until the decision deadline.
        """
        return self._append(lambda _reads: plan(), decides=False)

    def append_decision(self, plan: Callable[[DecisionReads], list[LedgerEvent]]) -> list[int]:
        """Like :meth:`_append_once` for a decision about canonical memory: ``plan`` reads
        what it decides from through the :class:`DecisionReads` it is given (fresh on every
        attempt) and the batch is appended under their append condition
        (:mod:`commands.canonical.boundary`): refused, re-read and re-decided if any of it changed.
        """

        def decided(reads: DecisionReads | None) -> list[LedgerEvent]:
            assert reads is not None
            return plan(reads)

        return self._append(decided, decides=True)

    def _append(
        self, plan: Callable[[DecisionReads | None], list[LedgerEvent]], *, decides: bool
    ) -> list[int]:
        """Both kinds of session append go through the one decision path
        (:func:`commands.boundary.append_decision`): a plan that reads nothing through its
        :class:`DecisionReads` has no append condition (stream versions guard it)."""

        def planned(decision: DecisionReads) -> list[LedgerEvent]:
            return plan(decision if decides else None)

        def write(events: list[LedgerEvent], condition: DCBAppendCondition | None) -> list[int]:
            pending = list(self._reads)
            reads = _admissible(pending)
            positions = self.engine.append([*reads, *events], condition=condition)
            fault("session.appended")
            del self._reads[: len(pending)]
            written = positions[len(reads) :]
            for event, position in zip(events, written, strict=True):
                if event.originator_id == self.stream_id:
                    self.state.apply(event, position)
            self.last_position = positions[-1]
            self._last_activity = time.monotonic()
            return written

        with self.lock:
            return append_decision(
                self.engine,
                self.namespace,
                planned,
                what=f"session {self.session_id!r}",
                on_conflict=self.refresh,
                append=write,
            )

    def envelope(self) -> dict[str, Any]:
        """Envelope of the next session-stream event (call once per event, in order)."""
        self._next_version += 1
        return {
            "originator_id": self.stream_id,
            "originator_version": self._next_version,
            "recorded_at": self._recorded_at,
            "namespace": self.namespace,
            "session_id": self.session_id,
        }

    def start_plan(self) -> None:
        self._next_version = self.state.version
        self._recorded_at = utc_now()

    def opened_events(self) -> list[LedgerEvent]:
        if self.state.opened is not None:
            return []
        self.start_plan()
        return [
            SessionOpened(
                **self.envelope(),
                activation_policy=self.activation_policy,
                extractor_id=self.extractor.extractor_id,
            )
        ]

    def check_open(self) -> None:
        """Refuse a closed session, and a session whose namespace was erased since it opened
        (by this process or another: one ``stat`` of the key store): its in-memory state may
        hold the erased text.

        :raises SessionSealedError: the session is closed.
        :raises NamespaceErasedError: the session's namespace was erased.
        """
        if self.closed:
            msg = f"session {self.session_id!r} is closed"
            raise SessionSealedError(msg)
        keyring = self.engine.keyring
        with self.engine.ledger_guard():  # a PostgreSQL key store asks its server
            keyring.refresh()
        if keyring.erased_namespace_ids and keyring.is_erased(self.namespace):
            msg = f"session {self.session_id!r}: its namespace was erased"
            raise NamespaceErasedError(msg)

    def read_envelope(self, kind: str = "") -> ReadEnvelope:
        """The envelope of the next read-path record: its own stream, named by this session's
        stream, the wall-clock time in nanoseconds and a per-session counter (``kind``, when
        given, prefixes the sequence: ``"knowledge"``, ``"workspace"``; recall records have
        none), so two records never share a stream."""
        sequence = f"{time.time_ns()}/{next(self._read_sequence)}"
        if kind:
            sequence = f"{kind}/{sequence}"
        return ReadEnvelope(
            originator_id=recall_stream_id(self.stream_id, sequence),
            originator_version=1,
            recorded_at=utc_now(),
            namespace=self.namespace,
            session_id=self.session_id,
        )

    def buffer_read(self, record: LedgerEvent) -> None:
        """Buffer one read-path record (RecallServed); once the buffer is due (
        ``READ_BUFFER_LIMIT`` records or ``READ_FLUSH_SECONDS`` old), write it from a worker
        thread."""
        with self.lock:
            if not self._reads:
                self._reads_since = time.monotonic()
            self._reads.append(record)
            due = (
                len(self._reads) >= READ_BUFFER_LIMIT
                or time.monotonic() - self._reads_since >= READ_FLUSH_SECONDS
            )
        if due:
            self._flush_in_background()

    def _flush_in_background(self) -> None:
        """Write the read buffer from a worker thread: the recall that found it due returns
        without waiting for an fsync (docs/design.md)."""
        with self.lock:
            if self._flusher is not None and self._flusher.is_alive():
                return
            self._flusher = threading.Thread(
                target=self._flush_quietly, name=f"reads-{self.session_id}", daemon=True
            )
            self._flusher.start()

    def _flush_quietly(self) -> None:
        try:
            self.flush_reads()
        except Exception:  # noqa: BLE001 - read records may be lost; commands never are
            pass

    def flush_reads(self) -> int:
        """Write buffered RecallServed records now (one transaction); return how many."""
        with self.lock:
            pending = list(self._reads)
            if not pending:
                return 0
            reads = _admissible(pending)
            if reads:
                self.engine.append(reads)
            del self._reads[: len(pending)]
            return len(reads)


def _admissible(records: list[LedgerEvent]) -> list[LedgerEvent]:
    """The buffered read-path records the ledger's door admits (``commands.secret_door``);
    one it refuses is dropped, never allowed to block the command it would ride with (read
    records may be lost, commands never: docs/design.md)."""
    if not records:
        return records
    from memory_ledger.commands.secret_door import check_event  # loaded by the first write

    kept = []
    for record in records:
        try:
            check_event(record)
        except MemoryLedgerError:
            continue
        kept.append(record)
    return kept
