"""Encryption at rest: append, catch-up and recall with and without a master key (same run).

Issue #16, item 4 ("Cost"): every figure is measured on a store without a master key
(``clear``) and on one with (``sealed``: every payload AES-256-GCM sealed with its
namespace's data key) in the same process, interleaved ABBA (clear, sealed, sealed, clear,
...) so that noise on this shared machine hits both alike; medians and the ratio
``sealed / clear`` are reported.

- durable append: ``MemoryEngine.append`` of batches of 100 ``CandidateExtracted`` events
  (a new stream each; built before the clock starts; the mapper encodes, and seals, inside
  the timing), fsync per batch;
- catch-up: a fresh projection file caught up from position 0 over a ledger of the
  realistic mix of ``benchmarks.catchup`` (decrypt once per event);
- recall: live recall p50 at 16,000 memories (``benchmarks.corpus``), queries alternating
  between the two stores (the in-process index holds plaintext: no decryption there).

Targets: at most 15% slower on append and catch-up (``sealed / clear`` events/s >= 0.85),
no measurable change on recall.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.catchup import fill as fill_log
from benchmarks.catchup import generate
from benchmarks.corpus import BENCH_NAMESPACE, candidate_batches, fill, memories, queries, scratch
from benchmarks.results import median, print_table, save
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.ledger.events import LedgerEvent
from memory_ledger.projections import ProjectionStore

MODES = ("clear", "sealed")
BATCH = 100


def abba(round_: int) -> tuple[str, ...]:
    """The order of the two modes in round ``round_``: AB, BA, BA, AB, AB, BA, ..."""
    return MODES if round_ % 4 in (0, 3) else MODES[::-1]


def open_store(folder: Path, mode: str, key: bytes, *, sync: bool) -> MemoryEngine:
    return MemoryEngine.open(folder / mode, sync=sync, master_key=key if mode == "sealed" else None)


def append_batches(mode: str, count: int) -> list[list[LedgerEvent]]:
    """``count`` batches of 100 events; each batch a new stream of the bench namespace."""
    return [list(batch) for batch in candidate_batches(BATCH, count, f"encryption/{mode}")]


def measure_append(
    folder: Path, key: bytes, rounds: int, warmup: int, *, sync: bool = True
) -> dict[str, list[float]]:
    """Per-batch seconds of an append of 100 events (durable unless ``sync`` is False),
    per mode."""
    total = rounds + warmup
    data = {mode: append_batches(mode, total) for mode in MODES}
    place = folder / ("append" if sync else "append-nosync")
    engines = {mode: open_store(place, mode, key, sync=sync) for mode in MODES}
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        for i in range(total):
            for mode in abba(i):
                batch = data[mode][i]
                started = time.perf_counter()
                engines[mode].append(batch)
                elapsed = time.perf_counter() - started
                if i >= warmup:
                    times[mode].append(elapsed)
    finally:
        for engine in engines.values():
            engine.close()
    return times


def measure_catch_up(
    folder: Path, key: bytes, events: int, repeat: int, page_size: int
) -> tuple[dict[str, list[float]], dict[str, list[float]], int]:
    """Wall and CPU seconds (this process, all threads) of a fresh projection file's
    catch-up over the same events, per mode."""
    generated = generate(events)
    engines = {mode: open_store(folder / "catchup", mode, key, sync=False) for mode in MODES}
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        for engine in engines.values():
            fill_log(engine, generated)
        heads = {engine.head for engine in engines.values()}
        assert len(heads) == 1, heads
        for round_ in range(-1, repeat):  # round -1: one untimed warm-up of each
            for mode in abba(max(round_, 0)):
                with tempfile.TemporaryDirectory(dir=folder) as scratch_dir:
                    store = ProjectionStore(str(Path(scratch_dir) / "p.duckdb"), version=1)
                    try:
                        runner = engines[mode].projection_runner(store, page_size=page_size)
                        started, cpu_started = time.perf_counter(), time.process_time()
                        runner.catch_up()
                        if round_ >= 0:
                            times[mode].append(time.perf_counter() - started)
                            cpu[mode].append(time.process_time() - cpu_started)
                    finally:
                        store.close()
    finally:
        for engine in engines.values():
            engine.close()
    return times, cpu, heads.pop()


def measure_recall(
    folder: Path, key: bytes, size: int, n_queries: int, k: int
) -> dict[str, list[float]]:
    """Milliseconds of live recalls at ``size`` memories, per mode (queries alternate)."""
    corpus = memories(size)
    engines = {mode: open_store(folder / "recall", mode, key, sync=False) for mode in MODES}
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        for engine in engines.values():
            fill(engine, corpus)
            engine.catch_up()
        asked = queries(corpus, n_queries)
        results: dict[str, list[Any]] = {mode: [] for mode in MODES}
        for q in asked[:20]:  # warm both indexes
            for engine in engines.values():
                engine.recall(BENCH_NAMESPACE, q, k)
        for i, q in enumerate(asked):
            for mode in abba(i):
                recall: Callable[..., Any] = engines[mode].recall
                started = time.perf_counter()
                result = recall(BENCH_NAMESPACE, q, k)
                times[mode].append((time.perf_counter() - started) * 1000)
                results[mode].append([(h.memory_id, h.score) for h in result.results])
        assert results["clear"] == results["sealed"], "the two stores recalled differently"
    finally:
        for engine in engines.values():
            engine.close()
    return times


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks encryption", description=__doc__)
    parser.add_argument("--append-rounds", type=int, default=200, help="batches of 100 per mode")
    parser.add_argument("--events", type=int, default=100_000, help="catch-up ledger size")
    parser.add_argument("--repeat", type=int, default=6, help="catch-ups per mode")
    parser.add_argument("--page-size", type=int, default=25_000)
    parser.add_argument("--memories", type=int, default=16_000, help="recall corpus size")
    parser.add_argument("--queries", type=int, default=1000, help="recalls per mode")
    parser.add_argument("-k", type=int, default=5, help="results per recall")
    parser.add_argument("--dir", default=None, help="scratch folder parent (default: $TMPDIR)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    args = parser.parse_args(argv)
    if args.quick:
        args.append_rounds, args.events, args.repeat = 6, 2_000, 2
        args.memories, args.queries = 300, 20
    key = os.urandom(32)
    figures: dict[str, Any] = {"load_average_before": os.getloadavg()}
    with scratch("bench_encryption_", args.dir) as folder:
        warmup = max(2, args.append_rounds // 20)
        append = measure_append(folder, key, args.append_rounds, warmup)
        # The same without fsync: the CPU cost of sealing, undiluted by the disk.
        cpu_only = measure_append(folder, key, args.append_rounds, warmup, sync=False)
        catch_up, catch_up_cpu, events = measure_catch_up(
            folder, key, args.events, args.repeat, args.page_size
        )
        recall = measure_recall(folder, key, args.memories, args.queries, args.k)
    figures["load_average_after"] = os.getloadavg()
    rows: list[tuple[str, str]] = []
    for mode in MODES:
        seconds = median(append[mode])
        figures[f"append_{mode}_batch100_median_ms"] = seconds * 1000
        figures[f"append_{mode}_events_per_s"] = BATCH / seconds
        figures[f"append_nosync_{mode}_batch100_median_ms"] = median(cpu_only[mode]) * 1000
        figures[f"catchup_{mode}_events_per_s"] = events / median(catch_up[mode])
        figures[f"catchup_{mode}_cpu_s"] = median(catch_up_cpu[mode])
        figures[f"recall_{mode}_p50_ms"] = median(recall[mode])
    append_ratio = figures["append_sealed_events_per_s"] / figures["append_clear_events_per_s"]
    nosync_ratio = (
        figures["append_nosync_clear_batch100_median_ms"]
        / figures["append_nosync_sealed_batch100_median_ms"]
    )
    sealing_us = (
        (
            figures["append_nosync_sealed_batch100_median_ms"]
            - figures["append_nosync_clear_batch100_median_ms"]
        )
        * 1000
        / BATCH
    )
    catchup_ratio = figures["catchup_sealed_events_per_s"] / figures["catchup_clear_events_per_s"]
    catchup_cpu_ratio = figures["catchup_clear_cpu_s"] / figures["catchup_sealed_cpu_s"]
    opening_us = (figures["catchup_sealed_cpu_s"] - figures["catchup_clear_cpu_s"]) * 1e6 / events
    recall_ratio = figures["recall_sealed_p50_ms"] / figures["recall_clear_p50_ms"]
    figures.update(
        append_batches=args.append_rounds,
        catchup_events=events,
        catchup_runs=args.repeat,
        recall_memories=args.memories,
        recall_queries=args.queries,
        append_sealed_over_clear=append_ratio,
        append_nosync_sealed_over_clear=nosync_ratio,
        sealing_us_per_event=sealing_us,
        catchup_sealed_over_clear=catchup_ratio,
        catchup_cpu_sealed_over_clear=catchup_cpu_ratio,
        opening_cpu_us_per_event=opening_us,
        recall_p50_sealed_over_clear=recall_ratio,
        target_append_met=append_ratio >= 0.85,
        target_catchup_met=catchup_ratio >= 0.85,
    )
    for mode in MODES:
        rows += [
            (
                f"append 100/batch, durable: {mode}",
                f"{figures[f'append_{mode}_events_per_s']:,.0f} events/s "
                f"({figures[f'append_{mode}_batch100_median_ms']:.2f} ms/batch)",
            ),
            (
                f"catch-up ({events:,} events): {mode}",
                f"{figures[f'catchup_{mode}_events_per_s']:,.0f} events/s",
            ),
            (
                f"recall p50 at {args.memories:,} memories: {mode}",
                f"{figures[f'recall_{mode}_p50_ms']:.3f} ms",
            ),
        ]
    rows += [
        ("append sealed / clear (target >= 0.85)", f"{append_ratio:.3f}"),
        ("append without fsync sealed / clear (CPU only)", f"{nosync_ratio:.3f}"),
        ("sealing cost per event (append without fsync)", f"{sealing_us:.2f} us"),
        ("catch-up sealed / clear (target >= 0.85)", f"{catchup_ratio:.3f}"),
        ("catch-up CPU time: clear / sealed", f"{catchup_cpu_ratio:.3f}"),
        ("opening cost per event (catch-up CPU)", f"{opening_us:.2f} us"),
        ("recall p50 sealed / clear (target ~1)", f"{recall_ratio:.3f}"),
    ]
    for name in ("load_average_before", "load_average_after"):
        rows.append((name.replace("_", " "), " / ".join(f"{x:.2f}" for x in figures[name])))
    print_table("encryption at rest: clear vs sealed, same run, ABBA (medians)", rows)
    print(f"figures written to {save('encryption', figures)}")
    return 0
