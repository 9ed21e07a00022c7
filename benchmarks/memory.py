"""Peak RSS of a process holding 100,000 active memories (recall index built).

A child process builds the store (100,000 synthetic facts of ``benchmarks.corpus`` in one
namespace, MemoryActivated events, sync off) and exits. Then, for each case, a fresh child
process imports the engine, records its peak RSS (``getrusage(RUSAGE_SELF).ru_maxrss``: the
baseline, the same process before loading), opens the store, runs one recall (which
catches the projection up and builds the in-process BM25 index) and records its peak and
current RSS again (and once between the two steps, after the projection catch-up):

- warm open: the projection file is already caught up (a restarted host);
- cold open: the projection file was deleted, so it is rebuilt from the ledger first.

There is no target in the issue (item 7): the figure is reported, with bytes per memory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus import scratch
from benchmarks.results import print_table, save

REPO = Path(__file__).resolve().parents[1]


def rss_now_kib() -> int:
    """Current resident set size in KiB (Linux ``/proc``; 0 where unavailable)."""
    try:
        fields = Path("/proc/self/statm").read_text().split()
    except OSError:
        return 0
    return int(fields[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def hwm_kib() -> int:
    """Peak RSS of this program's own address space (``VmHWM``; 0 where unavailable).

    Unlike ``ru_maxrss`` it starts afresh at ``exec``: Linux keeps the peak of the process
    that started a program in that program's ``ru_maxrss``.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def child(mode: str, store: str, size: int) -> dict[str, Any]:
    """Runs in the child process; returns what it measured."""
    import resource

    from benchmarks.corpus import BENCH_NAMESPACE, fill, memories
    from memory_ledger.commands import MemoryEngine

    if mode == "build":
        with MemoryEngine.open(store, sync=False) as engine:
            fill(engine, memories(size))
            engine.catch_up()
        return {"built": size}
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    baseline_hwm = hwm_kib()
    baseline_now = rss_now_kib()
    started = time.perf_counter()
    with MemoryEngine.open(store) as engine:
        engine.catch_up()
        caught_up_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        caught_up_now = rss_now_kib()
        result = engine.recall(BENCH_NAMESPACE, "Where does Maya Chen work?", 5)
        seconds = time.perf_counter() - started
        active = engine.count_active_memories()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak_hwm = hwm_kib()
        now = rss_now_kib()
    return {
        "active_memories": active,
        "hits": len(result.results),
        "baseline_peak_kib": baseline,
        "baseline_rss_kib": baseline_now,
        "baseline_vmhwm_kib": baseline_hwm,
        "peak_vmhwm_kib": peak_hwm,
        "caught_up_peak_kib": caught_up_peak,
        "caught_up_rss_kib": caught_up_now,
        "peak_kib": peak,
        "rss_after_recall_kib": now,
        "open_and_first_recall_s": seconds,
    }


def run_child(mode: str, store: Path, size: int) -> dict[str, Any]:
    return child_json("benchmarks.memory", ["--child", mode, str(store), str(size)])


def child_json(
    module: str, args: list[str], *, show_stderr: bool = False, bytecode: bool = False
) -> dict[str, Any]:
    """Run ``python -m module *args`` in a fresh process (this checkout first on its
    ``PYTHONPATH``) and return the JSON object its last line of output prints.

    A fresh process has its own peak RSS and nothing warm from this one. ``show_stderr``
    lets the child's standard error through (its progress lines) instead of keeping it for
    the error message. ``bytecode``: the child reads cached bytecode, as an installed
    package's process does (``PYTHONDONTWRITEBYTECODE`` dropped from its environment; see
    :func:`compile_checkout`). Raises ``RuntimeError`` when the child exits non-zero.
    """
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=None if show_stderr else subprocess.PIPE,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        msg = f"child {module} {' '.join(args)} failed ({done.returncode}):\n"
        raise RuntimeError(msg + (done.stderr or "")[-4000:])
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def compile_checkout() -> None:
    """Write the bytecode of this checkout's package and benchmarks (``__pycache__``), as
    ``pip install`` does for an installed package, so that a child run with ``bytecode``
    times the engine, not the compiler: where ``PYTHONDONTWRITEBYTECODE`` is set (this
    machine's environment sets it) every process otherwise compiles each module it imports
    from source, 0.1 s of a fresh process's first recall here."""
    import compileall

    for folder in ("memory_ledger", "commands", "ledger", "projections", "replay", "benchmarks"):
        compileall.compile_dir(REPO / folder, quiet=1, workers=1)


def mib(kib: float) -> str:
    return f"{kib / 1024:,.0f} MiB"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks memory", description=__doc__)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--dir", default=None, help="scratch folder parent (default: $TMPDIR)")
    parser.add_argument("--quick", action="store_true", help="2,000 memories")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "STORE", "SIZE"), help="internal")
    args = parser.parse_args(argv)
    if args.child:
        mode, store, size = args.child
        print(json.dumps(child(mode, store, int(size))))
        return 0
    if args.quick:
        args.memories = 2_000
    figures: dict[str, Any] = {"memories": args.memories}
    rows: list[tuple[str, str]] = []
    with scratch("bench_memory_", args.dir) as folder:
        store = folder / "store"
        run_child("build", store, args.memories)
        for case in ("warm", "cold"):
            if case == "cold":
                shutil.rmtree(store / "projections", ignore_errors=True)
            got = run_child("measure", store, args.memories)
            added = got["peak_kib"] - got["baseline_peak_kib"]
            figures[case] = {
                **got,
                "added_peak_kib": added,
                "bytes_per_memory": added * 1024 / max(got["active_memories"], 1),
            }
            label = "warm open" if case == "warm" else "cold open (projection rebuilt)"
            rows += [
                (
                    f"{label}: baseline peak RSS (same process, imports only)",
                    mib(got["baseline_peak_kib"]),
                ),
                (
                    f"{label}: RSS / peak after projection catch-up",
                    f"{mib(got['caught_up_rss_kib'])} / {mib(got['caught_up_peak_kib'])}",
                ),
                (f"{label}: peak RSS holding the memories", mib(got["peak_kib"])),
                (
                    f"{label}: VmHWM baseline / peak (own address space)",
                    f"{mib(got['baseline_vmhwm_kib'])} / {mib(got['peak_vmhwm_kib'])}",
                ),
                (f"{label}: RSS after the first recall", mib(got["rss_after_recall_kib"])),
                (f"{label}: peak / baseline", f"{got['peak_kib'] / got['baseline_peak_kib']:.1f}"),
                (
                    f"{label}: added per active memory",
                    f"{figures[case]['bytes_per_memory']:,.0f} bytes",
                ),
                (f"{label}: open + first recall", f"{got['open_and_first_recall_s']:.1f} s"),
            ]
    active = figures["warm"]["active_memories"]
    print_table(f"peak RSS of a process holding {active:,} active memories", rows)
    print(f"figures written to {save('memory', figures)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
