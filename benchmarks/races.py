"""Race harness: every deciding command raced from threads, processes and PostgreSQL hosts.

``python -m benchmarks races [--rounds N] [--ops K] [--quick] [--no-postgres]`` runs N rounds
of K random deciding commands (``benchmarks.race_harness``) on each surface: 4 threads of
one engine, 4 processes on one LMDB store, and 3 hosts of one PostgreSQL ledger (a fresh
schema on ``$MEMORY_LEDGER_TEST_PG``, default the machine's server). It prints, per surface,
the rounds, commands, violations found (at most one current value per key and per chain,
every acknowledged effect present, linearizable answers) and the conflicts that were
re-decided, with the machine's load. The long profile (issue 25: at least 1,000 rounds and
20,000 commands in all) is ``--rounds 340 --ops 20``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.race_harness import NAMESPACE, SurfaceFigures, Workers, race, run_threads_round
from benchmarks.results import print_table, save
from memory_ledger.commands.engine.memory_engine import MemoryEngine

PG = os.environ.get("MEMORY_LEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


@contextlib.contextmanager
def pg_schema() -> Iterator[str]:
    """A fresh schema on the PostgreSQL server, dropped after; yields its ledger URL."""
    import psycopg
    from psycopg import sql

    from memory_ledger.ledger.postgres import parse_ledger_url

    url = parse_ledger_url(PG)
    name = f"mlrace_{uuid.uuid4().hex[:12]}"

    def run(statement: sql.Composed) -> None:
        with psycopg.connect(
            host=url.host,
            port=url.port,
            dbname=url.dbname,
            user=url.user,
            password=url.password or None,
            autocommit=True,
            connect_timeout=5,
        ) as conn:
            conn.execute(statement)

    run(sql.SQL("CREATE SCHEMA {0}").format(sql.Identifier(name)))
    try:
        separator = "&" if "?" in PG else "?"
        yield f"{PG}{separator}schema={name}"
    finally:
        run(sql.SQL("DROP SCHEMA {0} CASCADE").format(sql.Identifier(name)))


def threads(root: Path, rounds: int, ops: int, seed: int) -> SurfaceFigures:
    with MemoryEngine.open(root / "threads") as engine:
        figures = race(
            "threads (4, one engine)",
            engine,
            lambda planned: run_threads_round(engine, NAMESPACE, planned, 4),
            rounds=rounds,
            ops_per_round=ops,
            seed=seed,
        )
        figures.conflicts = engine.decision_conflicts
    return figures


def processes(root: Path, rounds: int, ops: int, seed: int) -> SurfaceFigures:
    store = root / "processes"
    with MemoryEngine.open(store):
        pass  # created before the workers open it
    workers = Workers(store, 4)
    try:
        with MemoryEngine.open(store) as auditor:
            figures = race(
                "processes (4, one store)",
                auditor,
                workers.run_round,
                rounds=rounds,
                ops_per_round=ops,
                seed=seed,
            )
    finally:
        workers.close()
    figures.conflicts = sum(workers.conflicts)
    return figures


def hosts(root: Path, rounds: int, ops: int, seed: int) -> SurfaceFigures:
    with pg_schema() as url:
        with MemoryEngine.open(root / "auditor", ledger=url) as auditor:
            workers = Workers(root, 3, url)
            try:
                figures = race(
                    "hosts (3, one PostgreSQL ledger)",
                    auditor,
                    workers.run_round,
                    rounds=rounds,
                    ops_per_round=ops,
                    seed=seed,
                )
            finally:
                workers.close()
    figures.conflicts = sum(workers.conflicts)
    return figures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks races", description=__doc__)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--ops", type=int, default=12)
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--quick", action="store_true", help="3 rounds of 6 commands")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args(argv)
    rounds, ops = (3, 6) if args.quick else (args.rounds, args.ops)
    surfaces: list[SurfaceFigures] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="races-") as folder:
        root = Path(folder)
        surfaces.append(threads(root, rounds, ops, args.seed))
        surfaces.append(processes(root, rounds, ops, args.seed + 1))
        if not args.no_postgres:
            surfaces.append(hosts(root, rounds, ops, args.seed + 2))
    seconds = time.perf_counter() - started
    rows: list[tuple[str, str]] = []
    figures: dict[str, Any] = {"seconds": round(seconds, 1), "load": os.getloadavg()}
    for s in surfaces:
        rows.append(
            (
                s.surface,
                f"{s.rounds} rounds, {s.commands} commands, {len(s.violations)} violations, "
                f"{s.conflicts} conflicts re-decided",
            )
        )
        figures[s.surface] = {
            "rounds": s.rounds,
            "commands": s.commands,
            "violations": s.violations,
            "conflicts_redecided": s.conflicts,
            "refusals": s.errors,
        }
    total = sum(s.commands for s in surfaces)
    rows.append(("all", f"{sum(s.rounds for s in surfaces)} rounds, {total} commands"))
    rows.append(("load (1, 5, 15 min)", " ".join(f"{x:.2f}" for x in os.getloadavg())))
    rows.append(("seconds", f"{seconds:.1f}"))
    print_table("Race harness (issue 25)", rows)
    for s in surfaces:
        for violation in s.violations[:20]:
            print(f"VIOLATION {s.surface}: {violation}")
    print(f"figures written to {save('races', figures)}")
    return 1 if any(s.violations for s in surfaces) else 0


if __name__ == "__main__":
    raise SystemExit(main(__import__("sys").argv[1:]))
