"""What was current at a point, without folding the ledger (the fast path of time travel).

:func:`~memory_ledger.replay.audit.timetravel.as_of` folds the ledger up to a point into fresh
read models: exact for every read model, and about as slow as a rebuild (tens of seconds at
100,000 memories). Comparing what was current at two points needs far less: each memory's
status and statement then. The live projection keeps every status change of every memory
(``memory_history``: activation, conflict, supersede, forget, prune, each with its ledger
position), so "current at position P" is one query: each memory's last change at or before
P, kept when that status is retrievable (active, conflicted).

- Position: that query at P.
- Recorded time: the query at :func:`~memory_ledger.replay.audit.timetravel.position_at` of the
  time (the longest prefix of the ledger recorded at or before it).
- Occurred time: valid time reorders facts (a value backfilled between two dated ones, a
  forget dated before evidence), which is not a prefix of the ledger: answered from the fold
  (:func:`as_of` with ``occurred=True``), the reference.

Erased namespaces: their rows leave ``memory_history`` with every other read model (the
erasure record's page), and a fold reads their payloads as erased: both show nothing of
them. The fold stays the reference implementation; a property test compares the two on
random histories.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from memory_ledger.ledger.ids import Namespace
from memory_ledger.projections.canonical import RETRIEVABLE

if TYPE_CHECKING:
    from memory_ledger.commands.engine.memory_engine import MemoryEngine
    from memory_ledger.replay.audit.timetravel import AsOf, AsOfMode

__all__ = ["Change", "Moment", "changes_between", "moment_at"]

_RETRIEVABLE = "(" + ", ".join(f"'{s}'" for s in RETRIEVABLE) + ")"
_LAST_CHANGE = (
    "SELECT memory_id, arg_max(status, position) AS status, "
    "arg_max(statement, position) AS statement FROM memory_history "
    "WHERE position <= ? {where} GROUP BY memory_id"
)


class Moment:
    """What was current at one point: each memory's status and statement then.

    ``position`` is the last ledger position the answer covers (occurred time: the head,
    with ``events_skipped`` events after the point left out, as :class:`AsOf` says);
    ``folded`` tells whether a fold answers (occurred time) or the live projection's
    ``memory_history``. Close it (a context manager) to drop a fold.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        at: int | datetime,
        mode: AsOfMode,
        position: int,
        head: int,
        fold: AsOf | None = None,
    ) -> None:
        self.engine = engine
        self.at = at
        self.mode: AsOfMode = mode
        self.position = position
        self.head = head
        self._fold = fold
        self.events_skipped = fold.events_skipped if fold is not None else 0

    @property
    def folded(self) -> bool:
        """Whether the answers come from a fold of the ledger (occurred time)."""
        return self._fold is not None

    def current(self, namespace: Namespace) -> dict[str, str]:
        """Memory id -> statement of every memory of ``namespace`` current (active or
        conflicted) then.

        :raises InvalidNamespaceError: the namespace is invalid.
        """
        namespace.validated()
        params = [namespace.tenant, namespace.principal, namespace.scope_id]
        if self._fold is not None:
            rows = self._fold_rows(
                "SELECT memory_id, statement FROM canonical_memory WHERE tenant = ? AND "
                f"principal = ? AND scope_id = ? AND status IN {_RETRIEVABLE}",
                params,
            )
            return {str(m): str(s) for m, s in rows}
        sql = _LAST_CHANGE.format(where="AND tenant = ? AND principal = ? AND scope_id = ?")
        with self.engine.read_models(to=self.position) as live:
            rows = live.conn.execute(
                f"SELECT memory_id, statement FROM ({sql}) WHERE status IN {_RETRIEVABLE}",
                [self.position, *params],
            ).fetchall()
        return {str(m): str(s) for m, s in rows}

    def count(self, namespace: Namespace) -> int:
        """How many memories of ``namespace`` were current then (``len(current(ns))``; from
        the live projection: the sum of ``current_delta`` up to the position)."""
        namespace.validated()
        if self._fold is not None:
            return len(self.current(namespace))
        with self.engine.read_models(to=self.position) as live:
            rows = live.conn.execute(
                "SELECT coalesce(sum(current_delta), 0) FROM memory_history WHERE "
                "tenant = ? AND principal = ? AND scope_id = ? AND position <= ?",
                [namespace.tenant, namespace.principal, namespace.scope_id, self.position],
            ).fetchall()
        return int(rows[0][0])

    def statements(self, ids: Sequence[str]) -> dict[str, str]:
        """Memory id -> statement then, of those of ``ids`` that existed then."""
        return self._column(ids, "statement")

    def statuses(self, ids: Sequence[str]) -> dict[str, str]:
        """Memory id -> status then, of those of ``ids`` that existed then (any namespace:
        the caller passes ids it got from :meth:`current`)."""
        return self._column(ids, "status")

    def _column(self, ids: Sequence[str], column: Literal["statement", "status"]) -> dict[str, str]:
        """Memory id -> ``column`` then, of those of ``ids`` that existed then: from the
        fold (occurred time) or from the last change at or before the position."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        if self._fold is not None:
            rows = self._fold_rows(
                f"SELECT memory_id, {column} FROM canonical_memory "
                "WHERE memory_id IN (SELECT unnest(?::VARCHAR[]))",
                [wanted],
            )
            return {str(m): str(s) for m, s in rows}
        sql = _LAST_CHANGE.format(where="AND memory_id IN (SELECT unnest(?::VARCHAR[]))")
        with self.engine.read_models(to=self.position) as live:
            rows = live.conn.execute(
                f"SELECT memory_id, {column} FROM ({sql})", [self.position, wanted]
            ).fetchall()
        return {str(m): str(s) for m, s in rows}

    def _fold_rows(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """The rows of ``sql`` over the fold, read through a cursor of its own (a DuckDB
        connection serves one call at a time and refuses a second one meanwhile: each
        query here gets its own, so threads reading one moment never meet). DuckDB errors
        arrive typed (:class:`~memory_ledger.projections.errors.ProjectionError`)."""
        assert self._fold is not None
        store = self._fold.store
        with store.guard("query"):
            cursor = store.conn.cursor()
            try:
                return cursor.execute(sql, params).fetchall()
            finally:
                cursor.close()

    def close(self) -> None:
        """Drop the fold, if any (no query may run on it any more)."""
        if self._fold is not None:
            self._fold.close()

    def __enter__(self) -> Moment:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def moment_at(engine: MemoryEngine, at: int | datetime | str, *, occurred: bool = False) -> Moment:
    """What was current at ``at`` (a position, a timestamp, or text of either), answered
    from the live projection's ``memory_history`` (occurred time: from a fold).

    The same points as :func:`~memory_ledger.replay.audit.timetravel.as_of`, the same errors:

    :raises PointError: text that is neither; a position with ``occurred``; a naive
        datetime (:class:`NaiveTimestampError`, naming ``at``).
    :raises PositionOutOfRangeError: a position below 0 or beyond the ledger head.
    """
    from memory_ledger.replay.audit.timetravel import (
        _check_timestamp,
        as_of,
        checked_point,
        position_at,
    )

    point, head = checked_point(engine, at, occurred=occurred)
    if isinstance(point, int):
        return Moment(engine, at=point, mode="position", position=point, head=head)
    _check_timestamp("at", point)
    if not occurred:
        position = position_at(engine, point)
        return Moment(engine, at=point, mode="recorded", position=position, head=head)
    fold = as_of(engine, point, occurred=True)
    return Moment(engine, at=point, mode="occurred", position=fold.position, head=head, fold=fold)


@dataclass(frozen=True)
class Change:
    """What changed between two moments ``a`` and ``b`` in one namespace: the ids current
    only at ``a`` (``gone``) and only at ``b`` (``new``), each sorted, and how many were
    current at each."""

    gone: list[str]
    new: list[str]
    current_a: int
    current_b: int

    @property
    def kept(self) -> int:
        """How many were current at both."""
        return self.current_a - len(self.gone)


def changes_between(a: Moment, b: Moment, namespace: Namespace) -> Change:
    """The :class:`Change` from ``a`` to ``b`` in ``namespace`` (either may be the later).

    Two moments of the live projection: only memories whose status changed between the two
    positions are read (a memory is current at one and not the other exactly when its
    ``current_delta`` between them does not sum to 0); a folded moment (occurred time):
    both sides' current sets compared.

    :raises InvalidNamespaceError: the namespace is invalid.
    """
    namespace.validated()
    if a.folded or b.folded:
        now_a, now_b = a.current(namespace), b.current(namespace)
        return Change(
            gone=sorted(now_a.keys() - now_b.keys()),
            new=sorted(now_b.keys() - now_a.keys()),
            current_a=len(now_a),
            current_b=len(now_b),
        )
    low, high = sorted((a.position, b.position))
    with a.engine.read_models(to=high) as live:
        rows = live.conn.execute(
            "SELECT memory_id, sum(current_delta) AS d FROM memory_history WHERE tenant = ? "
            "AND principal = ? AND scope_id = ? AND position > ? AND position <= ? "
            "GROUP BY memory_id HAVING d <> 0 ORDER BY memory_id",
            [namespace.tenant, namespace.principal, namespace.scope_id, low, high],
        ).fetchall()
    later = [str(m) for m, d in rows if d > 0]  # current at the later point only
    earlier = [str(m) for m, d in rows if d < 0]
    gone, new = (earlier, later) if a.position <= b.position else (later, earlier)
    return Change(gone=gone, new=new, current_a=a.count(namespace), current_b=b.count(namespace))
