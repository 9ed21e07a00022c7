"""Engine turn and finish: observe_final_transcript (5 items) and finish() (100 candidates).

A store holding 16,000 canonical memories (synthetic facts, see ``benchmarks.corpus``) is
built by appending MemoryActivated events with sync off, then reopened durable (fsync per
command, the default). Then:

- turn: ``observe_final_transcript`` of a ~300-character transcript whose recorded
  extractor returns 5 valid items: 7 events in two commands (evidence, then extraction).
  The extractor's own time is measured and subtracted (a recorded extractor costs ~0).
  Baseline: the same 7 events appended straight through ``engine.append`` in the same two
  durable transactions (the cost of the two fsyncs and the encoding, no session logic);
- finish: ``finish()`` of a session of 20 turns x 5 candidates (80 new facts, 10 exact
  duplicates of canonical memories, 10 new values for an existing subject + predicate),
  timed as a host calls it. The decision reads canonical memory from the ledger (tagged
  reads, ``commands/canonical/boundary.py``) and appends under its append condition; the time in
  those reads and in the condition check inside the write transaction is shown.
  Baseline: one durable append of as many events as finish wrote.

Before / after the consistency boundary (issue 13): every turn and every finish is measured
twice in the same run, alternating in ABBA order, with the append condition on (``after``)
and switched off (``before``: ``engine.consistency_boundary = False``; same reads, same
events and tags, no condition). The condition may cost at most 10% on either. Wall-clock
medians include the fsync of every command, which on a shared disk varies far more than the
condition costs; the CPU time of the calling thread (``time.thread_time``, no I/O wait) is
shown beside them.

Targets (issue 7, item 2): turn p50 < 2 ms excluding the extractor; finish < 100 ms.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from uuid import NAMESPACE_URL, uuid5

import msgspec

from benchmarks.corpus import BENCH_NAMESPACE, Memory, activation, fill, item, memories, scratch
from benchmarks.corpus import variant as new_value
from benchmarks.results import median, percentile, print_table, save
from memory_ledger.commands import ExtractionRequest, MemoryEngine, RecordedExtractor
from memory_ledger.ledger.events import (
    CandidateExtracted,
    ExtractedItem,
    ExtractionCompleted,
    LedgerEvent,
    TranscriptObserved,
)
from memory_ledger.ledger.ids import Namespace, session_stream_id

T = TypeVar("T")

MODES = ("after", "before")
"""``after``: decisions appended under their append condition; ``before``: condition off."""


def slot_order(pair: int) -> tuple[str, ...]:
    """The two modes of the ``pair``-th measurement pair, in ABBA order: each mode runs first
    as often as second. (The slot matters: with a fixed order, an A/A run of this benchmark,
    the condition on in both modes, measured the first slot of each pair 18% slower.)"""
    return MODES if pair % 2 == 0 else MODES[::-1]


FLOOR_NAMESPACE = Namespace("bench", "floor", "assistant")
"""Where the baselines' events go (so they never meet the measured namespace)."""

TRANSCRIPT = (
    "user: Quick update on my week, turn {turn}. I started a new job, my sister visited from "
    "Lisbon, we cooked paella together and I finally booked the climbing course. Also my "
    "dog has been sick, the vet says it is nothing serious. Can you remind me on Friday?"
)


class TimedExtractor:
    """A recorded extractor that measures the time spent inside ``extract``."""

    uses_context = False

    def __init__(self) -> None:
        self.inner = RecordedExtractor()
        self.seconds = 0.0

    @property
    def extractor_id(self) -> str:
        return self.inner.extractor_id

    def provide(self, turn_id: int, items: Sequence[Any]) -> None:
        self.inner.provide(turn_id, items)

    def extract(self, request: ExtractionRequest) -> Sequence[Any]:
        started = time.perf_counter()
        try:
            return self.inner.extract(request)
        finally:
            self.seconds += time.perf_counter() - started


class Stopwatch:
    """Wraps a callable and adds up the seconds spent in it (and the number of calls)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def wrap(self, fn: Callable[..., T]) -> Callable[..., T]:
        def timed(*args: Any, **kwargs: Any) -> T:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1

        return timed


def floor_turn_events(turn: int, items: list[dict[str, Any]]) -> tuple[list[LedgerEvent], ...]:
    """The events of one turn, built directly: (evidence,), (5 candidates, completion)."""
    stream = session_stream_id(FLOOR_NAMESPACE, "floor")
    when = datetime.now(UTC)
    base: dict[str, Any] = {
        "recorded_at": when,
        "namespace": FLOOR_NAMESPACE,
        "session_id": "floor",
    }
    version = (turn - 1) * 7
    evidence: list[LedgerEvent] = [
        TranscriptObserved(
            originator_id=stream,
            originator_version=version + 1,
            **base,
            turn_id=turn,
            transcript=TRANSCRIPT.format(turn=turn),
            digest=f"{turn:064d}",
            occurred_at=when,
        )
    ]
    extraction: list[LedgerEvent] = [
        CandidateExtracted(
            originator_id=stream,
            originator_version=version + 2 + index,
            **base,
            turn_id=turn,
            candidate_id=uuid5(stream, f"{turn}/{index}"),
            index=index,
            extractor_id="recorded",
            item=ExtractedItem(
                **{
                    **raw,
                    **{k: tuple(raw[k]) for k in ("tags", "supersedes", "conflicts_with")},
                    "evidence": tuple(raw["evidence"]),
                }
            ),
            occurred_at=when,
        )
        for index, raw in enumerate(items)
    ]
    extraction.append(
        ExtractionCompleted(
            originator_id=stream,
            originator_version=version + 7,
            **base,
            turn_id=turn,
            extractor_id="recorded",
            extracted=5,
            rejected=0,
        )
    )
    return evidence, extraction


def measure_turns(engine: MemoryEngine, fresh: list[Memory], turns: int) -> dict[str, Any]:
    """Turns alternating between the append condition on and off (one session each)."""
    extractors = {mode: TimedExtractor() for mode in MODES}
    sessions = {
        mode: engine.session(BENCH_NAMESPACE, f"bench-turns-{mode}", extractor=extractors[mode])
        for mode in MODES
    }
    turn_ms: dict[str, list[float]] = {mode: [] for mode in MODES}
    turn_cpu_ms: dict[str, list[float]] = {mode: [] for mode in MODES}
    extractor_ms: list[float] = []
    floor_ms: list[float] = []
    for turn in range(1, turns + 1):
        for mode in slot_order(turn):
            engine.consistency_boundary = mode == "after"
            extractor = extractors[mode]
            offset = 0 if mode == "after" else turns * 5
            items = [
                item(fresh[(offset + turn * 5 + i) % len(fresh)], f"bench-turns:{turn}")
                for i in range(5)
            ]
            extractor.provide(turn, items)
            before = extractor.seconds
            started, cpu = time.perf_counter(), time.thread_time()
            outcome = sessions[mode].observe_final_transcript(turn, TRANSCRIPT.format(turn=turn))
            elapsed = time.perf_counter() - started
            turn_cpu_ms[mode].append((time.thread_time() - cpu) * 1000)
            if outcome.candidates != 5:
                msg = f"turn {turn}: {outcome.candidates} candidates, expected 5"
                raise RuntimeError(msg)
            spent = extractor.seconds - before
            turn_ms[mode].append((elapsed - spent) * 1000)
            extractor_ms.append(spent * 1000)
        evidence, extraction = floor_turn_events(turn, items)
        started = time.perf_counter()
        engine.append(evidence)
        engine.append(extraction)
        floor_ms.append((time.perf_counter() - started) * 1000)
    engine.consistency_boundary = True
    for session in sessions.values():
        session.close()
    after, before = median(turn_ms["after"]), median(turn_ms["before"])
    return {
        "turns": turns,
        "turn_p50_ms": after,
        "turn_p99_ms": percentile(turn_ms["after"], 99),
        "turn_without_condition_p50_ms": before,
        "turn_condition_cost": after / before - 1,
        "turn_cpu_p50_ms": median(turn_cpu_ms["after"]),
        "turn_cpu_without_condition_p50_ms": median(turn_cpu_ms["before"]),
        "turn_condition_cpu_cost": median(turn_cpu_ms["after"]) / median(turn_cpu_ms["before"]) - 1,
        "extractor_p50_ms": median(extractor_ms),
        "baseline_two_appends_p50_ms": median(floor_ms),
        "turn_over_baseline": after / median(floor_ms),
    }


def finish_items(
    fresh: list[Memory], canonical: list[Memory], session: int, rng: random.Random
) -> list[dict[str, Any]]:
    """100 raw items: 80 new facts, 10 exact duplicates, 10 new values of existing keys."""
    new = fresh[session * 80 : session * 80 + 80]
    picked = rng.sample(canonical, 20)
    dups = picked[:10]
    changed = [new_value(m, session) for m in picked[10:]]
    chosen = [*new, *dups, *changed]
    rng.shuffle(chosen)
    return [item(m, f"finish-{session}:{i // 5 + 1}") for i, m in enumerate(chosen)]


def measure_finish(
    engine: MemoryEngine, fresh: list[Memory], canonical: list[Memory], sessions: int
) -> dict[str, Any]:
    """``sessions`` finishes with the append condition on and as many with it off,
    alternating; each finish reconciles 100 candidates of its own."""
    rng = random.Random(5)
    reads, check = Stopwatch(), Stopwatch()
    # Times the decision's ledger reads and, inside the write transaction, the condition
    # check (instrumentation of one internal, not a use of it).
    engine.read_tagged = reads.wrap(engine.read_tagged)  # type: ignore[method-assign]
    index = engine.recorder.tag_index  # type: ignore[attr-defined]
    refuse = index.refuse
    condition_items: list[int] = []

    def counted(txn: Any, condition: Any) -> Any:
        condition_items.append(len(condition.fail_if_events_match.items))
        return refuse(txn, condition)

    index.refuse = check.wrap(counted)
    finish_ms: dict[str, list[float]] = {mode: [] for mode in MODES}
    finish_cpu_ms: dict[str, list[float]] = {mode: [] for mode in MODES}
    read_ms, check_ms, floor_ms, tags = [], [], [], []
    outcome = {"activated": 0, "reinforced": 0, "superseded": 0, "events": 0}
    order = [mode for pair in range(sessions) for mode in slot_order(pair)]
    for number, mode in enumerate(order):
        extractor = RecordedExtractor()
        session = engine.session(BENCH_NAMESPACE, f"bench-finish-{number}", extractor=extractor)
        items = finish_items(fresh, canonical, number, rng)
        for turn in range(1, 21):
            extractor.provide(turn, items[(turn - 1) * 5 : turn * 5])
            session.observe_final_transcript(turn, TRANSCRIPT.format(turn=turn))
        appended = engine.appended
        reads.seconds = check.seconds = 0.0
        reads.calls = 0
        engine.consistency_boundary = mode == "after"
        started, cpu = time.perf_counter(), time.thread_time()
        report = session.finish()
        finish_ms[mode].append((time.perf_counter() - started) * 1000)
        finish_cpu_ms[mode].append((time.thread_time() - cpu) * 1000)
        engine.consistency_boundary = True
        written = engine.appended - appended
        if mode == "after":
            read_ms.append(reads.seconds * 1000)
            check_ms.append(check.seconds * 1000)
            tags.append(reads.calls)
            outcome = {
                "activated": len(report.activated),
                "reinforced": len(report.reinforced),
                "superseded": len(report.superseded),
                "events": written,
            }
        floor: list[LedgerEvent] = [
            msgspec.structs.replace(
                activation(FLOOR_NAMESPACE, fresh[i % len(fresh)], i),
                originator_id=uuid5(NAMESPACE_URL, f"bench-floor-{number}-{i}"),
            )
            for i in range(written)
        ]
        started = time.perf_counter()
        engine.append(floor)
        floor_ms.append((time.perf_counter() - started) * 1000)
        session.close()
    after, before = median(finish_ms["after"]), median(finish_ms["before"])
    return {
        "finish_sessions": sessions,
        "finish_candidates": 100,
        "finish_p50_ms": after,
        "finish_max_ms": max(finish_ms["after"]),
        "finish_without_condition_p50_ms": before,
        "finish_condition_cost": after / before - 1,
        "finish_cpu_p50_ms": median(finish_cpu_ms["after"]),
        "finish_cpu_without_condition_p50_ms": median(finish_cpu_ms["before"]),
        "finish_condition_cpu_cost": median(finish_cpu_ms["after"])
        / median(finish_cpu_ms["before"])
        - 1,
        "finish_ledger_reads_p50_ms": median(read_ms),
        "finish_tagged_reads": max(tags),
        "finish_condition_tags": max(condition_items, default=0),
        "finish_condition_check_p50_ms": median(check_ms),
        "finish_events_written": outcome["events"],
        "finish_activated": outcome["activated"],
        "finish_reinforced": outcome["reinforced"],
        "finish_superseded": outcome["superseded"],
        "baseline_one_append_p50_ms": median(floor_ms),
        "finish_over_baseline": after / median(floor_ms),
    }


def build(folder: Path, canonical: list[Memory]) -> None:
    with MemoryEngine.open(folder, sync=False) as engine:
        fill(engine, canonical)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks engine", description=__doc__)
    parser.add_argument("--memories", type=int, default=16_000)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--sessions", type=int, default=10, help="finish() runs per mode")
    parser.add_argument("--dir", default=None, help="scratch folder parent (default: $TMPDIR)")
    parser.add_argument("--quick", action="store_true", help="500 memories, 20 turns, 2 finishes")
    args = parser.parse_args(argv)
    if args.quick:
        args.memories, args.turns, args.sessions = 500, 20, 2
    extra = max(args.sessions * len(MODES) * 80, 400)
    corpus = memories(args.memories + extra)
    canonical, fresh = corpus[: args.memories], corpus[args.memories :]
    with scratch("bench_engine_", args.dir) as folder:
        build(folder, canonical)
        with MemoryEngine.open(folder) as engine:
            engine.recall(BENCH_NAMESPACE, "warm up", 1)
            active = engine.count_active_memories()
            turns = measure_turns(engine, fresh, args.turns)
            engine.recall(BENCH_NAMESPACE, "warm up", 1)
            finish = measure_finish(engine, fresh, canonical, args.sessions)
    figures: dict[str, Any] = {"canonical_memories": active, **turns, **finish}
    figures["turn_target_met"] = turns["turn_p50_ms"] < 2.0
    figures["finish_target_met"] = finish["finish_p50_ms"] < 100.0
    # Judged on CPU time: the wall-clock medians move by more than 10% either way between
    # two runs of identical code on this shared disk (the turn path has no condition at all).
    figures["condition_cost_within_10_percent"] = (
        turns["turn_condition_cpu_cost"] <= 0.10 and finish["finish_condition_cpu_cost"] <= 0.10
    )
    print_table(
        f"engine turn and finish, durable, {active:,} canonical memories (medians)",
        [
            ("turns observed (5 items, 7 events each)", f"{args.turns} per mode"),
            ("turn p50, extractor excluded (target < 2 ms)", f"{turns['turn_p50_ms']:.2f} ms"),
            ("turn p50, append condition off", f"{turns['turn_without_condition_p50_ms']:.2f} ms"),
            ("turn: cost of the condition", f"{turns['turn_condition_cost']:+.1%}"),
            (
                "turn CPU p50, condition on / off",
                f"{turns['turn_cpu_p50_ms']:.2f} / {turns['turn_cpu_without_condition_p50_ms']:.2f}"
                f" ms ({turns['turn_condition_cpu_cost']:+.1%})",
            ),
            ("turn p99", f"{turns['turn_p99_ms']:.2f} ms"),
            ("recorded extractor p50", f"{turns['extractor_p50_ms']:.4f} ms"),
            ("baseline: same events, 2 appends", f"{turns['baseline_two_appends_p50_ms']:.2f} ms"),
            ("turn / baseline", f"{turns['turn_over_baseline']:.2f}"),
            ("finish() runs (100 candidates each)", f"{args.sessions} per mode"),
            (
                "finish outcome",
                f"{finish['finish_activated']} activated, {finish['finish_reinforced']} "
                f"reinforced, {finish['finish_superseded']} superseded",
            ),
            ("finish p50 (target < 100 ms)", f"{finish['finish_p50_ms']:.1f} ms"),
            (
                "finish p50, append condition off",
                f"{finish['finish_without_condition_p50_ms']:.1f} ms",
            ),
            ("finish: cost of the condition", f"{finish['finish_condition_cost']:+.1%}"),
            (
                "finish CPU p50, condition on / off",
                f"{finish['finish_cpu_p50_ms']:.1f} / "
                f"{finish['finish_cpu_without_condition_p50_ms']:.1f} ms "
                f"({finish['finish_condition_cpu_cost']:+.1%})",
            ),
            (
                f"  of which ledger reads ({finish['finish_tagged_reads']} tagged reads)",
                f"{finish['finish_ledger_reads_p50_ms']:.1f} ms",
            ),
            (
                f"  of which the condition check ({finish['finish_condition_tags']} tags, "
                "in the write txn)",
                f"{finish['finish_condition_check_p50_ms']:.2f} ms",
            ),
            (
                f"baseline: 1 append of {finish['finish_events_written']} events",
                f"{finish['baseline_one_append_p50_ms']:.2f} ms",
            ),
            ("finish / baseline", f"{finish['finish_over_baseline']:.1f}"),
            (
                "condition CPU cost <= 10% on both",
                str(figures["condition_cost_within_10_percent"]),
            ),
        ],
    )
    print(f"figures written to {save('engine', figures)}")
    return 0
