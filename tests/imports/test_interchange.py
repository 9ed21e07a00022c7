"""The interchange form (issue 37 item 3): an export that another store imports back
losslessly, compared by digest (the same memories, versions and times), idempotently."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.extraction import RecordedExtractor
from memory_ledger.ledger.ids import Namespace
from memory_ledger.replay.imports import (
    InterchangeImportReport,
    collect_memories,
    export_interchange,
    import_interchange,
    import_mem0,
    interchange_digest,
)
from memory_ledger.replay.imports.interchange import InterchangeMemory
from tests.conftest import make_item

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
        "version": 3,
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


def contradict(engine: MemoryEngine, session_id: str, statement: str, partner: Any) -> Any:
    """Remember ``statement`` as contradicting the memory ``partner`` (both marked
    ``conflicted``): an extractor's finding in a session, the one way a conflict is
    recorded. Returns the new memory's id."""
    extractor = RecordedExtractor()
    session = engine.session(SOURCE, session_id, extractor=extractor)
    extractor.provide(1, [make_item(statement, conflicts_with=[str(partner)])])
    session.observe_final_transcript(1, f"user: {statement}")
    report = session.finish()
    assert len(report.conflicts) == 2, report
    return next(m for m in report.activated)


def prune_all(engine: MemoryEngine, session_id: str) -> list[Any]:
    """Prune every memory of ``SOURCE`` that pruning may take (engine.remember's 0.9
    importance is under the bound given)."""
    return engine.session(SOURCE, session_id).prune(max_importance=0.95, max_uses=100)


def rows_by_statement(engine: MemoryEngine, namespace: Namespace) -> dict[str, tuple[Any, ...]]:
    """Each memory of ``namespace`` by statement: its status, pin and the statements of the
    memories it is marked as contradicting."""
    with engine.read_models() as live:
        rows = live.conn.execute(
            "SELECT memory_id, statement, status, pinned, conflicts_with FROM canonical_memory "
            "WHERE tenant = ? AND principal = ? AND scope_id = ?",
            [namespace.tenant, namespace.principal, namespace.scope_id],
        ).fetchall()
    statement_of = {row[0]: row[1] for row in rows}
    return {
        row[1]: (row[2], bool(row[3]), sorted(statement_of[o] for o in row[4] or ()))
        for row in rows
    }


def test_pruned_and_conflicted_memories_come_back_as_they_were(
    engine: MemoryEngine, tmp_path: Path
) -> None:
    """A pruned memory comes back pruned at its prune time with its rule; conflict marks
    come back on both memories, a current one ``conflicted``, also when its partner was
    corrected since (the mark stays on the superseded value)."""
    old = engine.remember(SOURCE, "Alice once collected stamps.", occurred_at=T0)
    pruned = prune_all(engine, "prune-1")
    assert pruned == [old.memory_id]
    born = engine.remember(SOURCE, "Alice was born in 1990.", occurred_at=T0)
    later = contradict(engine, "s-born", "Alice was born in 1991.", born.memory_id)
    city = engine.remember(SOURCE, "Alice lives in Lisbon.", occurred_at=T0)
    contradict(engine, "s-city", "Alice lives in Faro.", city.memory_id)
    engine.correct(SOURCE, "Alice lives in Porto.", target=city.memory_id)
    engine.remember(SOURCE, "Alice plays chess.", occurred_at=T0)
    assert later is not None
    before, after, report = round_trip(engine, tmp_path)
    assert before == after
    assert report.refused == () and report.approximated == 0
    with MemoryEngine.open(tmp_path / "b") as target:
        assert rows_by_statement(target, TARGET) == rows_by_statement(engine, SOURCE)
        moved = rows_by_statement(target, TARGET)
        assert moved["Alice once collected stamps."][0] == "pruned"
        assert moved["Alice was born in 1991."] == (
            "conflicted",
            False,
            ["Alice was born in 1990."],
        )
        assert moved["Alice lives in Faro."] == ("conflicted", False, ["Alice lives in Lisbon."])
        assert moved["Alice lives in Lisbon."][0] == "superseded"
        assert moved["Alice plays chess."][0] == "active"
    lines = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()[1:]]
    stamps = next(m for m in lines if m["versions"][0]["statement"].endswith("stamps."))
    assert stamps["status"] == "pruned" and stamps["pruned_rule"].startswith("importance<")
    assert stamps["forgotten_at"] is not None
    keys = {m["key"] for m in lines}
    for memory in lines:  # partners name lines of the file, never a memory id
        for version in memory["versions"]:
            for partner in version["conflicts_with"]:
                assert partner["key"] in keys and partner["key"] != memory["key"]


def test_the_prune_keeps_its_time_and_rule_across_two_moves(
    engine: MemoryEngine, tmp_path: Path
) -> None:
    """An imported prune keeps the source's prune time (not the import's): exported again
    from the second store and imported into a third, the digest still matches."""
    engine.remember(SOURCE, "Alice once collected stamps.", occurred_at=T0)
    prune_all(engine, "prune-1")
    first = export_interchange(engine, SOURCE, tmp_path / "a.jsonl")
    with MemoryEngine.open(tmp_path / "b") as second:
        import_interchange(second, TARGET, tmp_path / "a.jsonl")
        middle = export_interchange(second, TARGET, tmp_path / "b.jsonl")
    with MemoryEngine.open(tmp_path / "c") as third:
        import_interchange(third, SOURCE, tmp_path / "b.jsonl")
        last = export_interchange(third, SOURCE, tmp_path / "c.jsonl")
    assert first.digest == middle.digest == last.digest


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
    st.tuples(
        st.sampled_from(["remember", "correct", "forget", "pin", "prune", "contradict"]),
        st.integers(0, 4),
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=12, deadline=None)
@given(ops=OPS)
def test_any_history_of_commands_round_trips(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]]
) -> None:
    """Remembers, corrections, forgets, pins, prunes and contradictions in any order: the
    export imported into a new store exports with the same digest, and every memory comes
    back with its status, pin and conflict partners."""
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
            elif op == "prune":
                gone = set(prune_all(source, f"prune-{step}"))
                current = {s: m for s, m in current.items() if m not in gone}
            elif op == "contradict" and slot not in current and current:
                partner = current[min(current)]
                current[slot] = contradict(source, f"s-{step}", text, partner)
        before, after, report = round_trip(source, folder)
        with MemoryEngine.open(folder / "b") as target:
            assert rows_by_statement(target, TARGET) == rows_by_statement(source, SOURCE)
    assert before == after and report.refused == () and report.approximated == 0


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


def as_older_version(path: Path, version: int, out: Path) -> None:
    """The interchange file ``path`` as version ``version`` wrote it: no ``conflicts_with``
    or ``pruned_rule`` (before 3), no ``document`` (before 2)."""
    lines = path.read_text().splitlines()
    header = json.loads(lines[0]) | {"version": version}
    memories = [json.loads(line) for line in lines[1:]]
    for memory in memories:
        del memory["pruned_rule"]
        for entry in memory["versions"]:
            del entry["conflicts_with"]
            if version < 2:
                del entry["document"]
    # the digest an exporter of that version wrote: over what the lines hold
    decoded = [msgspec.convert(m, InterchangeMemory, strict=False) for m in memories]
    header["digest"] = interchange_digest(decoded)
    out.write_text("\n".join(json.dumps(line) for line in [header, *memories]) + "\n")


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_version_file_still_reads(
    engine: MemoryEngine, tmp_path: Path, version: int
) -> None:
    """A version 1 or 2 file reads, its digest checks; it carries no conflict partners, so
    the conflicted memories come back active (``approximated``), and no prune rule, so a
    pruned one comes back pruned under the rule ``imported``."""
    engine.remember(SOURCE, "Alice once collected stamps.", occurred_at=T0)
    prune_all(engine, "prune-1")
    born = engine.remember(SOURCE, "Alice was born in 1990.", occurred_at=T0)
    contradict(engine, "s-born", "Alice was born in 1991.", born.memory_id)
    path = tmp_path / "v3.jsonl"
    export_interchange(engine, SOURCE, path)
    old = tmp_path / f"v{version}.jsonl"
    as_older_version(path, version, old)
    with MemoryEngine.open(tmp_path / "b") as target:
        report: InterchangeImportReport = import_interchange(target, TARGET, old)
        moved = rows_by_statement(target, TARGET)
    assert report.digest_matches and report.imported == 3 and report.approximated == 2
    assert moved["Alice once collected stamps."][0] == "pruned"
    assert moved["Alice was born in 1991."] == ("active", False, [])
    assert moved["Alice was born in 1990."] == ("active", False, [])


def test_two_imports_of_one_file_racing_write_each_line_once(
    engine: MemoryEngine, tmp_path: Path
) -> None:
    """Two threads import the same file into one store at the same moment (a barrier), round
    after round into new namespaces: each line is written by exactly one of them (the other
    finds it ``already`` there: the keyed session id is in the decision's append condition),
    and the namespace exports with the file's digest, conflicts and prunes included."""
    old = engine.remember(SOURCE, "Alice once collected stamps.", occurred_at=T0)
    assert prune_all(engine, "prune-1") == [old.memory_id]
    born = engine.remember(SOURCE, "Alice was born in 1990.", occurred_at=T0)
    contradict(engine, "s-born", "Alice was born in 1991.", born.memory_id)
    for i in range(4):
        engine.remember(SOURCE, f"Fact number {i} about the garden.", occurred_at=T0)
    sent = export_interchange(engine, SOURCE, tmp_path / "a.jsonl")
    split = 0  # rounds where both threads wrote some lines: the imports interleaved
    with MemoryEngine.open(tmp_path / "b") as target:
        # At least 8 rounds, and on until one round split the lines between the threads
        # (their imports interleaved; an idle machine may run one import before the other
        # starts), at most 200: every round's result is checked all the same.
        for round_ in range(200):
            if round_ >= 8 and split:
                break
            where = Namespace("newco", f"alice-{round_}", "agent")
            barrier = threading.Barrier(2)
            reports: list[InterchangeImportReport] = []
            errors: list[BaseException] = []

            def run(
                where: Namespace = where,
                barrier: threading.Barrier = barrier,
                reports: list[InterchangeImportReport] = reports,
                errors: list[BaseException] = errors,
            ) -> None:
                try:
                    barrier.wait()
                    reports.append(import_interchange(target, where, tmp_path / "a.jsonl"))
                except BaseException as e:  # noqa: BLE001 - reported below
                    errors.append(e)

            threads = [threading.Thread(target=run) for _ in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert errors == []
            assert sum(r.imported for r in reports) == sent.memories
            split += all(r.imported for r in reports)
            assert all(r.imported + r.already == sent.memories and not r.refused for r in reports)
            assert interchange_digest(collect_memories(target, where)[1]) == sent.digest
    assert split > 0  # the imports really raced
