"""Schemas of the DuckDB read models and the Arrow batch writer they share.

Every read model is a plain table whose column names say what they hold. Rows are written a
page at a time: the rows a page touches are loaded, folded in Python, deleted and re-inserted
from one Arrow table (DuckDB ingests Arrow batches about 250x faster than ``executemany``).
Tables carry no key constraints: the fold keeps keys unique, and DuckDB's constraint checks
would otherwise slow every batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:  # pyarrow (and numpy behind it) loads with the first batch written
    import pyarrow as pa

__all__ = [
    "MEMORY_HISTORY",
    "ReadModelTable",
    "TABLES",
    "VIEWS",
    "create_tables",
    "drop_tables",
    "schema_sql",
]

_STR = "VARCHAR"
_INT = "BIGINT"
_FLOAT = "DOUBLE"
_BOOL = "BOOLEAN"
_TS = "TIMESTAMPTZ"
_STRS = "VARCHAR[]"
_INTS = "BIGINT[]"
_SNAPSHOT_ITEMS = "STRUCT(memory_id VARCHAR, revision BIGINT, statement VARCHAR, score DOUBLE)[]"
"""Column types, as DuckDB names them (the tables' DDL); :func:`arrow_type` maps each to
the Arrow type of the batches written into it."""


def arrow_type(duckdb_type: str) -> pa.DataType:
    """The Arrow type of a column of DuckDB type ``duckdb_type`` (one of the types above)."""
    import pyarrow as pa

    item = pa.struct(
        [
            ("memory_id", pa.string()),
            ("revision", pa.int64()),
            ("statement", pa.string()),
            ("score", pa.float64()),
        ]
    )
    types = {
        _STR: pa.string(),
        _INT: pa.int64(),
        _FLOAT: pa.float64(),
        _BOOL: pa.bool_(),
        _TS: pa.timestamp("us", tz="UTC"),
        _STRS: pa.list_(pa.string()),
        _INTS: pa.list_(pa.int64()),
        _SNAPSHOT_ITEMS: pa.list_(item),
    }
    return types[duckdb_type]


class ReadModelTable:
    """One read-model table: name, columns ``(name, DuckDB type)``, key column (None:
    append-only). Its Arrow :attr:`schema` is built on first use."""

    def __init__(
        self, name: str, columns: Sequence[tuple[str, str]], key: str | None, doc: str
    ) -> None:
        self.name = name
        self.column_types = tuple(columns)
        self.key = key
        self.doc = doc
        self.columns = tuple(column for column, _ in columns)

    @cached_property
    def schema(self) -> pa.Schema:
        """The Arrow schema of this table's batches."""
        import pyarrow as pa

        return pa.schema([(column, arrow_type(kind)) for column, kind in self.column_types])

    @staticmethod
    def array(field: pa.Field, values: Sequence[Any]) -> pa.Array:
        """One column as an Arrow array.

        Datetimes convert exactly, in C, to UTC microseconds whatever their offset (events
        decoded from the ledger are always timezone-aware; a naive one counts as UTC, as
        in the session API).
        """
        import pyarrow as pa

        return pa.array(values, type=field.type)

    def to_arrow(self, rows: Sequence[dict[str, Any]]) -> pa.Table:
        """``rows`` as one Arrow table, built column by column (about 1.6x faster than
        ``Table.from_pylist`` here)."""
        import pyarrow as pa

        arrays = [self.array(field, [row[field.name] for row in rows]) for field in self.schema]
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def insert_arrow(self, conn: duckdb.DuckDBPyConnection, batch: pa.Table) -> None:
        """Append an Arrow batch with this table's schema."""
        view = f"_batch_{self.name}"
        conn.register(view, batch)
        try:
            conn.execute(f"INSERT INTO {self.name} SELECT * FROM {view}")
        finally:
            conn.unregister(view)

    def create_sql(self) -> str:
        """``CREATE TABLE IF NOT EXISTS`` of this table."""
        columns = ", ".join(f"{column} {kind}" for column, kind in self.column_types)
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({columns})"

    def load(
        self, conn: duckdb.DuckDBPyConnection, keys: Iterable[str]
    ) -> dict[str, dict[str, Any]]:
        """Existing rows whose key is in ``keys``, by key."""
        assert self.key is not None
        wanted = sorted(set(keys))
        if not wanted:
            return {}
        table = conn.sql(
            f"SELECT * FROM {self.name} WHERE {self.key} IN (SELECT unnest(?))", params=[wanted]
        ).to_arrow_table()
        return {row[self.key]: row for row in table.to_pylist()}

    def replace(
        self,
        conn: duckdb.DuckDBPyConnection,
        rows: dict[str, dict[str, Any]],
        existing: Iterable[str] = (),
    ) -> None:
        """Delete the ``existing`` keys' old rows and insert ``rows`` (one Arrow batch)."""
        assert self.key is not None
        if not rows:
            return
        stale = sorted(set(existing))
        if stale:
            conn.execute(f"DELETE FROM {self.name} WHERE {self.key} IN (SELECT unnest(?))", [stale])
        self.insert(conn, [rows[k] for k in sorted(rows)])

    def insert(self, conn: duckdb.DuckDBPyConnection, rows: Sequence[dict[str, Any]]) -> None:
        """Append ``rows`` (one Arrow batch)."""
        if not rows:
            return
        self.insert_arrow(conn, self.to_arrow(rows))


CANONICAL_MEMORY = ReadModelTable(
    "canonical_memory",
    [
        ("memory_id", _STR),
        ("tenant", _STR),
        ("principal", _STR),
        ("scope_id", _STR),
        ("status", _STR),
        ("revision", _INT),
        ("subject", _STR),
        ("predicate", _STR),
        ("value", _STR),
        ("statement", _STR),
        ("normalized", _STR),
        ("kind", _STR),
        ("source", _STR),
        ("scope", _STR),
        ("reason", _STR),
        ("tags", _STRS),
        ("importance", _FLOAT),
        ("confidence", _FLOAT),
        ("evidence", _STRS),
        ("session_id", _STR),
        ("turn_id", _INT),
        ("decision", _STR),
        ("candidate_ids", _STRS),
        ("transcript_positions", _INTS),
        ("supersedes", _STRS),
        ("superseded_by", _STR),
        ("conflicts_with", _STRS),
        ("pinned", _BOOL),
        ("reinforcements", _INT),
        ("recall_count", _INT),
        ("admission_count", _INT),
        ("use_count", _INT),
        ("occurred_at", _TS),
        ("activated_at", _TS),
        ("created_position", _INT),
        ("updated_position", _INT),
    ],
    "memory_id",
    "One row per memory item; status active, conflicted, superseded, pruned or forgotten.",
)

CANDIDATES = ReadModelTable(
    "candidates",
    [
        ("candidate_id", _STR),
        ("tenant", _STR),
        ("principal", _STR),
        ("scope_id", _STR),
        ("session_id", _STR),
        ("turn_id", _INT),
        ("item_index", _INT),
        ("extractor_id", _STR),
        ("validation", _STR),
        ("reason_code", _STR),
        ("subject", _STR),
        ("predicate", _STR),
        ("value", _STR),
        ("statement", _STR),
        ("kind", _STR),
        ("source", _STR),
        ("importance", _FLOAT),
        ("confidence", _FLOAT),
        ("position", _INT),
    ],
    None,
    "Every extracted item as validated: validation 'accepted' or 'rejected' (reason_code).",
)

CANDIDATE_OUTCOMES = ReadModelTable(
    "candidate_outcomes",
    [
        ("candidate_id", _STR),
        ("outcome", _STR),
        ("memory_id", _STR),
        ("position", _INT),
    ],
    None,
    "What reconciliation did with a candidate: activated or reinforced, into which memory.",
)

TRANSCRIPTS = ReadModelTable(
    "transcripts",
    [
        ("transcript_key", _STR),
        ("tenant", _STR),
        ("principal", _STR),
        ("scope_id", _STR),
        ("session_id", _STR),
        ("turn_id", _INT),
        ("digest", _STR),
        ("redactions", _INT),
        ("occurred_at", _TS),
        ("recorded_at", _TS),
        ("position", _INT),
    ],
    "transcript_key",
    "Evidence: one row per observed turn (TranscriptObserved).",
)

EXTRACTIONS = ReadModelTable(
    "extractions",
    [
        ("transcript_key", _STR),
        ("session_id", _STR),
        ("turn_id", _INT),
        ("extractor_id", _STR),
        ("extracted", _INT),
        ("rejected", _INT),
        ("position", _INT),
    ],
    None,
    "Completed extraction outcomes per observed turn (ExtractionCompleted).",
)

TURN_SNAPSHOTS = ReadModelTable(
    "turn_snapshots",
    [
        ("snapshot_key", _STR),
        ("tenant", _STR),
        ("principal", _STR),
        ("scope_id", _STR),
        ("session_id", _STR),
        ("turn_id", _INT),
        ("snapshot_id", _STR),
        ("generation", _INT),
        ("query", _STR),
        ("items", _SNAPSHOT_ITEMS),
        ("frozen", _BOOL),
        ("prepared_position", _INT),
        ("frozen_position", _INT),
    ],
    "snapshot_key",
    "The latest snapshot prepared per turn, and whether the turn froze it.",
)

ADMISSIONS = ReadModelTable(
    "admissions",
    [
        ("admission_key", _STR),
        ("tenant", _STR),
        ("principal", _STR),
        ("scope_id", _STR),
        ("session_id", _STR),
        ("turn_id", _INT),
        ("memory_id", _STR),
        ("revision", _INT),
        ("estimated_tokens", _INT),
        ("revoked", _BOOL),
        ("revoke_reason", _STR),
        ("admitted_position", _INT),
        ("revoked_position", _INT),
    ],
    "admission_key",
    "Memory revisions admitted into a turn's context, and revocations.",
)

USES = ReadModelTable(
    "uses",
    [
        ("tenant", _STR),
        ("principal", _STR),
        ("scope_id", _STR),
        ("session_id", _STR),
        ("turn_id", _INT),
        ("memory_id", _STR),
        ("revision", _INT),
        ("position", _INT),
    ],
    None,
    "Memory revisions the host reported as used in a turn.",
)

RECALLS = ReadModelTable(
    "recalls",
    [
        ("tenant", _STR),
        ("principal", _STR),
        ("scope_id", _STR),
        ("session_id", _STR),
        ("turn_id", _INT),
        ("query", _STR),
        ("path", _STR),
        ("memory_ids", _STRS),
        ("position", _INT),
    ],
    None,
    "Recalls served: query, path (snapshot, live, fused) and the memories returned.",
)

MEMORY_HISTORY = ReadModelTable(
    "memory_history",
    [
        ("memory_id", _STR),
        ("tenant", _STR),
        ("principal", _STR),
        ("scope_id", _STR),
        ("status", _STR),
        ("statement", _STR),
        ("current_delta", _INT),
        ("position", _INT),
        ("revision", _INT),
        ("subject", _STR),
        ("predicate", _STR),
        ("value", _STR),
        ("scope", _STR),
        ("tags", _STRS),
        ("importance", _FLOAT),
        ("evidence", _STRS),
        ("occurred_at", _TS),
        ("transcript_positions", _INTS),
        ("created_position", _INT),
    ],
    None,
    "Every revision of every memory (activation, reinforcement, conflict, supersede, pin, "
    "forget, prune): from that position on, its status and the columns recall reads of it "
    "(those of ``canonical_memory`` with the same names), and current_delta +1 when it "
    "became current (active, conflicted), -1 when it stopped, else 0; what was current at "
    "position P is each memory's last row at or before P (each memory has at most one row "
    "per position), and sum(current_delta) up to P counts it.",
)

TABLES: tuple[ReadModelTable, ...] = (
    CANONICAL_MEMORY,
    MEMORY_HISTORY,
    CANDIDATES,
    CANDIDATE_OUTCOMES,
    TRANSCRIPTS,
    EXTRACTIONS,
    TURN_SNAPSHOTS,
    ADMISSIONS,
    USES,
    RECALLS,
)
"""Every read-model table, in creation order."""

VOCABULARY_VIEW = """
CREATE OR REPLACE VIEW vocabulary AS
SELECT tenant, principal, scope_id, 'subject' AS field, subject AS term, count(*) AS records
FROM canonical_memory
WHERE status IN ('active', 'conflicted') AND subject IS NOT NULL
GROUP BY ALL
UNION ALL
SELECT tenant, principal, scope_id, 'predicate' AS field, predicate AS term, count(*) AS records
FROM canonical_memory
WHERE status IN ('active', 'conflicted') AND predicate IS NOT NULL
GROUP BY ALL
"""
"""Subjects and predicates of retrievable memories with their counts, per namespace."""


SESSION_CANDIDATES_VIEW = """
CREATE OR REPLACE VIEW session_candidates AS
SELECT c.*,
       CASE WHEN c.validation = 'rejected' THEN 'rejected'
            ELSE coalesce(o.outcome, 'candidate') END AS status,
       o.memory_id,
       o.position AS reconciled_position
FROM candidates c
LEFT JOIN (
    SELECT candidate_id, arg_max(outcome, position) AS outcome,
           arg_max(memory_id, position) AS memory_id, max(position) AS position
    FROM candidate_outcomes GROUP BY candidate_id
) o USING (candidate_id)
"""
"""Each candidate with its status: rejected, candidate (not reconciled), activated, reinforced."""

PENDING_EXTRACTIONS_VIEW = """
CREATE OR REPLACE VIEW pending_extractions AS
SELECT t.* FROM transcripts t ANTI JOIN extractions e USING (transcript_key)
"""
"""Observed turns whose extraction outcome is not recorded yet (retry them)."""

VIEWS = ("vocabulary", "session_candidates", "pending_extractions")

INDEXES = (
    "CREATE INDEX IF NOT EXISTS canonical_memory_id ON canonical_memory (memory_id)",
    "CREATE INDEX IF NOT EXISTS memory_history_id ON memory_history (memory_id)",
)
"""Point lookups by memory id (explain, the debugger's memory page, a time-travel page's
statements) read a few rows, not the whole table: about 10x faster at 100,000 memories."""


def _schema_statements() -> list[str]:
    return [
        *(table.create_sql() for table in TABLES),
        *INDEXES,
        VOCABULARY_VIEW,
        SESSION_CANDIDATES_VIEW,
        PENDING_EXTRACTIONS_VIEW,
    ]


def schema_sql() -> str:
    """Every statement :func:`create_tables` runs, as one text (the schema's identity)."""
    return ";\n".join(_schema_statements())


def create_tables(conn: duckdb.DuckDBPyConnection) -> None:
    """Create every read-model table and view (idempotent)."""
    for statement in _schema_statements():
        conn.execute(statement)


def drop_tables(conn: duckdb.DuckDBPyConnection) -> None:
    """Drop every read model (for a rebuild after a projection version change)."""
    for view in VIEWS:
        conn.execute(f"DROP VIEW IF EXISTS {view}")
    for table in TABLES:
        conn.execute(f"DROP TABLE IF EXISTS {table.name}")
