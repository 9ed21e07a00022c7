"""Growth: how the cost of opening, recall, ``remember``, ``remember_many``, a turn and
``finish()`` grows with the store, from 1,000 to 1,000,000 memories.

One store grows through the scales (default: 1k, 10k, 100k and 1M memories in the measured
namespace, with 10,000, 100,000, 1,000,000 and 1,100,000 ledger events in all: the rest is
other namespaces' session traffic, turns, candidates and activations of
``benchmarks.catchup``). At each scale the store is reopened durable (fsync per command, the
default) and measures:

- rebuild: the first open after the store grew, and its first recall: the persisted recall
  index (``commands/recall/index_file.py``) is behind by the whole step, so the namespace's
  index is rebuilt from the projections (and written when that engine closes);
- open: ``MemoryEngine.open`` and the first lexical recall of a new engine, which reads the
  persisted index and catches up only what changed after its position;
- recall: a lexical recall of the namespace, warm, p50 and p99 over ``--queries`` questions;
- hybrid recall (up to ``--hybrid-max`` memories): BM25 fused with exact cosine, warm, p50
  and p99, the query's embedding time excluded. The vectors are synthesised, not a model's:
  ``benchmarks.hybrid.HashingProvider`` (sha256 buckets of the tokens, 384 dimensions),
  so that a million memories need no model run; what recall does with them is the same;
- remember: one durable ``remember``, p50, beside one durable append of as many events as
  it wrote (its baseline, measured in the same run);
- remember_many: one durable batch of ``--batch`` statements, per memory and memories/s,
  beside one durable append of as many events;
- turn: ``observe_final_transcript`` with 5 recorded items (7 events in two commands), p50;
- finish: ``finish()`` of a session of 20 turns x 5 candidates (80 new facts, 10 exact
  duplicates, 10 new values of existing keys), p50, the turns' events projected before
  (a host that recalls between turns has them projected);
- recall after finish: the first recall once a finish has written (catch-up + index refresh).

Baselines, measured at each scale in the same run: one durable append of as many events as
a turn writes (two appends: 1 + 6 events) and as a finish writes (one append). A cost that
stays in step with its baseline grows only as the ledger's own writes do.

A plot of every figure against the scale goes to ``results/growth.png`` (matplotlib;
skipped, saying so, where it is absent). The machine's load average is printed at every
scale: on a shared machine it says how far the figures are from an idle one.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from uuid import NAMESPACE_URL, uuid5

import msgspec

from benchmarks.catchup import generate
from benchmarks.corpus import BENCH_NAMESPACE, Memory, activation, item, memories, queries, scratch
from benchmarks.engine import TRANSCRIPT, finish_items
from benchmarks.hybrid import HashingProvider
from benchmarks.results import median, percentile, print_table, results_dir, save
from memory_ledger.commands import MemoryEngine, RecordedExtractor
from memory_ledger.ledger.events import LedgerEvent
from memory_ledger.ledger.ids import Namespace

T = TypeVar("T")

SCALES = (
    (1_000, 10_000),
    (10_000, 100_000),
    (100_000, 1_000_000),
    (1_000_000, 1_100_000),
)
"""(memories in the measured namespace, ledger events in all) per step."""
QUICK_SCALES = ((200, 2_000), (600, 6_000))
FLOOR = Namespace("bench", "floor", "assistant")
"""Where the baselines' events go."""
SESSION_EVENTS = 122
"""Events of one filler session of ``benchmarks.catchup.generate`` (20 turns)."""


def timed_ms(fn: Callable[..., T], *args: Any) -> tuple[float, T]:
    """Milliseconds of one call and its result."""
    started = time.perf_counter()
    result = fn(*args)
    return (time.perf_counter() - started) * 1000, result


class Growth:
    """The growing store: appends memories and filler up to each scale."""

    def __init__(self, folder: Path, corpus: list[Memory]) -> None:
        self.folder = folder
        self.corpus = corpus
        self.memories = 0
        self.next_session = 1
        self.floor = 0

    def grow(self, memories_wanted: int, events_wanted: int) -> float:
        """Append up to the scale with sync off; return the seconds it took (with catch-up)."""
        started = time.perf_counter()
        with MemoryEngine.open(self.folder, sync=False) as engine:
            batch: list[LedgerEvent] = []
            for index in range(self.memories, memories_wanted):
                batch.append(activation(BENCH_NAMESPACE, self.corpus[index], index))
                if len(batch) == 5000:
                    engine.append(batch)
                    batch = []
            if batch:
                engine.append(batch)
            self.memories = max(self.memories, memories_wanted)
            missing = events_wanted - engine.head
            if missing > 0:
                sessions = -(-missing // SESSION_EVENTS)
                filler = generate(sessions * SESSION_EVENTS, first_session=self.next_session)
                self.next_session += sessions
                for start in range(0, len(filler), 5000):
                    engine.append(filler[start : start + 5000])
            engine.catch_up()
        return time.perf_counter() - started

    def floor_events(self, count: int) -> list[LedgerEvent]:
        """``count`` activations in the floor namespace, never written before."""
        events: list[LedgerEvent] = []
        for _ in range(count):
            self.floor += 1
            events.append(
                msgspec.structs.replace(
                    activation(FLOOR, self.corpus[self.floor % len(self.corpus)], self.floor),
                    originator_id=uuid5(NAMESPACE_URL, f"bench-growth-floor-{self.floor}"),
                )
            )
        return events


def open_and_recall(folder: Path, question: str) -> tuple[float, float, str]:
    """Milliseconds of ``MemoryEngine.open`` + the first lexical recall, of the close (which
    writes the persisted index when it changed), and how the index came (file / built)."""
    started = time.perf_counter()
    engine = MemoryEngine.open(folder)
    engine.recall(BENCH_NAMESPACE, question, 5)
    open_ms = (time.perf_counter() - started) * 1000
    how = engine.recall_index.loaded.get(BENCH_NAMESPACE.key(), "?")
    close_ms = timed_ms(engine.close)[0]
    return open_ms, close_ms, how


def hybrid_figures(folder: Path, questions: list[str]) -> dict[str, Any]:
    """Warm hybrid recall p50/p99 (query embedding excluded) with synthesised vectors."""
    engine = MemoryEngine.open(folder, embeddings=HashingProvider(), index_in_background=False)
    try:
        started = time.perf_counter()
        engine.index_vectors()
        vectors_s = time.perf_counter() - started
        engine.recall(BENCH_NAMESPACE, questions[0], 5)  # loads the namespace's vectors
        spent = []
        for question in questions:
            elapsed, result = timed_ms(engine.recall, BENCH_NAMESPACE, question, 5)
            embedding = result.semantic.query_embedding_ms if result.semantic else None
            spent.append(elapsed - (embedding or 0.0))
        return {
            "hybrid_p50_ms": median(spent),
            "hybrid_p99_ms": percentile(spent, 99),
            "vectors_build_s": vectors_s,
        }
    finally:
        engine.close()


def remember_figures(
    engine: MemoryEngine, growth: Growth, fresh: list[Memory], count: int, batch: int
) -> dict[str, Any]:
    """Durable ``remember`` p50 and one ``remember_many`` of ``batch``, each beside a durable
    append of as many events (the baselines)."""
    spent, floor_ms, written = [], [], 0
    for memory in fresh[:count]:
        before = engine.appended
        spent.append(timed_ms(engine.remember, BENCH_NAMESPACE, memory.statement)[0])
        written = engine.appended - before
        floor_ms.append(timed_ms(engine.append, growth.floor_events(written))[0])
    statements = [m.statement for m in fresh[count : count + batch]]
    before = engine.appended
    many_ms = timed_ms(engine.remember_many, BENCH_NAMESPACE, statements)[0]
    many_events = engine.appended - before
    many_floor_ms = timed_ms(engine.append, growth.floor_events(many_events))[0]
    return {
        "remember_p50_ms": median(spent),
        "remember_events": written,
        "remember_baseline_p50_ms": median(floor_ms),
        "remember_over_baseline": median(spent) / median(floor_ms),
        "remember_many_per_memory_ms": many_ms / len(statements),
        "remember_many_per_s": len(statements) / (many_ms / 1000),
        "remember_many_events": many_events,
        "remember_many_baseline_ms": many_floor_ms,
    }


def measure(
    growth: Growth,
    scale: int,
    fresh: list[Memory],
    turns: int,
    finishes: int,
    asked: int,
    *,
    hybrid: bool = True,
    batch: int = 1000,
) -> dict[str, Any]:
    """Every figure of one scale (the store is opened durable)."""
    canonical = growth.corpus[: growth.memories]
    questions = queries(canonical, asked, seed=scale)
    rebuild_ms, persist_ms, rebuilt_how = open_and_recall(growth.folder, questions[0])
    open_ms, _, how = open_and_recall(growth.folder, questions[1 % len(questions)])
    figures: dict[str, Any] = {
        "rebuild_open_and_first_recall_ms": rebuild_ms,
        "rebuild_how": rebuilt_how,
        "persist_index_ms": persist_ms,
        "open_and_first_recall_ms": open_ms,
        "open_how": how,
    }
    if hybrid:
        figures.update(hybrid_figures(growth.folder, questions))
    engine = MemoryEngine.open(growth.folder)
    try:
        recall_ms = [timed_ms(engine.recall, BENCH_NAMESPACE, q, 5)[0] for q in questions]
        figures["recall_p50_ms"] = median(recall_ms)
        figures["recall_p99_ms"] = percentile(recall_ms, 99)
        figures.update(remember_figures(engine, growth, fresh[80 * finishes :], 20, batch))
        extractor = RecordedExtractor()
        session = engine.session(BENCH_NAMESPACE, f"growth-turns-{scale}", extractor=extractor)
        turn_ms, turn_floor_ms = [], []
        spare = fresh[-400:]  # never among finish()'s new facts nor remembered
        for turn in range(1, turns + 1):
            picked = [spare[(turn * 5 + i) % len(spare)] for i in range(5)]
            extractor.provide(turn, [item(m, f"growth-turns-{scale}:{turn}") for m in picked])
            turn_ms.append(
                timed_ms(session.observe_final_transcript, turn, TRANSCRIPT.format(turn=turn))[0]
            )
            evidence, extraction = growth.floor_events(1), growth.floor_events(6)
            started = time.perf_counter()
            engine.append(evidence)
            engine.append(extraction)
            turn_floor_ms.append((time.perf_counter() - started) * 1000)
        session.close()
        figures["turn_p50_ms"] = median(turn_ms)
        figures["turn_baseline_p50_ms"] = median(turn_floor_ms)
        rng = random.Random(scale)
        finish_ms, finish_floor_ms, after_ms, written = [], [], [], 0
        for number in range(finishes):
            extractor = RecordedExtractor()
            name = f"growth-finish-{scale}-{number}"
            session = engine.session(BENCH_NAMESPACE, name, extractor=extractor)
            items = finish_items(fresh, canonical, number, rng)
            for turn in range(1, 21):
                extractor.provide(turn, items[(turn - 1) * 5 : turn * 5])
                session.observe_final_transcript(turn, TRANSCRIPT.format(turn=turn))
            engine.catch_up()  # the turns' events are not finish()'s to project
            before = engine.appended
            finish_ms.append(timed_ms(session.finish)[0])
            written = engine.appended - before
            after_ms.append(timed_ms(engine.recall, BENCH_NAMESPACE, questions[number], 5)[0])
            floor = growth.floor_events(written)
            finish_floor_ms.append(timed_ms(engine.append, floor)[0])
            session.close()
        figures.update(
            finish_p50_ms=median(finish_ms),
            finish_events=written,
            finish_baseline_p50_ms=median(finish_floor_ms),
            recall_after_finish_p50_ms=median(after_ms),
            turn_over_baseline=figures["turn_p50_ms"] / figures["turn_baseline_p50_ms"],
            finish_over_baseline=median(finish_ms) / median(finish_floor_ms),
            ledger_events=engine.head,
            store_memories=engine.count_active_memories(),
            namespace_memories=engine.count_active_memories(BENCH_NAMESPACE),
        )
    finally:
        engine.close()
    return figures


SERIES = (
    ("rebuild_open_and_first_recall_ms", "first open after growth (index rebuilt)", ":D"),
    ("open_and_first_recall_ms", "open + first lexical recall (persisted index)", "-D"),
    ("recall_p50_ms", "lexical recall p50 (warm)", "-o"),
    ("recall_p99_ms", "lexical recall p99 (warm)", "--o"),
    ("hybrid_p50_ms", "hybrid recall p50 (warm, query embedding excluded)", "-v"),
    ("hybrid_p99_ms", "hybrid recall p99", "--v"),
    ("remember_p50_ms", "remember p50 (durable)", "-P"),
    ("remember_baseline_p50_ms", "baseline: 1 append of remember's events", "--P"),
    ("remember_many_per_memory_ms", "remember_many per memory (durable batch)", "-X"),
    ("recall_after_finish_p50_ms", "first recall after a finish", ":o"),
    ("turn_p50_ms", "turn p50 (5 items, durable)", "-s"),
    ("turn_baseline_p50_ms", "baseline: 2 appends of a turn's events", "--s"),
    ("finish_p50_ms", "finish() p50 (100 candidates)", "-^"),
    ("finish_baseline_p50_ms", "baseline: 1 append of finish's events", "--^"),
)


def plot(per_scale: list[dict[str, Any]], path: Path) -> str:
    """Every figure against the scale, log-log; returns a message saying what happened."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullFormatter
    except ImportError:
        return "matplotlib is not installed: plot skipped (pip install -e '.[bench]')"
    sizes = [f["scale_memories"] for f in per_scale]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for key, label, style in SERIES:
        points = [(f["scale_memories"], f[key]) for f in per_scale if f.get(key)]
        if points:
            ax.plot([x for x, _ in points], [y for _, y in points], style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sizes)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticklabels(
        [f"{f['scale_memories']:,}\n{f['ledger_events']:,} ev" for f in per_scale], fontsize=7
    )
    ax.set_xlabel("memories in the namespace / events in the ledger")
    ax.set_ylabel("milliseconds")
    load = max(f["load_average"][0] for f in per_scale)
    ax.set_title(f"memory-ledger: cost against store size (durable; load up to {load:.1f})")
    ax.legend(fontsize=6)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"plot written to {path}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks growth", description=__doc__)
    parser.add_argument("--turns", type=int, default=20, help="turns measured per scale")
    parser.add_argument("--finishes", type=int, default=3, help="finish() runs per scale")
    parser.add_argument("--queries", type=int, default=100, help="recalls per scale")
    parser.add_argument("--dir", default=None, help="scratch folder parent (default: $TMPDIR)")
    parser.add_argument("--quick", action="store_true", help="two tiny scales, few runs")
    parser.add_argument(
        "--max", type=int, default=None, help="largest scale in memories (default: all)"
    )
    parser.add_argument(
        "--hybrid-max",
        type=int,
        default=100_000,
        help="measure hybrid recall up to this many memories (vectors are synthesised)",
    )
    parser.add_argument("--batch", type=int, default=1000, help="remember_many batch size")
    args = parser.parse_args(argv)
    scales = QUICK_SCALES if args.quick else SCALES
    if args.max is not None:
        scales = tuple((m, e) for m, e in scales if m <= args.max)
    if args.quick:
        args.turns, args.finishes, args.queries, args.batch = 3, 1, 10, 100
    largest = max(m for m, _ in scales)
    spare = 80 * args.finishes * len(scales) + 400 + (20 + args.batch) * len(scales) + 1400
    pool = memories(largest + spare)
    corpus, fresh = pool[:largest], pool[largest:]
    per_scale: list[dict[str, Any]] = []
    rows: list[tuple[str, str]] = []
    with scratch("bench_growth_", args.dir) as folder:
        growth = Growth(folder, corpus)
        for index, (scale, events) in enumerate(scales):
            build_s = growth.grow(scale, events)
            start = index * (80 * args.finishes + 20 + args.batch)
            figures = measure(
                growth,
                scale,
                fresh[start:],
                args.turns,
                args.finishes,
                args.queries,
                hybrid=scale <= args.hybrid_max,
                batch=args.batch,
            )
            figures.update(
                scale_memories=scale,
                scale_events=events,
                build_s=build_s,
                load_average=os.getloadavg(),
            )
            per_scale.append(figures)
            rows.append(
                (
                    f"{scale:,} memories / {figures['ledger_events']:,} events",
                    f"open {figures['open_and_first_recall_ms']:.0f} ms "
                    f"(rebuild {figures['rebuild_open_and_first_recall_ms']:.0f}), "
                    f"lexical {figures['recall_p50_ms']:.2f}/{figures['recall_p99_ms']:.2f} ms, "
                    + (
                        f"hybrid {figures['hybrid_p50_ms']:.2f}/{figures['hybrid_p99_ms']:.2f} ms, "
                        if "hybrid_p50_ms" in figures
                        else ""
                    )
                    + f"remember {figures['remember_p50_ms']:.1f} ms "
                    f"({figures['remember_over_baseline']:.1f}x its append), "
                    f"remember_many {figures['remember_many_per_s']:,.0f}/s, "
                    f"turn {figures['turn_p50_ms']:.1f} ms "
                    f"({figures['turn_over_baseline']:.1f}x its appends), "
                    f"finish {figures['finish_p50_ms']:.1f} ms "
                    f"({figures['finish_over_baseline']:.1f}x its append), "
                    f"load {figures['load_average'][0]:.1f}",
                )
            )
            print(f"  {rows[-1][0]}: {rows[-1][1]}", flush=True)
    first, last = per_scale[0], per_scale[-1]
    growth_factors = {
        key: last[key] / first[key] for key, _, _ in SERIES if first.get(key) and last.get(key)
    }
    for key, label, _ in SERIES:
        if key in growth_factors:
            rows.append(
                (
                    f"x{last['scale_memories'] // first['scale_memories']} scale: {label}",
                    f"{first[key]:.2f} -> {last[key]:.2f} ms ({growth_factors[key]:.1f}x)",
                )
            )
    print_table("growth: cost against store size (p50, durable)", rows)
    print(plot(per_scale, results_dir() / "growth.png"))
    print(f"figures written to {save('growth', {'scales': per_scale, 'growth': growth_factors})}")
    return 0
