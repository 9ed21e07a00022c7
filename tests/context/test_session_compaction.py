"""Compaction as a session command: ContextCompacted records each generation."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.context import ChatMessage, CompactionPolicy, DeterministicSummarizer
from memory_ledger.commands.context.compaction import CompactionError
from memory_ledger.ledger.events import ContextCompacted
from memory_ledger.replay import EventFilter, describe_event, explain, filter_events
from tests.conftest import make_item

GOAL = "Port ledger/lmdb.py to PostgreSQL; keep the hash chain format."


def history(turns: int) -> list[ChatMessage]:
    messages = [ChatMessage(role="user", content=f"## Goal\n{GOAL}")]
    for i in range(turns):
        messages.append(ChatMessage(role="assistant", content=f"step {i}: " + "work " * 200))
        messages.append(ChatMessage(role="user", content=f"continue {i}"))
    return messages


def test_off_by_default(engine: MemoryEngine, namespace: Namespace) -> None:
    with engine.session(namespace, "s", summarizer=DeterministicSummarizer()) as session:
        assert session.compaction_policy.enabled is False
        assert session.compact(history(40), max_context_tokens=1000) is None
    with engine.session(namespace, "t") as session, pytest.raises(CompactionError) as caught:
        session.compact(history(4), force=True, max_context_tokens=1000)
    assert caught.value.reason_code == "no_summarizer"


def test_rolling_compactions_are_recorded_and_replayed(
    tmp_path: Path, namespace: Namespace
) -> None:
    store = tmp_path / "store"
    policy = CompactionPolicy(enabled=True, max_context_tokens=6000)
    with MemoryEngine.open(store) as engine:
        session = engine.session(
            namespace, "long", summarizer=DeterministicSummarizer(), compaction=policy
        )
        first = session.compact(history(30), turn_id=7)
        assert first is not None and first.generation == 1
        assert first.tokens_after <= first.target_tokens < first.tokens_before
        session.close()
    with MemoryEngine.open(store) as engine:  # resumed elsewhere: generations continue
        session = engine.session(
            namespace, "long", summarizer=DeterministicSummarizer(), compaction=policy
        )
        rolled = [*first.messages, *history(30)[1:]]
        second = session.compact(rolled)
        assert second is not None and second.generation == 2 and GOAL in second.summary
        recorded = session.compactions
        assert [c.generation for c in recorded] == [1, 2]
        assert recorded[0].summary == first.summary and recorded[0].goal == GOAL
        assert recorded[0].turn_id == 7 and recorded[1].goal_source == "summary"
        assert recorded[1].tokens_before == second.tokens_before
        events = [e for _, e in filter_events(engine, EventFilter(types=("ContextCompacted",)))]
        assert events == recorded and isinstance(events[0], ContextCompacted)
        assert "generation 1" in describe_event(events[0])
        session.close()


def test_summaries_are_redacted_in_the_ledger_not_in_the_result(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    messages = [ChatMessage(role="user", content=f"## Goal\nDeploy with token {secret}")]
    messages += [ChatMessage(role="assistant", content=f"m{i}") for i in range(6)]
    with engine.session(namespace, "s", summarizer=DeterministicSummarizer()) as session:
        result = session.compact(messages, force=True, max_context_tokens=100_000)
        assert result is not None and secret in result.summary
        recorded = session.compactions[0]
    assert secret not in recorded.summary and secret not in recorded.goal
    assert recorded.redactions >= 2


def test_a_failed_summarizer_records_nothing(engine: MemoryEngine, namespace: Namespace) -> None:
    class Broken:
        summarizer_id = "broken"

        def summarize(self, request: object) -> str:
            raise TimeoutError("model timed out")

    with engine.session(namespace, "s", summarizer=Broken()) as session:
        with pytest.raises(CompactionError) as caught:
            session.compact(history(5), force=True, max_context_tokens=100_000)
        assert caught.value.reason_code == "summarizer_failed"
        assert session.compactions == []


def test_explain_shows_compactions_before_a_memory_was_made(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    session = engine.session(namespace, "s", summarizer=DeterministicSummarizer())
    session.compact(history(5), force=True, max_context_tokens=100_000)
    session.extractor.provide(1, [make_item("Alice ports the ledger.")])  # type: ignore[attr-defined]
    session.observe_final_transcript(1, "user: I am porting the ledger.")
    report = session.finish()
    context = explain(engine, str(report.activated[0])).origins[0].context
    assert [c.type for c in context] == ["ContextCompacted"]


def test_tokens_are_counted_by_the_sessions_token_counter(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    def by_words(text: str) -> int:
        return len(text.split())

    with engine.session(
        namespace, "s", summarizer=DeterministicSummarizer(), token_counter=by_words
    ) as session:
        messages = history(3)
        result = session.compact(messages, force=True, max_context_tokens=100_000)
        assert result is not None
        expected = sum(4 + by_words(m.content) for m in messages)
        assert result.tokens_before == expected
