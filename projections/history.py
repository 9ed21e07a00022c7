"""Canonical memory as it stood at an earlier ledger position, read from ``memory_history``.

``memory_history`` holds every revision of every memory (its status and the columns recall
reads: statement, subject, tags, evidence, source turns, ...) with the position it took
effect; a revision is current from its position until the memory's next row. So the
retrievable memories of a namespace at position P are one query: each memory's last row at
or before P, kept when its status is retrievable (active, conflicted). The transcripts read
model is append-only per turn (a turn is observed once), so the turns observed by P are its
rows at or before P.

:class:`CanonicalMemoryAt` answers the queries a recall index reads
(:class:`~memory_ledger.commands.recall.index.NamespaceRecallIndex`: retrievable memories,
the source turns of forgotten ones, and the observed turns its conversation windows read)
as they stood at P, exactly as a fold of the ledger up to P would
(``tests/replay/test_past_recall.py`` compares both on random ledgers). Its other queries
would read the live tables: they raise instead.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import duckdb

from memory_ledger.projections.canonical import RETRIEVABLE, CanonicalMemory

__all__ = ["CanonicalMemoryAt", "revisions_at_sql"]

_NAMESPACE_SQL = "tenant = ? AND principal = ? AND scope_id = ?"
_RETRIEVABLE_SQL = "status IN (" + ", ".join(f"'{s}'" for s in RETRIEVABLE) + ")"


def _checked(columns: Sequence[str]) -> Sequence[str]:
    """``columns``, each checked to be a plain identifier (raises ``ValueError``)."""
    for column in columns:
        if not column.isidentifier():
            msg = f"not a column name: {column!r}"
            raise ValueError(msg)
    return columns


def revisions_at_sql(columns: Sequence[str]) -> str:
    """SQL selecting ``columns`` of each memory's revision current at a position: its last
    ``memory_history`` row at or before it. Parameters: tenant, principal, scope id,
    position. ``status`` is always selected (the caller filters on it)."""
    wanted = ", ".join(dict.fromkeys(["status", *_checked(columns)]))
    return (
        f"SELECT {wanted} FROM memory_history WHERE {_NAMESPACE_SQL} AND position <= ? "
        "QUALIFY row_number() OVER (PARTITION BY memory_id ORDER BY position DESC) = 1"
    )


class CanonicalMemoryAt(CanonicalMemory):
    """The recall-facing queries of :class:`CanonicalMemory` as of ledger ``position``.

    :param conn: a DuckDB connection (or cursor) on a projection file caught up to at least
        ``position``; it is used by one thread at a time (``lock``).
    :param position: the ledger position the answers reflect.

    Rows carry the ``canonical_memory`` column names (``memory_history`` copies them);
    ``supersedes``, ``superseded_by`` and ``conflicts_with`` are not kept per revision and
    come back empty (recall hits do not show them). Queries raise a
    :class:`~memory_ledger.projections.errors.ProjectionError` instead of a DuckDB error.
    """

    def __init__(
        self,
        conn: duckdb.DuckDBPyConnection,
        position: int,
        lock: threading.RLock | None = None,
        guard: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
    ) -> None:
        super().__init__(conn, lock, guard)
        self.position = position

    def active_memories(
        self, tenant: str, principal: str, scope_id: str, columns: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Retrievable memories of one namespace at :attr:`position`, ordered by
        ``created_position`` then ``memory_id`` (as :meth:`CanonicalMemory.active_memories`);
        of ``columns``, those ``memory_history`` holds (``supersedes``, ``superseded_by``,
        ``conflicts_with`` are left out)."""
        kept = [c for c in columns if c not in _NOT_KEPT]
        sql = revisions_at_sql([*kept, "memory_id", "created_position"])
        return self._rows(
            f"SELECT * FROM ({sql}) WHERE {_RETRIEVABLE_SQL} ORDER BY created_position, memory_id",
            [tenant, principal, scope_id, self.position],
        )

    def forgotten_turns(self, tenant: str, principal: str, scope_id: str) -> frozenset[int]:
        """The transcript positions of the memories of one namespace forgotten at
        :attr:`position` (as :meth:`CanonicalMemory.forgotten_turns`)."""
        namespace = [tenant, principal, scope_id]
        # Only memories forgotten by then can be forgotten then: their last row is read.
        sql = (
            f"SELECT status, transcript_positions FROM memory_history WHERE {_NAMESPACE_SQL} "
            "AND position <= ? AND memory_id IN (SELECT memory_id FROM memory_history WHERE "
            f"{_NAMESPACE_SQL} AND position <= ? AND status = 'forgotten') "
            "QUALIFY row_number() OVER (PARTITION BY memory_id ORDER BY position DESC) = 1"
        )
        rows = self._fetch(
            f"SELECT DISTINCT unnest(transcript_positions) FROM ({sql}) WHERE status = 'forgotten'",
            [*namespace, self.position, *namespace, self.position],
        )
        return frozenset(int(r[0]) for r in rows if r[0] is not None)

    def session_turns(
        self, tenant: str, principal: str, scope_id: str
    ) -> list[tuple[str, int, int]]:
        """Every turn of one namespace observed at or before :attr:`position` as
        ``(session_id, turn_id, position)``, ordered by position."""
        rows = self._fetch(
            f"SELECT session_id, turn_id, position FROM transcripts WHERE {_NAMESPACE_SQL} "
            "AND position <= ? ORDER BY position",
            [tenant, principal, scope_id, self.position],
        )
        return [(str(s), int(t), int(p)) for s, t, p in rows]

    def changed_between(
        self, tenant: str, principal: str, scope_id: str, other: int, columns: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """The memories of one namespace whose revision at ``other`` (another position)
        differs from the one at :attr:`position` (a ``memory_history`` row between the two),
        each with its row at :attr:`position` (``columns`` as :meth:`active_memories`), or
        only ``memory_id`` and a ``status`` of None when it did not exist then; ordered by
        ``memory_id``."""
        low, high = sorted((other, self.position))
        kept = [c for c in _checked(columns) if c not in _NOT_KEPT and c != "memory_id"]
        wanted = ", ".join(f"r.{c}" for c in dict.fromkeys(["status", *kept]))
        sql = (
            "WITH changed AS (SELECT DISTINCT memory_id FROM memory_history WHERE "
            f"{_NAMESPACE_SQL} AND position > ? AND position <= ?) "
            f"SELECT c.memory_id, {wanted} FROM changed c LEFT JOIN ("
            f"SELECT * FROM memory_history WHERE {_NAMESPACE_SQL} AND position <= ? "
            "AND memory_id IN (SELECT memory_id FROM changed) "
            "QUALIFY row_number() OVER (PARTITION BY memory_id ORDER BY position DESC) = 1"
            ") r ON r.memory_id = c.memory_id ORDER BY c.memory_id"
        )
        namespace = [tenant, principal, scope_id]
        return self._rows(sql, [*namespace, low, high, *namespace, self.position])

    def count_namespace(self, tenant: str, principal: str, scope_id: str) -> int:
        """Retrievable memories of one namespace at :attr:`position`."""
        rows = self._fetch(
            "SELECT coalesce(sum(current_delta), 0) FROM memory_history "
            f"WHERE {_NAMESPACE_SQL} AND position <= ?",
            [tenant, principal, scope_id, self.position],
        )
        return int(rows[0][0])

    def _not_as_of(self, name: str) -> NoReturn:
        msg = f"{name} is not answered as of a position (it reads the live read models)"
        raise NotImplementedError(msg)

    def changed_since(
        self, tenant: str, principal: str, scope_id: str, position: int, columns: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Not answered as of a position: raises ``NotImplementedError``."""
        self._not_as_of("changed_since")

    def get(self, memory_id: str) -> dict[str, Any] | None:
        """Not answered as of a position: raises ``NotImplementedError``."""
        self._not_as_of("get")

    def count_active(self) -> int:
        """Not answered as of a position: raises ``NotImplementedError``."""
        self._not_as_of("count_active")

    def same_key(
        self, tenant: str, principal: str, scope_id: str, subject: str, predicate: str
    ) -> list[str]:
        """Not answered as of a position: raises ``NotImplementedError``."""
        self._not_as_of("same_key")

    def prunable(
        self, tenant: str, principal: str, scope_id: str, max_importance: float, max_uses: int
    ) -> list[dict[str, Any]]:
        """Not answered as of a position: raises ``NotImplementedError``."""
        self._not_as_of("prunable")

    def vocabulary(
        self, tenant: str, principal: str, scope_id: str, field: str
    ) -> list[tuple[str, int]]:
        """Not answered as of a position: raises ``NotImplementedError``."""
        self._not_as_of("vocabulary")


_NOT_KEPT = frozenset(("supersedes", "superseded_by", "conflicts_with"))
"""``canonical_memory`` columns of the recall documents that ``memory_history`` does not
keep per revision."""
