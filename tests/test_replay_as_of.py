"""Time travel: `memory-ledger as-of` and `recall --as-of` show the state at an earlier point."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine
from memory_ledger.replay import (
    AsOf,
    PointError,
    PositionOutOfRangeError,
    as_of,
    filter_events,
    position_at,
)
from memory_ledger.replay.cli import app
from memory_ledger.replay.filters import EventFilter
from tests.replay_story import NAMESPACE, Story, build_story

runner = CliRunner()
NS = ["--tenant", "acme", "--principal", "alice", "--scope-id", "assistant"]


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Story:
    return build_story(tmp_path_factory.mktemp("as-of") / "store")


@pytest.fixture
def engine(story: Story) -> Iterator[MemoryEngine]:
    with MemoryEngine.open(story.store, create=False) as opened:
        yield opened


def statuses(past: AsOf) -> dict[str, str]:
    return {row["memory_id"]: row["status"] for row in past.memories(include_history=True)}


def test_superseded_memory_was_active_at_the_earlier_position(
    story: Story, engine: MemoryEngine
) -> None:
    with as_of(engine, story.after_s1) as then:
        assert then.mode == "position" and then.position == story.after_s1
        assert statuses(then) == {story.lisbon: "active", story.espresso: "active"}
        espresso = then.memory(story.espresso)
        assert espresso is not None and espresso["reinforcements"] == 0
        assert then.memory(story.porto) is None
    with as_of(engine, story.head) as now:
        assert statuses(now) == {
            story.lisbon: "superseded",
            story.espresso: "active",
            story.porto: "active",
        }
        retrievable = [r["memory_id"] for r in now.memories(NAMESPACE)]
        assert set(retrievable) == {story.espresso, story.porto}
    with as_of(engine, 0) as empty:
        assert empty.memories(include_history=True) == []


def test_as_of_the_head_equals_the_live_projection(engine: MemoryEngine) -> None:
    from memory_ledger.projections import table_digests

    engine.catch_up()
    with as_of(engine, engine.head) as now:
        assert now.digests() == table_digests(engine.projections.conn)


def test_recall_as_of_answers_as_it_would_have_then(story: Story, engine: MemoryEngine) -> None:
    query = "where Alice lives"
    with as_of(engine, story.after_s1) as then:
        before = then.recall(NAMESPACE, query, k=3)
    with as_of(engine, story.head) as now:
        after = now.recall(NAMESPACE, query, k=3)
    assert before.results[0].memory_id == story.lisbon
    assert after.results[0].memory_id == story.porto
    assert story.lisbon not in {hit.memory_id for hit in after.results}
    live = engine.recall(NAMESPACE, query, k=3)
    assert [h.memory_id for h in live.results] == [h.memory_id for h in after.results]


def test_recorded_timestamp_selects_the_prefix_recorded_by_then(
    story: Story, engine: MemoryEngine
) -> None:
    recorded = {p: e.recorded_at for p, e in filter_events(engine)}
    end_of_s1 = recorded[story.after_s1]
    assert recorded[story.after_s1 + 1] > end_of_s1
    assert position_at(engine, end_of_s1) == story.after_s1
    assert position_at(engine, recorded[1] - timedelta(seconds=1)) == 0
    with as_of(engine, end_of_s1) as then:
        assert then.mode == "recorded" and then.position == story.after_s1
        assert statuses(then)[story.lisbon] == "active"
    with as_of(engine, end_of_s1.isoformat()) as same:
        assert same.position == story.after_s1


def test_occurred_time_uses_the_conversation_dates(story: Story, engine: MemoryEngine) -> None:
    """Everything was recorded today, but s2 happened in February: as of 31 January (occurred
    time) Lisbon is still where Alice lives and the espresso preference was never repeated."""
    with as_of(engine, "2024-01-31", occurred=True) as january:
        assert january.mode == "occurred" and january.events_skipped > 0
        assert statuses(january) == {story.lisbon: "active", story.espresso: "active"}
        espresso = january.memory(story.espresso)
        assert espresso is not None and espresso["reinforcements"] == 0
        assert january.conn.execute("SELECT count(*) FROM uses").fetchall() == [(0,)]
    with as_of(engine, "2024-02-28", occurred=True) as february:
        assert february.events_skipped == 0
        assert statuses(february)[story.lisbon] == "superseded"
    # In recorded time, 31 January 2024 is before anything was stored.
    with as_of(engine, "2024-01-31") as recorded:
        assert recorded.position == 0 and recorded.memories() == []


def test_as_of_errors(engine: MemoryEngine) -> None:
    with pytest.raises(PositionOutOfRangeError, match="beyond the ledger head"):
        as_of(engine, engine.head + 1)
    with pytest.raises(PointError, match="needs a timestamp"):
        as_of(engine, 3, occurred=True)
    with pytest.raises(PointError, match="neither"):
        as_of(engine, "yesterday-ish")


def test_cli_as_of_position_and_history(story: Story) -> None:
    result = runner.invoke(
        app, ["as-of", str(story.after_s1), "--store", str(story.store), *NS, "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["position"] == story.after_s1 and payload["mode"] == "position"
    assert {m["statement"] for m in payload["memories"]} == {
        "Alice lives in Lisbon.",
        "Alice likes espresso.",
    }
    now = json.loads(
        runner.invoke(app, ["as-of", str(story.head), "--store", str(story.store), "--json"]).stdout
    )
    assert "Alice lives in Lisbon." not in {m["statement"] for m in now["memories"]}
    history = json.loads(
        runner.invoke(
            app, ["as-of", str(story.head), "--store", str(story.store), "--all", "--json"]
        ).stdout
    )
    by_statement = {m["statement"]: m["status"] for m in history["memories"]}
    assert by_statement["Alice lives in Lisbon."] == "superseded"
    text = runner.invoke(app, ["as-of", str(story.after_s1), "--store", str(story.store)])
    assert text.exit_code == 0 and "Lisbon" in text.stdout and "position" in text.stdout


def test_cli_as_of_occurred_timestamp(story: Story) -> None:
    result = runner.invoke(
        app, ["as-of", "2024-01-31", "--occurred", "--store", str(story.store), "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["mode"] == "occurred" and payload["at"].startswith("2024-01-31T23:59:59")
    assert {m["statement"] for m in payload["memories"]} == {
        "Alice lives in Lisbon.",
        "Alice likes espresso.",
    }


def test_cli_recall_as_of(story: Story) -> None:
    args = ["recall", "where Alice lives", "--store", str(story.store), *NS, "--json"]
    then = runner.invoke(app, [*args, "--as-of", str(story.after_s1)])
    assert then.exit_code == 0, then.output
    answer = json.loads(then.stdout)
    assert answer["results"][0]["statement"] == "Alice lives in Lisbon."
    assert answer["as_of"]["position"] == story.after_s1
    now = json.loads(runner.invoke(app, args).stdout)
    assert now["results"][0]["statement"] == "Alice lives in Porto."
    occurred = json.loads(runner.invoke(app, [*args, "--as-of", "2024-01-20", "--occurred"]).stdout)
    assert occurred["results"][0]["statement"] == "Alice lives in Lisbon."


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["as-of", "999"], "beyond the ledger head"),
        (["as-of", "soon"], "neither a ledger position"),
        (["as-of", "3", "--occurred"], "needs a timestamp"),
        (["as-of", "3", "--tenant", "acme"], "all of --tenant"),
    ],
)
def test_cli_as_of_user_errors(story: Story, args: list[str], message: str) -> None:
    result = runner.invoke(app, [*args, "--store", str(story.store)])
    assert result.exit_code == 2 and message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "argument"),
    [
        (["as-of", "2024-03-05T10:00"], "TIMESTAMP"),
        (["as-of", "2024-03-05T10:00:00.5", "--occurred"], "TIMESTAMP"),
        (["recall", "Lisbon", *NS, "--as-of", "2024-03-05T10:00"], "--as-of"),
        (["events", "--since", "2024-03-05T10:00"], "--since"),
        (["events", "--until", "2024-03-05 10:00"], "--until"),
    ],
)
def test_cli_refuses_a_time_without_a_zone(story: Story, args: list[str], argument: str) -> None:
    """A date-time without a zone is refused as the Python API refuses a naive datetime
    (never read as UTC): one line naming the argument and how to add an offset, exit 2."""
    result = runner.invoke(app, [*args, "--store", str(story.store)])
    assert result.exit_code == 2, result.output
    said = result.stderr
    assert said.count("\n") == 1 and "Traceback" not in result.output
    assert "NaiveTimestampError" in said and argument in said and "no time zone" in said
    assert "Z or +02:00" in said


def test_cli_accepts_a_time_with_a_zone(story: Story) -> None:
    """The same times with ``Z`` or an offset (and a date alone) are read as given."""
    for point, at in [
        ("2024-03-05T10:00Z", "2024-03-05T10:00:00+00:00"),
        ("2024-03-05T10:00+02:00", "2024-03-05T08:00:00+00:00"),
        ("2024-03-05", "2024-03-05T23:59:59.999999+00:00"),
    ]:
        result = runner.invoke(app, ["as-of", point, "--store", str(story.store), "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["at"] == at


def test_a_naive_timestamp_text_is_refused_by_the_api(engine: MemoryEngine) -> None:
    """``as_of(engine, text)`` refuses zone-less text as it refuses a naive datetime."""
    from memory_ledger.commands.errors import NaiveDatetimeError

    with pytest.raises(NaiveDatetimeError, match="no time zone") as raised:
        as_of(engine, "2024-03-05T10:00")
    assert raised.value.parameter == "at" and raised.value.reason_code == "naive_datetime"


def test_cli_recall_occurred_needs_as_of(story: Story) -> None:
    result = runner.invoke(
        app, ["recall", "Lisbon", "--store", str(story.store), *NS, "--occurred"]
    )
    assert result.exit_code == 2 and "--as-of" in result.stderr


def test_events_filter_matches_as_of_positions(story: Story, engine: MemoryEngine) -> None:
    """The positions as-of uses are the ledger's: the events up to after_s1 are s1's."""
    sessions = {
        getattr(e, "session_id", None)
        for _, e in filter_events(engine, EventFilter(stop=story.after_s1))
    }
    assert sessions == {"s1"}
