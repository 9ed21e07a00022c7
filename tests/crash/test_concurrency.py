"""Concurrency across processes: one reconciliation per session, no half-visible command.

Covered elsewhere: several processes appending to one ledger get gapless ids and their
batches never interleave (``tests/ledger/test_lmdb_store.py``); threads of one process working for
two tenants keep every event in its own stream and namespace
(``tests/session/test_session_api.py::test_two_tenants_in_threads_never_see_each_other``); two
processes each read their own consistent projection (``tests/projections/test_projections.py``).

Here (children: ``tests/concurrency_child.py``):

- two processes call ``finish()`` on the same sessions at the same moment: with a barrier
  inside ``finish()`` (both planned, then both released to append), and freely, in opposite
  orders. Each session is sealed and reconciled exactly once; one process reports the
  reconciliation, the other gets the same report back as ``already_reconciled``;
- a reader process follows the log while two writer processes append heavily (multi-event
  extraction outcomes and reconciliations); at every head it observes, every command is
  either wholly visible or not at all, and the events of each command are contiguous.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.ledger.events import SessionReconciled, SessionSealed
from memory_ledger.projections import table_digests
from memory_ledger.replay import verify_store
from tests.conftest import REPO_ROOT, make_item
from tests.projections.test_projections import fresh_digests

TIMEOUT = 60.0
NAMESPACE = Namespace("acme", "alice", "race")


class Child:
    """``python -m tests.concurrency_child ROLE ARGS`` with its JSON lines read on a thread."""

    def __init__(self, role: str, **arguments: Any) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.concurrency_child", role, json.dumps(arguments)],
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

    def wait(self) -> None:
        assert self.proc.wait(timeout=TIMEOUT) == 0, "".join(self._stderr)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.stop()


def prepare_sessions(store: Path, count: int) -> list[str]:
    """Sessions with candidates to reconcile (some reinforce an earlier session's memory)."""
    sessions = [f"race-{n}" for n in range(count)]
    with MemoryEngine.open(store, sync=False) as engine:
        earlier = engine.session(NAMESPACE, "earlier", extractor=(extractor := RecordedExtractor()))
        extractor.provide(1, [make_item("Alice likes green tea.")])
        earlier.observe_final_transcript(1, "user: I like green tea")
        earlier.finish()
        for sid in sessions:
            extractor = RecordedExtractor()
            session = engine.session(NAMESPACE, sid, extractor=extractor)
            for turn in (1, 2, 3):
                items = [make_item(f"Alice fact {sid}.{turn}.{k} holds.") for k in range(3)]
                items.append(make_item("Alice likes green tea."))
                extractor.provide(turn, items)
                session.observe_final_transcript(turn, f"user: {sid} turn {turn}")
    return sessions


def check_once(store: Path, sessions: list[str], reports: list[dict[str, Any]]) -> None:
    """Each session sealed and reconciled once; one reporter each; the reports agree."""
    with MemoryEngine.open(store, sync=False) as engine:
        events = [
            engine.mapper.to_domain_event(n)
            for n in engine.recorder.select_notifications(start=1, limit=engine.head + 1)
        ]
        sealed = Counter(e.session_id for e in events if isinstance(e, SessionSealed))
        reconciled = Counter(e.session_id for e in events if isinstance(e, SessionReconciled))
        for sid in sessions:
            assert sealed[sid] == reconciled[sid] == 1, f"{sid}: sealed {sealed[sid]} times"
            mine = [r for r in reports if r["session"] == sid]
            assert len(mine) == 2
            assert sorted(r["already"] for r in mine) == [False, True], mine
            assert mine[0]["activated"] == mine[1]["activated"] != []
            assert mine[0]["reinforced"] == mine[1]["reinforced"] != []
        assert verify_store(engine).ok
        engine.catch_up()
        assert table_digests(engine.projections.conn) == fresh_digests(engine)


def test_two_processes_finishing_one_session_at_once_reconcile_it_once(
    tmp_path: Path, children: list[Child]
) -> None:
    """Both processes plan the same reconciliation, then append it at the same moment."""
    store = tmp_path / "store"
    sessions = prepare_sessions(store, 4)
    namespace = [NAMESPACE.tenant, NAMESPACE.principal, NAMESPACE.scope_id]
    racers = [
        Child("finish", store=str(store), namespace=namespace, sessions=sessions, barrier=True)
        for _ in range(2)
    ]
    children.extend(racers)
    for racer in racers:
        assert "ready" in racer.next()
    reports: list[dict[str, Any]] = []
    for sid in sessions:
        for racer in racers:  # both planned the reconciliation of sid, neither appended
            assert racer.next() == {"planned": sid}
        for racer in racers:
            racer.send("go")
        for racer in racers:
            reports.append(racer.next())
    for racer in racers:
        racer.wait()
    check_once(store, sessions, reports)


def test_two_processes_finishing_sessions_in_opposite_orders_reconcile_each_once(
    tmp_path: Path, children: list[Child]
) -> None:
    store = tmp_path / "store"
    sessions = prepare_sessions(store, 6)
    namespace = [NAMESPACE.tenant, NAMESPACE.principal, NAMESPACE.scope_id]
    racers = [
        Child("finish", store=str(store), namespace=namespace, sessions=order, barrier=False)
        for order in (sessions, sessions[::-1])
    ]
    children.extend(racers)
    reports: list[dict[str, Any]] = []
    for racer in racers:
        assert "ready" in racer.next()
        reports.extend(racer.next() for _ in sessions)
        racer.wait()
    check_once(store, sessions, reports)


def test_reader_never_sees_a_half_applied_command_during_heavy_writes(
    tmp_path: Path, children: list[Child]
) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store, sync=False) as engine:
        engine.session(NAMESPACE, "setup")
    stop = tmp_path / "stop"
    reader = Child("reader", store=str(store), stop_file=str(stop))
    children.append(reader)
    assert "ready" in reader.next()
    writers = [
        Child("writer", store=str(store), namespace=["acme", name, "chat"], sessions=6, turns=12)
        for name in ("alice", "bob")
    ]
    children.extend(writers)
    written = 0
    for writer in writers:
        assert "ready" in writer.next()
    for writer in writers:
        written += writer.next()["done"]
        writer.wait()
    stop.touch()
    report = reader.next()
    reader.wait()
    with MemoryEngine.open(store, sync=False) as engine:
        head = engine.head
        assert verify_store(engine).ok
    assert report["problems"] == [], report["problems"]
    assert report["position"] == head
    during = [h for h in report["heads"] if h < head]
    # The reader must have looked often while the writers ran, or this proves nothing.
    assert len(set(during)) >= 20, f"the reader saw only {len(set(during))} heads of {head}"
    print(f"reader: {len(set(report['heads']))} heads observed, {written} commands, head {head}")
