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

from collections.abc import Callable, Iterable
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

__all__ = ["NAMESPACED_TABLES", "erase_namespace_rows", "present_namespaces"]

NAMESPACED_TABLES: tuple[str, ...] = (
    *(table.name for table in TABLES if "tenant" in table.columns),
    "memory_vectors",
)
"""Every table of a projection file whose rows carry ``tenant, principal, scope_id``."""

_WHERE = "tenant = ? AND principal = ? AND scope_id = ?"
_DEPENDENT: tuple[tuple[str, str, str, str], ...] = (
    # (table without a namespace, its key column, the namespaced table, its key column)
    (CANDIDATE_OUTCOMES.name, "candidate_id", CANDIDATES.name, "candidate_id"),
    (CANDIDATE_OUTCOMES.name, "memory_id", CANONICAL_MEMORY.name, "memory_id"),
    (EXTRACTIONS.name, "transcript_key", TRANSCRIPTS.name, "transcript_key"),
)
"""Rows that carry no namespace go with the namespaced rows they belong to: a candidate's
outcome with its candidate (or, for a direct command's activation, which has no candidate
row, with its memory), a turn's extraction outcome with its transcript."""


def _exists(conn: duckdb.DuckDBPyConnection, table: str) -> bool:
    rows = conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [table]
    ).fetchall()
    return bool(rows[0][0])


def present_namespaces(conn: duckdb.DuckDBPyConnection) -> list[Namespace]:
    """Every namespace some read model in ``conn`` holds rows of (sorted)."""
    found: set[tuple[str, str, str]] = set()
    for table in NAMESPACED_TABLES:
        if _exists(conn, table):
            rows = conn.execute(
                f"SELECT DISTINCT tenant, principal, scope_id FROM {table}"  # noqa: S608
            ).fetchall()
            found.update((str(t), str(p), str(s)) for t, p, s in rows)
    return [Namespace(*parts) for parts in sorted(found)]


def _unkeyed_namespace_id(namespace: Namespace) -> UUID:
    return namespace_ids(namespace)[0]


def erase_namespace_rows(
    conn: duckdb.DuckDBPyConnection,
    erased: Iterable[UUID],
    namespace_id: Callable[[Namespace], UUID] | None = None,
) -> int:
    """Delete every row of the namespaces whose ids are in ``erased`` from every namespaced
    table in ``conn``, and the rows without a namespace that belong to them (candidate
    outcomes, extraction outcomes; the caller owns the transaction); return how many
    namespaced rows went. ``namespace_id`` derives a namespace's id as the store does
    (:meth:`~memory_ledger.ledger.keyring.Keyring.namespace_id`; default: id format 1)."""
    if namespace_id is None:
        namespace_id = _unkeyed_namespace_id
    wanted = set(erased)
    tables = [table for table in NAMESPACED_TABLES if _exists(conn, table)]
    matched: set[tuple[str, str, str]] = set()
    for table in tables:
        present = conn.execute(
            f"SELECT DISTINCT tenant, principal, scope_id FROM {table}"  # noqa: S608 (fixed names)
        ).fetchall()
        for tenant, principal, scope_id in present:
            if namespace_id(Namespace(tenant, principal, scope_id)) in wanted:
                matched.add((tenant, principal, scope_id))
    deleted = 0
    for key in sorted(matched):
        params = list(key)
        for dependent, column, owner, owner_column in _DEPENDENT:
            if owner in tables:
                conn.execute(
                    f"DELETE FROM {dependent} WHERE {column} IN "  # noqa: S608 (fixed names)
                    f"(SELECT {owner_column} FROM {owner} WHERE {_WHERE})",
                    params,
                )
        for table in tables:
            count = conn.execute(
                f"SELECT count(*) FROM {table} WHERE {_WHERE}",  # noqa: S608 (fixed names)
                params,
            ).fetchall()[0][0]
            conn.execute(f"DELETE FROM {table} WHERE {_WHERE}", params)  # noqa: S608
            deleted += int(count)
    return deleted
