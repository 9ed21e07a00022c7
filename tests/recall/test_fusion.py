"""Fusion that adapts to the model: per-query min-max normalisation, validation, ties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.commands.recall import HybridFusion
from memory_ledger.commands.recall.fusion import DEFAULT_FUSION, LEGACY_FUSION, FusionError, minmax

POSITIONS = {"a": 1, "b": 2, "c": 3, "d": 4}


def test_minmax_maps_each_channel_to_the_unit_interval() -> None:
    assert minmax({"a": 4.0, "b": 2.0, "c": 3.0}) == {"a": 1.0, "b": 0.0, "c": 0.5}
    assert minmax({"a": 0.5}) == {"a": 1.0}  # one candidate: a full-strength match
    assert minmax({"a": 0.0, "b": 0.0}) == {"a": 0.0, "b": 0.0}  # a flat zero adds nothing
    assert minmax({}) == {}


def test_minmax_fusion_on_a_hand_example() -> None:
    fusion = HybridFusion(method="minmax", alpha=0.5)
    lexical = [("a", 4.0), ("b", 2.0)]
    semantic = ["c", "a"]
    cosines = {"a": 0.82, "b": 0.80, "c": 0.84}  # a narrow band, as e5 gives
    fused = fusion.fuse_scores(lexical, semantic, cosines, POSITIONS.__getitem__)
    # lexical: a 1, b 0; semantic over {a, b, c}: a .5, b 0, c 1
    # a: .5*.5 + .5*1 = .75; c: .5*1 = .5; b: 0
    assert [d for d, _ in fused] == ["a", "c", "b"]
    assert [s for _, s in fused] == pytest.approx([0.75, 0.5, 0.0])


def test_a_narrow_cosine_band_is_not_swamped_by_bm25() -> None:
    """Raw-score fusion lets BM25 decide when cosines sit in a narrow band; min-max lets
    the clearly better cosine win."""
    lexical = [("a", 3.0), ("b", 1.5)]
    cosines = {"a": 0.80, "b": 0.86}
    raw = LEGACY_FUSION.fuse_scores(lexical, ["b", "a"], cosines, POSITIONS.__getitem__)
    normalised = HybridFusion(alpha=0.6).fuse_scores(
        lexical, ["b", "a"], cosines, POSITIONS.__getitem__
    )
    assert raw[0][0] == "a"
    assert normalised[0][0] == "b"


def test_ties_break_by_position_then_id() -> None:
    fusion = HybridFusion()
    fused = fusion.fuse_scores([("d", 1.0), ("b", 1.0), ("c", 1.0)], [], {}, POSITIONS.get)
    assert [d for d, _ in fused] == ["b", "c", "d"]
    same = fusion.fuse_scores([("d", 1.0), ("b", 1.0), ("c", 1.0)], [], {}, lambda _: 0)
    assert [d for d, _ in same] == ["b", "c", "d"]


@pytest.mark.parametrize(
    "settings",
    [
        {"alpha": -0.1},
        {"alpha": 1.5},
        {"alpha": math.nan},
        {"depth": 0},
        {"k": 0},
        {"k": True},
        {"lexical_weight": -1.0},
        {"semantic_weight": math.inf},
        {"fields": ()},
        {"fields": ("title",)},
        {"method": "cosine"},
    ],
)
def test_invalid_settings_are_refused_on_construction(settings: dict[str, object]) -> None:
    with pytest.raises(FusionError) as caught:
        HybridFusion(**settings)  # type: ignore[arg-type]
    assert isinstance(caught.value, MemoryLedgerError)
    assert caught.value.reason_code == "invalid_fusion"


def test_the_default_searches_statement_and_source_vectors() -> None:
    assert DEFAULT_FUSION.method == "minmax"
    assert set(DEFAULT_FUSION.fields) == {"statement", "source"}
    assert LEGACY_FUSION.fields == ("statement",)


scores = st.floats(min_value=0.0, max_value=50.0, allow_nan=False)
cosine = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)


@given(
    lexical=st.dictionaries(st.sampled_from("abcd"), scores, max_size=4),
    cos=st.dictionaries(st.sampled_from("abcd"), cosine, max_size=4),
    alpha=st.floats(min_value=0.0, max_value=1.0),
)
def test_minmax_fusion_matches_the_formula(
    lexical: dict[str, float], cos: dict[str, float], alpha: float
) -> None:
    ranked = sorted(lexical.items(), key=lambda item: (-item[1], item[0]))
    semantic = sorted(cos, key=lambda d: (-cos[d], d))
    fused = HybridFusion(alpha=alpha).fuse_scores(ranked, semantic, cos, POSITIONS.__getitem__)
    candidates = set(lexical) | set(semantic)
    assert {d for d, _ in fused} == candidates
    lex, sem = minmax(lexical), minmax({d: cos[d] for d in candidates if d in cos})
    for doc_id, score in fused:
        want = alpha * sem.get(doc_id, 0.0) + (1 - alpha) * lex.get(doc_id, 0.0)
        assert math.isclose(score, want, rel_tol=1e-9, abs_tol=1e-12)
        assert -1e-12 <= score <= 1.0 + 1e-12
    keys = [(-s, POSITIONS[d], d) for d, s in fused]
    assert keys == sorted(keys)
