"""Decisions about one (subject, predicate) key that really race (issue 13, "done when").

Each round, two sessions of one namespace decide about the key ``(Alice, lives_in)`` at the
same time: two new values (two ``finish()``), two ``correct`` commands of the current value,
or a ``correct`` racing a ``finish()`` that brings a new value. After EVERY round exactly one
value of the key is active, read from the ledger (every value ever activated under the key,
each folded from its own history) and, at the end, from the projection, which also equals a
rebuild.

- threads: both ``finish()`` calls are released by a barrier; in the forced variant a second
  barrier holds both decisions at the fault point ``decision.planned`` (ledger read and
  events planned, nothing appended) and releases them together, so every round one append
  is refused by its append condition and that command re-reads and re-decides;
- two processes on one store (``tests/race_child.py``), the same forced overlap driven over
  their stdin;
- the control: with the append condition switched off the forced race leaves two values
  active, so these rounds do detect the bug they guard against.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger import faults
from memory_ledger.projections import table_digests
from tests.conftest import REPO_ROOT
from tests.projections.test_projections import fresh_digests
from tests.race_child import active_values, count_refusals, prepare, round_subject

ROUNDS = 20
TIMEOUT = 60.0
NS = Namespace("acme", "alice", "races")
VARIANTS = {
    "two first values": ("candidate", "candidate"),
    "two new values": ("candidate", "candidate"),
    "two corrections": ("correct", "correct"),
    "a correction racing a finish": ("correct", "candidate"),
}
"""Each round's two decisions. "first values" uses a new key every round (no current value,
so the two writers share no stream: only the key's append condition orders them); the others
race on the key (Alice, lives_in), whose current value both also touch."""


def seed(engine: MemoryEngine) -> None:
    prepare(engine, NS, "seed", "candidate", "Lisbon").finish()
    assert len(active_values(engine, NS)) == 1


def projection_agrees(engine: MemoryEngine) -> None:
    engine.catch_up()
    rows = engine.projections.conn.execute(
        "SELECT memory_id FROM canonical_memory WHERE tenant = ? AND principal = ? "
        "AND scope_id = ? AND lower(subject) = 'alice' AND lower(predicate) = 'lives_in' "
        "AND status IN ('active', 'conflicted')",
        [NS.tenant, NS.principal, NS.scope_id],
    ).fetchall()
    assert [r[0] for r in rows] == [str(m) for m in active_values(engine, NS)]
    assert table_digests(engine.projections.conn) == fresh_digests(engine)


class DecisionBarrier:
    """Holds the first decision of each of two threads at ``decision.planned`` until both
    have planned (re-decisions after a refusal pass straight through)."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2, timeout=TIMEOUT)
        self.local = threading.local()

    def __call__(self) -> None:
        if getattr(self.local, "waited", False):
            return
        self.local.waited = True
        self.barrier.wait()


def race_in_threads(engine: MemoryEngine, number: int, variant: str, forced: bool) -> str:
    """One round in two threads; returns the round's subject."""
    subject = round_subject(variant == "two first values", number)
    sessions = [
        prepare(engine, NS, f"t{c}-r{number}", mode, f"City{number}-{c}", subject)
        for c, mode in enumerate(VARIANTS[variant])
    ]
    start = threading.Barrier(2, timeout=TIMEOUT)
    hold = DecisionBarrier()
    if forced:
        faults.FAULTS["decision.planned"] = hold
    errors: list[BaseException] = []

    def finish(index: int) -> None:
        try:
            start.wait()
            sessions[index].finish()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=finish, args=(i,)) for i in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT)
    finally:
        faults.FAULTS.clear()
    assert not errors, errors
    assert all(s.state.report is not None for s in sessions)
    return subject


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("forced", [True, False], ids=["decisions-held", "released"])
def test_threads_leave_exactly_one_active_value_after_every_round(
    tmp_path: Path, variant: str, forced: bool
) -> None:
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        seed(engine)
        refusals = count_refusals(engine)
        for number in range(ROUNDS):
            subject = race_in_threads(engine, number, variant, forced)
            active = active_values(engine, NS, subject)
            assert len(active) == 1, f"round {number}: {len(active)} active values"
        if forced:  # every round, one of the two decisions was overtaken and re-decided
            assert refusals() >= ROUNDS
        projection_agrees(engine)


def test_without_the_append_condition_the_held_race_leaves_two_values(tmp_path: Path) -> None:
    """The control: the same held race with the condition switched off breaks the rule."""
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        seed(engine)
        engine.consistency_boundary = False
        subject = race_in_threads(engine, 0, "two first values", forced=True)
        assert len(active_values(engine, NS, subject)) == 2


# Two processes ------------------------------------------------------------------------------


class RaceChild:
    """``python -m tests.race_child ARGS`` with its JSON lines read on a thread."""

    def __init__(self, **arguments: Any) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.race_child", json.dumps(arguments)],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, False), daemon=True).start()

    def _pump(self, stream: Any, is_stdout: bool) -> None:
        for line in stream:
            (self._lines.put if is_stdout else self._stderr.append)(line)
        if is_stdout:
            self._lines.put(None)

    def next(self) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=TIMEOUT)
        except queue.Empty:
            pytest.fail(f"child silent for {TIMEOUT} s:\n{''.join(self._stderr)}")
        if line is None:
            self.proc.wait(timeout=TIMEOUT)
            pytest.fail(f"child ended ({self.proc.returncode}):\n{''.join(self._stderr)}")
        return cast(dict[str, Any], json.loads(line))

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def children() -> Iterator[list[RaceChild]]:
    started: list[RaceChild] = []
    yield started
    for child in started:
        child.stop()


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_two_processes_leave_exactly_one_active_value_after_every_round(
    tmp_path: Path, children: list[RaceChild], variant: str
) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store, sync=False) as engine:
        seed(engine)
    namespace = [NS.tenant, NS.principal, NS.scope_id]
    first = variant == "two first values"
    racers = [
        RaceChild(
            store=str(store), namespace=namespace, child=c, rounds=ROUNDS, mode=mode, first=first
        )
        for c, mode in enumerate(VARIANTS[variant])
    ]
    children.extend(racers)
    for racer in racers:
        assert "ready" in racer.next()
    retries = 0
    with MemoryEngine.open(store, sync=False) as engine:
        for number in range(ROUNDS):
            for racer in racers:
                racer.send("round")
            for racer in racers:  # both read the ledger and planned; neither appended
                assert racer.next() == {"planned": number}
            for racer in racers:
                racer.send("go")
            finished = [racer.next() for racer in racers]
            assert [f["finished"] for f in finished] == [number, number]
            retries += sum(f["retries"] for f in finished)
            active = active_values(engine, NS, round_subject(first, number))
            assert len(active) == 1, f"round {number}: {len(active)} active values"
        for racer in racers:
            assert racer.proc.stdin is not None
            racer.proc.stdin.close()
            assert racer.proc.wait(timeout=TIMEOUT) == 0, "".join(racer._stderr)
        assert retries >= ROUNDS  # each round one process was overtaken and re-decided
        projection_agrees(engine)
