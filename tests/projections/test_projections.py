"""Read models: rebuild equals incremental, exactly-once pages, versions, slots, memory map."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.projections import (
    PROJECTED_EVENTS,
    CanonicalMemory,
    ProjectionRunner,
    ProjectionStore,
    estimate_tokens,
    render_memory_map,
    table_digests,
)
from memory_ledger.projections import fold as fold_module
from tests.conftest import REPO_ROOT, make_item
from tests.event_factory import EventFactory

STATEMENTS = ["Alice likes tea.", "Alice runs.", "alice likes tea", "Bob sings.", "Carol paints."]


def fresh_digests(engine: MemoryEngine, page_size: int = 100_000) -> dict[str, str]:
    store = ProjectionStore(":memory:", version=1)
    try:
        ProjectionRunner(store, engine.recorder, engine.mapper, page_size=page_size).catch_up()
        return table_digests(store.conn)
    finally:
        store.close()


def general_fold_digests(engine: MemoryEngine, page_size: int = 7) -> dict[str, str]:
    """Digests of a rebuild through the general fold only (no columnar fast path)."""
    store = ProjectionStore(":memory:", version=1)
    try:
        runner = ProjectionRunner(store, engine.recorder, engine.mapper, page_size=page_size)
        position = 0
        while (page := runner.read_page(position)) is not None:
            runner.apply_events(page[1], previous=position, last=page[0])
            position = page[0]
        return table_digests(store.conn)
    finally:
        store.close()


op = st.one_of(
    st.tuples(
        st.just("turn"), st.lists(st.sampled_from(STATEMENTS), max_size=3), st.integers(0, 2)
    ),
    st.tuples(st.just("activate"), st.sampled_from(STATEMENTS)),
    st.tuples(
        st.sampled_from(["supersede", "conflict", "pin", "forget", "prune"]), st.integers(0, 9)
    ),
    st.tuples(st.just("flow"), st.integers(0, 3)),
    st.tuples(st.just("catch_up"), st.integers(1, 7)),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(op, max_size=25))
def test_rebuild_equals_incremental(tmp_path_factory: Any, ops: list[tuple[Any, ...]]) -> None:
    """Catching up in arbitrary pages at arbitrary times gives the tables of one rebuild."""
    store_dir = tmp_path_factory.mktemp("rebuild")
    factory = EventFactory()
    memories: list[UUID] = []
    turn = 0
    with MemoryEngine.open(store_dir, sync=False) as engine:
        for entry in ops:
            kind = entry[0]
            before = len(factory.events)
            if kind == "turn":
                turn += 1
                factory.turn("s1", turn, entry[1], rejected=entry[2])
            elif kind == "activate":
                if turn:
                    memories.append(factory.activate("s1", turn, 0, entry[1]))
            elif kind == "flow":
                turn += 1
                factory.turn_flow("s1", turn, memories[: entry[1]])
            elif kind == "catch_up":
                engine.runner.page_size = entry[1]
                engine.catch_up()
            elif memories:
                target = memories[entry[1] % len(memories)]
                factory.memory_event(kind, target, memories[0])
            if len(factory.events) > before:
                engine.append(factory.events[before:])
        engine.runner.page_size = 3
        assert engine.catch_up() == engine.head
        incremental = table_digests(engine.projections.conn)
        assert incremental == fresh_digests(engine)
        assert incremental == fresh_digests(engine, page_size=1)
        assert incremental == general_fold_digests(engine)


def test_every_projected_event_class_is_exercised(tmp_path: Path) -> None:
    factory = EventFactory()
    factory.turn("s1", 1, ["Alice likes tea.", "Bob sings."], rejected=1)
    a = factory.activate("s1", 1, 0, "Alice likes tea.")
    b = factory.activate("s1", 1, 1, "Bob sings.")
    factory.activate("s1", 1, 0, "alice likes tea")
    for kind in ("pin", "conflict", "supersede", "forget", "prune"):
        factory.memory_event(kind, b if kind != "pin" else a, a)
    factory.turn_flow("s1", 2, [a, b])
    assert {type(e) for e in factory.events} == set(PROJECTED_EVENTS)
    with MemoryEngine.open(tmp_path / "s", sync=False) as engine:
        engine.append(factory.events)
        engine.catch_up()
        conn = engine.projections.conn
        row_a = engine.canonical.get(str(a))
        assert row_a is not None
        assert row_a["reinforcements"] == 1 and row_a["pinned"] is True
        assert (row_a["recall_count"], row_a["admission_count"], row_a["use_count"]) == (1, 1, 1)
        assert row_a["transcript_positions"] == [1, 1]
        row_b = engine.canonical.get(str(b))
        assert row_b is not None and row_b["status"] == "pruned"
        assert row_b["superseded_by"] == str(a) and row_b["conflicts_with"] == [str(a)]
        statuses = dict(
            conn.execute("SELECT status, count(*) FROM session_candidates GROUP BY ALL").fetchall()
        )
        assert statuses == {"activated": 1, "reinforced": 1, "rejected": 1}
        (snapshot,) = conn.execute("SELECT frozen, len(items) FROM turn_snapshots").fetchall()
        assert snapshot == (True, 2)
        revoked = conn.execute(
            "SELECT revoked, count(*) FROM admissions GROUP BY ALL ORDER BY 1"
        ).fetchall()
        assert revoked == [(False, 1), (True, 1)]
        assert conn.execute("SELECT count(*) FROM uses").fetchall() == [(1,)]
        assert conn.execute("SELECT count(*) FROM recalls").fetchall() == [(1,)]
        pending = conn.execute("SELECT count(*) FROM pending_extractions").fetchall()
        assert pending == [(0,)]
        assert table_digests(conn) == fresh_digests(engine)
        assert table_digests(conn) == general_fold_digests(engine)


def test_failed_batch_rolls_back_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    factory = EventFactory()
    for turn in range(1, 6):
        factory.turn("s1", turn, [f"fact {turn}"])
        factory.activate("s1", turn, 0, f"fact {turn}")
    with MemoryEngine.open(tmp_path / "s", sync=False) as engine:
        engine.append(factory.events)
        engine.runner.page_size = 4
        real_fold = fold_module.fold_page
        calls = {"n": 0}

        def failing_fold(conn: Any, events: Any, known: Any = None) -> Any:
            calls["n"] += 1
            page = real_fold(conn, events, known)  # rows are written inside the transaction
            if calls["n"] == 3:
                raise RuntimeError("injected failure inside a projection batch")
            return page

        monkeypatch.setattr("memory_ledger.projections.runner.fold_page", failing_fold)
        with pytest.raises(RuntimeError, match="injected"):
            engine.catch_up()
        assert engine.runner.position == 8  # two pages committed, the third rolled back
        monkeypatch.setattr("memory_ledger.projections.runner.fold_page", real_fold)
        assert engine.catch_up() == engine.head
        assert table_digests(engine.projections.conn) == fresh_digests(engine)
        assert engine.canonical.count_active() == 5


def test_page_already_applied_is_not_applied_twice(tmp_path: Path) -> None:
    factory = EventFactory()
    factory.turn("s1", 1, ["a fact"])
    factory.activate("s1", 1, 0, "a fact")
    with MemoryEngine.open(tmp_path / "s", sync=False) as engine:
        engine.append(factory.events)
        notifications = engine.recorder.select_notifications(start=1, limit=100)
        engine.runner.apply_page(notifications, previous=0)
        engine.runner.apply_page(notifications, previous=0)  # a stale applier: ignored
        (row,) = engine.canonical.active_memories("t", "p", "s")
        assert row["reinforcements"] == 0
        assert engine.runner.position == engine.head


def test_projection_version_bump_rebuilds(tmp_path: Path) -> None:
    factory = EventFactory()
    factory.turn("s1", 1, ["a fact"])
    factory.activate("s1", 1, 0, "a fact")
    db = str(tmp_path / "p.duckdb")
    with MemoryEngine.open(tmp_path / "s", sync=False) as engine:
        engine.append(factory.events)
        store = ProjectionStore(db, version=1)
        ProjectionRunner(store, engine.recorder, engine.mapper).catch_up()
        before = table_digests(store.conn)
        store.conn.execute("UPDATE canonical_memory SET statement = 'corrupted'")
        store.close()
        same = ProjectionStore(db, version=1)
        assert not same.rebuilt_for_version and same.position() == engine.head
        same.close()
        bumped = ProjectionStore(db, version=2)
        assert bumped.rebuilt_for_version and bumped.position() == 0
        ProjectionRunner(bumped, engine.recorder, engine.mapper).catch_up()
        assert table_digests(bumped.conn) == before
        bumped.close()


def test_second_engine_in_process_takes_another_slot(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with MemoryEngine.open(store) as first, MemoryEngine.open(store) as second:
        assert first.projections.path != second.projections.path
        ns = Namespace("t", "p", "s")
        extractor = RecordedExtractor()
        session = first.session(ns, "s1", extractor=extractor)
        extractor.provide(1, [make_item("Alice likes tea.")])
        session.observe_final_transcript(1, "user: tea")
        report = session.finish()
        answer = second.recall(ns, "tea", 5)
        assert answer.position >= report.position
        assert [h.statement for h in answer.results] == ["Alice likes tea."]


CHILD = """
import json, sys
from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
store, marker = sys.argv[1], sys.argv[2]
ns = Namespace("t", "p", "s")
with MemoryEngine.open(store) as engine:
    extractor = RecordedExtractor()
    session = engine.session(ns, "child", extractor=extractor)
    extractor.provide(1, [{"kind": "semantic", "subject": "Bob",
        "statement": "Bob plays the cello.", "source": "fact", "scope": "user", "reason": "r",
        "importance": 0.8, "confidence": 0.9}])
    session.observe_final_transcript(1, "user: cello")
    report = session.finish()
    answer = engine.recall(ns, "cello tea", 5)
    print(json.dumps({"slot": engine.projections.path, "finish": report.position,
        "position": answer.position, "statements": [h.statement for h in answer.results]}))
"""


def test_two_processes_each_read_their_own_consistent_view(tmp_path: Path) -> None:
    store = tmp_path / "s"
    ns = Namespace("t", "p", "s")
    with MemoryEngine.open(store) as engine:
        extractor = RecordedExtractor()
        session = engine.session(ns, "parent", extractor=extractor)
        extractor.provide(1, [make_item("Alice likes tea.")])
        session.observe_final_transcript(1, "user: tea")
        session.finish()
        engine.catch_up()
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(store), "x"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=120,
        )
        assert child.returncode == 0, child.stderr
        seen = json.loads(child.stdout)
        assert seen["slot"] != engine.projections.path
        assert seen["position"] >= seen["finish"]
        assert sorted(seen["statements"]) == ["Alice likes tea.", "Bob plays the cello."]
        head = engine.head
        answer = engine.recall(ns, "cello", 5)
        assert answer.position >= head
        assert [h.statement for h in answer.results] == ["Bob plays the cello."]


def synthetic_corpus(records: int, subjects: int, predicates: int) -> EventFactory:
    """``records`` activations over a Zipf-like vocabulary of subjects and predicates."""
    factory = EventFactory()
    from memory_ledger.ledger.events import MemoryActivated
    from tests.event_factory import EPOCH, item

    for n in range(records):
        subject = f"person{(n * 7919) % subjects if n % 3 else n % 25}"
        predicate = f"attribute_{(n * 104729) % predicates if n % 4 else n % 15}"
        statement = f"{subject} {predicate} value {n}"
        mid = UUID(int=n + 1)
        factory.events.append(
            MemoryActivated(
                originator_id=mid,
                originator_version=1,
                recorded_at=EPOCH,
                namespace=factory.namespace,
                session_id="s",
                turn_id=1,
                candidate_id=mid,
                decision="auto",
                item=item(statement, subject=subject, predicate=predicate),
                normalized=statement.lower(),
                occurred_at=None,
            )
        )
    return factory


def test_memory_map_format_and_token_bound_at_16000(tmp_path: Path) -> None:
    factory = synthetic_corpus(16_000, subjects=3_000, predicates=800)
    with MemoryEngine.open(tmp_path / "s", sync=False) as engine:
        engine.append(factory.events)
        ns = factory.namespace
        text = engine.memory_map(ns)
        assert estimate_tokens(text) <= 300
        lines = text.splitlines()
        assert lines[0].startswith("Memory map: 16000 remembered records")
        about, attribute = lines[1], lines[2]
        assert about.startswith("about: ") and attribute.startswith("attribute: ")
        assert "more" in about and "more" in attribute
        counts = [int(part.rsplit("(", 1)[1].rstrip(")")) for part in about[7:].split(", ")[:-1]]
        assert counts == sorted(counts, reverse=True) and len(counts) >= 10
        assert engine.memory_map(ns) is text  # cached while the projection has not moved


def test_memory_map_counts_only_retrievable_records(tmp_path: Path) -> None:
    factory = EventFactory()
    factory.turn("s1", 1, [])
    a = factory.activate("s1", 1, 0, "Alice likes tea.")
    factory.activate("s1", 1, 1, "Alice runs.")
    with MemoryEngine.open(tmp_path / "s", sync=False) as engine:
        engine.append(factory.events)
        assert "Alice (2)" in engine.memory_map(factory.namespace)
        before = len(factory.events)
        factory.memory_event("forget", a)
        engine.append(factory.events[before:])
        text = engine.memory_map(factory.namespace)
        assert "Alice (1)" in text and "1 remembered records" in text
        engine.catch_up()
        canonical = CanonicalMemory(engine.projections.conn)
        assert render_memory_map(canonical, "t", "p", "s") == text
        empty = engine.memory_map(Namespace("other", "p", "s"))
        assert "(none yet)" in empty


def test_columnar_fast_path_equals_the_general_fold(tmp_path: Path) -> None:
    """Pages of transcripts, candidates and first activations take the columnar path; the
    tables equal those of the general fold, page by page."""
    from benchmarks.catchup import generate

    with MemoryEngine.open(tmp_path / "s", sync=False) as engine:
        engine.append(generate(600, namespaces=3, turns_per_session=4))
        store = ProjectionStore(":memory:", version=1)
        runner = ProjectionRunner(store, engine.recorder, engine.mapper, page_size=37)
        offered = []
        original = runner._read_columnar_page

        def spy(after: int, to: int | None) -> Any:
            page = original(after, to)
            if page is not None and page[2] is not None:
                offered.append(len(page[2].activations))
            return page

        runner._read_columnar_page = spy  # type: ignore[method-assign]
        runner.catch_up()
        assert sum(offered) > 100  # the fast path really took activations
        assert table_digests(store.conn) == general_fold_digests(engine)
        store.close()
