"""Ledger append (durable): insert_events in batches of 1, 10, 100 vs SQLite, POPO, raw LMDB.

The same stored events (CandidateExtracted payloads of about 500 bytes, encoded by the
msgspec mapper outside the timing) go through four writers, in rounds that take turns so
that noise on this shared machine hits every writer alike:

- ours: ``memory_ledger.ledger.lmdb.LMDBApplicationRecorder`` with ``LMDB_SYNC`` on (fsync
  per batch;
  stream index, gapless notification id and sha256 hash chain inside the transaction);
- ``eventsourcing.sqlite.SQLiteApplicationRecorder`` on a file database (the library sets
  WAL; SQLite's default ``synchronous=FULL`` syncs the WAL on every commit);
- ``eventsourcing.popo.POPOApplicationRecorder`` (in memory, no durability: a ceiling for
  the Python-level cost of the library's interface);
- raw LMDB: py-lmdb puts of the same bytes our recorder stores (one put per event, keys in
  append order), sync on, one write transaction per batch: the physical limit here.

Figures are medians of per-batch times, reported as events/s. Targets (issue 7, item 1):
at 100-event batches ours >= 2x SQLite and >= 0.5x raw LMDB.

``--ledger postgres`` runs ``benchmarks.append_postgres`` instead (ours on PostgreSQL beside
the library's PostgreSQL recorder, and catch-up from PostgreSQL beside LMDB).
``--writers [1,2,4,8,16]`` measures group commit instead (``results/append_writers.json``):
that many threads of one process each append single commands (5 events, a turn's
extraction, through ``MemoryEngine.append``, durable; the events built before the clock
starts) as fast as they can for ``--seconds``;
concurrent commands share one LMDB transaction and one sync. Writer counts run in rounds in
alternating order (1 2 4 8 16, 16 8 4 2 1, ...), beside 8 writers with group commit off;
throughput is the median over rounds, latency percentiles pool every command. Target
(issue 19, item 3): >= 4x the one-writer throughput at 8 writers, p99 reported.

Where the time goes, per configuration: commands per sync (group), process CPU per command
(user and system, every thread: the kernel's work in each sync included), and per group the
time its leader held the writer lock (its transaction up to the commit's return, the sync
included) and the time between groups (the writer lock idle: acknowledged writers waking,
preparing their next command under the GIL and queueing).
"""

from __future__ import annotations

import argparse
import os
import struct
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

import lmdb
import msgspec
from eventsourcing.persistence import StoredEvent
from eventsourcing.popo import POPOApplicationRecorder
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

from benchmarks.append_batches import BATCH_SIZES, stored_batches
from benchmarks.corpus import BENCH_NAMESPACE, scratch
from benchmarks.results import median, percentile, print_table, save
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.ledger.events import CandidateExtracted, ExtractedItem
from memory_ledger.ledger.lmdb import LMDBApplicationRecorder, LMDBDatastore

WRITERS = ("ours", "sqlite", "popo", "raw_lmdb")
LABELS = {
    "ours": "ours (LMDB recorder)",
    "sqlite": "SQLite recorder (file)",
    "popo": "POPO recorder (memory)",
    "raw_lmdb": "raw LMDB puts",
}
_ID = struct.Struct(">Q")

Insert = Callable[[Sequence[StoredEvent]], object]


class RawLMDB:
    """py-lmdb directly: one put per event of the bytes our recorder stores, sync on."""

    def __init__(self, path: Path) -> None:
        self.env = lmdb.open(str(path), map_size=1 << 30, sync=True, metasync=True)
        self.next_id = 1
        self.encoder = msgspec.msgpack.Encoder()

    def payloads(self, batch: Sequence[StoredEvent]) -> list[bytes]:
        return [
            self.encoder.encode(
                (UUID(str(s.originator_id)).bytes, s.originator_version, s.topic, s.state)
            )
            for s in batch
        ]

    def put(self, payloads: Sequence[bytes]) -> None:
        with self.env.begin(write=True) as txn:
            for value in payloads:
                txn.put(_ID.pack(self.next_id), value, append=True)
                self.next_id += 1

    def close(self) -> None:
        self.env.close()


def measure(folder: Path, batch: int, rounds: int, warmup: int) -> dict[str, list[float]]:
    """Per-batch seconds of every writer for ``rounds`` batches of ``batch`` events."""
    total = rounds + warmup
    data = {w: stored_batches(batch, total, w) for w in ("ours", "sqlite", "popo")}
    raw = RawLMDB(folder / f"raw-{batch}")
    raw_payloads = [raw.payloads(b) for b in stored_batches(batch, total, "raw")]
    datastore = LMDBDatastore(str(folder / f"ours-{batch}"), sync=True)
    ours = LMDBApplicationRecorder(datastore)
    sqlite_store = SQLiteDatastore(str(folder / f"sqlite-{batch}.db"))
    sqlite = SQLiteApplicationRecorder(sqlite_store)
    sqlite.create_table()
    popo = POPOApplicationRecorder()
    inserts: dict[str, Insert] = {
        "ours": ours.insert_events,
        "sqlite": sqlite.insert_events,
        "popo": popo.insert_events,
    }
    times: dict[str, list[float]] = {w: [] for w in WRITERS}
    try:
        for i in range(total):
            for writer in WRITERS:
                if writer == "raw_lmdb":
                    started = time.perf_counter()
                    raw.put(raw_payloads[i])
                else:
                    events = data[writer][i]
                    started = time.perf_counter()
                    inserts[writer](events)
                elapsed = time.perf_counter() - started
                if i >= warmup:
                    times[writer].append(elapsed)
    finally:
        raw.close()
        datastore.close()
        sqlite_store.close()
    return times


def sqlite_settings(folder: Path) -> str:
    """The journal mode and synchronous level the library's SQLite datastore runs with."""
    store = SQLiteDatastore(str(folder / "probe.db"))
    try:
        with store.transaction(commit=False) as cursor:
            cursor.execute("PRAGMA journal_mode")
            mode = cursor.fetchone()[0]
            cursor.execute("PRAGMA synchronous")
            level = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(cursor.fetchone()[0], "?")
    finally:
        store.close()
    return f"journal_mode={mode}, synchronous={level}"


def command_events(writer: int, number: int) -> list[CandidateExtracted]:
    """One command of writer ``writer``: 5 candidates of a new stream (a turn's extraction)."""
    stream = uuid5(NAMESPACE_URL, f"bench-writers/{writer}/{number}")
    when = datetime(2024, 1, 1, tzinfo=UTC)
    return [
        CandidateExtracted(
            originator_id=stream,
            originator_version=version,
            recorded_at=when,
            namespace=BENCH_NAMESPACE,
            session_id=f"writer-{writer}",
            turn_id=number,
            candidate_id=uuid5(stream, str(version)),
            index=version - 1,
            extractor_id="recorded",
            item=ExtractedItem(
                kind="semantic",
                subject=f"Person {writer}",
                predicate="likes",
                value=f"thing {number}.{version}",
                statement=f"Person {writer} likes thing {number}.{version}.",
                source="fact",
                scope="user",
                reason="the user said so in this conversation",
                importance=0.8,
                confidence=0.9,
                evidence=(f"writer-{writer}:{number}",),
            ),
            occurred_at=when,
        )
        for version in range(1, 6)
    ]


class WriterRun:
    """``writers`` threads appending single commands to ``engine`` for ``seconds``."""

    def __init__(self, engine: MemoryEngine, writers: int, seconds: float, offset: int) -> None:
        self.engine = engine
        self.writers = writers
        self.seconds = seconds
        self.offset = offset
        self.latencies: list[float] = []
        self.commands = 0
        self.elapsed = 0.0
        self.cpu = 0.0

    def run(self) -> None:
        """Start every writer at once; stop them all after ``seconds``."""
        start = threading.Barrier(self.writers + 1)
        stop = threading.Event()
        lock = threading.Lock()

        # The commands are built before the clock starts (a host builds them anyway); a
        # writer that uses up its share builds more as it goes.
        share = int(self.seconds * 1500 / self.writers) + 50
        pools = [
            [command_events(self.offset + w, n) for n in range(1, share + 1)]
            for w in range(self.writers)
        ]

        def write(writer: int) -> None:
            mine: list[float] = []
            pool = pools[writer]
            number = 0
            start.wait()
            while not stop.is_set():
                number += 1
                if number <= len(pool):
                    events = pool[number - 1]
                else:
                    events = command_events(self.offset + writer, number)
                began = time.perf_counter()
                self.engine.append(events)
                mine.append(time.perf_counter() - began)
            with lock:
                self.latencies += mine
                self.commands += len(mine)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(self.writers)]
        for thread in threads:
            thread.start()
        start.wait()
        began, cpu = time.perf_counter(), time.process_time()
        time.sleep(self.seconds)
        stop.set()
        for thread in threads:
            thread.join()
        self.elapsed = time.perf_counter() - began
        self.cpu = time.process_time() - cpu


def measure_writers(
    folder: Path, counts: list[int], seconds: float, rounds: int
) -> dict[str, dict[str, Any]]:
    """Throughput and latency per configuration (``"8 (group commit off)"`` besides)."""
    configs = [(str(n), n, True) for n in counts] + [("8 (group commit off)", 8, False)]
    throughput: dict[str, list[float]] = {label: [] for label, _, _ in configs}
    latencies: dict[str, list[float]] = {label: [] for label, _, _ in configs}
    groups: dict[str, list[float]] = {label: [] for label, _, _ in configs}
    cpu: dict[str, list[float]] = {label: [] for label, _, _ in configs}
    run_ms: dict[str, list[float]] = {label: [] for label, _, _ in configs}
    gap_ms: dict[str, list[float]] = {label: [] for label, _, _ in configs}
    offset = 0
    with MemoryEngine.open(folder / "writers") as engine:
        shared = engine.lmdb_recorder().datastore.shared
        for round_ in range(rounds):
            for label, writers, grouped in configs if round_ % 2 == 0 else configs[::-1]:
                shared.group_commit.enabled = grouped
                stats = shared.group_commit.stats
                before = (stats.groups, stats.requests, stats.run_seconds)
                run = WriterRun(engine, writers, seconds, offset)
                offset += writers
                run.run()
                made = max(stats.groups - before[0], 1)
                throughput[label].append(run.commands / run.elapsed)
                cpu[label].append(run.cpu / max(run.commands, 1))
                latencies[label] += run.latencies
                groups[label].append((stats.requests - before[1]) / made)
                running = (stats.run_seconds - before[2]) / made
                run_ms[label].append(running * 1000)
                gap_ms[label].append(max(run.elapsed / made - running, 0.0) * 1000)
        shared.group_commit.enabled = True
    return {
        label: {
            "writers": writers,
            "group_commit": grouped,
            "commands_per_s": median(throughput[label]),
            "commands_per_s_runs": throughput[label],
            "events_per_s": 5 * median(throughput[label]),
            "latency_p50_ms": percentile(latencies[label], 50) * 1000,
            "latency_p99_ms": percentile(latencies[label], 99) * 1000,
            "commands_per_group": median(groups[label]),
            "cpu_ms_per_command": median(cpu[label]) * 1000,
            "group_run_ms": median(run_ms[label]),
            "group_gap_ms": median(gap_ms[label]),
        }
        for label, writers, grouped in configs
    }


def main_writers(counts: list[int], seconds: float, rounds: int, parent: str | None) -> int:
    """The group-commit benchmark (``--writers``)."""
    figures: dict[str, Any] = {"load_average_before": os.getloadavg(), "seconds": seconds}
    with scratch("bench_writers_", parent) as folder:
        results = measure_writers(folder, counts, seconds, rounds)
    figures["load_average_after"] = os.getloadavg()
    one = results["1"]["commands_per_s"] if "1" in results else None
    rows = []
    for label, entry in results.items():
        if one:
            entry["speedup_vs_one_writer"] = entry["commands_per_s"] / one
        figures[f"writers_{label}"] = entry
        speedup = f" = {entry['speedup_vs_one_writer']:.1f}x one writer" if one else ""
        rows.append(
            (
                f"{label} writer(s)",
                f"{entry['commands_per_s']:,.0f} commands/s{speedup}, p50 "
                f"{entry['latency_p50_ms']:.1f} ms, p99 {entry['latency_p99_ms']:.1f} ms, "
                f"{entry['commands_per_group']:.1f} commands per sync, "
                f"{entry['cpu_ms_per_command'] * 1000:.0f} us CPU per command; per group "
                f"{entry['group_run_ms']:.2f} ms transaction+commit (writer lock held), "
                f"{entry['group_gap_ms']:.2f} ms between groups",
            )
        )
    if one:
        # What grouping can save: the part of one writer's command that is waiting for the
        # sync (the rest is CPU, which threads of one interpreter share under the GIL).
        single = results["1"]
        waiting = max(0.0, 1.0 - single["cpu_ms_per_command"] / (1000 / one))
        figures["one_writer_waiting_share"] = waiting
        rows.append(
            (
                "one writer: time per command waiting (sync) vs CPU",
                f"{1000 / one:.2f} ms per command, {single['cpu_ms_per_command'] * 1000:.0f} us "
                f"CPU: {waiting:.0%} waiting",
            )
        )
    if one and "8" in results:
        figures["speedup_8_writers"] = results["8"]["speedup_vs_one_writer"]
        figures["target_met"] = figures["speedup_8_writers"] >= 4.0
        rows.append(("8 writers / 1 writer (target >= 4)", f"{figures['speedup_8_writers']:.1f}"))
    for key in ("load_average_before", "load_average_after"):
        rows.append((key.replace("_", " "), " / ".join(f"{x:.2f}" for x in figures[key])))
    print_table(
        f"group commit: single-command appends (5 events, durable), {rounds} rounds of "
        f"{seconds:g} s (medians)",
        rows,
    )
    print(f"figures written to {save('append_writers', figures)}")
    return 0


def main(argv: list[str]) -> int:
    if "--ledger" in argv:
        at = argv.index("--ledger")
        ledger = argv[at + 1] if at + 1 < len(argv) else ""
        rest = argv[:at] + argv[at + 2 :]
        if ledger == "postgres":
            from benchmarks.append_postgres import main as postgres_main

            return postgres_main(rest)
        if ledger != "lmdb":
            print(f"--ledger must be lmdb or postgres, got {ledger!r}")
            return 2
        argv = rest
    parser = argparse.ArgumentParser(prog="python -m benchmarks append", description=__doc__)
    parser.add_argument(
        "--rounds", type=int, default=0, help="batches per size (default: 300/200/100)"
    )
    parser.add_argument("--dir", default=None, help="scratch folder parent (default: $TMPDIR)")
    parser.add_argument("--quick", action="store_true", help="a few batches per size")
    parser.add_argument(
        "--writers",
        nargs="?",
        const="1,2,4,8,16",
        default=None,
        metavar="N,N,...",
        help="measure group commit with these writer thread counts (default 1,2,4,8,16)",
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="per writer count and round")
    parser.add_argument("--writer-rounds", type=int, default=3, help="rounds of writer counts")
    args = parser.parse_args(argv)
    if args.writers is not None:
        counts = [int(n) for n in args.writers.split(",") if n.strip()]
        if args.quick:
            args.seconds, args.writer_rounds = 0.2, 1
        return main_writers(counts, args.seconds, args.writer_rounds, args.dir)
    default_rounds = {1: 300, 10: 200, 100: 100}
    if args.quick:
        default_rounds = {1: 10, 10: 8, 100: 5}
    rows: list[tuple[str, str]] = []
    figures: dict[str, object] = {}
    per_s: dict[tuple[str, int], float] = {}
    with scratch("bench_append_", args.dir) as folder:
        settings = sqlite_settings(folder)
        for batch in BATCH_SIZES:
            rounds = args.rounds or default_rounds[batch]
            times = measure(folder, batch, rounds, warmup=max(2, rounds // 20))
            for writer in WRITERS:
                seconds = median(times[writer])
                per_s[writer, batch] = batch / seconds
                figures[f"{writer}_batch{batch}_events_per_s"] = batch / seconds
                figures[f"{writer}_batch{batch}_median_ms"] = seconds * 1000
            figures[f"batches_of_{batch}"] = rounds
    for batch in BATCH_SIZES:
        for writer in WRITERS:
            rows.append(
                (f"{batch:>3}/batch {LABELS[writer]}", f"{per_s[writer, batch]:,.0f} events/s")
            )
    over_sqlite = per_s["ours", 100] / per_s["sqlite", 100]
    over_raw = per_s["ours", 100] / per_s["raw_lmdb", 100]
    figures.update(
        ours_over_sqlite_batch100=over_sqlite,
        ours_over_raw_batch100=over_raw,
        target_over_sqlite_met=over_sqlite >= 2.0,
        target_over_raw_met=over_raw >= 0.5,
        sqlite_settings=settings,
    )
    rows += [
        ("SQLite settings", settings),
        ("ours / SQLite at 100 (target >= 2)", f"{over_sqlite:.2f}"),
        ("ours / raw LMDB at 100 (target >= 0.5)", f"{over_raw:.2f}"),
        ("ours / SQLite at 1", f"{per_s['ours', 1] / per_s['sqlite', 1]:.2f}"),
        ("ours / raw LMDB at 1", f"{per_s['ours', 1] / per_s['raw_lmdb', 1]:.2f}"),
    ]
    print_table("ledger append, durable (medians of per-batch times)", rows)
    print(f"figures written to {save('append', figures)}")
    return 0
