"""The race harness's fast profile (issue 25 item 3) and its sequential model in step with
the engine (a hypothesis state machine).

Every deciding command (keyed and plain ``remember``, ``correct`` by id and by words,
``forget``, ``pin``, ``forget_all``) raced from 4 threads of one engine, 4 processes on one
store and 3 hosts of one PostgreSQL ledger; after every round the ledger holds at most one
current value per key and per correction chain, every acknowledged effect, and a state and
answers that some serial order of the calls gives (``benchmarks.race_harness``). The long
profile is ``python -m benchmarks races --rounds 340 --ops 20``.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from uuid import UUID

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from benchmarks.race_harness import (
    CITIES,
    DRINKS,
    NAMESPACE,
    Call,
    Model,
    Op,
    Workers,
    check_round,
    initial_model,
    linearizable,
    race,
    run_op,
    run_threads_round,
)
from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.errors import SupersededTargetError


def test_threads_of_one_engine(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "store") as engine:
        figures = race(
            "threads",
            engine,
            lambda ops: run_threads_round(engine, NAMESPACE, ops, 4),
            rounds=25,
            ops_per_round=8,
            seed=1,
        )
        assert figures.violations == []
        assert figures.commands == 200
        assert engine.decision_conflicts > 0  # the rounds really raced


def test_processes_on_one_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store):
        pass
    workers = Workers(store, 4)
    try:
        with MemoryEngine.open(store) as auditor:
            figures = race(
                "processes", auditor, workers.run_round, rounds=8, ops_per_round=8, seed=2
            )
    finally:
        workers.close()
    assert figures.violations == []
    assert figures.commands == 64


def test_hosts_on_one_postgres_ledger(pg_url: str, tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "auditor", ledger=pg_url) as auditor:
        workers = Workers(tmp_path, 3, pg_url)
        try:
            figures = race("hosts", auditor, workers.run_round, rounds=5, ops_per_round=6, seed=3)
        finally:
            workers.close()
    assert figures.violations == []
    assert figures.commands == 30


def test_the_harness_detects_the_race_it_guards_against(tmp_path: Path) -> None:
    """The control: with the append condition switched off, the same rounds find forks."""
    with MemoryEngine.open(tmp_path / "store") as engine:
        engine.consistency_boundary = False
        figures = race(
            "unguarded",
            engine,
            lambda ops: run_threads_round(engine, NAMESPACE, ops, 4),
            rounds=40,
            ops_per_round=8,
            seed=1,
        )
    assert figures.violations, "an unguarded engine should fork under these races"


def test_four_threads_correcting_one_target_leave_one_value(tmp_path: Path) -> None:
    """The issue's reproduction. By id: one correction applies, the three others are refused
    naming the winner (``target_superseded``); by words: each decides what the words name
    inside its decision, so the four form one chain. Either way one value is current."""
    with MemoryEngine.open(tmp_path / "store") as engine:
        engine.remember(NAMESPACE, "Alice lives in City0.")
        for round_ in range(10):
            current = [hit.memory_id for hit in engine.recall(NAMESPACE, "Alice lives", k=10)]
            assert len(current) == 1
            barrier = threading.Barrier(4)
            answers: list[tuple[str, UUID | None]] = []
            by_id = round_ % 2 == 0

            def correct(
                words: str,
                target: str | None,
                barrier: threading.Barrier,
                answers: list[tuple[str, UUID | None]],
            ) -> None:
                barrier.wait()
                try:
                    result = engine.correct(NAMESPACE, words, target=target)
                    answers.append(("ok", result.memory_id))
                except SupersededTargetError as refused:
                    answers.append(("superseded", refused.current))

            target = current[0] if by_id else None
            threads = [
                threading.Thread(
                    target=correct,
                    args=(f"Alice lives in City{round_}{i}x.", target, barrier, answers),
                )
                for i in range(4)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            now = [hit.memory_id for hit in engine.recall(NAMESPACE, "Alice lives", k=10)]
            assert len(now) == 1
            winners = [str(memory) for kind, memory in answers if kind == "ok"]
            if by_id:
                assert winners == [now[0]]
                assert [str(m) for kind, m in answers if kind == "superseded"] == [now[0]] * 3
            else:
                assert len(winners) == 4 and now[0] in winners


def test_linearizability_search_refuses_an_impossible_history() -> None:
    """A check that accepts everything proves nothing: two overlapping corrections that both
    claim the same head cannot both have happened."""
    model = Model(NAMESPACE)
    start = run_op  # keep the import used; the search needs no engine
    assert start is not None
    head = UUID(int=1)
    from benchmarks.race_harness import Memory

    model.memories[head] = Memory("Alice lives in Lisbon.", "active", ("alice", "lives in"))
    calls = [
        Call(
            Op("correct_id", "Alice", "Alice lives in A.", str(head)), 0.0, 2.0, ("ok", str(head))
        ),
        Call(
            Op("correct_id", "Alice", "Alice lives in B.", str(head)), 1.0, 3.0, ("ok", str(head))
        ),
    ]
    assert not linearizable(model, calls, set())


@pytest.mark.parametrize(
    ("before", "remembered", "expected"),
    [
        # X superseded by another value of its key, then [Remember X, Forget(X)]: the remember
        # makes X current again (superseding Porto), the forget forgets it (issue 34 item 7).
        ("superseded", "Alice lives in Lisbon.", ("ok", "x")),
        ("forgotten", "Alice lives in Lisbon.", ("ok", "x")),
        ("active", "Alice lives in Lisbon.", ("ok", "x")),
        # The remember supersedes X (another value of X's key): the forget is refused, whole.
        ("active", "Alice lives in Faro.", ("error", "target_superseded")),
        ("superseded", "Alice lives in Faro.", ("error", "target_superseded")),
        ("forgotten", "Alice lives in Faro.", ("error", "unknown_memory")),
    ],
)
def test_a_batch_is_its_operations_in_order_for_engine_and_model(
    tmp_path: Path, before: str, remembered: str, expected: tuple[str, str]
) -> None:
    """``[Remember(...), Forget(target=X)]`` answers and leaves what the two commands one by
    one would, whatever X was before the batch; the serial model says the same."""
    with MemoryEngine.open(tmp_path / "store") as engine:
        x = run_op(engine, NAMESPACE, Op("remember_keyed", "Alice", "Alice lives in Lisbon."))
        assert x.answer == ("ok", None)
        x_id = str(initial_model(engine, NAMESPACE).retrievable().pop())
        if before == "superseded":
            run_op(engine, NAMESPACE, Op("remember_keyed", "Alice", "Alice lives in Porto."))
        elif before == "forgotten":
            run_op(engine, NAMESPACE, Op("forget", "", target=x_id))
        model = initial_model(engine, NAMESPACE)
        op = Op("batch", "Alice", remembered, x_id)
        want = (expected[0], x_id if expected[1] == "x" else expected[1])
        assert model.apply(op) == want
        assert run_op(engine, NAMESPACE, op).answer == want
        assert initial_model(engine, NAMESPACE).retrievable() == model.retrievable()
        assert check_round(engine, NAMESPACE, model, []) == []


# The sequential model in step with the engine ---------------------------------------------


class ModelInStep(RuleBasedStateMachine):
    """Each rule runs one command on the engine and on :class:`Model`; their answers and
    the retrievable memories agree after every step."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(__import__("tempfile").mkdtemp(prefix="race-model-"))
        self.engine = MemoryEngine.open(self.folder / "store")
        self.counter = 0

    @initialize()
    def start(self) -> None:
        self.model = initial_model(self.engine, NAMESPACE)

    def _targets(self) -> list[UUID]:
        """The memories a by-id rule may name, in the order they were created: memory ids
        are keyed digests (a random key per store), so sorting them would order them
        differently in every run and hypothesis could not replay a draw."""
        return list(self.model.memories)

    def _step(self, op: Op) -> None:
        call = run_op(self.engine, NAMESPACE, op)
        expected = self.model.apply(op)
        assert call.answer == expected, (op, call.answer, expected)
        self.counter += 1

    @rule(subject=st.sampled_from(["Alice", "Bob"]), city=st.sampled_from(CITIES))
    def remember_keyed(self, subject: str, city: str) -> None:
        self._step(Op("remember_keyed", subject, f"{subject} lives in {city}."))

    @rule(drink=st.sampled_from(DRINKS))
    def remember_plain(self, drink: str) -> None:
        self._step(Op("remember_plain", "Dave", f"Dave likes {drink}."))

    @rule(data=st.data(), subject=st.sampled_from(["Alice", "Bob"]))
    def correct_id(self, data: st.DataObject, subject: str) -> None:
        if self.model.memories:
            target = data.draw(st.sampled_from(self._targets()))
            self._step(
                Op("correct_id", subject, f"{subject} lives in T{self.counter}.", str(target))
            )

    @rule()
    def correct_words(self) -> None:
        self._step(Op("correct_words", "Carol", f"Carol works at Shop{self.counter}."))

    @rule(data=st.data(), kind=st.sampled_from(["forget", "pin"]))
    def by_id(self, data: st.DataObject, kind: str) -> None:
        if self.model.memories:
            target = data.draw(st.sampled_from(self._targets()))
            self._step(Op(kind, "", target=str(target)))

    @rule(data=st.data(), subject=st.sampled_from(["Alice", "Bob"]), city=st.sampled_from(CITIES))
    def batch(self, data: st.DataObject, subject: str, city: str) -> None:
        if self.model.memories:
            target = data.draw(st.sampled_from(self._targets()))
            self._step(Op("batch", subject, f"{subject} lives in {city}.", str(target)))

    @rule()
    def forget_all(self) -> None:
        self._step(Op("forget_all", ""))

    @invariant()
    def same_current_memories(self) -> None:
        if hasattr(self, "model"):
            actual = initial_model(self.engine, NAMESPACE).retrievable()
            assert actual == self.model.retrievable()
            assert check_round(self.engine, NAMESPACE, self.model, []) == []

    def teardown(self) -> None:
        self.engine.close()


ModelInStep.TestCase.settings = settings(
    max_examples=12,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestModelInStep = ModelInStep.TestCase


@pytest.mark.parametrize("seed", [7])
def test_rounds_are_reproducible_plans(seed: int) -> None:
    from benchmarks.race_harness import plan_round

    first = plan_round(random.Random(seed), {}, 8, 0)
    second = plan_round(random.Random(seed), {}, 8, 0)
    assert first == second and len(first) == 8
