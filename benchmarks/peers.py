"""Peers: ingest, open and recall of this engine beside LangGraph's stores, in one run.

The same ``--memories`` short memories (default 16,000, ``benchmarks.corpus``) go into
each product with the same precomputed vectors handed to it through its own hook, so no
figure includes embedding: the vectors are computed once before anything is timed
(``--vectors hash``: hashed bag-of-words vectors with a small per-text perturbation,
synthesised, the default;
``local``: the bundled all-MiniLM-L6-v2 when the ``embeddings`` extra is installed).

- memory-ledger (durable: fsync per command): ``remember`` one by one (a sample of
  ``--one-by-one``), then ``remember_many`` in batches of ``--batch``; hybrid recall
  (BM25 fused with exact cosine) p50/p99 right after ingest (background vector work
  running) and once every vector is in, query embedding excluded; then a new engine on
  the same store: open + first hybrid recall, and its warm p50/p99.
- LangGraph ``InMemoryStore`` with a vector index (nothing durable): ``put`` one by one
  and ``batch`` of puts, ``search`` with a query p50/p99.
- LangGraph ``PostgresStore`` without an index (when PostgreSQL answers at
  ``$MEMORY_LEDGER_TEST_PG``, default ``postgresql://postgres@127.0.0.1:5432/test``;
  ``synchronous_commit`` as the server has it): ``put`` one by one (the sample) and in
  batches, open (a new connection + the first search) and ``search`` p50/p99. Without an
  index a search lists the namespace (no vector search: pgvector is not on this machine),
  so its search figure is a floor, not a like-for-like recall.

Ratios are printed as this engine's figure over the peer's (ingest: memories per second,
higher is better; latencies: lower is better), with the machine's load.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.corpus import BENCH_NAMESPACE, Memory, memories, queries, scratch
from benchmarks.hybrid import HashingProvider
from benchmarks.results import median, percentile, print_table, save
from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.embeddings.base import EmbeddingDescriptor

PG_URL = os.environ.get("MEMORY_LEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
LG_NAMESPACE = ("bench", "user-1", "assistant")


class Precomputed:
    """An embedding provider that hands out vectors computed before the run (by text);
    a text it was not given is embedded by ``fallback`` (none is, in this benchmark)."""

    def __init__(self, fallback: Any, table: dict[str, np.ndarray]) -> None:
        self._fallback = fallback
        self._table = table
        self.misses = 0

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        descriptor: EmbeddingDescriptor = self._fallback.descriptor
        return descriptor

    def embed(self, texts: Sequence[str]) -> Any:
        rows = []
        for text in texts:
            vector = self._table.get(text)
            if vector is None:
                self.misses += 1
                vector = self._table[text] = np.asarray(self._fallback.embed([text])[0])
            rows.append(vector)
        return np.vstack(rows).astype(np.float32)

    def lists(self, texts: Sequence[str]) -> list[list[float]]:
        """LangGraph's embedding hook: lists of floats."""
        return [list(map(float, row)) for row in self.embed(texts)]


class NoisyHashing(HashingProvider):
    """Hashed bag-of-words vectors plus a small deterministic per-text perturbation (seeded
    by the text's sha256): plain hashed vectors of short statements tie by the thousand,
    which no model's vectors do, and ties make exact search return every tied row."""

    def embed(self, texts: Sequence[str]) -> Any:
        base = np.asarray(super().embed(texts), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
            base[row] += np.random.default_rng(seed).normal(0, 0.02, base.shape[1])
        return base / np.linalg.norm(base, axis=1, keepdims=True)


def provider_for(choice: str) -> Any:
    if choice == "local":
        from memory_ledger.commands.embeddings.local import SentenceTransformerProvider

        return SentenceTransformerProvider()
    return NoisyHashing()


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return (time.perf_counter() - started) * 1000, result


def lat(values: list[float]) -> tuple[float, float]:
    return median(values), percentile(values, 99)


def engine_figures(
    folder: Path, corpus: list[Memory], asked: list[str], vectors: Precomputed, args: Any
) -> dict[str, Any]:
    store = folder / "engine"
    engine = MemoryEngine.open(store, embeddings=vectors)
    try:
        sample = corpus[: args.one_by_one]
        one_ms = [timed(engine.remember, BENCH_NAMESPACE, m.statement)[0] for m in sample]
        rest = [m.statement for m in corpus[len(sample) :]]
        started = time.perf_counter()
        for start in range(0, len(rest), args.batch):
            engine.remember_many(BENCH_NAMESPACE, rest[start : start + args.batch])
        batched_s = time.perf_counter() - started

        def hybrid(eng: MemoryEngine) -> list[float]:
            out = []
            for q in asked:
                ms, result = timed(eng.recall, BENCH_NAMESPACE, q, 5)
                out.append(ms - ((result.semantic and result.semantic.query_embedding_ms) or 0))
            return out

        during = hybrid(engine)
        engine.wait_for_vectors(600, BENCH_NAMESPACE)
        after = hybrid(engine)
    finally:
        engine.close()
    started = time.perf_counter()
    engine = MemoryEngine.open(store, embeddings=vectors)
    engine.recall(BENCH_NAMESPACE, asked[0], 5)
    open_ms = (time.perf_counter() - started) * 1000
    try:
        engine.wait_for_vectors(600, BENCH_NAMESPACE)
        fresh = hybrid(engine)
    finally:
        engine.close()
    return {
        "one_by_one_per_s": len(sample) / (sum(one_ms) / 1000),
        "batched_per_s": len(rest) / batched_s,
        "search_after_ingest_ms": lat(during),
        "search_warm_ms": lat(after),
        "open_and_first_search_ms": open_ms,
        "search_fresh_process_ms": lat(fresh),
    }


def in_memory_figures(
    corpus: list[Memory], asked: list[str], vectors: Precomputed, args: Any
) -> dict[str, Any]:
    from langgraph.store.base import PutOp
    from langgraph.store.memory import InMemoryStore

    dims = int(vectors.descriptor.dimension)
    store = InMemoryStore(index={"dims": dims, "embed": vectors.lists, "fields": ["text"]})
    sample = corpus[: args.one_by_one * 4]
    started = time.perf_counter()
    for m in sample:
        store.put(LG_NAMESPACE, uuid.uuid4().hex, {"text": m.statement})
    one_s = time.perf_counter() - started
    rest = corpus[len(sample) :]
    started = time.perf_counter()
    for start in range(0, len(rest), args.batch):
        store.batch(
            [
                PutOp(LG_NAMESPACE, uuid.uuid4().hex, {"text": m.statement})
                for m in rest[start : start + args.batch]
            ]
        )
    batched_s = time.perf_counter() - started
    searches = [timed(store.search, LG_NAMESPACE, query=q, limit=5)[0] for q in asked]
    return {
        "one_by_one_per_s": len(sample) / one_s,
        "batched_per_s": len(rest) / batched_s,
        "search_warm_ms": lat(searches),
    }


def new_schema(prefix: str) -> str:
    """Create a schema named ``prefix`` + a random suffix in PostgreSQL at ``PG_URL`` and
    return its name; where the server does not answer, a message starting ``skipped:``."""
    import psycopg

    schema = f"{prefix}_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(PG_URL, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")  # noqa: S608 (a generated name)
    except psycopg.Error as e:
        return f"skipped: PostgreSQL not reachable at {PG_URL} ({type(e).__name__})"
    return schema


def schema_url(schema: str) -> str:
    """``PG_URL`` with ``schema`` as the search path."""
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}options=-csearch_path%3D{schema}"


def drop_schema(schema: str) -> None:
    """Drop ``schema`` (made by :func:`new_schema`) and everything in it."""
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")  # noqa: S608 (a generated name)


def postgres_figures(corpus: list[Memory], asked: list[str], args: Any) -> dict[str, Any] | str:
    try:
        import psycopg  # noqa: F401
        from langgraph.store.base import PutOp
        from langgraph.store.postgres import PostgresStore
    except ImportError as e:
        return f"skipped: {e} (pip install -e '.[bench]')"
    schema = new_schema("bench_peers")
    if schema.startswith("skipped:"):
        return schema
    url = schema_url(schema)
    try:
        with PostgresStore.from_conn_string(url) as store:
            store.setup()
            sample = corpus[: args.one_by_one]
            started = time.perf_counter()
            for m in sample:
                store.put(LG_NAMESPACE, uuid.uuid4().hex, {"text": m.statement}, index=False)
            one_s = time.perf_counter() - started
            rest = corpus[len(sample) :]
            started = time.perf_counter()
            for start in range(0, len(rest), args.batch):
                store.batch(
                    [
                        PutOp(LG_NAMESPACE, uuid.uuid4().hex, {"text": m.statement}, index=False)
                        for m in rest[start : start + args.batch]
                    ]
                )
            batched_s = time.perf_counter() - started
        started = time.perf_counter()
        with PostgresStore.from_conn_string(url) as store:
            store.search(LG_NAMESPACE, limit=5)
            open_ms = (time.perf_counter() - started) * 1000
            searches = [timed(store.search, LG_NAMESPACE, limit=5)[0] for _ in asked]
    finally:
        drop_schema(schema)
    return {
        "one_by_one_per_s": len(sample) / one_s,
        "batched_per_s": len(rest) / batched_s,
        "open_and_first_search_ms": open_ms,
        "search_warm_ms": lat(searches),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks peers", description=__doc__)
    parser.add_argument("--memories", type=int, default=16_000)
    parser.add_argument("--one-by-one", type=int, default=300, help="sample of single adds")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--vectors", choices=("hash", "local"), default="hash")
    parser.add_argument("--dir", default=None, help="scratch folder parent (default: $TMPDIR)")
    parser.add_argument("--quick", action="store_true", help="1,000 memories, few queries")
    args = parser.parse_args(argv)
    if args.quick:
        args.memories, args.one_by_one, args.batch, args.queries = 1000, 30, 200, 20
    corpus = memories(args.memories)
    asked = queries(corpus, args.queries, seed=11)
    fallback = provider_for(args.vectors)
    started = time.perf_counter()
    texts = [m.statement for m in corpus] + asked
    table = dict(zip(texts, np.asarray(fallback.embed(texts)), strict=True))
    print(f"precomputed {len(table):,} vectors in {time.perf_counter() - started:.1f} s (excluded)")
    vectors = Precomputed(fallback, table)
    with scratch("bench_peers_", args.dir) as folder:
        ours = engine_figures(folder, corpus, asked, vectors, args)
    in_memory = in_memory_figures(corpus, asked, vectors, args)
    postgres = postgres_figures(corpus, asked, args)
    load = os.getloadavg()
    rows: list[tuple[str, str]] = []

    def describe(name: str, f: dict[str, Any]) -> None:
        parts = [
            f"ingest one by one {f['one_by_one_per_s']:,.0f}/s",
            f"batched {f['batched_per_s']:,.0f}/s",
        ]
        if "open_and_first_search_ms" in f:
            parts.append(f"open + first search {f['open_and_first_search_ms']:.0f} ms")
        for key, label in (
            ("search_after_ingest_ms", "search right after ingest"),
            ("search_warm_ms", "search warm"),
            ("search_fresh_process_ms", "search, new engine"),
        ):
            if key in f:
                parts.append(f"{label} {f[key][0]:.2f} / {f[key][1]:.2f} ms")
        rows.append((name, ", ".join(parts)))

    describe("memory-ledger (durable, hybrid)", ours)
    describe("LangGraph InMemoryStore (vector index, not durable)", in_memory)
    if isinstance(postgres, dict):
        describe("LangGraph PostgresStore (no index)", postgres)
    else:
        rows.append(("LangGraph PostgresStore", postgres))
    peers = {"InMemoryStore": in_memory}
    if isinstance(postgres, dict):
        peers["PostgresStore"] = postgres
    ratios: dict[str, dict[str, float]] = {}
    for peer, f in peers.items():
        r = {
            "one_by_one": ours["one_by_one_per_s"] / f["one_by_one_per_s"],
            "batched": ours["batched_per_s"] / f["batched_per_s"],
            "search_p50": ours["search_warm_ms"][0] / f["search_warm_ms"][0],
        }
        if "open_and_first_search_ms" in f:
            r["open"] = ours["open_and_first_search_ms"] / f["open_and_first_search_ms"]
        ratios[peer] = r
        rows.append(
            (
                f"ratio memory-ledger / {peer}",
                ", ".join(f"{k} {v:.2f}x" for k, v in r.items())
                + " (ingest: higher is better; time: lower is better)",
            )
        )
    rows.append(("load average", f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (2 cores)"))
    print_table(f"peers: {args.memories:,} memories, vectors precomputed", rows)
    figures = {
        "memories": args.memories,
        "vectors": args.vectors,
        "memory_ledger": ours,
        "in_memory_store": in_memory,
        "postgres_store": postgres,
        "ratios": ratios,
        "load_average": load,
        "provider_misses": vectors.misses,
    }
    print(f"figures written to {save('peers', figures)}")
    return 0
