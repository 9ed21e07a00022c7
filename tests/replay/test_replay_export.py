"""`memory-ledger export`: events and every read model as Parquet or JSON Lines."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine
from memory_ledger.ledger.lmdb import HASH_SIZE, LMDBApplicationRecorder
from memory_ledger.projections import TABLES, table_digests
from memory_ledger.projections.tables import VIEWS
from memory_ledger.replay import export_store
from memory_ledger.replay.cli.app import app
from tests.replay_story import Story, build_story

runner = CliRunner()
READ_MODELS = [t.name for t in TABLES] + list(VIEWS)


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Story:
    return build_story(tmp_path_factory.mktemp("export") / "store")


def count(path: Path) -> int:
    reader = "read_parquet" if path.suffix == ".parquet" else "read_json_auto"
    return int(duckdb.sql(f"SELECT count(*) FROM {reader}('{path}')").fetchall()[0][0])


def test_parquet_export_round_trips_every_read_model(story: Story, tmp_path: Path) -> None:
    out = tmp_path / "parquet"
    result = runner.invoke(
        app, ["export", "--store", str(story.store), "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["position"] == story.head and report["format"] == "parquet"
    names = [f["name"] for f in report["files"]]
    assert names == ["events", *READ_MODELS]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["files"] == report["files"]
    # Each Parquet file holds exactly the live rows; DuckDB reads them back.
    with MemoryEngine.open(story.store, create=False) as engine:
        engine.catch_up()
        digests = table_digests(engine.projections.conn)
        recorder = engine.recorder
        assert isinstance(recorder, LMDBApplicationRecorder)
        last = dict(recorder.iter_log(start=story.head))[story.head]
        for exported in report["files"][1:]:
            assert count(out / exported["path"]) == exported["rows"]
            assert exported["digest"] == digests[exported["name"]]
    assert report["record_hash"] == last[:HASH_SIZE].hex()
    events = duckdb.sql(
        f"SELECT position, type, session_id, turn_id, payload FROM '{out / 'events.parquet'}' "
        "ORDER BY position"
    ).fetchall()
    assert [row[0] for row in events] == list(range(1, story.head + 1))
    used = [row for row in events if row[1] == "MemoryUsed"]
    assert len(used) == 1 and used[0][2:4] == ("s2", 2)
    assert json.loads(used[0][4])["memory_id"] == story.lisbon
    statuses = dict(
        duckdb.sql(f"SELECT memory_id, status FROM '{out / 'canonical_memory.parquet'}'").fetchall()
    )
    assert statuses == {story.lisbon: "superseded", story.porto: "active", story.espresso: "active"}


def test_jsonl_export_at_an_earlier_position(story: Story, tmp_path: Path) -> None:
    out = tmp_path / "jsonl"
    with MemoryEngine.open(story.store, create=False) as engine:
        report = export_store(engine, out, fmt="jsonl", to=story.after_s1)
    assert report.position == story.after_s1
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert [e["position"] for e in events] == list(range(1, story.after_s1 + 1))
    # The same records `memory-ledger events --json` prints.
    listed = runner.invoke(
        app, ["events", "--store", str(story.store), "--json", "--to", str(story.after_s1)]
    )
    assert [json.loads(line) for line in listed.stdout.splitlines()] == events
    memories = [
        json.loads(line) for line in (out / "canonical_memory.jsonl").read_text().splitlines()
    ]
    assert {m["statement"]: m["status"] for m in memories} == {
        "Alice lives in Lisbon.": "active",
        "Alice likes espresso.": "active",
    }
    assert (out / "uses.jsonl").read_text() == ""


def test_export_refuses_a_non_empty_folder_unless_forced(story: Story, tmp_path: Path) -> None:
    out = tmp_path / "busy"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    args = ["export", "--store", str(story.store), "--out", str(out), "--format", "jsonl"]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2 and "not empty" in refused.stderr
    forced = runner.invoke(app, [*args, "--force"])
    assert forced.exit_code == 0, forced.output
    assert (out / "notes.txt").read_text() == "keep me" and (out / "events.jsonl").is_file()
    bad = runner.invoke(
        app,
        ["export", "--store", str(story.store), "--out", str(tmp_path / "x"), "--format", "csv"],
    )
    assert bad.exit_code == 2 and "parquet, jsonl or interchange" in bad.stderr
