"""Searching the workspace catalog: lexical, semantic and hybrid ranks, verified at serve time.

* ``lexical``: BM25 over the chunks' code-aware terms;
* ``semantic``: exact cosine between the query's vector and every embedded chunk;
* ``hybrid``: reciprocal-rank fusion of the two channels' independent one-based ranks,
  ``score = sum over channels of 1 / (60 + rank)`` (seed 002, "Ranking": RRF with k = 60
  instead of mixing incomparable raw scores). Ties: best single rank, then path, then offset.

Before a hit is returned its file is read again under the root and its full-file SHA-256
digest compared with the digest the chunk was indexed with (seed 002: "rereads the
authoritative file and verifies the full-file digest and exact chunk byte range"); the hit's
text is cut from the bytes just read. A deleted, changed or unreadable file is never served:
the candidate is dropped, counted in ``rejected`` by reason, and the file is queued for
re-indexing. Each file is read at most once per search.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import msgspec
import numpy as np
import numpy.typing as npt

from memory_ledger.commands.embeddings.base import (
    EmbeddingDescriptor,
    EmbeddingError,
    EmbeddingProvider,
    embed_checked,
)
from memory_ledger.commands.workspace.catalog import (
    ScoredChunk,
    WorkspaceCatalog,
    WorkspaceChunk,
    analyze_code_query,
)
from memory_ledger.commands.workspace.files import WorkspaceRoot, file_digest

__all__ = [
    "RRF_K",
    "SEARCH_MODES",
    "RejectReason",
    "SearchMode",
    "WorkspaceHit",
    "WorkspaceSearchResult",
    "reciprocal_rank_fusion",
    "run_search",
    "search_tool_schema",
]

SearchMode = Literal["lexical", "semantic", "hybrid"]
SEARCH_MODES: tuple[SearchMode, ...] = ("lexical", "semantic", "hybrid")

RejectReason = Literal["deleted", "changed", "unreadable"]

RRF_K = 60
"""The reciprocal-rank fusion constant of the hybrid mode (seed 002)."""

_DEPTH = 4
"""Each channel contributes ``max(20, 4 * k)`` candidates (room for verification drops)."""


class WorkspaceHit(msgspec.Struct, frozen=True, kw_only=True):
    """One verified result: the file ``path``, one-based inclusive ``line_start``..
    ``line_end``, the byte range, the full-file ``digest`` it was verified against, the
    mode's ``score`` (BM25, cosine, or RRF), the ``text`` of the range as read at serve time,
    and its one-based rank in each channel that ranked it."""

    path: str
    line_start: int
    line_end: int
    byte_start: int
    byte_end: int
    digest: str
    score: float
    text: str
    lexical_rank: int | None = None
    semantic_rank: int | None = None

    @property
    def citation(self) -> str:
        """``path:Lstart-Lend@digest12``: what a rendered result cites."""
        return f"{self.path}:L{self.line_start}-{self.line_end}@{self.digest[:12]}"


class WorkspaceSearchResult(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to one search: the verified ``hits`` (best first, at most ``k``),
    candidates dropped at verification by :data:`RejectReason`, and ``degraded`` (the
    :class:`EmbeddingError` reason code when the query could not be embedded: ``semantic``
    then returns nothing and ``hybrid`` falls back to lexical ranks)."""

    query: str
    mode: SearchMode
    k: int
    hits: tuple[WorkspaceHit, ...]
    rejected: dict[str, int] = {}
    degraded: str | None = None


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[WorkspaceChunk]], k: int = RRF_K
) -> list[tuple[WorkspaceChunk, float, list[int | None]]]:
    """Fuse ranked lists by RRF over one-based ranks: ``sum(1 / (k + rank))``.

    :returns: ``(chunk, score, ranks per list or None)``, best first; ties go to the
        better best rank, then path, then byte offset.
    """
    fused: dict[WorkspaceChunk, list[int | None]] = {}
    for channel, ranking in enumerate(rankings):
        for rank, chunk in enumerate(ranking, start=1):
            ranks = fused.setdefault(chunk, [None] * len(rankings))
            if ranks[channel] is None:
                ranks[channel] = rank
    scored = [
        (chunk, sum(1.0 / (k + r) for r in ranks if r is not None), ranks)
        for chunk, ranks in fused.items()
    ]
    scored.sort(
        key=lambda e: (
            -e[1],
            min(r for r in e[2] if r is not None),
            e[0].path,
            e[0].byte_start,
        )
    )
    return scored


def _embed_query(
    provider: EmbeddingProvider, descriptor: EmbeddingDescriptor, query: str
) -> tuple[npt.NDArray[np.float32] | None, str | None]:
    try:
        return embed_checked(provider, descriptor, [query])[0], None
    except EmbeddingError as error:
        return None, error.reason_code


class _Verifier:
    """Re-reads files once per search and checks a chunk's digest and range."""

    def __init__(self, root: WorkspaceRoot, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.files: dict[str, bytes | RejectReason] = {}
        self.rejected: dict[str, int] = {}
        self.stale: set[str] = set()

    def text(self, chunk: WorkspaceChunk) -> str | None:
        """The chunk's text as read now, or None (counted) when the file fails the check."""
        data = self.files.get(chunk.path)
        if data is None:
            try:
                read = self.root.read(chunk.path, self.max_bytes)
            except FileNotFoundError:
                data = "deleted"
            except OSError:
                data = "unreadable"
            else:
                data = read if file_digest(read) == chunk.digest else "changed"
            self.files[chunk.path] = data
        if isinstance(data, str):
            self.rejected[data] = self.rejected.get(data, 0) + 1
            self.stale.add(chunk.path)
            return None
        try:
            return data[chunk.byte_start : chunk.byte_end].decode("utf-8")
        except UnicodeDecodeError:  # pragma: no cover (the digest matched the indexed bytes)
            self.rejected["changed"] = self.rejected.get("changed", 0) + 1
            return None


def run_search(
    catalog: WorkspaceCatalog,
    root: WorkspaceRoot,
    query: str,
    mode: SearchMode,
    k: int,
    *,
    max_bytes: int,
    provider: EmbeddingProvider | None,
    descriptor: EmbeddingDescriptor | None,
    on_stale: Callable[[set[str]], None],
) -> WorkspaceSearchResult:
    """Rank, fuse and verify one search (the caller checked ``mode`` is offered).

    :param max_bytes: the admission size limit (a file grown past it is ``unreadable``).
    :param on_stale: receives the paths found deleted, changed or unreadable.
    """
    depth = max(20, _DEPTH * k)
    lexical: list[ScoredChunk] = []
    semantic: list[ScoredChunk] = []
    degraded = None
    if mode in ("lexical", "hybrid"):
        lexical = catalog.lexical(analyze_code_query(query), depth)
    if mode in ("semantic", "hybrid") and provider is not None and descriptor is not None:
        vector, degraded = _embed_query(provider, descriptor, query)
        if vector is not None:
            semantic = catalog.semantic(vector, depth)
    if mode == "hybrid":
        ranked = [
            (chunk, score, ranks[0], ranks[1])
            for chunk, score, ranks in reciprocal_rank_fusion(
                [[s.chunk for s in lexical], [s.chunk for s in semantic]]
            )
        ]
    elif mode == "lexical":
        ranked = [(s.chunk, s.score, rank, None) for rank, s in enumerate(lexical, 1)]
    else:
        ranked = [(s.chunk, s.score, None, rank) for rank, s in enumerate(semantic, 1)]
    verifier = _Verifier(root, max_bytes)
    hits: list[WorkspaceHit] = []
    for chunk, score, lexical_rank, semantic_rank in ranked:
        if len(hits) >= k:
            break
        text = verifier.text(chunk)
        if text is None:
            continue
        hits.append(
            WorkspaceHit(
                path=chunk.path,
                line_start=chunk.line_start,
                line_end=chunk.line_end,
                byte_start=chunk.byte_start,
                byte_end=chunk.byte_end,
                digest=chunk.digest,
                score=score,
                text=text,
                lexical_rank=lexical_rank,
                semantic_rank=semantic_rank,
            )
        )
    if verifier.stale:
        on_stale(verifier.stale)
    return WorkspaceSearchResult(
        query=query,
        mode=mode,
        k=k,
        hits=tuple(hits),
        rejected=dict(sorted(verifier.rejected.items())),
        degraded=degraded,
    )


def search_tool_schema(modes: Sequence[SearchMode]) -> dict[str, object]:
    """The JSON schema of a model-facing ``search`` tool offering exactly ``modes`` (seed
    002: a session without semantic retrieval omits ``semantic`` and ``hybrid`` rather than
    advertising calls that cannot run)."""
    return {
        "name": "search_workspace",
        "description": "Search the session's workspace files; results cite path, lines and digest.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1},
                "mode": {"type": "string", "enum": list(modes), "default": modes[0]},
                "k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 8},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    }
