"""CLI start-up: ``memory-ledger --help`` and a lexical ``recall`` on a store of 1,000
memories, each in a fresh process, beside ``python -c pass`` in the same run.

Targets (issue 19, on a quiet machine): ``--help`` under 0.3 s and the recall under 0.6 s,
medians of 5. The commands run in rounds, alternating their order (A B C D, D C B A, ...)
so a change of machine load hits them alike; each figure is a median over the rounds,
with its ratio to ``python -c pass``. Beside wall time the benchmark reports the CPU time
(user + system) of each child process, which a busy machine inflates far less than wall
time, and the load average before and after.

``--baseline DIR`` runs the same commands from another checkout too (e.g. ``git archive main
| tar -x -C /tmp/main``), interleaved with these in every round, and reports each figure's
ratio to its baseline.

Processes run as from an installed package: with a bytecode cache (a scratch
``PYTHONPYCACHEPREFIX``; pip compiles the bytecode of what it installs), warmed by one
uncounted run of each command. The recall reads a store the benchmark writes first (one
namespace) with ``--embeddings none``, so no model is loaded: the price a shell script
pays per call.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus import BENCH_NAMESPACE, fill, memories, queries, scratch
from benchmarks.results import median, print_table, save

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"memory-ledger --help": 0.3, "memory-ledger recall (lexical)": 0.6}
"""Wall-time targets in seconds (medians, quiet machine)."""


def cli() -> list[str]:
    """The console script beside this interpreter, else ``python -m memory_ledger.replay``."""
    script = Path(sys.executable).parent / "memory-ledger"
    return [str(script)] if script.exists() else [sys.executable, "-m", "memory_ledger.replay"]


def child_environment(pycache: Path, checkout: Path = REPO) -> dict[str, str]:
    """This process's environment for the children, with a bytecode cache as an installed
    package has, and ``checkout`` first on the import path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))
    return env


def run_once(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of ``command`` (must exit 0)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks cli", description=__doc__)
    parser.add_argument("--memories", type=int, default=1000, help="memories in the store")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (median of this many)")
    parser.add_argument("--quick", action="store_true", help="100 memories, 2 rounds")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="another checkout whose CLI runs in the same rounds (the baseline of the ratios)",
    )
    args = parser.parse_args(argv)
    count, repeat = (100, 2) if args.quick else (args.memories, args.repeat)
    ns = BENCH_NAMESPACE
    figures: dict[str, Any] = {
        "memories": count,
        "rounds": repeat,
        "load_average_before": os.getloadavg(),
        "targets_s": TARGETS,
    }
    from memory_ledger.commands.engine.memory_engine import MemoryEngine

    with scratch("bench_cli_", None) as folder:
        store = folder / "store"
        corpus = memories(count)
        with MemoryEngine.open(store, sync=False) as engine:
            fill(engine, corpus)
            engine.catch_up()
        query = queries(corpus, 1)[0]
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
                query,
            ],
        }
        runs = {
            label: (command, child_environment(folder / "pycache"))
            for label, command in commands.items()
        }
        if args.baseline is not None:
            figures["baseline"] = str(args.baseline.resolve())
            base_env = child_environment(folder / "pycache-baseline", args.baseline.resolve())
            for label, command in commands.items():
                if label.startswith("memory-ledger") or "import" in label:
                    runs[f"{label} (baseline)"] = (command, base_env)
        for command, env in runs.values():  # warm the bytecode caches (and the projection)
            run_once(command, folder, env)
        walls: dict[str, list[float]] = {label: [] for label in runs}
        cpus: dict[str, list[float]] = {label: [] for label in runs}
        order = list(runs)
        for round_ in range(repeat):
            for label in order if round_ % 2 == 0 else reversed(order):
                command, env = runs[label]
                wall, cpu = run_once(command, folder, env)
                walls[label].append(wall)
                cpus[label].append(cpu)
    figures["load_average_after"] = os.getloadavg()
    base_wall = median(walls["python -c pass"])
    base_cpu = median(cpus["python -c pass"])
    for label in runs:
        figures[label] = {
            "median_s": median(walls[label]),
            "median_cpu_s": median(cpus[label]),
            "ratio_vs_python": median(walls[label]) / base_wall,
            "cpu_ratio_vs_python": median(cpus[label]) / base_cpu if base_cpu else None,
            "runs_s": walls[label],
            "runs_cpu_s": cpus[label],
        }
    rows = []
    for label in runs:
        entry = figures[label]
        text = (
            f"{entry['median_s'] * 1000:.0f} ms wall ({entry['ratio_vs_python']:.1f}x), "
            f"{entry['median_cpu_s'] * 1000:.0f} ms CPU"
        )
        baseline = figures.get(f"{label} (baseline)")
        if baseline is not None:
            entry["ratio_vs_baseline"] = entry["median_s"] / baseline["median_s"]
            entry["cpu_ratio_vs_baseline"] = entry["median_cpu_s"] / baseline["median_cpu_s"]
            text += f", {entry['ratio_vs_baseline']:.2f}x the baseline"
        target = TARGETS.get(label)
        if target is not None:
            entry["target_s"] = target
            entry["under_target"] = entry["median_s"] < target
            text += f" (target < {target:g} s)"
        rows.append((label, text))
    for key in ("load_average_before", "load_average_after"):
        rows.append((key.replace("_", " ") + " (1/5/15 min)", _load(figures[key])))
    print_table(
        f"CLI start-up, {count} memories: median of {repeat} rounds (ratio to python -c pass)",
        rows,
    )
    print(f"figures written to {save('cli', figures)}")
    return 0


def _load(values: tuple[float, float, float]) -> str:
    return " / ".join(f"{x:.2f}" for x in values)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
