"""`memory-ledger replay`: rebuild from the ledger; `--check` names a hand-modified table."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine
from memory_ledger.projections import table_digests
from memory_ledger.replay import build_projections, check_projections, rebuild_projections
from memory_ledger.replay.cli.app import app
from tests.replay_story import Story, build_story

runner = CliRunner()


@pytest.fixture
def story(tmp_path: Path) -> Story:
    return build_story(tmp_path / "store")


def live_file(story: Story) -> Path:
    return story.store / "projections" / "slot-0.duckdb"


def test_rebuild_equals_live_projection(story: Story) -> None:
    with MemoryEngine.open(story.store, create=False) as engine:
        assert engine.catch_up() == story.head
        live = table_digests(engine.projections.conn)
        report = rebuild_projections(engine)
        check = check_projections(engine)
    assert report.position == story.head and report.path is None
    assert report.digests == live
    assert report.rows["canonical_memory"] == 3 and report.rows["uses"] == 1
    assert check.ok and check.differences == () and check.position == story.head
    assert set(check.checked) >= {"canonical_memory", "vocabulary", "session_candidates"}


def test_rebuild_to_a_position_keeps_the_file(story: Story, tmp_path: Path) -> None:
    out = tmp_path / "at-s1.duckdb"
    result = runner.invoke(
        app,
        ["replay", "--store", str(story.store), "--to", str(story.after_s1), "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    conn = duckdb.connect(str(out), read_only=True)
    try:
        rows = conn.execute("SELECT statement, status FROM canonical_memory ORDER BY 1").fetchall()
        position = conn.execute("SELECT position FROM projection_tracking").fetchall()
    finally:
        conn.close()
    assert rows == [("Alice likes espresso.", "active"), ("Alice lives in Lisbon.", "active")]
    assert position == [(story.after_s1,)]


def test_incremental_pages_equal_one_rebuild(story: Story) -> None:
    """Page boundaries do not matter: a page of 3 events gives the same tables."""
    with MemoryEngine.open(story.store, create=False) as engine:
        small = build_projections(engine, page_size=3)
        big = build_projections(engine)
        try:
            assert table_digests(small.conn) == table_digests(big.conn)
        finally:
            small.close()
            big.close()


def test_check_passes_on_an_untouched_store(story: Story) -> None:
    result = runner.invoke(app, ["replay", "--store", str(story.store), "--check", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] and report["position"] == story.head
    assert report["live_path"].endswith("slot-0.duckdb")


@pytest.mark.parametrize(
    ("tamper", "table"),
    [
        ("UPDATE canonical_memory SET importance = 0.11 WHERE statement LIKE '%Porto%'", None),
        ("DELETE FROM uses", "uses"),
        ("UPDATE transcripts SET digest = 'forged' WHERE turn_id = 3", "transcripts"),
    ],
)
def test_check_names_a_hand_modified_table(story: Story, tamper: str, table: str | None) -> None:
    conn = duckdb.connect(str(live_file(story)))
    conn.execute(tamper)
    conn.close()
    result = runner.invoke(app, ["replay", "--store", str(story.store), "--check", "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert not report["ok"]
    names = [d["name"] for d in report["differences"]]
    assert names == [table or "canonical_memory"]
    difference = report["differences"][0]
    assert difference["only_live"] >= 1 or difference["only_rebuilt"] >= 1
    if table is None:
        assert difference["examples"] == [
            f"memory_id={story.porto}: importance live 0.11 != rebuilt 0.8"
        ]
    # The human form names the table on stderr, too.
    text = runner.invoke(app, ["replay", "--store", str(story.store), "--check"])
    assert text.exit_code == 1
    assert f"differs: {names[0]}" in text.stderr


def test_a_changed_subject_shows_in_the_table_and_its_views(story: Story) -> None:
    conn = duckdb.connect(str(live_file(story)))
    conn.execute("UPDATE canonical_memory SET subject = 'Bob' WHERE statement LIKE '%Porto%'")
    conn.close()
    with MemoryEngine.open(story.store, create=False) as engine:
        report = check_projections(engine)
    assert not report.ok
    assert [d.name for d in report.differences] == ["canonical_memory", "vocabulary"]


def test_replay_user_errors_exit_2(story: Story, tmp_path: Path) -> None:
    beyond = runner.invoke(app, ["replay", "--store", str(story.store), "--to", "999"])
    assert beyond.exit_code == 2 and "beyond the ledger head" in beyond.stderr
    assert "Traceback" not in beyond.output
    existing = tmp_path / "exists.duckdb"
    existing.write_bytes(b"")
    clash = runner.invoke(app, ["replay", "--store", str(story.store), "--out", str(existing)])
    assert clash.exit_code == 2 and "exists" in clash.stderr
    both = runner.invoke(
        app, ["replay", "--store", str(story.store), "--check", "--out", str(tmp_path / "x")]
    )
    assert both.exit_code == 2


@pytest.mark.parametrize(
    "args",
    [
        ["replay"],
        ["replay", "--check"],
        ["as-of", "3"],
        ["explain", "abcd1234"],
        ["export", "--out", "OUT"],
        ["backup", "--out", "OUT"],
        ["stats"],
        ["events", "--type", "MemoryActivated"],
    ],
)
def test_read_only_commands_never_create_a_store(tmp_path: Path, args: list[str]) -> None:
    missing = tmp_path / "nowhere"
    argv = [a.replace("OUT", str(tmp_path / "out")) for a in args] + ["--store", str(missing)]
    result = runner.invoke(app, [*argv, "--json"])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "no memory store" in result.stderr
    assert not missing.exists()
