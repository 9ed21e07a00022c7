"""How recall fuses its channels: per-query min-max normalisation and a convex
combination (the default), raw-score fusion, or reciprocal-rank fusion.

Channels of canonical memory:

- lexical: BM25 over subject, statement and the start of the source transcript
  (:mod:`commands.recall.lexical`);
- semantic: exact cosine of the query with each memory's vectors (its statement and, when
  it has one, its source transcript turn); a memory's semantic score is the better of its
  vectors' cosines (``max``), so a memory is found by its own words or by the turn it came
  from.

Default (:data:`DEFAULT_FUSION`, ``method="minmax"``): each channel's scores over the
candidates (the union of both channels' top ``depth``) are min-max normalised per query to
``[0, 1]``, then ``alpha * semantic + (1 - alpha) * lexical``; a candidate absent from a
channel scores 0 there. This is the convex combination with min-max normalisation analysed
by Bruch, Gai and Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval" (ACM TOIS
42(1), 2023): unlike raw scores it does not depend on the scale of a model's cosines (models
such as multilingual-e5 put every cosine in a narrow band, where a fixed
``0.7 * cosine + 0.3 * bm25 / max`` lets BM25 decide everything), and unlike RRF it keeps
how far apart the scores are. ``alpha`` was chosen by leave-one-conversation-out on LoCoMo
(``python -m benchmarks locomo``).

Dates named in the query (:mod:`commands.recall.temporal`): after fusion, a memory whose
``occurred_at`` falls near a calendar day or month the query names gains
``temporal_boost`` (:meth:`HybridFusion.boost_dated`; fused scores are in ``[0, 1]``, so
0.3 lifts a dated match past most undated ones without deciding alone). Chosen with
``alpha`` by leave-one-conversation-out on LoCoMo (per-fold choices 0.3-0.5 for both
models).

Ties break by fused score, then ledger position, then memory id (docs/design.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import msgspec

from memory_ledger.ledger.errors import InvalidArgumentError

__all__ = [
    "DEFAULT_FUSION",
    "LEGACY_FUSION",
    "TUNED_ALPHA",
    "TUNED_DIRECT",
    "TUNED_TEMPORAL_BOOST",
    "PLAIN_RRF",
    "RRF_K",
    "FusionError",
    "HybridFusion",
    "fusion_for",
    "minmax",
    "rrf_fuse",
]

RRF_K = 60
"""The reciprocal-rank-fusion constant (Cormack, Clarke and Buettcher, SIGIR 2009)."""

VectorField = Literal["statement", "source"]


class FusionError(InvalidArgumentError):
    """A :class:`HybridFusion` was given an invalid setting (a ``ValueError``; the message
    and ``parameter`` name it); ``reason_code`` is ``invalid_fusion``."""

    reason_code = "invalid_fusion"


def minmax(scores: Mapping[str, float]) -> dict[str, float]:
    """Per-query min-max normalisation: ``(s - min) / (max - min)`` in ``[0, 1]``.

    When every score is equal (one candidate, or a flat channel) each becomes 1.0 if the
    common value is positive and 0.0 otherwise, so a channel that matched nothing adds
    nothing. Empty in, empty out.
    """
    if not scores:
        return {}
    low = min(scores.values())
    high = max(scores.values())
    if high - low <= 0.0:
        flat = 1.0 if high > 0.0 else 0.0
        return {doc_id: flat for doc_id in scores}
    span = high - low
    return {doc_id: (value - low) / span for doc_id, value in scores.items()}


def rrf_fuse(
    rankings: Sequence[Sequence[str]],
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion of ranked id lists: ``(id, score)``, best first.

    ``score(d) = sum_i weights[i] / (k + rank_i(d))`` (Cormack et al. 2009; weights 1.0 by
    default). Ties break by the best rank an id reached, then by the first ranking it
    appeared in (earlier rankings are preferred: pass the live search first), then by the id.
    """
    scores: dict[str, float] = {}
    best: dict[str, tuple[int, int]] = {}
    for index, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[index]
        for rank, doc_id in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (k + rank)
            best[doc_id] = min(best.get(doc_id, (rank, index)), (rank, index))
    return sorted(scores.items(), key=lambda item: (-item[1], best[item[0]], item[0]))


class HybridFusion(msgspec.Struct, frozen=True, kw_only=True):
    """How the lexical and semantic rankings of canonical memory are fused.

    ``method="minmax"`` (the default): ``alpha * minmax(semantic) + (1 - alpha) *
    minmax(bm25)`` over the union of both channels' top ``depth`` (see the module
    docstring; Bruch et al. 2023).

    ``method="score"`` (the default before LoCoMo tuning, :data:`LEGACY_FUSION`):
    ``alpha * cosine + (1 - alpha) * bm25 / max(bm25)``, raw cosines.

    ``method="rrf"``: weighted reciprocal-rank fusion, ``lexical_weight / (k + lexical
    rank) + semantic_weight / (k + semantic rank)``; ``k = 60`` with equal weights is plain
    RRF (Cormack, Clarke and Buettcher, SIGIR 2009), :data:`PLAIN_RRF`.

    ``fields``: which of a memory's vectors the semantic channel searches; its score is the
    best of their cosines (``("statement",)`` is the statement alone).

    ``temporal_boost``: added to the fused score of a memory whose ``occurred_at`` falls
    near a date the query names (:meth:`boost_dated`, :mod:`commands.recall.temporal`); 0 turns
    it off.

    :raises FusionError: ``alpha`` or ``temporal_boost`` is not within ``[0, 1]``, ``k`` or
        ``depth`` is below 1, a weight is negative or not finite, or ``fields`` is empty or
        names an unknown field.
    """

    method: Literal["minmax", "score", "rrf"] = "minmax"
    alpha: float = 0.5
    k: int = RRF_K
    lexical_weight: float = 1.0
    semantic_weight: float = 1.0
    depth: int = 100
    fields: tuple[VectorField, ...] = ("statement", "source")
    temporal_boost: float = 0.0
    direct_alpha: float | None = None
    """``alpha`` for a memory without a source turn (remembered directly: no transcript,
    so its channels both read only its statement); None: ``alpha`` for every memory."""
    name_boost: float = 0.0
    """Added, times the share of the query's names it holds, to a memory's fused score
    (:mod:`commands.recall.signals`)."""
    phrase_boost: float = 0.0
    """Added to the fused score of a memory holding a phrase the query quotes."""
    neighbour_share: float = 0.0
    """Share of the best fused score of a candidate's ledger-order neighbours among the
    candidates added to its own (:func:`commands.recall.signals.neighbour_lift`)."""

    def __post_init__(self) -> None:
        if self.method not in ("minmax", "score", "rrf"):
            msg = f"fusion method must be minmax, score or rrf, not {self.method!r}"
            raise FusionError(msg, parameter="method")
        if not (isinstance(self.alpha, int | float) and 0.0 <= self.alpha <= 1.0):
            msg = f"fusion alpha must be within [0, 1], got {self.alpha!r}"
            raise FusionError(msg, parameter="alpha")
        for name in ("temporal_boost", "name_boost", "phrase_boost", "neighbour_share"):
            boost = getattr(self, name)
            if not (isinstance(boost, int | float) and not isinstance(boost, bool)) or not (
                0.0 <= boost <= 1.0
            ):
                msg = f"fusion {name} must be within [0, 1], got {boost!r}"
                raise FusionError(msg, parameter=name)
        direct = self.direct_alpha
        if direct is not None and not (
            isinstance(direct, int | float) and not isinstance(direct, bool) and 0 <= direct <= 1
        ):
            msg = f"fusion direct_alpha must be None or within [0, 1], got {direct!r}"
            raise FusionError(msg, parameter="direct_alpha")
        for name in ("k", "depth"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                msg = f"fusion {name} must be an integer >= 1, got {value!r}"
                raise FusionError(msg, parameter=name)
        for name in ("lexical_weight", "semantic_weight"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                msg = f"fusion {name} must be a finite number >= 0, got {value!r}"
                raise FusionError(msg, parameter=name)
        if not self.fields or any(f not in ("statement", "source") for f in self.fields):
            msg = f"fusion fields must name statement and/or source: {self.fields!r}"
            raise FusionError(msg, parameter="fields")

    def fuse_scores(
        self,
        lexical: Sequence[tuple[str, float]],
        semantic: Sequence[str],
        cosines: Mapping[str, float],
        position: Callable[[str], int],
        direct: Callable[[str], bool] | None = None,
    ) -> list[tuple[str, float]]:
        """Fuse a lexical ranking ``(id, bm25)`` (best first) with a semantic ranking of
        ids (best first); ``cosines`` holds the verified semantic score of any id known to
        the semantic channel. Returns ``(id, fused score)``, best first, ties by
        ``position(id)`` then id. ``direct(id)``: whether the memory has no source turn
        (it is then weighed by ``direct_alpha`` when that is set)."""
        lexical = lexical[: self.depth]
        semantic = semantic[: self.depth]
        if self.method == "rrf":
            return rrf_fuse(
                [[doc_id for doc_id, _ in lexical], semantic],
                self.k,
                (self.lexical_weight, self.semantic_weight),
            )
        candidates = list(dict.fromkeys([*(d for d, _ in lexical), *semantic]))
        if self.method == "minmax":
            lexical_part = minmax(dict(lexical))
            semantic_part = minmax({d: cosines[d] for d in candidates if d in cosines})
        else:
            top = lexical[0][1] if lexical and lexical[0][1] > 0 else 0.0
            lexical_part = {d: s / top for d, s in lexical} if top else {}
            semantic_part = {d: cosines[d] for d in candidates if d in cosines}
        alpha, other = self.alpha, self.direct_alpha
        scores = {}
        for d in candidates:
            a = other if other is not None and direct is not None and direct(d) else alpha
            scores[d] = a * semantic_part.get(d, 0.0) + (1.0 - a) * lexical_part.get(d, 0.0)
        return sorted(scores.items(), key=lambda item: (-item[1], position(item[0]), item[0]))

    def boost_dated(
        self,
        fused: Sequence[tuple[str, float]],
        dated: Callable[[str], bool],
        position: Callable[[str], int],
    ) -> list[tuple[str, float]]:
        """``fused`` (``(id, score)``, as :meth:`fuse_scores` returns it) with
        ``temporal_boost`` added to the score of every id for which ``dated(id)`` holds
        (its memory's time falls near a date the query names), re-sorted; ties by
        ``position(id)`` then id. Unchanged (a list copy) when the boost is 0 or nothing
        is dated."""
        if self.temporal_boost <= 0.0:
            return list(fused)
        boost = self.temporal_boost
        lifted = [(d, score + boost if dated(d) else score) for d, score in fused]
        return sorted(lifted, key=lambda item: (-item[1], position(item[0]), item[0]))


DEFAULT_FUSION = HybridFusion(temporal_boost=0.3)
"""The fusion recall uses when a semantic channel is attached (min-max, statement and
source-turn vectors, the temporal boost; a model's own tuned values replace ``alpha`` and
``temporal_boost`` through :func:`fusion_for`)."""

LEGACY_FUSION = HybridFusion(method="score", alpha=0.7, fields=("statement",))
"""The previous default: raw cosine of the statement vector, ``0.7 * cosine + 0.3 * bm25 /
max(bm25)`` (kept for comparison in ``python -m benchmarks locomo``)."""

PLAIN_RRF = HybridFusion(method="rrf", fields=("statement",))
"""Unweighted RRF with k = 60 (the design's documented rank fusion), for comparison."""

TUNED_ALPHA: dict[str, float] = {
    "all-MiniLM-L6-v2": 0.45,
    "multilingual-e5-small-q4": 0.7,
}
"""The semantic share ``alpha`` chosen for a model (by the name before ``@`` in its
descriptor's ``model_id``), by leave-one-conversation-out on LoCoMo
(``python -m benchmarks locomo`` prints the per-fold choices and their spread). Models not
listed get :data:`DEFAULT_FUSION`'s."""


TUNED_TEMPORAL_BOOST: dict[str, float] = {
    "all-MiniLM-L6-v2": 0.4,
    "multilingual-e5-small-q4": 0.3,
}
"""The temporal boost chosen for a model with its ``alpha`` (same grid search, same
leave-one-conversation-out); models not listed get :data:`DEFAULT_FUSION`'s."""


TUNED_DIRECT: dict[str, tuple[float, float]] = {
    "all-MiniLM-L6-v2": (0.8, 0.2),
    "multilingual-e5-small-q4": (0.7, 0.1),
}
"""``(direct_alpha, neighbour_share)`` for memories without a source turn (issue 27), by
model: the LoCoMo direct path (one ``remember`` per observation fact), the grid's best R@5
with no category below plain cosine (``python -m benchmarks locomo`` prints the
leave-one-conversation-out choices beside it). MiniLM R@5 0.635 -> 0.661, e5 0.656 -> 0.665
(in sample). Models not listed get neither."""


def fusion_for(descriptor: object) -> HybridFusion:
    """The default fusion for the model ``descriptor`` describes (an
    ``EmbeddingDescriptor``): :data:`DEFAULT_FUSION` with the model's tuned ``alpha``
    (:data:`TUNED_ALPHA`), ``temporal_boost`` (:data:`TUNED_TEMPORAL_BOOST`) and weights
    for memories without a source turn (:data:`TUNED_DIRECT`) when it has them."""
    model = str(getattr(descriptor, "model_id", "")).split("@", 1)[0]
    alpha = TUNED_ALPHA.get(model, DEFAULT_FUSION.alpha)
    boost = TUNED_TEMPORAL_BOOST.get(model, DEFAULT_FUSION.temporal_boost)
    direct = TUNED_DIRECT.get(model)
    if alpha == DEFAULT_FUSION.alpha and boost == DEFAULT_FUSION.temporal_boost and not direct:
        return DEFAULT_FUSION
    return msgspec.structs.replace(
        DEFAULT_FUSION,
        alpha=alpha,
        temporal_boost=boost,
        direct_alpha=direct[0] if direct else None,
        neighbour_share=direct[1] if direct else 0.0,
    )
