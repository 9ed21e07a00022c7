"""Writing benchmark figures: a JSON file per run under ``results/`` and a printed table."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"
"""Where figures go; ``$BENCH_RESULTS_DIR`` overrides it (the smoke test writes elsewhere)."""


def results_dir() -> Path:
    """The results folder (created if needed): ``$BENCH_RESULTS_DIR`` or ``results/``."""
    folder = Path(os.environ.get("BENCH_RESULTS_DIR") or RESULTS_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def median(values: list[float]) -> float:
    """Median of ``values`` (the figure reported on these shared, noisy machines)."""
    return float(statistics.median(values))


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile of ``values`` (linear interpolation between closest ranks)."""
    ordered = sorted(values)
    if not ordered:
        msg = "percentile of no values"
        raise ValueError(msg)
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (rank - low))


def save(name: str, figures: dict[str, Any]) -> Path:
    """Write ``figures`` with machine facts to ``<results>/<name>.json``; return the path."""
    path = results_dir() / f"{name}.json"
    payload = {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "figures": figures,
    }
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path


def print_table(title: str, rows: list[tuple[str, str]]) -> None:
    """Print ``(label, value)`` rows as a two-column table."""
    table = Table(title=title, show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for label, value in rows:
        table.add_row(label, value)
    console = Console()
    if not console.is_terminal:  # piped or captured: do not wrap the labels at 80 columns
        console = Console(width=120)
    console.print(table)
