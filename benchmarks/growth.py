"""Growth: how the cost of a turn, of ``finish()`` and of recall grows with the store, from
1,000 to 100,000 memories and from 10,000 to 1,000,000 ledger events.

One store grows through the scales (default: 1k, 3k, 10k, 30k and 100k memories in the
measured namespace, with ten times as many ledger events in all: the rest is other
namespaces' session traffic, turns, candidates and activations of ``benchmarks.catchup``).
At each scale the store is reopened durable (fsync per command, the default) and measures:

- open: ``MemoryEngine.open`` and the first recall (which builds the namespace's index);
- recall: a lexical recall of the namespace, warm, p50 over ``--queries`` questions;
- turn: ``observe_final_transcript`` with 5 recorded items (7 events in two commands), p50;
- finish: ``finish()`` of a session of 20 turns x 5 candidates (80 new facts, 10 exact
  duplicates, 10 new values of existing keys), p50, the turns' events projected before
  (a host that recalls between turns has them projected);
- recall after finish: the first recall once a finish has written (catch-up + index refresh).

Baselines, measured at each scale in the same run: one durable append of as many events as
a turn writes (two appends: 1 + 6 events) and as a finish writes (one append). A cost that
stays in step with its baseline grows only as the ledger's own writes do.

A plot of every figure against the scale goes to ``results/growth.png`` (matplotlib;
skipped, saying so, where it is absent).
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
from benchmarks.results import median, percentile, print_table, results_dir, save
from memory_ledger.commands import MemoryEngine, RecordedExtractor
from memory_ledger.ledger.events import LedgerEvent
from memory_ledger.ledger.ids import Namespace

T = TypeVar("T")

SCALES = (
    (1_000, 10_000),
    (3_000, 30_000),
    (10_000, 100_000),
    (30_000, 300_000),
    (100_000, 1_000_000),
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


def measure(
    growth: Growth, scale: int, fresh: list[Memory], turns: int, finishes: int, asked: int
) -> dict[str, Any]:
    """Every figure of one scale (the store is opened durable)."""
    canonical = growth.corpus[: growth.memories]
    questions = queries(canonical, asked, seed=scale)
    started = time.perf_counter()
    engine = MemoryEngine.open(growth.folder)
    engine.recall(BENCH_NAMESPACE, questions[0], 5)
    open_ms = (time.perf_counter() - started) * 1000
    try:
        figures: dict[str, Any] = {"open_and_first_recall_ms": open_ms}
        recall_ms = [timed_ms(engine.recall, BENCH_NAMESPACE, q, 5)[0] for q in questions]
        figures["recall_p50_ms"] = median(recall_ms)
        figures["recall_p99_ms"] = percentile(recall_ms, 99)
        extractor = RecordedExtractor()
        session = engine.session(BENCH_NAMESPACE, f"growth-turns-{scale}", extractor=extractor)
        turn_ms, turn_floor_ms = [], []
        spare = fresh[-400:]  # never among finish()'s new facts
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
    ("open_and_first_recall_ms", "open + first recall (index build)", "-D"),
    ("recall_p50_ms", "recall p50 (warm)", "-o"),
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
        ax.plot(sizes, [f[key] for f in per_scale], style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sizes)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticklabels(
        [f"{f['scale_memories']:,}\n{f['ledger_events']:,} ev" for f in per_scale], fontsize=7
    )
    ax.set_xlabel("memories in the namespace / events in the ledger")
    ax.set_ylabel("milliseconds")
    ax.set_title("memory-ledger: cost against store size (durable)")
    ax.legend(fontsize=7)
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
    args = parser.parse_args(argv)
    scales = QUICK_SCALES if args.quick else SCALES
    if args.quick:
        args.turns, args.finishes, args.queries = 3, 1, 10
    largest = max(m for m, _ in scales)
    pool = memories(largest + 80 * args.finishes * len(scales) + 400)
    corpus, fresh = pool[:largest], pool[largest:]
    per_scale: list[dict[str, Any]] = []
    rows: list[tuple[str, str]] = []
    with scratch("bench_growth_", args.dir) as folder:
        growth = Growth(folder, corpus)
        for index, (scale, events) in enumerate(scales):
            build_s = growth.grow(scale, events)
            start = index * 80 * args.finishes
            figures = measure(growth, scale, fresh[start:], args.turns, args.finishes, args.queries)
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
                    f"recall {figures['recall_p50_ms']:.2f} ms, "
                    f"turn {figures['turn_p50_ms']:.1f} ms "
                    f"({figures['turn_over_baseline']:.1f}x its appends), "
                    f"finish {figures['finish_p50_ms']:.1f} ms "
                    f"({figures['finish_over_baseline']:.1f}x its append), "
                    f"open {figures['open_and_first_recall_ms']:.0f} ms, "
                    f"load {figures['load_average'][0]:.1f}",
                )
            )
            print(f"  {rows[-1][0]}: {rows[-1][1]}", flush=True)
    first, last = per_scale[0], per_scale[-1]
    growth_factors = {
        key: last[key] / first[key] for key, _, _ in SERIES if first[key] and last[key]
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
