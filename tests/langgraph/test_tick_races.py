"""Tick batches of the LangGraph store raced from two threads and from two processes on one
store (the race harness's check for this write surface, ``tests/langgraph/tick_races.py``):
every round, the two racers' gathers start together behind a barrier; afterwards every
answer and the state are those of some serial order of the racers' steps, and the ledger
holds exactly one current value per key (none for a deleted one), the one the store
answers."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

from memory_ledger.commands import MemoryEngine
from memory_ledger.replay.langgraph_store import LedgerStore
from tests.conftest import REPO_ROOT
from tests.langgraph.tick_races import (
    KEYS,
    PREFIX,
    TENANT,
    State,
    Tick,
    Value,
    explained,
    ledger_values,
    plan,
    run_tick,
)

ROUNDS = 40
MORE_ROUNDS = 20
"""At most this many further sets of ROUNDS, until the threads are seen to race."""


def check_round(
    engine: MemoryEngine,
    store: LedgerStore,
    before: State,
    ticks: list[Tick],
    answers: list[list[Value]],
) -> tuple[State, list[str]]:
    """The state after the round (as the store answers it) and what is wrong with it."""
    after: State = {}
    for key in KEYS:
        item = store.get(PREFIX, key)
        after[key] = None if item is None else dict(item.value)
    problems = []
    if not explained(before, ticks, answers, after):
        problems.append(f"round {ticks[0].round}: no serial order gives {answers} -> {after}")
    held = ledger_values(engine)
    for key in KEYS:
        want = [] if after[key] is None else [after[key]]
        if held[key] != want:
            problems.append(f"round {ticks[0].round}: ledger holds {held[key]} at {key}")
    return after, problems


def race_threads(engine: MemoryEngine, rounds: int) -> list[str]:
    """``rounds`` rounds of two threads, each with its own event loop and its own store over
    ``engine`` (two tick queues, two worker threads: their merged batches decide at the same
    time); what was wrong."""
    stores = [LedgerStore(engine, TENANT), LedgerStore(engine, TENANT)]
    barrier = threading.Barrier(2)
    ticks: dict[int, Tick] = {}
    answers: dict[int, list[Value]] = {}
    errors: list[BaseException] = []

    def racer(index: int) -> None:
        try:
            barrier.wait()
            answers[index] = asyncio.run(run_tick(stores[index], ticks[index]))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    state: State = dict.fromkeys(KEYS)
    problems: list[str] = []
    for round_ in range(rounds):
        ticks = {i: plan(1, i, round_) for i in (0, 1)}
        threads = [threading.Thread(target=racer, args=(i,)) for i in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        state, wrong = check_round(
            engine, stores[0], state, [ticks[0], ticks[1]], [answers[0], answers[1]]
        )
        problems += wrong
    for store in stores:
        store.close()
    return problems


def test_tick_batches_of_two_threads_race_to_a_serial_order(tmp_path: Path) -> None:
    # The rounds must have really raced (two decisions read the same state). On an idle
    # machine a round may run its two ticks one after the other, so further sets of rounds,
    # each on a fresh store, run until a conflict is seen; every round is checked all the same.
    conflicts = 0
    for attempt in range(1 + MORE_ROUNDS):
        with MemoryEngine.open(tmp_path / f"store-{attempt}") as engine:
            assert race_threads(engine, ROUNDS) == []
            conflicts += engine.decision_conflicts
        if conflicts:
            break
    assert conflicts > 0


def test_the_check_finds_forks_without_the_append_condition(tmp_path: Path) -> None:
    """The control: with the engine's append condition switched off, the same rounds leave
    two current values of a key in the ledger (further sets of rounds, each on a fresh
    store, until they do, as above)."""
    problems: list[str] = []
    for attempt in range(1 + MORE_ROUNDS):
        with MemoryEngine.open(tmp_path / f"store-{attempt}") as engine:
            engine.consistency_boundary = False
            problems += race_threads(engine, ROUNDS)
        if any("ledger holds" in problem for problem in problems):
            break
    assert any("ledger holds" in problem for problem in problems), problems


def test_tick_batches_of_two_processes_race_to_a_serial_order(tmp_path: Path) -> None:
    """Two processes, each with its own engine and store on one store folder: each runs its
    round's gather when the parent says ``go`` to both (the barrier), and says its
    answers."""
    folder = tmp_path / "store"
    with MemoryEngine.open(folder):
        pass
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.langgraph.tick_race_child", str(folder), str(i), "2"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
        )
        for i in (0, 1)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            assert json.loads(child.stdout.readline())["ready"] == child.pid
        state: State = dict.fromkeys(KEYS)
        problems: list[str] = []
        with MemoryEngine.open(folder) as auditor:
            store = LedgerStore(auditor, TENANT)
            for round_ in range(ROUNDS // 2):
                for child in children:
                    assert child.stdin is not None
                    child.stdin.write(f"go {round_}\n")
                for child in children:
                    assert child.stdin is not None
                    child.stdin.flush()
                said = []
                for child in children:
                    assert child.stdout is not None
                    said.append(json.loads(child.stdout.readline()))
                assert [s["round"] for s in said] == [round_, round_]
                ticks = [plan(2, i, round_) for i in (0, 1)]
                state, wrong = check_round(
                    auditor, store, state, ticks, [s["answers"] for s in said]
                )
                problems += wrong
            store.close()
    finally:
        for child in children:
            assert child.stdin is not None
            child.stdin.close()
        for child in children:
            child.wait(timeout=60)
    assert problems == []
    assert [child.returncode for child in children] == [0, 0]
