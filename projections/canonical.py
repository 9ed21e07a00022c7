"""Queries over the ``canonical_memory`` read model (plain DuckDB SQL, documented columns).

Retrievable memories are those with status ``active`` or ``conflicted`` (a declared
conflict stays visible); ``superseded``, ``pruned`` and ``forgotten`` items stay in the table
as history.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

import duckdb

from memory_ledger.projections.errors import translate_duckdb_error

__all__ = ["RETRIEVABLE", "CanonicalMemory"]

RETRIEVABLE = ("active", "conflicted")
"""Statuses a recall may return."""

_RETRIEVABLE_SQL = "status IN ('active', 'conflicted')"
_NAMESPACE_SQL = "tenant = ? AND principal = ? AND scope_id = ?"


def _select(columns: Sequence[str]) -> str:
    if not columns:
        return "*"
    for column in columns:
        if not column.isidentifier():
            msg = f"not a column name: {column!r}"
            raise ValueError(msg)
    return ", ".join(columns)


@contextlib.contextmanager
def _translate() -> Any:
    try:
        yield
    except duckdb.Error as e:
        raise translate_duckdb_error(e, "", "query") from e


class CanonicalMemory:
    """Read access to ``canonical_memory`` through one DuckDB connection.

    :param lock: serializes use of the connection (a DuckDB connection refuses concurrent
        calls from several threads); share it with whatever else uses the connection.
    :param guard: a context-manager factory translating DuckDB errors (the projection
        store's :meth:`~memory_ledger.projections.store.ProjectionStore.guard`, which also
        marks a damaged file). Default: translate, naming no file.

    Every query raises a :class:`~memory_ledger.projections.errors.ProjectionError` (or
    ``ProjectionDamagedError``) instead of a raw DuckDB error.
    """

    def __init__(
        self,
        conn: duckdb.DuckDBPyConnection,
        lock: threading.RLock | None = None,
        guard: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
    ) -> None:
        self.conn = conn
        self.lock = lock or threading.RLock()
        self._guard = guard or _translate

    def _rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        """Rows as dicts, fetched as Python tuples (as fast as an Arrow round trip for these
        row counts, and a read needs no pyarrow: the CLI's recall never imports it)."""
        with self.lock, self._guard():
            result = self.conn.execute(sql, params)
            columns = [d[0] for d in result.description]
            fetched = result.fetchall()
        return [dict(zip(columns, row, strict=True)) for row in fetched]

    def _fetch(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        with self.lock, self._guard():
            rows: list[tuple[Any, ...]] = self.conn.execute(sql, params or []).fetchall()
        return rows

    def active_memories(
        self, tenant: str, principal: str, scope_id: str, columns: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Retrievable rows of one namespace, ordered by ``created_position`` (only
        ``columns`` when given: fewer columns, fewer Python objects)."""
        return self._rows(
            f"SELECT {_select(columns)} FROM canonical_memory WHERE {_NAMESPACE_SQL} "
            f"AND {_RETRIEVABLE_SQL} ORDER BY created_position, memory_id",
            [tenant, principal, scope_id],
        )

    def changed_since(
        self, tenant: str, principal: str, scope_id: str, position: int, columns: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Rows of one namespace (any status) whose revision changed after ``position``
        (only ``columns`` when given)."""
        return self._rows(
            f"SELECT {_select(columns)} FROM canonical_memory WHERE {_NAMESPACE_SQL} "
            "AND updated_position > ? ORDER BY updated_position, memory_id",
            [tenant, principal, scope_id, position],
        )

    def get(self, memory_id: str) -> dict[str, Any] | None:
        """One row by memory id (any status), or None."""
        rows = self._rows("SELECT * FROM canonical_memory WHERE memory_id = ?", [memory_id])
        return rows[0] if rows else None

    def count_active(self) -> int:
        """Retrievable rows over every namespace."""
        rows = self._fetch(f"SELECT count(*) FROM canonical_memory WHERE {_RETRIEVABLE_SQL}")
        return int(rows[0][0])

    def session_turns(
        self, tenant: str, principal: str, scope_id: str
    ) -> list[tuple[str, int, int]]:
        """Every observed turn of one namespace as ``(session_id, turn_id, position)``
        (the ``transcripts`` read model: one row per TranscriptObserved, ``position`` its
        ledger position), ordered by position. Recall reads it to find the turns around a
        memory's source turn (``commands.recall.lexical.ConversationWindows``)."""
        rows = self._fetch(
            f"SELECT session_id, turn_id, position FROM transcripts WHERE {_NAMESPACE_SQL} "
            "ORDER BY position",
            [tenant, principal, scope_id],
        )
        return [(str(s), int(t), int(p)) for s, t, p in rows]

    def forgotten_turns(self, tenant: str, principal: str, scope_id: str) -> frozenset[int]:
        """The ledger positions of every transcript a forgotten memory of one namespace was
        drawn from (its ``transcript_positions``). Recall lends no word of these turns to
        any conversation window of the namespace (``commands.recall.lexical.ConversationWindows``):
        a forget must not leave its words steering recall through the neighbours."""
        rows = self._fetch(
            "SELECT DISTINCT unnest(transcript_positions) FROM canonical_memory "
            f"WHERE {_NAMESPACE_SQL} AND status = 'forgotten'",
            [tenant, principal, scope_id],
        )
        return frozenset(int(r[0]) for r in rows if r[0] is not None)

    def count_namespace(self, tenant: str, principal: str, scope_id: str) -> int:
        """Retrievable rows of one namespace."""
        rows = self._fetch(
            f"SELECT count(*) FROM canonical_memory WHERE {_NAMESPACE_SQL} AND {_RETRIEVABLE_SQL}",
            [tenant, principal, scope_id],
        )
        return int(rows[0][0])

    def same_key(
        self, tenant: str, principal: str, scope_id: str, subject: str, predicate: str
    ) -> list[str]:
        """Ids of retrievable memories whose lowercased, trimmed subject and predicate match."""
        rows = self._fetch(
            f"SELECT memory_id FROM canonical_memory WHERE {_NAMESPACE_SQL} AND {_RETRIEVABLE_SQL} "
            "AND lower(trim(subject)) = ? AND lower(trim(predicate)) = ? ORDER BY memory_id",
            [tenant, principal, scope_id, subject, predicate],
        )
        return [str(r[0]) for r in rows]

    def prunable(
        self, tenant: str, principal: str, scope_id: str, max_importance: float, max_uses: int
    ) -> list[dict[str, Any]]:
        """Active rows that pruning may remove: low importance, unpinned, rarely recalled,
        admitted or used, never reinforced (consolidated) and carrying no relations."""
        return self._rows(
            f"SELECT * FROM canonical_memory WHERE {_NAMESPACE_SQL} AND status = 'active' "
            "AND importance < ? AND NOT pinned AND reinforcements = 0 "
            "AND recall_count + admission_count + use_count <= ? "
            "AND len(supersedes) = 0 AND len(conflicts_with) = 0 "
            "ORDER BY created_position",
            [tenant, principal, scope_id, max_importance, max_uses],
        )

    def vocabulary(
        self, tenant: str, principal: str, scope_id: str, field: str
    ) -> list[tuple[str, int]]:
        """``(term, records)`` of one field (``subject``/``predicate``), most frequent first."""
        rows = self._fetch(
            "SELECT term, records FROM vocabulary WHERE tenant = ? AND principal = ? "
            "AND scope_id = ? AND field = ? ORDER BY records DESC, term",
            [tenant, principal, scope_id, field],
        )
        return [(str(term), int(records)) for term, records in rows]
