"""Recall latency p50/p99 at 1,000 / 16,000 / 100,000 active memories, live and snapshot paths.

Each corpus is synthetic but realistic (``benchmarks.corpus``: facts about thousands of
people, 30 predicates), all in one namespace, appended as MemoryActivated events with sync
off; the store is then reopened durable. Queries are questions about stored facts ("Where
does Maya Chen work?", half by first name only), lexical path, k results.

- live: ``engine.recall(namespace, query, k)`` with no write in between (steady state);
- live after a write: the first ``engine.recall`` after another user's turn was observed
  (any ledger write moves the projection position, and the in-process index is rebuilt
  when the position moves);
- snapshot: ``session.prepare(turn, transcript)``, ``session.begin_turn(turn)``, then
  ``session.recall(query, turn)`` for a query the prepared snapshot covers, timed (a) as a
  host calls it, the first recall of the turn, and (b) with the index already rebuilt for
  the turn's position (an untimed ``engine.recall`` first): the snapshot path's own cost.

Baselines in the same run: a bare ``BM25Index.search`` on the engine's own in-process index
(the floor of the recall path), and one DuckDB point query on the ``canonical_memory``
table (what a recall served from DuckDB would pay at least). A PNG of latency against
corpus size is written beside the JSON (matplotlib, Agg backend; skipped if absent).

Targets (issue 7, item 4): at 16,000 p50 < 2 ms and p99 < 10 ms; at 100,000 p50 < 10 ms.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.corpus import (
    BENCH_NAMESPACE,
    fill,
    memories,
    queries,
    scratch,
    snapshot_queries,
)
from benchmarks.results import median, percentile, print_table, results_dir, save
from memory_ledger.commands import MemoryEngine, Namespace

OTHER_USER = Namespace("bench", "user-2", "assistant")
T = TypeVar("T")


def timed_ms(fn: Callable[..., T], *args: Any) -> tuple[float, T]:
    """Milliseconds ``fn(*args)`` took, and its result."""
    started = time.perf_counter()
    result = fn(*args)
    return (time.perf_counter() - started) * 1000, result


def summary(prefix: str, values: list[float]) -> dict[str, float]:
    return {
        f"{prefix}_p50_ms": median(values),
        f"{prefix}_p99_ms": percentile(values, 99),
        f"{prefix}_max_ms": max(values),
        f"{prefix}_samples": len(values),
    }


def measure_size(folder: Path, size: int, n_queries: int, cold: int, k: int) -> dict[str, Any]:
    corpus = memories(size)
    with MemoryEngine.open(folder, sync=False) as engine:
        fill(engine, corpus)
    figures: dict[str, Any] = {"memories": size}
    with MemoryEngine.open(folder) as engine:
        figures["open_catch_up_ms"], _ = timed_ms(engine.catch_up)
        figures["index_build_ms"], _ = timed_ms(engine.recall, BENCH_NAMESPACE, "warm up", k)
        figures["active_memories"] = engine.count_active_memories()
        asked = queries(corpus, n_queries)
        for q in asked[:20]:
            engine.recall(BENCH_NAMESPACE, q, k)
        live, hits = [], 0
        for q in asked:
            ms, result = timed_ms(engine.recall, BENCH_NAMESPACE, q, k)
            live.append(ms)
            hits += bool(result.results)
        figures.update(summary("live", live))
        figures["live_queries_with_hits"] = hits / len(asked)
        # The in-process BM25 index alone (an engine internal: this figure is about it).
        index, _ = engine.recall_index.docs(BENCH_NAMESPACE, engine.catch_up())
        bare = [timed_ms(index.search, q, k)[0] for q in asked]
        figures.update(summary("bare_bm25", bare))
        ns = BENCH_NAMESPACE
        sql = (
            "SELECT memory_id, statement FROM canonical_memory WHERE tenant = ? AND "
            "principal = ? AND scope_id = ? AND subject = ? LIMIT ?"
        )
        with engine.read_models(catch_up=False) as live:
            duck = [
                timed_ms(
                    lambda params: live.conn.execute(sql, params).fetchall(),
                    [ns.tenant, ns.principal, ns.scope_id, m.subject, k],
                )[0]
                for m in corpus[: min(200, n_queries)]
            ]
        figures.update(summary("duckdb_point_query", duck))

        other = engine.session(OTHER_USER, "other-user")
        after_write, catch_up_part, rebuild_part = [], [], []
        for i, q in enumerate(asked[:cold], start=1):
            other.observe_final_transcript(i, f"user: hello again, message {i}")
            catch_ms, _ = timed_ms(engine.catch_up)
            recall_ms, _ = timed_ms(engine.recall, BENCH_NAMESPACE, q, k)
            catch_up_part.append(catch_ms)
            rebuild_part.append(recall_ms)
            after_write.append(catch_ms + recall_ms)
        other.close()
        figures.update(summary("live_after_write", after_write))
        figures["live_after_write_catch_up_p50_ms"] = median(catch_up_part)
        figures["live_after_write_index_rebuild_p50_ms"] = median(rebuild_part)

        session = engine.session(BENCH_NAMESPACE, "bench-snapshot")
        first: list[float] = []
        current: list[float] = []
        paths: list[str] = []
        for turn, (transcript, query) in enumerate(snapshot_queries(corpus, 2 * cold), start=1):
            session.prepare(turn, transcript)
            session.begin_turn(turn)
            if turn % 2 == 0:
                engine.recall(BENCH_NAMESPACE, "warm up", 1)
            ms, snap = timed_ms(session.recall, query, turn, k)
            (current if turn % 2 == 0 else first).append(ms)
            paths.append(snap.path)
        session.close()
        figures.update(summary("snapshot_first", first))
        figures.update(summary("snapshot_current", current))
        figures["snapshot_path_share"] = paths.count("snapshot") / len(paths)
    return figures


def plot(per_size: list[dict[str, Any]], path: Path) -> str:
    """Latency against corpus size, log-log; returns a message saying what happened."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: plot skipped (pip install -e '.[bench]')"
    sizes = [f["memories"] for f in per_size]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    series = [
        ("live_p50_ms", "live p50", "-o"),
        ("live_p99_ms", "live p99", "--o"),
        ("snapshot_current_p50_ms", "snapshot p50 (index current)", "-s"),
        ("snapshot_first_p50_ms", "snapshot p50 (first recall of the turn)", "-^"),
        ("live_after_write_p50_ms", "live p50, first recall after a write", ":^"),
        ("bare_bm25_p50_ms", "baseline: bare BM25 search p50", "-.x"),
        ("duckdb_point_query_p50_ms", "baseline: one DuckDB query p50", "-.+"),
    ]
    for key, label, style in series:
        ax.plot(sizes, [f[key] for f in per_size], style, label=label)
    ax.axhline(2.0, color="grey", linewidth=0.8, linestyle=":")
    ax.axhline(10.0, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("active memories in the namespace")
    ax.set_ylabel("latency (ms)")
    ax.set_title("memory-ledger recall latency (lexical path)")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"plot written to {path}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks recall", description=__doc__)
    parser.add_argument("--sizes", default="1000,16000,100000")
    parser.add_argument("--queries", type=int, default=1000, help="live queries per size")
    parser.add_argument("--cold", type=int, default=10, help="samples per rebuilding path")
    parser.add_argument("-k", type=int, default=5, help="results per recall")
    parser.add_argument("--dir", default=None, help="scratch folder parent (default: $TMPDIR)")
    parser.add_argument("--quick", action="store_true", help="200 and 1,000 memories")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.queries, args.cold = "200,1000", 50, 3
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    per_size = []
    for size in sizes:
        with scratch(f"bench_recall_{size}_", args.dir) as folder:
            per_size.append(measure_size(folder, size, args.queries, args.cold, args.k))
    rows: list[tuple[str, str]] = []
    for f in per_size:
        n = f"{f['memories']:,}"
        rows += [
            (
                f"{n}: open catch-up / index build",
                f"{f['open_catch_up_ms']:.0f} / {f['index_build_ms']:.0f} ms",
            ),
            (f"{n}: live p50 / p99", f"{f['live_p50_ms']:.3f} / {f['live_p99_ms']:.3f} ms"),
            (
                f"{n}: snapshot p50 / p99 (index current)",
                f"{f['snapshot_current_p50_ms']:.3f} / {f['snapshot_current_p99_ms']:.3f} ms",
            ),
            (
                f"{n}: snapshot p50 / max (first recall of turn)",
                f"{f['snapshot_first_p50_ms']:.1f} / {f['snapshot_first_max_ms']:.1f} ms",
            ),
            (
                f"{n}: live p50 / max (first after a write)",
                f"{f['live_after_write_p50_ms']:.1f} / {f['live_after_write_max_ms']:.1f} ms",
            ),
            (
                f"{n}:   of which catch-up / index rebuild + search",
                f"{f['live_after_write_catch_up_p50_ms']:.1f} / "
                f"{f['live_after_write_index_rebuild_p50_ms']:.1f} ms",
            ),
            (f"{n}: baseline bare BM25 search p50", f"{f['bare_bm25_p50_ms']:.3f} ms"),
            (f"{n}: baseline one DuckDB query p50", f"{f['duckdb_point_query_p50_ms']:.3f} ms"),
            (f"{n}: live p50 / bare BM25 p50", f"{f['live_p50_ms'] / f['bare_bm25_p50_ms']:.2f}"),
            (f"{n}: snapshot path served", f"{f['snapshot_path_share']:.0%}"),
        ]
    targets: dict[str, bool] = {}
    for f in per_size:
        if f["memories"] == 16_000:
            targets["live_16k_p50_lt_2ms"] = f["live_p50_ms"] < 2
            targets["live_16k_p99_lt_10ms"] = f["live_p99_ms"] < 10
            targets["snapshot_16k_p50_lt_2ms"] = f["snapshot_first_p50_ms"] < 2
            targets["snapshot_16k_p99_lt_10ms"] = f["snapshot_first_max_ms"] < 10
        if f["memories"] == 100_000:
            targets["live_100k_p50_lt_10ms"] = f["live_p50_ms"] < 10
            targets["snapshot_100k_p50_lt_10ms"] = f["snapshot_first_p50_ms"] < 10
    for name, met in targets.items():
        rows.append((f"target {name}", "met" if met else "MISSED"))
    print_table(f"recall latency, k={args.k} (medians; p99 of the samples)", rows)
    print(plot(per_size, results_dir() / "recall_latency.png"))
    path = save("recall", {"k": args.k, "sizes": per_size, "targets": targets})
    print(f"figures written to {path}")
    return 0
