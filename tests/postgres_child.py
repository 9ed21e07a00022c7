"""Child processes ("hosts") for ``tests/ledger/test_postgres_hosts.py``: each opens its own store
folder (its projections) on the shared PostgreSQL ledger. Run from the repository root::

    python -m tests.postgres_child ROLE '<json arguments>'

Children write JSON lines on stdout and read go-ahead lines from stdin. Roles:

- ``host``: writes turns of its own sessions (items on shared (subject, predicate) keys and
  facts of its own), reports ``{"phase": "turns"}``, waits for ``go``, then finishes EVERY
  session of the run (other hosts' too, in its own order) and reports ``{"phase": "done"}``.
- ``writer``: writes sessions (turns, then finish) until killed, reporting
  ``{"ack": [session, turn, positions]}`` after each command returned.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.extraction import RecordedExtractor
from memory_ledger.ledger.ids import Namespace

NS = Namespace("acme", "team", "shared")
PREDICATES = ("lives_in", "works_at", "drives")


def emit(**message: Any) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def item(statement: str, predicate: str | None = None, value: str | None = None) -> Any:
    return {
        "kind": "semantic",
        "subject": "Alice",
        "predicate": predicate,
        "value": value,
        "statement": statement,
        "source": "fact",
        "scope": "user",
        "reason": "helps answer future questions",
        "importance": 0.8,
        "confidence": 0.9,
        "tags": [],
        "supersedes": None,
        "conflicts_with": [],
        "evidence": [],
    }


def turns(engine: MemoryEngine, session: str, count: int, ack: bool = False) -> None:
    extractor = RecordedExtractor()
    chat = engine.session(NS, session, extractor=extractor)
    for turn in range(1, count + 1):
        predicate = PREDICATES[turn % len(PREDICATES)]
        value = f"{session}-v{turn}"
        extractor.provide(
            turn,
            [
                item(f"Alice {predicate} {value}", predicate, value),
                item(f"Alice noted {session} turn {turn}"),
            ],
        )
        outcome = chat.observe_final_transcript(turn, f"user: turn {turn} of {session}")
        if ack:
            emit(ack=[session, turn, chat.last_position, str(outcome)[:0]])


def host(url: str, store: str, name: str, sessions: int, everyone: list[str]) -> None:
    with MemoryEngine.open(store, ledger=url) as engine:
        for i in range(sessions):
            turns(engine, f"{name}-s{i}", 3)
        emit(phase="turns")
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("expected go")
        order = list(everyone)
        random.Random(name).shuffle(order)
        reports = {}
        for session in order:
            report = engine.session(NS, session, extractor=RecordedExtractor()).finish()
            reports[session] = report.already_reconciled
        engine.catch_up()
        emit(phase="done", reports=reports, head=engine.head)


def writer(url: str, store: str, name: str) -> None:
    with MemoryEngine.open(store, ledger=url) as engine:
        emit(ready=True)
        number = 0
        while True:
            session = f"{name}-w{number}"
            turns(engine, session, 4, ack=True)
            report = engine.session(NS, session, extractor=RecordedExtractor()).finish()
            emit(ack=[session, "finish", report.position, ""])
            number += 1


if __name__ == "__main__":
    role, arguments = sys.argv[1], json.loads(sys.argv[2])
    {"host": host, "writer": writer}[role](*arguments)
