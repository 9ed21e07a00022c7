"""Dropping an erased namespace's rows from a projection file.

When catch-up reaches a :class:`~memory_ledger.ledger.events.NamespaceErased` record, every
row of the erased namespaces leaves every read model, vectors included, in the transaction
that advances the tracking position past it (so a crash leaves the rows with the old
position, and the next catch-up drops them again). The record names namespaces by uuid5
digest only; the digest of each namespace a table holds is computed and compared.

DuckDB keeps deleted rows' old blocks in the file until they are reused; a ``CHECKPOINT``
follows each erasure, and ``memory-ledger replay`` writes a fresh file without them (the
README's "Erasure" section says so).
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

import duckdb

from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.keyring import namespace_ids
from memory_ledger.projections.tables import (
    CANDIDATE_OUTCOMES,
    CANDIDATES,
    CANONICAL_MEMORY,
    EXTRACTIONS,
    TABLES,
    TRANSCRIPTS,
)

__all__ = ["NAMESPACED_TABLES", "erase_namespace_rows"]

NAMESPACED_TABLES: tuple[str, ...] = (
    *(table.name for table in TABLES if "tenant" in table.columns),
    "memory_vectors",
)
"""Every table of a projection file whose rows carry ``tenant, principal, scope_id``."""

_OUTCOMES = (
    f"DELETE FROM {CANDIDATE_OUTCOMES.name} WHERE candidate_id IN "  # noqa: S608 (fixed names)
    f"(SELECT candidate_id FROM {CANDIDATES.name} "
    "WHERE tenant = ? AND principal = ? AND scope_id = ?)"
)
_MEMORY_OUTCOMES = (
    f"DELETE FROM {CANDIDATE_OUTCOMES.name} WHERE memory_id IN "  # noqa: S608 (fixed names)
    f"(SELECT memory_id FROM {CANONICAL_MEMORY.name} "
    "WHERE tenant = ? AND principal = ? AND scope_id = ?)"
)
_EXTRACTIONS = (
    f"DELETE FROM {EXTRACTIONS.name} WHERE transcript_key IN "  # noqa: S608 (fixed names)
    f"(SELECT transcript_key FROM {TRANSCRIPTS.name} "
    "WHERE tenant = ? AND principal = ? AND scope_id = ?)"
)


def _exists(conn: duckdb.DuckDBPyConnection, table: str) -> bool:
    rows = conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [table]
    ).fetchall()
    return bool(rows[0][0])


def erase_namespace_rows(conn: duckdb.DuckDBPyConnection, erased: Iterable[UUID]) -> int:
    """Delete every row of the namespaces whose ids are in ``erased`` from every namespaced
    table in ``conn``, and the candidate outcomes of their candidates (the caller owns the
    transaction); return how many namespaced rows went.

    Rows of the tables without namespace columns go with their owners: candidate outcomes
    with their candidates or their memories (an explicit command's candidate has no
    candidates row), extraction outcomes with their transcripts."""
    wanted = set(erased)
    deleted = 0
    for table in NAMESPACED_TABLES:
        if not _exists(conn, table):
            continue
        present = conn.execute(
            f"SELECT DISTINCT tenant, principal, scope_id FROM {table}"  # noqa: S608 (fixed names)
        ).fetchall()
        for tenant, principal, scope_id in present:
            if namespace_ids(Namespace(tenant, principal, scope_id))[0] not in wanted:
                continue
            where = "tenant = ? AND principal = ? AND scope_id = ?"
            params = [tenant, principal, scope_id]
            if table == CANONICAL_MEMORY.name:
                # The outcomes of explicit commands' candidates (no candidates row).
                conn.execute(_MEMORY_OUTCOMES, params)
            elif table == CANDIDATES.name:
                # Outcomes carry no namespace: they go with their candidates.
                conn.execute(_OUTCOMES, params)
            elif table == TRANSCRIPTS.name:
                # Extraction outcomes carry no namespace: they go with their transcripts.
                conn.execute(_EXTRACTIONS, params)
            count = conn.execute(
                f"SELECT count(*) FROM {table} WHERE {where}",  # noqa: S608
                params,
            ).fetchall()[0][0]
            conn.execute(f"DELETE FROM {table} WHERE {where}", params)  # noqa: S608
            deleted += int(count)
    return deleted
