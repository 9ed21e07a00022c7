"""The hybrid ranking pipeline of canonical recall, as a pure function (issue 26 item 2).

:func:`rank_candidates` takes the namespace's lexical index and documents as they stand, the
fusion's settings, and (when the semantic channel is on) the query's semantic scores behind
a small :class:`SemanticScores` Protocol, and returns the best memories with their scores.
It reads no clock, holds no lock and catches nothing up: the engine keeps the lock, the
catch-up, the query embedding and the channel's status (``MemoryEngine.canonical_candidates``).

Steps (docs/design.md, recall): BM25 over the namespace's documents
(:func:`~memory_ledger.commands.recall.index.lexical_search`), deep enough for fusion; lexical
matches under ``min_lexical_score`` dropped (:class:`RecallPolicy`); with semantic scores,
the nearest memories by vector and the cosines of the lexical matches are fused by
:meth:`HybridFusion.fuse_scores` (per-query min-max normalisation by default), then memories
that occurred near a calendar day or month the query names gain the fusion's
``temporal_boost`` (:meth:`HybridFusion.boost_dated`). Ties break by score, then ledger
position, then memory id.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from memory_ledger.commands.recall.fusion import HybridFusion
from memory_ledger.commands.recall.index import MemoryDoc, lexical_search
from memory_ledger.commands.recall.signals import (
    memory_names,
    neighbour_lift,
    query_names,
    quoted_phrases,
)
from memory_ledger.commands.recall.temporal import occurred_in, query_dates
from memory_ledger.projections.text_index import BM25Index

__all__ = ["SemanticScores", "fuse_channels", "rank_candidates"]


class SemanticScores(Protocol):
    """The semantic channel's scores for one query (its vector already computed)."""

    def nearest(self, depth: int) -> list[tuple[str, float]]:
        """The ``depth`` nearest memory ids with their scores, best first."""
        ...

    def cosines(self, memory_ids: Sequence[str]) -> dict[str, float]:
        """The verified scores of the given memories (those that have vectors)."""
        ...


def rank_candidates(
    query: str,
    depth: int,
    index: BM25Index,
    by_id: Mapping[str, MemoryDoc],
    fusion: HybridFusion,
    *,
    semantic: SemanticScores | None = None,
    min_lexical_score: float = 0.0,
) -> list[tuple[MemoryDoc, float]]:
    """The best ``depth`` memories of ``by_id`` for ``query`` with their scores: BM25
    scores when ``semantic`` is None, fused scores otherwise (see the module doc).

    :param index: the BM25 index over exactly the documents of ``by_id``.
    :param fusion: the fusion's weights, depth, fields and temporal boost.
    """
    lexical_depth = depth if semantic is None else max(depth, fusion.depth)
    lexical = lexical_search(index, by_id, query, lexical_depth)
    if min_lexical_score > 0:
        lexical = [s for s in lexical if s.score >= min_lexical_score]
    if semantic is None:
        return [(by_id[s.doc_id], s.score) for s in lexical[:depth]]
    nearest = semantic.nearest(fusion.depth)
    scores = semantic.cosines([s.doc_id for s in lexical])
    scores.update(nearest)
    fused = fuse_channels(
        query,
        [(s.doc_id, s.score) for s in lexical],
        [memory_id for memory_id, _ in nearest],
        scores,
        by_id,
        fusion,
    )
    return [(by_id[memory_id], score) for memory_id, score in fused[:depth]]


def fuse_channels(
    query: str,
    lexical: Sequence[tuple[str, float]],
    nearest: Sequence[str],
    cosines: Mapping[str, float],
    by_id: Mapping[str, MemoryDoc],
    fusion: HybridFusion,
) -> list[tuple[str, float]]:
    """The fusion step of :func:`rank_candidates` once both channels have answered:
    ``lexical`` ``(id, bm25)`` best first, ``nearest`` ids best first, ``cosines`` the
    semantic score of every id the channel knows. :meth:`HybridFusion.fuse_scores` (a
    memory without a source turn weighed by ``direct_alpha`` when set), then the signals
    of :mod:`commands.recall.signals` whose weight is above 0, then the temporal boost.
    Returns ``(id, score)`` best first, ties by position then id."""

    def position(memory_id: str) -> int:
        return by_id[memory_id].position

    fused = fusion.fuse_scores(
        lexical,
        nearest,
        cosines,
        position,
        lambda memory_id: by_id[memory_id].context is None,
    )
    if fusion.name_boost > 0 or fusion.phrase_boost > 0 or fusion.neighbour_share > 0:
        fused = _signals(query, fused, by_id, fusion, position)
    dates = query_dates(query) if fusion.temporal_boost > 0 else ()
    if dates:
        fused = fusion.boost_dated(
            fused,
            lambda memory_id: occurred_in(by_id[memory_id].occurred_at, dates),
            position,
        )
    return fused


def _signals(
    query: str,
    fused: Sequence[tuple[str, float]],
    by_id: Mapping[str, MemoryDoc],
    fusion: HybridFusion,
    position: Callable[[str], int],
) -> list[tuple[str, float]]:
    """``fused`` with the name, phrase and neighbour signals added, re-sorted."""
    scores = dict(fused)
    at = {memory_id: position(memory_id) for memory_id in scores}
    if fusion.neighbour_share > 0:
        ordered = sorted(scores, key=lambda memory_id: (at[memory_id], memory_id))
        scores = neighbour_lift(
            scores,
            ordered,
            fusion.neighbour_share,
            lambda memory_id: by_id[memory_id].context is None,
        )
    names = query_names(query) if fusion.name_boost > 0 else frozenset()
    phrases = quoted_phrases(query) if fusion.phrase_boost > 0 else ()
    if names or phrases:
        for memory_id in scores:
            doc = by_id[memory_id]
            if names:
                held = memory_names(doc.subject, doc.statement)
                scores[memory_id] += fusion.name_boost * len(names & held) / len(names)
            if phrases and any(p in doc.statement.casefold() for p in phrases):
                scores[memory_id] += fusion.phrase_boost
    return sorted(scores.items(), key=lambda item: (-item[1], at[item[0]], item[0]))
