"""The commands that re-run the ledger: ``replay`` (rebuild the read models, or check
them), ``as-of`` (canonical memory at an earlier point), and the archive commands
``export``, ``backup`` and ``restore``, and ``migrate`` (an LMDB ledger into PostgreSQL,
or a store to keyed ids)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.replay.audit.points import parse_point
from memory_ledger.replay.cli import common
from memory_ledger.replay.cli.common import (
    JsonOption,
    LedgerOption,
    MasterKeyFileOption,
    PrincipalFilter,
    ScopeFilter,
    StoreOption,
    TenantFilter,
    clock,
    optional_namespace,
    print_json,
)
from memory_ledger.replay.cli.terminal_text import Table, escape

__all__ = [
    "as_of_command",
    "migrate_command",
    "backup_command",
    "export_command",
    "replay_command",
    "restore_command",
]

PointArgument = Annotated[
    str,
    typer.Argument(
        metavar="POSITION|TIMESTAMP",
        help="A ledger position, or an ISO 8601 time with a zone (Z or +02:00; a date alone "
        "= end of that day, UTC).",
    ),
]
OccurredOption = Annotated[
    bool,
    typer.Option(
        "--occurred", help="Read the timestamp as conversation (occurred) time, not recorded."
    ),
]


def replay_command(
    ctx: typer.Context,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
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
    from memory_ledger.replay.audit.rebuild import check_projections, rebuild_projections

    with common.user_errors(), common.open_for_audit(ctx, store) as engine:
        if check and keep is not None:
            msg = "--check compares in a scratch file; drop --out, or run without --check"
            raise InvalidArgumentError(msg, parameter="--check")
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
            common.out.print(
                f"ok: {len(report.checked)} tables and views of {report.live_path} match a "
                f"rebuild from the ledger at position {report.position} "
                f"({report.seconds:.2f} s)",
                highlight=False,
                markup=False,
            )
        for diff in report.differences:
            common.err.print(
                f"[bold red]differs:[/] {diff.name}: live {diff.live_rows} rows, rebuilt "
                f"{diff.rebuilt_rows}; {diff.only_live} only in live, {diff.only_rebuilt} "
                "only in the rebuild",
                highlight=False,
                soft_wrap=True,
            )
            for example in diff.examples:
                common.err.print(f"  {escape(example)}", highlight=False, soft_wrap=True)
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
        common.out.print(table)
    if check and not report.ok:
        raise typer.Exit(1)


def as_of_command(
    ctx: typer.Context,
    point: PointArgument,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
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
    from memory_ledger.replay.audit.timetravel import as_of, memory_record

    with common.user_errors():
        namespace = optional_namespace(tenant, principal, scope_id)
        parsed = parse_point(point, "TIMESTAMP")
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
    common.out.print(table)
    if not rows:
        common.err.print("no memories at that point", highlight=False)


def export_command(
    ctx: typer.Context,
    keep: Annotated[
        Path, typer.Option("--out", metavar="DIR", help="Folder to write (new or empty).")
    ],
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="parquet or jsonl; or interchange: one namespace's memories with their "
            "versions as one JSON Lines file (--out FILE; needs --tenant, --principal and "
            "--scope-id).",
        ),
    ] = "parquet",
    to: Annotated[
        int | None, typer.Option("--to", min=0, help="Export the state at this position.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Write into a non-empty folder.")] = False,
    tenant: TenantFilter = None,
    principal: PrincipalFilter = None,
    scope_id: ScopeFilter = None,
    as_json: JsonOption = False,
) -> None:
    """Export events and every read model as Parquet or JSON Lines files (+ manifest.json),
    or one namespace's memories in the interchange form (--format interchange)."""
    from memory_ledger.replay.audit.export import export_store

    if fmt == "interchange":
        from memory_ledger.replay.cli.imports import export_interchange_file

        export_interchange_file(ctx, keep, store, to, force, (tenant, principal, scope_id), as_json)
        return
    with common.user_errors():
        if fmt not in ("parquet", "jsonl"):
            msg = f"unknown --format {fmt!r}; use parquet, jsonl or interchange"
            raise InvalidArgumentError(msg, parameter="--format")
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
    common.out.print(table)


def backup_command(
    ctx: typer.Context,
    keep: Annotated[
        Path,
        typer.Option("--out", metavar="DIR", help="Backup folder to create (new or empty)."),
    ],
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Take a consistent, compacted copy of the ledger and its data keys (safe while a host
    writes; never the master key)."""
    from memory_ledger.replay.audit.backup import backup_store

    with common.user_errors(), common.open_for_audit(ctx, store) as engine:
        report = backup_store(engine, keep)
    if as_json:
        print_json(report)
        return
    manifest = report.manifest
    keys = ""
    if manifest.master_key_id is not None:
        keys = (
            f"; {manifest.data_keys} data key(s) wrapped by master key {manifest.master_key_id}"
            f" (keys of {manifest.erased_keys} erased namespace(s) are not in it; keep the "
            "master key elsewhere)"
        )
    common.out.print(
        f"backup of positions 1..{manifest.position} written to {report.out} "
        f"({report.bytes:,} bytes, {report.seconds:.2f} s){keys}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


def restore_command(
    ctx: typer.Context,
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
    master_key_file: MasterKeyFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Restore a backup (ledger and data keys) into a new store folder and verify its hash
    chain (an encrypted backup: with its master key when configured, else without)."""
    from memory_ledger.replay.audit.backup import restore_store

    with common.user_errors():
        report = restore_store(backup, store, config=common.audit_config(ctx))
    if as_json:
        print_json(report)
    elif report.ok:
        common.out.print(
            f"restored positions 1..{report.verify.head} into {report.store}; hash chain "
            "verified (projections are rebuilt when the store is opened)",
            highlight=False,
            markup=False,
        )
    else:
        common.err.print(
            f"[bold red]restore failed verification:[/] {escape(report.problem or '')}",
            highlight=False,
            soft_wrap=True,
        )
    if not report.ok:
        raise typer.Exit(1)


def migrate_command(
    store: Annotated[
        Path,
        typer.Option("--store", metavar="DIR", help="Store folder to migrate."),
    ],
    ctx: typer.Context,
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            metavar="URL",
            help=(
                "Copy the store's LMDB ledger into this PostgreSQL ledger (empty, or an "
                "interrupted copy). Without it: give the store keyed ids (id format 2)."
            ),
        ),
    ] = None,
    ledger: LedgerOption = None,
    master_key_file: common.MasterKeyFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Without --to: give a store written before keyed digests (id format 1) keyed ids: its
    ledger is rewritten, verified and swapped in, its read models rebuilt (nothing to do for
    a format-2 store; rerun after an interruption). With --ledger URL: that PostgreSQL
    ledger is rewritten into new tables of its database and swapped in, in one transaction
    (every other host stopped; they delete their projections/ before restarting). With
    --to: copy a store's LMDB ledger into PostgreSQL (positions, bytes and hashes kept),
    then verify the copy. Exit 1 if the result does not verify."""
    if to is None:
        _migrate_ids(store, ctx, as_json=as_json)
        return
    from memory_ledger.replay.audit.migrate import migrate_store

    with common.user_errors():
        report = migrate_store(store, to, config=common.audit_config(ctx))
    if as_json:
        print_json(report)
    elif report.ok:
        common.out.print(
            f"copied {report.copied} records into {report.target} (positions 1..{report.head}"
            f"{f', resumed after {report.resumed_after}' if report.resumed_after else ''}); "
            f"hash chain verified ({report.seconds:.2f} s)",
            highlight=False,
            markup=False,
        )
    else:
        common.err.print(
            f"[bold red]migration failed verification:[/] {escape(report.problem or '')}",
            highlight=False,
            soft_wrap=True,
        )
    if not report.ok:
        raise typer.Exit(1)


def _migrate_ids(store: Path, ctx: typer.Context, *, as_json: bool) -> None:
    """``migrate --store DIR`` without ``--to``: the id format step."""
    from memory_ledger.replay.audit.rekey import migrate_ids

    with common.user_errors():
        config = common.audit_config(ctx)
        if config.ledger:  # imported here: psycopg is needed by PostgreSQL ledgers only
            from memory_ledger.replay.audit.rekey_postgres import migrate_postgres_ids

            report = migrate_postgres_ids(store, config.ledger, config=config)
        else:
            report = migrate_ids(store, config=config)
    if as_json:
        print_json(report)
    elif not report.migrated:
        common.out.print(
            f"{report.store} already has keyed ids (id format {report.id_format_after}): "
            "nothing to do",
            highlight=False,
            markup=False,
        )
    else:
        done = "finished the interrupted swap of" if report.resumed else "rewrote"
        common.out.print(
            f"{done} {report.store}: id format {report.id_format_before} -> "
            f"{report.id_format_after}, positions 1..{report.head}, hash chain verified, "
            f"read models rebuilt ({report.seconds:.2f} s)",
            highlight=False,
            markup=False,
        )
