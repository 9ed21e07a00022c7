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
    TABLES,
)

__all__ = ["NAMESPACED_TABLES", "erase_namespace_rows"]

NAMESPACED_TABLES: tuple[str, ...] = (
    *(table.name for table in TABLES if "tenant" in table.columns),
    "memory_vectors",
)
"""Every table of a projection file whose rows carry ``tenant, principal, scope_id``."""

_OUTCOMES = (
    f"DELETE FROM {CANDIDATE_OUTCOMES.name} WHERE "  # noqa: S608 (fixed names)
    f"candidate_id IN (SELECT candidate_id FROM {CANDIDATES.name} "
    "WHERE tenant = $1 AND principal = $2 AND scope_id = $3) "
    f"OR memory_id IN (SELECT memory_id FROM {CANONICAL_MEMORY.name} "
    "WHERE tenant = $1 AND principal = $2 AND scope_id = $3)"
)


def _exists(conn: duckdb.DuckDBPyConnection, table: str) -> bool:
    rows = conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [table]
    ).fetchall()
    return bool(rows[0][0])


def erase_namespace_rows(conn: duckdb.DuckDBPyConnection, erased: Iterable[UUID]) -> int:
    """Delete every row of the namespaces whose ids are in ``erased`` from every namespaced
    table in ``conn``, and the candidate outcomes of their candidates and memories (the
    caller owns the transaction); return how many namespaced rows went."""
    wanted = set(erased)
    matching: dict[str, list[tuple[str, str, str]]] = {}
    for table in NAMESPACED_TABLES:
        if not _exists(conn, table):
            continue
        present = conn.execute(
            f"SELECT DISTINCT tenant, principal, scope_id FROM {table}"  # noqa: S608 (fixed names)
        ).fetchall()
        matching[table] = [
            (t, p, s) for t, p, s in present if namespace_ids(Namespace(t, p, s))[0] in wanted
        ]
    # Outcomes carry no namespace: they go with their candidates and memories, first.
    for params in {*matching.get(CANDIDATES.name, ()), *matching.get(CANONICAL_MEMORY.name, ())}:
        conn.execute(_OUTCOMES, list(params))
    deleted = 0
    where = "tenant = ? AND principal = ? AND scope_id = ?"
    for table, namespaces in matching.items():
        for params in namespaces:
            count = conn.execute(
                f"SELECT count(*) FROM {table} WHERE {where}",  # noqa: S608
                list(params),
            ).fetchall()[0][0]
            conn.execute(f"DELETE FROM {table} WHERE {where}", list(params))  # noqa: S608
            deleted += int(count)
    return deleted
