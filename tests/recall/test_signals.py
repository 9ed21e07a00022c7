"""The model-free signals of the fusion step (``commands/recall/signals.py``): names the
query shares with a memory, quoted phrases, ledger-order neighbours, and the alpha of
memories without a source turn; each off at weight 0, each only reordering candidates."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memory_ledger.commands.recall import HybridFusion, MemoryDoc
from memory_ledger.commands.recall.fusion import FusionError
from memory_ledger.commands.recall.ranking import fuse_channels
from memory_ledger.commands.recall.signals import (
    memory_names,
    neighbour_lift,
    query_names,
    quoted_phrases,
)


def doc(n: int, statement: str, context: str | None = None) -> MemoryDoc:
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
        occurred_at=None,
        origin="canonical",
        revision=1,
        importance=0.8,
        context=context,
    )


DOCS = {
    d.memory_id: d
    for d in (
        doc(1, "Melanie is researching adoption agencies."),
        doc(2, "Caroline is researching adoption agencies."),
        doc(3, "Caroline read Charlotte's Web as a child."),
        doc(4, "Caroline went to a pride parade."),
    )
}


def test_query_names_are_capitalised_words_after_the_first() -> None:
    assert query_names("What did Caroline research?") == {"caroline"}
    assert query_names("When did Melanie's kids go to Paris?") == {"melanie", "paris"}
    assert query_names("What is it") == frozenset()
    assert "caroline" in memory_names(None, "Caroline's dog is old.")


def test_quoted_phrases_are_read_case_folded() -> None:
    assert quoted_phrases('Who wrote "Charlotte\'s Web"?') == ("charlotte's web",)
    assert quoted_phrases("no quotes here") == ()


def test_name_boost_lifts_the_memory_about_the_person_asked_about() -> None:
    lexical = [("m1", 2.0), ("m2", 2.0)]
    cosines = {"m1": 0.8, "m2": 0.8}
    query = "What is Caroline researching?"
    off = fuse_channels(query, lexical, ["m1", "m2"], cosines, DOCS, HybridFusion())
    on = fuse_channels(query, lexical, ["m1", "m2"], cosines, DOCS, HybridFusion(name_boost=0.2))
    assert [d for d, _ in off][0] == "m1"  # tie: ledger position
    assert [d for d, _ in on][0] == "m2"
    assert {d for d, _ in on} == {d for d, _ in off}  # reorders, never adds or drops


def test_phrase_boost_lifts_the_memory_holding_the_quoted_phrase() -> None:
    lexical = [("m4", 3.0), ("m3", 2.5), ("m1", 0.5)]
    cosines = {"m4": 0.6, "m3": 0.55, "m1": 0.1}
    query = 'Did Caroline read "Charlotte\'s Web"?'
    nearest = ["m4", "m3", "m1"]
    off = fuse_channels(query, lexical, nearest, cosines, DOCS, HybridFusion())
    on = fuse_channels(query, lexical, nearest, cosines, DOCS, HybridFusion(phrase_boost=0.5))
    assert [d for d, _ in off][0] == "m4"
    assert [d for d, _ in on][0] == "m3"


def test_direct_alpha_weighs_memories_without_a_source_turn() -> None:
    docs = {"m1": doc(1, "lexical match"), "m2": doc(2, "semantic match", "a turn")}
    lexical = [("m1", 3.0), ("m2", 1.0)]
    cosines = {"m1": 0.1, "m2": 0.9}
    lexical_heavy = HybridFusion(alpha=0.5, direct_alpha=0.0)
    fused = dict(fuse_channels("q", lexical, ["m2", "m1"], cosines, docs, lexical_heavy))
    assert fused["m1"] == 1.0  # lexical alone for the directly remembered memory
    assert fused["m2"] == 0.5  # the even split for the one with a source turn


def test_invalid_signal_weights_are_typed_errors() -> None:
    for settings in ({"name_boost": -0.1}, {"neighbour_share": 2.0}, {"direct_alpha": 1.5}):
        try:
            HybridFusion(**settings)  # type: ignore[arg-type]
        except FusionError as error:
            assert error.reason_code == "invalid_fusion"
        else:
            raise AssertionError(f"{settings} accepted")


@given(
    st.dictionaries(st.sampled_from([f"m{i}" for i in range(8)]), st.floats(0, 1), min_size=1),
    st.floats(0, 1),
)
def test_neighbour_lift_never_lowers_a_score_and_keeps_the_candidates(
    fused: dict[str, float], share: float
) -> None:
    ordered = [f"m{i}" for i in range(8)]
    lifted = neighbour_lift(fused, ordered, share)
    assert set(lifted) == set(fused)
    assert all(lifted[m] >= fused[m] for m in fused)
    assert neighbour_lift(fused, ordered, 0.0) == fused
