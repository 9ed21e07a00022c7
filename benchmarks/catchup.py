"""Projection catch-up events/s (100,000 events) and full rebuild time (1,000,000 events).

The ledger is filled with a realistic mix (per turn: TranscriptObserved, two
CandidateExtracted, ExtractionCompleted; per session finish: SessionSealed, activations,
SessionReconciled), appended with sync off (append speed is not measured here). Then:

- baseline: reading every page with ``select_notifications`` and decoding every event, the
  floor any catch-up pays;
- catch-up: the projection runner applying the same events to a fresh DuckDB file;
- rebuild: the same for the large ledger (default 1,000,000 events).

Targets (issue 3): catch-up >= 100,000 events/s; 1,000,000 events rebuilt in < 15 s.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

from benchmarks.results import median, print_table, save
from memory_ledger.commands import MemoryEngine
from memory_ledger.ledger.events import (
    CandidateExtracted,
    ExtractedItem,
    ExtractionCompleted,
    LedgerEvent,
    MemoryActivated,
    ReconciliationReport,
    SessionReconciled,
    SessionSealed,
    TranscriptObserved,
)
from memory_ledger.ledger.ids import (
    Namespace,
    candidate_id,
    memory_id,
    normalize_statement,
    session_stream_id,
)
from memory_ledger.projections import ProjectionStore

EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
SUBJECTS = [f"person{n}" for n in range(2000)]
PREDICATES = [f"attribute_{n}" for n in range(300)]


def generate(
    total: int, namespaces: int = 10, turns_per_session: int = 20, first_session: int = 1
) -> list[LedgerEvent]:
    """About ``total`` events of whole sessions, spread over ``namespaces`` namespaces;
    sessions are numbered from ``first_session`` (a later call continues an earlier one)."""
    events: list[LedgerEvent] = []
    session_number = first_session - 1
    while len(events) < total:
        session_number += 1
        ns = Namespace("bench", f"user{session_number % namespaces}", "chat")
        sid = f"s{session_number}"
        stream = session_stream_id(ns, sid)
        version = 0
        candidates: list[CandidateExtracted] = []
        for turn in range(1, turns_per_session + 1):
            when = EPOCH + timedelta(minutes=session_number * 100 + turn)
            version += 1
            events.append(
                TranscriptObserved(
                    originator_id=stream,
                    originator_version=version,
                    recorded_at=when,
                    namespace=ns,
                    session_id=sid,
                    turn_id=turn,
                    transcript=f"user: message {turn} of {sid} about things " * 4,
                    digest=f"{session_number:08d}{turn:04d}",
                    occurred_at=when,
                )
            )
            for index in range(2):
                n = session_number * 1000 + turn * 10 + index
                subject = SUBJECTS[n % len(SUBJECTS)]
                statement = f"{subject} has {PREDICATES[n % len(PREDICATES)]} number {n}."
                version += 1
                candidate = CandidateExtracted(
                    originator_id=stream,
                    originator_version=version,
                    recorded_at=when,
                    namespace=ns,
                    session_id=sid,
                    turn_id=turn,
                    candidate_id=candidate_id(stream, turn, index),
                    index=index,
                    extractor_id="bench",
                    item=ExtractedItem(
                        kind="semantic",
                        subject=subject,
                        predicate=PREDICATES[n % len(PREDICATES)],
                        value=str(n),
                        statement=statement,
                        source="fact",
                        scope="user",
                        reason="benchmark",
                        importance=0.8,
                        confidence=0.9,
                        tags=("bench",),
                        evidence=(f"{sid}:{turn}",),
                    ),
                    occurred_at=when,
                )
                candidates.append(candidate)
                events.append(candidate)
            version += 1
            events.append(
                ExtractionCompleted(
                    originator_id=stream,
                    originator_version=version,
                    recorded_at=when,
                    namespace=ns,
                    session_id=sid,
                    turn_id=turn,
                    extractor_id="bench",
                    extracted=2,
                    rejected=0,
                )
            )
        when = EPOCH + timedelta(minutes=session_number * 100 + 99)
        version += 1
        events.append(
            SessionSealed(
                originator_id=stream,
                originator_version=version,
                recorded_at=when,
                namespace=ns,
                session_id=sid,
            )
        )
        activated: list[UUID] = []
        for c in candidates:
            normalized = normalize_statement(c.item.statement)
            mid = memory_id(ns, normalized)
            activated.append(mid)
            events.append(
                MemoryActivated(
                    originator_id=mid,
                    originator_version=1,
                    recorded_at=when,
                    namespace=ns,
                    session_id=sid,
                    turn_id=c.turn_id,
                    candidate_id=c.candidate_id,
                    decision="auto",
                    item=c.item,
                    normalized=normalized,
                    occurred_at=c.occurred_at,
                )
            )
        version += 1
        events.append(
            SessionReconciled(
                originator_id=stream,
                originator_version=version,
                recorded_at=when,
                namespace=ns,
                session_id=sid,
                report=ReconciliationReport(
                    session_id=sid, candidates=len(candidates), activated=tuple(activated)
                ),
            )
        )
    return events


def fill(engine: MemoryEngine, events: list[LedgerEvent], batch: int = 5000) -> None:
    for start in range(0, len(events), batch):
        engine.append(events[start : start + batch])


def measure(engine: MemoryEngine, page_size: int) -> tuple[float, float]:
    """(baseline seconds: read + decode, catch-up seconds into a fresh file)."""
    started = time.perf_counter()
    position = 0
    runner_for_decode = engine.projection_runner(
        ProjectionStore(":memory:", version=1), page_size=page_size
    )
    while True:
        page = runner_for_decode.read_page(position)
        if page is None:
            break
        position = page[0]
    baseline = time.perf_counter() - started
    runner_for_decode.store.close()
    with tempfile.TemporaryDirectory() as scratch:
        store = ProjectionStore(str(Path(scratch) / "p.duckdb"), version=1)
        runner = engine.projection_runner(store, page_size=page_size)
        started = time.perf_counter()
        runner.catch_up()
        seconds = time.perf_counter() - started
        store.close()
    return baseline, seconds


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks catchup", description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rebuild-events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--page-size", type=int, default=25_000)
    parser.add_argument("--quick", action="store_true", help="10,000 / 50,000 events, 1 run")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.rebuild_events, args.repeat = 10_000, 50_000, 1
    rows: list[tuple[str, str]] = []
    figures: dict[str, float] = {}
    scratch = Path(tempfile.mkdtemp(prefix="bench_catchup_"))
    try:
        with MemoryEngine.open(scratch / "small", sync=False) as engine:
            fill(engine, generate(args.events))
            total = engine.head
            runs = [measure(engine, args.page_size) for _ in range(args.repeat)]
        base = median([r[0] for r in runs])
        catch = median([r[1] for r in runs])
        figures.update(
            catchup_events=total,
            catchup_seconds=catch,
            catchup_events_per_s=total / catch,
            baseline_read_decode_events_per_s=total / base,
            catchup_vs_read_decode=base / catch,
        )
        rows += [
            ("catch-up events", f"{total:,}"),
            ("read + decode only (baseline)", f"{total / base:,.0f} events/s"),
            ("catch-up into a fresh file", f"{total / catch:,.0f} events/s"),
            ("catch-up / baseline speed", f"{base / catch:.2f}"),
        ]
        with MemoryEngine.open(scratch / "large", sync=False) as engine:
            fill(engine, generate(args.rebuild_events))
            total = engine.head
            base, rebuild = measure(engine, args.page_size)
        figures.update(
            rebuild_events=total,
            rebuild_seconds=rebuild,
            rebuild_events_per_s=total / rebuild,
            rebuild_baseline_read_decode_seconds=base,
        )
        rows += [
            ("rebuild events", f"{total:,}"),
            ("rebuild read + decode only", f"{base:.2f} s"),
            ("full rebuild", f"{rebuild:.2f} s ({total / rebuild:,.0f} events/s)"),
        ]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print_table("projection catch-up and rebuild (medians)", rows)
    path = save("catchup", figures)
    print(f"figures written to {path}")
    return 0
