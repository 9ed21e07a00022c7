"""Writing benchmark figures: a JSON file per run under ``results/`` and a printed table."""

from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"


def median(values: list[float]) -> float:
    """Median of ``values`` (the figure reported on these shared, noisy machines)."""
    return float(statistics.median(values))


def save(name: str, figures: dict[str, Any]) -> Path:
    """Write ``figures`` with machine facts to ``results/<name>.json``; return the path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
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
    Console().print(table)
