"""The cursor gate (``projections.cursor_gate``): closing or checkpointing a projection
file's connection waits for the queries running on its cursors and holds new ones back;
after a reconnect a cursor's holder sees a new generation. Orders checked with events, not
clocks; then a race against a real file: readers query through cursors while the owner
rewrites the file again and again, and every answer equals the serial one."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb

from memory_ledger.projections.cursor_gate import CursorGate

WAIT = 60.0


def test_exclusive_waits_for_a_running_reader_and_holds_new_ones_back() -> None:
    gate = CursorGate()
    reading, release_reader = threading.Event(), threading.Event()
    inside_exclusive, release_exclusive = threading.Event(), threading.Event()
    order: list[str] = []

    def reader() -> None:
        with gate.reading() as generation:
            assert generation == 0
            reading.set()
            assert release_reader.wait(WAIT)
            order.append("first query ends")

    def owner() -> None:
        with gate.exclusive(reconnects=True):
            order.append("owner closes")
            inside_exclusive.set()
            assert release_exclusive.wait(WAIT)

    def late_reader() -> None:
        with gate.reading() as generation:
            order.append(f"late query on generation {generation}")

    first = threading.Thread(target=reader)
    first.start()
    assert reading.wait(WAIT)
    closing = threading.Thread(target=owner)
    closing.start()
    assert not inside_exclusive.wait(0.2)  # a query runs: the owner waits
    release_reader.set()
    assert inside_exclusive.wait(WAIT)
    late = threading.Thread(target=late_reader)
    late.start()
    late.join(0.2)
    assert late.is_alive()  # held back while the owner closes
    release_exclusive.set()
    for thread in (first, closing, late):
        thread.join(WAIT)
    assert order == ["first query ends", "owner closes", "late query on generation 1"]
    assert gate.generation == 1


def test_cursors_read_while_the_owner_reconnects(tmp_path: Path) -> None:
    path = str(tmp_path / "file.duckdb")
    owner = duckdb.connect(path)
    owner.execute("CREATE TABLE t AS SELECT range AS i FROM range(20000)")
    serial = owner.execute("SELECT sum(i), count(*) FROM t").fetchall()
    gate = CursorGate()
    lock = threading.Lock()  # the owner's connection: one call at a time
    state = {"conn": owner}
    barrier = threading.Barrier(5, timeout=WAIT)
    answers: list[object] = []
    failures: list[str] = []

    def reader() -> None:
        with lock:
            cursor, mine = state["conn"].cursor(), gate.generation
        try:
            for _ in range(20):
                barrier.wait()
                while True:
                    if mine != gate.generation:
                        with lock:
                            cursor, mine = state["conn"].cursor(), gate.generation
                    with gate.reading() as generation:
                        if generation == mine:
                            answers.append(
                                cursor.execute("SELECT sum(i), count(*) FROM t").fetchall()
                            )
                            break
        except Exception as error:
            failures.append(repr(error))
            barrier.abort()

    def reconnect() -> None:
        try:
            for _ in range(20):
                barrier.wait()
                with lock, gate.exclusive(reconnects=True):
                    state["conn"].execute("CHECKPOINT")
                    state["conn"].close()
                    state["conn"] = duckdb.connect(path)
        except Exception as error:
            failures.append(repr(error))
            barrier.abort()

    threads = [threading.Thread(target=reader) for _ in range(4)]
    threads.append(threading.Thread(target=reconnect))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 5)
    state["conn"].close()
    assert not failures, failures
    assert answers == [serial] * 80
