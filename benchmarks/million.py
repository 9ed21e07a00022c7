"""A million memories: ingest, fresh-process open and recall, RSS and disk, beside LangGraph.

For each size of ``--sizes`` (default 10,000, 100,000 and 1,000,000 memories; synthetic
facts of ``benchmarks.corpus`` in one namespace), a new store, and each step in a process of
its own (so every peak RSS is that step's: ``VmHWM``, which starts afresh at ``exec``):

- ingest (one process, the store durable: fsync per command, the default; the embedding
  provider attached, ``benchmarks.peers.NoisyHashing``: 384-dimension hashed vectors of
  ``benchmarks.hybrid.HashingProvider`` with a small per-text perturbation, no model):
  ``remember_many`` in batches of ``--batch``. Figures: memories/s acknowledged (the calls
  returned), the first recall in the writing process right after the last
  batch (what it waits for, and the semantic state it answered in), memories/s searchable
  lexically (acknowledged + that first recall) and searchable with vectors (until
  ``wait_for_vectors`` says every memory has one, up to ``--vector-budget`` seconds), and
  the process's peak RSS. The provider's own time (hashing the texts) is measured and
  taken out of every rate: the vectors count as precomputed;
- fresh reader, lexical (a new process, no provider): ``MemoryEngine.open``, then the first
  lexical recall, then ``--queries`` warm recalls, p50/p99; its peak RSS;
- fresh reader, hybrid (a new process with the provider; model load excluded: there is no
  model): the same, each recall's query embedding time
  (``RecallResult.semantic.query_embedding_ms``) taken out, with the semantic state of the
  first answer and the share of warm answers whose semantic channel was ``ready``;
- bytes on disk per memory (allocated blocks, after the readers closed): the ledger
  (``ledger/``), the DuckDB read-model slot (``projections/*.duckdb*``), the persisted recall
  index (``projections/*.recall*``) and anything else, separately.

Peers, measured after the engine at each size with the same texts and vectors:

- LangGraph ``InMemoryStore`` with a vector index (embeds inside ``put``, so acknowledged
  is searchable; nothing durable: no fresh-process figure): ``batch`` of ``--batch`` puts,
  ``search`` with a query p50/p99 (embedding excluded), peak RSS;
- LangGraph ``PostgresStore`` (PostgreSQL at ``$MEMORY_LEDGER_TEST_PG``, a schema of its
  own, dropped after). With the ``vector`` extension available on the server it gets a
  pgvector index (HNSW, cosine) and searches with a query; without it (this machine: say so
  in the output) it stores without an index and its search lists the namespace, unranked:
  a floor, not a like-for-like recall. Ingest, a fresh process's connect + first search,
  search p50/p99, table bytes per memory (``pg_total_relation_size``). Its RSS is the
  client's; the server's memory is not in it.

A peer stops at ``--peer-budget`` seconds of ingest (and ``InMemoryStore`` at
``--peer-rss-gib`` of RSS): the output says where it stopped, its figures are those of the
memories it holds then, and larger sizes skip it. Searches of a peer stop after 60 s (the
count is given). The load average is printed at each size. A plot (latencies, ingest rates,
bytes per memory against the size) goes to ``--plot`` (default ``<results>/million.png``;
the docs' copy is ``docs/img/million.png``); a Markdown table of every figure is printed.
The JSON (``<results>/million.json``) is written after each size too, so a run stopped
part-way keeps the sizes it finished; ``--render FILE...`` prints the table and draws the
plot of one or more such files (their sizes merged) without measuring.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.corpus import BENCH_NAMESPACE, memories, queries, scratch
from benchmarks.memory import child_json, compile_checkout, hwm_kib, rss_now_kib
from benchmarks.peers import (
    LG_NAMESPACE,
    PG_URL,
    NoisyHashing,
    drop_schema,
    new_schema,
    schema_url,
)
from benchmarks.results import median, percentile, print_table, results_dir, save

SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (300,)
MODULE = "benchmarks.million"
PEER_SEARCH_BUDGET_S = 60.0


class TimedProvider(NoisyHashing):
    """``benchmarks.peers.NoisyHashing`` (hashed bag-of-words vectors, a small per-text
    perturbation so that short statements do not tie by the thousand) that adds up the
    seconds spent in ``embed`` (any thread), so a rate can leave the provider out: the
    vectors count as precomputed."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds = 0.0
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Any:
        started = time.perf_counter()
        out = super().embed(texts)
        with self._lock:
            self.seconds += time.perf_counter() - started
        return out

    def lists(self, texts: Sequence[str]) -> list[list[float]]:
        """LangGraph's embedding hook (lists of floats), timed the same way."""
        started = time.perf_counter()
        out: list[list[float]] = NoisyHashing.embed(self, texts).tolist()
        with self._lock:
            self.seconds += time.perf_counter() - started
        return out


def progress(message: str) -> None:
    """A progress line on standard error, with the UTC time (long runs log it)."""
    print(f"[{time.strftime('%H:%M:%S', time.gmtime())}] {message}", file=sys.stderr, flush=True)


def lat(values: list[float]) -> dict[str, float]:
    """p50 and p99 of milliseconds."""
    return {"p50_ms": median(values), "p99_ms": percentile(values, 99), "n": len(values)}


def load_questions(path: str) -> list[str]:
    questions: list[str] = json.loads(Path(path).read_text())
    return questions


# --- children (each runs in a process of its own) -------------------------------------


def ingest_child(store: str, size: int, batch: int, asked: int, budget: float) -> dict[str, Any]:
    """Ingest ``size`` memories into a new store; write the questions beside it."""
    from memory_ledger.commands import MemoryEngine

    corpus = memories(size)
    questions = queries(corpus, asked, seed=size)
    Path(store).parent.joinpath("questions.json").write_text(json.dumps(questions))
    statements = [m.statement for m in corpus]
    del corpus
    provider = TimedProvider()
    engine = MemoryEngine.open(store, embeddings=provider)
    try:
        started = time.perf_counter()
        for start in range(0, size, batch):
            engine.remember_many(BENCH_NAMESPACE, statements[start : start + batch])
            if start // batch % max(1, size // batch // 10) == 0:
                progress(f"ingest {size:,}: {start + batch:,} acknowledged")
        ack_s = time.perf_counter() - started
        ack_provider_s = provider.seconds
        first_started = time.perf_counter()
        result = engine.recall(BENCH_NAMESPACE, questions[0], 5)
        first_ms = (time.perf_counter() - first_started) * 1000
        embedding_ms = (result.semantic and result.semantic.query_embedding_ms) or 0.0
        first_state = result.semantic.state if result.semantic else "off"
        lexical_s = time.perf_counter() - started
        progress(f"ingest {size:,}: first recall {first_ms:,.0f} ms; waiting for vectors")
        ready = engine.wait_for_vectors(budget, BENCH_NAMESPACE)
        vectors_s = time.perf_counter() - started
        status = engine.semantic_status(BENCH_NAMESPACE)
        provider_s = provider.seconds
        # The approximate index the first recall started building (from ann's threshold):
        # waited for, so the file written at close holds it for the readers.
        held = approximate_holder(engine)
        index_ready = held is not None and held.wait_index(budget)
        index_s = time.perf_counter() - first_started if index_ready else None
    finally:
        close_started = time.perf_counter()
        engine.close()
        close_s = time.perf_counter() - close_started
    return {
        "memories": size,
        "ack_s": ack_s,
        "ack_per_s": size / max(ack_s - ack_provider_s, 1e-9),
        "first_recall_after_ingest_ms": first_ms - embedding_ms,
        "first_recall_state": first_state,
        "lexical_searchable_per_s": size / max(lexical_s - ack_provider_s, 1e-9),
        "vectors_ready": ready,
        "vectors_embedded": status.embedded,
        "vectors_wait_s": vectors_s - lexical_s,
        "searchable_per_s": size / max(vectors_s - provider_s, 1e-9) if ready else None,
        "provider_s": provider_s,
        "ann_index_ready_s": index_s,
        "close_s": close_s,
        "peak_rss_kib": hwm_kib(),
    }


def approximate_holder(engine: Any) -> Any:
    """The benchmark namespace's held vectors when its search goes through the approximate
    index (``commands.recall.ann``), else None."""
    semantic = engine.semantic
    held = semantic.served.cache.get(BENCH_NAMESPACE.key()) if semantic is not None else None
    return held if held is not None and held.approximate else None


def reader_child(
    store: str, questions_file: str, hybrid: bool, *, first_only: bool = False
) -> dict[str, Any]:
    """Open the store in this fresh process; first and warm recalls; peak RSS. With
    ``first_only``: open and the first recall only (a ``--cold-runs`` repeat)."""
    from memory_ledger.commands import MemoryEngine

    questions = load_questions(questions_file)
    baseline = hwm_kib()
    started = time.perf_counter()
    engine = MemoryEngine.open(store, embeddings=NoisyHashing() if hybrid else None)
    open_ms = (time.perf_counter() - started) * 1000
    try:

        def recall_ms(question: str) -> tuple[float, str]:
            began = time.perf_counter()
            result = engine.recall(BENCH_NAMESPACE, question, 5)
            spent = (time.perf_counter() - began) * 1000
            semantic = result.semantic
            if semantic is None:
                return spent, "off"
            held = approximate_holder(engine)
            indexed.append(held is not None and held.ann_ready)
            return spent - (semantic.query_embedding_ms or 0.0), semantic.state

        indexed: list[bool] = []
        first_ms, first_state = recall_ms(questions[0])
        if first_only:
            return {
                "open_ms": open_ms,
                "first_recall_ms": first_ms,
                "open_and_first_recall_ms": open_ms + first_ms,
                "first_state": first_state,
            }
        warm = [recall_ms(q) for q in questions[1:]]
        held = approximate_holder(engine)
        ann_source = held.ann_source if held is not None else None
    finally:
        engine.close()
    return {
        "open_ms": open_ms,
        "first_recall_ms": first_ms,
        "open_and_first_recall_ms": open_ms + first_ms,
        "first_state": first_state,
        "warm": lat([ms for ms, _ in warm]),
        "warm_ready_share": sum(state == "ready" for _, state in warm) / max(len(warm), 1),
        "warm_indexed_share": sum(indexed[1:]) / max(len(warm), 1),
        "ann_source": ann_source,
        "baseline_rss_kib": baseline,
        "peak_rss_kib": hwm_kib(),
    }


def searches(search: Callable[[str], float], questions: list[str]) -> dict[str, float]:
    """Run ``search`` (returning its milliseconds) over ``questions`` for at most
    ``PEER_SEARCH_BUDGET_S`` seconds (at least 3)."""
    spent: list[float] = []
    started = time.perf_counter()
    for question in questions:
        spent.append(search(question))
        if len(spent) >= 3 and time.perf_counter() - started > PEER_SEARCH_BUDGET_S:
            break
    return lat(spent)


def statements_for(size: int) -> list[str]:
    return [m.statement for m in memories(size)]


def in_memory_child(
    size: int, questions_file: str, batch: int, budget: float, rss_cap_gib: float
) -> dict[str, Any]:
    """LangGraph ``InMemoryStore`` with a vector index: batches of puts, then searches."""
    from langgraph.store.base import PutOp
    from langgraph.store.memory import InMemoryStore

    questions = load_questions(questions_file)
    statements = statements_for(size)
    provider = TimedProvider()
    store = InMemoryStore(index={"dims": 384, "embed": provider.lists, "fields": ["text"]})
    stopped, held = "", 0
    started = time.perf_counter()
    for start in range(0, size, batch):
        store.batch(
            [
                PutOp(LG_NAMESPACE, f"m{start + i}", {"text": text})
                for i, text in enumerate(statements[start : start + batch])
            ]
        )
        held = min(start + batch, size)
        spent = time.perf_counter() - started
        if held < size and spent > budget:
            stopped = f"stopped at {held:,} of {size:,}: ingest budget {budget:.0f} s"
        elif held < size and rss_now_kib() > rss_cap_gib * 1024 * 1024:
            stopped = f"stopped at {held:,} of {size:,}: RSS over {rss_cap_gib:g} GiB"
        if stopped:
            progress(f"InMemoryStore {stopped}")
            break
    ack_s = time.perf_counter() - started - provider.seconds
    del statements

    def search(question: str) -> float:
        before = provider.seconds
        began = time.perf_counter()
        store.search(LG_NAMESPACE, query=question, limit=5)
        return (time.perf_counter() - began - (provider.seconds - before)) * 1000

    return {
        "memories": held,
        "stopped": stopped,
        "ack_per_s": held / max(ack_s, 1e-9),
        "searchable_per_s": held / max(ack_s, 1e-9),
        "search": searches(search, questions),
        "peak_rss_kib": hwm_kib(),
    }


def pgvector_available() -> bool:
    """Whether the PostgreSQL server offers the ``vector`` extension (pgvector)."""
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True, connect_timeout=3) as conn:
        row = conn.execute(
            "select count(*) from pg_available_extensions where name = 'vector'"
        ).fetchone()
    return bool(row and row[0])


def postgres_child(
    size: int, questions_file: str, batch: int, budget: float, schema: str, mode: str
) -> dict[str, Any]:
    """LangGraph ``PostgresStore`` in ``schema``: ``write`` ingests, ``read`` is a fresh
    process's connect + first search, then warm searches and the table's bytes."""
    import psycopg
    from langgraph.store.base import PutOp
    from langgraph.store.postgres import PostgresStore

    questions = load_questions(questions_file)
    provider = TimedProvider()
    vector = pgvector_available()
    index: Any = (
        {
            "dims": 384,
            "embed": provider.lists,
            "fields": ["text"],
            "ann_index_config": {"vector_type": "vector"},
        }
        if vector
        else None
    )
    if mode == "write":
        statements = statements_for(size)
        stopped, held = "", 0
        with PostgresStore.from_conn_string(schema_url(schema), index=index) as store:
            store.setup()
            started = time.perf_counter()
            for start in range(0, size, batch):
                store.batch(
                    [
                        PutOp(
                            LG_NAMESPACE,
                            f"m{start + i}",
                            {"text": text},
                            index=None if vector else False,
                        )
                        for i, text in enumerate(statements[start : start + batch])
                    ]
                )
                held = min(start + batch, size)
                if held < size and time.perf_counter() - started > budget:
                    stopped = f"stopped at {held:,} of {size:,}: ingest budget {budget:.0f} s"
                    progress(f"PostgresStore {stopped}")
                    break
            ack_s = time.perf_counter() - started - provider.seconds
        return {
            "memories": held,
            "stopped": stopped,
            "pgvector": vector,
            "ack_per_s": held / max(ack_s, 1e-9),
            "searchable_per_s": held / max(ack_s, 1e-9),
            "peak_rss_kib": hwm_kib(),
        }
    started = time.perf_counter()
    with PostgresStore.from_conn_string(schema_url(schema), index=index) as store:

        def search(question: str) -> float:
            before = provider.seconds
            began = time.perf_counter()
            if vector:
                store.search(LG_NAMESPACE, query=question, limit=5)
            else:
                store.search(LG_NAMESPACE, limit=5)
            return (time.perf_counter() - began - (provider.seconds - before)) * 1000

        first_ms = search(questions[0])
        open_ms = (time.perf_counter() - started) * 1000
        warm = searches(search, questions[1:])
    with psycopg.connect(schema_url(schema), autocommit=True) as conn:
        row = conn.execute(
            "select pg_total_relation_size('store'), (select count(*) from store), "
            + ("pg_total_relation_size('store_vectors')" if vector else "0")
        ).fetchone()
    total, rows, vector_bytes = row if row else (0, 0, 0)
    return {
        "open_and_first_search_ms": open_ms,
        "first_search_ms": first_ms,
        "search": warm,
        "table_bytes_per_memory": int(total) / max(int(rows), 1),
        "vector_bytes_per_memory": vector_bytes / max(int(rows), 1),
        "peak_rss_kib": hwm_kib(),
    }


def run_child(args: argparse.Namespace) -> dict[str, Any]:
    role = args.child
    if role == "ingest":
        return ingest_child(args.store, args.size, args.batch, args.queries, args.vector_budget)
    if role in ("lexical", "hybrid"):
        return reader_child(args.store, args.questions, role == "hybrid")
    if role in ("lexical-cold", "hybrid-cold"):
        return reader_child(args.store, args.questions, role == "hybrid-cold", first_only=True)
    if role == "inmemory":
        return in_memory_child(
            args.size, args.questions, args.batch, args.peer_budget, args.peer_rss_gib
        )
    return postgres_child(
        args.size, args.questions, args.batch, args.peer_budget, args.schema, role.split("-")[1]
    )


# --- the run ---------------------------------------------------------------------------


def disk_bytes(store: Path) -> dict[str, int]:
    """Allocated bytes (``st_blocks``, not the apparent size: the ledger's map file is
    sparse) of the store's files: ledger, DuckDB slot, recall index, the rest."""
    parts = {"ledger": 0, "duckdb": 0, "recall_index": 0, "other": 0}
    for path in store.rglob("*"):
        if not path.is_file():
            continue
        size = path.stat().st_blocks * 512
        relative = path.relative_to(store)
        if relative.parts[0] == "ledger":
            parts["ledger"] += size
        elif ".duckdb" in path.name:
            parts["duckdb"] += size
        elif ".recall" in path.name:
            parts["recall_index"] += size
        else:
            parts["other"] += size
    return parts


def cold_cell(reader: dict[str, Any]) -> str:
    """Open + first recall of a reader: one run's figure, or (``--cold-runs`` above 1) the
    median of the fresh processes with their range."""
    runs = reader.get("cold_runs_ms") or [reader["open_and_first_recall_ms"]]
    if len(runs) == 1:
        return f"{runs[0]:,.0f}"
    return (
        f"{statistics.median(runs):,.0f} (median of {len(runs)}: {min(runs):,.0f}-{max(runs):,.0f})"
    )


def child_args(args: argparse.Namespace, role: str, **extra: Any) -> list[str]:
    out = ["--child", role, "--batch", str(args.batch), "--queries", str(args.queries)]
    out += ["--vector-budget", str(args.vector_budget), "--peer-budget", str(args.peer_budget)]
    out += ["--peer-rss-gib", str(args.peer_rss_gib)]
    for key, value in extra.items():
        out += [f"--{key}", str(value)]
    return out


def engine_size(args: argparse.Namespace, size: int, folder: Path) -> dict[str, Any]:
    """Every figure of this engine at ``size``, each step in a fresh process."""
    store = folder / "store"
    questions = folder / "questions.json"
    started = time.perf_counter()
    figures: dict[str, Any] = {
        "ingest": child_json(
            MODULE, child_args(args, "ingest", store=store, size=size), show_stderr=True
        )
    }
    compile_checkout()  # the readers run from bytecode, as an installed package does
    for role in ("lexical", "hybrid"):
        progress(f"engine {size:,}: fresh {role} reader")
        reader = child_args(args, role, store=store, questions=questions)
        figures[role] = child_json(MODULE, reader, bytecode=True)
        figures[role]["cold_runs_ms"] = [figures[role]["open_and_first_recall_ms"]]
    for _ in range(args.cold_runs - 1):  # alternating, so both roles see the same minutes
        for role in ("lexical", "hybrid"):
            cold = child_args(args, f"{role}-cold", store=store, questions=questions)
            figures[role]["cold_runs_ms"].append(
                child_json(MODULE, cold, bytecode=True)["open_and_first_recall_ms"]
            )
    parts = disk_bytes(store)
    figures["disk_bytes_per_memory"] = {k: v / size for k, v in parts.items()}
    figures["disk_bytes_per_memory"]["total"] = sum(parts.values()) / size
    figures["wall_s"] = time.perf_counter() - started
    return figures


def peer_size(args: argparse.Namespace, name: str, size: int, folder: Path) -> dict[str, Any] | str:
    """A peer's figures at ``size`` (a message when it cannot run)."""
    questions = folder / "questions.json"
    started = time.perf_counter()
    got: dict[str, Any] | str
    try:
        if name == "InMemoryStore":
            got = child_json(
                MODULE,
                child_args(args, "inmemory", size=size, questions=questions),
                show_stderr=True,
            )
        else:
            got = postgres_size(args, size, questions)
    except RuntimeError as e:
        return f"failed: {str(e).splitlines()[0]}"
    if isinstance(got, str):
        return got
    got["wall_s"] = time.perf_counter() - started
    return got


def postgres_size(args: argparse.Namespace, size: int, questions: Path) -> dict[str, Any] | str:
    try:
        import langgraph.store.postgres  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as e:
        return f"skipped: {e} (pip install -e '.[bench]')"
    schema = new_schema("bench_million")
    if schema.startswith("skipped:"):
        return schema
    try:
        written = child_json(
            MODULE,
            child_args(args, "postgres-write", size=size, questions=questions, schema=schema),
            show_stderr=True,
        )
        read = child_json(
            MODULE, child_args(args, "postgres-read", size=size, questions=questions, schema=schema)
        )
    finally:
        drop_schema(schema)
    return {**written, "reader": read}


def kib_mib(kib: float) -> str:
    return f"{kib / 1024:,.0f} MiB"


def engine_rows(per_size: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """(figure, one cell per size) rows of this engine's figures."""

    def cells(fn: Callable[[dict[str, Any]], str]) -> list[str]:
        return [fn(f["engine"]) for f in per_size]

    def rate(value: float | None) -> str:
        return f"{value:,.0f}/s" if value else "not within the budget"

    return [
        ("ingest: acknowledged (memories/s)", cells(lambda e: rate(e["ingest"]["ack_per_s"]))),
        (
            "first recall in the writing process after ingest (ms; semantic state)",
            cells(
                lambda e: (
                    f"{e['ingest']['first_recall_after_ingest_ms']:,.0f} "
                    f"({e['ingest']['first_recall_state']})"
                )
            ),
        ),
        (
            "ingest: searchable lexically",
            cells(lambda e: rate(e["ingest"]["lexical_searchable_per_s"])),
        ),
        (
            "ingest: searchable with vectors",
            cells(
                lambda e: (
                    rate(e["ingest"]["searchable_per_s"])
                    + (
                        ""
                        if e["ingest"]["vectors_ready"]
                        else f" ({e['ingest']['vectors_embedded']:,} embedded)"
                    )
                )
            ),
        ),
        ("peak RSS, ingesting process", cells(lambda e: kib_mib(e["ingest"]["peak_rss_kib"]))),
        ("fresh process: open (ms)", cells(lambda e: f"{e['lexical']['open_ms']:,.0f}")),
        (
            "fresh process: open + first lexical recall (ms)",
            cells(lambda e: cold_cell(e["lexical"])),
        ),
        (
            "fresh process: open + first hybrid recall (ms; semantic state)",
            cells(lambda e: f"{cold_cell(e['hybrid'])} ({e['hybrid']['first_state']})"),
        ),
        (
            "lexical recall p50 / p99 (ms, warm)",
            cells(
                lambda e: (
                    f"{e['lexical']['warm']['p50_ms']:.2f} / {e['lexical']['warm']['p99_ms']:.2f}"
                )
            ),
        ),
        (
            "hybrid recall p50 / p99 (ms, warm, query embedding excluded; share ready)",
            cells(
                lambda e: (
                    f"{e['hybrid']['warm']['p50_ms']:.2f} / {e['hybrid']['warm']['p99_ms']:.2f}"
                    f" ({e['hybrid']['warm_ready_share']:.0%})"
                )
            ),
        ),
        (
            "approximate index: writer's build (s) / fresh hybrid reader's (how; share of warm)",
            cells(
                lambda e: (
                    (
                        "-"
                        if e["ingest"].get("ann_index_ready_s") is None
                        else f"{e['ingest']['ann_index_ready_s']:,.1f}"
                    )
                    + f" / {e['hybrid'].get('ann_source') or 'exact'}"
                    + f" ({e['hybrid'].get('warm_indexed_share', 0.0):.0%})"
                )
            ),
        ),
        (
            "peak RSS, fresh reader: lexical / hybrid",
            cells(
                lambda e: (
                    kib_mib(e["lexical"]["peak_rss_kib"])
                    + " / "
                    + kib_mib(e["hybrid"]["peak_rss_kib"])
                )
            ),
        ),
        (
            "bytes on disk per memory: ledger / DuckDB slot / recall index / other",
            cells(
                lambda e: " / ".join(
                    f"{e['disk_bytes_per_memory'][k]:,.0f}"
                    for k in ("ledger", "duckdb", "recall_index", "other")
                )
            ),
        ),
        ("wall time of the size (s)", cells(lambda e: f"{e['wall_s']:,.0f}")),
    ]


def peer_rows(per_size: list[dict[str, Any]], name: str) -> list[tuple[str, list[str]]]:
    """Rows of one peer's figures (a message where it did not run at a size)."""

    def cells(fn: Callable[[dict[str, Any]], str]) -> list[str]:
        out = []
        for f in per_size:
            got = f["peers"].get(name)
            out.append(fn(got) if isinstance(got, dict) else str(got or "not run"))
        return out

    rows = [
        (
            f"{name}: memories held (where it stopped)",
            cells(lambda p: f"{p['memories']:,}" + (f" ({p['stopped']})" if p["stopped"] else "")),
        ),
        (
            f"{name}: ingest acknowledged = searchable (memories/s)",
            cells(lambda p: f"{p['ack_per_s']:,.0f}/s"),
        ),
        (f"{name}: peak RSS, ingesting process", cells(lambda p: kib_mib(p["peak_rss_kib"]))),
    ]
    if name == "PostgresStore":
        rows += [
            (
                f"{name}: fresh process: connect + first search (ms)",
                cells(lambda p: f"{p['reader']['open_and_first_search_ms']:,.0f}"),
            ),
            (
                f"{name}: search p50 / p99 (ms, warm)",
                cells(
                    lambda p: (
                        f"{p['reader']['search']['p50_ms']:.2f} / "
                        f"{p['reader']['search']['p99_ms']:.2f}"
                    )
                ),
            ),
            (
                f"{name}: peak RSS, fresh reader (client)",
                cells(lambda p: kib_mib(p["reader"]["peak_rss_kib"])),
            ),
            (
                f"{name}: bytes per memory (table + indexes; vectors)",
                cells(
                    lambda p: (
                        f"{p['reader']['table_bytes_per_memory']:,.0f}; "
                        f"{p['reader']['vector_bytes_per_memory']:,.0f}"
                    )
                ),
            ),
        ]
    else:
        rows.append(
            (
                f"{name}: search p50 / p99 (ms, warm, query embedding excluded; queries)",
                cells(
                    lambda p: (
                        f"{p['search']['p50_ms']:.2f} / {p['search']['p99_ms']:.2f} "
                        f"({p['search']['n']:.0f})"
                    )
                ),
            )
        )
    return rows


def markdown(sizes: list[int], rows: list[tuple[str, list[str]]]) -> str:
    head = "| figure | " + " | ".join(f"{s:,}" for s in sizes) + " |"
    rule = "|---|" + "---|" * len(sizes)
    return "\n".join([head, rule, *(f"| {label} | " + " | ".join(c) + " |" for label, c in rows)])


Series = tuple[tuple[tuple[str, ...], str, str], ...]
"""(path of keys in a size's figures, label, matplotlib style) of each plotted line."""
LATENCY: Series = (
    (("engine", "lexical", "open_ms"), "open (fresh process)", "-D"),
    (("engine", "lexical", "open_and_first_recall_ms"), "open + first lexical", "-s"),
    (("engine", "hybrid", "open_and_first_recall_ms"), "open + first hybrid", "-^"),
    (("engine", "ingest", "first_recall_after_ingest_ms"), "first recall after ingest", ":o"),
    (("engine", "lexical", "warm", "p50_ms"), "lexical p50", "-o"),
    (("engine", "lexical", "warm", "p99_ms"), "lexical p99", "--o"),
    (("engine", "hybrid", "warm", "p50_ms"), "hybrid p50", "-v"),
    (("engine", "hybrid", "warm", "p99_ms"), "hybrid p99", "--v"),
    (("peers", "InMemoryStore", "search", "p50_ms"), "InMemoryStore search p50", "-x"),
    (("peers", "PostgresStore", "reader", "search", "p50_ms"), "PostgresStore search p50", "-+"),
)
INGEST: Series = (
    (("engine", "ingest", "ack_per_s"), "memory-ledger acknowledged", "-o"),
    (("engine", "ingest", "lexical_searchable_per_s"), "memory-ledger searchable, lexical", "--s"),
    (("engine", "ingest", "searchable_per_s"), "memory-ledger searchable, vectors", ":^"),
    (("peers", "InMemoryStore", "ack_per_s"), "InMemoryStore", "-x"),
    (("peers", "PostgresStore", "ack_per_s"), "PostgresStore", "-+"),
)
DISK: Series = (
    *(
        (("engine", "disk_bytes_per_memory", key), label, "-o")
        for key, label in (
            ("ledger", "ledger"),
            ("duckdb", "DuckDB slot"),
            ("recall_index", "recall index"),
            ("total", "memory-ledger total"),
        )
    ),
    (("peers", "PostgresStore", "reader", "table_bytes_per_memory"), "PostgresStore table", "-+"),
)


def plot(per_size: list[dict[str, Any]], path: Path) -> str:
    """Latencies, ingest rates and bytes per memory against the size (log-log); returns a
    message saying what happened."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: plot skipped (pip install -e '.[bench]')"
    sizes = [f["memories"] for f in per_size]
    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(15, 4.8))

    def line(ax: Any, keys: tuple[str, ...], label: str, style: str) -> None:
        points = []
        for f in per_size:
            value: Any = f
            for key in keys:
                value = value.get(key) if isinstance(value, dict) else None
            if value:
                points.append((f["memories"], value))
        if points:
            ax.plot([x for x, _ in points], [y for _, y in points], style, label=label)

    for ax, series in ((left, LATENCY), (middle, INGEST), (right, DISK)):
        for keys, label, style in series:
            line(ax, keys, label, style)
    left.set_ylabel("milliseconds")
    left.set_title("memory-ledger recall against size")
    middle.set_ylabel("memories / s (batches)")
    middle.set_title("ingest rate")
    right.set_ylabel("bytes on disk per memory")
    right.set_title("disk")
    load = max(f["load_average"][0] for f in per_size)
    for ax in (left, middle, right):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes)
        ax.set_xticklabels([f"{s:,}" for s in sizes], fontsize=7)
        ax.set_xlabel(f"memories (load up to {load:.1f}, 2 cores)")
        ax.legend(fontsize=6)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return f"plot written to {path}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks million", description=__doc__)
    parser.add_argument(
        "--sizes",
        default=",".join(str(s) for s in SIZES),
        help="comma-separated store sizes in memories (default 10000,100000,1000000)",
    )
    parser.add_argument(
        "--batch", type=int, default=1000, help="memories per remember_many / batch"
    )
    parser.add_argument("--queries", type=int, default=200, help="recalls per reader")
    parser.add_argument(
        "--cold-runs",
        type=int,
        default=1,
        help="fresh processes per reader role timing open + first recall (median reported)",
    )
    parser.add_argument(
        "--vector-budget", type=float, default=3600.0, help="seconds to wait for vectors"
    )
    parser.add_argument(
        "--peer-budget", type=float, default=900.0, help="a peer's ingest seconds per size"
    )
    parser.add_argument("--peer-rss-gib", type=float, default=6.0, help="InMemoryStore's RSS cap")
    parser.add_argument("--peers", default="InMemoryStore,PostgresStore", help="'' for none")
    parser.add_argument("--plot", default=None, help="plot path (default <results>/million.png)")
    parser.add_argument("--dir", default=None, help="scratch folder parent (default: $TMPDIR)")
    parser.add_argument("--quick", action="store_true", help="one size of 300, few queries")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    for name in ("store", "questions", "schema"):
        parser.add_argument(f"--{name}", default="", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument(
        "--render", nargs="+", default=None, help="million.json files: table and plot only"
    )
    args = parser.parse_args(argv)
    if args.render:
        return render(args.render, Path(args.plot) if args.plot else results_dir() / "million.png")
    if args.child:
        print(json.dumps(run_child(args)))
        return 0
    if args.quick:
        args.sizes, args.queries, args.batch = ",".join(map(str, QUICK_SIZES)), 10, 100
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    per_size: list[dict[str, Any]] = []
    stopped: dict[str, str] = {}
    run_started = time.perf_counter()
    for size in sizes:
        progress(f"size {size:,}: load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        size_started = time.perf_counter()
        with scratch("bench_million_", args.dir) as folder:
            figures: dict[str, Any] = {"memories": size, "engine": engine_size(args, size, folder)}
            figures["peers"] = {}
            for name in peers:
                if name in stopped:
                    figures["peers"][name] = f"not run: {stopped[name]}"
                    continue
                progress(f"{name} {size:,}")
                got = peer_size(args, name, size, folder)
                figures["peers"][name] = got
                if isinstance(got, dict) and got["stopped"]:
                    stopped[name] = f"{got['stopped']} (size {size:,})"
        figures["load_average"] = os.getloadavg()
        figures["wall_s"] = time.perf_counter() - size_started
        per_size.append(figures)
        engine = figures["engine"]
        print(
            f"  {size:,} memories: ingest {engine['ingest']['ack_per_s']:,.0f}/s acknowledged, "
            f"open + first lexical {engine['lexical']['open_and_first_recall_ms']:,.0f} ms, "
            f"open + first hybrid {engine['hybrid']['open_and_first_recall_ms']:,.0f} ms, "
            f"lexical p50 {engine['lexical']['warm']['p50_ms']:.2f} ms, "
            f"hybrid p50 {engine['hybrid']['warm']['p50_ms']:.2f} ms, "
            f"load {figures['load_average'][0]:.1f} {figures['load_average'][1]:.1f} "
            f"{figures['load_average'][2]:.1f}, wall {figures['wall_s']:,.0f} s",
            flush=True,
        )
        save("million", {"sizes": per_size, "finished": False})  # a cut run keeps its sizes
    total_s = time.perf_counter() - run_started
    publish(per_size, peers, Path(args.plot) if args.plot else results_dir() / "million.png")
    print(f"wall time {total_s:,.0f} s")
    finished = {"sizes": per_size, "wall_s": total_s, "finished": True}
    print(f"figures written to {save('million', finished)}")
    return 0


def publish(per_size: list[dict[str, Any]], peers: list[str], plot_path: Path) -> None:
    """Print the table and its Markdown, and draw the plot, of ``per_size`` figures."""
    sizes = [f["memories"] for f in per_size]
    rows = engine_rows(per_size)
    for name in peers:
        rows += peer_rows(per_size, name)
    rows.append(
        (
            "load average (1, 5, 15 min) after the size",
            [" ".join(f"{x:.1f}" for x in f["load_average"]) for f in per_size],
        )
    )
    rows.append(
        ("wall time of the size, peers included (s)", [f"{f['wall_s']:,.0f}" for f in per_size])
    )
    print_table(
        "a million memories: this engine beside LangGraph's stores",
        [
            (f"{label} @ {size:,}", cell)
            for label, cells in rows
            for size, cell in zip(sizes, cells, strict=True)
        ],
    )
    print("\nMarkdown:\n\n" + markdown(sizes, rows) + "\n")
    print(plot(per_size, plot_path))


def render(files: list[str], plot_path: Path) -> int:
    """``--render``: the table, Markdown and plot of earlier runs' ``million.json`` files,
    their sizes merged (a later file's size replaces an earlier one's); measures nothing."""
    by_size: dict[int, dict[str, Any]] = {}
    for name in files:
        for figures in json.loads(Path(name).read_text())["figures"]["sizes"]:
            by_size[figures["memories"]] = figures
    per_size = [by_size[size] for size in sorted(by_size)]
    peers = list(dict.fromkeys(name for f in per_size for name in f["peers"]))
    publish(per_size, peers, plot_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
