"""The ``memory-ledger`` command line (typer + rich).

Commands: ``convert-locomo``, ``run``, ``recall``, ``events``, ``verify``, ``replay``,
``as-of``, ``explain``, ``export``, ``backup``, ``restore``, ``stats``. Every command that
reads a store takes ``--store DIR``; ``--json`` prints machine-readable output. Exit status:
0 ok, 1 a check failed (``verify``, ``replay --check``, ``restore``), 2 a user error (one
line on stderr, never a traceback). Progress bars appear only on a terminal (stderr).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from eventsourcing.persistence import PersistenceError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from memory_ledger.commands.config import MemoryConfig, load_config, load_config_from
from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.ledger.ids import InvalidNamespaceError, Namespace
from memory_ledger.replay.filters import EventFilter, describe_event, filter_events
from memory_ledger.replay.locomo import (
    LocomoFormatError,
    SampleNotFoundError,
    convert_sample,
    find_sample,
    load_samples,
    write_jsonl,
)
from memory_ledger.replay.points import parse_point, parse_timestamp
from memory_ledger.replay.script import ScriptError, parse_script, run_script
from memory_ledger.replay.timeline import event_record

app = typer.Typer(
    name="memory-ledger",
    help="Event-sourced long-term memory for AI agents: ledger, projections, replay.",
    no_args_is_help=True,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)

StoreOption = Annotated[
    Path,
    typer.Option(
        "--store",
        help="Store folder: its LMDB ledger (unless --ledger names one) and this host's "
        "DuckDB projections.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
LedgerOption = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        envvar="MEMORY_LEDGER_LEDGER",
        help="Ledger URL (postgresql://user@host:port/db?schema=NAME); default: the "
        "configuration's, else the LMDB ledger in --store. Password: PGPASSWORD or "
        "&password_env=VAR.",
        show_envvar=False,
    ),
]

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
        message = escape(" ".join(str(e).splitlines()))
        err.print(
            f"[bold red]error:[/] {type(e).__name__}: {message}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(2) from None


def _audit_config() -> MemoryConfig:
    """The configuration audit commands open a store with: the file's, lexical only (they
    never need an embedding model)."""
    return load_config_from(load_config(), embeddings="none")


@app.command("convert-locomo")
def convert_locomo(
    file: Annotated[Path, typer.Argument(help="LoCoMo JSON file (e.g. locomo10.json).")],
    sample: Annotated[str, typer.Option("--sample", help="Sample id, e.g. conv-26.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary on stderr as JSON.")
    ] = False,
) -> None:
    """Convert one LoCoMo conversation into a session script (JSON Lines on stdout)."""
    with _user_errors():
        converted = convert_sample(find_sample(load_samples(file), sample))
        write_jsonl(converted.steps, sys.stdout.buffer)
        sys.stdout.flush()
        stats = converted.stats
        if as_json:
            sys.stderr.write(
                msgspec.json.encode({"sample": sample, **msgspec.to_builtins(stats)}).decode()
                + "\n"
            )
            return
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
    ledger: LedgerOption = None,
) -> None:
    """Replay a session script into a store. Re-running it is a no-op."""
    with _user_errors():
        with script.open("rb") as handle:
            steps = parse_script(handle)
        with MemoryEngine.open(store, ledger=ledger, sync=not no_sync) as engine:
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


def _print_json(value: Any) -> None:
    sys.stdout.write(msgspec.json.encode(value).decode() + "\n")
    sys.stdout.flush()


@contextmanager
def _progress(label: str, total: int) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on stderr when it is a terminal (else None): call it with positions."""
    if not err.is_terminal or total <= 0:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        "{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task(label, total=total)
        yield lambda position: progress.update(task, completed=position)


def _optional_namespace(
    tenant: str | None, principal: str | None, scope_id: str | None
) -> Namespace | None:
    parts = (tenant, principal, scope_id)
    if all(p is None for p in parts):
        return None
    if any(p is None for p in parts):
        msg = "give all of --tenant, --principal and --scope-id, or none of them"
        raise ValueError(msg)
    return Namespace(str(tenant), str(principal), str(scope_id)).validated()


def _when(value: datetime | None) -> str:
    return value.isoformat() if value is not None else ""


def _clock(value: datetime | None, *, seconds: bool = False) -> str:
    """A compact UTC time for tables (``2024-03-04 09:15``)."""
    if value is None:
        return ""
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


PointArgument = Annotated[
    str,
    typer.Argument(
        metavar="POSITION|TIMESTAMP",
        help="A ledger position, or an ISO 8601 time (no zone = UTC; a date = end of day).",
    ),
]
OccurredOption = Annotated[
    bool,
    typer.Option(
        "--occurred", help="Read the timestamp as conversation (occurred) time, not recorded."
    ),
]


@app.command("recall")
def recall(
    query: Annotated[str, typer.Argument(help="What to recall.")],
    store: StoreOption,
    tenant: Annotated[str, typer.Option("--tenant")],
    principal: Annotated[str, typer.Option("--principal")],
    scope_id: Annotated[str, typer.Option("--scope-id")],
    k: Annotated[int, typer.Option("-k", min=1, max=1000, help="How many results.")] = 5,
    as_json: JsonOption = False,
    at: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            metavar="POSITION|TIMESTAMP",
            help="Answer as the store would have at this position or time.",
        ),
    ] = None,
    occurred: OccurredOption = False,
    embeddings: Annotated[
        str,
        typer.Option(
            "--embeddings",
            help="config: what memory-ledger.toml says (default: lexical); none: lexical "
            "BM25 only; local: hybrid with the bundled MiniLM (the embeddings extra). "
            "Vectors missing from the store are computed first.",
        ),
    ] = "config",
    wait: Annotated[
        float, typer.Option("--wait", min=0, help="Seconds to wait for vectors (local).")
    ] = 300.0,
    ledger: LedgerOption = None,
) -> None:
    """Recall canonical memories of one namespace (BM25, or hybrid with --embeddings local),
    now or --as-of an earlier point (lexical)."""
    from memory_ledger.replay.timetravel import as_of

    past: dict[str, Any] | None = None
    with _user_errors():
        namespace = Namespace(tenant, principal, scope_id).validated()
        if occurred and at is None:
            msg = "--occurred needs --as-of TIMESTAMP"
            raise ValueError(msg)
        if embeddings not in ("config", "none", "local"):
            msg = f"--embeddings must be config, none or local, got {embeddings!r}"
            raise ValueError(msg)
        config = load_config()
        if embeddings != "config" or at is not None:  # as-of recall is lexical
            wanted = "local" if embeddings == "local" and at is None else "none"
            config = load_config_from(config, embeddings=wanted)
        with MemoryEngine.open(store, ledger=ledger, create=False, config=config) as engine:
            if at is None:
                if engine.semantic is not None:
                    engine.wait_for_vectors(wait, namespace)
                result = engine.recall(namespace, query, k)
            else:
                with as_of(engine, parse_point(at), occurred=occurred) as then:
                    result = then.recall(namespace, query, k)
                    past = then.describe()
    if as_json:
        payload: dict[str, Any] = {
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
        if past is not None:
            payload["as_of"] = past
        if result.semantic is not None:
            payload["semantic"] = msgspec.to_builtins(result.semantic)
        _print_json(payload)
        return
    title = f"recall {query!r} (position {result.position})"
    if past is not None and past["mode"] == "position":
        title = f"recall {query!r} as of position {past['position']}"
    elif past is not None:
        title = (
            f"recall {query!r} as of {past['at']} ({past['mode']} time, "
            f"position {past['position']})"
        )
    table = Table(title=title)
    for column in ("rank", "score", "subject", "statement", "evidence", "occurred_at"):
        table.add_column(column)
    for hit in result.results:
        table.add_row(
            str(hit.rank),
            f"{hit.score:.3f}",
            hit.subject or "",
            hit.statement,
            ", ".join(hit.evidence),
            _clock(hit.occurred_at),
        )
    out.print(table)


@app.command("events")
def events(
    store: StoreOption,
    as_json: JsonOption = False,
    start: Annotated[int, typer.Option("--from", min=1, help="First position.")] = 1,
    stop: Annotated[int | None, typer.Option("--to", min=1, help="Last position.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many.")] = None,
    types: Annotated[
        list[str] | None,
        typer.Option("--type", help="Event type, e.g. MemoryActivated (repeat or comma-separate)."),
    ] = None,
    tenant: Annotated[str | None, typer.Option("--tenant")] = None,
    principal: Annotated[str | None, typer.Option("--principal")] = None,
    scope_id: Annotated[str | None, typer.Option("--scope-id")] = None,
    session: Annotated[str | None, typer.Option("--session", help="Session id.")] = None,
    turn: Annotated[int | None, typer.Option("--turn", help="Turn id.")] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Recorded at or after (ISO 8601).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Recorded at or before (ISO 8601).")
    ] = None,
    ledger: LedgerOption = None,
) -> None:
    """List ledger events in position order, filtered (JSON Lines with --json)."""
    with _user_errors():
        selection = EventFilter(
            tenant=tenant,
            principal=principal,
            scope_id=scope_id,
            session_id=session,
            turn_id=turn,
            types=tuple(types or ()),
            start=start,
            stop=stop,
            since=parse_timestamp(since) if since else None,
            until=parse_timestamp(until) if until else None,
        )
        selection.normalized_types()
        with MemoryEngine.open(
            store, ledger=ledger, create=False, config=_audit_config()
        ) as engine:
            selected = filter_events(engine, selection, limit=limit)
            if as_json:
                encoder = msgspec.json.Encoder()
                write = sys.stdout.buffer.write
                for position, event in selected:
                    write(encoder.encode(event_record(position, event)) + b"\n")
                sys.stdout.flush()
                return
            table = Table(title=f"events of {store}")
            for column in ("position", "type", "session", "turn", "recorded_at", "detail"):
                table.add_column(column)
            for position, event in selected:
                table.add_row(
                    str(position),
                    type(event).__name__,
                    str(getattr(event, "session_id", "") or ""),
                    str(t) if isinstance(t := getattr(event, "turn_id", None), int) else "",
                    _clock(event.recorded_at, seconds=True),
                    describe_event(event),
                )
    out.print(table)


@app.command("verify")
def verify(store: StoreOption, as_json: JsonOption = False, ledger: LedgerOption = None) -> None:
    """Walk the ledger's hash chain; exit 1 and name the first bad position on tampering."""
    from memory_ledger.replay.verify import verify_store

    with (
        _user_errors(),
        MemoryEngine.open(store, ledger=ledger, create=False, config=_audit_config()) as engine,
    ):
        report = verify_store(engine)
    if as_json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    elif report.ok:
        out.print(f"ok: {report.checked} records, hash chain intact, positions 1..{report.head}")
    else:
        err.print(
            f"[bold red]tampered:[/] {escape(report.problem or '')}",
            highlight=False,
            soft_wrap=True,
        )
    if not report.ok:
        raise typer.Exit(1)


@app.command("replay")
def replay_command(
    store: StoreOption,
    to: Annotated[
        int | None, typer.Option("--to", min=0, help="Stop at this position (default: head).")
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Compare with this process's live projection file; exit 1 on a difference.",
        ),
    ] = False,
    keep: Annotated[
        Path | None,
        typer.Option("--out", help="Keep the rebuilt DuckDB file here (a new file)."),
    ] = None,
    as_json: JsonOption = False,
    ledger: LedgerOption = None,
) -> None:
    """Rebuild every read model from the ledger into a fresh file (and --check the live one)."""
    from memory_ledger.replay.rebuild import check_projections, rebuild_projections

    with (
        _user_errors(),
        MemoryEngine.open(store, ledger=ledger, create=False, config=_audit_config()) as engine,
    ):
        if check and keep is not None:
            msg = "--check compares in a scratch file; drop --out, or run without --check"
            raise ValueError(msg)
        with _progress("replaying", to if to is not None else engine.head) as on_page:
            if check:
                with engine.projection_guard():
                    report: Any = check_projections(engine, to=to, on_page=on_page)
            else:
                report = rebuild_projections(engine, to=to, out=keep, on_page=on_page)
    if as_json:
        _print_json(report)
    elif check:
        if report.ok:
            out.print(
                f"ok: {len(report.checked)} tables and views of {report.live_path} match a "
                f"rebuild from the ledger at position {report.position} "
                f"({report.seconds:.2f} s)",
                highlight=False,
            )
        for diff in report.differences:
            err.print(
                f"[bold red]differs:[/] {diff.name}: live {diff.live_rows} rows, rebuilt "
                f"{diff.rebuilt_rows}; {diff.only_live} only in live, {diff.only_rebuilt} "
                "only in the rebuild",
                highlight=False,
                soft_wrap=True,
            )
            for example in diff.examples:
                err.print(f"  {escape(example)}", highlight=False, soft_wrap=True)
    else:
        table = Table(
            title=f"rebuilt to position {report.position} of {report.head} "
            f"in {report.seconds:.2f} s" + (f" -> {report.path}" if report.path else "")
        )
        table.add_column("table or view")
        table.add_column("rows", justify="right")
        table.add_column("sha256 (first 16)")
        for name, rows in report.rows.items():
            table.add_row(name, str(rows), report.digests[name][:16])
        out.print(table)
    if check and not report.ok:
        raise typer.Exit(1)


@app.command("as-of")
def as_of_command(
    point: PointArgument,
    store: StoreOption,
    occurred: OccurredOption = False,
    tenant: Annotated[str | None, typer.Option("--tenant")] = None,
    principal: Annotated[str | None, typer.Option("--principal")] = None,
    scope_id: Annotated[str | None, typer.Option("--scope-id")] = None,
    history: Annotated[
        bool, typer.Option("--all", help="Also list superseded, forgotten and pruned items.")
    ] = False,
    as_json: JsonOption = False,
    ledger: LedgerOption = None,
) -> None:
    """Show canonical memory as it stood at a position or time."""
    from memory_ledger.replay.timetravel import as_of, memory_record

    with _user_errors():
        namespace = _optional_namespace(tenant, principal, scope_id)
        parsed = parse_point(point)
        with MemoryEngine.open(
            store, ledger=ledger, create=False, config=_audit_config()
        ) as engine:
            total = parsed if isinstance(parsed, int) else engine.head
            with (
                _progress("replaying", total) as on_page,
                as_of(engine, parsed, occurred=occurred, on_page=on_page) as past,
            ):
                rows = past.memories(namespace, include_history=history)
                described = past.describe()
    if as_json:
        _print_json({**described, "memories": [memory_record(r) for r in rows]})
        return
    if described["mode"] == "position":
        title = f"canonical memory as of position {described['position']}"
    elif described["mode"] == "recorded":
        title = (
            f"canonical memory as of {described['at']} (recorded: position {described['position']})"
        )
    else:
        title = (
            f"canonical memory as of {described['at']} (occurred time; "
            f"{described['events_skipped']} later events left out)"
        )
    spaces = {(r["tenant"], r["principal"], r["scope_id"]) for r in rows}
    if len(spaces) == 1:
        title += " in " + "/".join(next(iter(spaces)))
    table = Table(title=title)
    columns = ["memory", "status", "rev", "subject", "statement", "evidence", "occurred"]
    if len(spaces) > 1:
        columns.insert(0, "namespace")
    for column in columns:
        table.add_column(column, overflow="fold" if column == "statement" else "ellipsis")
    for row in rows:
        cells = [
            row["memory_id"][:8],
            row["status"],
            str(row["revision"]),
            row["subject"] or "",
            row["statement"],
            ", ".join(row["evidence"] or ()),
            _clock(row["occurred_at"]),
        ]
        if len(spaces) > 1:
            cells.insert(0, f"{row['tenant']}/{row['principal']}/{row['scope_id']}")
        table.add_row(*cells)
    out.print(table)
    if not rows:
        err.print("no memories at that point", highlight=False)


def _explain_tree(lineage: Any) -> Any:
    from rich.tree import Tree

    ns = lineage.namespace
    root = Tree(
        f"[bold]memory {lineage.memory_id}[/]  {escape(lineage.statement)}\n"
        f"{lineage.status}, revision {lineage.revision}, "
        f"{escape(f'{ns.tenant}/{ns.principal}/{ns.scope_id}')}"
    )
    facts = [
        f"subject {lineage.subject or '-'}",
        f"predicate {lineage.predicate or '-'}",
        f"value {lineage.value or '-'}",
        f"importance {lineage.importance:g}",
    ]
    root.add(escape(" · ".join(facts)))
    root.add(f"evidence: {escape(', '.join(lineage.evidence) or '-')}")
    for origin in lineage.origins:
        if origin.kind == "activated":
            label = (
                f"[green]activated[/] @{origin.position} decision [bold]{origin.decision}[/]"
                f" (session policy {origin.activation_policy})"
            )
            if origin.decision_evidence:
                label += f", evidence {escape(', '.join(origin.decision_evidence))}"
        else:
            label = f"[cyan]reinforced[/] @{origin.position}"
        label += f" in {escape(origin.session_id)} turn {origin.turn_id}"
        if origin.reconciled_position is not None:
            label += f", reconciled @{origin.reconciled_position}"
        branch = root.add(label)
        if origin.transcript is not None:
            t = origin.transcript
            occurred = _when(t.occurred_at) or "-"
            node = branch.add(
                f"transcript @{t.position}: turn {t.turn_id}, occurred {occurred}, "
                f"sha256 {t.digest[:16]}…, {t.redactions} redactions"
            )
            node.add(escape(t.transcript))
        if origin.candidate is not None:
            c = origin.candidate
            node = branch.add(
                f"candidate {c.candidate_id} #{c.index} @{c.position} by extractor "
                f"[bold]{escape(c.extractor_id)}[/]: validation {c.validation}"
            )
            node.add(escape(c.item.statement))
            node.add(
                escape(
                    f"confidence {c.item.confidence:g}, importance {c.item.importance:g}, "
                    f"evidence {', '.join(c.item.evidence) or '-'}, reason {c.item.reason!r}"
                )
            )
        if origin.command is not None:
            cmd = origin.command
            branch.add(escape(f"command {cmd.intent} @{cmd.position}: {cmd.statement}"))
        if origin.extraction is not None:
            x = origin.extraction
            branch.add(
                f"extraction of the turn @{x.position}: {x.extracted} accepted, "
                f"{x.rejected} rejected by {escape(x.extractor_id)}"
            )
    for entry in lineage.history:
        text = f"[yellow]{entry.type}[/] @{entry.position}: {escape(entry.detail)}"
        if entry.related_memory:
            statement = lineage.related.get(entry.related_memory, "")
            text += f" -> {entry.related_memory} {escape(statement)}"
        root.add(text)
    for older in lineage.supersedes:
        root.add(f"supersedes {older} {escape(lineage.related.get(older, ''))}")
    for label, items in (
        (
            "recalled",
            [
                f"@{r.position} {r.session_id} turn {r.turn_id}: rank {r.rank} for "
                f"{r.query!r} ({r.path})"
                for r in lineage.recalls
            ],
        ),
        (
            "admitted",
            [
                f"@{a.position} {a.session_id} turn {a.turn_id}: revision {a.revision}"
                + (f", revoked @{a.revoked_position} ({a.revoke_reason})" if a.revoked else "")
                for a in lineage.admissions
            ],
        ),
        (
            "used",
            [f"@{u.position} {u.session_id} turn {u.turn_id}" for u in lineage.uses],
        ),
    ):
        branch = root.add(f"{label} in {len(items)} turn(s)")
        for item in items:
            branch.add(escape(item))
    return root


@app.command("explain")
def explain_command(
    memory_id: Annotated[str, typer.Argument(help="Memory id (or a unique prefix of one).")],
    store: StoreOption,
    fmt: Annotated[
        str, typer.Option("--format", help="text, json or mermaid (a Markdown diagram).")
    ] = "text",
    as_json: JsonOption = False,
    ledger: LedgerOption = None,
) -> None:
    """Show the lineage of a memory: evidence, candidate, extractor, decision, later use."""
    from memory_ledger.replay.lineage import explain, render_mermaid

    with _user_errors():
        if fmt not in ("text", "json", "mermaid"):
            msg = f"unknown --format {fmt!r}; use text, json or mermaid"
            raise ValueError(msg)
        with MemoryEngine.open(
            store, ledger=ledger, create=False, config=_audit_config()
        ) as engine:
            lineage = explain(engine, memory_id)
    if as_json or fmt == "json":
        _print_json(lineage)
    elif fmt == "mermaid":
        sys.stdout.write(render_mermaid(lineage))
        sys.stdout.flush()
    else:
        out.print(_explain_tree(lineage), highlight=False)


@app.command("export")
def export_command(
    store: StoreOption,
    keep: Annotated[Path, typer.Option("--out", help="Folder to write (new or empty).")],
    fmt: Annotated[str, typer.Option("--format", help="parquet or jsonl.")] = "parquet",
    to: Annotated[
        int | None, typer.Option("--to", min=0, help="Export the state at this position.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Write into a non-empty folder.")] = False,
    as_json: JsonOption = False,
    ledger: LedgerOption = None,
) -> None:
    """Export events and every read model as Parquet or JSON Lines files (+ manifest.json)."""
    from memory_ledger.replay.export import export_store

    with _user_errors():
        if fmt not in ("parquet", "jsonl"):
            msg = f"unknown --format {fmt!r}; use parquet or jsonl"
            raise ValueError(msg)
        with MemoryEngine.open(
            store, ledger=ledger, create=False, config=_audit_config()
        ) as engine:
            report = export_store(
                engine, keep, fmt="parquet" if fmt == "parquet" else "jsonl", to=to, force=force
            )
    if as_json:
        _print_json(report)
        return
    table = Table(title=f"exported position {report.position} to {report.out}")
    table.add_column("file")
    table.add_column("rows", justify="right")
    for exported in report.files:
        table.add_row(exported.path, str(exported.rows))
    table.add_row("manifest.json", "")
    out.print(table)


@app.command("backup")
def backup_command(
    store: StoreOption,
    keep: Annotated[Path, typer.Option("--out", help="Backup folder to create (new or empty).")],
    as_json: JsonOption = False,
    ledger: LedgerOption = None,
) -> None:
    """Take a consistent, compacted copy of the ledger (safe while a host writes)."""
    from memory_ledger.replay.backup import backup_store

    with (
        _user_errors(),
        MemoryEngine.open(store, ledger=ledger, create=False, config=_audit_config()) as engine,
    ):
        report = backup_store(engine, keep)
    if as_json:
        _print_json(report)
        return
    out.print(
        f"backup of positions 1..{report.manifest.position} written to {report.out} "
        f"({report.bytes:,} bytes, {report.seconds:.2f} s)",
        highlight=False,
    )


@app.command("restore")
def restore_command(
    backup: Annotated[Path, typer.Argument(help="A folder written by memory-ledger backup.")],
    store: Annotated[
        Path, typer.Option("--store", help="New store folder to restore into (new or empty).")
    ],
    as_json: JsonOption = False,
) -> None:
    """Restore a backup into a new store folder and verify its hash chain."""
    from memory_ledger.replay.backup import restore_store

    with _user_errors():
        report = restore_store(backup, store)
    if as_json:
        _print_json(report)
    elif report.ok:
        out.print(
            f"restored positions 1..{report.verify.head} into {report.store}; hash chain "
            "verified (projections are rebuilt when the store is opened)",
            highlight=False,
        )
    else:
        err.print(
            f"[bold red]restore failed verification:[/] {escape(report.problem or '')}",
            highlight=False,
            soft_wrap=True,
        )
    if not report.ok:
        raise typer.Exit(1)


@app.command("migrate")
def migrate_command(
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="The PostgreSQL ledger URL to copy into (empty, or an interrupted copy).",
        ),
    ],
    store: Annotated[
        Path, typer.Option("--store", help="Store folder whose LMDB ledger is copied.")
    ],
    as_json: JsonOption = False,
) -> None:
    """Copy a store's LMDB ledger into PostgreSQL (positions, bytes and hashes kept), then
    verify the copy; exit 1 if it does not verify."""
    from memory_ledger.replay.migrate import migrate_store

    with _user_errors():
        report = migrate_store(store, to)
    if as_json:
        _print_json(report)
    elif report.ok:
        out.print(
            f"copied {report.copied} records into {report.target} (positions 1..{report.head}"
            f"{f', resumed after {report.resumed_after}' if report.resumed_after else ''}); "
            f"hash chain verified ({report.seconds:.2f} s)",
            highlight=False,
        )
    else:
        err.print(
            f"[bold red]migration failed verification:[/] {escape(report.problem or '')}",
            highlight=False,
            soft_wrap=True,
        )
    if not report.ok:
        raise typer.Exit(1)


def _size(value: int) -> str:
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{value} B"  # pragma: no cover


@app.command("stats")
def stats_command(
    store: StoreOption, as_json: JsonOption = False, ledger: LedgerOption = None
) -> None:
    """Counts per event type, namespaces, sessions, memories, positions and file sizes."""
    from memory_ledger.replay.stats import store_stats

    with (
        _user_errors(),
        MemoryEngine.open(store, ledger=ledger, create=False, config=_audit_config()) as engine,
    ):
        report = store_stats(engine)
    if as_json:
        _print_json(report)
        return
    summary = Table(title=f"memory-ledger stats {report.store}", show_header=False)
    summary.add_column("what")
    summary.add_column("value", justify="right")
    for label, value in (
        ("ledger head", report.ledger_head),
        ("projection position", report.projection_position),
        ("events", report.events),
        ("sessions", report.sessions),
        ("namespaces", len(report.namespaces)),
        ("active memories", report.active_memories),
        ("first recorded", _when(report.first_recorded_at)),
        ("last recorded", _when(report.last_recorded_at)),
        ("ledger file", f"{_size(report.ledger_bytes)} ({_size(report.ledger_used_bytes)} used)"),
        ("total on disk", _size(report.total_bytes)),
    ):
        summary.add_row(label, str(value))
    out.print(summary)
    by_type = Table(title="events by type")
    by_type.add_column("type")
    by_type.add_column("count", justify="right")
    for name, count in report.events_by_type.items():
        by_type.add_row(name, str(count))
    out.print(by_type)
    namespaces = Table(title="namespaces")
    for column in ("tenant", "principal", "scope_id", "sessions", "active", "memories by status"):
        namespaces.add_column(column)
    for ns in report.namespaces:
        namespaces.add_row(
            ns.tenant,
            ns.principal,
            ns.scope_id,
            str(ns.sessions),
            str(ns.active_memories),
            ", ".join(f"{status} {count}" for status, count in ns.memories.items()),
        )
    out.print(namespaces)
    slots = Table(title="projection files")
    for column in ("file", "size", "position", "state"):
        slots.add_column(column)
    for slot in report.projection_files:
        state = "this process" if slot.this_process else ("in use" if slot.in_use else "free")
        slots.add_row(
            slot.path,
            _size(slot.bytes),
            "" if slot.position is None else str(slot.position),
            state,
        )
    out.print(slots)


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
