"""The serving read models (``projections/serving``): an incremental state equals a rebuild.

The writer applies its own events inline (``MemoryEngine.append``) and tails the ledger for
another process's; after any sequence of commands, reopens and writes by another engine on
the same store, the state equals one rebuilt from the whole ledger by digest, and its
retrievable rows equal the retrievable rows of DuckDB's ``canonical_memory`` caught up to
the same position. Reads see another engine's writes (read-your-writes across processes),
and an erasure leaves no row of the namespace in the state.
"""

from __future__ import annotations

import gc
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.commands.recall.index import DOC_COLUMNS
from memory_ledger.ledger.events import LedgerEvent
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.keyring import namespace_ids
from memory_ledger.projections.serving.state import SERVING_TOPICS, ServingState, rows_digest

NAMESPACES = (Namespace("t", "alice", "s"), Namespace("t", "bob", "s"))
SUBJECTS = ("alice", "bob", "carol")
PREDICATES = ("drink", "city", "pet")
VALUES = ("tea", "coffee", "paris", "oslo", "cat", "dog")


def rebuilt(engine: MemoryEngine) -> ServingState:
    """A serving state rebuilt from the whole ledger, as a fresh process would."""
    state = ServingState()
    decode = engine.event_decoder()
    records = engine.read_records(0, 1_000_000)
    events: list[tuple[int, LedgerEvent]] = [
        (position, decode(topic, data, raw_id, version))
        for position, raw_id, version, topic, data in records
        if topic in SERVING_TOPICS
    ]
    state.apply(events, last=records[-1][0] if records else 0)
    return state


def duckdb_digest(engine: MemoryEngine) -> tuple[int, str]:
    columns = ("tenant", "principal", "scope_id", *DOC_COLUMNS)
    with engine.read_models() as live:
        result = live.conn.execute(
            f"SELECT {', '.join(columns)} FROM canonical_memory "  # noqa: S608 (fixed names)
            "WHERE status IN ('active', 'conflicted')"
        )
        rows = [dict(zip(columns, row, strict=True)) for row in result.fetchall()]
        return live.position, rows_digest(rows, DOC_COLUMNS)


def served(engine: MemoryEngine) -> ServingState:
    with engine.serving.lock:
        engine._serve()
    return engine.serving


def check(engine: MemoryEngine) -> None:
    state = served(engine)
    fresh = rebuilt(engine)
    assert state.position == fresh.position == engine.head
    assert state.digest(DOC_COLUMNS) == fresh.digest(DOC_COLUMNS)
    position, digest = duckdb_digest(engine)
    assert position == state.position
    assert digest == state.digest(DOC_COLUMNS)
    for namespace in NAMESPACES:  # what recall serves is what the state holds
        docs = {doc.memory_id for doc in engine.retrievable_memories(namespace)}
        parts = (namespace.tenant, namespace.principal, namespace.scope_id)
        assert docs == {row["memory_id"] for row in state.active_memories(*parts)}
        with engine.read_models() as live:  # the memory map's counts: the vocabulary view's
            for field in ("subject", "predicate"):
                rows = live.conn.execute(
                    "SELECT term, records FROM vocabulary WHERE tenant = ? AND principal = ? "
                    "AND scope_id = ? AND field = ? ORDER BY records DESC, term",
                    [*parts, field],
                ).fetchall()
                assert state.vocabulary(*parts, field) == [(str(t), int(n)) for t, n in rows]


step = st.one_of(
    st.tuples(
        st.just("remember"),
        st.integers(0, 1),
        st.sampled_from(SUBJECTS),
        st.sampled_from(PREDICATES),
        st.sampled_from(VALUES),
    ),
    st.tuples(st.just("forget"), st.integers(0, 1), st.sampled_from(VALUES)),
    st.tuples(st.just("pin"), st.integers(0, 1), st.sampled_from(VALUES)),
    st.tuples(st.just("forget_all"), st.integers(0, 1)),
    st.tuples(st.just("many"), st.integers(0, 1), st.integers(1, 5)),
    st.tuples(st.just("reopen")),
    st.tuples(st.just("other"), st.integers(0, 1), st.sampled_from(VALUES)),
)


def run_step(engine: MemoryEngine, store: Path, action: tuple[object, ...]) -> MemoryEngine:
    kind = action[0]
    try:
        if kind == "remember":
            _, n, subject, predicate, value = action
            ns = NAMESPACES[int(str(n))]
            engine.remember(
                ns,
                f"{subject} {predicate} is {value}",
                subject=str(subject),
                predicate=str(predicate),
                value=str(value),
            )
        elif kind in ("forget", "pin"):
            _, n, value = action
            ns = NAMESPACES[int(str(n))]
            (engine.forget if kind == "forget" else engine.pin)(ns, f"is {value}")
        elif kind == "forget_all":
            engine.forget_all(NAMESPACES[int(str(action[1]))])
        elif kind == "many":
            _, n, count = action
            ns = NAMESPACES[int(str(n))]
            engine.remember_many(ns, [f"note {i} of {count} words" for i in range(int(str(count)))])
        elif kind == "reopen":
            engine.close()
            return MemoryEngine.open(store, sync=False)
        elif kind == "other":  # another engine (a process) writes; this one tails it
            _, n, value = action
            with MemoryEngine.open(store, sync=False) as other:
                other.remember(NAMESPACES[int(str(n))], f"someone said {value}")
    except MemoryLedgerError:
        pass  # a refused command (nothing to forget, several targets) writes nothing
    return engine


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(step, min_size=1, max_size=8))
def test_an_incremental_serving_state_equals_a_rebuild_and_duckdb(
    steps: list[tuple[object, ...]],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "s"
        engine = MemoryEngine.open(store, sync=False)
        try:
            for action in steps:
                before = engine.head
                engine = run_step(engine, store, action)
                if action[0] not in ("other", "reopen") and engine.head != before:
                    # A command that appended applied its events (and any gap before them).
                    assert engine.serving.position == engine.head
            check(engine)
        finally:
            engine.close()


def test_a_write_by_another_engine_is_read_at_once(tmp_path: Path) -> None:
    store = tmp_path / "s"
    ns = NAMESPACES[0]
    with MemoryEngine.open(store, sync=False) as a, MemoryEngine.open(store, sync=False) as b:
        a.remember(ns, "the kayak is red", subject="kayak", predicate="colour", value="red")
        assert [h.statement for h in b.recall(ns, "kayak").results] == ["the kayak is red"]
        b.remember(ns, "the kayak is blue", subject="kayak", predicate="colour", value="blue")
        assert [h.statement for h in a.recall(ns, "kayak").results] == ["the kayak is blue"]
        a.forget(ns, "kayak blue")
        assert b.recall(ns, "kayak").results == ()
        assert b.retrievable_memories(ns) == []
        # The writer applied its own events: its state is at the head without a tail.
        assert a.serving.position == a.head
        check(a)
        check(b)


def test_an_erasure_reaches_the_serving_state(tmp_path: Path) -> None:
    key = os.urandom(32)
    store = tmp_path / "s"
    alice, bob = NAMESPACES
    with (
        MemoryEngine.open(store, sync=False, master_key=key) as a,
        MemoryEngine.open(store, sync=False, master_key=key) as b,
    ):
        a.remember(alice, "alice keeps a parrot")
        a.remember(bob, "bob keeps a parrot")
        assert b.recall(alice, "parrot").results
        a.erase("t", "alice", "s")
        for engine in (a, b):
            assert engine.recall(alice, "parrot").results == ()
            assert engine.recall(bob, "parrot").results
            state = served(engine)
            assert alice not in state.namespaces()
            rows = state.retrievable_rows()
            assert rows and all(row["principal"] == "bob" for row in rows)
            assert state.erasures_applied == 1
            check(engine)


def test_a_fresh_process_restores_the_serving_state_from_the_recall_index(tmp_path: Path) -> None:
    store = tmp_path / "s"
    ns = NAMESPACES[0]
    with MemoryEngine.open(store, sync=False) as engine:
        engine.remember_many(ns, [f"note {i} on the harbour" for i in range(20)])
        engine.forget(ns, "note 3 on the harbour")
        written = engine.head
    with MemoryEngine.open(store, sync=False) as engine:
        assert engine.recall_index.stored_serving() is not None
        with engine.serving.lock:
            engine._restore_once(engine.head)
        assert engine.serving.position == written  # restored, not rebuilt from position 1
        engine.remember(ns, "note 99 on the harbour")  # tails nothing, applies inline
        check(engine)
        assert len(engine.retrievable_memories(ns)) == 20


def reads(state: ServingState) -> list[object]:
    """What readers get from ``state``, namespace by namespace."""
    found: list[object] = [state.position, state.digest(DOC_COLUMNS), state.count_active()]
    for namespace in NAMESPACES:
        parts = (namespace.tenant, namespace.principal, namespace.scope_id)
        found += [
            state.active_memories(*parts),
            state.changed_since(*parts, 0),
            state.forgotten_turns(*parts),
            state.session_turns(*parts),
            [state.same_key(*parts, s, p) for s in SUBJECTS for p in PREDICATES],
            state.vocabulary(*parts, "subject"),
        ]
    return found


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(step.filter(lambda a: a[0] not in ("reopen", "other")), min_size=1, max_size=8),
    st.integers(0, 100),
    st.booleans(),
)
def test_a_restored_state_receiving_events_equals_one_that_applied_them_all(
    steps: list[tuple[object, ...]], split: int, erase: bool
) -> None:
    """A state restored from a snapshot keeps its rows undecoded until touched: the events
    after the snapshot applied to it (the writer's inline apply, a tail) give the state that
    applied every event, by digest and by every read; its own snapshot, before any row was
    touched, is the snapshot it came from; an erasure reaches its undecoded rows."""
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "s"
        engine = MemoryEngine.open(store, sync=False)
        try:
            for action in steps:
                engine = run_step(engine, store, action)
            decode = engine.event_decoder()
            events = [
                (position, decode(topic, data, raw_id, version))
                for position, raw_id, version, topic, data in engine.read_records(0, 1_000_000)
                if topic in SERVING_TOPICS
            ]
        finally:
            engine.close()
    cut = split * len(events) // 100
    whole = ServingState()
    whole.apply(events)
    early = ServingState()
    early.apply(events[:cut])
    data = early.snapshot()
    restored = ServingState()
    restored.restore(data)
    assert restored.snapshot() == data  # nothing decoded, nothing lost
    if erase:  # before any row of the restored namespaces was decoded
        parts = (NAMESPACES[0].tenant, NAMESPACES[0].principal, NAMESPACES[0].scope_id)
        held = [row["memory_id"] for row in early.changed_since(*parts, 0)]
        restored.erase([namespace_ids(NAMESPACES[0])[0]])
        assert all(restored.row(memory_id) is None for memory_id in held)
        assert restored.snapshot() == early.snapshot(NAMESPACES[1].key().__eq__)
        whole = ServingState()
        whole.apply(events[:cut])
        whole.erase([namespace_ids(NAMESPACES[0])[0]])
        whole.apply(events[cut:])
    restored.apply(events[cut:])
    assert reads(restored) == reads(whole)
    again = ServingState()
    again.restore(restored.snapshot())
    assert reads(again) == reads(whole)


def test_served_rows_hold_no_object_the_garbage_collector_walks() -> None:
    """A remembered memory costs the cyclic collector nothing to walk once settled: its
    row's list columns are tuples of atoms and the row and its recall document leave the
    collector's tracking (so a full collection does not grow with the store); a copy of
    a row still gives its list columns as lists, as the DuckDB read model does."""
    ns = NAMESPACES[0]
    with tempfile.TemporaryDirectory() as folder, MemoryEngine.open(Path(folder)) as engine:
        engine.remember_many(ns, [f"alice keeps note {i} in the red box" for i in range(50)])
        assert engine.recall(ns, "note 7 red box", 3).results
        gc.collect()
        state = served(engine)
        rows = state.active_memories(ns.tenant, ns.principal, ns.scope_id, DOC_COLUMNS)
        assert len(rows) == 50
        assert not any(gc.is_tracked(row) for row in rows)
        _index, by_id = engine.recall_index.docs(ns, state.position)
        assert len(by_id) == 50 and not any(gc.is_tracked(doc) for doc in by_id.values())
        copy = state.active_memories(ns.tenant, ns.principal, ns.scope_id)[0]
        assert isinstance(copy["tags"], list) and isinstance(copy["candidate_ids"], list)
