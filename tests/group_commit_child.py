"""Worker for the group-commit crash property (``tests/crash/test_crash_property.py``).

Run from the repository root as ``python -m tests.group_commit_child STORE THREADS
COMMANDS POINT NTH``. It opens the store durable (sync on) and starts ``THREADS`` threads,
each appending ``COMMANDS`` commands through ``MemoryEngine.append`` (5 events of a stream
of its own per command), so that concurrent commands share transactions (group commit).
Every commit is slowed by a few milliseconds (a slow disk) so that groups form. One JSON
line per message on stdout, each written with one ``os.write``:

- ``{"kind": "begin", "writer", "number"}`` right before a command's append, and
  ``{"kind": "ack", "writer", "number", "positions"}`` when it returned (acknowledged);
- ``{"kind": "at_fault", "group"}`` at the ``NTH`` call of fault point ``POINT``
  (``ledger.put`` or ``ledger.commit``; ``group``: how many commands the transaction being
  written holds), after which the worker sleeps until the parent SIGKILLs it (with ``POINT``
  ``timer`` the parent kills it after a delay of its choosing);
- ``{"kind": "finished"}`` when every command returned.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from datetime import UTC, datetime
from uuid import NAMESPACE_URL, UUID, uuid5

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger import faults
from memory_ledger.ledger.events import CandidateExtracted, ExtractedItem
from memory_ledger.ledger.ids import Namespace

NAMESPACE = Namespace("crash", "group-commit", "chat")
EVENTS_PER_COMMAND = 5
COMMIT_DELAY = 0.003


def stream_of(writer: int, number: int) -> UUID:
    """The stream of command ``number`` of writer ``writer``."""
    return uuid5(NAMESPACE_URL, f"group-commit-crash/{writer}/{number}")


def emit(**message: object) -> None:
    """One JSON line on stdout in one ``write``."""
    data = memoryview((json.dumps(message) + "\n").encode())
    while data:
        data = data[os.write(1, data) :]


def command(writer: int, number: int) -> list[CandidateExtracted]:
    """The events of one command."""
    stream = stream_of(writer, number)
    when = datetime(2024, 1, 1, tzinfo=UTC)
    return [
        CandidateExtracted(
            originator_id=stream,
            originator_version=version,
            recorded_at=when,
            namespace=NAMESPACE,
            session_id=f"writer-{writer}",
            turn_id=number,
            candidate_id=uuid5(stream, str(version)),
            index=version - 1,
            extractor_id="recorded",
            item=ExtractedItem(
                kind="semantic",
                subject=f"Writer {writer}",
                statement=f"Writer {writer} wrote command {number}, event {version}.",
                source="fact",
                scope="user",
                reason="crash test",
                importance=0.5,
                confidence=0.9,
            ),
            occurred_at=when,
        )
        for version in range(1, EVENTS_PER_COMMAND + 1)
    ]


def main(argv: list[str]) -> int:
    store, threads, commands, point, nth = (
        argv[0],
        int(argv[1]),
        int(argv[2]),
        argv[3],
        int(argv[4]),
    )
    engine = MemoryEngine.open(store, sync=True)
    group_commit = engine.lmdb_recorder().datastore.shared.group_commit
    calls = {"n": 0}

    def at_point() -> None:
        calls["n"] += 1
        if calls["n"] == nth:
            emit(kind="at_fault", group=group_commit.stats.current)
            time.sleep(120)

    def slow_commit() -> None:
        time.sleep(COMMIT_DELAY)
        if point == "ledger.commit":
            at_point()

    faults.FAULTS["ledger.commit"] = slow_commit
    if point == "ledger.put":
        faults.FAULTS["ledger.put"] = at_point
    start = threading.Barrier(threads)

    def write(writer: int) -> None:
        start.wait()
        for number in range(1, commands + 1):
            emit(kind="begin", writer=writer, number=number)
            positions = engine.append(command(writer, number))
            emit(kind="ack", writer=writer, number=number, positions=positions)

    workers = [threading.Thread(target=write, args=(w,)) for w in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    emit(kind="finished")
    engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
