"""Recall as of a point from ``memory_history`` (`replay.audit.past_recall`) answers as the fold.

The fold (`as_of`, then `AsOf.recall`) is the oracle: on random ledgers (sessions of several
turns, so memories carry source turns and conversation windows; reinforcements by telling a
statement again; corrections, pins, forgets, a namespace forgotten whole, an erasure) the
recall of :func:`recall_point` at random points (positions and recorded times) and for
random queries equals the fold's, hit for hit: ids, ranks, scores, statements, revisions,
evidence and tags; built from the memories then, derived from the index kept at an
earlier point, or derived from the live engine's recall index (`replay.audit.past_indexes`).
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.commands import MemoryEngine, RecordedExtractor
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.ledger.ids import Namespace
from memory_ledger.replay import PastRecall, as_of, filter_events, recall_point
from memory_ledger.replay.audit.past_indexes import PastIndexes
from tests.conftest import make_item

KEPT = Namespace("acme", "alice", "assistant")
ERASED = Namespace("acme", "bob", "assistant")
SUBJECTS = ("Alice", "Bob")
PREDICATES = ("lives_in", "works_at")
VALUES = ("Lisbon", "Porto", "Berlin")
AROUND = ("weather", "paddle", "coffee", "trip", "")
DAY0 = datetime(2025, 1, 1, tzinfo=UTC)
QUERIES = (
    "Alice",
    "where does Bob live",
    "Lisbon Porto",
    "works at Berlin",
    "weather",
    "paddle trip",
    "coffee Alice",
    "user",
    "nothing matches this",
)

namespaces = st.sampled_from((KEPT, ERASED))
fact = st.tuples(
    st.sampled_from(SUBJECTS),
    st.sampled_from(PREDICATES),
    st.sampled_from(VALUES),
    st.sampled_from(AROUND),
)
told = st.tuples(st.just("tell"), namespaces, st.lists(fact, min_size=1, max_size=4))
remembered = st.tuples(st.just("remember"), namespaces, fact)
corrected = st.tuples(st.just("correct"), namespaces, st.integers(0, 50), st.sampled_from(VALUES))
pinned = st.tuples(st.just("pin"), namespaces, st.integers(0, 50))
forgotten = st.tuples(st.just("forget"), namespaces, st.integers(0, 50))
forgotten_all = st.tuples(st.just("forget_all"), namespaces)
erased = st.tuples(st.just("erase"))
ledgers = st.lists(
    st.one_of(told, told, remembered, corrected, pinned, forgotten, forgotten_all, erased),
    min_size=1,
    max_size=8,
)


def _statement(subject: str, predicate: str, value: str) -> str:
    return f"{subject} {predicate.replace('_', ' ')} {value}."


def _apply(
    engine: MemoryEngine, step: tuple[Any, ...], ids: dict[Namespace, list[str]], n: int
) -> None:
    """Run one step through the engine's public commands (a refused one is history too)."""
    kind = step[0]
    try:
        if kind == "tell":
            _, ns, facts = step
            extractor = RecordedExtractor()
            with engine.session(ns, f"s{n}", extractor=extractor) as session:
                for turn, (subject, predicate, value, around) in enumerate(facts, start=1):
                    statement = _statement(subject, predicate, value)
                    extractor.provide(
                        turn,
                        [make_item(statement, subject=subject, predicate=predicate, value=value)],
                    )
                    session.observe_final_transcript(
                        turn, f"user: {statement} {around}", DAY0 + timedelta(days=n + turn)
                    )
                session.finish()
        elif kind == "remember":
            _, ns, (subject, predicate, value, _around) = step
            result = engine.remember(
                ns, _statement(subject, predicate, value), subject=subject, predicate=predicate
            )
            ids[ns].append(str(result.memory_id))
        elif kind == "correct":
            _, ns, pick, value = step
            if ids[ns]:
                target = ids[ns][pick % len(ids[ns])]
                result = engine.correct(ns, f"Alice lives in {value} now.", target=target)
                ids[ns].append(str(result.memory_id))
        elif kind == "pin":
            _, ns, pick = step
            if ids[ns]:
                engine.pin(ns, ids[ns][pick % len(ids[ns])])
        elif kind == "forget":
            _, ns, pick = step
            if ids[ns]:
                engine.forget(ns, ids[ns][pick % len(ids[ns])])
        elif kind == "forget_all":
            engine.forget_all(step[1])
        else:
            engine.erase(ERASED.tenant, ERASED.principal, ERASED.scope_id)
    except MemoryLedgerError:
        pass
    with engine.read_models() as live:  # every memory so far, for later steps to target
        for ns in (KEPT, ERASED):
            rows = live.conn.execute(
                "SELECT memory_id FROM canonical_memory WHERE tenant = ? AND principal = ? "
                "AND scope_id = ? ORDER BY created_position",
                [ns.tenant, ns.principal, ns.scope_id],
            ).fetchall()
            ids[ns] = [str(r[0]) for r in rows]


def _same_recall(
    engine: MemoryEngine, at: int | datetime, asked: list[tuple[str, int]], kept: PastIndexes
) -> None:
    """At ``at``: the fold's recall, the one built from memory_history, and the one derived
    from the indexes ``kept`` at earlier points (then kept too) agree."""
    with (
        as_of(engine, at) as oracle,
        recall_point(engine, at) as built,
        recall_point(engine, at, indexes=kept) as derived,
        recall_point(engine, at, indexes=PastIndexes()) as from_live,
    ):
        assert isinstance(built, PastRecall) and isinstance(derived, PastRecall)
        assert built.position == oracle.position
        assert built.describe() == oracle.describe()
        for ns in (KEPT, ERASED):
            for query, k in asked:
                expected = oracle.recall(ns, query, k)
                assert built.recall(ns, query, k) == expected, (at, ns, query)
                assert derived.recall(ns, query, k) == expected, (at, ns, query, "derived")
                assert from_live.recall(ns, query, k) == expected, (at, ns, query, "live")


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    ledger=ledgers,
    picks=st.lists(st.floats(0, 1), min_size=1, max_size=3),
    asked=st.lists(st.tuples(st.sampled_from(QUERIES), st.integers(1, 6)), min_size=1, max_size=4),
    by_time=st.booleans(),
)
def test_recall_from_memory_history_equals_the_fold(
    ledger: list[tuple[Any, ...]],
    picks: list[float],
    asked: list[tuple[str, int]],
    by_time: bool,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with MemoryEngine.open(Path(tmp) / "store") as engine:
            ids: dict[Namespace, list[str]] = {KEPT: [], ERASED: []}
            for n, step in enumerate(ledger):
                _apply(engine, step, ids, n)
            head = engine.head
            points: list[int | datetime] = [int(p * head) for p in picks] + [head]
            if by_time and head:
                times = [e.recorded_at for _, e in filter_events(engine)]
                points += [times[int(p * (len(times) - 1))] for p in picks]
            kept = PastIndexes()
            for at in points:
                _same_recall(engine, at, asked, kept)


def test_a_point_keeps_its_index_and_closes(tmp_path: Path) -> None:
    """A second recall at the same point reuses the namespace's index; a closed point
    answers no more (its cursor is closed)."""
    with MemoryEngine.open(tmp_path / "store") as engine:
        engine.remember(KEPT, "Alice lives in Lisbon.", subject="Alice")
        engine.remember(KEPT, "Alice works at Porto.", subject="Alice")
        past = recall_point(engine, engine.head)
        first = past.recall(KEPT, "Alice", 5)
        assert [h.statement for h in first] == ["Alice lives in Lisbon.", "Alice works at Porto."]
        engine.forget(KEPT, "Alice lives in Lisbon.")
        assert past.recall(KEPT, "Alice", 5) == first  # the point does not move
        past.close()
        with pytest.raises(MemoryLedgerError):
            past.recall(KEPT, "Bob", 5)


def test_a_new_point_derives_its_index_from_a_kept_one(tmp_path: Path) -> None:
    """The first point derives the namespace's index from the live engine's (no build from
    every memory); the next ones, earlier or later, derive theirs from the copy kept then,
    and answer as the fold does."""
    with MemoryEngine.open(tmp_path / "store") as engine:
        for value in VALUES:
            engine.remember(KEPT, f"Alice lives in {value}.", subject="Alice")
        engine.forget(KEPT, "Alice lives in Porto.")
        middle = engine.head
        engine.remember(KEPT, "Alice works at Berlin.", subject="Alice")
        kept = PastIndexes()
        key = KEPT.key()
        for at in (engine.head, middle, 2):
            with recall_point(engine, at, indexes=kept) as past, as_of(engine, at) as oracle:
                assert isinstance(past, PastRecall)
                assert past.recall(KEPT, "Alice lives", 5) == oracle.recall(KEPT, "Alice lives", 5)
                assert past.sources == {key: "derived"}
        with recall_point(engine, middle) as alone:  # no kept indexes: built from memories
            assert isinstance(alone, PastRecall)
            alone.recall(KEPT, "Alice", 5)
            assert alone.sources == {key: "built"}


def test_the_live_index_moved_on_since_the_point_was_opened(tmp_path: Path) -> None:
    """A point opened before the store changed derives from the live index as it stands
    at the first recall (after the change): the changes between the two are undone, and
    the answers stay the fold's at the point."""
    with MemoryEngine.open(tmp_path / "store") as engine:
        for value in VALUES:
            engine.remember(KEPT, f"Alice lives in {value}.", subject="Alice")
        at = engine.head
        kept = PastIndexes()
        with recall_point(engine, at, indexes=kept) as past, as_of(engine, at) as oracle:
            engine.forget(KEPT, "Alice lives in Porto.")
            engine.remember(KEPT, "Alice lives in Lisbon, near the river.", subject="Alice")
            engine.remember(KEPT, "Bob works at Berlin.", subject="Bob")
            assert isinstance(past, PastRecall)
            for query in QUERIES:
                assert past.recall(KEPT, query, 6) == oracle.recall(KEPT, query, 6), query
            assert past.sources == {KEPT.key(): "derived"}


def test_a_new_head_drops_the_indexes_kept_for_past_points(tmp_path: Path) -> None:
    """Indexes kept at one ledger head are dropped at the next look-up under another (an
    erasure among the new head's causes leaves none of its words kept)."""
    with MemoryEngine.open(tmp_path / "store") as engine:
        engine.remember(ERASED, "Bob lives in Porto.", subject="Bob")
        kept = PastIndexes()
        with recall_point(engine, engine.head, indexes=kept) as past:
            past.recall(ERASED, "Porto", 5)
        assert kept.nearest(ERASED.key(), engine.head, engine.head) is not None
        engine.forget_all(ERASED)  # a new head (an erasure makes one too)
        assert kept.nearest(ERASED.key(), engine.head, engine.head) is None
        with recall_point(engine, engine.head, indexes=kept) as after:
            assert len(after.recall(ERASED, "Porto", 5)) == 0


def test_points_derive_from_a_live_index_read_from_the_persisted_file(tmp_path: Path) -> None:
    """In a fresh process a point derives from the persisted index as the file holds it
    (the live index not loaded); once the live index is restored from that file (documents
    decoded lazily), points derived from it, before and after the store moves on, answer
    as the fold does, and the live index holds what canonical memory holds."""
    path = tmp_path / "store"
    with MemoryEngine.open(path) as engine:
        for value in VALUES:
            engine.remember(KEPT, f"Alice lives in {value}.", subject="Alice")
            engine.remember(KEPT, f"Bob works at {value}.", subject="Bob")
        engine.forget(KEPT, "Alice lives in Porto.")
        engine.recall(KEPT, "Alice", 3)  # the live index, persisted at close
    with MemoryEngine.open(path) as engine:
        points = [2, 4, engine.head]
        with recall_point(engine, 4, indexes=PastIndexes()) as first, as_of(engine, 4) as oracle:
            for query in QUERIES:  # derived from the file's index: the live one not loaded
                assert first.recall(KEPT, query, 6) == oracle.recall(KEPT, query, 6), query
            assert isinstance(first, PastRecall) and first.sources == {KEPT.key(): "derived"}
        assert engine.recall_index.loaded == {}
        engine.recall(KEPT, "Alice lives", 6)
        assert engine.recall_index.loaded == {KEPT.key(): "file"}
        kept = PastIndexes()
        with recall_point(engine, points[0], indexes=kept) as early:
            engine.remember(KEPT, "Alice lives in Lisbon, by the river.", subject="Alice")
            engine.forget(KEPT, "Bob works at Berlin.")
            for at in [*points, engine.head]:
                with recall_point(engine, at, indexes=kept) as past, as_of(engine, at) as oracle:
                    assert isinstance(past, PastRecall) and isinstance(early, PastRecall)
                    for query in QUERIES:
                        expected = oracle.recall(KEPT, query, 6)
                        assert past.recall(KEPT, query, 6) == expected, (at, query)
                    assert past.sources == {KEPT.key(): "derived"}
            with as_of(engine, points[0]) as oracle:
                for query in QUERIES:
                    assert early.recall(KEPT, query, 6) == oracle.recall(KEPT, query, 6)
        engine.forget(KEPT, "Alice lives in Lisbon, by the river.")
        with engine.read_models() as live:  # the live index moved on, untouched by the points
            rows = live.conn.execute(
                "SELECT memory_id, statement FROM canonical_memory WHERE principal = 'alice' "
                "AND status IN ('active', 'conflicted')"
            ).fetchall()
        docs = engine.retrievable_memories(KEPT)
        assert sorted((d.memory_id, d.statement) for d in docs) == sorted(rows)


def test_an_erasure_drops_the_debuggers_kept_indexes(tmp_path: Path) -> None:
    """The debugger's indexes kept for past points (copies of the engine's index, with the
    namespace's words) are dropped when its engine applies an erasure, before any later
    look-up; recall as of a point before the erasure then finds none of the erased words."""
    import os

    from memory_ledger.replay.ui import UiState

    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    with MemoryEngine.open(tmp_path / "store", master_key=key) as engine:
        engine.remember(ERASED, "Bob lives in Tamarindzz.", subject="Bob")
        before = engine.head
        state = UiState(engine, "token")
        try:
            with state.point("position", before) as past:
                assert [h.statement for h in past.recall(ERASED, "Tamarindzz", 5)] == [
                    "Bob lives in Tamarindzz."
                ]
            kept = state._indexes  # the kept copies (what the erasure must reach)
            assert kept.nearest(ERASED.key(), before, before) is not None
            engine.erase(ERASED.tenant, ERASED.principal, requested_by="dpo")
            with engine.read_models():  # the read models apply the erasure
                pass
            assert kept._bases == {}
            with recall_point(engine, before, indexes=kept) as again:
                assert len(again.recall(ERASED, "Tamarindzz", 5)) == 0
        finally:
            state.close()
