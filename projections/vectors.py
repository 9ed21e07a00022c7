"""``memory_vectors``: embeddings of canonical memories, a derived DuckDB read model.

Columns (one row per memory and model: the latest revision embedded)::

    tenant, principal, scope_id   the memory's namespace
    memory_id, revision           the canonical_memory row and the revision embedded
    content_digest                sha256 of the embedded text (commands.embeddings)
    model_key                     EmbeddingDescriptor.model_key(): provider/model/dim/norm
    dimension                     vector length
    vector                        FLOAT[] (unit length: a dot product is the cosine)
    embedded_at                   when the vector was written (wall clock, UTC)
    seq                           insertion order in this file (in-process indexes read
                                  only rows with a higher seq than they hold)

Unlike the event-derived tables, ``memory_vectors`` is not dropped when the projection
version changes and is not part of :data:`projections.tables.TABLES`: vectors are costly to
compute and keyed by content, so a rebuild (same memory ids, revisions and texts) finds
them again.

Each retrievable memory gets a row for its current revision: the indexer writes one
when the revision moves, reusing the stored vector when the text (hence the digest) is
unchanged, and the row replaces the memory's older one. A vector is served only while
its memory is retrievable and its ``content_digest`` equals the digest of the memory's
current text (see ``commands.semantic``), so a revision that kept its text (reinforced,
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

__all__ = ["PendingMemory", "StoredVectors", "VectorStore"]

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
    seq BIGINT NOT NULL
)
"""

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
    ]
)


class PendingMemory(msgspec.Struct, frozen=True, kw_only=True):
    """A retrievable canonical memory without a vector for the model."""

    tenant: str
    principal: str
    scope_id: str
    memory_id: str
    revision: int
    subject: str | None
    statement: str


class StoredVectors(msgspec.Struct, frozen=True, kw_only=True):
    """Vector rows read back: parallel tuples plus an ``(n, dimension)`` float32 matrix."""

    memory_ids: tuple[str, ...]
    revisions: tuple[int, ...]
    digests: tuple[str, ...]
    last_seq: int
    matrix: npt.NDArray[np.float32]


class VectorStore:
    """The ``memory_vectors`` table in a projection file (created when absent).

    Every query fetches its whole result (DuckDB refuses other work on a connection that
    holds a half-read result)."""

    def __init__(self, conn: duckdb.DuckDBPyConnection) -> None:
        self.conn = conn
        conn.execute(_CREATE)

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

    def pending(self, model_key: str, limit: int, skip: Sequence[str] = ()) -> list[PendingMemory]:
        """Up to ``limit`` retrievable canonical rows with no vector row of ``model_key`` for
        their current revision, oldest change first; ``skip`` lists memory ids to leave out
        (e.g. ones whose embedding failed a moment ago)."""
        skip_sql = "AND c.memory_id NOT IN (SELECT unnest(?::VARCHAR[]))" if skip else ""
        params: list[object] = [list(skip)] if skip else []
        rows = self.conn.execute(
            "SELECT c.tenant, c.principal, c.scope_id, c.memory_id, c.revision, c.subject, "
            f"c.statement FROM canonical_memory c WHERE {_RETRIEVABLE_SQL} {skip_sql} "
            "AND NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.model_key = ? "
            "AND v.memory_id = c.memory_id AND v.revision = c.revision) "
            "ORDER BY c.updated_position, c.memory_id LIMIT ?",
            [*params, model_key, limit],
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
            )
            for r in rows
        ]

    def count_pending(self, model_key: str, namespace: tuple[str, str, str] | None = None) -> int:
        """How many retrievable rows (of one namespace, or all) lack a vector row for their
        current revision."""
        ns_sql = "AND c.tenant = ? AND c.principal = ? AND c.scope_id = ?" if namespace else ""
        params: list[object] = [*namespace] if namespace else []
        row = self.conn.execute(
            f"SELECT count(*) FROM canonical_memory c WHERE {_RETRIEVABLE_SQL} {ns_sql} "
            "AND NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.model_key = ? "
            "AND v.memory_id = c.memory_id AND v.revision = c.revision)",
            [*params, model_key],
        ).fetchall()[0]
        return int(row[0])

    def coverage(self, model_key: str, namespace: tuple[str, str, str]) -> tuple[int, int]:
        """``(retrievable, with a vector row for the current revision)`` for one namespace."""
        row = self.conn.execute(
            "SELECT count(*), count(v.memory_id) FROM canonical_memory c "
            "LEFT JOIN (SELECT DISTINCT memory_id, revision FROM memory_vectors "
            "WHERE model_key = ? AND tenant = ? AND principal = ? AND scope_id = ?) v "
            "ON v.memory_id = c.memory_id AND v.revision = c.revision "
            f"WHERE {_RETRIEVABLE_SQL} AND c.tenant = ? AND c.principal = ? AND c.scope_id = ?",
            [model_key, *namespace, *namespace],
        ).fetchall()[0]
        return (int(row[0]), int(row[1]))

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
        """Insert one row per memory (``vectors`` row i belongs to ``memories[i]``) in one
        transaction, replacing the memory's rows of older revisions; rows already present
        for the same key are not duplicated.

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
                ],
                schema=_SCHEMA,
            )
            self.conn.register("_vector_batch", batch)
            try:
                # One row per memory and model: a newer revision replaces the older row.
                self.conn.execute(
                    "DELETE FROM memory_vectors v USING _vector_batch b "
                    "WHERE v.model_key = b.model_key AND v.memory_id = b.memory_id "
                    "AND v.revision < b.revision"
                )
                self.conn.execute(
                    "INSERT INTO memory_vectors SELECT b.* FROM _vector_batch b WHERE NOT EXISTS "
                    "(SELECT 1 FROM memory_vectors v WHERE v.model_key = b.model_key "
                    "AND v.memory_id = b.memory_id AND v.revision = b.revision "
                    "AND v.content_digest = b.content_digest)"
                )
            finally:
                self.conn.unregister("_vector_batch")
            fault("vectors.commit")
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return base + count

    def load(
        self, model_key: str, namespace: tuple[str, str, str], after_seq: int = 0
    ) -> StoredVectors:
        """Vector rows of ``namespace`` and ``model_key`` with ``seq > after_seq`` whose
        memory is retrievable now, by seq (``last_seq`` covers the rows left out too)."""
        params = [model_key, *namespace, after_seq]
        where = (
            "v.model_key = $1 AND v.tenant = $2 AND v.principal = $3 AND v.scope_id = $4 "
            "AND v.seq > $5"
        )
        last = self.conn.execute(
            f"SELECT coalesce(max(v.seq), $5) FROM memory_vectors v WHERE {where}", params
        ).fetchall()[0][0]
        table = self.conn.sql(
            "SELECT v.memory_id, v.revision, v.content_digest, v.seq, v.dimension, v.vector "
            f"FROM memory_vectors v JOIN canonical_memory c ON c.memory_id = v.memory_id "
            f"AND {_RETRIEVABLE_SQL} WHERE {where} ORDER BY v.seq",
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
        )

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
