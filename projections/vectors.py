"""``memory_vectors``: embeddings of canonical memories, a derived DuckDB read model.

Columns (one row per memory, model and field: the latest revision embedded)::

    tenant, principal, scope_id   the memory's namespace
    memory_id, revision           the canonical_memory row and the revision embedded
    content_digest                sha256 of the embedded text (commands.embeddings.base)
    model_key                     EmbeddingDescriptor.model_key(): provider/model/dim/norm
    dimension                     vector length
    vector                        FLOAT[] (unit length: a dot product is the cosine)
    embedded_at                   when the vector was written (wall clock, UTC)
    seq                           insertion order in this file (in-process indexes read
                                  only rows with a higher seq than they hold)
    field                         what was embedded: ``statement`` (the memory's own text)
                                  or ``source`` (the start of the transcript turn it was
                                  extracted from; only memories with provenance have one)

Unlike the event-derived tables, ``memory_vectors`` is not dropped when the projection
version changes and is not part of :data:`projections.tables.TABLES`: vectors are costly to
compute and keyed by content, so a rebuild (same memory ids, revisions and texts) finds
them again.

Each retrievable memory gets a row for its current revision: the indexer writes one
when the revision moves, reusing the stored vector when the text (hence the digest) is
unchanged, and the row replaces the memory's older one. A vector is served only while
its memory is retrievable and its ``content_digest`` equals the digest of the memory's
current text (see ``commands.recall.semantic``), so a revision that kept its text (reinforced,
pinned) keeps being served while its new row is written, and a memory remembered again
with other wording is embedded again. Vectors of superseded, forgotten or pruned memories
stay until :meth:`VectorStore.prune_stale` removes them; they are never served.

All methods expect the caller to hold the projection lock (one DuckDB connection per
process, shared with the projections).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import duckdb
import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.faults import fault
from memory_ledger.projections.errors import rollback_quietly

__all__ = ["FIELDS", "PendingMemory", "StoredVectors", "VectorStore"]

_CREATE = """
CREATE TABLE IF NOT EXISTS memory_vectors (
    tenant VARCHAR NOT NULL,
    principal VARCHAR NOT NULL,
    scope_id VARCHAR NOT NULL,
    memory_id VARCHAR NOT NULL,
    revision BIGINT NOT NULL,
    content_digest VARCHAR NOT NULL,
    model_key VARCHAR NOT NULL,
    dimension INTEGER NOT NULL,
    vector FLOAT[] NOT NULL,
    embedded_at TIMESTAMPTZ NOT NULL,
    seq BIGINT NOT NULL,
    field VARCHAR NOT NULL DEFAULT 'statement'
)
"""

# Files written before source vectors existed: their rows are statement vectors.
_ADD_FIELD = "ALTER TABLE memory_vectors ADD COLUMN IF NOT EXISTS field VARCHAR DEFAULT 'statement'"

FIELDS = ("statement", "source")
"""What a vector row embeds: the memory's statement, or its source transcript turn."""

_HAS_SOURCE_SQL = "coalesce(len(c.transcript_positions), 0) > 0"

_RETRIEVABLE_SQL = "c.status IN ('active', 'conflicted')"

_SCHEMA = pa.schema(
    [
        ("tenant", pa.string()),
        ("principal", pa.string()),
        ("scope_id", pa.string()),
        ("memory_id", pa.string()),
        ("revision", pa.int64()),
        ("content_digest", pa.string()),
        ("model_key", pa.string()),
        ("dimension", pa.int32()),
        ("vector", pa.list_(pa.float32())),
        ("embedded_at", pa.timestamp("us", tz="UTC")),
        ("seq", pa.int64()),
        ("field", pa.string()),
    ]
)


class PendingMemory(msgspec.Struct, frozen=True, kw_only=True):
    """A retrievable canonical memory without a vector of ``field`` for the model
    (``transcript_positions``: where its source transcript is, for ``source``)."""

    tenant: str
    principal: str
    scope_id: str
    memory_id: str
    revision: int
    subject: str | None
    statement: str
    field: str = "statement"
    transcript_positions: tuple[int, ...] = ()


class StoredVectors(msgspec.Struct, frozen=True, kw_only=True):
    """Vector rows read back: parallel tuples plus an ``(n, dimension)`` float32 matrix."""

    memory_ids: tuple[str, ...]
    revisions: tuple[int, ...]
    digests: tuple[str, ...]
    last_seq: int
    matrix: npt.NDArray[np.float32]
    fields: tuple[str, ...] = ()
    """Each row's field (``statement`` or ``source``); empty means all statements."""


class VectorStore:
    """The ``memory_vectors`` table in a projection file (created when absent).

    Every query fetches its whole result (DuckDB refuses other work on a connection that
    holds a half-read result)."""

    def __init__(self, conn: duckdb.DuckDBPyConnection) -> None:
        self.conn = conn
        conn.execute(_CREATE)
        conn.execute(_ADD_FIELD)

    def last_seq(self) -> int:
        """The highest ``seq`` written (0 when empty)."""
        rows = self.conn.execute("SELECT coalesce(max(seq), 0) FROM memory_vectors").fetchall()
        return int(rows[0][0])

    def content_stamp(self) -> tuple[int, int]:
        """``(max(updated_position), count(*))`` of ``canonical_memory``."""
        row = self.conn.execute(
            "SELECT coalesce(max(updated_position), 0), count(*) FROM canonical_memory"
        ).fetchall()[0]
        return (int(row[0]), int(row[1]))

    def _missing_sql(self, fields: Sequence[str]) -> str:
        """A UNION of ``(memory columns, field)`` rows lacking a vector of each field."""
        parts = []
        for field in fields:
            extra = f"AND {_HAS_SOURCE_SQL}" if field == "source" else ""
            parts.append(
                "SELECT c.tenant, c.principal, c.scope_id, c.memory_id, c.revision, c.subject, "
                f"c.statement, '{field}' AS field, c.transcript_positions, c.updated_position "
                f"FROM canonical_memory c WHERE {_RETRIEVABLE_SQL} {extra} "
                "AND NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.model_key = $model "
                f"AND v.memory_id = c.memory_id AND v.revision = c.revision "
                f"AND v.field = '{field}')"
            )
        return " UNION ALL ".join(parts)

    def pending(
        self,
        model_key: str,
        limit: int,
        skip: Sequence[str] = (),
        fields: Sequence[str] = ("statement",),
    ) -> list[PendingMemory]:
        """Up to ``limit`` (memory, field) pairs of retrievable canonical rows with no
        vector row of ``model_key`` and that field for their current revision, oldest change
        first (statements before sources of the same change); ``skip`` lists memory ids to
        leave out (e.g. ones whose embedding failed a moment ago). ``source`` pairs exist
        only for memories with a source transcript."""
        _check_fields(fields)
        skip_sql = "WHERE memory_id NOT IN (SELECT unnest($skip::VARCHAR[]))" if skip else ""
        params: dict[str, object] = {"model": model_key, "limit": limit}
        if skip:
            params["skip"] = list(skip)
        rows = self.conn.execute(
            f"SELECT * FROM ({self._missing_sql(fields)}) {skip_sql} "
            "ORDER BY updated_position, memory_id, field DESC LIMIT $limit",
            params,
        ).fetchall()
        return [
            PendingMemory(
                tenant=r[0],
                principal=r[1],
                scope_id=r[2],
                memory_id=r[3],
                revision=int(r[4]),
                subject=r[5],
                statement=r[6],
                field=r[7],
                transcript_positions=tuple(int(p) for p in (r[8] or ())),
            )
            for r in rows
        ]

    def count_pending(
        self,
        model_key: str,
        namespace: tuple[str, str, str] | None = None,
        fields: Sequence[str] = ("statement",),
    ) -> int:
        """How many (memory, field) pairs of retrievable rows (of one namespace, or all)
        lack a vector row for their current revision."""
        _check_fields(fields)
        ns_sql = "WHERE tenant = $t AND principal = $p AND scope_id = $s" if namespace else ""
        params: dict[str, object] = {"model": model_key}
        if namespace:
            params.update(t=namespace[0], p=namespace[1], s=namespace[2])
        row = self.conn.execute(
            f"SELECT count(*) FROM ({self._missing_sql(fields)}) {ns_sql}", params
        ).fetchall()[0]
        return int(row[0])

    def unembedded(self, model_key: str, namespace: tuple[str, str, str]) -> list[str]:
        """Memory ids of ``namespace``'s retrievable memories with no statement vector row
        of ``model_key`` (of any revision: a revision that kept its text keeps its vector),
        sorted."""
        rows = self.conn.execute(
            "SELECT c.memory_id FROM canonical_memory c "
            f"WHERE {_RETRIEVABLE_SQL} AND c.tenant = ? AND c.principal = ? AND c.scope_id = ? "
            "AND NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.model_key = ? "
            "AND v.memory_id = c.memory_id AND v.field = 'statement') ORDER BY c.memory_id",
            [*namespace, model_key],
        ).fetchall()
        return [str(r[0]) for r in rows]

    def coverage(
        self, model_key: str, namespace: tuple[str, str, str], field: str = "statement"
    ) -> tuple[int, int]:
        """``(eligible, with a vector row of ``field`` for the current revision)`` for one
        namespace: eligible are the retrievable memories (for ``source``: those with a
        source transcript)."""
        _check_fields((field,))
        extra = f"AND {_HAS_SOURCE_SQL}" if field == "source" else ""
        row = self.conn.execute(
            "SELECT count(*), count(v.memory_id) FROM canonical_memory c "
            "LEFT JOIN (SELECT DISTINCT memory_id, revision FROM memory_vectors "
            "WHERE model_key = ? AND tenant = ? AND principal = ? AND scope_id = ? "
            "AND field = ?) v "
            "ON v.memory_id = c.memory_id AND v.revision = c.revision "
            f"WHERE {_RETRIEVABLE_SQL} {extra} "
            "AND c.tenant = ? AND c.principal = ? AND c.scope_id = ?",
            [model_key, *namespace, field, *namespace],
        ).fetchall()[0]
        return (int(row[0]), int(row[1]))

    def store_coverage(self, model_key: str) -> dict[str, tuple[int, int]]:
        """``{field: (eligible, embedded)}`` over the whole store (every namespace), as
        :meth:`coverage` counts them."""
        out: dict[str, tuple[int, int]] = {}
        for field in FIELDS:
            extra = f"AND {_HAS_SOURCE_SQL}" if field == "source" else ""
            row = self.conn.execute(
                "SELECT count(*), count(v.memory_id) FROM canonical_memory c "
                "LEFT JOIN (SELECT DISTINCT memory_id, revision FROM memory_vectors "
                "WHERE model_key = ? AND field = ?) v "
                "ON v.memory_id = c.memory_id AND v.revision = c.revision "
                f"WHERE {_RETRIEVABLE_SQL} {extra}",
                [model_key, field],
            ).fetchall()[0]
            out[field] = (int(row[0]), int(row[1]))
        return out

    def model_keys(self) -> list[str]:
        """The model keys that have vector rows in this file, sorted."""
        rows = self.conn.execute(
            "SELECT DISTINCT model_key FROM memory_vectors ORDER BY model_key"
        ).fetchall()
        return [str(r[0]) for r in rows]

    def oldest_pending_position(self, model_key: str, fields: Sequence[str] = FIELDS) -> int | None:
        """The smallest ``updated_position`` of a retrievable memory still lacking a vector
        of one of ``fields`` (None when nothing is pending): the indexer's lag is measured
        from it."""
        _check_fields(fields)
        row = self.conn.execute(
            f"SELECT min(updated_position) FROM ({self._missing_sql(fields)})",
            {"model": model_key},
        ).fetchall()[0]
        return None if row[0] is None else int(row[0])

    def last_embedded_at(self, model_key: str) -> datetime | None:
        """When the newest vector row of ``model_key`` was written (None: never)."""
        row = self.conn.execute(
            "SELECT max(embedded_at) FROM memory_vectors WHERE model_key = ?", [model_key]
        ).fetchall()[0]
        value = row[0]
        return value if isinstance(value, datetime) else None

    def reusable(
        self, model_key: str, digests: Sequence[str]
    ) -> dict[str, npt.NDArray[np.float32]]:
        """Stored vectors of ``model_key`` for any of ``digests`` (same text, any memory or
        revision): ``{digest: vector}``. Lets unchanged content skip the provider."""
        if not digests:
            return {}
        table = self.conn.sql(
            "SELECT content_digest, any_value(vector) AS vector, any_value(dimension) AS dim "
            "FROM memory_vectors WHERE model_key = $1 AND content_digest IN "
            "(SELECT unnest($2::VARCHAR[])) GROUP BY content_digest",
            params=[model_key, list(digests)],
        ).to_arrow_table()
        if table.num_rows == 0:
            return {}
        dim = int(table.column("dim")[0].as_py())
        flat = table.column("vector").combine_chunks().flatten()
        matrix = np.asarray(flat, dtype=np.float32).reshape(table.num_rows, dim)
        keys = table.column("content_digest").to_pylist()
        return {str(key): matrix[i] for i, key in enumerate(keys)}

    def write(
        self,
        model_key: str,
        memories: Sequence[PendingMemory],
        digests: Sequence[str],
        vectors: npt.NDArray[np.float32],
    ) -> int:
        """Insert one row per memory (``vectors`` row i belongs to ``memories[i]``, of its
        ``field``) in one transaction, replacing the memory's rows of older revisions of the
        same field; rows already present for the same key are not duplicated.

        :returns: the highest ``seq`` written.
        :raises InvalidArgumentError: (a ``ValueError``) the lengths disagree.
        """
        count = len(memories)
        if len(digests) != count or vectors.shape[0] != count:
            msg = f"{count} memories, {len(digests)} digests, {vectors.shape[0]} vectors"
            raise InvalidArgumentError(msg, parameter="vectors")
        if count == 0:
            return self.last_seq()
        dim = int(vectors.shape[1])
        flat = np.ascontiguousarray(vectors, dtype=np.float32).ravel()
        offsets = pa.array(np.arange(0, (count + 1) * dim, dim, dtype=np.int32))
        now = datetime.now(UTC)
        self.conn.execute("BEGIN TRANSACTION")
        try:
            base = self.last_seq()
            batch = pa.Table.from_arrays(
                [
                    pa.array([m.tenant for m in memories], pa.string()),
                    pa.array([m.principal for m in memories], pa.string()),
                    pa.array([m.scope_id for m in memories], pa.string()),
                    pa.array([m.memory_id for m in memories], pa.string()),
                    pa.array([m.revision for m in memories], pa.int64()),
                    pa.array(list(digests), pa.string()),
                    pa.array([model_key] * count, pa.string()),
                    pa.array([dim] * count, pa.int32()),
                    pa.ListArray.from_arrays(offsets, pa.array(flat)),
                    pa.array([now] * count, pa.timestamp("us", tz="UTC")),
                    pa.array(range(base + 1, base + count + 1), pa.int64()),
                    pa.array([m.field for m in memories], pa.string()),
                ],
                schema=_SCHEMA,
            )
            self.conn.register("_vector_batch", batch)
            try:
                # One row per memory and model: a newer revision replaces the older row.
                self.conn.execute(
                    "DELETE FROM memory_vectors v USING _vector_batch b "
                    "WHERE v.model_key = b.model_key AND v.memory_id = b.memory_id "
                    "AND v.field = b.field AND v.revision < b.revision"
                )
                self.conn.execute(
                    "INSERT INTO memory_vectors BY NAME SELECT b.* FROM _vector_batch b "
                    "WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v "
                    "WHERE v.model_key = b.model_key "
                    "AND v.memory_id = b.memory_id AND v.revision = b.revision "
                    "AND v.field = b.field AND v.content_digest = b.content_digest)"
                )
            finally:
                self.conn.unregister("_vector_batch")
            fault("vectors.commit")
            self.conn.execute("COMMIT")
        except BaseException:
            rollback_quietly(self.conn)  # a failed write may have ended the transaction
            raise
        return base + count

    def load(
        self,
        model_key: str,
        namespace: tuple[str, str, str],
        after_seq: int = 0,
        *,
        retrievable_only: bool = True,
    ) -> StoredVectors:
        """Vector rows of ``namespace`` and ``model_key`` with ``seq > after_seq`` whose
        memory is retrievable now in ``canonical_memory``, by seq (``last_seq`` covers the
        rows left out too). ``retrievable_only=False``: every row, whatever
        ``canonical_memory`` says (a reader that checks liveness against a read model ahead
        of it, the serving state)."""
        params = [model_key, *namespace, after_seq]
        join = (
            f"JOIN canonical_memory c ON c.memory_id = v.memory_id AND {_RETRIEVABLE_SQL} "
            if retrievable_only
            else ""
        )
        where = (
            "v.model_key = $1 AND v.tenant = $2 AND v.principal = $3 AND v.scope_id = $4 "
            "AND v.seq > $5"
        )
        last = self.conn.execute(
            f"SELECT coalesce(max(v.seq), $5) FROM memory_vectors v WHERE {where}", params
        ).fetchall()[0][0]
        if last <= after_seq:  # nothing after it: no result set to convert
            return StoredVectors(
                memory_ids=(),
                revisions=(),
                digests=(),
                last_seq=int(after_seq),
                matrix=np.zeros((0, 0), dtype=np.float32),
            )
        table = self.conn.sql(
            "SELECT v.memory_id, v.revision, v.content_digest, v.seq, v.dimension, v.vector, "
            "v.field "
            f"FROM memory_vectors v {join}WHERE {where} ORDER BY v.seq",
            params=params,
        ).to_arrow_table()
        count = table.num_rows
        if count == 0:
            return StoredVectors(
                memory_ids=(),
                revisions=(),
                digests=(),
                last_seq=int(last),
                matrix=np.zeros((0, 0), dtype=np.float32),
            )
        dim = int(table.column("dimension")[0].as_py())
        flat = table.column("vector").combine_chunks().flatten()
        matrix = np.asarray(flat, dtype=np.float32).reshape(count, dim)
        return StoredVectors(
            memory_ids=tuple(table.column("memory_id").to_pylist()),
            revisions=tuple(int(r) for r in table.column("revision").to_pylist()),
            digests=tuple(table.column("content_digest").to_pylist()),
            last_seq=int(last),
            matrix=matrix,
            fields=tuple(table.column("field").to_pylist()),
        )

    def max_seq(self, model_key: str, namespace: tuple[str, str, str]) -> int:
        """The last ``seq`` of ``namespace``'s rows of ``model_key`` (0: none)."""
        rows = self.conn.execute(
            "SELECT coalesce(max(seq), 0) FROM memory_vectors WHERE model_key = $1 "
            "AND tenant = $2 AND principal = $3 AND scope_id = $4",
            [model_key, *namespace],
        ).fetchall()
        return int(rows[0][0])

    def prune_stale(self, model_key: str | None = None) -> int:
        """Delete vectors whose memory is no longer retrievable (of one model, or all);
        returns how many were deleted. Never needed for correctness."""
        model_sql = "AND v.model_key = ?" if model_key else ""
        params = [model_key] if model_key else []
        row = self.conn.execute(
            "DELETE FROM memory_vectors v WHERE NOT EXISTS (SELECT 1 FROM canonical_memory c "
            f"WHERE c.memory_id = v.memory_id AND {_RETRIEVABLE_SQL})"
            f" {model_sql} RETURNING 1",
            params,
        ).fetchall()
        return len(row)


def _check_fields(fields: Sequence[str]) -> None:
    unknown = [f for f in fields if f not in FIELDS]
    if unknown or not fields:
        msg = f"vector fields must be among {FIELDS}, got {tuple(fields)!r}"
        raise ValueError(msg)
