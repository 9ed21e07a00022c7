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
"""

from __future__ import annotations

import argparse
import struct
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from uuid import NAMESPACE_URL, UUID, uuid5

import lmdb
import msgspec
from eventsourcing.persistence import JSONTranscoder, StoredEvent
from eventsourcing.popo import POPOApplicationRecorder
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

from benchmarks.corpus import BENCH_NAMESPACE, memories, scratch
from benchmarks.results import median, print_table, save
from memory_ledger.ledger.events import CandidateExtracted, ExtractedItem
from memory_ledger.ledger.lmdb import LMDBApplicationRecorder, LMDBDatastore
from memory_ledger.ledger.mapper import MsgspecMapper

BATCH_SIZES = (1, 10, 100)
WRITERS = ("ours", "sqlite", "popo", "raw_lmdb")
LABELS = {
    "ours": "ours (LMDB recorder)",
    "sqlite": "SQLite recorder (file)",
    "popo": "POPO recorder (memory)",
    "raw_lmdb": "raw LMDB puts",
}
_ID = struct.Struct(">Q")

Insert = Callable[[Sequence[StoredEvent]], object]


def stored_batches(batch: int, count: int, tag: str) -> list[list[StoredEvent]]:
    """``count`` batches of ``batch`` stored events; each batch is one new stream."""
    mapper = MsgspecMapper(transcoder=JSONTranscoder())  # the transcoder is never used
    corpus = memories(max(batch * count, 50))
    when = datetime(2024, 1, 1, tzinfo=UTC)
    out: list[list[StoredEvent]] = []
    n = 0
    for b in range(count):
        stream = uuid5(NAMESPACE_URL, f"bench-append/{tag}/{batch}/{b}")
        events = []
        for version in range(1, batch + 1):
            m = corpus[n % len(corpus)]
            n += 1
            event = CandidateExtracted(
                originator_id=stream,
                originator_version=version,
                recorded_at=when,
                namespace=BENCH_NAMESPACE,
                session_id=f"append-{b}",
                turn_id=version,
                candidate_id=uuid5(stream, str(version)),
                index=0,
                extractor_id="recorded",
                item=ExtractedItem(
                    kind="semantic",
                    subject=m.subject,
                    predicate=m.predicate,
                    value=m.value,
                    statement=m.statement,
                    source="fact",
                    scope="user",
                    reason="the user said so in this conversation",
                    importance=0.8,
                    confidence=0.9,
                    evidence=(f"append-{b}:{version}",),
                ),
                occurred_at=when,
            )
            events.append(mapper.to_stored_event(event))
        out.append(events)
    return out


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
    args = parser.parse_args(argv)
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
