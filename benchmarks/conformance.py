"""The conformance table: the kit (memory_ledger.replay.conformance) run on every store.

``python -m benchmarks conformance [--quick] [--examples N] [--pg URL] [--no-docs]``

Runs ``pytest -p memory_ledger.conformance`` once per store, each in its own process, on
LangGraph's ``InMemoryStore``, ``LedgerStore`` (a store folder; again with a master key:
values sealed at rest), the engine's own API (``MemoryEngine`` through the thin adapter
:mod:`benchmarks.conformance_engine`), ``SqliteStore`` (a file;
``langgraph-checkpoint-sqlite``) and ``PostgresStore`` (a database of its own, created on
``--pg``, default ``$MEMORY_LEDGER_TEST_PG`` or ``postgresql://postgres@127.0.0.1:5432/test``,
dropped after; skipped when unreachable), telling the kit where each store's bytes are.
Prints the versions and the machine's load (before and after), then the table (store,
version, property, result, why), writes it to ``docs/conformance.md`` between its markers
(not with ``--quick`` or ``--no-docs``) and the figures to ``results/conformance.json``.
``--quick``: InMemoryStore only, 3 examples a property test.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.results import save
from memory_ledger.replay.conformance import PROPERTIES, KitRun, run_kit

DOC = Path(__file__).resolve().parents[1] / "docs" / "conformance.md"
BEGIN, END = "<!-- conformance-table:begin -->", "<!-- conformance-table:end -->"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"

KNOWN: dict[tuple[str, str], str] = {
    ("LedgerStore", "delete"): "by design: a delete is a recorded forget; the ledger keeps "
    "every version (history, as-of reads, explain) and the projection the forgotten memory. "
    "Removing the bytes is erasure (crypto-shredding, docs/erasure.md)",
    ("MemoryEngine API", "delete"): "by design: forget is recorded; the ledger keeps the "
    "forgotten statement (history, as-of reads, explain). Removing the bytes is erasure "
    "(crypto-shredding, docs/erasure.md)",
    ("LedgerStore (sealed)", "delete"): "values are sealed at rest (AES-256-GCM): no byte of "
    "a value is in clear to look for; erasure destroys the key (docs/erasure.md)",
    ("PostgresStore", "contract"): "PostgresStore compares $gt $gte $lt $lte as text "
    "(value->>key <= '-3' holds for -2), where LangGraph's InMemoryStore compares numbers",
    ("SqliteStore", "contract"): "SqliteStore has no async methods (NotImplementedError: "
    "LangGraph offers AsyncSqliteStore for that)",
    ("PostgresStore", "delete"): "the check reads a logical dump (pg_dump): live rows only; "
    "dead tuples stay in the cluster's files until VACUUM",
}
"""Why a store's result is what it is, where the kit's message alone does not say."""


@dataclass
class Target:
    """One store of the table: its factory, its bytes, its version line."""

    name: str
    spec: str
    version: str
    env: dict[str, str] = field(default_factory=dict)
    folder: Path | None = None
    dsn: str | None = None


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min) on {os.cpu_count()} cores"


@contextmanager
def _database(url: str) -> Iterator[tuple[str, str] | None]:
    """A fresh database on the server of ``url``: ``(its URL, server version)``; ``None``
    when the server is unreachable. Dropped after."""
    import psycopg

    name = "conformance_" + uuid.uuid4().hex[:10]
    try:
        admin = psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.Error:
        yield None
        return
    with admin:
        server = str(admin.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
        admin.execute(f"CREATE DATABASE {name}")
        try:
            yield re.sub(r"/[^/?]*(\?|$)", rf"/{name}\1", url, count=1), server
        finally:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def _targets(scratch: Path, quick: bool, pg: tuple[str, str] | None) -> list[Target]:
    langgraph = _version("langgraph")
    targets = [
        Target("InMemoryStore", "langgraph.store.memory:InMemoryStore", f"langgraph {langgraph}")
    ]
    if quick:
        return targets
    ledger, sealed, lite = scratch / "ledger", scratch / "sealed", scratch / "sqlite"
    engine = scratch / "engine"
    for folder in (ledger, sealed, lite, engine):
        folder.mkdir()
    targets.append(
        Target(
            "LedgerStore",
            "benchmarks.conformance_stores:ledger_store",
            f"memory-ledger {_version('memory-ledger')} (this tree), langgraph {langgraph}",
            {"CONFORMANCE_LEDGER_DIR": str(ledger)},
            folder=ledger,
        )
    )
    targets.append(
        Target(
            "LedgerStore (sealed)",
            "benchmarks.conformance_stores:sealed_ledger_store",
            f"memory-ledger {_version('memory-ledger')} (this tree), with a master key",
            {"CONFORMANCE_LEDGER_DIR": str(sealed), "CONFORMANCE_LEDGER_KEY": os.urandom(32).hex()},
            folder=sealed,
        )
    )
    targets.append(
        Target(
            "MemoryEngine API",
            "benchmarks.conformance_engine:engine_store",
            f"memory-ledger {_version('memory-ledger')} (this tree): remember/forget/"
            "retrievable_memories/recall through a thin adapter",
            {"CONFORMANCE_ENGINE_DIR": str(engine)},
            folder=engine,
        )
    )
    targets.append(
        Target(
            "SqliteStore",
            "benchmarks.conformance_stores:sqlite_store",
            f"langgraph-checkpoint-sqlite {_version('langgraph-checkpoint-sqlite')}, "
            f"SQLite {sqlite3.sqlite_version}",
            {"CONFORMANCE_SQLITE_DIR": str(lite)},
            folder=lite,
        )
    )
    if pg is not None:
        url, server = pg
        targets.append(
            Target(
                "PostgresStore",
                "benchmarks.conformance_stores:postgres_store",
                f"langgraph-checkpoint-postgres {_version('langgraph-checkpoint-postgres')}, "
                f"PostgreSQL {server}",
                {"CONFORMANCE_PG_URL": url},
                dsn=url,
            )
        )
    return targets


def _rows(target: Target, run: KitRun) -> list[list[str]]:
    rows = []
    for result in run.properties:
        why = result.why
        known = KNOWN.get((target.name, result.name))
        if known:
            why = f"{known}. Kit: {why}" if why else known
        why = " ".join(why.split())
        rows.append([target.name, target.version, result.name, result.outcome, _short(why)])
    return rows


def _short(text: str, limit: int = 260) -> str:
    text = text.replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def markdown(rows: list[list[str]]) -> str:
    """The table as Markdown."""
    lines = ["| store | version | property | result | why |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def write_doc(table: str, header: str) -> None:
    """Replace what lies between the page's markers with ``header`` and ``table``."""
    text = DOC.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    DOC.write_text(text[:start] + "\n" + header + "\n\n" + table + "\n" + text[end:])


def main(argv: list[str]) -> int:
    """Run the kit on every store; print and publish the table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks conformance")
    parser.add_argument("--quick", action="store_true", help="InMemoryStore, 3 examples")
    parser.add_argument("--examples", type=int, default=25, help="examples a property test")
    parser.add_argument("--pg", default=os.environ.get("MEMORY_LEDGER_TEST_PG", DEFAULT_PG))
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite the docs page")
    args = parser.parse_args(argv)
    examples = 3 if args.quick else args.examples
    load_before = _load()
    print(f"load before: {load_before}")
    scratch = Path(tempfile.mkdtemp(prefix="conformance-bench-"))
    figures: dict[str, Any] = {"examples": examples, "load_before": load_before, "stores": {}}
    rows: list[list[str]] = []
    try:
        with _database(args.pg) if not args.quick else _nothing() as pg:
            if pg is None and not args.quick:
                print(
                    f"PostgreSQL unreachable at {args.pg.rpartition('@')[2]}: PostgresStore skipped"
                )
            for target in _targets(scratch, args.quick, pg):
                print(f"{target.name}: {target.version}", flush=True)
                run = run_kit(
                    target.spec,
                    folder=target.folder,
                    dsn=target.dsn,
                    examples=examples,
                    env=target.env,
                )
                rows += _rows(target, run)
                figures["stores"][target.name] = {
                    "version": target.version,
                    "properties": run.outcomes(),
                    "tests": run.tests,
                }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = _load()
    figures["load_after"] = load_after
    print(f"load after: {load_after}")
    table = markdown(rows)
    print(table)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    header = (
        f"Generated by `python -m benchmarks conformance` on {when} ({examples} examples a "
        f"property test; load {load_before} before, {load_after} after)."
    )
    if not (args.quick or args.no_docs):
        write_doc(table, header)
        print(f"table written to {DOC}")
    print(f"figures written to {save('conformance', figures)}")
    counted = {p: sum(r[2] == p for r in rows) for p in PROPERTIES}
    return 0 if all(counted.values()) else 1


@contextmanager
def _nothing() -> Iterator[None]:
    yield None
