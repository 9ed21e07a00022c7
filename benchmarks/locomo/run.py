"""The main job end to end: ``memory-ledger run`` of a converted LoCoMo conversation.

Converts a sample (default conv-26) from ``../shared/data/locomo/locomo7.json`` (or
``$LOCOMO_PATH``), replays it into a fresh store with durable commits (fsync per command,
the default) and, as the baseline in the same run, with sync off; reports medians of
wall time, events written, commands, active memories, and the top recall for a query.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.locomo.source import locomo_path, missing
from benchmarks.results import median, print_table, save
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.replay.scripts.locomo import convert_sample, find_sample, load_samples
from memory_ledger.replay.scripts.script import parse_script, run_script


def default_data() -> Path:
    """The LoCoMo file (:mod:`benchmarks.locomo.source`); SystemExit saying where it was
    looked for when it is absent."""
    path = locomo_path()
    if path is None:
        raise SystemExit(missing())
    return path


def one_run(steps: list[tuple[int, Any]], sync: bool) -> tuple[float, int, int, int, str]:
    folder = Path(tempfile.mkdtemp(prefix="bench_run_"))
    try:
        with MemoryEngine.open(folder, sync=sync) as engine:
            started = time.perf_counter()
            report = run_script(engine, steps)
            seconds = time.perf_counter() - started
            commands = report.turns_observed * 2 + report.sessions_finished
            hits = engine.recall(
                Namespace("locomo", "conv-26", "conversation"), "LGBTQ support group", 1
            )
            top = hits.results[0].evidence[0] if hits.results else ""
            return seconds, report.events_written, commands, report.active_memories, top
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks run", description=__doc__)
    parser.add_argument("--sample", default="conv-26")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    converted = convert_sample(find_sample(load_samples(default_data()), args.sample))
    import msgspec

    lines = [msgspec.json.encode(step) for step in converted.steps]
    steps = parse_script(lines)
    durable = [one_run(steps, sync=True) for _ in range(args.repeat)]
    fast = [one_run(steps, sync=False) for _ in range(args.repeat)]
    seconds = median([r[0] for r in durable])
    baseline = median([r[0] for r in fast])
    _, events, commands, active, top = durable[0]
    figures = {
        "sample": args.sample,
        "events_written": events,
        "commands": commands,
        "active_memories": active,
        "durable_seconds": seconds,
        "no_sync_seconds": baseline,
        "durable_over_no_sync": seconds / baseline,
        "durable_ms_per_command": seconds / commands * 1000,
        "top_evidence_for_lgbtq_support_group": top,
    }
    print_table(
        f"memory-ledger run {args.sample} (medians of {args.repeat})",
        [
            ("events written", f"{events:,}"),
            ("commands (evidence, extraction, finish)", f"{commands:,}"),
            ("active memories", str(active)),
            ("durable run (fsync per command)", f"{seconds:.2f} s"),
            ("baseline: sync off", f"{baseline:.2f} s"),
            ("durable / sync off", f"{seconds / baseline:.2f}"),
            ("per command, durable", f"{seconds / commands * 1000:.2f} ms"),
            ("top recall for 'LGBTQ support group' cites", top),
        ],
    )
    print(f"figures written to {save('locomo_run', figures)}")
    return 0
