"""The ``memory-ledger`` command line (typer + rich).

Commands: ``convert-locomo``, ``run``, ``recall``, ``events``. Every command that reads a
store takes ``--store DIR``; ``--json`` prints machine-readable output. Typed errors exit
with status 2 and a one-line message on stderr, never a traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from eventsourcing.persistence import PersistenceError
from rich.console import Console
from rich.table import Table

from commands.engine import MemoryEngine
from commands.errors import MemoryLedgerError
from ledger.ids import InvalidNamespaceError, Namespace
from replay.locomo import (
    LocomoFormatError,
    SampleNotFoundError,
    convert_sample,
    find_sample,
    load_samples,
    write_jsonl,
)
from replay.script import ScriptError, parse_script, run_script
from replay.timeline import event_record, iter_events

app = typer.Typer(
    name="memory-ledger",
    help="Event-sourced long-term memory for AI agents: ledger, projections, replay.",
    no_args_is_help=True,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)

StoreOption = Annotated[
    Path, typer.Option("--store", help="Store folder (LMDB ledger + DuckDB projections).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]

_USER_ERRORS = (
    MemoryLedgerError,
    ScriptError,
    LocomoFormatError,
    SampleNotFoundError,
    InvalidNamespaceError,
    PersistenceError,
    msgspec.DecodeError,
    OverflowError,
    ValueError,
    OSError,
)
"""Errors caused by input or environment: one line on stderr and exit status 2."""


@contextmanager
def _user_errors() -> Iterator[None]:
    try:
        yield
    except BrokenPipeError:
        raise
    except _USER_ERRORS as e:
        message = str(e)
        err.print(f"[bold red]error:[/] {type(e).__name__}: {message}", highlight=False)
        raise typer.Exit(2) from None


@app.command("convert-locomo")
def convert_locomo(
    file: Annotated[Path, typer.Argument(help="LoCoMo JSON file (e.g. locomo10.json).")],
    sample: Annotated[str, typer.Option("--sample", help="Sample id, e.g. conv-26.")],
) -> None:
    """Convert one LoCoMo conversation into a session script (JSON Lines on stdout)."""
    with _user_errors():
        converted = convert_sample(find_sample(load_samples(file), sample))
        write_jsonl(converted.steps, sys.stdout.buffer)
        sys.stdout.flush()
        stats = converted.stats
        err.print(
            f"{sample}: {stats.sessions} sessions, {stats.turns} turns, {stats.facts} facts, "
            f"{len(stats.fallbacks)} fallbacks",
            highlight=False,
        )


@app.command("run")
def run(
    script: Annotated[Path, typer.Argument(help="Session script (JSON Lines).")],
    store: StoreOption,
    as_json: JsonOption = False,
    no_sync: Annotated[
        bool, typer.Option("--no-sync", help="Skip fsync per command (not durable).")
    ] = False,
) -> None:
    """Replay a session script into a store. Re-running it is a no-op."""
    with _user_errors():
        with script.open("rb") as handle:
            steps = parse_script(handle)
        with MemoryEngine.open(store, sync=not no_sync) as engine:
            report = run_script(engine, steps)
    if as_json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
        return
    table = Table(title=f"memory-ledger run {script.name}", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    for label, value in (
        ("events written", report.events_written),
        ("ledger position", report.last_position),
        ("turns observed", report.turns_observed),
        ("turns already recorded", report.turns_skipped),
        ("candidates", report.candidates),
        ("rejected items", report.rejected),
        ("sessions reconciled", report.sessions_finished),
        ("sessions already reconciled", report.sessions_already_finished),
        ("memories activated", report.memories_activated),
        ("memories reinforced", report.memories_reinforced),
        ("memories superseded", report.memories_superseded),
        ("explicit commands", report.commands_applied),
        ("active memories", report.active_memories),
        ("time taken", f"{report.seconds:.2f} s"),
    ):
        table.add_row(label, str(value))
    out.print(table)


@app.command("recall")
def recall(
    query: Annotated[str, typer.Argument(help="What to recall.")],
    store: StoreOption,
    tenant: Annotated[str, typer.Option("--tenant")],
    principal: Annotated[str, typer.Option("--principal")],
    scope_id: Annotated[str, typer.Option("--scope-id")],
    k: Annotated[int, typer.Option("-k", min=1, max=1000, help="How many results.")] = 5,
    as_json: JsonOption = False,
) -> None:
    """Recall canonical memories of one namespace (BM25)."""
    with _user_errors():
        namespace = Namespace(tenant, principal, scope_id).validated()
        with MemoryEngine.open(store, create=False) as engine:
            result = engine.recall(namespace, query, k)
    if as_json:
        payload = {
            "query": result.query,
            "position": result.position,
            "results": [
                {
                    "rank": hit.rank,
                    "memory_id": hit.memory_id,
                    "statement": hit.statement,
                    "subject": hit.subject,
                    "score": hit.score,
                    "evidence": list(hit.evidence),
                    "occurred_at": hit.occurred_at,
                }
                for hit in result.results
            ],
        }
        sys.stdout.write(msgspec.json.encode(payload).decode() + "\n")
        return
    table = Table(title=f"recall {query!r} (position {result.position})")
    for column in ("rank", "score", "subject", "statement", "evidence", "occurred_at"):
        table.add_column(column)
    for hit in result.results:
        table.add_row(
            str(hit.rank),
            f"{hit.score:.3f}",
            hit.subject or "",
            hit.statement,
            ", ".join(hit.evidence),
            hit.occurred_at.isoformat() if hit.occurred_at else "",
        )
    out.print(table)


@app.command("events")
def events(
    store: StoreOption,
    as_json: JsonOption = False,
    start: Annotated[int, typer.Option("--from", min=1, help="First position.")] = 1,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many.")] = None,
) -> None:
    """List ledger events in position order (JSON Lines with --json)."""
    with _user_errors(), MemoryEngine.open(store, create=False) as engine:
        if as_json:
            encoder = msgspec.json.Encoder()
            write = sys.stdout.buffer.write
            for position, event in iter_events(engine, start=start, limit=limit):
                write(encoder.encode(event_record(position, event)) + b"\n")
            sys.stdout.flush()
            return
        table = Table(title=f"events of {store}")
        for column in ("position", "type", "session", "turn", "recorded_at"):
            table.add_column(column)
        for position, event in iter_events(engine, start=start, limit=limit):
            record: dict[str, Any] = event_record(position, event)
            table.add_row(
                str(position),
                record["type"],
                str(record.get("session_id", "")),
                str(record.get("turn_id", "")),
                str(record["recorded_at"]),
            )
        out.print(table)


@app.command("verify")
def verify(store: StoreOption, as_json: JsonOption = False) -> None:
    """Walk the ledger's hash chain; exit 1 and name the first bad position on tampering."""
    from replay.verify import verify_store

    with _user_errors(), MemoryEngine.open(store, create=False) as engine:
        report = verify_store(engine)
    if as_json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    elif report.ok:
        out.print(f"ok: {report.checked} records, hash chain intact, positions 1..{report.head}")
    else:
        err.print(f"[bold red]tampered:[/] {report.problem}", highlight=False)
    if not report.ok:
        raise typer.Exit(1)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        out.print(f"memory-ledger {version('memory-ledger')}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Event-sourced long-term memory for AI agents: ledger, projections, replay."""


def main() -> None:
    """Console-script entry point. A closed output pipe (``| head``) ends quietly."""
    try:
        app()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
