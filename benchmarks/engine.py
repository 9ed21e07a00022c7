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
  timed as a host calls it (it catches the projection up first). The time spent in the
  projection catch-up and in ``canonical.same_key`` (one DuckDB query per key) is shown.
  Baseline: one durable append of as many events as finish wrote.

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
    extractor = TimedExtractor()
    session = engine.session(BENCH_NAMESPACE, "bench-turns", extractor=extractor)
    turn_ms: list[float] = []
    extractor_ms: list[float] = []
    floor_ms: list[float] = []
    for turn in range(1, turns + 1):
        items = [item(fresh[(turn * 5 + i) % len(fresh)], f"bench-turns:{turn}") for i in range(5)]
        extractor.provide(turn, items)
        before = extractor.seconds
        started = time.perf_counter()
        outcome = session.observe_final_transcript(turn, TRANSCRIPT.format(turn=turn))
        elapsed = time.perf_counter() - started
        if outcome.candidates != 5:
            msg = f"turn {turn}: {outcome.candidates} candidates, expected 5"
            raise RuntimeError(msg)
        spent = extractor.seconds - before
        turn_ms.append((elapsed - spent) * 1000)
        extractor_ms.append(spent * 1000)
        evidence, extraction = floor_turn_events(turn, items)
        started = time.perf_counter()
        engine.append(evidence)
        engine.append(extraction)
        floor_ms.append((time.perf_counter() - started) * 1000)
    session.close()
    return {
        "turns": turns,
        "turn_p50_ms": median(turn_ms),
        "turn_p99_ms": percentile(turn_ms, 99),
        "extractor_p50_ms": median(extractor_ms),
        "baseline_two_appends_p50_ms": median(floor_ms),
        "turn_over_baseline": median(turn_ms) / median(floor_ms),
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
    rng = random.Random(5)
    catch_up, same_key = Stopwatch(), Stopwatch()
    # Times two engine internals inside finish() (instrumentation, not a use of them).
    engine.runner.catch_up = catch_up.wrap(engine.runner.catch_up)  # type: ignore[method-assign]
    engine.canonical.same_key = same_key.wrap(  # type: ignore[method-assign]
        engine.canonical.same_key
    )
    finish_ms, catch_ms, key_ms, floor_ms = [], [], [], []
    outcome = {"activated": 0, "reinforced": 0, "superseded": 0, "events": 0, "queries": 0}
    for number in range(sessions):
        extractor = RecordedExtractor()
        session = engine.session(BENCH_NAMESPACE, f"bench-finish-{number}", extractor=extractor)
        items = finish_items(fresh, canonical, number, rng)
        for turn in range(1, 21):
            extractor.provide(turn, items[(turn - 1) * 5 : turn * 5])
            session.observe_final_transcript(turn, TRANSCRIPT.format(turn=turn))
        appended = engine.appended
        catch_up.seconds = same_key.seconds = 0.0
        same_key.calls = 0
        started = time.perf_counter()
        report = session.finish()
        finish_ms.append((time.perf_counter() - started) * 1000)
        catch_ms.append(catch_up.seconds * 1000)
        key_ms.append(same_key.seconds * 1000)
        written = engine.appended - appended
        outcome = {
            "activated": len(report.activated),
            "reinforced": len(report.reinforced),
            "superseded": len(report.superseded),
            "events": written,
            "queries": same_key.calls,
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
    return {
        "finish_sessions": sessions,
        "finish_candidates": 100,
        "finish_p50_ms": median(finish_ms),
        "finish_max_ms": max(finish_ms),
        "finish_catch_up_p50_ms": median(catch_ms),
        "finish_same_key_p50_ms": median(key_ms),
        "finish_same_key_queries": outcome["queries"],
        "finish_events_written": outcome["events"],
        "finish_activated": outcome["activated"],
        "finish_reinforced": outcome["reinforced"],
        "finish_superseded": outcome["superseded"],
        "baseline_one_append_p50_ms": median(floor_ms),
        "finish_over_baseline": median(finish_ms) / median(floor_ms),
    }


def build(folder: Path, canonical: list[Memory]) -> None:
    with MemoryEngine.open(folder, sync=False) as engine:
        fill(engine, canonical)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks engine", description=__doc__)
    parser.add_argument("--memories", type=int, default=16_000)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--sessions", type=int, default=5, help="finish() runs")
    parser.add_argument("--dir", default=None, help="scratch folder parent (default: $TMPDIR)")
    parser.add_argument("--quick", action="store_true", help="500 memories, 20 turns, 2 finishes")
    args = parser.parse_args(argv)
    if args.quick:
        args.memories, args.turns, args.sessions = 500, 20, 2
    extra = max(args.sessions * 80, 400)
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
    print_table(
        f"engine turn and finish, durable, {active:,} canonical memories (medians)",
        [
            ("turns observed (5 items, 7 events each)", str(args.turns)),
            ("turn p50, extractor excluded (target < 2 ms)", f"{turns['turn_p50_ms']:.2f} ms"),
            ("turn p99", f"{turns['turn_p99_ms']:.2f} ms"),
            ("recorded extractor p50", f"{turns['extractor_p50_ms']:.4f} ms"),
            ("baseline: same events, 2 appends", f"{turns['baseline_two_appends_p50_ms']:.2f} ms"),
            ("turn / baseline", f"{turns['turn_over_baseline']:.2f}"),
            ("finish() runs (100 candidates each)", str(args.sessions)),
            (
                "finish outcome",
                f"{finish['finish_activated']} activated, {finish['finish_reinforced']} "
                f"reinforced, {finish['finish_superseded']} superseded",
            ),
            ("finish p50 (target < 100 ms)", f"{finish['finish_p50_ms']:.1f} ms"),
            ("  of which projection catch-up", f"{finish['finish_catch_up_p50_ms']:.1f} ms"),
            (
                f"  of which same_key ({finish['finish_same_key_queries']} DuckDB queries)",
                f"{finish['finish_same_key_p50_ms']:.1f} ms",
            ),
            (
                f"baseline: 1 append of {finish['finish_events_written']} events",
                f"{finish['baseline_one_append_p50_ms']:.2f} ms",
            ),
            ("finish / baseline", f"{finish['finish_over_baseline']:.1f}"),
        ],
    )
    print(f"figures written to {save('engine', figures)}")
    return 0
