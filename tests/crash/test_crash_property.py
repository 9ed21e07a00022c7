"""Crash safety as a property: hypothesis chooses programs and SIGKILL points.

A program is a random sequence of public-API operations (``tests/crash_property_child.py``:
sessions in three namespaces of two tenants, turns with recorded extractions including
invalid and secret-bearing items, transcripts and queries with planted secrets, explicit
commands, recall with prepare/begin_turn, admit and use, finish (also twice), prune, flushing
reads, closing and reopening the engine). Hypothesis also chooses 2-4 kill points per
program: between two operations, a random time after an operation started (wherever the worker
then is: inside fsync, a DuckDB checkpoint, anything), or at the ``nth`` call of a fault point
(``ledger.faults``) inside one operation: between two events' puts inside the LMDB write
transaction, after the puts before the commit, after the append before the session or
projections see it, inside a projection batch before COMMIT (small pages, so catch-ups run
many batches), inside ``finish()`` between planning and appending, or after a decision about
canonical memory read the ledger and planned its conditional append (``decision.planned``).

One long-lived fork server (started once per module) forks a worker per segment of the
program: the worker opens the store with durable sync, runs the operations from where the
previous one stopped, acknowledges every ledger append and every returned operation on stdout,
and is SIGKILLed by this process when it reports the kill point. After every kill this
process reopens the store and checks:

1. every acknowledged append is in the ledger at the positions it returned, and nothing
   written before the segment changed;
2. no command is partly present: the append in flight at the kill is in the ledger entirely
   or not at all, and the ledger holds nothing else (RecallServed records still buffered in
   the worker are the documented loss); extraction outcomes and finish() groups are whole;
3. every acknowledged operation's events are there (turn observed and extracted, command,
   reconciliation, pruning, use);
4. a turn whose evidence is present but whose extraction is not is reported pending by its
   session and completes on retry; a finish() in flight completes exactly once when retried,
   and again writes nothing;
5. the projection file the worker was killed with catches up to equal a fresh rebuild
   (``table_digests``), ``verify_store`` passes, no stored record contains a planted secret,
   and no recall crossed a namespace.

The killed operation is run again by the next worker (a host retrying the call). At the end
the final store is compared with an uninterrupted in-process run of the same program:
canonical memory must match (recall, admission and use counters aside: lost read records and
retried uses legitimately change them).

The default profile runs 100 examples, at least 2 kill points each (>= 200 crash points);
``--hypothesis-profile=long`` (``tests/conftest.py``) runs thousands. Counts are printed.

:func:`test_crash_anywhere_with_encryption_at_rest` runs the same property on a store
encrypted at rest (issue #16: every payload sealed with its namespace's data key), a tenth
as many examples, and also checks that no stored record holds a word of the facts.

Group commit has a property of its own (:func:`test_kill_while_a_group_is_written_...`):
a worker (``tests/group_commit_child.py``) runs 2-8 threads appending commands at once, so
that their commands share write transactions, and is SIGKILLed inside a group's transaction
(between two events' puts, or before its commit) or at a random time. Every command of the
killed group is then entirely present or entirely absent, every acknowledged command is
present at the positions it was given, nothing unannounced is there, and the chain verifies.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from uuid import UUID

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.extraction import RecordedExtractor
from memory_ledger.commands.session import MemorySession
from memory_ledger.ledger.events import (
    CandidateExtracted,
    CandidateRejected,
    ExplicitCommandApplied,
    ExtractionCompleted,
    LedgerEvent,
    MemoryActivated,
    MemoryConflictMarked,
    MemoryForgotten,
    MemoryPinned,
    MemoryPruned,
    MemoryReinforced,
    MemorySuperseded,
    MemoryUsed,
    SessionOpened,
    SessionReconciled,
    SessionSealed,
    TranscriptObserved,
)
from memory_ledger.projections.digest import table_digests
from memory_ledger.projections.runner import PROJECTION_VERSION, ProjectionRunner
from memory_ledger.projections.store import ProjectionStore
from memory_ledger.replay import verify_store
from tests.conftest import make_item
from tests.crash_property_child import NAMESPACES, OpRunner, identity
from tests.group_commit_child import EVENTS_PER_COMMAND, stream_of
from tests.killed_worker import run_to_kill

REPO_ROOT = Path(__file__).resolve().parents[2]
MESSAGE_TIMEOUT = 60.0
SESSIONS = ("s0", "s1")
FACTS = [
    ("Alice's nickname is Al.", "Alice", "nickname"),
    ("Alice's nickname is Ally.", "Alice", "nickname"),
    ("Alice likes green tea.", "Alice", None),
    ("Alice lives in Lisbon.", "Alice", "lives_in"),
    ("Alice lives in Porto.", "Alice", "lives_in"),
    ("Bob sings in a choir.", "Bob", None),
    ("Bob plays chess on Sundays.", "Bob", None),
]
QUERIES = ["nickname", "green tea Lisbon", "choir chess", "where does Alice live"]
SECRET_SHAPES = ("github", "aws", "openai", "password")
KILL_POINTS = (
    "ledger.commit",
    "ledger.put",
    "session.appended",
    "projections.commit",
    "session.finish_planned",
    "decision.planned",
    "between",
    "timer",
)
"""Where a worker is killed: at a fault point of ``ledger.faults``, between operations, or
(``timer``) wherever it is a random time after an operation started."""
WRITES = ("observe", "command", "recall", "finish", "prune", "reopen")
"""Operations that (usually) append to the ledger."""
DECIDES = ("finish", "prune", "recall")
"""Operations that decide about canonical memory under an append condition (``recall``
admits what it found: the admission reads the memories' states the same way)."""
READS_CATCH_UP = ("recall", "command", "finish", "prune")
"""Operations that catch the projections up (so ``projections.commit`` can fire in them)."""
RECONCILIATION_EVENTS = (
    MemoryActivated,
    MemoryReinforced,
    MemorySuperseded,
    MemoryConflictMarked,
    MemoryPinned,
    MemoryForgotten,
)
SEALED_WORDS = tuple(
    word.encode() for word in ("nickname", "green tea", "Lisbon", "Porto", "choir", "chess")
)
"""Words of the facts that an encrypted store must never hold in clear."""
# About 2 minutes on an idle machine, several times that on a loaded one: past the suite's
# per-test timeout (600 s, pyproject.toml) only by being slow, never by hanging. The long
# profile is run with --timeout=0 (docs/crash-safety.md).
pytestmark = pytest.mark.timeout(1800)

ENCRYPTED_EXAMPLES = 8
"""The least number of examples of the encrypted variant; it runs a tenth of the profile's
count when that is more (10 in the default profile, 100 with ``--hypothesis-profile=long``)."""
CANONICAL_COLUMNS = (
    "memory_id, tenant, principal, scope_id, status, revision, statement, importance, "
    "pinned, reinforcements, superseded_by"
)


# Programs -----------------------------------------------------------------------------------


def make_secret(shape: str, seed: int, n: int) -> tuple[str, str]:
    """A secret of ``shape`` and the random part of it that must never be stored."""
    body = hashlib.sha256(f"{seed}/{shape}/{n}".encode()).hexdigest()
    if shape == "github":
        return f"ghp_{body[:36]}", body[:36]
    if shape == "aws":
        return f"AKIA{body[:16].upper()}", body[:16].upper()
    if shape == "openai":
        return f"sk-proj-{body}", body
    return f"password = Zq{body[:14]}!", body[:14]


item_st = st.one_of(
    st.tuples(st.just("valid"), st.integers(0, len(FACTS) - 1), st.sampled_from([0.8, 0.9])),
    st.tuples(st.just("low"), st.integers(0, len(FACTS) - 1)),
    st.tuples(st.just("empty")),
    st.tuples(st.just("secret"), st.integers(0, len(FACTS) - 1), st.sampled_from(SECRET_SHAPES)),
)
where_st = st.tuples(st.integers(0, len(NAMESPACES) - 1), st.sampled_from(SESSIONS))
observe_st = st.tuples(
    st.just("observe"),
    where_st,
    st.lists(item_st, max_size=4),
    st.one_of(st.none(), st.sampled_from(SECRET_SHAPES)),
)
raw_op_st = st.one_of(
    observe_st,
    observe_st,
    st.tuples(
        st.just("command"),
        where_st,
        st.sampled_from(["remember", "forget", "correct", "pin"]),
        st.integers(0, len(FACTS) - 1),
        st.one_of(st.none(), st.sampled_from(SECRET_SHAPES)),
    ),
    st.tuples(
        st.just("recall"),
        where_st,
        st.integers(0, len(QUERIES) - 1),
        st.one_of(st.none(), st.sampled_from(SECRET_SHAPES)),
        st.booleans(),
        st.booleans(),
        st.booleans(),
    ),
    st.tuples(st.just("finish"), where_st),
    st.tuples(st.just("prune"), where_st),
    st.tuples(st.just("flush")),
    st.tuples(st.just("reopen")),
)


@dataclass
class Program:
    ops: list[dict[str, Any]]
    secrets: list[str] = field(default_factory=list)
    """The random parts of every planted secret."""
    turns: dict[tuple[int, str, int], dict[str, Any]] = field(default_factory=dict)
    """The observe operation of each (namespace, session, turn)."""


def build_program(raw_ops: list[tuple[Any, ...]], seed: int) -> Program:
    """JSON operations from the drawn tuples: turn numbers, items and secrets filled in."""
    program = Program(ops=[])
    turns: Counter[tuple[int, str]] = Counter()

    def secret(shape: str | None) -> str:
        if shape is None:
            return ""
        text, body = make_secret(shape, seed, len(program.secrets))
        program.secrets.append(body)
        return text

    for raw in raw_ops:
        kind = raw[0]
        if kind in ("flush", "reopen"):
            program.ops.append({"op": kind})
            continue
        ns, sid = raw[1]
        op: dict[str, Any] = {"op": kind, "ns": ns, "sid": sid}
        if kind == "observe":
            turns[(ns, sid)] += 1
            turn = turns[(ns, sid)]
            items, rejected = [], 0
            for spec in raw[2]:
                if spec[0] == "valid":
                    statement, subject, predicate = FACTS[spec[1]]
                    items.append(
                        make_item(
                            statement, subject=subject, predicate=predicate, importance=spec[2]
                        )
                    )
                    continue
                rejected += 1
                if spec[0] == "low":
                    statement, subject, _ = FACTS[spec[1]]
                    items.append(make_item(statement, subject=subject, importance=0.3))
                elif spec[0] == "empty":
                    items.append(make_item(""))
                else:
                    _, subject, _ = FACTS[spec[1]]
                    items.append(
                        make_item(f"{subject}'s key is {secret(spec[2])}.", subject=subject)
                    )
            transcript = f"user: turn {turn} of {sid}, nothing secret"
            if raw[3] is not None:
                transcript = f"user: turn {turn} of {sid}, my key is {secret(raw[3])} ok"
            op.update(turn=turn, items=items, rejected=rejected, transcript=transcript)
            program.turns[(ns, sid, turn)] = op
        elif kind == "command":
            statement = FACTS[raw[3]][0]
            if raw[4] is not None:
                statement = f"{statement[:-1]} and the key is {secret(raw[4])}"
            op.update(intent=raw[2], statement=statement, turn=turns[(ns, sid)])
        elif kind == "recall":
            query = QUERIES[raw[2]]
            if raw[3] is not None:
                query = f"{query} {secret(raw[3])}"
            op.update(query=query, turn=turns[(ns, sid)], prepare=raw[4], admit=raw[5], use=raw[6])
        program.ops.append(op)
    return program


@st.composite
def kill_st(draw: st.DrawFn, ops: list[dict[str, Any]]) -> dict[str, Any]:
    """A kill point: an operation index (the last one excluded), a point, a call number."""
    point = draw(st.sampled_from(KILL_POINTS))
    candidates = list(range(len(ops) - 1))
    if point == "session.finish_planned":
        candidates = [i for i in candidates if ops[i]["op"] == "finish"] or candidates
    elif point == "decision.planned":
        candidates = [i for i in candidates if ops[i]["op"] in DECIDES] or candidates
    elif point == "projections.commit":
        candidates = [i for i in candidates if ops[i]["op"] in READS_CATCH_UP] or candidates
    elif point != "between":
        candidates = [i for i in candidates if ops[i]["op"] in WRITES] or candidates
    # How many calls of the point to let pass: finish() plans once, an operation appends
    # one to four times, and an append puts one to a dozen events.
    most = {"session.finish_planned": 1, "decision.planned": 1, "ledger.put": 4}.get(point, 2)
    nth = draw(st.integers(1, most))
    kill = {"op": draw(st.sampled_from(candidates)), "point": point, "nth": nth}
    if point == "timer":
        kill["delay_us"] = draw(st.integers(0, 30_000))
    return kill


# The fork server ----------------------------------------------------------------------------


class Server:
    """``python -m tests.crash_property_child``: one process, forking a worker per segment."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        # No thread may exist when the server forks: no OpenMP pool, no jemalloc thread.
        env["OMP_NUM_THREADS"] = "1"
        env["JE_ARROW_MALLOC_CONF"] = "background_thread:false"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.crash_property_child"],
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
        ready = self.next()
        assert ready["kind"] == "server_ready", ready

    def _pump(self, stream: Any, is_stdout: bool) -> None:
        for line in stream:
            if is_stdout:
                self._lines.put(line)
            else:
                self._stderr.append(line)
        if is_stdout:
            self._lines.put(None)

    def next(self) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=MESSAGE_TIMEOUT)
        except queue.Empty:
            raise AssertionError(
                f"crash server silent for {MESSAGE_TIMEOUT} s:\n{''.join(self._stderr)}"
            ) from None
        if line is None:
            raise AssertionError(f"crash server ended:\n{''.join(self._stderr)}")
        return cast(dict[str, Any], json.loads(line))

    def send(self, request: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    started = Server()
    try:
        yield started
    finally:
        started.close()


@dataclass
class Batch:
    after: int
    events: list[list[Any]]
    positions: list[int] | None = None


@dataclass
class Segment:
    """What one worker acknowledged before it was killed (or finished)."""

    batches: list[Batch] = field(default_factory=list)
    done: dict[int, dict[str, Any]] = field(default_factory=dict)
    in_flight: int | None = None
    """The operation that started and did not return (None: killed between operations)."""
    point: str | None = None
    code: int | None = None
    head: int | None = None


def run_segment(server: Server, request: dict[str, Any]) -> Segment:
    """Send one request; SIGKILL the worker at its kill point; return its acknowledgements."""
    server.send(request)
    segment = Segment()
    pid = 0
    error = ""
    kill = request["kill"]
    timer: threading.Timer | None = None
    exited = threading.Lock()  # held once the worker is reaped: its pid may be reused

    def kill_now() -> None:
        if exited.acquire(blocking=False):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # already killed at its stop point and reaped; "exit" is on its way
            finally:
                exited.release()

    while True:
        try:
            message = server.next()
        except AssertionError:
            if pid:  # a worker that hangs must not block the server's next request
                os.kill(pid, signal.SIGKILL)
            raise
        kind = message["kind"]
        if kind == "op" and kill and kill["point"] == "timer" and message["index"] == kill["op"]:
            # An uninstrumented point: wherever the worker is after this delay.
            timer = threading.Timer(kill["delay_us"] / 1e6, kill_now)
            timer.start()
        if kind == "worker":
            pid = message["pid"]
        elif kind == "batch":
            segment.batches.append(Batch(message["after"], message["events"]))
        elif kind == "appended":
            segment.batches[-1].positions = message["positions"]
        elif kind == "op":
            segment.in_flight = message["index"]
        elif kind == "op_done":
            segment.done[message["index"]] = message["result"]
            segment.in_flight = None
        elif kind == "at_fault":
            segment.point = message["point"]
            os.kill(pid, signal.SIGKILL)
        elif kind == "finished":
            segment.head = message["head"]
        elif kind == "error":
            error = message["traceback"]
        elif kind == "exit":
            exited.acquire()
            if timer is not None:
                timer.cancel()
                if segment.point is None and message["code"] == -signal.SIGKILL:
                    segment.point = "timer"
            segment.code = message["code"]
            assert not error, f"the worker failed:\n{error}"
            return segment


# Checks -------------------------------------------------------------------------------------


def read_events(engine: MemoryEngine) -> list[LedgerEvent]:
    head = engine.head
    notifications = engine.recorder.select_notifications(start=1, limit=head + 1)
    assert [n.id for n in notifications] == list(range(1, head + 1)), "the log has gaps"
    return [cast(LedgerEvent, engine.mapper.to_domain_event(n)) for n in notifications]


def session_keys(events: list[LedgerEvent]) -> dict[str, tuple[int, str]]:
    """Session stream id -> (namespace index, session id), for every opened session."""
    keys = {}
    for event in events:
        if isinstance(event, SessionOpened):
            keys[str(event.originator_id)] = (NAMESPACES.index(event.namespace), event.session_id)
    return keys


def check_appends(ids: list[list[Any]], known: list[list[Any]], segment: Segment) -> None:
    """Rules 1 and 2 on raw appends: acknowledged ones present, the one in flight whole."""
    assert ids[: len(known)] == known, "records written before this segment changed"
    expected = list(known)
    for number, batch in enumerate(segment.batches):
        size = len(batch.events)
        if batch.positions is not None:
            assert batch.after == len(expected), f"append after {batch.after}, log at {expected}"
            assert batch.positions == list(range(batch.after + 1, batch.after + size + 1))
            expected += batch.events
            continue
        assert number == len(segment.batches) - 1, "an append never returned, yet others followed"
        present = len(ids) - len(expected)
        assert present in (0, size), (
            f"partial command: {present} of the {size} events of the append in flight at "
            f"position {batch.after + 1} are in the ledger: {batch.events}"
        )
        expected += batch.events[:present]
    assert ids == expected, "the ledger holds records nobody appended"


def check_structure(events: list[LedgerEvent], program: Program) -> dict[str, Any]:
    """Rule 2 on content: whole extraction outcomes and finish() groups; counts as planned."""
    keys = session_keys(events)
    observed: set[tuple[int, str, int]] = set()
    completed: set[tuple[int, str, int]] = set()
    sealed: Counter[tuple[int, str]] = Counter()
    reconciled: Counter[tuple[int, str]] = Counter()
    commands: set[str] = set()
    position = 0
    while position < len(events):
        event = events[position]
        key = keys.get(str(event.originator_id))
        if isinstance(event, TranscriptObserved):
            assert key is not None
            turn = (*key, event.turn_id)
            assert turn not in observed, f"turn {turn} observed twice"
            observed.add(turn)
        elif isinstance(event, CandidateExtracted | CandidateRejected | ExtractionCompleted):
            assert key is not None
            turn = (*key, event.turn_id)
            group: list[LedgerEvent] = []
            while isinstance(event, CandidateExtracted | CandidateRejected):
                assert (keys.get(str(event.originator_id)), event.turn_id) == (key, turn[2]), (
                    f"turn {turn}: foreign event inside its extraction outcome"
                )
                group.append(event)
                position += 1
                assert position < len(events), f"turn {turn}: extraction outcome without its end"
                event = events[position]
            assert isinstance(event, ExtractionCompleted), f"turn {turn}: partial extraction"
            assert str(event.originator_id) in keys and event.turn_id == turn[2]
            assert turn in observed and turn not in completed, f"turn {turn} extracted twice"
            completed.add(turn)
            rejected = sum(isinstance(e, CandidateRejected) for e in group)
            assert (event.extracted, event.rejected) == (len(group) - rejected, rejected)
            planned = program.turns[turn]
            assert len(group) == len(planned["items"]), f"turn {turn}: not the planned items"
            assert rejected == planned["rejected"], f"turn {turn}: {rejected} rejected"
        elif isinstance(event, SessionSealed):
            assert key is not None
            sealed[key] += 1
            position += 1
            while position < len(events) and isinstance(events[position], RECONCILIATION_EVENTS):
                memory = events[position]
                assert (memory.namespace, memory.session_id) == (NAMESPACES[key[0]], key[1]), (
                    f"{key}: foreign event in finish"
                )
                position += 1
            assert position < len(events), f"session {key}: sealed, never reconciled"
            event = events[position]
            assert isinstance(event, SessionReconciled), f"session {key}: partial finish"
            assert keys.get(str(event.originator_id)) == key
            reconciled[key] += 1
        elif isinstance(event, SessionReconciled):
            raise AssertionError(f"session {key}: reconciled without being sealed")
        elif isinstance(event, ExplicitCommandApplied):
            assert str(event.command_id) not in commands, "command applied twice"
            commands.add(str(event.command_id))
        position += 1
    assert all(n == 1 for n in sealed.values()), f"a session was finished twice: {sealed}"
    assert sealed == reconciled
    return {
        "pending": sorted(observed - completed),
        "completed": completed,
        "reconciled": set(reconciled),
        "commands": commands,
    }


def check_acknowledged(
    events: list[LedgerEvent], segment: Segment, program: Program, found: dict[str, Any]
) -> None:
    """Rule 3: every operation that returned left all its events."""
    pruned = {str(e.originator_id) for e in events if isinstance(e, MemoryPruned)}
    for index, result in segment.done.items():
        op = program.ops[index]
        if "refused" in result or op["op"] in ("flush", "reopen"):
            continue
        key = (op["ns"], op["sid"])
        if op["op"] == "observe":
            assert (*key, op["turn"]) in found["completed"], f"acknowledged {op} is not whole"
        elif op["op"] == "command":
            assert result["command_id"] in found["commands"], f"acknowledged {op} is missing"
        elif op["op"] == "finish":
            assert key in found["reconciled"], f"acknowledged {op} is missing"
        elif op["op"] == "prune":
            assert set(result["pruned"]) <= pruned, f"acknowledged {op} is missing"
        elif op["op"] == "recall" and "used" in result:
            used = events[result["used"] - 1]
            assert isinstance(used, MemoryUsed) and used.turn_id == op["turn"]


def recover(engine: MemoryEngine, program: Program, segment: Segment, found: dict[str, Any]) -> int:
    """Rule 4: retry pending extractions and a finish in flight; return the retries made."""
    retries = 0
    in_flight = program.ops[segment.in_flight] if segment.in_flight is not None else None
    pending = found["pending"]
    if pending:
        assert in_flight is not None and in_flight["op"] == "observe", (
            f"pending extractions {pending} though no turn was in flight"
        )
        assert pending == [(in_flight["ns"], in_flight["sid"], in_flight["turn"])]
    engine.catch_up()
    [(reported,)] = engine.projections.conn.execute(
        "SELECT count(*) FROM pending_extractions"
    ).fetchall()
    assert reported == len(pending), "the read model does not report the pending extraction"
    sessions: dict[tuple[int, str], tuple[MemorySession, RecordedExtractor]] = {}
    for ns, sid in sorted(session_keys(read_events(engine)).values()):
        extractor = RecordedExtractor()
        sessions[(ns, sid)] = (engine.session(NAMESPACES[ns], sid, extractor=extractor), extractor)
    for ns, sid, turn in pending:
        session, extractor = sessions[(ns, sid)]
        assert session.pending_extractions() == [turn]
        planned = program.turns[(ns, sid, turn)]
        extractor.provide(turn, planned["items"])
        outcome = session.observe_final_transcript(turn, planned["transcript"])
        assert outcome.already_observed and outcome.extraction_position == engine.head
        assert session.pending_extractions() == []
        retries += 1
    for session, _ in sessions.values():
        assert session.pending_extractions() == [], f"{session.session_id}: pending"
    if in_flight is not None and in_flight["op"] == "finish":
        key = (in_flight["ns"], in_flight["sid"])
        if key in sessions:
            session, _ = sessions[key]
            first = session.finish()
            assert first.already_reconciled == (key in found["reconciled"])
            again = session.finish()
            assert again.already_reconciled and again.activated == first.activated
            retries += 1
    for session, _ in sessions.values():
        session.close()
    return retries


def fresh_digests(engine: MemoryEngine) -> dict[str, str]:
    fresh = ProjectionStore(":memory:", version=PROJECTION_VERSION)
    try:
        ProjectionRunner(fresh, engine.recorder, engine.mapper).catch_up()
        return table_digests(fresh.conn)
    finally:
        fresh.close()


def check_invariants(
    engine: MemoryEngine, program: Program, hits: list[tuple[int, Any]], *, sealed: bool = False
) -> None:
    """Rule 5: projections equal a rebuild, the chain verifies, no secret, no foreign recall;
    with ``sealed`` (encryption at rest) no stored record holds a word of a fact."""
    assert engine.catch_up() == engine.head
    assert table_digests(engine.projections.conn) == fresh_digests(engine)
    report = verify_store(engine)
    assert report.ok and report.checked == engine.head, report
    for _, value in engine.recorder.iter_log():  # type: ignore[attr-defined]
        for secret in program.secrets:
            assert secret.encode() not in value, f"a planted secret was stored: {secret}"
        if sealed:
            for word in SEALED_WORDS:
                assert word not in value, f"{word!r} stored in clear by an encrypted store"
    owner = {
        row[0]: (row[1], row[2], row[3])
        for row in engine.projections.conn.execute(
            "SELECT memory_id, tenant, principal, scope_id FROM canonical_memory"
        ).fetchall()
    }
    for ns, hit in hits:
        namespace = NAMESPACES[ns]
        if hit[0] in owner:
            assert owner[hit[0]] == (namespace.tenant, namespace.principal, namespace.scope_id), (
                f"a recall in {namespace} returned {hit}"
            )
    everything = " ".join(f for f, _, _ in FACTS)
    for namespace in NAMESPACES:
        for hit in engine.recall(namespace, everything, 50).results:
            assert owner[hit.memory_id] == (
                namespace.tenant,
                namespace.principal,
                namespace.scope_id,
            )


def recall_hits(program: Program, segment: Segment) -> list[tuple[int, Any]]:
    return [
        (program.ops[index]["ns"], hit)
        for index, result in segment.done.items()
        for hit in result.get("hits", ())
    ]


def canonical_state(engine: MemoryEngine) -> list[tuple[Any, ...]]:
    """The canonical memory rows, each memory id (its own and ``superseded_by``) replaced
    by what it is derived from, (namespace, normalized statement): each store keys its ids
    by its own keys (``ledger/digests.py``), so two stores compare by that."""
    from memory_ledger.ledger.ids import normalize_statement

    engine.catch_up()
    rows = engine.projections.conn.execute(
        f"SELECT {CANONICAL_COLUMNS} FROM canonical_memory ORDER BY memory_id"
    ).fetchall()
    names = {row[0]: (*row[1:4], normalize_statement(row[6])) for row in rows}
    return sorted((names[row[0]], *row[1:-1], names.get(row[-1], row[-1])) for row in rows)


def uninterrupted_state(
    directory: Path, program: Program, master_key: bytes | None = None
) -> list[tuple[Any, ...]]:
    runner = OpRunner(directory, sync=False, page_size=10_000, master_key=master_key)
    try:
        for op in program.ops:
            runner.run(op)
        return canonical_state(runner.engine)
    finally:
        runner.close()


# The test -----------------------------------------------------------------------------------


@contextlib.contextmanager
def projection_files_kept(store: Path) -> Iterator[None]:
    """Put the projection files back as the kill left them once the checks are done.

    The checks catch the killed worker's projection file up to the head; restoring it makes
    the next worker resume its own catch-up from the crash (more work inside projection
    batches, where ``projections.commit`` kills land). Read models are disposable: any file
    that is behind the ledger is a valid one.
    """
    folder = store / "projections"
    saved = {path.name: path.read_bytes() for path in folder.glob("slot-*.duckdb*")}
    try:
        yield
    finally:
        for path in folder.glob("slot-*.duckdb*"):
            path.unlink()
        for name, data in saved.items():
            (folder / name).write_bytes(data)


@dataclass
class Stats:
    examples: int = 0
    crash_points: int = 0
    retries: int = 0
    points: Counter[str] = field(default_factory=Counter)
    """Where the kills landed (``after_op``: the fault point was not reached in the op)."""
    chosen: Counter[str] = field(default_factory=Counter)
    seconds: Counter[str] = field(default_factory=Counter)


def run_example(
    server: Server,
    base: Path,
    program: Program,
    kills: list[dict[str, Any]],
    page_size: int,
    stats: Stats,
    master_key: bytes | None = None,
) -> None:
    directory = Path(tempfile.mkdtemp(dir=base))
    store = directory / "store"
    try:
        known: list[list[Any]] = []
        start = 0
        for kill in sorted(kills, key=lambda k: k["op"]):
            if start >= len(program.ops):
                break
            kill = {**kill, "op": max(kill["op"], start)}
            request = {
                "store": str(store),
                "ops": program.ops,
                "start": start,
                "kill": kill,
                "page_size": page_size,
                "master_key": master_key.hex() if master_key else None,
            }
            began = time.monotonic()
            segment = run_segment(server, request)
            stats.seconds["worker"] += time.monotonic() - began
            began = time.monotonic()
            assert segment.code == -signal.SIGKILL, f"worker exit {segment.code}, not killed"
            stats.crash_points += 1
            stats.chosen[kill["point"]] += 1
            stats.points[segment.point or "?"] += 1
            with (
                projection_files_kept(store),
                MemoryEngine.open(store, sync=False, master_key=master_key) as engine,
            ):
                events = read_events(engine)
                check_appends([identity(e) for e in events], known, segment)
                found = check_structure(events, program)
                check_acknowledged(events, segment, program, found)
                stats.retries += recover(engine, program, segment, found)
                check_structure(read_events(engine), program)
                check_invariants(
                    engine, program, recall_hits(program, segment), sealed=bool(master_key)
                )
                known = [identity(e) for e in read_events(engine)]
            stats.seconds["checks"] += time.monotonic() - began
            if segment.in_flight is not None:
                start = segment.in_flight  # run the killed operation again, as a host would
            elif segment.done:
                start = max(segment.done) + 1
        request = {
            "store": str(store),
            "ops": program.ops,
            "start": start,
            "kill": None,
            "page_size": page_size,
            "master_key": master_key.hex() if master_key else None,
        }
        segment = run_segment(server, request)
        assert segment.code == 0 and segment.head is not None
        with MemoryEngine.open(store, sync=False, master_key=master_key) as engine:
            events = read_events(engine)
            check_appends([identity(e) for e in events], known, segment)
            found = check_structure(events, program)
            assert found["pending"] == []
            check_acknowledged(events, segment, program, found)
            check_invariants(
                engine, program, recall_hits(program, segment), sealed=bool(master_key)
            )
            crashed = canonical_state(engine)
        began = time.monotonic()
        expected = uninterrupted_state(directory / "uninterrupted", program, master_key)
        stats.seconds["uninterrupted"] += time.monotonic() - began
        assert crashed == expected, (
            "canonical memory after the crashes differs from an uninterrupted run"
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def profile_examples() -> int:
    """The example count of the hypothesis profile in use."""
    current = settings.default
    return current.max_examples if current is not None else 100


def crash_property(
    server: Server,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    *,
    master_key: bytes | None = None,
    max_examples: int | None = None,
) -> Stats:
    """Run the crash property (the profile's example count unless ``max_examples``)."""
    stats = Stats()
    began = time.monotonic()
    chosen = settings(
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        max_examples=max_examples if max_examples is not None else profile_examples(),
    )

    @chosen
    @given(data=st.data())
    def crash_program(data: st.DataObject) -> None:
        raw_ops = data.draw(st.lists(raw_op_st, min_size=6, max_size=16), label="ops")
        seed = data.draw(st.integers(0, 2**32), label="seed")
        program = build_program(raw_ops, seed)
        kills = data.draw(st.lists(kill_st(program.ops), min_size=2, max_size=4), label="kills")
        page_size = data.draw(st.sampled_from([1, 2, 3, 5, 10_000]), label="page_size")
        stats.examples += 1
        run_example(server, tmp_path, program, kills, page_size, stats, master_key)

    try:
        crash_program()
    finally:
        with capsys.disabled():
            print(
                f"\ncrash property{' (encrypted)' if master_key else ''}: {stats.examples} "
                f"examples, {stats.crash_points} crash points "
                f"(SIGKILL), {stats.retries} retries, in {time.monotonic() - began:.0f} s; "
                f"kill points chosen {dict(sorted(stats.chosen.items()))}, "
                f"landed {dict(sorted(stats.points.items()))}; "
                f"{ {k: round(v) for k, v in stats.seconds.items()} }"
            )
    assert stats.crash_points >= 2 * stats.examples
    return stats


def test_crash_anywhere_loses_no_acknowledged_command_and_half_writes_none(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stats = crash_property(server, tmp_path, capsys)
    if profile_examples() >= 50:  # about 2.5 crash points an example (254 in 100)
        assert stats.crash_points >= 2 * profile_examples()


def test_crash_anywhere_with_encryption_at_rest(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same property on a store encrypted at rest (issue #16): every payload sealed
    with its namespace's data key; additionally no stored record holds a fact's words."""
    examples = max(ENCRYPTED_EXAMPLES, profile_examples() // 10)
    crash_property(server, tmp_path, capsys, master_key=os.urandom(32), max_examples=examples)


def run_group_worker(
    store: Path, threads: int, commands: int, point: str, nth: int, delay: float
) -> tuple[dict[tuple[int, int], list[int]], set[tuple[int, int]], int | None]:
    """Run ``tests.group_commit_child`` until it reaches the kill point (SIGKILL it there)
    or finishes; return the acknowledged commands' positions, the commands begun, and the
    size of the group being written at the kill (None: not killed at a fault point)."""
    acked: dict[tuple[int, int], list[int]] = {}
    begun: set[tuple[int, int]] = set()

    def note(message: dict[str, Any]) -> None:
        if message["kind"] == "begin":
            begun.add((message["writer"], message["number"]))
        elif message["kind"] == "ack":
            acked[message["writer"], message["number"]] = message["positions"]

    args = [str(store), str(threads), str(commands), point, str(nth)]
    timer = delay if point == "timer" else None
    fault = run_to_kill("tests.group_commit_child", args, note, timer)
    return acked, begun, None if fault is None else int(fault["group"])


def test_kill_while_a_group_is_written_leaves_each_command_whole_or_absent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: Counter[str] = Counter()
    sizes: Counter[int] = Counter()

    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @example(threads=6, commands=3, point="ledger.commit", nth=3, delay=0.0)
    @example(threads=8, commands=2, point="ledger.put", nth=23, delay=0.0)
    @given(
        threads=st.integers(2, 8),
        commands=st.integers(1, 4),
        point=st.sampled_from(["ledger.put", "ledger.commit", "timer"]),
        nth=st.integers(1, 40),
        delay=st.floats(0.0, 0.2),
    )
    def kill_group(threads: int, commands: int, point: str, nth: int, delay: float) -> None:
        store = Path(tempfile.mkdtemp(dir=tmp_path))
        acked, begun, group = run_group_worker(store, threads, commands, point, nth, delay)
        seen[point if group is not None or point == "timer" else "finished"] += 1
        if group is not None:
            sizes[group] += 1
        with MemoryEngine.open(store) as engine:
            assert verify_store(engine).ok
            head = engine.head
            present = 0
            for writer in range(threads):
                for number in range(1, commands + 1):
                    events = engine.load_stream(stream_of(writer, number))
                    # Whole or absent; never there unless begun; there if acknowledged.
                    assert len(events) in (0, EVENTS_PER_COMMAND)
                    if events:
                        assert (writer, number) in begun
                        present += 1
                    if (writer, number) in acked:
                        assert len(events) == EVENTS_PER_COMMAND
                        positions = acked[writer, number]
                        records = engine.read_records(positions[0] - 1, EVENTS_PER_COMMAND)
                        assert [r[0] for r in records] == positions
                        assert {UUID(bytes=cast(bytes, r[1])) for r in records} == {
                            stream_of(writer, number)
                        }
            assert head == present * EVENTS_PER_COMMAND  # nothing else in the ledger

    try:
        kill_group()
    finally:
        with capsys.disabled():
            print(
                f"\ngroup commit crash property: outcomes {dict(seen)}, commands in the group "
                f"being written at a fault-point kill {dict(sorted(sizes.items()))}"
            )
    assert any(size > 1 for size in sizes), "no kill landed inside a group of several commands"
