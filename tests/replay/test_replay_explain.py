"""Lineage: `memory-ledger explain` shows how a memory was made and where it was used."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine
from memory_ledger.replay import UnknownMemoryError, explain, render_mermaid
from memory_ledger.replay.cli.app import app
from memory_ledger.replay.scripts.script import parse_script, run_script
from tests.conftest import skip_without_locomo
from tests.replay_story import FEB, JAN, Story, build_story

runner = CliRunner()


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Story:
    return build_story(tmp_path_factory.mktemp("explain") / "store")


@pytest.fixture
def engine(story: Story) -> Iterator[MemoryEngine]:
    with MemoryEngine.open(story.store, create=False) as opened:
        yield opened


def test_superseded_memory_lineage(story: Story, engine: MemoryEngine) -> None:
    lineage = explain(engine, story.lisbon)
    assert lineage.status == "superseded" and lineage.superseded_by == story.porto
    assert lineage.evidence == ("s1:1",)
    [origin] = lineage.origins
    assert origin.kind == "activated" and origin.decision == "auto"
    assert origin.activation_policy == "auto" and origin.session_id == "s1"
    # The evidence turn: TranscriptObserved of s1 turn 1, with its digest and occurred time.
    transcript = origin.transcript
    assert transcript is not None
    assert (transcript.session_id, transcript.turn_id) == ("s1", 1)
    assert transcript.occurred_at == JAN and transcript.transcript.startswith("user: I live in")
    assert len(transcript.digest) == 64
    # The candidate and the extractor that proposed it, validated.
    candidate = origin.candidate
    assert candidate is not None and candidate.extractor_id == "recorded"
    assert candidate.validation == "accepted" and candidate.item.statement == (
        "Alice lives in Lisbon."
    )
    assert origin.extraction is not None and origin.extraction.extracted == 2
    assert transcript.position < candidate.position < origin.position
    assert origin.reconciled_position == story.after_s1
    # Then: superseded by Porto, after being recalled, admitted and used in s2 turn 2.
    [superseded] = lineage.history
    assert superseded.type == "MemorySuperseded" and superseded.related_memory == story.porto
    assert lineage.related[story.porto] == "Alice lives in Porto."
    assert [(r.session_id, r.turn_id, r.rank) for r in lineage.recalls] == [("s2", 2, 1)]
    assert [(a.session_id, a.turn_id, a.revoked) for a in lineage.admissions] == [("s2", 2, False)]
    assert [(u.session_id, u.turn_id) for u in lineage.uses] == [("s2", 2)]
    assert lineage.recalls[0].position < lineage.admissions[0].position
    assert lineage.admissions[0].position < lineage.uses[0].position < superseded.position


def test_reinforced_memory_lists_both_origins(story: Story, engine: MemoryEngine) -> None:
    lineage = explain(engine, story.espresso[:8])  # a unique prefix is enough
    assert lineage.memory_id == story.espresso
    assert [o.kind for o in lineage.origins] == ["activated", "reinforced"]
    reinforced = lineage.origins[1]
    assert reinforced.session_id == "s2" and reinforced.turn_id == 1
    assert reinforced.candidate is not None and reinforced.candidate.extractor_id == "notes-v2"
    assert reinforced.transcript is not None and reinforced.transcript.occurred_at == FEB
    assert reinforced.decision is None
    assert set(lineage.evidence) == {"s1:1", "s2:1"}


def test_superseding_memory_names_what_it_replaced(story: Story, engine: MemoryEngine) -> None:
    lineage = explain(engine, story.porto)
    assert lineage.supersedes == (story.lisbon,)
    assert lineage.related[story.lisbon] == "Alice lives in Lisbon."
    assert lineage.origins[0].transcript is not None
    assert lineage.origins[0].transcript.turn_id == 3


def test_unknown_or_ambiguous_ids(engine: MemoryEngine) -> None:
    with pytest.raises(UnknownMemoryError, match="no memory"):
        explain(engine, "ffffffff")
    with pytest.raises(UnknownMemoryError, match="not a memory id"):
        explain(engine, "x")


def test_mermaid_diagram(story: Story, engine: MemoryEngine) -> None:
    diagram = render_mermaid(explain(engine, story.lisbon))
    lines = diagram.splitlines()
    assert lines[0] == "```mermaid" and lines[1] == "flowchart TD" and lines[-1] == "```"
    body = "\n".join(lines[2:-1])
    assert 'T1["turn 1 of s1' in body
    assert "T1 -->|extracted by recorded| C1" in body
    assert "C1 -->|activated (auto) @" in body
    assert "M -->|superseded (same subject predicate) @" in body
    assert "Alice lives in Porto." in body
    for touch in ("recalled @", "admitted @", "used @"):
        assert f"M -.->|{touch}" in body
    # Labels never break out of their quotes.
    for line in lines[2:-1]:
        if "[" in line:
            label = line[line.index("[") + 1 : line.rindex("]")]
            assert label.startswith('"') and label.endswith('"') and label.count('"') == 2


def test_cli_explain_formats(story: Story) -> None:
    as_json = runner.invoke(app, ["explain", story.lisbon, "--store", str(story.store), "--json"])
    assert as_json.exit_code == 0, as_json.output
    payload = json.loads(as_json.stdout)
    assert payload["status"] == "superseded"
    assert payload["origins"][0]["candidate"]["extractor_id"] == "recorded"
    assert payload["uses"][0]["turn_id"] == 2
    text = runner.invoke(app, ["explain", story.lisbon[:8], "--store", str(story.store)])
    assert text.exit_code == 0, text.output
    for expected in ("decision auto", "transcript @", "extractor", "recalled in 1", "used in 1"):
        assert expected in text.stdout
    mermaid = runner.invoke(
        app, ["explain", story.lisbon, "--store", str(story.store), "--format", "mermaid"]
    )
    assert mermaid.exit_code == 0 and mermaid.stdout.startswith("```mermaid\nflowchart TD\n")
    bad = runner.invoke(
        app, ["explain", story.lisbon, "--store", str(story.store), "--format", "x"]
    )
    assert bad.exit_code == 2 and "unknown --format" in bad.stderr
    missing = runner.invoke(app, ["explain", "0123abcd", "--store", str(story.store)])
    assert missing.exit_code == 2 and "no memory" in missing.stderr


@pytest.fixture(scope="module")
def locomo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = skip_without_locomo()
    converted = runner.invoke(app, ["convert-locomo", str(source), "--sample", "conv-26"])
    assert converted.exit_code == 0, converted.output
    lines = converted.stdout.splitlines()
    opens = [i for i, line in enumerate(lines) if json.loads(line)["op"] == "open"]
    first_two_sessions = lines[: opens[2]]  # keeps the test fast
    store = tmp_path_factory.mktemp("locomo") / "store"
    with MemoryEngine.open(store, sync=False) as engine:
        run_script(engine, parse_script(first_two_sessions))
    return store


def test_explain_locomo_memory_shows_its_dialogue_evidence(locomo_store: Path) -> None:
    conn = duckdb.connect(str(locomo_store / "projections" / "slot-0.duckdb"), read_only=True)
    try:
        [(memory_id,)] = conn.execute(
            "SELECT memory_id FROM canonical_memory WHERE evidence = ['D1:3']"
        ).fetchall()
    finally:
        conn.close()
    result = runner.invoke(app, ["explain", memory_id, "--store", str(locomo_store), "--json"])
    assert result.exit_code == 0, result.output
    lineage = json.loads(result.stdout)
    assert lineage["evidence"] == ["D1:3"] and lineage["subject"] == "Caroline"
    origin = lineage["origins"][0]
    assert origin["candidate"]["item"]["evidence"] == ["D1:3"]
    assert origin["transcript"]["transcript"].startswith("Caroline:")
    assert origin["transcript"]["occurred_at"].startswith("2023-05-08")
    text = runner.invoke(app, ["explain", memory_id, "--store", str(locomo_store)])
    assert text.exit_code == 0 and "evidence: D1:3" in text.stdout
