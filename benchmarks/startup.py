"""CLI start-up: wall time of ``memory-ledger --help`` and of a lexical ``recall``, beside
``python -c pass`` and ``python -c "import memory_ledger"`` in the same run.

Each command runs in a fresh process ``--repeat`` times (default 5; medians reported, with
the ratio to ``python -c pass``). The recall reads a small store the benchmark writes first
(200 memories, one namespace) with ``--embeddings none``, so no model is loaded: this is the
price a shell script pays per call.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus import BENCH_NAMESPACE, fill, memories, scratch
from benchmarks.results import median, print_table, save
from memory_ledger.commands import MemoryEngine


def cli() -> list[str]:
    """The console script beside this interpreter, else ``python -m memory_ledger.replay``."""
    script = Path(sys.executable).parent / "memory-ledger"
    return [str(script)] if script.exists() else [sys.executable, "-m", "memory_ledger.replay"]


def timed(command: list[str], repeat: int, cwd: Path) -> list[float]:
    """Wall seconds of ``repeat`` runs of ``command`` (each must exit 0)."""
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, cwd=cwd, check=True, capture_output=True, env=dict(os.environ))
        seconds.append(time.perf_counter() - started)
    return seconds


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks startup", description=__doc__)
    parser.add_argument("--repeat", type=int, default=5, help="runs per command (median)")
    parser.add_argument("--quick", action="store_true", help="2 runs per command")
    args = parser.parse_args(argv)
    repeat = 2 if args.quick else args.repeat
    ns = BENCH_NAMESPACE
    figures: dict[str, Any] = {"repeat": repeat, "load_average": os.getloadavg()}
    with scratch("bench_startup_", None) as folder:
        store = Path(folder)
        with MemoryEngine.open(store, sync=False) as engine:
            fill(engine, memories(200))
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "import memory_ledger": [sys.executable, "-c", "import memory_ledger"],
            "memory-ledger --help": [*cli(), "--help"],
            "memory-ledger recall (lexical)": [
                *cli(),
                "recall",
                "--store",
                str(store),
                "--tenant",
                ns.tenant,
                "--principal",
                ns.principal,
                "--scope-id",
                ns.scope_id,
                "--embeddings",
                "none",
                "coffee",
            ],
        }
        for label, command in commands.items():
            figures[label] = {"median_s": median(timed(command, repeat, store))}
    base = figures["python -c pass"]["median_s"]
    rows = []
    for label in commands:
        entry = figures[label]
        entry["ratio_vs_python"] = entry["median_s"] / base
        rows.append((label, f"{entry['median_s'] * 1000:.0f} ms ({entry['ratio_vs_python']:.1f}x)"))
    rows.append(
        ("load average (1/5/15 min)", " / ".join(f"{x:.2f}" for x in figures["load_average"]))
    )
    print_table(f"CLI start-up, median of {repeat} runs (ratio to python -c pass)", rows)
    print(f"figures written to {save('startup', figures)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
