"""Time travel: `memory-ledger as-of` and `recall --as-of` show the state at an earlier point."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine
from memory_ledger.ledger.ids import normalize_statement
from memory_ledger.replay import (
    AsOf,
    EventFilter,
    PointError,
    PositionOutOfRangeError,
    as_of,
    filter_events,
    position_at,
)
from memory_ledger.replay.cli.app import app
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


# --------------------------------------------------------------------------- valid time

_LIVES_IN = {"predicate": "lives_in", "subject": "Alice"}


def _told(engine: MemoryEngine, session: str, when: datetime, statement: str) -> str:
    """Reconcile one conversation (one turn at ``when``) that says ``statement`` about
    where Alice lives; the memory id."""
    from memory_ledger.commands import RecordedExtractor
    from tests.conftest import make_item

    extractor = RecordedExtractor()
    extractor.provide(1, [make_item(statement, value=statement.split()[-1], **_LIVES_IN)])
    with engine.session(NAMESPACE, session, extractor=extractor) as s:
        s.observe_final_transcript(1, f"user: {statement}", when)
        s.finish()
    return str(engine.keyring.digests.memory_id(NAMESPACE, normalize_statement(statement)))


def _current(engine: MemoryEngine, when: str | None = None) -> list[str]:
    """Statements of the retrievable memories under Alice/lives_in (now, or as of ``when``
    in occurred time)."""
    if when is None:
        statements = [doc.statement for doc in engine.retrievable_memories(NAMESPACE)]
    else:
        with as_of(engine, when, occurred=True) as past:
            statements = [row["statement"] for row in past.memories(NAMESPACE)]
    return sorted(s for s in statements if "lives in" in s)


def test_a_dated_correction_is_not_retired_by_an_older_conversation_imported_later(
    tmp_path: Path,
) -> None:
    """A correction whose command carries ``occurred_at`` (1 March) holds that valid time:
    a conversation of 1 February imported afterwards becomes history under it, both now
    and as of March (it used to retire the correction, as if told last)."""
    with MemoryEngine.open(tmp_path / "store") as engine:
        lisbon = _told(engine, "s1", datetime(2025, 1, 1, tzinfo=UTC), "Alice lives in Lisbon.")
        fixed = engine.correct(
            NAMESPACE,
            "Alice lives in Berlin.",
            target=lisbon,
            occurred_at=datetime(2025, 3, 1, tzinfo=UTC),
        )
        assert str(fixed.target) == lisbon
        _told(engine, "old", datetime(2025, 2, 1, tzinfo=UTC), "Alice lives in Porto.")
        assert _current(engine) == ["Alice lives in Berlin."]
        assert _current(engine, "2025-03-15") == ["Alice lives in Berlin."]
        assert _current(engine, "2025-01-15") == ["Alice lives in Lisbon."]


def test_a_dated_session_correction_holds_its_valid_time(tmp_path: Path) -> None:
    """The same through ``apply_explicit_command(..., occurred_at=...)`` in a session, and a
    dated ``remember`` (``MemoryEngine.remember(..., occurred_at=...)``) likewise."""
    with MemoryEngine.open(tmp_path / "store") as engine:
        lisbon = _told(engine, "s1", datetime(2025, 1, 1, tzinfo=UTC), "Alice lives in Lisbon.")
        with engine.session(NAMESPACE, "s2") as s:
            s.apply_explicit_command(
                "correct",
                "Alice lives in Berlin.",
                1,
                target=lisbon,
                occurred_at=datetime(2025, 3, 1, tzinfo=UTC),
            )
            s.finish()
        _told(engine, "old", datetime(2025, 2, 1, tzinfo=UTC), "Alice lives in Porto.")
        assert _current(engine) == ["Alice lives in Berlin."]
    with MemoryEngine.open(tmp_path / "store2") as engine:
        engine.remember(
            NAMESPACE,
            "Alice lives in Oslo.",
            subject="Alice",
            predicate="lives_in",
            value="Oslo",
            occurred_at=datetime(2025, 3, 1, tzinfo=UTC),
        )
        _told(engine, "old", datetime(2025, 2, 1, tzinfo=UTC), "Alice lives in Porto.")
        assert _current(engine) == ["Alice lives in Oslo."]
        assert _current(engine, "2025-02-15") == ["Alice lives in Porto."]


def test_an_undated_correction_still_wins_by_ledger_order(tmp_path: Path) -> None:
    """Without ``occurred_at`` a correction is ordered by the ledger, as before: a dated
    conversation imported after it retires it."""
    with MemoryEngine.open(tmp_path / "store") as engine:
        lisbon = _told(engine, "s1", datetime(2025, 1, 1, tzinfo=UTC), "Alice lives in Lisbon.")
        engine.correct(NAMESPACE, "Alice lives in Berlin.", target=lisbon)
        _told(engine, "old", datetime(2025, 2, 1, tzinfo=UTC), "Alice lives in Porto.")
        assert _current(engine) == ["Alice lives in Porto."]


@pytest.mark.parametrize("order", ["v1 v3 v2", "v3 v1 v2", "v3 v2 v1", "v2 v3 v1", "v1 v2 v3"])
def test_a_backfilled_value_ends_the_period_of_the_one_before(tmp_path: Path, order: str) -> None:
    """v1 (January), v2 (February) and v3 (March) of one key, imported in any order: at any
    occurred time exactly one value is current, the latest that had begun by then."""
    values = {
        "v1": (datetime(2025, 1, 1, tzinfo=UTC), "Alice lives in Lisbon."),
        "v2": (datetime(2025, 2, 1, tzinfo=UTC), "Alice lives in Porto."),
        "v3": (datetime(2025, 3, 1, tzinfo=UTC), "Alice lives in Berlin."),
    }
    with MemoryEngine.open(tmp_path / "store") as engine:
        for name in order.split():
            when, statement = values[name]
            _told(engine, name, when, statement)
        assert _current(engine) == ["Alice lives in Berlin."]
        assert _current(engine, "2024-12-15") == []
        assert _current(engine, "2025-01-15") == ["Alice lives in Lisbon."]
        assert _current(engine, "2025-02-15") == ["Alice lives in Porto."]
        assert _current(engine, "2025-03-15") == ["Alice lives in Berlin."]
