"""mem0 import: history rows per second, a rerun, and the same commands issued directly.

``python -m benchmarks mem0_import [--rows N] [--repeat R] [--quick]`` writes a history
database of mem0's schema (``mem0/memory/storage.py``; written here with ``sqlite3``, not by
mem0, which the benchmark does not need) holding N rows over N/2 memories: every memory
ADDed, about a third UPDATEd, about a sixth DELETEd, in time order. It then measures, R times
each in fresh stores, median reported:

- ``import``: :func:`~memory_ledger.replay.imports.import_mem0` into one namespace (rows/s);
- ``rerun``: the same import again (every row already there: nothing written);
- ``direct``: the peer, the same remembers, corrections and forgets as the engine's direct
  commands (``remember``, ``correct``, ``forget``), one command a row as the import writes
  them; the ratio import/direct is the importer's own cost;
- ``interchange``: :func:`export_interchange` of that namespace and
  :func:`import_interchange` into a new store (memories/s).

Every command is one durable transaction, so the rates are bounded by the ledger's sync.
The load average is printed before and after (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.results import median, print_table, save
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.ledger.ids import Namespace, memory_id, normalize_statement
from memory_ledger.replay.imports.interchange import export_interchange
from memory_ledger.replay.imports.interchange_import import import_interchange
from memory_ledger.replay.imports.mem0 import import_mem0

__all__ = ["main", "write_history"]

NS = Namespace("bench", "mem0", "import")
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def write_history(path: Path, rows: int) -> list[tuple[str, str, str | None, datetime]]:
    """Write ``rows`` history rows to a new database ``path``; return them as (event,
    memory key, new text, time) in order."""
    memories = max(1, rows // 2)
    plan: list[tuple[str, str, str | None, datetime]] = []
    for i in range(memories):
        plan.append(("ADD", f"m{i}", f"Person {i} lives in town {i}.", T0 + timedelta(minutes=i)))
    extra = rows - len(plan)
    for j in range(extra):
        i = (j * 7) % memories
        at = T0 + timedelta(days=1, minutes=j)
        if j % 3 == 2:
            plan.append(("DELETE", f"m{i}", None, at))
        else:
            plan.append(("UPDATE", f"m{i}", f"Person {i} lives in city {j}.", at))
    # Keep the plan applicable: no UPDATE or DELETE after a DELETE of the same memory.
    gone: set[str] = set()
    kept = []
    for event, key, text, at in plan:
        if key in gone:
            continue
        if event == "DELETE":
            gone.add(key)
        kept.append((event, key, text, at))
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE history (id TEXT PRIMARY KEY, memory_id TEXT, old_memory TEXT, "
            "new_memory TEXT, event TEXT, created_at DATETIME, updated_at DATETIME, "
            "is_deleted INTEGER, actor_id TEXT, role TEXT)"
        )
        db.executemany(
            "INSERT INTO history VALUES (?, ?, NULL, ?, ?, ?, ?, ?, NULL, 'user')",
            [
                (f"r{n}", key, text, event, at.isoformat(), at.isoformat(), event == "DELETE")
                for n, (event, key, text, at) in enumerate(kept)
            ],
        )
    db.close()
    return kept


def direct(engine: MemoryEngine, plan: list[tuple[str, str, str | None, datetime]]) -> None:
    """The peer: the plan's commands through the engine's direct commands."""
    current: dict[str, Any] = {}
    for event, key, text, at in plan:
        if event == "ADD":
            assert text is not None
            current[key] = engine.remember(NS, text, occurred_at=at).memory_id
        elif event == "UPDATE":
            assert text is not None
            engine.correct(NS, text, target=current[key], occurred_at=at)
            current[key] = memory_id(NS, normalize_statement(text))
        else:
            engine.forget(NS, current.pop(key))


def one_round(folder: Path, db: Path, plan: list[Any]) -> dict[str, float]:
    rows = len(plan)
    figures: dict[str, float] = {}
    with MemoryEngine.open(folder / "imported") as engine:
        started = time.perf_counter()
        report = import_mem0(engine, db, namespace=NS)
        figures["import"] = rows / (time.perf_counter() - started)
        assert report.imported == rows and not report.refused, report
        started = time.perf_counter()
        again = import_mem0(engine, db, namespace=NS)
        figures["rerun"] = rows / (time.perf_counter() - started)
        assert again.imported == 0
        started = time.perf_counter()
        exported = export_interchange(engine, NS, folder / "out.jsonl")
        figures["export"] = exported.memories / (time.perf_counter() - started)
    with MemoryEngine.open(folder / "moved") as engine:
        started = time.perf_counter()
        import_interchange(engine, NS, folder / "out.jsonl")
        figures["interchange_import"] = exported.memories / (time.perf_counter() - started)
    with MemoryEngine.open(folder / "direct") as engine:
        started = time.perf_counter()
        direct(engine, plan)
        figures["direct"] = rows / (time.perf_counter() - started)
    return figures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks mem0_import")
    parser.add_argument("--rows", type=int, default=1200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a tiny run (CI smoke)")
    args = parser.parse_args(argv)
    rows, repeat = (40, 1) if args.quick else (args.rows, args.repeat)
    load_before = os.getloadavg()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench-mem0-") as tmp:
        db = Path(tmp) / "history.db"
        plan = write_history(db, rows)
        for index in range(repeat):
            rounds.append(one_round(Path(tmp) / f"round{index}", db, plan))
    figures: dict[str, Any] = {
        "rows": len(plan),
        "repeat": repeat,
        "import_rows_per_s": median([r["import"] for r in rounds]),
        "rerun_rows_per_s": median([r["rerun"] for r in rounds]),
        "direct_commands_per_s": median([r["direct"] for r in rounds]),
        "interchange_export_memories_per_s": median([r["export"] for r in rounds]),
        "interchange_import_memories_per_s": median([r["interchange_import"] for r in rounds]),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
    }
    figures["import_over_direct"] = figures["import_rows_per_s"] / figures["direct_commands_per_s"]
    print_table(
        f"mem0 import: {len(plan)} history rows, median of {repeat}",
        [
            ("import (rows/s)", f"{figures['import_rows_per_s']:,.0f}"),
            ("rerun, nothing written (rows/s)", f"{figures['rerun_rows_per_s']:,.0f}"),
            ("peer: direct commands (commands/s)", f"{figures['direct_commands_per_s']:,.0f}"),
            ("import / direct", f"{figures['import_over_direct']:.2f}"),
            (
                "interchange export (memories/s)",
                f"{figures['interchange_export_memories_per_s']:,.0f}",
            ),
            (
                "interchange import (memories/s)",
                f"{figures['interchange_import_memories_per_s']:,.0f}",
            ),
            ("load average before / after", f"{load_before[0]:.2f} / {os.getloadavg()[0]:.2f}"),
        ],
    )
    print(f"figures written to {save('mem0_import', figures)}")
    return 0
