"""What was current at a point without a fold (`replay.audit.moments`) answers as the fold does.

The fold (`as_of`) is the reference: on random histories (supersessions by key, corrections,
forgets, a namespace forgotten whole, valid time out of arrival order, an erasure) the
memory history's answer at every sampled point (positions and recorded times) equals the
fold's, memory for memory: what was current and with which statement, and each memory's
status then.
"""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.commands import MemoryEngine, RecordedExtractor
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.ledger.ids import Namespace, normalize_statement
from memory_ledger.replay import PointError, PositionOutOfRangeError, as_of, filter_events
from memory_ledger.replay.audit.moments import changes_between, moment_at
from tests.conftest import make_item

KEPT = Namespace("acme", "alice", "assistant")
ERASED = Namespace("acme", "bob", "assistant")
SUBJECTS = ("Alice", "Bob")
PREDICATES = ("lives_in", "works_at")
VALUES = ("Lisbon", "Porto", "Berlin", "Oslo")
DAY0 = datetime(2025, 1, 1, tzinfo=UTC)

namespaces = st.sampled_from((KEPT, ERASED))
days = st.one_of(st.none(), st.integers(0, 60))
told = st.tuples(
    st.just("tell"),
    namespaces,
    st.sampled_from(SUBJECTS),
    st.sampled_from(PREDICATES),
    st.sampled_from(VALUES),
    days,
)
remembered = st.tuples(
    st.just("remember"),
    namespaces,
    st.sampled_from(SUBJECTS),
    st.sampled_from(PREDICATES),
    st.sampled_from(VALUES),
    days,
)
corrected = st.tuples(st.just("correct"), namespaces, st.integers(0, 50), st.sampled_from(VALUES))
forgotten = st.tuples(st.just("forget"), namespaces, st.integers(0, 50))
forgotten_all = st.tuples(st.just("forget_all"), namespaces)
erased = st.tuples(st.just("erase"))
histories = st.lists(
    st.one_of(told, remembered, corrected, forgotten, forgotten_all, erased),
    min_size=1,
    max_size=12,
)


def _statement(subject: str, predicate: str, value: str) -> str:
    return f"{subject} {predicate.replace('_', ' ')} {value}."


def _apply(
    engine: MemoryEngine, step: tuple[Any, ...], ids: dict[Namespace, list[str]], n: int
) -> None:
    """Run one step through the engine's public commands; a refused command (a forgotten or
    superseded target, nothing to forget) is part of the history too."""
    kind = step[0]
    try:
        if kind == "tell":
            _, ns, subject, predicate, value, day = step
            extractor = RecordedExtractor()
            statement = _statement(subject, predicate, value)
            extractor.provide(
                1, [make_item(statement, subject=subject, predicate=predicate, value=value)]
            )
            when = DAY0 + timedelta(days=day) if day is not None else None
            with engine.session(ns, f"s{n}", extractor=extractor) as session:
                session.observe_final_transcript(1, f"user: {statement}", when)
                session.finish()
            ids[ns].append(
                str(engine.keyring.digests.memory_id(ns, normalize_statement(statement)))
            )
        elif kind == "remember":
            _, ns, subject, predicate, value, day = step
            result = engine.remember(
                ns,
                _statement(subject, predicate, value),
                subject=subject,
                predicate=predicate,
                value=value,
                occurred_at=DAY0 + timedelta(days=day) if day is not None else None,
            )
            ids[ns].append(str(result.memory_id))
        elif kind == "correct":
            _, ns, pick, value = step
            if ids[ns]:
                target = ids[ns][pick % len(ids[ns])]
                result = engine.correct(ns, f"Alice lives in {value} now.", target=target)
                ids[ns].append(str(result.memory_id))
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


Reference = tuple[dict[Namespace, dict[str, str]], dict[str, str], dict[str, str], int]


def _reference(engine: MemoryEngine, at: int | datetime) -> Reference:
    """The fold's answer at ``at``: per namespace {id: statement} of what was current,
    {id: status} and {id: statement} of every memory that existed, the position folded."""
    with as_of(engine, at) as past:
        current = {
            ns: {m["memory_id"]: m["statement"] for m in past.memories(ns)} for ns in (KEPT, ERASED)
        }
        rows = past.memories(include_history=True)
        statuses = {m["memory_id"]: m["status"] for m in rows}
        statements = {m["memory_id"]: m["statement"] for m in rows}
        return current, statuses, statements, past.position


def _check(engine: MemoryEngine, at: int | datetime, known: list[str]) -> Reference:
    reference = current, statuses, statements, position = _reference(engine, at)
    with moment_at(engine, at) as moment:
        assert moment.position == position
        assert not moment.folded
        for ns in (KEPT, ERASED):
            assert moment.current(ns) == current[ns], (at, ns)
            assert moment.count(ns) == len(current[ns])
        asked = sorted({*known, *statuses})
        assert moment.statuses(asked) == statuses
        assert moment.statements(asked) == statements
    return reference


def _check_change(engine: MemoryEngine, a: Reference, b: Reference) -> None:
    """``changes_between`` two positions equals the difference of the fold's current sets."""
    with moment_at(engine, a[3]) as at_a, moment_at(engine, b[3]) as at_b:
        for ns in (KEPT, ERASED):
            change = changes_between(at_a, at_b, ns)
            assert change.gone == sorted(a[0][ns].keys() - b[0][ns].keys())
            assert change.new == sorted(b[0][ns].keys() - a[0][ns].keys())
            assert (change.current_a, change.current_b) == (len(a[0][ns]), len(b[0][ns]))
            assert change.kept == len(a[0][ns].keys() & b[0][ns].keys())


@settings(
    max_examples=int(os.environ.get("MOMENTS_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(history=histories, picks=st.lists(st.integers(0, 10_000), min_size=1, max_size=5))
def test_the_memory_history_answers_as_the_fold_at_every_point(
    history: list[tuple[Any, ...]], picks: list[int]
) -> None:
    with tempfile.TemporaryDirectory(prefix="moments_") as folder:
        store = Path(folder) / "store"
        with MemoryEngine.open(store, master_key=b"k" * 32, sync=False) as engine:
            ids: dict[Namespace, list[str]] = {KEPT: [], ERASED: []}
            for n, step in enumerate(history):
                _apply(engine, step, ids, n)
            head = engine.head
            known = [*ids[KEPT], *ids[ERASED]]
            positions = sorted({0, head, *(p % (head + 1) for p in picks)})
            answers = [_check(engine, position, known) for position in positions]
            _check_change(engine, answers[-1], answers[0])
            _check_change(engine, answers[len(answers) // 2], answers[-1])
            times = [event.recorded_at for _, event in filter_events(engine)]
            for p in picks[:2]:
                if times:
                    _check(engine, times[p % len(times)], known)
            _check(engine, DAY0 - timedelta(days=1), known)  # before anything was recorded


def test_occurred_time_is_answered_by_the_fold(tmp_path: Path) -> None:
    """Valid time reorders facts (not a ledger prefix): an occurred-time moment folds, and
    answers as ``as_of(..., occurred=True)``."""
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        for n, (value, day) in enumerate((("Berlin", 40), ("Lisbon", 0), ("Porto", 20))):
            _apply(engine, ("tell", KEPT, "Alice", "lives_in", value, day), {KEPT: []}, n)
        when = DAY0 + timedelta(days=30)
        with (
            moment_at(engine, when, occurred=True) as moment,
            as_of(engine, when, occurred=True) as past,
        ):
            assert moment.folded and moment.mode == "occurred"
            expected = {m["memory_id"]: m["statement"] for m in past.memories(KEPT)}
            assert moment.current(KEPT) == expected
            assert list(expected.values()) == ["Alice lives in Porto."]


def test_moment_errors_are_those_of_as_of(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        engine.remember(KEPT, "Alice lives in Lisbon.")
        with pytest.raises(PositionOutOfRangeError):
            moment_at(engine, engine.head + 1)
        with pytest.raises(PositionOutOfRangeError):
            moment_at(engine, -1)
        with pytest.raises(PointError):
            moment_at(engine, 1, occurred=True)
        with pytest.raises(PointError):
            moment_at(engine, "yesterday-ish")
        with pytest.raises(PointError):
            moment_at(engine, datetime(2025, 1, 1))  # noqa: DTZ001 (naive on purpose)
