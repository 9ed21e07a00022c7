"""Projection catch-up events/s (100,000 events) and full rebuild time (1,000,000 events).

The ledger is filled with a realistic mix (per turn: TranscriptObserved, two
CandidateExtracted, ExtractionCompleted; per session finish: SessionSealed, activations,
SessionReconciled), appended with sync off (append speed is not measured here). Then:

- raw scan (the limit of one core): one LMDB read transaction, a cursor over the log, and
  msgspec decoding each record's body and its event payload to builtins (lists, dicts,
  strings): the least any catch-up must do to see every field of every event. Also shown:
  the same scan decoding the record bodies only (the event payloads left as bytes);
- read + decode the general way: every page read through the recorder and decoded into
  event objects (``ProjectionRunner.read_page``);
- catch-up: the projection runner applying the same events to a fresh DuckDB file;
- rebuild: the same for the large ledger (default 1,000,000 events).

The three measurements of the small ledger run ``--repeat`` times in alternating order
(A B C, C B A, ...); figures are medians, wall time and CPU time (process, all threads).

Targets (issue 19, item 1): catch-up >= 100,000 events/s and >= 0.5 of the raw scan
(``catchup_vs_raw_scan``); 1,000,000 events rebuilt in < 12 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast
from uuid import UUID

import msgspec

from benchmarks.results import median, print_table, save
from memory_ledger.commands import MemoryEngine
from memory_ledger.ledger.events import (
    CandidateExtracted,
    ExtractedItem,
    ExtractionCompleted,
    LedgerEvent,
    MemoryActivated,
    ReconciliationReport,
    SessionReconciled,
    SessionSealed,
    TranscriptObserved,
)
from memory_ledger.ledger.ids import (
    Namespace,
    candidate_id,
    memory_id,
    normalize_statement,
    session_stream_id,
)
from memory_ledger.projections import ProjectionStore

EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
SUBJECTS = [f"person{n}" for n in range(2000)]
PREDICATES = [f"attribute_{n}" for n in range(300)]


def generate(
    total: int, namespaces: int = 10, turns_per_session: int = 20, first_session: int = 1
) -> list[LedgerEvent]:
    """About ``total`` events of whole sessions, spread over ``namespaces`` namespaces;
    sessions are numbered from ``first_session`` (a later call continues an earlier one)."""
    events: list[LedgerEvent] = []
    session_number = first_session - 1
    while len(events) < total:
        session_number += 1
        ns = Namespace("bench", f"user{session_number % namespaces}", "chat")
        sid = f"s{session_number}"
        stream = session_stream_id(ns, sid)
        version = 0
        candidates: list[CandidateExtracted] = []
        for turn in range(1, turns_per_session + 1):
            when = EPOCH + timedelta(minutes=session_number * 100 + turn)
            version += 1
            events.append(
                TranscriptObserved(
                    originator_id=stream,
                    originator_version=version,
                    recorded_at=when,
                    namespace=ns,
                    session_id=sid,
                    turn_id=turn,
                    transcript=f"user: message {turn} of {sid} about things " * 4,
                    digest=f"{session_number:08d}{turn:04d}",
                    occurred_at=when,
                )
            )
            for index in range(2):
                n = session_number * 1000 + turn * 10 + index
                subject = SUBJECTS[n % len(SUBJECTS)]
                statement = f"{subject} has {PREDICATES[n % len(PREDICATES)]} number {n}."
                version += 1
                candidate = CandidateExtracted(
                    originator_id=stream,
                    originator_version=version,
                    recorded_at=when,
                    namespace=ns,
                    session_id=sid,
                    turn_id=turn,
                    candidate_id=candidate_id(stream, turn, index),
                    index=index,
                    extractor_id="bench",
                    item=ExtractedItem(
                        kind="semantic",
                        subject=subject,
                        predicate=PREDICATES[n % len(PREDICATES)],
                        value=str(n),
                        statement=statement,
                        source="fact",
                        scope="user",
                        reason="benchmark",
                        importance=0.8,
                        confidence=0.9,
                        tags=("bench",),
                        evidence=(f"{sid}:{turn}",),
                    ),
                    occurred_at=when,
                )
                candidates.append(candidate)
                events.append(candidate)
            version += 1
            events.append(
                ExtractionCompleted(
                    originator_id=stream,
                    originator_version=version,
                    recorded_at=when,
                    namespace=ns,
                    session_id=sid,
                    turn_id=turn,
                    extractor_id="bench",
                    extracted=2,
                    rejected=0,
                )
            )
        when = EPOCH + timedelta(minutes=session_number * 100 + 99)
        version += 1
        events.append(
            SessionSealed(
                originator_id=stream,
                originator_version=version,
                recorded_at=when,
                namespace=ns,
                session_id=sid,
            )
        )
        activated: list[UUID] = []
        for c in candidates:
            normalized = normalize_statement(c.item.statement)
            mid = memory_id(ns, normalized)
            activated.append(mid)
            events.append(
                MemoryActivated(
                    originator_id=mid,
                    originator_version=1,
                    recorded_at=when,
                    namespace=ns,
                    session_id=sid,
                    turn_id=c.turn_id,
                    candidate_id=c.candidate_id,
                    decision="auto",
                    item=c.item,
                    normalized=normalized,
                    occurred_at=c.occurred_at,
                )
            )
        version += 1
        events.append(
            SessionReconciled(
                originator_id=stream,
                originator_version=version,
                recorded_at=when,
                namespace=ns,
                session_id=sid,
                report=ReconciliationReport(
                    session_id=sid, candidates=len(candidates), activated=tuple(activated)
                ),
            )
        )
    return events


def fill(engine: MemoryEngine, events: list[LedgerEvent], batch: int = 5000) -> None:
    for start in range(0, len(events), batch):
        engine.append(events[start : start + batch])


Timing = tuple[float, float]
"""(wall seconds, CPU seconds of the process)."""


def timed(fn: Any) -> Timing:
    """Wall and CPU seconds of one call of ``fn``."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def raw_scan(engine: MemoryEngine, payloads: bool = True) -> int:
    """Scan the whole log with one LMDB cursor, decoding each record's body (and, with
    ``payloads``, its event payload) to builtins; return the records seen."""
    datastore = engine.lmdb_recorder().datastore
    log = datastore.db(b"log")
    decode = msgspec.msgpack.Decoder().decode
    count = 0
    with datastore.read() as txn:
        for _key, value in txn.cursor(db=log):
            body = decode(memoryview(value)[32:])  # after the record's 32-byte hash
            if payloads:
                decode(memoryview(body[3])[1:])  # after the state's class-version byte
            count += 1
    return count


def read_decode(engine: MemoryEngine, page_size: int) -> None:
    """Every page read and decoded the general way (no projection written)."""
    position = 0
    store = ProjectionStore(":memory:", version=1)
    runner = engine.projection_runner(store, page_size=page_size)
    try:
        while (page := runner.read_page(position)) is not None:
            position = page[0]
    finally:
        store.close()


def catch_up(engine: MemoryEngine, page_size: int) -> Timing:
    """Catch a fresh projection file up from position 0 to the head."""
    with tempfile.TemporaryDirectory() as scratch:
        store = ProjectionStore(str(Path(scratch) / "p.duckdb"), version=1)
        try:
            runner = engine.projection_runner(store, page_size=page_size)
            return timed(runner.catch_up)
        finally:
            store.close()


class TimedConnection:
    """A DuckDB connection that adds up the wall seconds spent in its calls (``seconds``).

    Put in place of a projection store's connection, it splits a catch-up into DuckDB's
    share (insert, commit, lookups) and the rest (Python, msgspec, pyarrow, LMDB).
    """

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._conn, name)
        if not callable(attribute):
            return attribute

        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return attribute(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - began

        return timed


def breakdown(engine: MemoryEngine, page_size: int) -> dict[str, float]:
    """Seconds of one catch-up into a fresh file, split into reading the pages (LMDB cursor,
    record bodies, sorting events between the columnar path and the fold, decoding the
    fold's events), DuckDB calls, and the rest of applying (decoding the columnar payloads,
    building Arrow columns, the fold's Python)."""
    with tempfile.TemporaryDirectory() as scratch:
        store = ProjectionStore(str(Path(scratch) / "p.duckdb"), version=1)
        try:
            runner = engine.projection_runner(store, page_size=page_size)
            runner._load_known()
            began = time.perf_counter()
            position = 0
            while (page := runner._read_columnar_page(position, None)) is not None:
                position = page[0]
            read = time.perf_counter() - began
            timed_conn = TimedConnection(store.conn)
            store.conn = cast(Any, timed_conn)
            total = timed(runner.catch_up)[0]
            store.conn = timed_conn._conn
        finally:
            store.close()
    return {
        "total": total,
        "read": read,
        "duckdb": timed_conn.seconds,
        "apply_python": max(total - read - timed_conn.seconds, 0.0),
    }


def duckdb_beside_python(events: int) -> dict[str, float]:
    """Whether DuckDB can run beside Python in a second thread: seconds of one Arrow
    insert of ``events`` rows alone, then while the calling thread runs a Python loop.

    DuckDB's Python client takes the GIL back between the tasks of a query (to check for
    interrupts), so while another thread runs Python it waits for the interpreter's switch
    interval again and again: a page's insert cannot overlap the decoding of the next one
    in the same process. (On a busy machine part of the slowdown is the busy cores.)
    """
    import duckdb
    import pyarrow as pa

    conn = duckdb.connect()
    conn.execute("CREATE TABLE t (text VARCHAR, n BIGINT)")
    table = pa.table(
        {
            "text": pa.array([f"{n} has attribute_{n % 300} number {n}." for n in range(events)]),
            "n": pa.array(range(events), type=pa.int64()),
        }
    )

    def insert() -> None:
        conn.register("page", table)
        conn.execute("INSERT INTO t SELECT * FROM page")
        conn.unregister("page")

    figures: dict[str, float] = {}
    try:
        for label, busy in (("alone", False), ("beside_python", True), ("alone_again", False)):
            thread = threading.Thread(target=insert)
            began, cpu = time.perf_counter(), time.process_time()
            thread.start()
            spins = 0
            while busy and thread.is_alive():
                spins += 1
            thread.join()
            figures[f"{label}_seconds"] = time.perf_counter() - began
            figures[f"{label}_cpu_seconds"] = time.process_time() - cpu
    finally:
        conn.close()
    return figures


def measure(engine: MemoryEngine, page_size: int, repeat: int) -> dict[str, list[Timing]]:
    """Each measurement ``repeat`` times, in alternating order."""
    runs: dict[str, Any] = {
        "raw_scan": lambda: timed(lambda: raw_scan(engine)),
        "raw_scan_records": lambda: timed(lambda: raw_scan(engine, payloads=False)),
        "read_decode": lambda: timed(lambda: read_decode(engine, page_size)),
        "catchup": lambda: catch_up(engine, page_size),
    }
    results: dict[str, list[Timing]] = {name: [] for name in runs}
    order = list(runs)
    for round_ in range(repeat):
        for name in order if round_ % 2 == 0 else reversed(order):
            results[name].append(runs[name]())
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks catchup", description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rebuild-events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--page-size", type=int, default=25_000)
    parser.add_argument("--quick", action="store_true", help="10,000 / 50,000 events, 1 run")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.rebuild_events, args.repeat = 10_000, 50_000, 1
    rows: list[tuple[str, str]] = []
    figures: dict[str, Any] = {"load_average_before": os.getloadavg()}
    scratch = Path(tempfile.mkdtemp(prefix="bench_catchup_"))
    try:
        with MemoryEngine.open(scratch / "small", sync=False) as engine:
            fill(engine, generate(args.events))
            total = engine.head
            runs = measure(engine, args.page_size, args.repeat)
            parts = [breakdown(engine, args.page_size) for _ in range(args.repeat)]
        split = {key: median([p[key] for p in parts]) for key in parts[0]}
        beside = duckdb_beside_python(max(total, 10_000))
        wall = {name: median([t[0] for t in timings]) for name, timings in runs.items()}
        cpu = {name: median([t[1] for t in timings]) for name, timings in runs.items()}
        figures.update(
            catchup_events=total,
            catchup_seconds=wall["catchup"],
            catchup_cpu_seconds=cpu["catchup"],
            catchup_events_per_s=total / wall["catchup"],
            raw_scan_events_per_s=total / wall["raw_scan"],
            raw_scan_records_only_events_per_s=total / wall["raw_scan_records"],
            baseline_read_decode_events_per_s=total / wall["read_decode"],
            catchup_vs_raw_scan=wall["raw_scan"] / wall["catchup"],
            catchup_vs_raw_scan_cpu=cpu["raw_scan"] / cpu["catchup"],
            catchup_vs_raw_scan_records_only=wall["raw_scan_records"] / wall["catchup"],
            catchup_vs_read_decode=wall["read_decode"] / wall["catchup"],
            runs={name: [list(t) for t in timings] for name, timings in runs.items()},
        )
        figures["catchup_target_met"] = (
            figures["catchup_events_per_s"] >= 100_000 and figures["catchup_vs_raw_scan"] >= 0.5
        )

        def speed(name: str) -> str:
            return f"{total / wall[name]:,.0f} events/s ({total / cpu[name]:,.0f} per CPU second)"

        rows += [
            ("catch-up events", f"{total:,}"),
            ("raw scan: LMDB cursor + msgspec to builtins", speed("raw_scan")),
            ("  the same, record bodies only", speed("raw_scan_records")),
            ("read + decode the general way", speed("read_decode")),
            ("catch-up into a fresh file (target >= 100,000)", speed("catchup")),
            (
                "catch-up / raw scan (target >= 0.5)",
                f"{figures['catchup_vs_raw_scan']:.2f} wall, "
                f"{figures['catchup_vs_raw_scan_cpu']:.2f} CPU",
            ),
            (
                "catch-up / raw scan of record bodies",
                f"{figures['catchup_vs_raw_scan_records_only']:.2f}",
            ),
            ("catch-up / read + decode", f"{figures['catchup_vs_read_decode']:.2f}"),
        ]
        raw = wall["raw_scan"]
        figures["breakdown_seconds"] = split
        figures["breakdown_vs_raw_scan"] = {key: value / raw for key, value in split.items()}
        figures["duckdb_beside_python"] = beside
        slowdown = beside["beside_python_seconds"] / beside["alone_seconds"]
        figures["duckdb_slowdown_beside_python"] = slowdown
        rows += [
            (
                f"where catch-up time goes (in raw scans of {raw:.3f} s)",
                f"{split['total'] / raw:.2f} in all (one traced run)",
            ),
            (
                "  read pages: LMDB, record bodies, sorting, fold decoding",
                f"{split['read'] / raw:.2f}  ({1e6 * split['read'] / total:.2f} us/event)",
            ),
            (
                "  apply in Python: columnar decoding, Arrow columns, fold",
                f"{split['apply_python'] / raw:.2f}  "
                f"({1e6 * split['apply_python'] / total:.2f} us/event)",
            ),
            (
                "  DuckDB calls: insert, commit, lookups",
                f"{split['duckdb'] / raw:.2f}  ({1e6 * split['duckdb'] / total:.2f} us/event)",
            ),
            (
                "DuckDB insert beside a Python thread / alone",
                f"{slowdown:.1f}x ({beside['beside_python_seconds']:.3f} s vs "
                f"{beside['alone_seconds']:.3f} s; "
                f"CPU {beside['beside_python_cpu_seconds']:.3f} s)",
            ),
        ]
        with MemoryEngine.open(scratch / "large", sync=False) as engine:
            fill(engine, generate(args.rebuild_events))
            total = engine.head
            base = timed(lambda: read_decode(engine, args.page_size))
            rebuild = catch_up(engine, args.page_size)
        figures.update(
            rebuild_events=total,
            rebuild_seconds=rebuild[0],
            rebuild_cpu_seconds=rebuild[1],
            rebuild_events_per_s=total / rebuild[0],
            rebuild_baseline_read_decode_seconds=base[0],
            rebuild_target_met=rebuild[0] < 12.0 * total / 1_000_000,
        )
        rows += [
            ("rebuild events", f"{total:,}"),
            ("rebuild read + decode only", f"{base[0]:.2f} s"),
            (
                "full rebuild (target < 12 s per 1,000,000)",
                f"{rebuild[0]:.2f} s ({total / rebuild[0]:,.0f} events/s, {rebuild[1]:.2f} s CPU)",
            ),
        ]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    figures["load_average_after"] = os.getloadavg()
    for key in ("load_average_before", "load_average_after"):
        rows.append((key.replace("_", " "), " / ".join(f"{x:.2f}" for x in figures[key])))
    print_table("projection catch-up and rebuild (medians)", rows)
    path = save("catchup", figures)
    print(f"figures written to {path}")
    return 0
