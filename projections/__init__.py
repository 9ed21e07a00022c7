"""Read side: DuckDB read models fed from the ledger, and the in-process recall index."""

from projections.canonical import CANONICAL_SCHEMA, CanonicalMemoryProjection, ProjectionStore
from projections.text_index import BM25Index, IndexedDoc, ScoredDoc, tokenize

__all__ = [
    "BM25Index",
    "CANONICAL_SCHEMA",
    "CanonicalMemoryProjection",
    "IndexedDoc",
    "ProjectionStore",
    "ScoredDoc",
    "tokenize",
]
