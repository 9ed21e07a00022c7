"""Recall as it would have answered at an earlier point, without folding the ledger.

:func:`~memory_ledger.replay.audit.timetravel.as_of` folds the ledger up to a point into
fresh read models (tens of seconds at 100,000 memories). Recall needs far less: the
retrievable memories of one namespace then, with the columns recall reads of them. The
live projection keeps every revision of every memory (``memory_history``), so that is one
query (:class:`~memory_ledger.projections.history.CanonicalMemoryAt`); the memories are then
ranked by the recall index of the live engine
(:class:`~memory_ledger.commands.recall.index.NamespaceRecallIndex`: the same documents,
source turns, conversation windows and BM25 ranking as :meth:`AsOf.recall`).

- Position and recorded time (:func:`~memory_ledger.replay.audit.timetravel.position_at`):
  answered from ``memory_history``.
- Occurred time is no prefix of the ledger (valid time reorders facts): answered by the
  fold, as :func:`~memory_ledger.replay.audit.moments.moment_at` does.

A :class:`PastRecall` reads through its own DuckDB cursor on the engine's projection file:
the engine's read lock is held only to catch the read models up to the point and open the
cursor, never while a query or an index build runs, so other readers of the engine do not
wait for it. Its index is built once per namespace and kept while it is open; given a
:class:`~memory_ledger.replay.audit.past_indexes.PastIndexes`, a point's index is derived
(the work of the changes between the two points) from one kept at another point or, when
none is kept yet, from a copy of the live engine's recall index of the namespace (already
loaded or persisted: ``MemoryEngine.recall_index_snapshot``), instead of built from every
memory; the engine's serving lock is held only while that index is copied.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

import duckdb

from memory_ledger.commands.recall.index import NamespaceRecallIndex, RecallResult
from memory_ledger.commands.recall.policy import check_recall_k
from memory_ledger.ledger.ids import Namespace, check_namespace
from memory_ledger.projections.history import CanonicalMemoryAt
from memory_ledger.replay.audit.past_indexes import DerivedIndexes, PastIndexes

if TYPE_CHECKING:
    from memory_ledger.commands.engine.memory_engine import MemoryEngine
    from memory_ledger.replay.audit.timetravel import AsOf, AsOfMode

__all__ = ["PastRecall", "recall_point"]


class PastRecall:
    """Recall at ledger ``position`` from the live projection's ``memory_history`` (close
    it: it holds a DuckDB cursor).

    ``at``, ``mode``, ``position``, ``head`` and ``events_skipped`` (always 0) read as on
    :class:`~memory_ledger.replay.audit.timetravel.AsOf`; ``recall_max_k`` bounds
    :meth:`recall` as ``memory.recall_max_k`` bounds a live one. ``indexes``: indexes kept
    at other points to derive this one's from, and to keep the ones it builds in (None:
    each namespace's index is built from its memories then).
    """

    folded = False
    """Whether a fold of the ledger answers (never, here)."""

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        at: int | datetime,
        mode: AsOfMode,
        position: int,
        head: int,
        indexes: PastIndexes | None = None,
    ) -> None:
        self.at = at
        self.mode: AsOfMode = mode
        self.position = position
        self.head = head
        self.events_skipped = 0
        self.recall_max_k = engine.config.recall_max_k
        self._engine = engine
        self._gate = engine.projection_cursors
        with engine.read_models(to=position) as live:
            # Its own connection to the same database: queries on it run while other
            # threads use the engine (DuckDB connections of one database are independent).
            self._cursor = live.conn.cursor()
            self._generation = self._gate.generation
        self._lock = threading.RLock()
        self.canonical = CanonicalMemoryAt(self._cursor, position, self._lock, self._reading)
        windows = engine.conversation_windows(self.canonical.session_turns)
        self._index = NamespaceRecallIndex(
            self.canonical, context_of=engine.transcript_context, windows=windows
        )
        self._derived: DerivedIndexes | None = None
        if indexes is not None:
            self._derived = DerivedIndexes(
                indexes,
                self.canonical,
                head,
                engine.transcript_context,
                lambda ns, silenced: windows.for_namespace(
                    ns.tenant, ns.principal, ns.scope_id, silenced
                ),
                engine.recall_index_snapshot,
            )
            self._index.attach(self._derived)

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Around each query on the cursor (under :attr:`_lock`): the engine may close its
        connection meanwhile (to rewrite the file after an erasure), and every cursor of it
        with it; the query runs inside the file's :class:`CursorGate` (the engine waits for
        it before closing), on a new cursor when the engine reconnected since this one was
        opened. DuckDB errors arrive typed (the engine's projection guard)."""
        while True:
            if self._generation != self._gate.generation:
                with self._engine.read_models(catch_up=False) as live:
                    cursor, generation = live.conn.cursor(), self._gate.generation
                with contextlib.suppress(duckdb.Error):
                    self._cursor.close()
                self._cursor, self._generation = cursor, generation
                self.canonical.conn = cursor
            with self._gate.reading() as generation:
                if generation == self._generation:
                    with self._engine.projection_guard():
                        yield
                    return

    def recall(self, namespace: Namespace, query: str, k: int = 5) -> RecallResult:
        """Recall over ``namespace`` as it would have been answered then (what
        :meth:`AsOf.recall` answers at the same point).

        :raises InvalidArgumentError: ``k`` is not an integer of at least 1.
        :raises RecallLimitError: ``k`` is above :attr:`recall_max_k` (``k_too_large``).
        :raises InvalidNamespaceError: the namespace is invalid.
        :raises ProjectionError: the projection file cannot be read.
        """
        check_namespace(namespace)
        check_recall_k(k, self.recall_max_k)
        with self._lock:
            if self._derived is not None:
                self._derived.asked[namespace.key()] = namespace
            hits = self._index.search(namespace, query, k, self.position)
            self._index.persist(self.position)  # keeps an index it built, to derive from
        return RecallResult(query=query, results=tuple(hits), position=self.position)

    @property
    def sources(self) -> dict[str, str]:
        """How each namespace's index came to this point, by namespace key: ``built`` (from
        its memories then) or ``derived`` (from an index kept at another point, or from the
        live engine's)."""
        return {key: "derived" if how == "file" else how for key, how in self._index.loaded.items()}

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
        """Drop the kept indexes and close the cursor."""
        with self._lock:
            self._index = NamespaceRecallIndex(self.canonical)
            with contextlib.suppress(duckdb.Error):  # closed already with its connection
                self._cursor.close()

    def __enter__(self) -> PastRecall:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def recall_point(
    engine: MemoryEngine,
    at: int | datetime | str,
    *,
    occurred: bool = False,
    indexes: PastIndexes | None = None,
    verify: bool = False,
) -> PastRecall | AsOf:
    """Recall as of ``at`` (a position, a timestamp, or text of either): a
    :class:`PastRecall` (position, recorded time) or, for occurred time, the fold
    (:func:`~memory_ledger.replay.audit.timetravel.as_of`). Both answer ``recall(namespace,
    query, k)`` the same way; close it (a context manager). ``indexes``: see
    :class:`PastRecall`. ``verify``: first check the hash chain of the ledger's records up
    to the point, as :func:`as_of` always does (a walk of every record up to it: the
    debugger leaves that to its integrity page).

    The same points and errors as :func:`~memory_ledger.replay.audit.timetravel.as_of`:

    :raises PointError: text that is neither; a position with ``occurred``; a naive
        datetime (:class:`NaiveTimestampError`, naming ``at``).
    :raises PositionOutOfRangeError: a position below 0 or beyond the ledger head.
    :raises LedgerTamperedError: with ``verify``, a record up to the point does not match
        its hash, or a position is missing.
    """
    from memory_ledger.replay.audit.timetravel import (
        _check_timestamp,
        as_of,
        checked_point,
        position_at,
    )

    point, head = checked_point(engine, at, occurred=occurred)
    if occurred and not isinstance(point, int):
        _check_timestamp("at", point)
        return as_of(engine, point, occurred=True)  # checks the chain itself
    if verify:
        from memory_ledger.replay.audit.verify import check_chain

        with engine.ledger_guard():  # a damaged store is refused, naming where
            check_chain(engine.ledger_log(), point if isinstance(point, int) else head)
    if isinstance(point, int):
        return PastRecall(
            engine, at=point, mode="position", position=point, head=head, indexes=indexes
        )
    _check_timestamp("at", point)
    position = position_at(engine, point)
    return PastRecall(
        engine, at=point, mode="recorded", position=position, head=head, indexes=indexes
    )
