"""Child processes for ``tests/crash/test_concurrency.py``.

Run from the repository root (a fresh interpreter, never forked from a process with an LMDB
environment open)::

    python -m tests.concurrency_child ROLE '<json arguments>'

Children write JSON lines on stdout (one ``write`` each, flushed) and read go-ahead lines
from stdin where a role waits for the parent. Roles:

- ``finish``: resume sessions of a store and call ``finish()`` on each; with ``barrier``
  the child reports ``{"planned": SESSION}`` from inside ``finish()`` (its events planned, not
  appended: fault point ``session.finish_planned``) and waits for a ``go`` line, so that the
  parent can release two processes' appends of the same reconciliation at once;
- ``writer``: a heavy workload in one namespace (turns with several items each, explicit
  commands, finish), as fast as it goes;
- ``reader``: reads the log at every head it observes until a stop file appears, and reports
  every head at which a command was half visible.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.extraction import RecordedExtractor
from memory_ledger.ledger import faults
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
    SessionReconciled,
    SessionSealed,
)
from memory_ledger.ledger.ids import Namespace

RECONCILIATION_EVENTS = (
    MemoryActivated,
    MemoryReinforced,
    MemorySuperseded,
    MemoryConflictMarked,
    MemoryPinned,
    MemoryForgotten,
)


def emit(**message: Any) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def item(statement: str, subject: str, predicate: str | None = None) -> dict[str, Any]:
    return {
        "kind": "semantic",
        "subject": subject,
        "predicate": predicate,
        "value": None,
        "statement": statement,
        "source": "fact",
        "scope": "user",
        "reason": "helps answer future questions",
        "importance": 0.8,
        "confidence": 0.9,
    }


def _namespace(raw: Sequence[str]) -> Namespace:
    return Namespace(raw[0], raw[1], raw[2])


def finish(store: str, namespace: list[str], sessions: list[str], barrier: bool) -> None:
    ns = _namespace(namespace)
    with MemoryEngine.open(store) as engine:
        opened = {sid: engine.session(ns, sid) for sid in sessions}
        current = ""
        if barrier:

            def wait_for_go() -> None:
                emit(planned=current)
                line = sys.stdin.readline()
                if line.strip() != "go":
                    raise SystemExit(f"expected 'go', got {line!r}")

            faults.FAULTS["session.finish_planned"] = wait_for_go
        emit(ready=os.getpid())
        for sid in sessions:
            current = sid
            report = opened[sid].finish()
            emit(
                session=sid,
                already=report.already_reconciled,
                activated=sorted(str(m) for m in report.activated),
                reinforced=sorted(str(m) for m in report.reinforced),
            )


def writer(store: str, namespace: list[str], sessions: int, turns: int) -> None:
    ns = _namespace(namespace)
    written = 0
    with MemoryEngine.open(store, sync=True) as engine:
        emit(ready=os.getpid())
        for number in range(sessions):
            extractor = RecordedExtractor()
            session = engine.session(ns, f"w{number}", extractor=extractor)
            for turn in range(1, turns + 1):
                items = [
                    item(f"{ns.principal} fact {number}.{turn}.{k} is true.", ns.principal)
                    for k in range(turn % 4 + 1)
                ]
                if turn % 3 == 0:  # rejected: importance too low
                    items.append({**item("A weak guess here.", ns.principal), "importance": 0.2})
                if turn % 5 == 0:  # reinforces an earlier session's fact
                    items.append(item(f"{ns.principal} fact 0.1.0 is true.", ns.principal))
                extractor.provide(turn, items)
                session.observe_final_transcript(turn, f"user: line {number}.{turn}")
                written += 2
                if turn % 4 == 0:
                    session.apply_explicit_command("remember", f"Note {number}.{turn} kept.", turn)
                    written += 1
            session.finish()
            written += 1
        emit(done=written, head=engine.head)


class GroupChecker:
    """Follows the log and says whether, at a head, some command is half visible.

    A command's events are contiguous (one write transaction): an extraction outcome is its
    CandidateExtracted/CandidateRejected events followed by ExtractionCompleted with their
    counts; a reconciliation is SessionSealed, memory events of that session, then
    SessionReconciled.
    """

    def __init__(self) -> None:
        self.open_group: tuple[str, int] | None = None
        self.group_size = 0
        self.sealed: str | None = None
        self.position = 0
        self.problems: list[str] = []

    def feed(self, position: int, event: LedgerEvent) -> None:
        if position != self.position + 1:
            self.problems.append(f"gap: {self.position} then {position}")
        self.position = position
        stream = str(event.originator_id)
        if self.open_group is not None:
            key = (stream, getattr(event, "turn_id", -1))
            if isinstance(event, CandidateExtracted | CandidateRejected) and key == self.open_group:
                self.group_size += 1
                return
            if isinstance(event, ExtractionCompleted) and key == self.open_group:
                if event.extracted + event.rejected != self.group_size:
                    self.problems.append(f"@{position}: outcome counts {self.group_size} events")
                self.open_group = None
                return
            self.problems.append(f"@{position}: {type(event).__name__} inside an extraction")
            self.open_group = None
        if self.sealed is not None:
            if isinstance(event, RECONCILIATION_EVENTS) and event.session_id == self.sealed:
                return
            if isinstance(event, SessionReconciled) and event.session_id == self.sealed:
                self.sealed = None
                return
            self.problems.append(f"@{position}: {type(event).__name__} inside a finish")
            self.sealed = None
        if isinstance(event, CandidateExtracted | CandidateRejected):
            self.open_group = (stream, event.turn_id)
            self.group_size = 1
        elif isinstance(event, SessionSealed):
            self.sealed = event.session_id
        elif isinstance(event, SessionReconciled | ExtractionCompleted) and not (
            isinstance(event, ExtractionCompleted) and event.extracted + event.rejected == 0
        ):
            self.problems.append(f"@{position}: {type(event).__name__} without its start")

    def check_head(self, head: int) -> None:
        if self.open_group is not None:
            self.problems.append(f"head {head}: extraction outcome of {self.open_group} half there")
        if self.sealed is not None:
            self.problems.append(f"head {head}: finish of {self.sealed} half there")


def reader(store: str, stop_file: str) -> None:
    checker = GroupChecker()
    heads: list[int] = []
    with MemoryEngine.open(store, sync=False) as engine:
        emit(ready=os.getpid())
        stopping = False
        while True:
            head = engine.head
            if head > checker.position:
                notifications = engine.recorder.select_notifications(
                    start=checker.position + 1, limit=head - checker.position, stop=head
                )
                for n in notifications:
                    checker.feed(n.id, engine.mapper.to_domain_event(n))
                checker.check_head(head)
                heads.append(head)
            if stopping:
                break
            stopping = Path(stop_file).exists()  # one more read after the stop file appears
    emit(heads=heads, problems=checker.problems[:20], position=checker.position)


ROLES = {"finish": finish, "writer": writer, "reader": reader}

if __name__ == "__main__":
    role, arguments = sys.argv[1], json.loads(sys.argv[2])
    ROLES[role](**arguments)
