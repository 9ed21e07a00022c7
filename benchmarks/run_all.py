"""Every benchmark, one after the other (``--quick``: each at its tiny size).

Each runs in its own Python process (``python -m benchmarks NAME``), so none inherits
another's heap, caches or peak RSS (Linux carries a parent's peak into ``ru_maxrss`` of a
process it starts). Benchmarks that need the LoCoMo data are skipped, saying so, when it is
absent. Prints a summary (status and wall time of each) and writes it as ``all.json``;
exits non-zero when a benchmark failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.results import print_table, save

QUICK_ARGS: dict[str, list[str]] = {
    "secrets": ["--texts", "20"],
    "run": ["--repeat", "1"],
    "ui": ["--quick", "--samples", "3"],
    # Lexical only: the hybrid half loads MiniLM in two processes and embeds on a loaded
    # machine (45 of the 50 s the quick run took); tests/recall covers hybrid recall, which
    # the MCP recall tool calls as the lexical one.
    "mcp": ["--quick", "--embeddings", "none"],
}
"""The tiny-size arguments of benchmarks that predate ``--quick`` (or add fewer samples to
it, or leave out a part that only the full run measures); the others take ``--quick``."""

NEEDS_LOCOMO = frozenset({"run", "locomo", "locomo-limits"})
REPO = Path(__file__).resolve().parents[1]


def quick_args(name: str) -> list[str]:
    """Arguments that run benchmark ``name`` at its tiny size."""
    return list(QUICK_ARGS.get(name, ["--quick"]))


def locomo_available() -> bool:
    from benchmarks.locomo.run import default_data

    try:
        default_data()
    except SystemExit:
        return False
    return True


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks all", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="every benchmark at a tiny size")
    parser.add_argument("--skip", default="", help="comma-separated names to leave out")
    args = parser.parse_args(argv)
    from benchmarks.__main__ import BENCHMARKS  # not at the top: __main__ may import us

    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    have_data = locomo_available()
    rows: list[tuple[str, str]] = []
    figures: dict[str, Any] = {"quick": args.quick}
    failed = 0
    for name in BENCHMARKS:
        if name == "all" or name in skip:
            continue
        if name in NEEDS_LOCOMO and not have_data:
            rows.append((name, "skipped: LoCoMo data not found (set LOCOMO_PATH)"))
            figures[name] = {"status": "skipped"}
            continue
        bench_args = quick_args(name) if args.quick else []
        print(f"\n=== {name} {' '.join(bench_args)}", flush=True)
        started = time.perf_counter()
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        code = subprocess.run(
            [sys.executable, "-m", "benchmarks", name, *bench_args],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": path},
            check=False,
        ).returncode
        seconds = time.perf_counter() - started
        status = "ok" if code == 0 else f"FAILED (exit {code})"
        failed += code != 0
        rows.append((name, f"{status}, {seconds:.1f} s"))
        figures[name] = {"status": status, "seconds": seconds}
    print_table("benchmarks" + (" (quick)" if args.quick else ""), rows)
    print(f"figures written to {save('all', figures)}")
    return 1 if failed else 0
