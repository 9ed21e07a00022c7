"""Read side: DuckDB read models fed from the ledger, and the in-process recall index.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.projections.canonical import RETRIEVABLE, CanonicalMemory
    from memory_ledger.projections.digest import table_digest, table_digests
    from memory_ledger.projections.errors import ProjectionDamagedError, ProjectionError
    from memory_ledger.projections.fold import PROJECTED_EVENTS, fold_page
    from memory_ledger.projections.memory_map import render_memory_map
    from memory_ledger.projections.runner import PROJECTION_VERSION, ProjectionRunner
    from memory_ledger.projections.store import ProjectionStore, ProjectionUnavailableError
    from memory_ledger.projections.tables import TABLES, ReadModelTable
    from memory_ledger.projections.text_index import BM25Index, IndexedDoc, ScoredDoc, tokenize
    from memory_ledger.projections.tokens import TokenCounter, estimate_tokens

__all__ = [
    "BM25Index",
    "CanonicalMemory",
    "IndexedDoc",
    "PROJECTED_EVENTS",
    "PROJECTION_VERSION",
    "ProjectionDamagedError",
    "ProjectionError",
    "ProjectionRunner",
    "ProjectionStore",
    "ProjectionUnavailableError",
    "RETRIEVABLE",
    "ReadModelTable",
    "ScoredDoc",
    "TABLES",
    "TokenCounter",
    "estimate_tokens",
    "fold_page",
    "render_memory_map",
    "table_digest",
    "table_digests",
    "tokenize",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BM25Index": "memory_ledger.projections.text_index",
        "CanonicalMemory": "memory_ledger.projections.canonical",
        "IndexedDoc": "memory_ledger.projections.text_index",
        "PROJECTED_EVENTS": "memory_ledger.projections.fold",
        "PROJECTION_VERSION": "memory_ledger.projections.runner",
        "ProjectionDamagedError": "memory_ledger.projections.errors",
        "ProjectionError": "memory_ledger.projections.errors",
        "ProjectionRunner": "memory_ledger.projections.runner",
        "ProjectionStore": "memory_ledger.projections.store",
        "ProjectionUnavailableError": "memory_ledger.projections.store",
        "RETRIEVABLE": "memory_ledger.projections.canonical",
        "ReadModelTable": "memory_ledger.projections.tables",
        "ScoredDoc": "memory_ledger.projections.text_index",
        "TABLES": "memory_ledger.projections.tables",
        "TokenCounter": "memory_ledger.projections.tokens",
        "estimate_tokens": "memory_ledger.projections.tokens",
        "fold_page": "memory_ledger.projections.fold",
        "render_memory_map": "memory_ledger.projections.memory_map",
        "table_digest": "memory_ledger.projections.digest",
        "table_digests": "memory_ledger.projections.digest",
        "tokenize": "memory_ledger.projections.text_index",
    },
)
