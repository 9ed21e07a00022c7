"""The audit commands: ``events`` (the ledger, filtered), ``verify`` (the hash chain),
``stats`` (counts and sizes) and ``explain`` (the lineage of one memory). They open an
existing store lexically and never create one."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import typer

from memory_ledger.ledger.errors import InvalidArgumentError
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
    print_json,
    size,
    when,
)
from memory_ledger.replay.cli.terminal_text import Table, escape

if TYPE_CHECKING:
    from memory_ledger.replay.audit.stats import StoreStats
from memory_ledger.replay.audit.points import parse_timestamp

__all__ = ["events", "explain_command", "stats_command", "verify"]


def events(
    ctx: typer.Context,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
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
    from memory_ledger.replay.audit.filters import EventFilter, describe_event, filter_events
    from memory_ledger.replay.audit.timeline import event_record, event_type

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
            since=parse_timestamp(since, "--since") if since else None,
            until=parse_timestamp(until, "--until") if until else None,
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
                    event_type(event),
                    str(getattr(event, "session_id", "") or ""),
                    str(t) if isinstance(t := getattr(event, "turn_id", None), int) else "",
                    clock(event.recorded_at, seconds=True),
                    describe_event(event),
                )
    common.out.print(table)


def verify(
    ctx: typer.Context,
    store: StoreOption = None,
    as_json: JsonOption = False,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
) -> None:
    """Walk the ledger's hash chain; exit 1 and name the first bad position on tampering.

    An encrypted store verifies without its master key too (the chain covers the sealed
    bytes): sealed payloads are then checked for their envelope only. The ledger is walked
    alone first, so a damaged record that would stop the store from opening (any byte of
    its header, hash or payload) is named the same way, with or without the key.
    """
    from memory_ledger.replay.audit.verify import verify_path

    with common.user_errors():
        config = common.audit_config(ctx)
        report = verify_path(common.store_folder(store, config), config=config)
    if as_json:
        print_json(report)
    elif report.ok:
        sealed = ""
        if report.sealed and report.opened:
            sealed = f"; {report.sealed} sealed payloads opened, {report.erased} of them erased"
        elif report.sealed:
            sealed = (
                f"; {report.sealed} sealed payloads checked for their envelope only "
                "(no master key configured)"
            )
        common.out.print(
            f"ok: {report.checked} records, hash chain intact, positions 1..{report.head}" + sealed,
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    else:
        common.err.print(
            f"[bold red]{'damaged' if report.damaged else 'tampered'}:[/] "
            f"{escape(report.problem or '')}",
            highlight=False,
            soft_wrap=True,
        )
    if not report.ok:
        raise typer.Exit(1)


def stats_command(
    ctx: typer.Context,
    store: StoreOption = None,
    as_json: JsonOption = False,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
) -> None:
    """Counts per event type, namespaces, sessions, memories, positions and file sizes."""
    from memory_ledger.replay.audit.stats import store_stats

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
    if report.erased_sessions:
        summary.add_row("sessions of erased namespaces", str(report.erased_sessions))
    common.out.print(summary)
    if report.encryption is not None:
        common.out.print(_encryption_table(report.encryption))
    by_type = Table(title="events by type")
    by_type.add_column("type")
    by_type.add_column("count", justify="right")
    for name, count in report.events_by_type.items():
        by_type.add_row(name, str(count))
    common.out.print(by_type)
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
    common.out.print(namespaces)
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
    common.out.print(slots)
    if report.vectors:
        common.out.print(vector_health_table(report))


def _encryption_table(stats: Any) -> Table:
    """The encryption part of ``stats`` (an ``EncryptionStats``): never a key, only its id."""
    table = Table(title="encryption at rest", show_header=False)
    table.add_column("what")
    table.add_column("value")
    table.add_row("encryption", stats.summary)
    if stats.master_key_id is not None:
        table.add_row("master key id", stats.master_key_id)
    table.add_row("data keys", f"{stats.live_keys} live, {stats.erased_keys} erased")
    table.add_row(
        "sealed records", f"{stats.sealed_records} ({stats.erased_records} erased for good)"
    )
    table.add_row("key store", stats.key_store)
    return table


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
        for entry in origin.context:
            branch.add(f"[magenta]{entry.type}[/] @{entry.position}: {escape(entry.detail)}")
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


def explain_command(
    ctx: typer.Context,
    memory_id: Annotated[
        str,
        typer.Argument(metavar="MEMORY_ID", help="Memory id (or a unique prefix of one)."),
    ],
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
    fmt: Annotated[
        str, typer.Option("--format", help="text, json or mermaid (a Markdown diagram).")
    ] = "text",
    as_json: JsonOption = False,
) -> None:
    """Show the lineage of a memory: evidence, candidate, extractor, decision, later use."""
    from memory_ledger.replay.audit.lineage import explain, render_mermaid

    with common.user_errors():
        if fmt not in ("text", "json", "mermaid"):
            msg = f"unknown --format {fmt!r}; use text, json or mermaid"
            raise InvalidArgumentError(msg, parameter="--format")
        with common.open_for_audit(ctx, store) as engine:
            lineage = explain(engine, memory_id)
    if as_json or fmt == "json":
        print_json(lineage)
    elif fmt == "mermaid":
        sys.stdout.write(render_mermaid(lineage))
        sys.stdout.flush()
    else:
        common.out.print(_explain_tree(lineage), highlight=False)


def vector_health_table(report: StoreStats) -> Table:
    """The ``vectors`` part of ``memory-ledger stats`` as a table (one row per model)."""
    table = Table(title="semantic vectors (maintenance health)")
    for column in ("model", "state", "coverage", "pending", "lag", "failures", "last refresh"):
        table.add_column(column)
    for health in report.vectors:
        table.add_row(
            health.model or "",
            health.state,
            ", ".join(f"{c.field} {c.embedded}/{c.eligible}" for c in health.coverage),
            str(health.pending),
            f"{health.lag_positions} positions",
            "unknown" if health.failures is None else str(health.failures),
            "" if health.last_refresh_at is None else health.last_refresh_at.isoformat(),
        )
    return table
