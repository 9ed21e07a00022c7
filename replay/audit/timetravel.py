"""Time travel: the read models as they stood at an earlier point of the ledger.

``as_of(engine, 40)`` folds positions 1..40 into a fresh (in-memory) DuckDB database and
returns an :class:`AsOf` to query it: canonical memory then, and recall as it would have
answered then. The point may also be a timestamp:

- recorded time (default): the longest prefix of the ledger recorded at or before it (the
  ledger is in commit order; the first event recorded later ends the prefix);
- occurred time (``occurred=True``): every event whose conversation time is at or before it,
  whenever it was recorded. An event's conversation time is its own ``occurred_at``, else
  that of its turn's transcript, else the latest one seen in its session, else (a host that
  supplied no times) its ``recorded_at``. A value's period ends where the next value of its
  (subject, predicate) begins, whichever order they were recorded in: when values of one key
  are still current together (a value backfilled between two dated ones: the one before it
  was retired by the later one, at the later one's time), the one that occurred last is
  current and the others are superseded by it (:func:`settle_current_values`), so exactly
  one value per key is current at any occurred time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, cast
from uuid import UUID

import duckdb
import msgspec

from memory_ledger.commands.canonical.reconcile import occurred_earlier
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.recall.index import NamespaceRecallIndex, RecallResult
from memory_ledger.commands.recall.lexical import ConversationWindows
from memory_ledger.commands.recall.policy import check_recall_k
from memory_ledger.ledger.arguments import check_utc_range
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.events import LedgerEvent
from memory_ledger.ledger.ids import (
    Namespace,
    check_namespace,
    session_stream_id,
    subject_predicate_key,
)
from memory_ledger.projections.canonical import RETRIEVABLE, CanonicalMemory
from memory_ledger.projections.digest import table_digests
from memory_ledger.projections.store import ProjectionStore
from memory_ledger.replay.audit.filters import filter_events
from memory_ledger.replay.audit.points import NaiveTimestampError, PointError, parse_point
from memory_ledger.replay.audit.rebuild import OnPage, PositionOutOfRangeError, build_projections
from memory_ledger.replay.audit.verify import check_chain

__all__ = [
    "AsOf",
    "AsOfMode",
    "WindowsOf",
    "as_of",
    "memory_record",
    "position_at",
    "settle_current_values",
]

WindowsOf = Callable[
    [Callable[[str, str, str], Sequence[tuple[str, int, int]]]], ConversationWindows
]
"""``turns_of -> ConversationWindows``: the engine's :meth:`conversation_windows`."""

AsOfMode = Literal["position", "recorded", "occurred"]


def _check_timestamp(parameter: str, value: object) -> None:
    """Raise :class:`PointError` naming ``parameter`` unless ``value`` is an aware datetime."""
    if not isinstance(value, datetime):
        msg = f"{parameter} must be a datetime, got {type(value).__name__}"
        raise PointError(msg, parameter=parameter, reason_code="not_a_datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        msg = (
            f"{parameter} {value.isoformat()} has no time zone; pass an aware datetime, "
            "e.g. datetime(..., tzinfo=UTC)"
        )
        raise NaiveTimestampError(msg, parameter=parameter)
    try:
        check_utc_range(parameter, value)
    except InvalidArgumentError as e:
        raise PointError(str(e), parameter=parameter, reason_code=e.reason_code) from None


def position_at(engine: MemoryEngine, when: datetime) -> int:
    """The last position of the ledger prefix recorded at or before ``when`` (0 if none).

    :raises PointError: (an ``InvalidArgumentError``, a ``ValueError``) ``when`` is not a
        datetime or has no time zone.
    """
    _check_timestamp("when", when)
    position = 0
    for current, event in filter_events(engine):
        if event.recorded_at > when:
            break
        position = current
    return position


class _OccurredFilter:
    """Keeps events whose conversation time is at or before ``until`` (see module doc)."""

    def __init__(self, until: datetime) -> None:
        self.until = until
        self.turns: dict[tuple[UUID, int], datetime] = {}
        self.sessions: dict[UUID, datetime] = {}
        self.kept = 0
        self.skipped = 0
        self.last_kept = 0

    def occurred(self, event: LedgerEvent) -> datetime:
        session_id = getattr(event, "session_id", None)
        stream = (
            session_stream_id(event.namespace, session_id) if isinstance(session_id, str) else None
        )
        turn_id = getattr(event, "turn_id", None)
        own = getattr(event, "occurred_at", None)
        if isinstance(own, datetime):
            if stream is not None:
                if isinstance(turn_id, int):
                    self.turns.setdefault((stream, turn_id), own)
                latest = self.sessions.get(stream)
                if latest is None or own > latest:
                    self.sessions[stream] = own
            return own
        if stream is not None:
            if isinstance(turn_id, int) and (stream, turn_id) in self.turns:
                return self.turns[(stream, turn_id)]
            if stream in self.sessions:
                return self.sessions[stream]
        return event.recorded_at

    def __call__(self, position: int, event: LedgerEvent) -> bool:
        if self.occurred(event) <= self.until:
            self.kept += 1
            self.last_kept = position
            return True
        self.skipped += 1
        return False


class AsOf:
    """The read models at an earlier point, in their own DuckDB database (close it).

    ``position`` is the last ledger position folded (for occurred time: the last position
    scanned; ``events_skipped`` events after the point were left out). ``conn`` is a plain
    DuckDB connection holding the same tables and views as a live projection file.
    ``recall_max_k`` bounds :meth:`recall` as ``memory.recall_max_k`` bounds a live one
    (:func:`as_of` passes the engine's setting).
    """

    def __init__(
        self,
        store: ProjectionStore,
        *,
        at: int | datetime,
        mode: AsOfMode,
        position: int,
        head: int,
        events_skipped: int = 0,
        context_of: Callable[[Sequence[int]], str | None] | None = None,
        windows_of: WindowsOf | None = None,
        recall_max_k: int = 50,
    ) -> None:
        self.store = store
        self.recall_max_k = recall_max_k
        self.at = at
        self.mode: AsOfMode = mode
        self.position = position
        self.head = head
        self.events_skipped = events_skipped
        self._lock = threading.RLock()
        self._canonical = CanonicalMemory(store.conn, self._lock, store.guard)
        # The live recall's conversation windows, turns read from the past store.
        windows = windows_of(self._canonical.session_turns) if windows_of is not None else None
        self._index = NamespaceRecallIndex(self._canonical, context_of=context_of, windows=windows)

    @property
    def conn(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection of the past read models (plain SQL over every read model)."""
        return self.store.conn

    def memories(
        self, namespace: Namespace | None = None, *, include_history: bool = False
    ) -> list[dict[str, Any]]:
        """``canonical_memory`` rows then: retrievable ones (active, conflicted), or every row
        with ``include_history``; of one namespace or all, ordered by namespace then
        ``created_position``."""
        where, params = [], []
        if namespace is not None:
            namespace.validated()
            where.append("tenant = ? AND principal = ? AND scope_id = ?")
            params += [namespace.tenant, namespace.principal, namespace.scope_id]
        if not include_history:
            where.append("status IN (" + ", ".join(f"'{s}'" for s in RETRIEVABLE) + ")")
        sql = "SELECT * FROM canonical_memory"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY tenant, principal, scope_id, created_position, memory_id"
        with self._lock, self.store.guard("query"):
            rows: list[dict[str, Any]] = (
                self.conn.sql(sql, params=params).to_arrow_table().to_pylist()
            )
        return rows

    def memory(self, memory_id: str) -> dict[str, Any] | None:
        """One ``canonical_memory`` row then (any status), or None if it did not exist yet."""
        return self._canonical.get(memory_id)

    def recall(self, namespace: Namespace, query: str, k: int = 5) -> RecallResult:
        """Recall over ``namespace`` as it would have been answered then (BM25, same ranking
        as :meth:`commands.MemoryEngine.recall`).

        :raises InvalidArgumentError: ``k`` is not an integer of at least 1.
        :raises RecallLimitError: ``k`` is above :attr:`recall_max_k` (``k_too_large``).
        :raises InvalidNamespaceError: the namespace is invalid.
        """
        check_namespace(namespace)
        check_recall_k(k, self.recall_max_k)
        with self._lock:
            hits = self._index.search(namespace, query, k, self.position)
        return RecallResult(query=query, results=tuple(hits), position=self.position)

    def digests(self) -> dict[str, str]:
        """Content digest of every table and view then (see :func:`projections.table_digests`)."""
        with self._lock:
            return table_digests(self.conn)

    def describe(self) -> dict[str, Any]:
        """JSON-ready description of the point: ``at``, ``mode``, ``position``, ``head``,
        ``events_skipped``."""
        return {
            "at": self.at.isoformat() if isinstance(self.at, datetime) else self.at,
            "mode": self.mode,
            "position": self.position,
            "head": self.head,
            "events_skipped": self.events_skipped,
        }

    def close(self) -> None:
        """Drop the past read models."""
        self.store.close()

    def __enter__(self) -> AsOf:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def as_of(
    engine: MemoryEngine,
    at: int | datetime | str,
    *,
    occurred: bool = False,
    path: str = ":memory:",
    on_page: OnPage | None = None,
) -> AsOf:
    """The read models as they stood at ``at``: a position, a timestamp, or text of either.

    :param occurred: read a timestamp as conversation (occurred) time, not recorded time.
    :param path: where the past read models live: in memory (default) or a NEW DuckDB file.
    :returns: an open :class:`AsOf` (a context manager).
    :raises PointError: text that is neither; a position with ``occurred``; a naive datetime
        (:class:`NaiveTimestampError`, naming ``at``).
    :raises PositionOutOfRangeError: a position beyond the ledger head.
    :raises LedgerTamperedError: a record it reads does not match its hash, or a position
        is missing (``position``: the first bad one; see ``verify``).
    :raises LedgerRecordError: a record does not decode (``EventDecodeError``: its event),
        naming its position.

    >>> with as_of(engine, 40) as past:                      # doctest: +SKIP
    ...     [m["statement"] for m in past.memories()]
    """
    point, head = checked_point(engine, at, occurred=occurred)
    with engine.ledger_guard():  # a damaged store is refused, naming where
        check_chain(engine.ledger_log(), point if isinstance(point, int) else head)
    if isinstance(point, int):
        store = build_projections(engine, to=point, path=path, on_page=on_page)
        return AsOf(
            store,
            at=point,
            mode="position",
            position=point,
            head=head,
            context_of=engine.transcript_context,
            windows_of=engine.conversation_windows,
            recall_max_k=engine.config.recall_max_k,
        )
    _check_timestamp("at", point)
    if not occurred:
        position = position_at(engine, point)
        store = build_projections(engine, to=position, path=path, on_page=on_page)
        return AsOf(
            store,
            at=point,
            mode="recorded",
            position=position,
            head=head,
            context_of=engine.transcript_context,
            windows_of=engine.conversation_windows,
            recall_max_k=engine.config.recall_max_k,
        )
    keep = _OccurredFilter(point)
    store = build_projections(engine, to=head, path=path, keep=keep, on_page=on_page)
    try:
        with store.guard("as-of"):
            settle_current_values(store.conn)
    except BaseException:
        store.close()
        raise
    return AsOf(
        store,
        at=point,
        mode="occurred",
        position=head,
        head=head,
        events_skipped=keep.skipped,
        context_of=engine.transcript_context,
        windows_of=engine.conversation_windows,
        recall_max_k=engine.config.recall_max_k,
    )


def settle_current_values(conn: duckdb.DuckDBPyConnection) -> int:
    """Leave one current value per (subject, predicate) key of each namespace in the
    ``canonical_memory`` table of ``conn`` (an occurred-time fold); returns how many rows it
    superseded.

    Retrievable rows (active, conflicted) of one key (:func:`ledger.ids.subject_predicate_key`)
    are taken in ledger order (``updated_position``, then ``memory_id``) and settled as
    reconciliation settles a key: a value that occurred earlier than the current one (both
    dated) is superseded by it; otherwise the later value supersedes the current one. A
    superseded row gets ``status`` 'superseded' and ``superseded_by``; its successor lists it
    in ``supersedes``. Rows of other keys, and keys with one current value, are untouched.
    """
    rows = conn.sql(
        "SELECT memory_id, tenant, principal, scope_id, subject, predicate, occurred_at "
        "FROM canonical_memory WHERE status IN ("
        + ", ".join(f"'{s}'" for s in RETRIEVABLE)
        + ") AND subject IS NOT NULL AND predicate IS NOT NULL "
        "ORDER BY updated_position, memory_id"
    ).fetchall()
    current: dict[tuple[str, str, str, str, str], tuple[str, datetime | None]] = {}
    retired: list[tuple[str, str]] = []
    for memory, tenant, principal, scope_id, subject, predicate, occurred in rows:
        key = subject_predicate_key(subject, predicate)
        if key is None:
            continue
        where = (tenant, principal, scope_id, *key)
        held = current.get(where)
        if held is None:
            current[where] = (memory, occurred)
        elif occurred_earlier(occurred, held[1]):
            retired.append((memory, held[0]))
        else:
            retired.append((held[0], memory))
            current[where] = (memory, occurred)
    for old, new in retired:
        conn.execute(
            "UPDATE canonical_memory SET status = 'superseded', superseded_by = ? "
            "WHERE memory_id = ?",
            [new, old],
        )
        conn.execute(
            "UPDATE canonical_memory SET supersedes = list_append(supersedes, ?) "
            "WHERE memory_id = ? AND NOT list_contains(supersedes, ?)",
            [old, new, old],
        )
    return len(retired)


def memory_record(row: dict[str, Any]) -> dict[str, Any]:
    """A JSON-ready ``canonical_memory`` row (datetimes as ISO 8601 text)."""
    return cast(dict[str, Any], msgspec.to_builtins(row))


def checked_point(
    engine: MemoryEngine, at: int | datetime | str, *, occurred: bool = False
) -> tuple[int | datetime, int]:
    """``at`` as a point (a position or an aware time; text is parsed) and the ledger head,
    refused as :func:`as_of` refuses it: :class:`PointError` for what is no point or a
    position given for occurred time, :class:`PositionOutOfRangeError` for a position
    below 0 or beyond the head. The one check of :func:`as_of` and
    :func:`~memory_ledger.replay.audit.moments.moment_at`."""
    point = parse_point(at, "at") if isinstance(at, str) else at
    if isinstance(point, bool) or not isinstance(point, int | datetime):
        msg = f"at must be a position, a timestamp or text of either, got {point!r}"
        raise PointError(msg, parameter="at", reason_code="not_a_point")
    head = engine.head
    if isinstance(point, int):
        if occurred:
            msg = "occurred time needs a timestamp, not a position"
            raise PointError(msg, parameter="at")
        if point < 0:
            msg = f"position {point} is negative"
            raise PositionOutOfRangeError(msg, parameter="at")
        if point > head:
            msg = f"position {point} is beyond the ledger head {head}"
            raise PositionOutOfRangeError(msg, parameter="at")
    return point, head
