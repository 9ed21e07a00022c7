"""Lexical document expansion with the turns around a memory's source turn."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.recall.lexical import ConversationWindows, analyze_document
from tests.conftest import make_item


class FakeTranscripts:
    """``text_at`` over a dict of ledger positions (stands in for ``SourceTranscripts``)."""

    def __init__(self, texts: dict[int, str]) -> None:
        self.texts = texts
        self.reads: list[int] = []

    def text_at(self, position: int) -> str | None:
        self.reads.append(position)
        return self.texts.get(position)


TURNS = [  # (session, turn, position)
    ("s1", 1, 10),
    ("s1", 2, 12),
    ("s1", 3, 14),
    ("s1", 4, 16),
    ("s1", 5, 18),
    ("s1", 6, 30),
    ("s2", 1, 20),
]


def windows(turns: int = 2) -> tuple[ConversationWindows, FakeTranscripts]:
    texts = {p: f"{s} turn {t}" for s, t, p in TURNS}
    fake = FakeTranscripts(texts)

    def turns_of(tenant: str, principal: str, scope_id: str) -> Sequence[tuple[str, int, int]]:
        assert (tenant, principal, scope_id) == ("t", "p", "s")
        return TURNS

    return ConversationWindows(fake, turns_of, turns), fake  # type: ignore[arg-type]


def test_the_window_is_the_turns_around_the_source_turn_of_the_same_session() -> None:
    reader, _ = windows()
    window = reader.for_namespace("t", "p", "s")
    # source turn 3 of s1 (position 14), memory created at position 100
    assert window([14], 100) == "s1 turn 1\ns1 turn 2\ns1 turn 4\ns1 turn 5"
    assert window([10], 100) == "s1 turn 2\ns1 turn 3"  # the session's first turn
    assert window([20], 100) is None  # s2 has one turn: nothing around it
    assert window([], 100) is None  # no provenance
    assert window([999], 100) is None  # not a turn of this namespace


def test_turns_recorded_after_the_memory_was_created_are_left_out() -> None:
    reader, _ = windows()
    window = reader.for_namespace("t", "p", "s")
    assert window([14], 17) == "s1 turn 1\ns1 turn 2\ns1 turn 4"  # turn 5 is at 18
    assert window([30], 100) == "s1 turn 4\ns1 turn 5"  # turn 6 (position 30): 4 and 5


def test_a_window_of_zero_turns_reads_nothing() -> None:
    reader, fake = windows(turns=0)
    assert reader.for_namespace("t", "p", "s")([14], 100) is None
    assert fake.reads == []


def test_analyze_document_indexes_the_window_after_the_source_turn() -> None:
    text = analyze_document(
        "Alice", "Alice adopts.", "user: adopting", "assistant: summer plans\nuser: plans"
    )
    assert text.split() == [
        *("alic", "alic", "adopt", "alic", "adopt"),  # the statement counts twice
        *("user", "adopt"),  # the source turn as it is
        *("assist", "summer", "plan", "user"),  # each window word once
    ]
    assert analyze_document("Alice", "Alice adopts.").split() == ["alic", "alic", "adopt"]


def test_recall_finds_a_memory_by_the_turn_that_asked_for_it(tmp_path: Path) -> None:
    namespace = Namespace("acme", "alice", "assistant")
    with MemoryEngine.open(tmp_path / "store") as engine:  # lexical only
        extractor = RecordedExtractor()
        session = engine.session(namespace, "s1", extractor=extractor)
        transcripts = [
            "assistant: What are your plans for the summer?",
            "user: Researching adoption agencies, it has been a dream of mine.",
            "assistant: That is wonderful.",
            "user: Thanks! Also I bought a kayak.",
            "assistant: Paddle safely out there.",
        ]
        extractor.provide(2, [make_item("Alice is researching adoption agencies.")])
        extractor.provide(4, [make_item("Alice bought a kayak.")])
        for turn, text in enumerate(transcripts, start=1):
            session.observe_final_transcript(turn, text)
        session.finish()
        other = engine.session(namespace, "s2", extractor=RecordedExtractor())
        other.observe_final_transcript(1, "user: My summer vacation starts in June.")
        other.finish()

        hits = engine.recall(namespace, "What are Alice's plans for the summer?", 5)
        assert [h.statement for h in hits][0] == "Alice is researching adoption agencies."
        # Turn 5 is three turns after turn 2 ("paddle"), but one after turn 4's kayak.
        assert [h.statement for h in engine.recall(namespace, "paddle", 5)] == [
            "Alice bought a kayak."
        ]
        # A turn of another session never expands a memory ("vacation" is only in s2).
        assert [h.statement for h in engine.recall(namespace, "vacation", 5)] == []


def test_a_memory_that_says_it_ranks_before_one_whose_neighbours_said_it(
    tmp_path: Path,
) -> None:
    """The window lends words, it does not outrank: the deploy note told right after "I like
    espresso, not filter coffee" matches "coffee" only through that turn, so "Alice likes
    espresso." (its own words match "espresso") ranks first, however rare "coffee" is."""
    namespace = Namespace("acme", "alice", "assistant")
    with MemoryEngine.open(tmp_path / "store") as engine:  # lexical only
        extractor = RecordedExtractor()
        session = engine.session(namespace, "s1", extractor=extractor)
        extractor.provide(1, [make_item("Alice likes espresso.")])
        extractor.provide(2, [make_item("Deploys fail without the base URL.", subject="deploy")])
        session.observe_final_transcript(1, "user: I like espresso, not filter coffee.")
        session.observe_final_transcript(2, "user: Deploys fail without the base URL.")
        session.finish()
        hits = engine.recall(namespace, "espresso coffee", 5)
        assert [h.statement for h in hits] == [
            "Alice likes espresso.",
            "Deploys fail without the base URL.",
        ]
        assert hits[0].score > hits[1].score
        # Alone, a window-only match is still found, with its own BM25 score.
        alone = engine.recall(namespace, "filter", 5)
        assert [h.statement for h in alone][-1] == "Deploys fail without the base URL."
