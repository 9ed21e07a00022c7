"""Crash safety: SIGKILL a child replaying a session script, then check what survived.

A child interpreter (``tests/crash_child.py``, started with ``subprocess.Popen`` and never
forked from a process with an LMDB environment open) replays LoCoMo conv-26 command by command
with durable sync ON and acknowledges each command on stdout as soon as it returns. The parent
SIGKILLs it at a chosen point, reopens the store in-process and checks the design's rules:

1. every acknowledged command is durable: its position exists and holds the expected event;
2. no command is partly present: each command's events are all there (one LMDB transaction),
   and the log is gapless with an intact hash chain;
3. a turn whose evidence is present but whose extraction is not is reported pending and
   completes on retry;
4. projection catch-up reaches the head and counts every activated memory stream;
5. replaying the whole script again finishes with the state of an uninterrupted run, and no
   session is ever reconciled twice.

conv-26 is crashed as a chain, in script order, on ONE store: early, right after a finish,
inside an extraction's LMDB write transaction (the child dies holding the write lock), inside
the extractor (evidence durable, outcome not), inside a finish's write transaction, in the
middle, and at a seeded random point. After each kill the next child replays the whole script
again into the same store (skipping what is recorded), so every resume is a re-run after a
crash; a copy of the store taken right after each kill is checked by its own test (rules 1-4),
and the final re-run in-process is checked against an uninterrupted run (rule 5), which
another child makes in parallel into a fresh store. A chain replays the script about once in
all, where one fresh store per kill point would replay it once per point.

A synthetic script with rejections and reinforcements is killed at a seeded random point, and
two tests kill the child inside a projection catch-up (between pages, and inside a page's
DuckDB transaction) and compare the caught-up projection with one rebuilt from scratch.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any, cast
from uuid import UUID

import pytest

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.extraction import RecordedExtractor
from memory_ledger.ledger.events import (
    CandidateExtracted,
    CandidateRejected,
    ExtractionCompleted,
    LedgerEvent,
    MemoryActivated,
    MemoryConflictMarked,
    MemoryForgotten,
    MemoryPinned,
    MemoryReinforced,
    MemorySuperseded,
    SessionOpened,
    SessionReconciled,
    SessionSealed,
    TranscriptObserved,
)
from memory_ledger.ledger.lmdb import GENESIS_HASH
from memory_ledger.projections.digest import table_digests
from memory_ledger.projections.runner import PROJECTION_VERSION, ProjectionRunner
from memory_ledger.projections.store import ProjectionStore
from memory_ledger.replay.scripts.locomo import (
    convert_sample,
    encode_jsonl,
    find_sample,
)
from memory_ledger.replay.scripts.locomo import load_samples as load_locomo_samples
from memory_ledger.replay.scripts.script import (
    FinishStep,
    OpenStep,
    Step,
    TurnStep,
    parse_script,
    run_script,
)
from tests.conftest import locomo_path

REPO_ROOT = Path(__file__).resolve().parents[2]
SEED = 20240526
CONV_26_ACTIVE = 184
"""Active memories after replaying LoCoMo conv-26 (one per observation fact, no duplicates)."""
PAUSE_MS = "0.5"
"""Sleep between the child's commands, so that a kill lands in the middle of the run."""
MESSAGE_TIMEOUT = 120.0
RECOVERY_SYNC = False
"""The parent's own writes after a kill need no fsync: only the child's durability is tested."""

RECONCILIATION_EVENTS = (
    MemoryActivated,
    MemoryReinforced,
    MemorySuperseded,
    MemoryConflictMarked,
    MemoryPinned,
    MemoryForgotten,
)
"""Memory-stream events ``finish()`` writes between SessionSealed and SessionReconciled."""
COMMAND_KINDS = ("open", "evidence", "extraction", "finish")
EXPECTED_EVENT = {
    "open": SessionOpened,
    "evidence": TranscriptObserved,
    "extraction": ExtractionCompleted,
    "finish": SessionReconciled,
}

Command = tuple[str, str, int | None]
"""``(kind, session, turn)`` of one command, as the child acknowledges it."""


# Scripts ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Script:
    """A session script: the parsed steps and the JSON Lines file the child reads."""

    name: str
    path: Path
    steps: list[tuple[int, Step]]
    real_conv_26: bool

    @cached_property
    def turns(self) -> dict[tuple[str, int], TurnStep]:
        return {(s.session, s.turn): s for _, s in self.steps if isinstance(s, TurnStep)}

    @cached_property
    def sessions(self) -> list[str]:
        return [s.session for _, s in self.steps if isinstance(s, OpenStep)]

    @cached_property
    def commands(self) -> list[Command]:
        """Every command of an uninterrupted run, in order."""
        result: list[Command] = []
        for _, step in self.steps:
            if isinstance(step, OpenStep):
                result.append(("open", step.session, None))
            elif isinstance(step, TurnStep):
                result.append(("evidence", step.session, step.turn))
                result.append(("extraction", step.session, step.turn))
            elif isinstance(step, FinishStep):
                result.append(("finish", step.session, None))
        return result

    @cached_property
    def command_index(self) -> dict[Command, int]:
        return {command: index for index, command in enumerate(self.commands)}

    def index_of(self, ack: dict[str, Any]) -> int:
        """Index in :attr:`commands` of an acknowledged command."""
        return self.command_index[(ack["kind"], ack["session"], ack.get("turn"))]

    def items_of(self, session: str) -> int:
        return sum(len(t.extracted) for (s, _), t in self.turns.items() if s == session)


def _fact(subject: str, statement: str, evidence: list[str], **overrides: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "kind": "semantic",
        "subject": subject,
        "predicate": None,
        "value": None,
        "statement": statement,
        "source": "fact",
        "scope": "user",
        "reason": "synthetic observation",
        "importance": 0.8,
        "confidence": 0.9,
        "tags": [],
        "supersedes": None,
        "conflicts_with": [],
        "evidence": evidence,
    }
    item.update(overrides)
    return item


def synthetic_steps(seed: int, sessions: int = 19) -> list[dict[str, Any]]:
    """A script shaped like a converted LoCoMo conversation (19 sessions, ~420 turns).

    Besides plain facts it holds exact normalized duplicates (within and across sessions:
    MemoryReinforced) and invalid items (CandidateRejected), which conv-26 has none of.
    """
    rng = random.Random(seed)
    principal = "synthetic-26"
    namespace = {"tenant": "locomo", "principal": principal, "scope_id": "conversation"}
    speakers = ("Caroline", "Melanie")
    said: list[str] = []
    steps: list[dict[str, Any]] = []
    start = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    for number in range(1, sessions + 1):
        session = f"{principal}/session_{number}"
        occurred_at = (start + timedelta(days=9 * number)).strftime("%Y-%m-%dT%H:%M:%SZ")
        steps.append({"op": "open", "session": session, "namespace": dict(namespace)})
        for turn in range(1, rng.randint(15, 30) + 1):
            speaker = speakers[turn % 2]
            dia_id = f"D{number}:{turn}"
            items: list[dict[str, Any]] = []
            for _ in range(rng.choices((0, 1, 2, 3), weights=(60, 35, 4, 1))[0]):
                statement = f"{speaker} mentioned topic {rng.randrange(10**6)} in session {number}."
                items.append(_fact(speaker, statement, [dia_id]))
                said.append(statement)
            if said and rng.random() < 0.08:  # an exact normalized duplicate: reinforces
                again = rng.choice(said).upper().rstrip(".") + "!"
                items.append(_fact(speaker, again, [dia_id], importance=0.95))
            if rng.random() < 0.06:  # fails validation: rejected
                items.append(_fact(speaker, "A weak guess.", [dia_id], importance=0.3))
            steps.append(
                {
                    "op": "turn",
                    "session": session,
                    "turn": turn,
                    "occurred_at": occurred_at,
                    "transcript": f"{speaker}: synthetic line {number}.{turn}",
                    "extracted": items,
                }
            )
        steps.append({"op": "finish", "session": session})
    return steps


def _write_script(directory: Path, name: str, steps: list[dict[str, Any]], real: bool) -> Script:
    path = directory / f"{name}.jsonl"
    path.write_bytes(encode_jsonl(steps))
    parsed = parse_script(path.read_bytes().splitlines())
    return Script(name=name, path=path, steps=parsed, real_conv_26=real)


@pytest.fixture(scope="module")
def conv26(tmp_path_factory: pytest.TempPathFactory) -> Script:
    """LoCoMo conv-26 (``tests.conftest.locomo_path``), or a synthetic stand-in without it."""
    directory = tmp_path_factory.mktemp("scripts")
    data = locomo_path()
    if data is not None:
        converted = convert_sample(find_sample(load_locomo_samples(data), "conv-26"))
        return _write_script(directory, "conv-26", converted.steps, real=True)
    return _write_script(directory, "synthetic-26", synthetic_steps(SEED), real=False)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Script:
    """A smaller synthetic script (5 sessions) with rejections and reinforcements."""
    steps = synthetic_steps(SEED + 1, sessions=5)
    return _write_script(tmp_path_factory.mktemp("scripts"), "synthetic", steps, real=False)


# The child ----------------------------------------------------------------------------------


class Child:
    """``python -m tests.crash_child`` with its messages read on a thread."""

    def __init__(self, store: Path, script: Script, *options: str, pause_ms: str = PAUSE_MS):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        env["PYTHONUNBUFFERED"] = "1"
        env["CRASH_CHILD_PAUSE_MS"] = pause_ms
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.crash_child",
                "--store",
                str(store),
                "--script",
                str(script.path),
                *options,
            ],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.messages: list[dict[str, Any]] = []
        self.acks: list[dict[str, Any]] = []
        """Acknowledged commands, in the order they returned."""
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        self._eof = False
        self.killed = False
        threading.Thread(target=self._pump, args=(self.proc.stdout, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, False), daemon=True).start()

    def _pump(self, stream: Any, is_stdout: bool) -> None:
        for line in stream:
            if is_stdout:
                self._lines.put(line)
            else:
                self._stderr.append(line)
        if is_stdout:
            self._lines.put(None)

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def _next(self) -> dict[str, Any] | None:
        """The next complete message, or None at the end of the output."""
        while not self._eof:
            try:
                line = self._lines.get(timeout=MESSAGE_TIMEOUT)
            except queue.Empty:
                self.stop()
                pytest.fail(f"child silent for {MESSAGE_TIMEOUT} s; stderr:\n{self.stderr}")
            if line is None:
                self._eof = True
            elif line.endswith("\n"):  # a line cut short by the kill was never acknowledged
                message = cast(dict[str, Any], json.loads(line))
                self.messages.append(message)
                if message["kind"] in COMMAND_KINDS:
                    self.acks.append(message)
                return message
        return None

    def run_until(self, trigger: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        """Read messages until ``trigger`` accepts one (returned) or the child ends (None)."""
        while (message := self._next()) is not None:
            if trigger(message):
                return message
        return None

    def kill(self, delay: float = 0.0) -> None:
        """SIGKILL the child, wait for it, and read every acknowledgement it still sent."""
        if delay:
            time.sleep(delay)
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=MESSAGE_TIMEOUT)
        self.killed = self.proc.returncode == -signal.SIGKILL
        while self._next() is not None:
            pass

    def finish(self) -> None:
        """Wait for a child that is not to be killed; it must complete cleanly."""
        while self._next() is not None:
            pass
        assert self.proc.wait(timeout=MESSAGE_TIMEOUT) == 0, self.stderr
        assert self.done

    def stop(self) -> None:
        """Kill this child if it still runs (cleanup)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    @property
    def done(self) -> bool:
        return any(m["kind"] == "done" for m in self.messages)


@pytest.fixture
def children() -> Iterator[list[Child]]:
    """Children started by a test; any still running at the end is killed."""
    started: list[Child] = []
    yield started
    for child in started:
        child.stop()


def kill_at(child: Child, trigger: Callable[[dict[str, Any]], bool], delay: float = 0.0) -> None:
    """Kill ``child`` once ``trigger`` accepts one of its messages; fail if it ends first."""
    fired = child.run_until(trigger)
    assert fired is not None, f"the child finished before the kill point:\n{child.stderr}"
    child.kill(delay)
    assert child.killed and not child.done, f"the kill did not land mid-run:\n{child.stderr}"


@dataclass(frozen=True)
class Baseline:
    """The state after an uninterrupted run into a fresh store."""

    active: int
    memory_ids: frozenset[str]


def active_memory_ids(engine: MemoryEngine) -> frozenset[str]:
    """What identifies the active memories across stores: each store keys its memory ids
    by its own keys (``ledger/digests.py``), so the ids of a memory are (namespace,
    normalized statement), as the store derives them from."""
    from memory_ledger.ledger.ids import normalize_statement

    rows = engine.projections.conn.execute(
        "SELECT tenant, principal, scope_id, statement FROM canonical_memory "
        "WHERE status = 'active'"
    ).fetchall()
    return frozenset("\x1f".join([*r[:3], normalize_statement(r[3])]) for r in rows)


def collect_baseline(child: Child, store: Path, script: Script) -> Baseline:
    """Wait for the uninterrupted ``child`` and read the state it left in ``store``."""
    child.finish()
    with MemoryEngine.open(store, sync=RECOVERY_SYNC) as engine:
        engine.catch_up()
        result = Baseline(engine.canonical.count_active(), active_memory_ids(engine))
    if script.real_conv_26:
        assert result.active == CONV_26_ACTIVE
    return result


# Reading the ledger back --------------------------------------------------------------------


TurnKey = tuple[str, int]


@dataclass
class LedgerView:
    """Every event of the ledger, and what the checks need to know about it."""

    head: int
    events: list[LedgerEvent]  # events[p - 1] is at position p
    observed: dict[TurnKey, int] = field(default_factory=dict)
    completed: dict[TurnKey, int] = field(default_factory=dict)
    candidates: Counter[TurnKey] = field(default_factory=Counter)
    sealed: Counter[str] = field(default_factory=Counter)
    reconciled: Counter[str] = field(default_factory=Counter)
    memory_events: Counter[str] = field(default_factory=Counter)
    activated_streams: set[UUID] = field(default_factory=set)

    def at(self, position: int) -> LedgerEvent:
        return self.events[position - 1]

    @property
    def pending(self) -> dict[str, list[int]]:
        """Turns with evidence but no extraction outcome, per session."""
        result: dict[str, list[int]] = {}
        for session, turn in sorted(set(self.observed) - set(self.completed)):
            result.setdefault(session, []).append(turn)
        return result


def read_ledger(engine: MemoryEngine) -> LedgerView:
    """Read the whole log; check it is gapless from 1 to the head with an intact hash chain."""
    head = engine.head
    notifications = engine.recorder.select_notifications(start=1, limit=head + 10)
    assert [n.id for n in notifications] == list(range(1, head + 1)), "log has gaps"
    previous = GENESIS_HASH
    chained = 0
    for record in engine.recorder.iter_records():  # type: ignore[attr-defined]
        assert record.record_hash == hashlib.sha256(previous + record.body).digest(), (
            f"hash chain broken at {record.notification_id}"
        )
        previous = record.record_hash
        chained += 1
    assert chained == head
    view = LedgerView(
        head=head,
        events=[cast(LedgerEvent, engine.mapper.to_domain_event(n)) for n in notifications],
    )
    for position, event in enumerate(view.events, start=1):
        if isinstance(event, TranscriptObserved):
            key = (event.session_id, event.turn_id)
            assert key not in view.observed, f"turn {key} observed twice"
            view.observed[key] = position
        elif isinstance(event, CandidateExtracted | CandidateRejected):
            view.candidates[(event.session_id, event.turn_id)] += 1
        elif isinstance(event, ExtractionCompleted):
            key = (event.session_id, event.turn_id)
            assert key not in view.completed, f"turn {key} extracted twice"
            view.completed[key] = position
        elif isinstance(event, SessionSealed):
            view.sealed[event.session_id] += 1
        elif isinstance(event, SessionReconciled):
            view.reconciled[event.session_id] += 1
        elif isinstance(event, MemoryActivated | MemoryReinforced):
            view.memory_events[event.session_id] += 1
            if isinstance(event, MemoryActivated):
                view.activated_streams.add(event.originator_id)
    return view


def check_acknowledged(engine: MemoryEngine, view: LedgerView, acks: list[dict[str, Any]]) -> None:
    """Rule 1: every acknowledged command's events are in the ledger, where it said."""
    last = 0
    evidence: dict[TurnKey, int] = {}
    for ack in acks:
        kind, position = ack["kind"], ack["position"]
        assert position > last, f"acknowledged positions not increasing at {ack}"
        last = position
        assert view.head >= position, f"acknowledged {ack} but the head is {view.head}"
        [notification] = engine.recorder.select_notifications(start=position, limit=1)
        assert notification.id == position
        event = engine.mapper.to_domain_event(notification)
        assert isinstance(event, EXPECTED_EVENT[kind]), f"{ack}: found {type(event).__name__}"
        assert event.session_id == ack["session"]
        if kind == "evidence":
            assert event.turn_id == ack["turn"]
            evidence[(ack["session"], ack["turn"])] = position
        elif kind == "extraction":
            assert event.turn_id == ack["turn"]
            if ack["evidence_position"]:  # else observed before a crash, completed on resume
                assert ack["evidence_position"] == evidence[(ack["session"], ack["turn"])]
            assert ack["candidates"] == event.extracted
        elif kind == "finish":
            assert isinstance(event, SessionReconciled)
            assert ack["activated"] == len(event.report.activated)
            assert ack["reinforced"] == len(event.report.reinforced)


def check_whole_commands(view: LedgerView, script: Script) -> None:
    """Rule 2: no command is partly present (each command wrote one contiguous batch)."""
    turns = script.turns
    for key, position in view.completed.items():
        done = view.at(position)
        assert isinstance(done, ExtractionCompleted)
        size = done.extracted + done.rejected
        assert view.candidates[key] == size, f"turn {key}: partial extraction outcome"
        assert size == len(turns[key].extracted), f"turn {key}: not the script's items"
        assert key in view.observed and view.observed[key] < position - size
        batch = [view.at(p) for p in range(position - size, position)]
        assert all(
            isinstance(e, CandidateExtracted | CandidateRejected)
            and (e.session_id, e.turn_id) == key
            for e in batch
        ), f"turn {key}: extraction events are not one batch"
        assert sum(isinstance(e, CandidateExtracted) for e in batch) == done.extracted
    assert set(view.candidates) <= set(view.completed), "candidates without their outcome"

    for position, event in enumerate(view.events, start=1):
        if not isinstance(event, SessionSealed):
            continue
        session = event.session_id
        assert view.sealed[session] == 1 and view.reconciled[session] == 1, (
            f"session {session}: sealed {view.sealed[session]}, "
            f"reconciled {view.reconciled[session]} times"
        )
        end = position + 1
        while end <= view.head and not isinstance(view.at(end), SessionReconciled):
            memory = view.at(end)
            assert isinstance(memory, RECONCILIATION_EVENTS), f"{session}: {memory!r} in finish"
            assert memory.session_id == session, f"session {session}: foreign event in finish"
            end += 1
        reconciled = view.at(end)
        assert isinstance(reconciled, SessionReconciled) and reconciled.session_id == session
        report = reconciled.report
        window = [view.at(p) for p in range(position + 1, end)]
        counted = [e for e in window if isinstance(e, MemoryActivated | MemoryReinforced)]
        assert len(counted) == len(report.activated) + len(report.reinforced)
        assert [e.originator_id for e in window if isinstance(e, MemoryActivated)] == list(
            report.activated
        )
        assert [e.originator_id for e in window if isinstance(e, MemoryReinforced)] == list(
            report.reinforced
        )
        assert view.memory_events[session] == len(counted), f"{session}: memory events outside"
    assert set(view.reconciled) <= set(view.sealed), "reconciled without being sealed"
    assert set(view.memory_events) <= set(view.sealed), "memory events without a finish"


def check_projection(engine: MemoryEngine, view: LedgerView) -> None:
    """Rule 4: catch-up reaches the head and counts every activated memory stream."""
    assert engine.catch_up() == view.head
    assert engine.runner.position == view.head
    assert engine.canonical.count_active() == len(view.activated_streams)


def retry_pending(engine: MemoryEngine, view: LedgerView, script: Script) -> list[TurnKey]:
    """Rule 3: pending extractions are reported by their session and complete on retry."""
    retried: list[TurnKey] = []
    turns = script.turns
    opened = {e.session_id: e.namespace for e in view.events if isinstance(e, SessionOpened)}
    for session_id, namespace in opened.items():
        extractor = RecordedExtractor()
        session = engine.session(namespace, session_id, extractor=extractor)
        pending = view.pending.get(session_id, [])
        assert session.pending_extractions() == pending
        for turn in pending:
            step = turns[(session_id, turn)]
            extractor.provide(turn, step.extracted)
            outcome = session.observe_final_transcript(turn, step.transcript, step.occurred_at)
            assert outcome.already_observed and outcome.evidence_position == 0
            assert outcome.extraction_position == engine.head
            retried.append((session_id, turn))
        assert session.pending_extractions() == []
    return retried


def check_after_kill(store: Path, script: Script, acks: list[dict[str, Any]]) -> dict[str, Any]:
    """Reopen after a kill and check rules 1-4 (retrying pending extractions) in place."""
    with MemoryEngine.open(store, sync=RECOVERY_SYNC) as engine:
        view = read_ledger(engine)
        check_acknowledged(engine, view, acks)
        check_whole_commands(view, script)
        check_projection(engine, view)
        [(pending_rows,)] = engine.projections.conn.execute(
            "SELECT count(*) FROM pending_extractions"
        ).fetchall()
        assert pending_rows == sum(len(t) for t in view.pending.values())
        print(
            f"{script.name}: {len(acks)} commands acknowledged, head {view.head}, "
            f"{len(view.reconciled)} sessions reconciled, pending {view.pending}"
        )
        retried = retry_pending(engine, view, script)
        assert len(retried) == sum(len(t) for t in view.pending.values())
        after_retry = read_ledger(engine)
        assert after_retry.pending == {}
        check_whole_commands(after_retry, script)
        check_projection(engine, after_retry)
    return {"view": view, "retried": retried}


def check_rerun(
    store: Path, script: Script, acks: list[dict[str, Any]], expected: Baseline
) -> None:
    """Rule 5: the whole script again completes, to the state of an uninterrupted run."""
    with MemoryEngine.open(store, sync=RECOVERY_SYNC) as engine:
        before = read_ledger(engine)
        report = run_script(engine, script.steps)
        final = read_ledger(engine)
        check_acknowledged(engine, final, acks)
        check_whole_commands(final, script)
        check_projection(engine, final)
        assert final.pending == {}
        assert set(final.completed) == set(script.turns)
        assert dict(final.reconciled) == dict.fromkeys(script.sessions, 1), (
            "a session was reconciled twice (or never)"
        )
        assert report.sessions_already_finished == len(before.reconciled)
        assert report.sessions_finished == len(script.sessions) - len(before.reconciled)
        assert report.active_memories == engine.canonical.count_active() == expected.active
        assert active_memory_ids(engine) == expected.memory_ids


# conv-26: a chain of crashes on one store ---------------------------------------------------


@dataclass(frozen=True)
class KillPoint:
    """Where a child of the chain is killed: at the first acknowledgement at or after command
    ``index`` of the script, or, with ``options``, when the child reports it stalled there."""

    name: str
    index: int
    options: tuple[str, ...] = ()
    delay: float = 0.0


def chain_points(script: Script) -> list[KillPoint]:
    """The kill points of the chain, in script order."""
    sessions, index = script.sessions, script.command_index
    first_turn = {s: min(t for (x, t) in script.turns if x == s) for s in sessions}

    def richest_turn(among: list[str]) -> tuple[str, int]:
        keys = [k for k in script.turns if k[0] in among]
        return max(keys, key=lambda k: (len(script.turns[k].extracted), -k[1]))

    extraction = richest_turn(sessions[3:5])
    in_extractor = next(
        (k for k in sorted(script.turns) if k[0] == sessions[5] and script.turns[k].extracted),
        (sessions[5], first_turn[sessions[5]]),
    )
    finish = max(sessions[6:8], key=script.items_of)
    middle = len(script.commands) // 2
    rng = random.Random(f"{SEED}/{script.name}/chain")
    points = [
        KillPoint("early", 4),
        KillPoint("right_after_finish", index[("finish", sessions[2], None)]),
        KillPoint(
            "inside_extraction_write",
            index[("extraction", *extraction)],
            ("--stall-in-write", f"extraction:{extraction[0]}@{extraction[1]}"),
        ),
        KillPoint(
            "inside_extractor",
            index[("extraction", *in_extractor)],
            ("--stall-turn", f"{in_extractor[0]}@{in_extractor[1]}"),
        ),
        KillPoint(
            "inside_finish_write",
            index[("finish", finish, None)],
            ("--stall-in-write", f"finish:{finish}"),
        ),
        KillPoint("middle", middle),
        KillPoint(
            "seeded_random",
            rng.randrange(middle + 20, len(script.commands) - 20),
            delay=rng.uniform(0.0, 0.004),  # the kill lands anywhere, also inside a command
        ),
    ]
    indexes = [p.index for p in points]
    assert indexes == sorted(indexes) and len(set(indexes)) == len(indexes), indexes
    return points


@dataclass
class Crash:
    """One kill of the chain: a copy of the store right after it, and what was acknowledged."""

    point: KillPoint
    snapshot: Path
    acks: list[dict[str, Any]]
    """Every acknowledgement of the chain so far (all children, in order)."""
    child_acks: list[dict[str, Any]]
    """Those of the child that was killed here."""
    stalled: dict[str, Any] | None


@dataclass
class Chain:
    script: Script
    store: Path
    crashes: dict[str, Crash] = field(default_factory=dict)
    acks: list[dict[str, Any]] = field(default_factory=list)
    baseline: Baseline | None = None


@pytest.fixture(scope="module")
def conv26_chain(conv26: Script, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    """Crash a replay of conv-26 at every kill point, resuming into the same store each time.

    An uninterrupted child replays the script into a fresh store meanwhile (the baseline).
    """
    root = tmp_path_factory.mktemp("chain")
    chain = Chain(conv26, root / "store")
    started: list[Child] = []
    try:
        uninterrupted = Child(root / "baseline", conv26, pause_ms="0")
        started.append(uninterrupted)
        for point in chain_points(conv26):
            child = Child(chain.store, conv26, *point.options)
            started.append(child)

            def trigger(message: dict[str, Any], point: KillPoint = point) -> bool:
                if point.options:
                    return message["kind"] == "stalled"
                return message["kind"] in COMMAND_KINDS and conv26.index_of(message) >= point.index

            kill_at(child, trigger, point.delay)
            chain.acks.extend(child.acks)
            snapshot = root / f"after-{point.name}"
            shutil.copytree(chain.store, snapshot)
            stalled = [m for m in child.messages if m["kind"] == "stalled"]
            chain.crashes[point.name] = Crash(
                point, snapshot, list(chain.acks), child.acks, stalled[0] if stalled else None
            )
        chain.baseline = collect_baseline(uninterrupted, root / "baseline", conv26)
        yield chain
    finally:
        for child in started:
            child.stop()


CHAIN_POINTS = [
    "early",
    "right_after_finish",
    "inside_extraction_write",
    "inside_extractor",
    "inside_finish_write",
    "middle",
    "seeded_random",
]


@pytest.mark.parametrize("point", CHAIN_POINTS)
def test_kill_point(point: str, conv26_chain: Chain) -> None:
    """Rules 1-4 on the store as the kill at ``point`` left it (a copy; the chain goes on)."""
    script = conv26_chain.script
    crash = conv26_chain.crashes[point]
    found = check_after_kill(crash.snapshot, script, crash.acks)
    view: LedgerView = found["view"]
    last = crash.child_acks[-1]
    sessions = script.sessions
    if point == "early":
        assert not view.reconciled and view.head < 10
    elif point == "right_after_finish":
        assert set(view.reconciled) == set(sessions[:3])
    elif point == "inside_extractor":
        assert crash.stalled is not None
        session, turn = crash.stalled["session"], crash.stalled["turn"]
        assert (last["kind"], last["session"], last["turn"]) == ("evidence", session, turn)
        assert view.pending == {session: [turn]} and found["retried"] == [(session, turn)]
    elif point in ("inside_extraction_write", "inside_finish_write"):
        # The child died holding LMDB's write lock, every record of its batch put: none of
        # them is there, everything acknowledged before is.
        assert crash.stalled is not None
        batch = crash.stalled["ids"]
        assert len(batch) >= 2, "the stalled command writes a single record"
        assert view.head == batch[0] - 1 == last["position"]
        kind, _, target = crash.stalled["command"].partition(":")
        if kind == "finish":
            assert target not in view.sealed and target not in view.reconciled
            assert view.pending == {}
        else:
            session, _, turn = target.rpartition("@")
            assert view.pending == {session: [int(turn)]}


def test_rerun_after_repeated_crashes_matches_uninterrupted_run(conv26_chain: Chain) -> None:
    """Rule 5 on the chain's store: the whole script again, after seven kills."""
    assert list(conv26_chain.crashes) == CHAIN_POINTS
    assert conv26_chain.baseline is not None
    check_rerun(conv26_chain.store, conv26_chain.script, conv26_chain.acks, conv26_chain.baseline)


# A synthetic script with rejections and reinforcements --------------------------------------


def test_kill_synthetic_at_seeded_random_point(
    synthetic: Script, tmp_path: Path, children: list[Child]
) -> None:
    uninterrupted = Child(tmp_path / "baseline", synthetic, pause_ms="0")
    children.append(uninterrupted)
    rng = random.Random(f"{SEED}/{synthetic.name}")
    target = rng.randrange(1, len(synthetic.commands) - 10)
    child = Child(tmp_path / "store", synthetic)
    children.append(child)
    kill_at(
        child,
        lambda m: m["kind"] in COMMAND_KINDS and synthetic.index_of(m) >= target,
        rng.uniform(0.0, 0.004),
    )
    expected = collect_baseline(uninterrupted, tmp_path / "baseline", synthetic)
    check_after_kill(tmp_path / "store", synthetic, child.acks)
    check_rerun(tmp_path / "store", synthetic, child.acks, expected)
    with MemoryEngine.open(tmp_path / "store", sync=RECOVERY_SYNC) as engine:
        view = read_ledger(engine)
    assert any(isinstance(e, MemoryReinforced) for e in view.events)
    assert any(isinstance(e, CandidateRejected) for e in view.events)


# Kill inside a projection catch-up ----------------------------------------------------------


def canonical_rows(store: ProjectionStore) -> list[dict[str, Any]]:
    rows = store.conn.sql("SELECT * FROM canonical_memory").to_arrow_table().to_pylist()
    return sorted(rows, key=lambda row: row["memory_id"])


@pytest.mark.parametrize("where", ["between_pages", "page_txn"])
def test_kill_inside_projection_catch_up(
    where: str, conv26: Script, tmp_path: Path, children: list[Child]
) -> None:
    """The child catches up after every finish (and each turn's recall catches up too), in
    pages of 8, and is killed after, or inside the transaction of, the 3rd page with memories.
    """
    store = tmp_path / "store"
    options = ("--catch-up", "--page-size", "8", "--stall-page", "3")
    if where == "page_txn":
        options += ("--stall-in-page-txn",)
    child = Child(store, conv26, *options)
    children.append(child)
    kill_at(child, lambda m: m["kind"] == "stalled")
    stalled = child.messages[-1]
    assert stalled["kind"] == "stalled" and stalled["where"] == where
    pages = [m for m in child.messages if m["kind"] == "page"]
    committed = pages[-1]
    if where == "between_pages":
        assert committed["position"] == stalled["position"]
    else:
        assert stalled["position"] > committed["position"]
        assert stalled["rows"] > committed["rows"], "the stalled transaction wrote no rows"

    with MemoryEngine.open(store, sync=RECOVERY_SYNC) as engine:
        view = read_ledger(engine)
        check_acknowledged(engine, view, child.acks)
        check_whole_commands(view, conv26)
        tracked = engine.runner.position
        assert tracked <= view.head
        assert tracked == committed["position"], "the tracking position is not the last commit"
        assert len(canonical_rows(engine.projections)) == committed["rows"]

        assert engine.catch_up() == view.head
        assert engine.canonical.count_active() == len(view.activated_streams)
        caught_up = canonical_rows(engine.projections)

        fresh = ProjectionStore(":memory:", version=PROJECTION_VERSION)
        try:
            rebuilt = ProjectionRunner(fresh, engine.recorder, engine.mapper)
            assert rebuilt.catch_up() == view.head
            assert caught_up == canonical_rows(fresh)
            # Every other read model too (paging must not change what a projection holds).
            assert table_digests(engine.projections.conn) == table_digests(fresh.conn)
        finally:
            fresh.close()
