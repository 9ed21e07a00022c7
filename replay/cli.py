"""The ``memory-ledger`` command line (typer + rich).

Commands, by module: ``convert-locomo`` and ``run`` (:mod:`.cli_run`), ``recall``
(:mod:`.cli_recall`), and the audit commands here: ``events``, ``verify``, ``replay``,
``as-of``, ``explain``, ``export``, ``backup``, ``restore``, ``stats``. Every command that
reads a store takes ``--store DIR`` (default: ``store_dir`` of the settings file);
``--json`` prints machine-readable output. Settings come from ``--config FILE``, else
``./memory-ledger.toml`` when it exists (the CLI looks in the current directory; the
library reads only a file it is given). Exit status: 0 ok, 1 a check failed (``verify``,
``replay --check``, ``restore``) or a turn's extraction failed (``run``), 2 any error (one
line on stderr, never a traceback). Progress bars appear only on a terminal (stderr).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.markup import escape
from rich.table import Table

from memory_ledger.commands.config import CONFIG_FILE
from memory_ledger.replay import cli_common as common
from memory_ledger.replay.cli_common import (
    JsonOption,
    PrincipalFilter,
    ScopeFilter,
    StoreOption,
    TenantFilter,
    clock,
    err,
    optional_namespace,
    out,
    print_json,
    size,
    when,
)
from memory_ledger.replay.cli_recall import recall
from memory_ledger.replay.cli_run import convert_locomo, run
from memory_ledger.replay.filters import EventFilter, describe_event, filter_events
from memory_ledger.replay.points import parse_point, parse_timestamp
from memory_ledger.replay.timeline import event_record

__all__ = ["app", "main"]

app = typer.Typer(
    name="memory-ledger",
    no_args_is_help=True,
    add_completion=False,
)
app.command("convert-locomo")(convert_locomo)
app.command("run")(run)
app.command("recall")(recall)

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


@app.command("events")
def events(
    ctx: typer.Context,
    store: StoreOption = None,
    as_json: JsonOption = False,
    start: Annotated[int, typer.Option("--from", min=1, help="First position.")] = 1,
    stop: Annotated[int | None, typer.Option("--to", min=1, help="Last position.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many.")] = None,
    types: Annotated[
        list[str] | None,
        typer.Option("--type", help="Event type, e.g. MemoryActivated (repeat or comma-separate)."),
    ] = None,
    tenant: TenantFilter = None,
    principal: PrincipalFilter = None,
    scope_id: ScopeFilter = None,
    session: Annotated[str | None, typer.Option("--session", help="Session id.")] = None,
    turn: Annotated[int | None, typer.Option("--turn", help="Turn id.")] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Recorded at or after (ISO 8601).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Recorded at or before (ISO 8601).")
    ] = None,
) -> None:
    """List ledger events in position order, filtered (JSON Lines with --json)."""
    with common.user_errors():
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
        with common.open_for_audit(ctx, store) as engine:
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
                    clock(event.recorded_at, seconds=True),
                    describe_event(event),
                )
    out.print(table)


@app.command("verify")
def verify(ctx: typer.Context, store: StoreOption = None, as_json: JsonOption = False) -> None:
    """Walk the ledger's hash chain; exit 1 and name the first bad position on tampering."""
    from memory_ledger.replay.verify import verify_store

    with common.user_errors(), common.open_for_audit(ctx, store) as engine:
        report = verify_store(engine)
    if as_json:
        print_json(report)
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
    ctx: typer.Context,
    store: StoreOption = None,
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
) -> None:
    """Rebuild every read model from the ledger into a fresh file (and --check the live one)."""
    from memory_ledger.replay.rebuild import check_projections, rebuild_projections

    with common.user_errors(), common.open_for_audit(ctx, store) as engine:
        if check and keep is not None:
            msg = "--check compares in a scratch file; drop --out, or run without --check"
            raise ValueError(msg)
        with common.progress("replaying", to if to is not None else engine.head) as on_page:
            if check:
                with engine.projection_guard():
                    report: Any = check_projections(engine, to=to, on_page=on_page)
            else:
                report = rebuild_projections(engine, to=to, out=keep, on_page=on_page)
    if as_json:
        print_json(report)
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
    ctx: typer.Context,
    point: PointArgument,
    store: StoreOption = None,
    occurred: OccurredOption = False,
    tenant: TenantFilter = None,
    principal: PrincipalFilter = None,
    scope_id: ScopeFilter = None,
    history: Annotated[
        bool, typer.Option("--all", help="Also list superseded, forgotten and pruned items.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Show canonical memory as it stood at a position or time."""
    from memory_ledger.replay.timetravel import as_of, memory_record

    with common.user_errors():
        namespace = optional_namespace(tenant, principal, scope_id)
        parsed = parse_point(point)
        with common.open_for_audit(ctx, store) as engine:
            total = parsed if isinstance(parsed, int) else engine.head
            with (
                common.progress("replaying", total) as on_page,
                as_of(engine, parsed, occurred=occurred, on_page=on_page) as past,
            ):
                rows = past.memories(namespace, include_history=history)
                described = past.describe()
    if as_json:
        print_json({**described, "memories": [memory_record(r) for r in rows]})
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
            clock(row["occurred_at"]),
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
            occurred = when(t.occurred_at) or "-"
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
    ctx: typer.Context,
    memory_id: Annotated[
        str,
        typer.Argument(metavar="MEMORY_ID", help="Memory id (or a unique prefix of one)."),
    ],
    store: StoreOption = None,
    fmt: Annotated[
        str, typer.Option("--format", help="text, json or mermaid (a Markdown diagram).")
    ] = "text",
    as_json: JsonOption = False,
) -> None:
    """Show the lineage of a memory: evidence, candidate, extractor, decision, later use."""
    from memory_ledger.replay.lineage import explain, render_mermaid

    with common.user_errors():
        if fmt not in ("text", "json", "mermaid"):
            msg = f"unknown --format {fmt!r}; use text, json or mermaid"
            raise ValueError(msg)
        with common.open_for_audit(ctx, store) as engine:
            lineage = explain(engine, memory_id)
    if as_json or fmt == "json":
        print_json(lineage)
    elif fmt == "mermaid":
        sys.stdout.write(render_mermaid(lineage))
        sys.stdout.flush()
    else:
        out.print(_explain_tree(lineage), highlight=False)


@app.command("export")
def export_command(
    ctx: typer.Context,
    keep: Annotated[
        Path, typer.Option("--out", metavar="DIR", help="Folder to write (new or empty).")
    ],
    store: StoreOption = None,
    fmt: Annotated[str, typer.Option("--format", help="parquet or jsonl.")] = "parquet",
    to: Annotated[
        int | None, typer.Option("--to", min=0, help="Export the state at this position.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Write into a non-empty folder.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Export events and every read model as Parquet or JSON Lines files (+ manifest.json)."""
    from memory_ledger.replay.export import export_store

    with common.user_errors():
        if fmt not in ("parquet", "jsonl"):
            msg = f"unknown --format {fmt!r}; use parquet or jsonl"
            raise ValueError(msg)
        with common.open_for_audit(ctx, store) as engine:
            report = export_store(
                engine, keep, fmt="parquet" if fmt == "parquet" else "jsonl", to=to, force=force
            )
    if as_json:
        print_json(report)
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
    ctx: typer.Context,
    keep: Annotated[
        Path,
        typer.Option("--out", metavar="DIR", help="Backup folder to create (new or empty)."),
    ],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Take a consistent, compacted copy of the ledger (safe while a host writes)."""
    from memory_ledger.replay.backup import backup_store

    with common.user_errors(), common.open_for_audit(ctx, store) as engine:
        report = backup_store(engine, keep)
    if as_json:
        print_json(report)
        return
    out.print(
        f"backup of positions 1..{report.manifest.position} written to {report.out} "
        f"({report.bytes:,} bytes, {report.seconds:.2f} s)",
        highlight=False,
    )


@app.command("restore")
def restore_command(
    backup: Annotated[
        Path,
        typer.Argument(metavar="BACKUP_DIR", help="A folder written by memory-ledger backup."),
    ],
    store: Annotated[
        Path,
        typer.Option(
            "--store", metavar="DIR", help="New store folder to restore into (new or empty)."
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Restore a backup into a new store folder and verify its hash chain."""
    from memory_ledger.replay.backup import restore_store

    with common.user_errors():
        report = restore_store(backup, store)
    if as_json:
        print_json(report)
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


@app.command("stats")
def stats_command(
    ctx: typer.Context, store: StoreOption = None, as_json: JsonOption = False
) -> None:
    """Counts per event type, namespaces, sessions, memories, positions and file sizes."""
    from memory_ledger.replay.stats import store_stats

    with common.user_errors(), common.open_for_audit(ctx, store) as engine:
        report = store_stats(engine)
    if as_json:
        print_json(report)
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
        ("first recorded", when(report.first_recorded_at)),
        ("last recorded", when(report.last_recorded_at)),
        ("ledger file", f"{size(report.ledger_bytes)} ({size(report.ledger_used_bytes)} used)"),
        ("total on disk", size(report.total_bytes)),
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
            size(slot.bytes),
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
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            metavar="FILE",
            envvar="MEMORY_LEDGER_CONFIG",
            help=f"Settings file (TOML, its memory table). Default: ./{CONFIG_FILE} when it "
            "exists in the current directory (the CLI looks there; the library reads only a file "
            "it is given). Its recall_k and store_dir are the defaults of -k and --store.",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Event-sourced long-term memory for AI agents: ledger, projections, replay.

    Settings come from --config FILE, else from memory-ledger.toml in the current directory
    when it exists (the CLI looks there). Exit status: 0 ok, 1 a check failed or a turn's
    extraction is pending, 2 an error (one line on stderr, never a traceback).
    """
    ctx.obj = config
    library = logging.getLogger("memory_ledger")
    if not any(isinstance(h, logging.NullHandler) for h in library.handlers):
        # The commands report what matters once, in their own words (e.g. recall's
        # fallback to lexical); the library's retry warnings would repeat it every few s.
        library.addHandler(logging.NullHandler())


def main() -> None:
    """Console-script entry point. A closed output pipe (``| head``) ends quietly."""
    try:
        app()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
