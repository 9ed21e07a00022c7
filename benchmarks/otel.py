"""OpenTelemetry overhead: remember and recall medians with tracing off, API only, and SDK.

One store, three modes interleaved round by round (so load drifts hit all three alike):

- ``off``: ``engine.telemetry.enabled = False``, the path of a process without
  OpenTelemetry (one look-up in ``sys.modules``, then nothing);
- ``api``: the OpenTelemetry API loaded, no SDK configured (the global no-op providers);
- ``sdk``: the SDK's ``TracerProvider`` with a ``SimpleSpanProcessor`` into an
  ``InMemorySpanExporter`` and a ``MeterProvider`` with an ``InMemoryMetricReader``
  (every span recorded and exported synchronously: an upper bound of a batching exporter).

Prints per-operation medians (p50) and each mode's ratio to ``off`` with the load average,
and the instrumentation alone per mode (a ``search_memory`` span opened and closed around
nothing on the same engine, best of 5 repeats of 2,000: less sensitive to the machine's load
than the operations' medians); figures in ``results/otel.json``. Needs
``memory-ledger[otel]`` and ``opentelemetry-sdk`` (the test extra); without the SDK only
``off`` and ``api`` are measured.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

from benchmarks.results import median, print_table, save
from memory_ledger.commands import MemoryEngine, Namespace

NS = Namespace("bench", "otel", "overhead")
WORDS = "espresso oboe kayak tortoise murals yawl bees bike garden violin".split()


def configure(engine: MemoryEngine, mode: str, sdk: dict[str, Any] | None) -> None:
    """Set ``engine.telemetry`` for ``mode`` (see the module)."""
    telemetry = engine.telemetry
    telemetry.enabled = False if mode == "off" else None
    telemetry.tracer_provider = sdk["tracer"] if mode == "sdk" and sdk else None
    telemetry.meter_provider = sdk["meter"] if mode == "sdk" and sdk else None


def make_sdk() -> dict[str, Any] | None:
    """The SDK's providers with in-memory export, or None without the SDK."""
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )
    except ImportError:
        return None
    exporter = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(exporter))
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return {"tracer": tracer, "meter": meter, "exporter": exporter}


def measure(engine: MemoryEngine, ops: int, counter: list[int]) -> tuple[list[float], list[float]]:
    """``ops`` remembers then ``ops`` recalls; their durations in seconds."""
    remember, recall = [], []
    for _ in range(ops):
        counter[0] += 1
        n = counter[0]
        statement = f"Person {n} likes the {WORDS[n % len(WORDS)]} number {n}."
        start = time.perf_counter()
        engine.remember(NS, statement)
        remember.append(time.perf_counter() - start)
    for i in range(ops):
        start = time.perf_counter()
        engine.recall(NS, f"who likes the {WORDS[i % len(WORDS)]}?", k=5)
        recall.append(time.perf_counter() - start)
    return remember, recall


def span_cost(engine: MemoryEngine) -> float:
    """Seconds of one traced no-op operation (best of 5 repeats of 2,000)."""
    from memory_ledger.commands.telemetry import traced

    def once() -> None:
        with traced(engine, "recall", NS, text="who likes the oboe?") as span:
            span.result(None)

    return min(timeit.repeat(once, number=2000, repeat=5)) / 2000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks otel", description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--ops", type=int, default=60, help="operations per mode and round")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 15")
    args = parser.parse_args(argv)
    rounds, ops = (3, 15) if args.quick else (args.rounds, args.ops)
    import opentelemetry.trace  # noqa: F401 - the api and sdk modes need the API loaded

    sdk = make_sdk()
    modes = ["off", "api"] + (["sdk"] if sdk else [])
    timings: dict[str, dict[str, list[float]]] = {m: {"remember": [], "recall": []} for m in modes}
    figures: dict[str, Any] = {"load_average_before": os.getloadavg(), "sdk": sdk is not None}
    counter = [0]
    with tempfile.TemporaryDirectory() as folder:
        with MemoryEngine.open(Path(folder) / "store", sync=False) as engine:
            configure(engine, "off", sdk)
            measure(engine, ops, counter)  # warm up: caches, the recall index
            for _ in range(rounds):
                for mode in modes:
                    configure(engine, mode, sdk)
                    remember, recall = measure(engine, ops, counter)
                    timings[mode]["remember"] += remember
                    timings[mode]["recall"] += recall
            for mode in modes:
                configure(engine, mode, sdk)
                figures[f"span_{mode}_us"] = span_cost(engine) * 1e6
    figures["load_average_after"] = os.getloadavg()
    figures["rounds"], figures["ops_per_round"] = rounds, ops
    if sdk:
        figures["spans_exported"] = len(sdk["exporter"].get_finished_spans())
    rows = []
    for operation in ("remember", "recall"):
        base = median(timings["off"][operation])
        for mode in modes:
            p50 = median(timings[mode][operation])
            figures[f"{operation}_{mode}_p50_ms"] = p50 * 1000
            figures[f"{operation}_{mode}_over_off"] = p50 / base
            rows.append((f"{operation} {mode}", f"{p50 * 1000:.3f} ms  x{p50 / base:.3f}"))
    for mode in modes:
        rows.append((f"instrumentation alone, {mode}", f"{figures[f'span_{mode}_us']:.1f} us"))
    load = figures["load_average_before"][0], figures["load_average_after"][0]
    rows.append(("load average (before, after)", f"{load[0]:.2f}, {load[1]:.2f}"))
    print_table("OpenTelemetry overhead (p50; ratio to tracing off, same run)", rows)
    print(f"figures written to {save('otel', figures)}")
    return 0
