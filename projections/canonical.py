"""The ``canonical_memory`` read model in DuckDB, fed from the ledger by paged catch-up.

One row per canonical memory item (one memory stream). Columns say what they hold, so a
user can open the file with plain DuckDB SQL::

    SELECT subject, statement, importance FROM canonical_memory
    WHERE tenant = 'locomo' AND status = 'active' ORDER BY created_position;

Catch-up reads pages of notifications after the tracked position, folds each page in Python
(a pure function of the events: no wall clock, no randomness) and writes the page's rows and
the new tracking position in ONE DuckDB transaction through an Arrow batch, so a crash at any
point resumes from the last committed page without double counting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa
from eventsourcing.persistence import ApplicationRecorder, Mapper, Notification
from eventsourcing.utils import get_topic

from ledger.events import LedgerEvent, MemoryActivated, MemoryReinforced

__all__ = ["CANONICAL_SCHEMA", "CanonicalMemoryProjection", "ProjectionStore"]

CANONICAL_SCHEMA = pa.schema(
    [
        ("memory_id", pa.string()),
        ("tenant", pa.string()),
        ("principal", pa.string()),
        ("scope_id", pa.string()),
        ("status", pa.string()),
        ("revision", pa.int64()),
        ("subject", pa.string()),
        ("predicate", pa.string()),
        ("value", pa.string()),
        ("statement", pa.string()),
        ("normalized", pa.string()),
        ("kind", pa.string()),
        ("source", pa.string()),
        ("scope", pa.string()),
        ("reason", pa.string()),
        ("tags", pa.list_(pa.string())),
        ("importance", pa.float64()),
        ("confidence", pa.float64()),
        ("evidence", pa.list_(pa.string())),
        ("session_id", pa.string()),
        ("turn_id", pa.int64()),
        ("candidate_ids", pa.list_(pa.string())),
        ("decision", pa.string()),
        ("reinforcements", pa.int64()),
        ("occurred_at", pa.timestamp("us", tz="UTC")),
        ("activated_at", pa.timestamp("us", tz="UTC")),
        ("created_position", pa.int64()),
        ("updated_position", pa.int64()),
    ]
)
"""Arrow schema of ``canonical_memory`` (also the DuckDB column order)."""

_DUCKDB_TYPES = {
    pa.string(): "VARCHAR",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.list_(pa.string()): "VARCHAR[]",
    pa.timestamp("us", tz="UTC"): "TIMESTAMPTZ",
}

_CREATE_CANONICAL = (
    "CREATE TABLE IF NOT EXISTS canonical_memory ("
    + ", ".join(f"{f.name} {_DUCKDB_TYPES[f.type]}" for f in CANONICAL_SCHEMA)
    + ", PRIMARY KEY (memory_id))"
)

_CREATE_TRACKING = (
    "CREATE TABLE IF NOT EXISTS projection_tracking ("
    "projection VARCHAR PRIMARY KEY, position BIGINT NOT NULL)"
)


class ProjectionStore:
    """One DuckDB file holding read models and their tracking positions.

    :param path: the DuckDB file (created if absent) or ``":memory:"``.
    :raises duckdb.IOException: the file is locked by another process or unreadable.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.conn = duckdb.connect(path)
        self.conn.execute(_CREATE_TRACKING)

    def position(self, projection: str) -> int:
        """The last ledger position applied to ``projection`` (0 when none)."""
        rows = self.conn.execute(
            "SELECT position FROM projection_tracking WHERE projection = ?", [projection]
        ).fetchall()
        return int(rows[0][0]) if rows else 0

    def close(self) -> None:
        self.conn.close()


def _row_from_activation(event: MemoryActivated, position: int) -> dict[str, Any]:
    item = event.item
    ns = event.namespace
    return {
        "memory_id": str(event.originator_id),
        "tenant": ns.tenant,
        "principal": ns.principal,
        "scope_id": ns.scope_id,
        "status": "active",
        "revision": event.originator_version,
        "subject": item.subject,
        "predicate": item.predicate,
        "value": item.value,
        "statement": item.statement,
        "normalized": event.normalized,
        "kind": item.kind,
        "source": item.source,
        "scope": item.scope,
        "reason": item.reason,
        "tags": list(item.tags),
        "importance": item.importance,
        "confidence": item.confidence,
        "evidence": list(item.evidence),
        "session_id": event.session_id,
        "turn_id": event.turn_id,
        "candidate_ids": [str(event.candidate_id)],
        "decision": event.decision,
        "reinforcements": 0,
        "occurred_at": event.occurred_at,
        "activated_at": event.recorded_at,
        "created_position": position,
        "updated_position": position,
    }


class CanonicalMemoryProjection:
    """Projects MemoryActivated / MemoryReinforced events into ``canonical_memory``.

    :param store: the DuckDB projection store.
    :param recorder: the ledger's application recorder (source of notifications).
    :param mapper: decodes stored events (``ledger.mapper.MsgspecMapper``).
    :param page_size: notifications read and applied per DuckDB transaction.
    """

    name = "canonical_memory"
    topics = frozenset({get_topic(MemoryActivated), get_topic(MemoryReinforced)})

    def __init__(
        self,
        store: ProjectionStore,
        recorder: ApplicationRecorder,
        mapper: Mapper[Any],
        *,
        page_size: int = 5000,
    ) -> None:
        self.store = store
        self.recorder = recorder
        self.mapper = mapper
        self.page_size = page_size
        store.conn.execute(_CREATE_CANONICAL)

    @property
    def position(self) -> int:
        """The last ledger position applied (0 when none)."""
        return self.store.position(self.name)

    def catch_up(self, to: int | None = None) -> int:
        """Apply every notification after the tracked position up to ``to`` (or the head).

        Returns the new position. Each page is one DuckDB transaction (rows + tracking).
        """
        position = self.position
        while to is None or position < to:
            notifications = self.recorder.select_notifications(
                start=position, limit=self.page_size, stop=to, inclusive_of_start=False
            )
            if not notifications:
                break
            self.apply_page(notifications, previous=position)
            position = notifications[-1].id
        return position

    def apply_page(self, notifications: Sequence[Notification], *, previous: int) -> None:
        """Fold one page of notifications and commit rows + tracking in one transaction."""
        events: list[tuple[int, LedgerEvent]] = [
            (n.id, self.mapper.to_domain_event(n))  # type: ignore[misc]
            for n in notifications
            if n.topic in self.topics
        ]
        last = notifications[-1].id
        conn = self.store.conn
        conn.execute("BEGIN TRANSACTION")
        try:
            if self.store.position(self.name) != previous:
                # Another applier committed this page first: applying it again would count
                # its events twice.
                conn.execute("ROLLBACK")
                return
            if events:
                touched = sorted({str(e.originator_id) for _, e in events})
                rows = self._load_rows(touched)
                for position, event in events:
                    self._fold(rows, position, event)
                batch = pa.Table.from_pylist(
                    [rows[k] for k in sorted(rows)], schema=CANONICAL_SCHEMA
                )
                conn.execute(
                    "DELETE FROM canonical_memory WHERE memory_id IN (SELECT unnest(?))",
                    [touched],
                )
                conn.register("canonical_batch", batch)
                try:
                    conn.execute("INSERT INTO canonical_memory SELECT * FROM canonical_batch")
                finally:
                    conn.unregister("canonical_batch")
            self._advance(last)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _advance(self, last: int) -> None:
        conn = self.store.conn
        conn.execute(
            "INSERT INTO projection_tracking VALUES (?, ?) "
            "ON CONFLICT (projection) DO UPDATE SET position = excluded.position",
            [self.name, last],
        )

    def _load_rows(self, memory_ids: list[str]) -> dict[str, dict[str, Any]]:
        result = self.store.conn.sql(
            "SELECT * FROM canonical_memory WHERE memory_id IN (SELECT unnest(?))",
            params=[memory_ids],
        ).to_arrow_table()
        return {row["memory_id"]: row for row in result.to_pylist()}

    @staticmethod
    def _fold(rows: dict[str, dict[str, Any]], position: int, event: LedgerEvent) -> None:
        key = str(event.originator_id)
        if isinstance(event, MemoryActivated):
            previous = rows.get(key)
            row = _row_from_activation(event, position)
            if previous is not None:
                row["created_position"] = previous["created_position"]
                row["reinforcements"] = previous["reinforcements"]
            rows[key] = row
        elif isinstance(event, MemoryReinforced):
            row = rows[key]
            row["importance"] = event.importance
            row["tags"] = list(event.tags)
            row["evidence"] = list(event.evidence)
            row["candidate_ids"] = [*row["candidate_ids"], str(event.candidate_id)]
            row["reinforcements"] += 1
            row["revision"] = event.originator_version
            row["updated_position"] = position

    def active_memories(self, tenant: str, principal: str, scope_id: str) -> list[dict[str, Any]]:
        """Active rows of one namespace, ordered by ``created_position``."""
        result = self.store.conn.sql(
            "SELECT * FROM canonical_memory WHERE tenant = ? AND principal = ? "
            "AND scope_id = ? AND status = 'active' ORDER BY created_position, memory_id",
            params=[tenant, principal, scope_id],
        ).to_arrow_table()
        rows: list[dict[str, Any]] = result.to_pylist()
        return rows

    def count_active(self) -> int:
        """Active rows over every namespace."""
        rows = self.store.conn.execute(
            "SELECT count(*) FROM canonical_memory WHERE status = 'active'"
        ).fetchall()
        return int(rows[0][0])
