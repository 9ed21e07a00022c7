"""Read side: DuckDB read models fed from the ledger, and the in-process recall index."""

from projections.canonical import RETRIEVABLE, CanonicalMemory
from projections.digest import table_digest, table_digests
from projections.fold import PROJECTED_EVENTS, fold_page
from projections.memory_map import estimate_tokens, render_memory_map
from projections.runner import PROJECTION_VERSION, ProjectionRunner
from projections.store import ProjectionStore, ProjectionUnavailableError
from projections.tables import TABLES, ReadModelTable
from projections.text_index import BM25Index, IndexedDoc, ScoredDoc, tokenize

__all__ = [
    "BM25Index",
    "CanonicalMemory",
    "IndexedDoc",
    "PROJECTED_EVENTS",
    "PROJECTION_VERSION",
    "ProjectionRunner",
    "ProjectionStore",
    "ProjectionUnavailableError",
    "RETRIEVABLE",
    "ReadModelTable",
    "ScoredDoc",
    "TABLES",
    "estimate_tokens",
    "fold_page",
    "render_memory_map",
    "table_digest",
    "table_digests",
    "tokenize",
]
