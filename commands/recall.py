"""Lexical recall over a namespace's canonical memory (BM25, DESIGN.md section 5).

The index lives in process memory, rebuilt from the ``canonical_memory`` read model only when
the projection position has moved (one DuckDB query costs milliseconds; a BM25 search over
the in-process index costs microseconds). Documents are ``subject + " " + statement``;
ties break by score, then the memory's creation position, then its id.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from ledger.ids import Namespace
from projections.canonical import CanonicalMemory
from projections.text_index import BM25Index, IndexedDoc

__all__ = ["NamespaceRecallIndex", "RecallHit", "RecallResult"]


class RecallHit(msgspec.Struct, frozen=True, kw_only=True):
    """One recalled memory: 1-based ``rank``, BM25 ``score`` and its provenance."""

    rank: int
    memory_id: str
    statement: str
    subject: str | None
    score: float
    evidence: tuple[str, ...]
    occurred_at: datetime | None


class RecallResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a ``recall_context`` tool call returns to a model (JSON-serializable).

    ``position`` is the ledger position the answer reflects; ``path`` how it was served.
    """

    query: str
    results: tuple[RecallHit, ...]
    position: int
    path: str = "live"
    turn_id: int | None = None


class NamespaceRecallIndex:
    """BM25 indexes of active memories, one per namespace, kept in step with the projection."""

    def __init__(self, projection: CanonicalMemory) -> None:
        self.projection = projection
        self._cache: dict[str, tuple[int, BM25Index, dict[str, dict[str, Any]]]] = {}

    def search(self, namespace: Namespace, query: str, k: int, position: int) -> list[RecallHit]:
        """Top ``k`` active memories of ``namespace`` for ``query`` at projection ``position``."""
        key = namespace.key()
        cached = self._cache.get(key)
        if cached is None or cached[0] != position:
            rows = self.projection.active_memories(
                namespace.tenant, namespace.principal, namespace.scope_id
            )
            by_id = {row["memory_id"]: row for row in rows}
            index = BM25Index.build(
                IndexedDoc(
                    doc_id=row["memory_id"],
                    position=row["created_position"],
                    text=f"{row['subject'] or ''} {row['statement']}",
                )
                for row in rows
            )
            cached = (position, index, by_id)
            self._cache[key] = cached
        _, index, by_id = cached
        hits = []
        for rank, scored in enumerate(index.search(query, k), start=1):
            row = by_id[scored.doc_id]
            hits.append(
                RecallHit(
                    rank=rank,
                    memory_id=scored.doc_id,
                    statement=row["statement"],
                    subject=row["subject"],
                    score=scored.score,
                    evidence=tuple(row["evidence"] or ()),
                    occurred_at=row["occurred_at"],
                )
            )
        return hits
