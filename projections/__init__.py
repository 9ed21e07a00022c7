"""Read side: DuckDB read models fed from the ledger, and the in-process recall index."""

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
