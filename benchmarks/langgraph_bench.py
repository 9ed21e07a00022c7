"""LangGraph stores: put, get and search throughput and p50/p99, and search quality (R@5)
on the LoCoMo facts, for LedgerStore, InMemoryStore and (when PostgreSQL is up) PostgresStore.

``python -m benchmarks langgraph [--quick] [--sizes 1000,16000] [--pg URL]``

Throughput, per store and size N (1,000 and 16,000; ``--quick``: 1,000): N items loaded
with ``batch`` (100 puts a batch: for LedgerStore one engine command, one sync each), then
200 single ``put`` calls of new keys, 1,000 ``get`` of random keys and 200 ``search``
calls (a two-word query, limit 10) timed one by one: ops/s and p50/p99 in ms. LedgerStore
searches rank by BM25 (no embedding function here); InMemoryStore and PostgresStore without
a vector index do not rank a query (they filter and page), so their search is a scan. The
PostgreSQL store (``langgraph-checkpoint-postgres``, the ``bench`` extra) runs in its own
schema of ``--pg`` (default ``$MEMORY_LEDGER_TEST_PG`` or
``postgresql://postgres@127.0.0.1:5432/test``), skipped when unreachable.

Quality: every observation fact of each LoCoMo conversation (``../shared/data/locomo/``,
``benchmarks.locomo.data``) is put in its own namespace of both stores as ``{"text": fact,
"evidence": [...]}`` with ``fields=["text"]`` and the same embedding function (the
deterministic hashing bag of words of ``benchmarks.hybrid``; no model); each question of
categories 1-4 is a ``search(query=...)``, limit 5; a hit when a result's evidence cites
one of the question's dia_ids. LedgerStore fuses BM25 with the cosine; InMemoryStore ranks
by cosine alone.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore

from benchmarks.hybrid import HashingProvider
from benchmarks.locomo.data import load
from benchmarks.locomo.source import BESIDE, locomo_path
from benchmarks.results import save
from memory_ledger.commands import Namespace
from memory_ledger.replay.langgraph_store import LedgerStore

PG_URL = os.environ.get("MEMORY_LEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
WORDS = "tea coffee rain garden music travel work family book dinner river morning".split()
TENANT = Namespace("bench", "langgraph", "store")


def locomo_file() -> Path:
    """``$LOCOMO_PATH``, else ``../shared/data/locomo/locomo7.json`` beside the checkout
    (:mod:`benchmarks.locomo.source`; the caller checks that it is a file)."""
    return locomo_path() or Path(os.environ.get("LOCOMO_PATH") or BESIDE)


def value(i: int) -> dict[str, Any]:
    rng = random.Random(i)
    return {"text": " ".join(rng.choices(WORDS, k=6)) + f" note {i}", "n": i % 97}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(label: str, calls: list[Callable[[], Any]]) -> dict[str, float]:
    times = []
    for call in calls:
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    total = sum(times)
    return {
        f"{label}_ops_s": len(times) / total if total else 0.0,
        f"{label}_p50_ms": percentile(times, 0.5) * 1000,
        f"{label}_p99_ms": percentile(times, 0.99) * 1000,
    }


def measure(store: BaseStore, size: int) -> dict[str, float]:
    ns = ("users", "bench")
    started = time.perf_counter()
    for first in range(0, size, 100):
        store.batch([PutOp(ns, f"k{i}", value(i)) for i in range(first, min(size, first + 100))])
    load_s = time.perf_counter() - started
    rng = random.Random(7)
    result = {"load_items_s": size / load_s}
    keys = [f"k{rng.randrange(size)}" for _ in range(1000)]
    queries = [" ".join(rng.sample(WORDS, 2)) for _ in range(200)]
    puts: list[Callable[[], Any]] = [
        functools.partial(store.put, ns, f"new{i}", value(size + i)) for i in range(200)
    ]
    gets: list[Callable[[], Any]] = [functools.partial(store.get, ns, k) for k in keys]
    searches: list[Callable[[], Any]] = [
        functools.partial(store.search, ns, query=q, limit=10) for q in queries
    ]
    result |= timed("put", puts)
    result |= timed("get", gets)
    result |= timed("search", searches)
    return result


@contextmanager
def ledger_store(index: Any = None) -> Iterator[LedgerStore]:
    folder = tempfile.mkdtemp(prefix="lg-bench-")
    try:
        store = LedgerStore.open(folder, TENANT, index=index, index_in_background=False)
        try:
            yield store
        finally:
            store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def postgres_store(url: str) -> Iterator[BaseStore | None]:
    try:
        import psycopg
        from langgraph.store.postgres import PostgresStore
    except ImportError:
        yield None
        return
    schema = "lgbench_" + uuid.uuid4().hex[:8]
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
    except psycopg.OperationalError:
        yield None
        return
    sep = "&" if "?" in url else "?"
    try:
        with PostgresStore.from_conn_string(f"{url}{sep}options=-csearch_path%3D{schema}") as store:
            store.setup()
            yield store
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def throughput(sizes: list[int], pg_url: str) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    print("throughput (ops/s; p50/p99 ms)")
    header = f"{'store':14} {'N':>6} {'load/s':>8} {'put/s':>7} {'put p50/p99':>13}"
    header += f" {'get/s':>8} {'get p50/p99':>13} {'search/s':>9} {'search p50/p99':>15}"
    print(header)
    for size in sizes:
        runs: list[tuple[str, Callable[[], Any]]] = [
            ("LedgerStore", ledger_store),
            ("InMemoryStore", lambda: _plain(InMemoryStore())),
            ("PostgresStore", lambda: postgres_store(pg_url)),
        ]
        for name, opener in runs:
            with opener() as store:
                if store is None:
                    print(
                        f"{name:14} {size:>6} skipped: no PostgreSQL server or "
                        "langgraph-checkpoint-postgres"
                    )
                    continue
                r = measure(store, size)
            figures[f"{name}_{size}"] = r
            print(
                f"{name:14} {size:>6} {r['load_items_s']:>8.0f} {r['put_ops_s']:>7.0f} "
                f"{r['put_p50_ms']:>6.2f}/{r['put_p99_ms']:<6.2f} {r['get_ops_s']:>8.0f} "
                f"{r['get_p50_ms']:>6.2f}/{r['get_p99_ms']:<6.2f} {r['search_ops_s']:>9.0f} "
                f"{r['search_p50_ms']:>7.2f}/{r['search_p99_ms']:<7.2f}",
                flush=True,
            )
    return figures


@contextmanager
def _plain(store: BaseStore) -> Iterator[BaseStore]:
    yield store


def embed_function() -> Callable[[list[str]], list[list[float]]]:
    provider = HashingProvider(256)

    def embed(texts: list[str]) -> list[list[float]]:
        return np.asarray(provider.embed(texts)).tolist()  # type: ignore[no-any-return]

    return embed


def quality(samples: int) -> dict[str, Any]:
    path = locomo_file()
    if not path.is_file():
        print(f"quality: skipped, {path} not found (set LOCOMO_PATH)")
        return {}
    conversations = load(path, [], 0)[:samples]
    index: Any = {"dims": 256, "embed": embed_function(), "fields": ["text"]}
    theirs = InMemoryStore(index=index)
    hits = {"LedgerStore": 0, "InMemoryStore": 0}
    asked = 0
    with ledger_store(index) as ours:
        for conv in conversations:
            ns = ("locomo", conv.sample_id)
            ops = [
                PutOp(ns, f"f{i}", {"text": text, "evidence": list(evidence)})
                for i, (text, evidence) in enumerate(conv.facts)
            ]
            for first in range(0, len(ops), 200):
                ours.batch(ops[first : first + 200])
                theirs.batch(ops[first : first + 200])
        ours.engine.index_vectors()
        for conv in conversations:
            ns = ("locomo", conv.sample_id)
            for question in conv.questions:
                asked += 1
                for name, store in (("LedgerStore", ours), ("InMemoryStore", theirs)):
                    found = store.search(ns, query=question.text, limit=5)
                    cited = {d for item in found for d in item.value.get("evidence", [])}
                    hits[name] += bool(cited & question.evidence)
    facts = sum(len(c.facts) for c in conversations)
    print(
        f"\nquality: LoCoMo facts R@5 ({len(conversations)} conversations, {facts} facts, "
        f"{asked} questions of categories 1-4, hashing embedding 256-d for both)"
    )
    for name, count in hits.items():
        print(f"  {name:14} R@5 {count / asked:.3f}")
    return {
        "conversations": len(conversations),
        "facts": facts,
        "questions": asked,
        **{f"{name}_recall@5": count / asked for name, count in hits.items()},
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks langgraph")
    parser.add_argument("--quick", action="store_true", help="1,000 items, 1 conversation")
    parser.add_argument("--sizes", default=None, help="comma-separated sizes (1000,16000)")
    parser.add_argument("--pg", default=PG_URL, help="PostgreSQL URL for PostgresStore")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in (args.sizes or ("1000" if args.quick else "1000,16000")).split(",")]
    figures = {"sizes": sizes, "throughput": throughput(sizes, args.pg)}
    figures["quality"] = quality(1 if args.quick else 7)
    print(f"figures written to {save('langgraph', figures)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(__import__("sys").argv[1:]))
