"""Ledger append on PostgreSQL (durable): ours beside the library's own recorder, same run.

``python -m benchmarks append --ledger postgres [--url URL] [--quick]``. The same stored
events (CandidateExtracted payloads of about 500 bytes, encoded outside the timing) go, in
batches of 1, 10 and 100 in alternating rounds, through:

- ours: ``memory_ledger.ledger.postgres.PostgresLedgerApplicationRecorder`` (table lock, last
  record read under it, gapless ids and sha256 hash chain computed in the transaction), each
  event with two tags and each batch with an append condition, as the engine appends;
- the library's ``eventsourcing.postgres.PostgresApplicationRecorder`` (table lock, ids from
  a sequence, no chain), with its default settings.

Each writes to its own fresh schema on the same server (dropped afterwards); both commit
durably (the server's ``synchronous_commit``, reported). Figures are medians of per-batch
times as events/s. Target (issue 15): ours >= 0.8x the library's at 100 per batch.

Then the catch-up rate of one host: the projection runner applying the same realistic event
mix (``benchmarks.catchup``) to a fresh DuckDB file from the PostgreSQL ledger and from an
LMDB ledger.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import psycopg
from eventsourcing.dcb.api import DCBAppendCondition, DCBQuery, DCBQueryItem
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg import sql

from benchmarks.append_batches import BATCH_SIZES, stored_batches
from benchmarks.catchup import fill, generate
from benchmarks.results import median, print_table, save
from memory_ledger.commands import MemoryEngine
from memory_ledger.ledger.postgres import (
    PostgresLedgerApplicationRecorder,
    PostgresLedgerURL,
    parse_ledger_url,
)
from memory_ledger.projections import ProjectionStore

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
WRITERS = ("ours", "library")
LABELS = {"ours": "ours (ledger.postgres)", "library": "library PostgresApplicationRecorder"}


def _connect(url: PostgresLedgerURL) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(
        host=url.host,
        port=url.port,
        dbname=url.dbname,
        user=url.user,
        password=url.password or None,
        autocommit=True,
    )


def _datastore(url: PostgresLedgerURL, schema: str) -> PostgresDatastore:
    return PostgresDatastore(
        dbname=url.dbname,
        host=url.host,
        port=url.port,
        user=url.user,
        password=url.password,
        schema=schema,
        pool_size=1,
    )


def _tagged(events: Sequence[StoredEvent]) -> tuple[list[list[str]], DCBAppendCondition]:
    tags = [[f"memory:{e.originator_id}", "namespace:bench"] for e in events]
    query = DCBQuery(items=[DCBQueryItem(tags=[tags[0][0]])])
    return tags, DCBAppendCondition(fail_if_events_match=query, after=0)


def measure(
    url: PostgresLedgerURL, schemas: dict[str, str], batch: int, rounds: int, warmup: int
) -> dict[str, list[float]]:
    """Per-batch seconds of both writers for ``rounds`` batches of ``batch`` events."""
    total = rounds + warmup
    data = {w: stored_batches(batch, total, f"pg-{w}") for w in WRITERS}
    stores = {w: _datastore(url, schemas[w]) for w in WRITERS}
    ours = PostgresLedgerApplicationRecorder(stores["ours"], events_table_name=f"ev{batch}")
    library = PostgresApplicationRecorder(stores["library"], events_table_name=f"ev{batch}")
    inserts: dict[str, Callable[[Sequence[StoredEvent]], object]] = {}
    for name, recorder in (("ours", ours), ("library", library)):
        recorder.create_table()
        inserts[name] = recorder.insert_events
    # Ours appends as the engine does: every event tagged (memory and namespace tags), each
    # batch conditioned on its first stream's tag (the condition is checked, and holds).
    conditioned = {id(events): _tagged(events) for events in data["ours"]}

    def ours_insert(events: Sequence[StoredEvent]) -> object:
        tags, condition = conditioned[id(events)]
        return ours.insert_events(events, tags=tags, condition=condition)

    inserts["ours"] = ours_insert
    times: dict[str, list[float]] = {w: [] for w in WRITERS}
    try:
        for i in range(total):
            for writer in WRITERS if i % 2 == 0 else reversed(WRITERS):
                events = data[writer][i]
                started = time.perf_counter()
                inserts[writer](events)
                elapsed = time.perf_counter() - started
                if i >= warmup:
                    times[writer].append(elapsed)
    finally:
        for store in stores.values():
            store.close()
    return times


def catch_up_rate(engine: MemoryEngine, page_size: int = 25_000) -> float:
    """Seconds for a projection runner to apply the whole ledger to a fresh DuckDB file."""
    with tempfile.TemporaryDirectory() as scratch:
        store = ProjectionStore(str(Path(scratch) / "p.duckdb"), version=1)
        runner = engine.projection_runner(store, page_size=page_size)
        started = time.perf_counter()
        runner.catch_up()
        seconds = time.perf_counter() - started
        store.close()
    return seconds


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks append --ledger postgres", description=__doc__
    )
    parser.add_argument("--url", default=DEFAULT_URL, help="server (a fresh schema is used)")
    parser.add_argument("--rounds", type=int, default=0, help="batches per size")
    parser.add_argument("--events", type=int, default=100_000, help="catch-up events")
    parser.add_argument("--quick", action="store_true", help="a few batches, 10,000 events")
    args = parser.parse_args(argv)
    url = parse_ledger_url(args.url)
    default_rounds = {1: 300, 10: 200, 100: 100}
    if args.quick:
        default_rounds, args.events = {1: 10, 10: 8, 100: 5}, 10_000
    schemas = {w: f"bench_{w}_{uuid.uuid4().hex[:8]}" for w in (*WRITERS, "catchup")}
    per_s: dict[tuple[str, int], float] = {}
    figures: dict[str, object] = {}
    with _connect(url) as conn:
        setting = conn.execute("SHOW synchronous_commit").fetchone()
        fsync = conn.execute("SHOW fsync").fetchone()
        for schema in schemas.values():
            conn.execute(sql.SQL("CREATE SCHEMA {0}").format(sql.Identifier(schema)))
    scratch = Path(tempfile.mkdtemp(prefix="bench_pg_"))
    try:
        for batch in BATCH_SIZES:
            rounds = args.rounds or default_rounds[batch]
            times = measure(url, schemas, batch, rounds, warmup=max(2, rounds // 20))
            for writer in WRITERS:
                seconds = median(times[writer])
                per_s[writer, batch] = batch / seconds
                figures[f"{writer}_batch{batch}_events_per_s"] = batch / seconds
                figures[f"{writer}_batch{batch}_median_ms"] = seconds * 1000
            figures[f"batches_of_{batch}"] = rounds
        events = generate(args.events)
        pg_url = f"{args.url}{'&' if '?' in args.url else '?'}schema={schemas['catchup']}"
        with MemoryEngine.open(scratch / "pg", ledger=pg_url) as engine:
            fill(engine, events)
            pg_total, pg_seconds = engine.head, catch_up_rate(engine)
        with MemoryEngine.open(scratch / "lmdb", sync=False) as engine:
            fill(engine, events)
            lmdb_total, lmdb_seconds = engine.head, catch_up_rate(engine)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        with _connect(url) as conn:
            for schema in schemas.values():
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {0} CASCADE").format(sql.Identifier(schema))
                )
    ratio = per_s["ours", 100] / per_s["library", 100]
    figures.update(
        ours_over_library_batch100=ratio,
        target_met=ratio >= 0.8,
        synchronous_commit=setting[0] if setting else None,
        fsync=fsync[0] if fsync else None,
        catchup_events=pg_total,
        catchup_postgres_events_per_s=pg_total / pg_seconds,
        catchup_lmdb_events_per_s=lmdb_total / lmdb_seconds,
    )
    rows = [
        (f"{batch:>3}/batch {LABELS[writer]}", f"{per_s[writer, batch]:,.0f} events/s")
        for batch in BATCH_SIZES
        for writer in WRITERS
    ]
    rows += [
        (
            "server synchronous_commit / fsync",
            f"{figures['synchronous_commit']} / {figures['fsync']}",
        ),
        ("ours / library at 100 (target >= 0.8)", f"{ratio:.2f}"),
        ("ours / library at 1", f"{per_s['ours', 1] / per_s['library', 1]:.2f}"),
        ("ours / library at 10", f"{per_s['ours', 10] / per_s['library', 10]:.2f}"),
        (
            f"catch-up from PostgreSQL ({pg_total:,} events)",
            f"{pg_total / pg_seconds:,.0f} events/s",
        ),
        (
            f"catch-up from LMDB ({lmdb_total:,} events)",
            f"{lmdb_total / lmdb_seconds:,.0f} events/s",
        ),
    ]
    print_table("ledger append on PostgreSQL, durable (medians of per-batch times)", rows)
    print(f"figures written to {save('append_postgres', figures)}")
    return 0
