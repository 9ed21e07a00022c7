"""Read your writes: put-then-get/search, batches and first recall from the serving state.

``python -m benchmarks serving [--quick] [--pg URL] [--ingest-at 0,10000,100000] [--ingest-only]``

Issue 35 item 1 (serving read models the writer keeps current), measured against its peers
in the same run, medians, load average printed:

- LangGraph store, for LedgerStore (LMDB, durable: every command fsynced), PostgresStore
  (``langgraph-checkpoint-postgres``, its own schema of ``--pg``; skipped, saying so, when
  PostgreSQL is down) and InMemoryStore: ``put`` of a new key then ``get`` of it (the pair
  timed, p50; the ``get`` alone too), ``put`` then ``search`` for the new item's words (limit
  10), and a ``batch`` of 100 puts (median over several batches). The stores hold
  ``--preload`` items first (default 2,000; ``--quick``: 200).
- ``remember_many`` in batches of 1,000, each followed by a recall that finds the batch (so
  the figure is memories acknowledged AND lexically searchable per second; durable store),
  with the process CPU time a batch; at each store size of ``--ingest-at`` (memories
  written first, untimed; default 0, a new store). ``--ingest-only`` measures this alone.
- The first recall in the writing process after ``remember_many`` of 100,000 memories
  (``--quick``: 5,000), in batches of 10,000.

Targets (issue 35): put-then-get and put-then-search p50 at or below PostgresStore's, a
batch of 100 at or below; 10,000 searchable memories/s at batches of 1,000; the first
recall after 100,000 under 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore

from benchmarks.corpus import memories
from benchmarks.langgraph_bench import PG_URL, ledger_store, postgres_store, value
from benchmarks.results import median, percentile, save
from memory_ledger.commands import Namespace
from memory_ledger.commands.engine.memory_engine import MemoryEngine

NAMESPACE = Namespace("bench", "serving", "store")


def _ms(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


@contextmanager
def _plain() -> Iterator[BaseStore]:
    yield InMemoryStore()


def store_figures(store: BaseStore, preload: int, rounds: int) -> dict[str, float]:
    """put-then-get, put-then-search and batch-of-100 latencies of one LangGraph store."""
    ns = ("users", "serving")
    for first in range(0, preload, 100):
        store.batch([PutOp(ns, f"k{i}", value(i)) for i in range(first, min(preload, first + 100))])
    pair_get, get_only, pair_search, search_only, batches = [], [], [], [], []
    put_cpu, get_cpu, pair_get_cpu, pair_search_cpu = [], [], [], []
    for i in range(rounds):
        key, item = f"get{i}", value(preload + i)
        started, began = time.perf_counter(), time.process_time()
        store.put(ns, key, item)
        middle, put_done = time.perf_counter(), time.process_time()
        got = store.get(ns, key)
        ended, done = time.perf_counter(), time.process_time()
        assert got is not None and got.value == item, "a get right after a put missed it"
        pair_get.append((ended - started) * 1000)
        get_only.append((ended - middle) * 1000)
        put_cpu.append((put_done - began) * 1000)
        get_cpu.append((done - put_done) * 1000)
        pair_get_cpu.append((done - began) * 1000)
    for i in range(rounds):
        key = f"search{i}"
        item = {"text": f"zebra{i} walks by the river quietly", "n": i}
        started, began = time.perf_counter(), time.process_time()
        store.put(ns, key, item)
        middle = time.perf_counter()
        found = store.search(ns, query=f"zebra{i} river", limit=10)
        ended, done = time.perf_counter(), time.process_time()
        pair_search.append((ended - started) * 1000)
        search_only.append((ended - middle) * 1000)
        pair_search_cpu.append((done - began) * 1000)
        if isinstance(store, InMemoryStore):
            continue  # no ranking without an index: a scan in insertion order
        assert any(r.key == key for r in found), "a search right after a put missed it"
    for b in range(max(3, rounds // 10)):
        ops = [PutOp(ns, f"b{b}-{i}", value(i)) for i in range(100)]
        batches.append(_ms(lambda ops=ops: store.batch(ops)))  # type: ignore[misc]
    return {
        "put_then_get_p50_ms": median(pair_get),
        "put_then_get_p99_ms": percentile(pair_get, 99),
        "get_after_put_p50_ms": median(get_only),
        "put_then_search_p50_ms": median(pair_search),
        "put_then_search_p99_ms": percentile(pair_search, 99),
        "search_after_put_p50_ms": median(search_only),
        "batch_100_ms": median(batches),
        # process CPU (every thread of this process; a server's is not counted)
        "put_cpu_p50_ms": median(put_cpu),
        "get_after_put_cpu_p50_ms": median(get_cpu),
        "put_then_get_cpu_p50_ms": median(pair_get_cpu),
        "put_then_search_cpu_p50_ms": median(pair_search_cpu),
    }


def durability(name: str, store: BaseStore) -> str:
    """How a put of ``store`` is made durable, read from the store itself: PostgresStore's
    server settings (``synchronous_commit``, ``fsync``: ``on``/``on`` is a WAL flush per
    commit), LedgerStore's LMDB sync flags (on: the data pages and the meta page are
    flushed before a commit returns)."""
    if name == "PostgresStore":
        conn: Any = getattr(store, "conn", None)
        with conn.cursor() as cur:  # a Connection (from_conn_string) or a pool's
            settings = []
            for setting in ("synchronous_commit", "fsync"):
                cur.execute(f"SHOW {setting}")
                row = cur.fetchone()
                settings.append(f"{setting}={row[setting] if isinstance(row, dict) else row[0]}")
        return ", ".join(settings)
    if name == "LedgerStore":
        engine: Any = getattr(store, "engine", None)
        flags = engine.lmdb_recorder().datastore.env.flags()
        return f"LMDB sync={flags['sync']}, metasync={flags['metasync']}"
    return "in memory (not durable)"


def langgraph_section(preload: int, rounds: int, pg_url: str) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    print(f"LangGraph stores ({preload} items preloaded, {rounds} rounds; ms)")
    print(
        f"{'store':14} {'put+get p50':>12} {'get p50':>8} {'put+search p50':>15} "
        f"{'search p50':>11} {'batch of 100':>13}"
    )
    runs: list[tuple[str, Callable[[], Any]]] = [
        ("LedgerStore", ledger_store),
        ("PostgresStore", lambda: postgres_store(pg_url)),
        ("InMemoryStore", _plain),
    ]
    for name, opener in runs:
        with opener() as store:
            if store is None:
                print(f"{name:14} skipped: PostgreSQL is down or langgraph-checkpoint-postgres")
                continue
            r = store_figures(store, preload, rounds)
            r["durability"] = durability(name, store)
        figures[name] = r
        print(
            f"{name:14} {r['put_then_get_p50_ms']:>12.3f} {r['get_after_put_p50_ms']:>8.3f} "
            f"{r['put_then_search_p50_ms']:>15.3f} {r['search_after_put_p50_ms']:>11.3f} "
            f"{r['batch_100_ms']:>13.3f}",
            flush=True,
        )
    for name in ("LedgerStore", "PostgresStore"):
        if name in figures:
            print(f"  {name} durability: {figures[name]['durability']}")
    if "LedgerStore" in figures:
        r = figures["LedgerStore"]
        print(
            f"  LedgerStore process CPU p50 (ms): put {r['put_cpu_p50_ms']:.3f}, get after "
            f"put {r['get_after_put_cpu_p50_ms']:.3f}, put+get {r['put_then_get_cpu_p50_ms']:.3f}"
            f", put+search {r['put_then_search_cpu_p50_ms']:.3f}"
        )
    ours, pg = figures.get("LedgerStore"), figures.get("PostgresStore")
    if ours and pg:
        for figure in ("put_then_get_p50_ms", "put_then_search_p50_ms", "batch_100_ms"):
            ratio = ours[figure] / pg[figure]
            figures[f"ratio_{figure}"] = ratio
            print(f"  LedgerStore / PostgresStore {figure}: {ratio:.2f}")
    return figures


@contextmanager
def _engine() -> Iterator[MemoryEngine]:
    folder = Path(tempfile.mkdtemp(prefix="serving-bench-"))
    try:
        with MemoryEngine.open(folder, index_in_background=False) as engine:
            yield engine
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def searchable_section(batches: int, at: int = 0) -> dict[str, Any]:
    """``remember_many`` of 1,000, then a recall finding the batch, ``batches`` times, into
    a store holding ``at`` memories first (written untimed, in batches of 1,000). Wall and
    process CPU time (``time.process_time``, every thread) per batch, medians."""
    corpus = memories(at + batches * 1000)
    spent: list[float] = []
    cpu: list[float] = []
    with _engine() as engine:
        for first in range(0, at, 1000):
            engine.remember_many(NAMESPACE, [m.statement for m in corpus[first : first + 1000]])
        for b in range(batches):
            chunk = corpus[at + b * 1000 : at + (b + 1) * 1000]
            started, began = time.perf_counter(), time.process_time()
            engine.remember_many(NAMESPACE, [m.statement for m in chunk])
            hits = engine.recall(NAMESPACE, chunk[-1].statement, 5).results
            spent.append(time.perf_counter() - started)
            cpu.append(time.process_time() - began)
            assert any(h.statement == chunk[-1].statement for h in hits), "not searchable"
    per_s = 1000 / median(spent)
    cpu_per_s = 1000 / median(cpu)
    print(
        f"remember_many, batches of 1,000 ({batches}, store at {at:,}), acknowledged and "
        f"lexically searchable: {per_s:,.0f} memories/s (median batch {median(spent) * 1000:.0f}"
        f" ms; process CPU {median(cpu) * 1000:.0f} ms a batch, {cpu_per_s:,.0f}/s in CPU "
        f"time; load {os.getloadavg()[0]:.2f})"
    )
    return {
        "store_at": at,
        "searchable_per_s": per_s,
        "batch_1000_ms": median(spent) * 1000,
        "cpu_batch_1000_ms": median(cpu) * 1000,
        "cpu_searchable_per_s": cpu_per_s,
    }


def first_recall_section(total: int) -> dict[str, Any]:
    """The first recall in the writing process after ``remember_many`` of ``total``."""
    corpus = memories(total)
    with _engine() as engine:
        started = time.perf_counter()
        for first in range(0, total, 10_000):
            engine.remember_many(NAMESPACE, [m.statement for m in corpus[first : first + 10_000]])
        written_s = time.perf_counter() - started
        question = corpus[total // 2].statement
        first_ms = _ms(lambda: engine.recall(NAMESPACE, question, 5))
        second_ms = _ms(lambda: engine.recall(NAMESPACE, corpus[7].statement, 5))
    print(
        f"first recall after remember_many of {total:,} (written in {written_s:.1f} s, "
        f"{total / written_s:,.0f}/s): {first_ms:.1f} ms (next: {second_ms:.2f} ms)"
    )
    return {
        "memories": total,
        "write_s": written_s,
        "first_recall_ms": first_ms,
        "second_recall_ms": second_ms,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks serving")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pg", default=PG_URL)
    parser.add_argument("--preload", type=int, default=None)
    parser.add_argument(
        "--ingest-at",
        default="0",
        help="store sizes (comma-separated) at which the remember_many line is measured "
        "(default 0: a new store)",
    )
    parser.add_argument(
        "--ingest-only",
        action="store_true",
        help="only the remember_many line (no LangGraph stores, no first recall)",
    )
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.ingest_at.split(",")]
    preload = args.preload or (200 if args.quick else 2000)
    rounds = 20 if args.quick else 200
    print(f"load average {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    figures: dict[str, Any] = {"load_average": os.getloadavg()[0], "quick": args.quick}
    if not args.ingest_only:
        figures["langgraph"] = langgraph_section(preload, rounds, args.pg)
    batches = 3 if args.quick else 16
    figures["searchable_at"] = [searchable_section(batches, at) for at in sizes]
    figures["searchable"] = figures["searchable_at"][0]
    if not args.ingest_only:
        figures["first_recall"] = first_recall_section(5_000 if args.quick else 100_000)
    figures["load_average_end"] = os.getloadavg()[0]
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    path = save("serving", figures)
    print(f"figures written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(__import__("sys").argv[1:]))
