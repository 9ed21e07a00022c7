"""CPU of a LangGraph ``batch`` of 100 puts of new keys into a LedgerStore of 2,000 items.

``python -m benchmarks batch_cpu [--batches 40] [--size 100] [--collect] [--reduce] [--quick]``

The store is the one of ``python -m benchmarks serving`` (``benchmarks.langgraph_bench``:
its values, a durable LMDB ledger, no embedding index), preloaded with 2,000 items in
batches of 100 and three warm-up batches; then ``--batches`` batches of ``--size`` puts of
new keys (default 100; ``--size 1``: a put of a new key) are timed one by one: the calling
thread's CPU time (``time.thread_time``), the process's (``time.process_time``) and the
wall time, medians and the least batch, in ms. On a shared machine compare two trees by
paired runs (one after the other, alternating).

``--collect``: a full collection of the cyclic collector before each batch (outside its
timing), which removes the collector's amortized passes from the spread.

``--reduce``: no timing; the batches run inside one ``functools.reduce`` call, so that
``valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce`` counts
the instructions of the timed batches alone (the preload and the imports left out): a
figure the machine's load does not move.

``--quick``: a store of 200 items and 3 batches (the smoke test's size). Figures are written
to ``results/batch_cpu.json``.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import statistics
import time

from langgraph.store.base import PutOp

from benchmarks.langgraph_bench import ledger_store, value
from benchmarks.results import save

NAMESPACE = ("users", "serving")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks batch_cpu")
    parser.add_argument("--batches", type=int, default=40, help="timed batches (default 40)")
    parser.add_argument("--size", type=int, default=100, help="puts a batch (default 100)")
    parser.add_argument("--collect", action="store_true", help="gc.collect() before each")
    parser.add_argument("--reduce", action="store_true", help="run for callgrind, untimed")
    parser.add_argument("--quick", action="store_true", help="200 items, 3 batches")
    args = parser.parse_args(argv)
    preload = 200 if args.quick else 2000
    if args.quick:
        args.batches = min(args.batches, 3)
    with ledger_store() as store:
        for first in range(0, preload, 100):
            store.batch([PutOp(NAMESPACE, f"k{i}", value(i)) for i in range(first, first + 100)])
        for b in range(3):
            store.batch([PutOp(NAMESPACE, f"w{b}-{i}", value(i)) for i in range(100)])
        batches = [
            [
                PutOp(NAMESPACE, f"b{b}-{i}", value(10_000 + args.size * b + i))
                for i in range(args.size)
            ]
            for b in range(args.batches)
        ]
        if args.reduce:
            functools.reduce(lambda _, ops: store.batch(ops), batches, None)
            return 0
        thread, process, wall = [], [], []
        for ops in batches:
            if args.collect:
                gc.collect()
            t0, p0, w0 = time.thread_time(), time.process_time(), time.perf_counter()
            store.batch(ops)
            thread.append((time.thread_time() - t0) * 1000)
            process.append((time.process_time() - p0) * 1000)
            wall.append((time.perf_counter() - w0) * 1000)
    print(
        f"batch of {args.size} puts, {args.batches} batches (ms): thread CPU median "
        f"{statistics.median(thread):.2f} least {min(thread):.2f}; process CPU median "
        f"{statistics.median(process):.2f} least {min(process):.2f}; wall median "
        f"{statistics.median(wall):.2f}; load {os.getloadavg()[0]:.2f}"
    )
    figures = {
        "size": args.size,
        "batches": args.batches,
        "preload": preload,
        "thread_cpu_median_ms": statistics.median(thread),
        "thread_cpu_least_ms": min(thread),
        "process_cpu_median_ms": statistics.median(process),
        "wall_median_ms": statistics.median(wall),
        "load_average": os.getloadavg()[0],
    }
    print(f"figures written to {save('batch_cpu', figures)}")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
