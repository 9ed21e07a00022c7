"""The interchange form (issue 37 item 3): an export that another store imports back
losslessly, compared by digest (the same memories, versions and times), idempotently."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger.ids import Namespace
from memory_ledger.replay.imports import (
    collect_memories,
    export_interchange,
    import_interchange,
    import_mem0,
    interchange_digest,
)

SOURCE = Namespace("acme", "alice", "assistant")
TARGET = Namespace("newco", "alice", "agent")
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def round_trip(source: MemoryEngine, folder: Path) -> tuple[str, str, Any]:
    """Export ``SOURCE`` of ``source``, import it into a new store's ``TARGET``, export that;
    return both digests and the import report."""
    first = export_interchange(source, SOURCE, folder / "a.jsonl")
    with MemoryEngine.open(folder / "b") as target:
        report = import_interchange(target, TARGET, folder / "a.jsonl")
        assert report.digest_matches and report.digest == first.digest
        again = import_interchange(target, TARGET, folder / "a.jsonl")
        assert again.imported == 0 and again.already == report.imported
        second = export_interchange(target, TARGET, folder / "b.jsonl")
    return first.digest, second.digest, report


def test_a_store_round_trips_by_digest(engine: MemoryEngine, tmp_path: Path) -> None:
    engine.remember(
        SOURCE,
        "Alice lives in Lisbon.",
        subject="Alice",
        predicate="lives in",
        value="Lisbon",
        tags=["home"],
        occurred_at=T0,
    )
    engine.correct(SOURCE, "Alice lives in Porto.", occurred_at=T0 + timedelta(days=3))
    engine.remember(
        SOURCE,
        "Alice lives in Braga.",
        subject="Alice",
        predicate="lives in",
        value="Braga",
        occurred_at=T0 + timedelta(days=9),
    )
    tea = engine.remember(SOURCE, "Alice drinks green tea.", occurred_at=T0)
    engine.forget(SOURCE, tea.memory_id)
    chess = engine.remember(SOURCE, "Alice plays chess on Fridays.")  # no valid time
    engine.pin(SOURCE, chess.memory_id)
    engine.remember(Namespace("acme", "bob", "assistant"), "Bob is not exported.")
    before, after, report = round_trip(engine, tmp_path)
    assert before == after
    assert report.imported == 3 and report.refused == ()
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    assert header == {
        "format": "memory-ledger.interchange",
        "version": 2,
        "memories": 3,
        "digest": before,
    }
    memories = [json.loads(line) for line in lines[1:]]
    alice = next(m for m in memories if len(m["versions"]) == 3)
    assert [v["statement"] for v in alice["versions"]] == [
        "Alice lives in Lisbon.",
        "Alice lives in Porto.",
        "Alice lives in Braga.",
    ]
    assert alice["versions"][0]["occurred_at"] == "2024-01-01T00:00:00Z"
    assert alice["versions"][0]["tags"] == ["home"]
    assert "Bob" not in (tmp_path / "a.jsonl").read_text()
    for line in lines[1:]:  # no ledger internals
        for word in ("memory_id", "position", "session", "tenant", "principal"):
            assert word not in line


def test_a_mem0_import_round_trips_by_digest(
    tmp_path: Path, mem0_store: tuple[Path, dict[str, Any]]
) -> None:
    folder, _ = mem0_store
    with MemoryEngine.open(tmp_path / "a") as source:
        import_mem0(source, folder / "history.db", namespace=SOURCE)
        before, after, report = round_trip(source, tmp_path)
    assert before == after and report.imported > 0


class Interrupted(Exception):
    pass


def test_an_interrupted_interchange_import_resumes(engine: MemoryEngine, tmp_path: Path) -> None:
    for i in range(6):
        engine.remember(SOURCE, f"Fact number {i} about the garden.", occurred_at=T0)
    export_interchange(engine, SOURCE, tmp_path / "a.jsonl")

    def stop(done: int) -> None:
        if done == 3:
            raise Interrupted

    with MemoryEngine.open(tmp_path / "b") as target:
        with pytest.raises(Interrupted):
            import_interchange(target, TARGET, tmp_path / "a.jsonl", progress=stop)
        resumed = import_interchange(target, TARGET, tmp_path / "a.jsonl")
        assert (resumed.already, resumed.imported) == (3, 3)
        digest = interchange_digest(collect_memories(target, TARGET)[1])
    assert digest == interchange_digest(collect_memories(engine, SOURCE)[1])


OPS = st.lists(
    st.tuples(st.sampled_from(["remember", "correct", "forget", "pin"]), st.integers(0, 4)),
    min_size=1,
    max_size=10,
)


@settings(max_examples=8, deadline=None)
@given(ops=OPS)
def test_any_history_of_commands_round_trips(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]]
) -> None:
    """Remembers, corrections, forgets and pins in any order: the export imported into a
    new store exports with the same digest."""
    folder = tmp_path_factory.mktemp("any")
    with MemoryEngine.open(folder / "a") as source:
        current: dict[int, Any] = {}
        for step, (op, slot) in enumerate(ops):
            at = T0 + timedelta(hours=step)
            text = f"Slot {slot} holds value {step}."
            if op == "remember" and slot not in current:
                current[slot] = source.remember(SOURCE, text, occurred_at=at).memory_id
            elif slot in current and op == "correct":
                current[slot] = source.correct(
                    SOURCE, text, target=current[slot], occurred_at=at
                ).memory_id
            elif slot in current and op == "forget":
                source.forget(SOURCE, current.pop(slot))
            elif slot in current and op == "pin":
                source.pin(SOURCE, current[slot])
        before, after, report = round_trip(source, folder)
    assert before == after and report.refused == ()


def test_a_file_changed_after_its_export_says_so(engine: MemoryEngine, tmp_path: Path) -> None:
    engine.remember(SOURCE, "Alice lives in Lisbon.", occurred_at=T0)
    export_interchange(engine, SOURCE, tmp_path / "a.jsonl")
    text = (tmp_path / "a.jsonl").read_text().replace("Lisbon", "Porto")
    (tmp_path / "b.jsonl").write_text(text)
    with MemoryEngine.open(tmp_path / "b") as target:
        report = import_interchange(target, TARGET, tmp_path / "b.jsonl")
    assert report.imported == 1 and not report.digest_matches


def test_langgraph_document_values_round_trip_by_digest(
    engine: MemoryEngine, tmp_path: Path
) -> None:
    """A LangGraph item's value over the plain 2,000 characters (a document value) and one
    whose whitespace a plain value would collapse come back exactly (interchange version 2
    carries ``document``)."""
    pytest.importorskip("langgraph")
    from memory_ledger.replay.langgraph_store import LedgerStore

    big = {"notes": [f"entry {i}: {'x' * 80}" for i in range(110)]}  # ~10 KB of JSON
    spaced = {"text": "two  spaces\tand a tab"}
    source = LedgerStore(engine, SOURCE)
    source.put(("docs", "a"), "big", big)
    source.put(("docs", "a"), "spaced", {"text": "first"})
    source.put(("docs", "a"), "spaced", spaced)  # a second version: a correction
    first, second, report = round_trip(engine, tmp_path)
    assert not report.refused and first == second
    with MemoryEngine.open(tmp_path / "b") as target:
        back = LedgerStore(target, TARGET)
        got = back.get(("docs", "a"), "big")
        assert got is not None and got.value == big
        again = back.get(("docs", "a"), "spaced")
        assert again is not None and again.value == spaced


def test_a_version_1_file_still_reads(engine: MemoryEngine, tmp_path: Path) -> None:
    engine.remember(SOURCE, "Alice lives in Lisbon.", occurred_at=T0)
    path = tmp_path / "v2.jsonl"
    export_interchange(engine, SOURCE, path)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0]) | {"version": 1}
    memory = json.loads(lines[1])
    for version in memory["versions"]:
        del version["document"]
    old = tmp_path / "v1.jsonl"
    old.write_text(json.dumps(header) + "\n" + json.dumps(memory) + "\n")
    with MemoryEngine.open(tmp_path / "b") as target:
        report = import_interchange(target, TARGET, old)
    assert report.digest_matches and report.imported == 1
