"""`memory-ledger events` filters: namespace, session, turn, type, positions, recorded time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.replay.cli.app import app
from tests.conftest import make_item
from tests.replay_story import Story, build_story

runner = CliRunner()


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Story:
    story = build_story(tmp_path_factory.mktemp("events") / "store")
    # A second namespace, so namespace filters have something to leave out.
    with MemoryEngine.open(story.store, sync=False) as engine:
        extractor = RecordedExtractor()
        other = engine.session(Namespace("globex", "bob", "assistant"), "b1", extractor=extractor)
        extractor.provide(1, [make_item("Bob likes tea.", subject="Bob")])
        other.observe_final_transcript(1, "user: tea, always tea.")
        other.finish()
        other.close()
    return story


def events(story: Story, *args: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["events", "--store", str(story.store), "--json", *args])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_unfiltered_lists_every_position(story: Story) -> None:
    everything = events(story)
    assert [e["position"] for e in everything] == list(range(1, len(everything) + 1))
    assert len(everything) > story.head


def test_type_filter_is_case_insensitive_and_repeatable(story: Story) -> None:
    activated = events(story, "--type", "memoryactivated", "--tenant", "acme")
    assert [e["type"] for e in activated] == ["MemoryActivated"] * 3
    assert {e["item"]["statement"] for e in activated} == {
        "Alice lives in Lisbon.",
        "Alice likes espresso.",
        "Alice lives in Porto.",
    }
    both = events(story, "--type", "MemorySuperseded,MemoryReinforced", "--type", "MemoryUsed")
    assert sorted(e["type"] for e in both) == ["MemoryReinforced", "MemorySuperseded", "MemoryUsed"]


def test_a_type_takes_in_its_subtypes(tmp_path: Path) -> None:
    """A direct remember is recorded as a ``DirectCommandApplied``, a kind of
    ``ExplicitCommandApplied``: filtering by the latter finds a session's commands and the
    direct ones; by the former, the direct ones alone."""
    store = tmp_path / "store"
    ns = Namespace("acme", "alice", "assistant")
    with MemoryEngine.open(store, sync=False) as engine:
        engine.remember(ns, "Alice likes espresso.")
        session = engine.session(ns, "s1")
        session.apply_explicit_command("remember", "Alice lives in Porto.", 1)
        session.finish()
        session.close()

    def listed(*args: str) -> list[dict[str, Any]]:
        result = runner.invoke(app, ["events", "--store", str(store), "--json", *args])
        assert result.exit_code == 0, result.output
        return [json.loads(line) for line in result.stdout.splitlines()]

    commands = listed("--type", "ExplicitCommandApplied")
    assert sorted(e["type"] for e in commands) == ["DirectCommandApplied", "ExplicitCommandApplied"]
    direct = listed("--type", "directcommandapplied")
    assert [e["type"] for e in direct] == ["DirectCommandApplied"]


def test_session_and_turn(story: Story) -> None:
    turn = events(story, "--session", "s2", "--turn", "2")
    assert [e["type"] for e in turn] == [
        "TranscriptObserved",
        "ExtractionCompleted",
        "RecallServed",
        "MemoryAdmitted",
        "MemoryUsed",
    ]
    assert all(e["session_id"] == "s2" and e["turn_id"] == 2 for e in turn)


def test_namespace_parts(story: Story) -> None:
    bob = events(story, "--tenant", "globex")
    assert bob and {e["namespace"]["principal"] for e in bob} == {"bob"}
    assert events(story, "--principal", "alice", "--session", "b1") == []
    alice = events(story, "--scope-id", "assistant", "--principal", "alice")
    assert len(alice) == story.head


def test_position_range_and_limit(story: Story) -> None:
    assert [e["position"] for e in events(story, "--from", "10", "--to", "12")] == [10, 11, 12]
    limited = events(story, "--type", "TranscriptObserved", "--from", "3", "--limit", "2")
    assert [e["position"] for e in limited] == [11, 14]


def test_recorded_time_range(story: Story) -> None:
    everything = events(story, "--tenant", "acme")
    start_of_s2 = everything[story.after_s1]["recorded_at"]  # position after_s1 + 1
    later = events(story, "--tenant", "acme", "--since", start_of_s2)
    assert [e["position"] for e in later] == list(range(story.after_s1 + 1, story.head + 1))
    end_of_s1 = everything[story.after_s1 - 1]["recorded_at"]
    earlier = events(story, "--until", end_of_s1)
    assert [e["position"] for e in earlier] == list(range(1, story.after_s1 + 1))
    assert events(story, "--until", "2000-01-01") == []


def test_table_output_has_a_detail_column(story: Story) -> None:
    result = runner.invoke(
        app,
        ["events", "--store", str(story.store), "--type", "MemorySuperseded"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "MemorySuperseded" in result.stdout and "same_subject_predicate" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--type", "MemoryExploded"], "unknown event type 'MemoryExploded'"),
        (["--since", "not a time"], "not an ISO 8601 date"),
        (["--from", "9", "--to", "3"], "empty position range"),
    ],
)
def test_bad_filters_exit_2(story: Story, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["events", "--store", str(story.store), *args])
    assert result.exit_code == 2 and message in result.stderr
    assert result.stderr.count("\n") == 1


def test_events_of_an_empty_path_is_a_user_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["events", "--store", str(tmp_path / "none")])
    assert result.exit_code == 2 and not (tmp_path / "none").exists()
