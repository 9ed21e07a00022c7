"""`memory-ledger stats`: counts per event type, namespaces, memories, positions, sizes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine
from memory_ledger.replay import filter_events, store_stats
from memory_ledger.replay.cli.app import app
from tests.replay_story import Story, build_story

runner = CliRunner()


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Story:
    return build_story(tmp_path_factory.mktemp("stats") / "store")


def test_stats_counts_match_the_ledger(story: Story) -> None:
    with MemoryEngine.open(story.store, create=False) as engine:
        stats = store_stats(engine)
        expected = Counter(type(e).__name__ for _, e in filter_events(engine))
    assert stats.events_by_type == dict(sorted(expected.items()))
    assert stats.events == stats.ledger_head == stats.projection_position == story.head
    assert stats.sessions == 2
    [namespace] = stats.namespaces
    assert (namespace.tenant, namespace.principal, namespace.scope_id) == (
        "acme",
        "alice",
        "assistant",
    )
    assert namespace.sessions == 2 and namespace.active_memories == 2
    assert namespace.memories == {"active": 2, "superseded": 1}
    assert stats.memories_by_status == {"active": 2, "superseded": 1}
    assert stats.first_recorded_at is not None and stats.last_recorded_at is not None
    assert stats.first_recorded_at < stats.last_recorded_at
    assert 0 < stats.ledger_used_bytes <= stats.ledger_bytes
    mine = [slot for slot in stats.projection_files if slot.this_process]
    assert len(mine) == 1 and mine[0].position == story.head
    assert stats.total_bytes >= stats.ledger_bytes + mine[0].bytes


def test_stats_reports_other_slots(story: Story) -> None:
    """A second engine holds its own slot: stats lists it as in use, without opening it."""
    with (
        MemoryEngine.open(story.store, create=False) as host,
        MemoryEngine.open(story.store, create=False) as cli,
    ):
        host.catch_up()
        stats = store_stats(cli)
        host_slot = Path(host.projections.path).name
    held = [s for s in stats.projection_files if s.in_use and not s.this_process]
    assert [Path(s.path).name for s in held] == [host_slot]
    assert held[0].position is None
    # Once the host is gone, its file is free and its position readable.
    with MemoryEngine.open(story.store, create=False) as engine:
        again = store_stats(engine)
    free = [s for s in again.projection_files if not s.in_use]
    assert free and all(s.position == story.head for s in free)


def test_cli_stats(story: Story) -> None:
    result = runner.invoke(app, ["stats", "--store", str(story.store), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["ledger_head"] == story.head
    assert payload["events_by_type"]["MemoryActivated"] == 3
    assert payload["namespaces"][0]["active_memories"] == 2
    text = runner.invoke(app, ["stats", "--store", str(story.store)], env={"COLUMNS": "160"})
    assert text.exit_code == 0
    for expected in ("ledger head", "events by type", "MemorySuperseded", "projection files"):
        assert expected in text.stdout
