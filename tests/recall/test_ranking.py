"""The hybrid ranking pipeline as a pure function (``commands/recall/ranking.py``): lexical
only, fused with fake semantic scores, the lexical floor, ties, and the temporal boost."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from memory_ledger.commands.recall import HybridFusion, MemoryDoc, rank_candidates
from memory_ledger.commands.recall.index import build_index


def doc(n: int, statement: str, occurred: datetime | None = None) -> MemoryDoc:
    return MemoryDoc(
        memory_id=f"m{n}",
        position=n,
        statement=statement,
        subject=None,
        predicate=None,
        value=None,
        scope="user",
        tags=(),
        evidence=(),
        occurred_at=occurred,
        origin="canonical",
        revision=1,
        importance=0.8,
    )


DOCS = [
    doc(1, "Alice drinks espresso every morning."),
    doc(2, "Alice adopted a cat named Luna.", datetime(2023, 5, 8, tzinfo=UTC)),
    doc(3, "Bob plays the violin."),
    doc(4, "Alice went hiking in May.", datetime(2023, 5, 20, tzinfo=UTC)),
]
BY_ID = {d.memory_id: d for d in DOCS}
INDEX = build_index(DOCS)


class FakeScores:
    """Semantic scores given as a table; records what the pipeline asked for."""

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.asked: list[Sequence[str]] = []

    def nearest(self, depth: int) -> list[tuple[str, float]]:
        ranked = sorted(self.table.items(), key=lambda kv: (-kv[1], kv[0]))
        return ranked[:depth]

    def cosines(self, memory_ids: Sequence[str]) -> dict[str, float]:
        self.asked.append(list(memory_ids))
        return {m: self.table[m] for m in memory_ids if m in self.table}


def ids(ranked: list[tuple[MemoryDoc, float]]) -> list[str]:
    return [d.memory_id for d, _ in ranked]


def test_lexical_only_is_bm25_order_and_depth() -> None:
    ranked = rank_candidates("Alice espresso", 2, INDEX, BY_ID, HybridFusion())
    assert ids(ranked)[0] == "m1"
    assert len(ranked) == 2
    assert all(score > 0 for _, score in ranked)


def test_the_lexical_floor_drops_weak_matches_before_fusion() -> None:
    everything = rank_candidates("Alice espresso", 10, INDEX, BY_ID, HybridFusion())
    floor = max(score for _, score in everything) * 0.99
    kept = rank_candidates(
        "Alice espresso", 10, INDEX, BY_ID, HybridFusion(), min_lexical_score=floor
    )
    assert ids(kept) == ["m1"]


def test_semantic_scores_bring_in_a_memory_no_word_matches() -> None:
    scores = FakeScores({"m3": 0.9, "m1": 0.2})
    ranked = rank_candidates("music lessons", 3, INDEX, BY_ID, HybridFusion(), semantic=scores)
    assert ids(ranked)[0] == "m3"  # no shared word, the nearest vector
    assert scores.asked  # the lexical matches' cosines were asked for (none here)


def test_fusion_is_deterministic_and_ties_break_by_position() -> None:
    scores = FakeScores({"m1": 0.5, "m2": 0.5, "m4": 0.5})
    first = rank_candidates("Alice", 4, INDEX, BY_ID, HybridFusion(), semantic=scores)
    again = rank_candidates("Alice", 4, INDEX, BY_ID, HybridFusion(), semantic=scores)
    assert first == again
    same = [d.position for d, s in first if s == first[0][1]]
    assert same == sorted(same)


def test_a_named_month_boosts_what_occurred_in_it() -> None:
    scores = FakeScores({"m1": 0.6, "m2": 0.6, "m4": 0.6})
    plain = HybridFusion(temporal_boost=0.0)
    boosted = HybridFusion(temporal_boost=0.5)
    query = "what did Alice do in May 2023"
    without = rank_candidates(query, 3, INDEX, BY_ID, plain, semantic=scores)
    with_boost = rank_candidates(query, 3, INDEX, BY_ID, boosted, semantic=scores)
    assert set(ids(with_boost)[:2]) == {"m2", "m4"}
    assert (
        dict((d.memory_id, s) for d, s in with_boost)["m4"]
        >= dict((d.memory_id, s) for d, s in without)["m4"]
    )
